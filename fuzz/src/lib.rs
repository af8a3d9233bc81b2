//! What every fuzz target checks, and the token vocabulary of the token-level
//! target. The oracle: compiling any input (`autobatch::compile`, what
//! `autobatch check` runs) returns a program or diagnostics; it never panics,
//! never overflows the stack, never reports an internal compiler error, and
//! its diagnostics render.

pub mod grammar;

/// The words of the language, glued by [`source_from_tokens`]: keywords,
/// types, builtins, a few names, literals and punctuation. At most 256, so
/// that one input byte picks one token.
pub const TOKENS: &[&str] = &[
    // keywords
    "fn", "let", "mut", "if", "else", "while", "loop", "for", "in", "break", "continue",
    "return", "const", "static", "extern", "\"autobatch\"", "as", "true", "false", "match",
    "struct", "impl", "use", "pub", "mod", "enum", "trait", "type", "where", "unsafe",
    "move", "dyn", "ref", "self", "Self", "crate", "super",
    // types
    "i64", "i32", "usize", "f64", "f32", "bool", "u8", "u64", "isize", "u32",
    // names
    "x", "y", "z", "n", "i", "j", "k", "a", "b", "s", "v", "m", "f", "g", "h", "main",
    "N", "D", "K", "M", "X", "Y", "T",
    // builtins
    "dot", "matvec", "vecmat", "matmul", "transpose", "outer", "sum", "mean", "max", "min",
    "argmax", "argmin", "logsumexp", "softmax", "sigmoid", "log_sigmoid", "softplus",
    "select", "uniform", "normal", "uniform_like", "normal_like", "bernoulli", "grad",
    "value_and_grad", "len", "abs", "exp", "exp_m1", "ln", "ln_1p", "log10", "sqrt", "sin",
    "cos", "tan", "tanh", "floor", "ceil", "round", "signum", "recip", "is_nan",
    "is_finite", "powi", "powf", "pow", "assert!", "assert_eq!", "println!", "panic!",
    "wrapping_add", "MAX", "MIN", "INFINITY", "NAN", "EPSILON", "PI",
    // literals
    "0", "1", "2", "3", "7", "10", "255", "1000", "0.0", "1.0", "0.5", "1.5", "2.0",
    "-1", "1e3", "1e308", "1e309", "1e29", "2_i32", "7usize", "3i64", "1.0f32", "0x7f",
    "0b101", "9223372036854775807", "9223372036854775808", "18446744073709551616",
    "4294967296", "\"msg\"", "'c'", "b'a'", "1u8",
    // punctuation
    "(", ")", "[", "]", "{", "}", ",", ";", ":", "::", "->", "=>", "=", "==", "!=", "<",
    "<=", ">", ">=", "+", "-", "*", "/", "%", "&", "&&", "|", "||", "^", "!", "<<", ">>",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "..", "..=", ".", "_",
    "'a", "#", "?", "@", "$", "~",
    // glued phrases that random tokens rarely assemble
    "<const K: usize>", "<const N: usize>", "[f64; 3]", "[f64; N]", "[[f64; 2]; 2]",
    "-> f64", "-> i64", "-> bool", "(x: f64)", "(n: i64)", "(v: [f64; 3])", "0..n",
    "0..3", "\n", "#[inline]", "as usize", "as f64", "as i64",
];

/// One token per input byte, separated by spaces.
pub fn source_from_tokens(data: &[u8]) -> String {
    let words: Vec<&str> = data
        .iter()
        .map(|&b| TOKENS[usize::from(b) % TOKENS.len()])
        .collect();
    words.join(" ")
}

/// Compiles `source` as `autobatch check` does and panics (which the fuzzer
/// reports as a crash) on anything but a program or located diagnostics.
pub fn check_never_crashes(source: &str) {
    match autobatch::compile(source, "fuzz.ab") {
        Ok(compiled) => {
            let _ = compiled.ir_text();
        }
        Err(error) => {
            assert!(!error.diagnostics().is_empty(), "an error without diagnostics");
            for (loc, words) in error.located_messages() {
                assert!(loc.line >= 1 && loc.column >= 1, "a diagnostic at {loc:?}: {words}");
                assert!(
                    !words.contains("internal compiler error"),
                    "internal compiler error: {words}"
                );
            }
            let _ = error.render(false);
        }
    }
}
