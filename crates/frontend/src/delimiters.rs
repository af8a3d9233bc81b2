//! A scan of the source text for what keeps it from being split into tokens:
//! an unclosed, mismatched or unexpected closing delimiter, an unterminated
//! string, character literal or block comment, or a character that starts
//! no token. The tokenizer (`proc_macro2`) only says that it failed and
//! where it stopped; this scan says what is wrong and points at the cause,
//! the way rustc does (the opening delimiter that is never closed, with the
//! closing one that does not match it).
//!
//! The scan knows just enough of the lexical grammar to see delimiters
//! where the tokenizer sees them: line and (nested) block comments, strings
//! with escapes, raw strings (`r#"..."#`), byte and C strings, character
//! literals and lifetimes. It is one pass with an explicit stack, so no
//! input can make it recurse; it never panics.

use crate::Diagnostic;
use autobatch_types::Loc;

/// What the scan found: the first structural problem and the first
/// character that starts no token, each where it was detected.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub problem: Option<Problem>,
    pub unknown: Option<Unknown>,
}

/// An unclosed, mismatched or unexpected delimiter, or an unterminated
/// literal or comment.
#[derive(Debug)]
pub(crate) struct Problem {
    pub diagnostic: Diagnostic,
    /// Where a tokenizer reading from the start stops because of it: the
    /// closing delimiter, the start of the literal, or the end of the file
    /// for a delimiter never closed.
    pub detected: Loc,
}

/// A character that starts no token (`“`, `` ` ``, `\`).
#[derive(Debug)]
pub(crate) struct Unknown {
    pub at: Loc,
    pub ch: char,
}

impl Scan {
    /// The diagnostic for source text that the tokenizer rejected at
    /// `stopped` (where it stopped, as it reports it): the first of the
    /// scan's findings, or a description of the token at `stopped`.
    pub(crate) fn tokenizer_error(self, source: &str, stopped: Loc) -> Diagnostic {
        let unknown = self.unknown.map(|u| (u.at, unknown_start(&u)));
        let problem = self.problem.map(|p| (p.detected, p.diagnostic));
        match (problem, unknown) {
            (Some((p_at, p)), Some((u_at, u))) => {
                if u_at < p_at {
                    u
                } else {
                    p
                }
            }
            (Some((_, d)), None) | (None, Some((_, d))) => d,
            (None, None) => unreadable_token(source, stopped),
        }
    }
}

/// Scans `text` (the whole program).
pub(crate) fn scan(text: &str) -> Scan {
    let mut scanner = Scanner {
        cursor: Cursor::new(text),
        stack: Vec::new(),
        misindented: Vec::new(),
        last_outer_pair: None,
        unknown: None,
    };
    let problem = scanner.run().err();
    Scan {
        problem,
        unknown: scanner.unknown,
    }
}

/// Characters the tokenizer reads as punctuation.
const PUNCTUATION: &str = "~!@#$%^&*-=+|;:,<.>/?";

/// Position in the text: the byte offset and the 1-based line and column
/// (columns count characters, as the tokenizer's do).
struct Cursor<'a> {
    text: &'a str,
    offset: usize,
    line: u32,
    column: u32,
    /// Byte offset of the start of the current line.
    line_start: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Cursor<'a> {
        Cursor {
            text,
            offset: 0,
            line: 1,
            column: 1,
            line_start: 0,
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.offset..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_nth(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    fn starts_with(&self, s: &str) -> bool {
        self.rest().starts_with(s)
    }

    fn loc(&self) -> Loc {
        Loc::new(self.line, self.column)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.offset += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
            self.line_start = self.offset;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn bump_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.bump();
        }
    }

    /// The width of the current line's leading blanks.
    fn indentation(&self) -> usize {
        self.text[self.line_start..]
            .chars()
            .take_while(|c| *c == ' ' || *c == '\t')
            .count()
    }

    /// Whether only blanks precede the cursor on its line.
    fn first_on_line(&self) -> bool {
        self.text[self.line_start..self.offset].trim().is_empty()
    }
}

/// An opening delimiter not closed yet.
#[derive(Clone, Copy, Debug)]
struct Open {
    ch: char,
    at: Loc,
    /// The indentation of its line.
    indentation: usize,
}

