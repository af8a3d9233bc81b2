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
use autobatch_types::Loc;
use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// Deepest nesting of `()`, `[]`, `{}` accepted.
pub(crate) const MAX_NESTING: usize = 256;
/// Most operators that `syn` may nest within one stretch of tokens.
const MAX_NESTABLE_OPERATORS: usize = 10_000;

/// The diagnostic for an expression nested deeper than the compiler accepts.
pub(crate) fn too_deep(loc: Loc, end: Loc) -> Diagnostic {
    nested_too_deeply(false, loc, end)
}

/// The diagnostic for brackets nested more than [`MAX_NESTING`] levels deep,
/// in a type if `in_type`, else in an expression.
fn nested_too_deeply(in_type: bool, loc: Loc, end: Loc) -> Diagnostic {
    let (what, note) = if in_type {
        (
            "type",
            "name a smaller type, or split the value into several",
        )
    } else {
        (
            "expression",
            "split the expression into several `let` statements or functions",
        )
    };
    Diagnostic::new(
        format!("{what} nested too deeply (more than {MAX_NESTING} levels)"),
        loc,
        end,
        "nested too deeply",
    )
    .with_note(note)
}

/// The diagnostic for more than [`MAX_NESTABLE_OPERATORS`] operators that
/// nest (prefix operators, assignments, `->`, ...) in one stretch of tokens.
fn too_many_operators(in_type: bool, loc: Loc, end: Loc) -> Diagnostic {
    let what = if in_type { "type" } else { "expression" };
    Diagnostic::new(
        format!("{what} nested too deeply (more than {MAX_NESTABLE_OPERATORS} nested operators)"),
        loc,
        end,
        "nested too deeply",
    )
    .with_note("split it into several `let` statements, functions or types")
}

/// The words that, right after a `{ ... }` block, can only start a new item
/// or statement: whatever nested before the block has been closed.
const STARTS_ITEM_AFTER_BLOCK: &[&str] = &[
    "fn", "const", "static", "struct", "enum", "extern", "use", "impl", "trait", "type", "mod",
    "pub", "let", "if", "while", "for", "loop", "match",
];

struct Stretch {
    tokens: proc_macro2::token_stream::IntoIter,
    /// Operators counted in the current comma/semicolon-separated stretch.
    nestable: usize,
    /// Whether the previous token ends an operand (so a following operator is binary).
    after_operand: bool,
    /// The operator being assembled from joint punctuation.
    operator: String,
    operator_after_operand: bool,
    /// Whether these tokens are a type (a tuple type, or an array type before its `;`).
    in_type: bool,
    /// Whether the previous token (`:`, `->`, `as`) is followed by a type.
    type_follows: bool,
    /// Whether the previous token is a `{ ... }` group.
    after_block: bool,
}

impl Stretch {
    fn new(tokens: TokenStream, in_type: bool) -> Stretch {
        Stretch {
            tokens: tokens.into_iter(),
            nestable: 0,
            after_operand: false,
            operator: String::new(),
            operator_after_operand: false,
            in_type,
            type_follows: false,
            after_block: false,
        }
    }
}

/// Rejects token streams nested too deeply for `syn`.
pub(crate) fn check_nesting(tokens: TokenStream) -> Result<(), Diagnostic> {
    let mut stack = vec![Stretch::new(tokens, false)];
    while let Some(top) = stack.last_mut() {
        let Some(token) = top.tokens.next() else {
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                parent.after_operand = true;
            }
            continue;
        };
        let after_block = std::mem::take(&mut top.after_block);
        let type_follows = std::mem::take(&mut top.type_follows);
        match token {
            TokenTree::Group(group) => {
                top.operator.clear();
                let delimiter = group.delimiter();
                top.after_block = delimiter == Delimiter::Brace;
                let in_type = matches!(delimiter, Delimiter::Bracket | Delimiter::Parenthesis)
                    && (type_follows || top.in_type);
                if stack.len() > MAX_NESTING {
                    let span = group.span_open();
                    return Err(nested_too_deeply(in_type, start_of(span), end_of(span)));
                }
                stack.push(Stretch::new(group.stream(), in_type));
            }
            TokenTree::Ident(ident) => {
                top.operator.clear();
                let word = ident.to_string();
                if after_block && STARTS_ITEM_AFTER_BLOCK.contains(&word.as_str()) {
                    top.nestable = 0;
                }
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
                top.type_follows = word == "as";
                if top.nestable > MAX_NESTABLE_OPERATORS {
                    let span = ident.span();
                    return Err(too_many_operators(
                        top.in_type,
                        start_of(span),
                        end_of(span),
                    ));
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
                    if after_block && ch == '#' {
                        // An attribute after a block starts a new item or statement.
                        top.nestable = 0;
                    }
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
                        // What follows the `;` of an array type is its length.
                        top.in_type &= operator != ";";
                        continue;
                    }
                    "." | "::" | "?" | "'" | "#" => {}
                    "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "^=" | "&=" | "|=" | "<<=" | ">>="
                    | "<" | "->" => top.nestable += 1,
                    _ if !top.operator_after_operand => top.nestable += 1,
                    _ => {}
                }
                top.type_follows = operator == ":" || operator == "->";
                // A postfix `?` leaves an operand; everything else expects one.
                top.after_operand = operator == "?";
                if top.nestable > MAX_NESTABLE_OPERATORS {
                    let span = punct.span();
                    return Err(too_many_operators(
                        top.in_type,
                        start_of(span),
                        end_of(span),
                    ));
                }
            }
        }
    }
    Ok(())
}
