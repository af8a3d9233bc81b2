//! Robustness: random token streams and random mutations of valid programs
//! never crash the compiler. `compile` must return `Ok` (a program that
//! passes the verifier) or `Err` with diagnostics, never panic and never
//! report an internal error.

use proptest::prelude::*;

const VOCABULARY: &[&str] = &[
    "fn",
    "let",
    "mut",
    "if",
    "else",
    "while",
    "loop",
    "for",
    "in",
    "break",
    "continue",
    "return",
    "const",
    "static",
    "extern",
    "\"autobatch\"",
    "as",
    "true",
    "false",
    "match",
    "struct",
    "impl",
    "use",
    "x",
    "y",
    "n",
    "f",
    "g",
    "N",
    "D",
    "K",
    "i64",
    "i32",
    "usize",
    "f64",
    "f32",
    "bool",
    "0",
    "1",
    "2",
    "3",
    "1.5",
    "0.0",
    "2_i32",
    "7usize",
    "1e3",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    ":",
    "::",
    "->",
    "=>",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "&&",
    "|",
    "||",
    "^",
    "!",
    "<<",
    ">>",
    "+=",
    "-=",
    "*=",
    "..",
    "..=",
    ".",
    "0",
    "len",
    "sqrt",
    "exp",
    "dot",
    "sum",
    "assert!",
    "\"msg\"",
    "_",
    "'a",
    "#",
    "?",
    "@",
    "$",
    "<const K: usize>",
];

const SEEDS: &[&str] = &[
    "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }",
    "fn gcd(a: i64, b: i64) -> i64 { let mut a = a; let mut b = b; while b != 0 { let t = a % b; a = b; b = t; } a }",
    "const D: usize = 3; fn norm2<const K: usize>(v: [f64; K]) -> f64 { dot(v, v) } fn g(v: [f64; D]) -> f64 { norm2(v) }",
    "extern \"autobatch\" { static X: [[f64; D]; N]; } fn f(t: [f64; D]) -> f64 { let p = matvec(X, t); let mut s = 0.0; for i in 0..N { s += p[i] * p[i]; } s }",
    "fn f(x: i64) -> (i64, bool) { let mut k = 0; let r = loop { if k * k > x { break k; } k += 1; }; (r, r > 2 && x < 9 || false) }",
    "fn h(mut m: [[f64; 3]; 2], i: usize) -> [[f64; 3]; 2] { m[i][0] = 1.0; m[1][2] *= 2.0; assert!(m[0][0] > 0.0, \"pos\"); m }",
    "fn c(a: usize, b: usize) -> usize { let mut n = 0; for _ in a..=b { n += 1; if n > 5 { continue; } } n }",
];

