//! A scan of the token stream, before `syn` parses it, that rejects inputs
//! nested so deeply that parsing them could exhaust the stack.
//!
//! `syn` parses nested groups, prefix operators, right-associative
//! assignments and generic arguments by recursion. The scan is iterative: it
//! bounds the nesting of brackets, and within one comma- or
//! semicolon-separated stretch of tokens it bounds the number of operators
//! that `syn` may nest (prefix operators, assignments, `<`, `->`,
//! `return`, `break`). Long flat chains such as `1 + 1 + ... + 1` are parsed
//! iteratively by `syn` and pass; the checker bounds them itself.

use crate::location::{end_of, start_of};
use crate::Diagnostic;
use proc_macro2::{Spacing, TokenStream, TokenTree};

/// Deepest nesting of `()`, `[]`, `{}` accepted.
pub(crate) const MAX_NESTING: usize = 256;
/// Most operators that `syn` may nest within one stretch of tokens.
const MAX_NESTABLE_OPERATORS: usize = 10_000;

/// The diagnostic for input nested deeper than the compiler accepts.
pub(crate) fn too_deep(loc: autobatch_types::Loc, end: autobatch_types::Loc) -> Diagnostic {
    Diagnostic::new(
        format!("expression nested too deeply (more than {MAX_NESTING} levels)"),
        loc,
        end,
        "nested too deeply",
    )
    .with_note("split the expression into several `let` statements or functions")
}

struct Stretch {
    tokens: proc_macro2::token_stream::IntoIter,
    /// Operators counted in the current comma/semicolon-separated stretch.
    nestable: usize,
    /// Whether the previous token ends an operand (so a following operator is binary).
    after_operand: bool,
    /// The operator being assembled from joint punctuation.
    operator: String,
    operator_after_operand: bool,
}

impl Stretch {
    fn new(tokens: TokenStream) -> Stretch {
        Stretch {
            tokens: tokens.into_iter(),
            nestable: 0,
            after_operand: false,
            operator: String::new(),
            operator_after_operand: false,
        }
    }
}

/// Rejects token streams nested too deeply for `syn`.
pub(crate) fn check_nesting(tokens: TokenStream) -> Result<(), Diagnostic> {
    let mut stack = vec![Stretch::new(tokens)];
    while let Some(top) = stack.last_mut() {
        let Some(token) = top.tokens.next() else {
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                parent.after_operand = true;
            }
            continue;
        };
        match token {
            TokenTree::Group(group) => {
                top.operator.clear();
                if stack.len() > MAX_NESTING {
                    let span = group.span_open();
                    return Err(too_deep(start_of(span), end_of(span)));
                }
                stack.push(Stretch::new(group.stream()));
            }
            TokenTree::Ident(ident) => {
                top.operator.clear();
                let word = ident.to_string();
                match word.as_str() {
                    "return" | "break" | "move" | "dyn" | "impl" => {
                        top.nestable += 1;
                        top.after_operand = false;
                    }
                    "as" | "in" | "if" | "else" | "let" | "mut" | "const" | "static" | "while"
                    | "for" | "loop" | "match" | "unsafe" | "async" | "fn" | "where" => {
                        top.after_operand = false
                    }
                    _ => top.after_operand = true,
                }
                if top.nestable > MAX_NESTABLE_OPERATORS {
                    return Err(too_deep(start_of(ident.span()), end_of(ident.span())));
                }
            }
            TokenTree::Literal(_) => {
                top.operator.clear();
                top.after_operand = true;
            }
            TokenTree::Punct(punct) => {
                let ch = punct.as_char();
                if top.operator.is_empty() {
                    top.operator_after_operand = top.after_operand;
                }
                top.operator.push(ch);
                if punct.spacing() == Spacing::Joint {
                    continue;
                }
                let operator = std::mem::take(&mut top.operator);
                match operator.as_str() {
                    ";" | "," | "=>" => {
                        top.nestable = 0;
                        top.after_operand = false;
                        continue;
                    }
                    "." | "::" | "?" | "'" | "#" => {}
                    "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "^=" | "&=" | "|=" | "<<=" | ">>="
                    | "<" | "->" => top.nestable += 1,
                    _ if !top.operator_after_operand => top.nestable += 1,
                    _ => {}
                }
                // A postfix `?` leaves an operand; everything else expects one.
                top.after_operand = operator == "?";
                if top.nestable > MAX_NESTABLE_OPERATORS {
                    return Err(too_deep(start_of(punct.span()), end_of(punct.span())));
                }
            }
        }
    }
    Ok(())
}