/// A `{`, and the `}` that closes it at a different indentation (on a line
/// of its own): a hint of where a `}` went missing.
#[derive(Clone, Copy)]
struct Pair {
    open: Loc,
    close: Loc,
}

struct Scanner<'a> {
    cursor: Cursor<'a>,
    stack: Vec<Open>,
    /// Brace pairs whose closing brace is indented unlike the line of its
    /// opening brace, in the order they close.
    misindented: Vec<Pair>,
    /// The last brace pair closed at the outermost level.
    last_outer_pair: Option<Pair>,
    unknown: Option<Unknown>,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

fn is_blank(c: char) -> bool {
    c.is_whitespace() || c == '\u{200e}' || c == '\u{200f}'
}

fn closer_of(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

fn opener_of(close: char) -> char {
    match close {
        ')' => '(',
        ']' => '[',
        _ => '{',
    }
}

/// One character wide, at `at`.
fn one(at: Loc) -> Loc {
    Loc::new(at.line, at.column + 1)
}

impl Scanner<'_> {
    /// Scans to the end, or to the first problem.
    fn run(&mut self) -> Result<(), Problem> {
        while let Some(c) = self.cursor.peek() {
            let at = self.cursor.loc();
            match c {
                '/' if self.cursor.starts_with("//") => self.cursor.bump_while(|c| c != '\n'),
                '/' if self.cursor.starts_with("/*") => self.block_comment(at)?,
                '"' => self.cooked_string(at)?,
                '\'' => self.quote(at, true)?,
                '(' | '[' | '{' => {
                    let indentation = self.cursor.indentation();
                    self.stack.push(Open {
                        ch: c,
                        at,
                        indentation,
                    });
                    self.cursor.bump();
                }
                ')' | ']' | '}' => self.close(c, at)?,
                c if is_ident_continue(c) => self.word(at)?,
                c if is_blank(c) || PUNCTUATION.contains(c) => {
                    self.cursor.bump();
                }
                ch => {
                    if self.unknown.is_none() {
                        self.unknown = Some(Unknown { at, ch });
                    }
                    self.cursor.bump();
                }
            }
        }
        match self.stack.last() {
            None => Ok(()),
            Some(open) => Err(self.unclosed(*open)),
        }
    }

    /// A closing delimiter `c` at `at`: closes the innermost open delimiter
    /// if it matches, else is the problem.
    fn close(&mut self, c: char, at: Loc) -> Result<(), Problem> {
        let wanted = opener_of(c);
        let Some(top) = self.stack.last().copied() else {
            return Err(self.unexpected(c, at, None));
        };
        if top.ch == wanted {
            let closes_alone = self.cursor.first_on_line();
            let indentation = self.cursor.indentation();
            self.stack.pop();
            self.cursor.bump();
            let pair = Pair {
                open: top.at,
                close: at,
            };
            if c == '}' && closes_alone && indentation != top.indentation {
                self.misindented.push(pair);
            }
            if self.stack.is_empty() && c == '}' {
                self.last_outer_pair = Some(pair);
            }
            return Ok(());
        }
        let meant = self.stack.iter().rev().skip(1).find(|o| o.ch == wanted);
        match meant {
            // A `)` or `]` in a block that no open `(` or `[` awaits is one
            // too many; anything else closes the wrong delimiter.
            None if top.ch == '{' => Err(self.unexpected(c, at, Some(top))),
            _ => Err(mismatched(c, at, top, meant.copied())),
        }
    }

    /// The diagnostic for a closing delimiter nothing open awaits.
    fn unexpected(&self, c: char, at: Loc, nearest: Option<Open>) -> Problem {
        let mut diagnostic = Diagnostic::new(
            format!("unexpected closing delimiter: `{c}`"),
            at,
            one(at),
            "unexpected closing delimiter",
        );
        match (nearest, self.last_outer_pair) {
            (Some(open), _) => {
                diagnostic = diagnostic
                    .with_secondary(open.at, one(open.at), "the nearest open delimiter")
                    .with_note(format!(
                        "no `{}` is open here: remove the `{c}`, or add the `{}` it closes",
                        opener_of(c),
                        opener_of(c)
                    ));
            }
            (None, Some(pair)) => {
                diagnostic = diagnostic
                    .with_secondary(pair.open, one(pair.open), "this opening brace...")
                    .with_secondary(pair.close, one(pair.close), "...matches this closing brace");
            }
            (None, None) => {}
        }
        Problem {
            diagnostic,
            detected: at,
        }
    }

    /// The diagnostic for delimiters still open at the end of the file: at
    /// the innermost, with the others and a brace pair whose indentation
    /// suggests where a `}` is missing.
    fn unclosed(&self, innermost: Open) -> Problem {
        let mut diagnostic = Diagnostic::new(
            format!("unclosed delimiter `{}`", innermost.ch),
            innermost.at,
            one(innermost.at),
            "unclosed delimiter",
        )
        .with_note(format!(
            "the file ends before the `{}` that closes it",
            closer_of(innermost.ch)
        ));
        for open in self.stack.iter().rev().skip(1).take(3) {
            diagnostic = diagnostic.with_secondary(open.at, one(open.at), "unclosed delimiter");
        }
        let outermost = self.stack[0].at;
        if let Some(pair) = self.misindented.iter().find(|p| p.open > outermost) {
            diagnostic = diagnostic
                .with_secondary(
                    pair.open,
                    one(pair.open),
                    "this delimiter might not be properly closed...",
                )
                .with_secondary(
                    pair.close,
                    one(pair.close),
                    "...as it matches this but it has different indentation",
                );
        }
        Problem {
            diagnostic,
            detected: self.cursor.loc(),
        }
    }

    /// The suffix of a literal that has just ended (`"x"suffix`): a word
    /// that belongs to the literal, not the start of another one.
    fn suffix(&mut self) {
        if self.cursor.peek().is_some_and(is_ident_start) {
            self.cursor.bump_while(is_ident_continue);
        }
    }

    /// A `/* ... */` comment starting at `at`; comments nest.
    fn block_comment(&mut self, at: Loc) -> Result<(), Problem> {
        self.cursor.bump();
        self.cursor.bump();
        let mut depth = 1usize;
        while depth > 0 {
            if self.cursor.starts_with("/*") {
                depth += 1;
                self.cursor.bump();
            } else if self.cursor.starts_with("*/") {
                depth -= 1;
                self.cursor.bump();
            }
            if self.cursor.bump().is_none() {
                let diagnostic = Diagnostic::new(
                    "unterminated block comment",
                    at,
                    Loc::new(at.line, at.column + 2),
                    "the comment starts here and is never closed",
                )
                .with_note("end it with `*/` (block comments nest: every `/*` needs its own `*/`)");
                return Err(Problem {
                    diagnostic,
                    detected: at,
                });
            }
        }
        Ok(())
    }

    /// A string with escapes whose opening `"` is next; `at` is where the
    /// literal starts (its prefix, if any).
    fn cooked_string(&mut self, at: Loc) -> Result<(), Problem> {
        self.cursor.bump();
        loop {
            match self.cursor.bump() {
                Some('"') => {
                    self.suffix();
                    return Ok(());
                }
                Some('\\') => {
                    self.cursor.bump();
                }
                Some(_) => {}
                None => {
                    return Err(unterminated(
                        at,
                        "unterminated double quote string",
                        "end it with `\"`".to_string(),
                    ))
                }
            }
        }
    }

    /// A raw string whose `#`s (`hashes` of them) and `"` are next.
    fn raw_string(&mut self, at: Loc, hashes: usize) -> Result<(), Problem> {
        for _ in 0..=hashes {
            self.cursor.bump();
        }
        let end = format!("\"{}", "#".repeat(hashes));
        loop {
            if self.cursor.starts_with(&end) {
                for _ in 0..=hashes {
                    self.cursor.bump();
                }
                self.suffix();
                return Ok(());
            }
            if self.cursor.bump().is_none() {
                return Err(unterminated(
                    at,
                    "unterminated raw string",
                    format!("this raw string should be terminated with `{end}`"),
                ));
            }
        }
    }

    /// A `'`: a character literal, a lifetime (if `lifetime_allowed`), or
    /// a literal that is never closed.
    fn quote(&mut self, at: Loc, lifetime_allowed: bool) -> Result<(), Problem> {
        let first = self.cursor.peek_nth(1);
        let second = self.cursor.peek_nth(2);
        let unclosed = || {
            unterminated(
                at,
                "unterminated character literal",
                "end it with `'`".to_string(),
            )
        };
        if first == Some('\\') {
            // `'\n'`, `'\x7f'`, `'\u{1F600}'`: the closing `'` follows
            // within a few characters on the same line.
            self.cursor.bump();
            self.cursor.bump();
            if self.cursor.bump().is_none_or(|c| c == '\n') {
                return Err(unclosed());
            }
            for _ in 0..10 {
                match self.cursor.peek() {
                    Some('\'') => {
                        self.cursor.bump();
                        self.suffix();
                        return Ok(());
                    }
                    Some('\n') | None => break,
                    Some(_) => {
                        self.cursor.bump();
                    }
                }
            }
            return Err(unclosed());
        }
        if second == Some('\'') && first.is_some() {
            for _ in 0..3 {
                self.cursor.bump();
            }
            self.suffix();
            return Ok(());
        }
        if lifetime_allowed && first.is_some_and(is_ident_start) {
            self.cursor.bump();
            self.cursor.bump_while(is_ident_continue);
            if self.cursor.peek() == Some('\'') {
                return Err(unterminated(
                    at,
                    "character literal may only contain one character",
                    "a character literal holds exactly one character".to_string(),
                ));
            }
            return Ok(());
        }
        Err(unclosed())
    }

    /// An identifier, keyword or number starting at `at`, or the prefix
    /// of a raw, byte or C string or of a byte literal.
    fn word(&mut self, at: Loc) -> Result<(), Problem> {
        let start = self.cursor.offset;
        self.cursor.bump_while(is_ident_continue);
        let word = &self.cursor.text[start..self.cursor.offset];
        match (word, self.cursor.peek()) {
            ("r" | "br" | "cr", Some('"' | '#')) => {
                let hashes = self.cursor.rest().chars().take_while(|c| *c == '#').count();
                if self.cursor.peek_nth(hashes) == Some('"') {
                    return self.raw_string(at, hashes);
                }
                // `r#name`, a raw identifier.
                if word == "r" && hashes == 1 && self.cursor.peek_nth(1).is_some_and(is_ident_start)
                {
                    self.cursor.bump();
                    self.cursor.bump_while(is_ident_continue);
                }
                Ok(())
            }
            ("b" | "c", Some('"')) => self.cooked_string(at),
            ("b", Some('\'')) => self.quote(at, false),
            _ => Ok(()),
        }
    }
}

