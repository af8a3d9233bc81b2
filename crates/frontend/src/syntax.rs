//! Syntax errors from `syn`, worded and placed for the person who wrote the
//! program. `syn` reports an error at the token where parsing stopped ("expected
//! `;`" at the `let` of the next line); the fix belongs just after the last
//! token before it, so when a line break separates the two the error is
//! reported there, as rustc does, with a second label at the token found.
//! The message says what was found (`expected `;`, found `let``) and, for a
//! few common slips (`let` without `=`, `fn` without a body, `=>` for
//! `>=`), how to write it.

use crate::location::{end_of, start_of};
use crate::Diagnostic;
use autobatch_types::Loc;
use proc_macro2::{TokenStream, TokenTree};

/// One token of the program as the parser saw it: a word, a literal, a
/// (joined) operator, or one delimiter of a group.
struct Token {
    start: Loc,
    end: Loc,
    text: String,
    /// The number of groups around it (a group's delimiters count as outside it).
    depth: usize,
}

/// The diagnostic for `error`, which `syn` reported on `source` (text the
/// tokenizer reads).
pub(crate) fn syntax_error(source: &str, error: &syn::Error) -> Diagnostic {
    let tokens = source
        .parse::<TokenStream>()
        .map(flatten)
        .unwrap_or_default();
    let span = error.span();
    let raw = error.to_string();
    // At the end of a group `syn` points at its closing delimiter; at the
    // end of the file, nowhere in particular.
    let found = tokens.iter().position(|t| t.start == start_of(span));
    let at_end_of_file = raw.starts_with("unexpected end of input")
        && !found.is_some_and(|i| matches!(tokens[i].text.as_str(), ")" | "]" | "}"));
    let found_at = (!at_end_of_file).then(|| start_of(span));
    let found = found.filter(|_| !at_end_of_file);
    let before = match found_at {
        Some(at) => tokens.iter().rposition(|t| t.end <= at),
        None => tokens.len().checked_sub(1),
    };
    let expected = expectation(&raw);
    let found_text = match found {
        Some(i) => format!("`{}`", shown(&tokens[i].text)),
        None if at_end_of_file => "the end of the file".to_string(),
        None => "this".to_string(),
    };
    let message = match (&expected, found.is_some() || at_end_of_file) {
        (Some(expected), true) => format!("syntax error: {expected}, found {found_text}"),
        (Some(expected), false) => format!("syntax error: {expected}"),
        (None, _) => format!("syntax error: {raw}"),
    };
    let what = expected.clone().unwrap_or(raw);
    // The previous item is complete when an item was expected: the token
    // found is what is wrong.
    let after_item = what.starts_with(EXPECTED_ITEM);
    let after_line_break = match (before, found_at) {
        (Some(b), Some(at)) => tokens[b].end.line < at.line && !after_item,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let mut diagnostic = match (before, found_at) {
        (Some(b), _) if after_line_break => {
            let at = tokens[b].end;
            let mut d = Diagnostic::new(
                message,
                at,
                Loc::new(at.line, at.column + 1),
                format!("{what} here"),
            );
            if let Some(at) = found_at {
                d = d.with_secondary(at, end_of(span), format!("found {found_text}"));
            }
            d
        }
        (_, Some(at)) => Diagnostic::new(message, at, end_of(span), what),
        _ => Diagnostic::new(message, Loc::new(1, 1), Loc::new(1, 2), what),
    };
    let statement = statement_before(&tokens, found.unwrap_or(tokens.len()));
    if let Some(hint) = hint(expected.as_deref(), found.map(|i| &tokens[i]), statement) {
        diagnostic = diagnostic.with_note(hint);
    }
    diagnostic
}

/// What is said when the parser expected an item.
const EXPECTED_ITEM: &str = "expected an item";

/// What `syn`'s message says was expected, in the language's words
/// (`expected `{`` for "expected curly braces"); `None` if the message
/// is not about an expectation.
fn expectation(raw: &str) -> Option<String> {
    let text = raw
        .strip_prefix("unexpected end of input, ")
        .or_else(|| raw.strip_prefix("unexpected token, "))
        .unwrap_or(raw);
    if !text.starts_with("expected") {
        return None;
    }
    if text.starts_with("expected one of: `fn`, `extern`") {
        return Some(format!(
            "{EXPECTED_ITEM} (`fn`, `const` or `extern \"autobatch\"`)"
        ));
    }
    Some(
        text.replace("curly braces", "`{`")
            .replace("parentheses", "`(`")
            .replace("square brackets", "`[`"),
    )
}

/// A token as quoted in a message: long literals are cut short.
fn shown(text: &str) -> String {
    const LONGEST: usize = 24;
    if text.chars().count() <= LONGEST {
        text.to_string()
    } else {
        let cut: String = text.chars().take(LONGEST).collect();
        format!("{cut}...")
    }
}

/// The tokens of the statement or item that the token at `index` would
/// continue: back from it to the previous `;`, `}` or opening delimiter
/// at its depth, skipping nested groups.
fn statement_before(tokens: &[Token], index: usize) -> &[Token] {
    let depth = match tokens.get(index) {
        Some(t) => t.depth,
        None => 0,
    };
    let mut start = index.min(tokens.len());
    while start > 0 {
        let t = &tokens[start - 1];
        let ends_statement = t.depth == depth && (t.text == ";" || t.text == "}");
        if t.depth < depth || ends_statement {
            break;
        }
        start -= 1;
    }
    &tokens[start..index.min(tokens.len())]
}

/// A note on how to write what was probably meant.
fn hint(expected: Option<&str>, found: Option<&Token>, statement: &[Token]) -> Option<String> {
    let depth = statement.first().map(|t| t.depth)?;
    let first = statement.first().map(|t| t.text.as_str());
    let has_eq = statement.iter().any(|t| t.depth == depth && t.text == "=");
    if found.is_some_and(|t| t.text == "=>") {
        return Some("`=>` separates the arms of a `match`; to compare, write `>=`".to_string());
    }
    match (first, expected) {
        (Some("let"), Some("expected `;`")) if !has_eq => {
            Some("a `let` statement gives its variable a value: `let name = value;`".to_string())
        }
        (Some("fn"), Some("expected `{`")) => Some(
            "a function needs a body in `{ }`; only functions declared in `extern \"autobatch\" { }` have none"
                .to_string(),
        ),
        _ => None,
    }
}

/// The tokens of `stream` in order, groups as their two delimiters around
/// their tokens; iterative, so that deep nesting cannot exhaust the stack.
fn flatten(stream: TokenStream) -> Vec<Token> {
    let mut out = Vec::new();
    let mut stack = vec![(stream.into_iter(), None)];
    loop {
        let depth = stack.len().saturating_sub(1);
        let Some((tokens, _)) = stack.last_mut() else {
            break;
        };
        let Some(tree) = tokens.next() else {
            if let Some((_, Some(close))) = stack.pop() {
                out.push(close);
            }
            continue;
        };
        let token = |span: proc_macro2::Span, text: String| Token {
            start: start_of(span),
            end: end_of(span),
            text,
            depth,
        };
        match tree {
            TokenTree::Group(group) => {
                let (open, close) = delimiter_texts(group.delimiter());
                out.push(token(group.span_open(), open.to_string()));
                let close = token(group.span_close(), close.to_string());
                stack.push((group.stream().into_iter(), Some(close)));
            }
            TokenTree::Ident(ident) => out.push(token(ident.span(), ident.to_string())),
            TokenTree::Literal(literal) => out.push(token(literal.span(), literal.to_string())),
            TokenTree::Punct(punct) => {
                let t = token(punct.span(), punct.as_char().to_string());
                // A punctuation mark may continue the previous one (`=` `>` is `=>`).
                match out.last_mut() {
                    Some(previous) if joins(previous, &t) => {
                        previous.text.push_str(&t.text);
                        previous.end = t.end;
                    }
                    _ => out.push(t),
                }
            }
        }
    }
    out
}

fn delimiter_texts(delimiter: proc_macro2::Delimiter) -> (&'static str, &'static str) {
    match delimiter {
        proc_macro2::Delimiter::Parenthesis => ("(", ")"),
        proc_macro2::Delimiter::Bracket => ("[", "]"),
        proc_macro2::Delimiter::Brace => ("{", "}"),
        proc_macro2::Delimiter::None => ("", ""),
    }
}

/// Operators of more than one punctuation mark.
const OPERATORS: &[&str] = &[
    "=>", "->", "::", "..", "..=", "...", "==", "!=", "<=", ">=", "&&", "||", "+=", "-=", "*=",
    "/=", "%=", "^=", "&=", "|=", "<<", ">>", "<<=", ">>=",
];

/// Whether the punctuation mark `next`, right after `previous`, continues
/// it into an operator (`=` `>` is `=>`).
fn joins(previous: &Token, next: &Token) -> bool {
    if previous.end != next.start || previous.depth != next.depth {
        return false;
    }
    let joined = format!("{}{}", previous.text, next.text);
    OPERATORS.iter().any(|op| op.starts_with(&joined))
}
