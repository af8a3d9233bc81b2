//! The source text of the macro's tokens, laid out as they were written:
//! each token at its own line and column (counted from the macro's first
//! line), so that a diagnostic's position in the text names the token it
//! points to. Comments are gone from the tokens, so they are blank here.

use proc_macro::{Delimiter, Span, TokenStream, TokenTree};

use autobatch_types::Loc;

/// The text, and where each token starts in it.
pub struct Layout {
    pub text: String,
    /// Each token's start in `text` and its span, in text order.
    tokens: Vec<(Loc, Span)>,
    /// The source line of the first token.
    first_line: Option<usize>,
    /// The next position in `text` (1-based).
    line: u32,
    column: u32,
}

impl Layout {
    pub fn of(input: TokenStream) -> Layout {
        let mut layout = Layout {
            text: String::new(),
            tokens: Vec::new(),
            first_line: None,
            line: 1,
            column: 1,
        };
        layout.stream(input);
        layout.text.push('\n');
        layout
    }

    fn stream(&mut self, stream: TokenStream) {
        for tree in stream {
            match tree {
                TokenTree::Group(group) => {
                    let (open, close) = match group.delimiter() {
                        Delimiter::Parenthesis => ("(", ")"),
                        Delimiter::Brace => ("{", "}"),
                        Delimiter::Bracket => ("[", "]"),
                        Delimiter::None => ("", ""),
                    };
                    self.place(open, group.span_open());
                    self.stream(group.stream());
                    self.place(close, group.span_close());
                }
                other => self.place(&other.to_string(), other.span()),
            }
        }
    }

    /// Writes `text` where `span` starts, or after what is written if that
    /// is behind (tokens made by another macro).
    fn place(&mut self, text: &str, span: Span) {
        if text.is_empty() {
            return;
        }
        let first = *self.first_line.get_or_insert(span.line());
        let line = (span.line().saturating_sub(first) + 1) as u32;
        let column = span.column() as u32;
        if line > self.line {
            for _ in self.line..line {
                self.text.push('\n');
            }
            self.line = line;
            self.column = 1;
        }
        let behind = line < self.line || (line == self.line && column < self.column);
        if line == self.line && column > self.column {
            for _ in self.column..column {
                self.text.push(' ');
            }
            self.column = column;
        } else if behind && !self.text.is_empty() && !self.text.ends_with([' ', '\n']) {
            self.text.push(' ');
            self.column += 1;
        }
        self.tokens.push((
            Loc {
                line: self.line,
                column: self.column,
            },
            span,
        ));
        self.text.push_str(text);
        for ch in text.chars() {
            if ch == '\n' {
                self.line += 1;
                self.column = 1;
            } else {
                self.column += 1;
            }
        }
    }

    /// The span of the last token that starts at or before `loc` (the
    /// macro's call site if none does).
    pub fn span_at(&self, loc: Loc) -> Span {
        let key = |l: &Loc| (l.line, l.column);
        self.tokens
            .iter()
            .take_while(|(start, _)| key(start) <= key(&loc))
            .last()
            .map_or_else(Span::call_site, |(_, span)| *span)
    }
}