/// The diagnostic for a closing delimiter `c` at `at` that does not close
/// the innermost open delimiter `top`; `meant` is an outer one it closes.
fn mismatched(c: char, at: Loc, top: Open, meant: Option<Open>) -> Problem {
    let mut diagnostic = Diagnostic::new(
        format!("mismatched closing delimiter: `{c}`"),
        top.at,
        one(top.at),
        "unclosed delimiter",
    )
    .with_secondary(at, one(at), "mismatched closing delimiter")
    .with_note(format!(
        "the `{}` is never closed: add its `{}` before the `{c}`",
        top.ch,
        closer_of(top.ch)
    ));
    if let Some(meant) = meant {
        diagnostic = diagnostic.with_secondary(
            meant.at,
            one(meant.at),
            "closing delimiter possibly meant for this",
        );
    }
    Problem {
        diagnostic,
        detected: at,
    }
}

/// The diagnostic for a literal starting at `at` that is never closed.
fn unterminated(at: Loc, message: &str, note: String) -> Problem {
    Problem {
        diagnostic: Diagnostic::new(message, at, one(at), "starts here and is never closed")
            .with_note(note),
        detected: at,
    }
}

/// Characters often pasted for ASCII ones: the character, its name, and
/// the character meant.
const LOOKALIKES: &[(char, &str, char)] = &[
    ('“', "Left Double Quotation Mark", '"'),
    ('”', "Right Double Quotation Mark", '"'),
    ('„', "Double Low-9 Quotation Mark", '"'),
    ('‘', "Left Single Quotation Mark", '\''),
    ('’', "Right Single Quotation Mark", '\''),
    ('−', "Minus Sign", '-'),
    ('–', "En Dash", '-'),
    ('—', "Em Dash", '-'),
    ('×', "Multiplication Sign", '*'),
    ('÷', "Division Sign", '/'),
    ('；', "Fullwidth Semicolon", ';'),
    ('，', "Fullwidth Comma", ','),
    ('：', "Fullwidth Colon", ':'),
    ('（', "Fullwidth Left Parenthesis", '('),
    ('）', "Fullwidth Right Parenthesis", ')'),
    ('＝', "Fullwidth Equals Sign", '='),
];