/// Splits a program into tokens, roughly (identifiers, numbers, strings, single punctuation).
fn tokens(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            i = (i + 1).min(chars.len());
            out.push(chars[start..i].iter().collect());
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

fn assert_no_crash(src: &str) {
    match autobatch_lower::compile(src) {
        Ok(program) => {
            if let Err(errors) = autobatch_ir::verify::verify_program(&program) {
                panic!("verifier failed on {src:?}: {errors:?}");
            }
        }
        Err(diagnostics) => {
            assert!(
                !diagnostics.is_empty(),
                "an error without diagnostics for {src:?}"
            );
            for d in &diagnostics {
                assert!(
                    !d.message.contains("internal compiler error"),
                    "internal error on {src:?}: {}",
                    d.message
                );
                assert!(
                    d.loc.line >= 1 && d.loc.column >= 1,
                    "bad location on {src:?}"
                );
                let _ = d.render(src, "random.ab", false);
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Insert(usize, usize),
    Replace(usize, usize),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), 0..VOCABULARY.len()).prop_map(|(a, b)| Mutation::Insert(a, b)),
        (any::<usize>(), 0..VOCABULARY.len()).prop_map(|(a, b)| Mutation::Replace(a, b)),
        (any::<usize>(), 1usize..6).prop_map(|(a, b)| Mutation::Duplicate(a, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES raises the count for a longer search.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_token_streams_never_crash(words in prop::collection::vec(0..VOCABULARY.len(), 0..60)) {
        let src: Vec<&str> = words.iter().map(|i| VOCABULARY[*i]).collect();
        assert_no_crash(&src.join(" "));
    }

    #[test]
    fn mutated_programs_never_crash(seed in 0..SEEDS.len(), mutations in prop::collection::vec(mutation(), 1..5)) {
        let mut toks = tokens(SEEDS[seed]);
        for m in mutations {
            let n = toks.len().max(1);
            match m {
                Mutation::Delete(i) => { if !toks.is_empty() { toks.remove(i % n); } }
                Mutation::Insert(i, w) => toks.insert(i % (toks.len() + 1), VOCABULARY[w].to_string()),
                Mutation::Replace(i, w) => { if !toks.is_empty() { toks[i % n] = VOCABULARY[w].to_string(); } }
                Mutation::Duplicate(i, len) => {
                    if !toks.is_empty() {
                        let start = i % n;
                        let end = (start + len).min(toks.len());
                        let copy: Vec<String> = toks[start..end].to_vec();
                        for (k, t) in copy.into_iter().enumerate() { toks.insert(end + k, t); }
                    }
                }
            }
        }
        assert_no_crash(&toks.join(" "));
    }
}

#[test]
fn seeds_compile() {
    for s in SEEDS {
        autobatch_lower::compile(s).unwrap_or_else(|d| panic!("{s}: {:?}", d));
    }
}

#[test]
fn deep_nesting_never_crashes_the_compiler() {
    let depth = 100_000;
    assert_no_crash(&format!(
        "fn f() -> i64 {{ {}1{} }}",
        "(".repeat(depth),
        ")".repeat(depth)
    ));
    assert_no_crash(&format!(
        "fn f() -> i64 {{ {}1{} }}",
        "{".repeat(depth),
        "}".repeat(depth)
    ));
    assert_no_crash(&format!(
        "fn f() -> i64 {{ {} }}",
        vec!["1"; 100_000].join(" + ")
    ));
    assert_no_crash(&format!(
        "fn f() -> i64 {{ {} }}",
        vec!["1"; 9_000].join(" + ")
    ));
    assert_no_crash(&format!("fn f() -> i64 {{ {}1 }}", "-".repeat(100_000)));
    assert_no_crash(&format!(
        "fn f(x: f64) -> f64 {{ x{} }}",
        ".abs()".repeat(100_000)
    ));
    assert_no_crash(&format!(
        "fn f(x: [f64; 1]) -> f64 {{ x{} }}",
        "[0]".repeat(100_000)
    ));
    assert_no_crash(&format!(
        "fn f(x: i64) -> i64 {{ x{} }}",
        " as i64".repeat(100_000)
    ));
    assert_no_crash(&format!(
        "fn f() {{ let mut a = 0; {} 1; }}",
        "a = ".repeat(100_000)
    ));
    assert_no_crash(&format!(
        "fn f() {{ {} }}",
        "if true { 1; } else ".repeat(50_000) + "{ }"
    ));
    assert_no_crash(&format!(
        "fn f() -> [f64; 1] {{ {}0.0{} }}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    ));
    assert_no_crash(&format!(
        "fn f(x: {}f64{}) {{ }}",
        "[".repeat(100_000),
        "; 1]".repeat(100_000)
    ));
    assert_no_crash(&format!("fn f() {{ {} }}", "return ".repeat(100_000)));
    assert_no_crash(&format!(
        "fn f() -> Vec{}i64{} {{ }}",
        "<Vec".repeat(100_000),
        ">".repeat(100_000)
    ));
    assert_no_crash(&format!(
        "const A: i64 = {}1{};",
        "(".repeat(300),
        ")".repeat(300)
    ));
    assert_no_crash(&format!(
        "const A: i64 = {};",
        vec!["1"; 100_000].join(" + ")
    ));
    assert_no_crash(&format!(
        "fn f() {{ let {}x{} = 1; }}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    ));
}

#[test]
fn long_sum_below_the_limit_compiles() {
    let src = format!("fn f() -> i64 {{ {} }}", vec!["1"; 9_000].join(" + "));
    let program = autobatch_lower::compile(&src).expect("a 9000-term sum compiles");
    autobatch_ir::verify::verify_program(&program).expect("verifies");
}