/// The diagnostic for a character that starts no token.
fn unknown_start(unknown: &Unknown) -> Diagnostic {
    let ch = unknown.ch;
    let shown = if ch.is_control() {
        format!("U+{:04X}", ch as u32)
    } else {
        format!("`{ch}` (U+{:04X})", ch as u32)
    };
    let diagnostic = Diagnostic::new(
        format!("unknown start of token: {shown}"),
        unknown.at,
        one(unknown.at),
        "no token starts with this character",
    );
    match LOOKALIKES.iter().find(|(c, _, _)| *c == ch) {
        Some((_, name, meant)) => diagnostic.with_note(format!(
            "`{ch}` ({name}) looks like `{meant}`, but it is not: write `{meant}`"
        )),
        None => diagnostic,
    }
}

/// The diagnostic for a token the tokenizer could not read at `at` when the
/// scan found nothing: a literal it could not read (a bad escape or number).
fn unreadable_token(source: &str, at: Loc) -> Diagnostic {
    let rest: String = source
        .lines()
        .nth(at.line.saturating_sub(1) as usize)
        .unwrap_or("")
        .chars()
        .skip(at.column.saturating_sub(1) as usize)
        .collect();
    let (message, note) = match rest.chars().next() {
        Some('"') => (
            "invalid string literal",
            "the escapes in a string are \\n \\r \\t \\\\ \\0 \\' \\\" \\x7F and \\u{...}",
        ),
        Some('\'') => (
            "invalid character literal",
            "a character literal holds one character or one escape",
        ),
        Some(c) if c.is_ascii_digit() => (
            "invalid number literal",
            "a number is digits with an optional `.`, exponent and type suffix (`1.5e3`, `7_i64`)",
        ),
        _ => (
            "this text cannot be split into tokens",
            "the program must use Rust's tokens",
        ),
    };
    Diagnostic::new(
        message,
        at,
        one(at),
        "cannot read the token that starts here",
    )
    .with_note(note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn problem(text: &str) -> Option<(String, Loc)> {
        scan(text)
            .problem
            .map(|p| (p.diagnostic.message, p.diagnostic.loc))
    }

    #[test]
    fn balanced_text_has_no_problem() {
        for text in [
            "fn f() { (a[1], b) }",
            "fn f() { let s = \"(\"; let c = '{'; let d = '\\''; }",
            "fn f<'a>(x: &'a i64) { 'outer: loop { break 'outer; } }",
            "/* ( /* nested ] */ { */ fn f() {}",
            "// ( unbalanced in a comment\nfn f() {}",
            "fn f() { r#\"(\"# ; r\"]\" ; br##\"{\"#\"## ; b'(' ; b\"[\" ; c\"{\" ; r#match }",
            "fn f() { '\\u{1F600}'; '\\x7f'; 'é'; }",
        ] {
            assert_eq!(problem(text), None, "{text}");
        }
    }

    #[test]
    fn delimiter_problems() {
        let at = |line, column| Loc::new(line, column);
        let cases = [
            (
                "fn f() {\n  let y = (x + 1;\n}\n",
                "mismatched closing delimiter: `}`",
                at(2, 11),
            ),
            (
                "fn f() {\n  let y = x + 1);\n}\n",
                "unexpected closing delimiter: `)`",
                at(2, 16),
            ),
            (
                "fn f() {\n  let y = (x + 1];\n}\n",
                "mismatched closing delimiter: `]`",
                at(2, 11),
            ),
            ("fn f() {\n  1\n", "unclosed delimiter `{`", at(1, 8)),
            (
                "fn f() { 1 }\n}",
                "unexpected closing delimiter: `}`",
                at(2, 1),
            ),
            (
                "fn f() {\n  \"abc;\n}\n",
                "unterminated double quote string",
                at(2, 3),
            ),
            (
                "fn f() {\n  /* x /* y */\n}\n",
                "unterminated block comment",
                at(2, 3),
            ),
            ("fn f() { r#\"x\" }", "unterminated raw string", at(1, 10)),
            (
                "fn f() { '\\n; }",
                "unterminated character literal",
                at(1, 10),
            ),
        ];
        for (text, message, loc) in cases {
            assert_eq!(problem(text), Some((message.to_string(), loc)), "{text}");
        }
    }

    /// Pieces that steer the scan into its corners.
    const PIECES: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "\"",
        "'",
        "\\",
        "/*",
        "*/",
        "//",
        "\n",
        " ",
        "r#\"",
        "\"#",
        "r##\"",
        "b'",
        "b\"",
        "c\"",
        "br#\"",
        "'a",
        "'a'",
        "'\\n'",
        "'\\u{41}'",
        "r#x",
        "#",
        "fn f() { 1 }",
        "let",
        "x",
        "1.5",
        "“",
        "é",
        "\u{200e}",
        "\r\n",
        "\t",
        ";",
        ",",
    ];

    const PROGRAMS: &[&str] = &[
        "fn f(x: [f64; 3]) -> f64 {\n    let mut s = 0.0; // sum\n    for i in 0..3 { s += x[i]; }\n    /* done */ s\n}\n",
        "extern \"autobatch\" { static X: [f64; N]; }\nfn g(n: i64) -> i64 { if n < 2 { n } else { g(n - 1) + g(n - 2) } }\n",
    ];

    fn random_text(random: &mut ChaCha8Rng) -> String {
        if random.gen_range(0..2) == 0 {
            let pieces = 1 + random.gen_range(0..40);
            (0..pieces)
                .map(|_| PIECES[random.gen_range(0..PIECES.len())])
                .collect()
        } else {
            let mut chars: Vec<char> = PROGRAMS[random.gen_range(0..PROGRAMS.len())]
                .chars()
                .collect();
            for _ in 0..1 + random.gen_range(0..4) {
                let at = random.gen_range(0..chars.len() + 1);
                match random.gen_range(0..3) {
                    0 if at < chars.len() => {
                        chars.remove(at);
                    }
                    _ => {
                        let piece = PIECES[random.gen_range(0..PIECES.len())];
                        chars.splice(at..at, piece.chars());
                    }
                }
            }
            chars.into_iter().collect()
        }
    }

    /// On thousands of random and mutated texts the scan never panics, and
    /// it agrees with the tokenizer: no problem where the tokenizer reads
    /// the text, and where the tokenizer stops at a delimiter, the scan
    /// detects its problem there too. The parser's errors on the texts the
    /// tokenizer reads are worded and placed without panicking either.
    #[test]
    fn random_texts_never_panic_and_agree_with_the_tokenizer() {
        let mut random = ChaCha8Rng::seed_from_u64(45);
        for _ in 0..5000 {
            let text = random_text(&mut random);
            let found = scan(&text);
            match text.parse::<proc_macro2::TokenStream>() {
                Ok(_) => {
                    assert!(found.problem.is_none(), "{text:?}: {:?}", found.problem);
                    // The parser's errors on the same texts are placed without panicking.
                    if let Err(e) = syn::parse_file(&text) {
                        let d = crate::syntax::syntax_error(&text, &e);
                        let _ = d.render(&text, "random.ab", false);
                    }
                }
                Err(e) => {
                    let stopped = crate::location::start_of(e.span());
                    let stopped_char = text
                        .lines()
                        .nth(stopped.line as usize - 1)
                        .and_then(|l| l.chars().nth(stopped.column as usize - 1));
                    if let (Some(')' | ']' | '}'), Some(problem)) = (stopped_char, &found.problem) {
                        if found.unknown.is_none() {
                            assert_eq!(problem.detected, stopped, "{text:?}");
                        }
                    }
                    let d = found.tokenizer_error(&text, stopped);
                    let _ = d.render(&text, "random.ab", false);
                }
            }
        }
    }

    #[test]
    fn unknown_characters_are_found() {
        let found = scan("fn f() { “1” }")
            .unknown
            .expect("an unknown character");
        assert_eq!((found.at, found.ch), (Loc::new(1, 10), '“'));
    }
}
