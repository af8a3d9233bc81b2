//! Checker tests: many tiny programs through two helpers. `check_ok` wants
//! the program accepted; `check_err` wants a diagnostic containing a text at
//! a line and column.

use autobatch_frontend::check;

fn check_ok(src: &str) {
    if let Err(ds) = check(src) {
        let text: Vec<String> = ds.iter().map(|d| d.render(src, "test.ab", false)).collect();
        panic!(
            "expected the program to be accepted:\n{src}\n{}",
            text.join("\n")
        );
    }
}

fn check_err(src: &str, needle: &str, line: u32, column: u32) {
    match check(src) {
        Ok(_) => panic!("expected an error containing {needle:?}:\n{src}"),
        Err(ds) => {
            let first = &ds[0];
            let found = ds.iter().any(|d| {
                d.message.contains(needle) && d.loc.line == line && d.loc.column == column
            });
            assert!(
                found,
                "expected {needle:?} at {line}:{column}, got:\n{}",
                ds.iter()
                    .map(|d| format!("{}:{} {}", d.loc.line, d.loc.column, d.message))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            assert!(first.end >= first.loc, "end before start");
            // Rendering must never fail.
            let _ = first.render(src, "test.ab", true);
        }
    }
}

// ---------------------------------------------------------------- accepted

#[test]
fn accepts_fib() {
    check_ok("fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }");
}

#[test]
fn accepts_mutual_recursion_in_any_order() {
    check_ok("fn a(n: i64) -> bool { if n == 0 { true } else { b(n - 1) } }\nfn b(n: i64) -> bool { if n == 0 { false } else { a(n - 1) } }");
}

#[test]
fn accepts_literal_inference_from_later_use() {
    check_ok("fn f(x: [f32; 3]) -> f32 { let mut acc = 0.0; for i in 0..3 { acc += x[i]; } acc }");
    check_ok("fn g() -> i32 { let mut c = 0; c += 1; c }");
    check_ok("fn h(x: i32) -> bool { 1 < x }");
}

#[test]
fn accepts_consts_and_symbols() {
    check_ok("const N2: usize = 2 * K;\nconst K: usize = 3;\nconst PI2: f64 = 2.0 * 3.14;\nfn f(x: [f64; N2]) -> f64 { x[0] * PI2 }");
    check_ok("extern \"autobatch\" { static X: [[f64; D]; N]; }\nfn f() -> f64 { let mut s = 0.0; for i in 0..N { s += X[i][0]; } s }");
    check_ok("fn f(x: [f64; D]) -> usize { x.len() + D }");
}

#[test]
fn accepts_const_generics_with_inference_and_turbofish() {
    check_ok("fn n2<const K: usize>(v: [f64; K]) -> f64 { dot(v, v) }\nfn g(a: [f64; 3], b: [f64; D]) -> f64 { n2(a) + n2(b) + n2::<3>(a) }");
    check_ok("fn z<const K: usize>() -> [f64; K] { [0.0; K] }\nfn g() -> [f64; 4] { z::<4>() }");
}

#[test]
fn accepts_tuples_and_patterns() {
    check_ok("fn f() -> (i64, (f64, bool)) { let t = (1, (2.0, true)); let (a, (b, _)) = t; let _ = b; (a, t.1) }");
}

#[test]
fn accepts_loops_and_breaks() {
    check_ok("fn f(n: i64) -> i64 { let mut i = 0; let r = loop { i += 1; if i > n { break i * 2; } }; while i > 0 { i -= 1; if i == 3 { continue; } } for _ in 0..=n { } r }");
}

#[test]
fn accepts_diverging_branches() {
    check_ok("fn f(x: i64) -> i64 { if x > 0 { return 1; } else { return 2; } }");
    check_ok("fn f(x: i64) -> i64 { let y = if x > 0 { return 1 } else { x }; y }");
    check_ok("fn f() -> i64 { loop { } }");
}

#[test]
fn accepts_elementwise_and_builtins() {
    check_ok(
        "fn f(a: [f64; 3], m: [[f64; 3]; 2], c: bool) -> f64 {
            let b = a * 2.0 + a - 1.0 / a;
            let e = (-b).exp().sqrt().max(a).powi(2).powf(0.5);
            let v = matvec(m, e); let w = vecmat(v, m); let t = transpose(m); let mm = matmul(m, t);
            let o = outer(a, v); let s = softmax(a);
            let k = argmax(a) + argmin(a);
            let r = select(c, a, b);
            let u = uniform() + normal() + sum(uniform_like(a)) + mean(normal_like(m[0]));
            let flag = bernoulli(0.5) && !a[0].is_nan() || a[1].is_finite();
            sum(w) + mm[0][0] + o[0][0] + s[k] + r[0] + u + logsumexp(a) + max(a) + min(a) + sigmoid(1.0) + softplus(a)[0] + log_sigmoid(a[0]) + if flag { 1.0 } else { 0.0 }
        }",
    );
}

#[test]
fn accepts_integer_ops_and_casts() {
    check_ok("fn f(a: i64, b: i32, n: usize) -> i64 { let x = (a << 2) >> b ^ (a & 7) | 1; let y = (b as i64).abs().pow(2).max(3).min(9); let z = true as i64 + (n as i64) % 3; x + y + z + (2.5 as i64) + !a }");
}

#[test]
fn accepts_indexed_assignment_and_asserts() {
    check_ok("fn f(mut m: [[f64; 3]; 2], i: usize) -> [[f64; 3]; 2] { m[i][0] = 1.0; m[1][i] *= 2.0; assert!(m[0][0] > 0.0); assert!(i < 2, \"i in range {{ok}}\"); m }");
}

#[test]
fn accepts_well_known_constants_and_negative_literals() {
    check_ok("fn f() -> f64 { let a = -2147483648i32; let b = i64::MAX; let _ = (a, b); std::f64::consts::PI + f64::INFINITY }");
}

#[test]
fn accepts_host_declarations_and_doc_comments() {
    check_ok("/// doc\nextern \"autobatch\" { fn host(x: [f64; D]) -> f64; }\n#[inline]\nfn f() -> i64 { 1 }");
}

// ---------------------------------------------------------------- rejected items

#[test]
fn rejects_unsupported_items() {
    check_err("struct S { x: i64 }", "`struct` is not supported", 1, 1);
    check_err("fn f() {}\nenum E { A }", "`enum` is not supported", 2, 1);
    check_err("use std::f64;", "`use` is not supported", 1, 1);
    check_err("impl X {}", "`impl` is not supported", 1, 1);
    check_err("trait T {}", "`trait` is not supported", 1, 1);
    check_err("mod m {}", "`mod` is not supported", 1, 1);
    check_err("type T = i64;", "type alias", 1, 1);
    check_err(
        "macro_rules! m { () => {} }",
        "`macro_rules!` is not supported",
        1,
        1,
    );
    check_err("static X: i64 = 1;", "`static` outside", 1, 1);
    check_err("union U { a: i64 }", "`union` is not supported", 1, 1);
    check_err(
        "extern \"C\" { fn f(); }",
        "only `extern \"autobatch\"`",
        1,
        1,
    );
}

#[test]
fn rejects_unsupported_signatures() {
    check_err("fn f<T>(x: T) {}", "generic type parameter", 1, 6);
    check_err("fn f<'a>(x: i64) {}", "lifetime", 1, 6);
    check_err("unsafe fn f() {}", "`unsafe` is not supported", 1, 1);
    check_err("async fn f() {}", "`async` is not supported", 1, 1);
    check_err("fn f(x: &i64) {}", "reference type", 1, 9);
    check_err("fn f(x: u32) {}", "the type `u32` is not supported", 1, 9);
    check_err("fn f(x: String) {}", "unknown type `String`", 1, 9);
    check_err("fn f(x: impl Fn()) {}", "`impl Trait`", 1, 9);
    check_err("fn f(x: [f64]) {}", "slice type", 1, 9);
    check_err("fn f<const K: i64>() {}", "must be a `usize`", 1, 15);
    check_err("fn f(x: i64, x: i64) {}", "used more than once", 1, 14);
}

#[test]
fn rejects_duplicates_and_bad_consts() {
    check_err("fn f() {}\nfn f() {}", "defined more than once", 2, 4);
    check_err(
        "const A: i64 = B;\nconst B: i64 = A;",
        "defined in terms of itself",
        1,
        7,
    );
    check_err("const A: i64 = 1.5;", "expected `i64`", 1, 16);
    check_err("const A: i32 = 3000000000;", "does not fit", 1, 16);
    check_err("const A: i64 = 1 / 0;", "division by zero", 1, 16);
    check_err("const A: i64 = foo(1);", "cannot be evaluated", 1, 16);
    check_err(
        "const N: i64 = 3;\nfn f(x: [f64; N]) {}",
        "must be a `usize`",
        2,
        15,
    );
    check_err("fn f(x: [f64; 2 + f]) {}", "array length must be", 1, 15);
}

// ---------------------------------------------------------------- rejected expressions

#[test]
fn rejects_unsupported_expressions() {
    check_err(
        "fn f(x: i64) -> i64 {\n    match x { _ => 1 }\n}",
        "`match` is not supported by autobatch",
        2,
        5,
    );
    check_err("fn f() { let c = |x: i64| x; }", "closure", 1, 18);
    check_err("fn f(x: i64) { let r = &x; }", "reference (`&`)", 1, 24);
    check_err("fn f(x: i64) { let y = *x; }", "dereference", 1, 24);
    check_err(
        "fn f() { let r = 0..3; }",
        "ranges (`a..b`) are only allowed in `for` loops",
        1,
        18,
    );
    check_err("fn f() { let s = S { a: 1 }; }", "struct literal", 1, 18);
    check_err("fn f() { unsafe { } }", "`unsafe`", 1, 10);
    check_err(
        "fn f() { println!(\"hi\"); }",
        "the macro `println!`",
        1,
        10,
    );
    check_err("fn f() { let x = vec![1]; }", "the macro `vec!`", 1, 18);
    check_err("fn f(x: i64) { if let 1 = x { } }", "`if let`", 1, 16);
    check_err("fn f(x: i64) { while let 1 = x { } }", "`while let`", 1, 16);
    check_err("fn f() { 'a: loop { break 'a; } }", "loop label", 1, 10);
    check_err(
        "fn f() { let s = \"hi\"; }",
        "string literals are only allowed",
        1,
        18,
    );
    check_err(
        "fn f(x: f64) -> f64 { x.foo() }",
        "the method `foo` is not supported",
        1,
        25,
    );
    check_err(
        "fn f() -> f64 { std::f64::sin(1.0) }",
        "not supported by autobatch",
        1,
        17,
    );
    check_err(
        "fn f() -> f64 { let x = 1.0; x as [f64; 2] }",
        "scalar types only",
        1,
        35,
    );
    check_err("fn f() { let x = 'c'; }", "this kind of literal", 1, 18);
    check_err(
        "fn f(i: usize, j: usize) { let x = [1, 2][i..j]; }",
        "a range whose end is not its start plus a length",
        1,
        43,
    );
    check_err(
        "fn f() { let x = [1, 2][2..1]; }",
        "a range that ends before it starts",
        1,
        25,
    );
    check_err("fn f(x: f64) -> f64 { x? }", "the `?` operator", 1, 23);
    check_err(
        "fn f() { fn g() {} }",
        "defined inside another function",
        1,
        10,
    );
    check_err("fn f() { let x: i64; }", "`let` without a value", 1, 10);
    check_err("fn f() { let [a, b] = [1, 2]; }", "this pattern", 1, 14);
}

#[test]
fn checks_host_calls_against_their_declarations() {
    check(
        "extern \"autobatch\" { fn h(x: f64, v: [f64; N]) -> [i64; 2]; }\nfn g(x: f64, v: [f64; N]) -> [i64; 2] { h(x, v) }",
    )
    .expect("a call that fits the declaration");
    check_err(
        "extern \"autobatch\" { fn h(x: f64) -> f64; }\nfn g(x: i64) -> f64 { h(x) }",
        "argument 1 (`x`) of `h` must be `f64`, but this is `i64`",
        2,
        25,
    );
    check_err(
        "extern \"autobatch\" { fn h(x: f64) -> f64; }\nfn g(x: f64) -> f64 { h(x, x) }",
        "`h` takes 1 argument(s), but 2 were given",
        2,
        23,
    );
    check_err(
        "extern \"autobatch\" { fn h(p: (f64, f64)) -> f64; }\nfn g(x: f64) -> f64 { h((x, x)) }",
        "parameter `p` of host primitive `h` is not a number, a `bool` or an array",
        1,
        27,
    );
    check_err(
        "extern \"autobatch\" { fn h(x: f64) -> (f64, f64); }\nfn g(x: f64) -> f64 { h(x).0 }",
        "the result of host primitive `h` is not a number, a `bool` or an array",
        1,
        22,
    );
    check_err(
        "extern \"autobatch\" { fn h(x: f64) -> f64; }\nfn f(x: f64) -> f64 { h(x) * x }\nfn g(x: f64) -> f64 { grad(f, x) }",
        "cannot differentiate through the host primitive `h`",
        2,
        23,
    );
}

#[test]
fn accepts_grad_and_value_and_grad() {
    let m = check(
        "fn f(x: [f64; 3]) -> f64 { dot(x, x) }\n\
         fn n2<const K: usize>(v: [f32; K]) -> f32 { sum(v * v) }\n\
         fn g(x: [f64; 3]) -> [f64; 3] { grad(f, x) }\n\
         fn h(x: [f64; 3]) -> (f64, [f64; 3]) { value_and_grad(f, x) }\n\
         fn k(x: [f32; 2]) -> [f32; 2] { grad(n2, x) + grad(n2::<2>, x) }",
    )
    .expect("accepted");
    assert_eq!(m.functions.len(), 5);
}

/// `grad(f, x, d..)`: the data arguments go to `f`'s other parameters (of
/// any type: integers, bools, tuples, ragged arrays), const generics are
/// inferred from them too, and control may depend on them (not on `x`).
#[test]
fn accepts_grad_with_data_arguments() {
    check_ok(
        "fn f(x: [f64; 2], xs: [f64; L], p: (i64, bool)) -> f64 {\n\
           let mut s = 0.0;\n\
           for i in 0..xs.len() { if p.1 && xs[i] > 0.0 { s += x[0] * xs[i]; } }\n\
           s + x[1] * p.0 as f64\n\
         }\n\
         fn k<const K: usize>(x: f64, v: [f64; K]) -> f64 { x * sum(v) }\n\
         fn h(x: [f64; 2], n: i64) -> [f64; 2] { x * n as f64 }\n\
         fn g(x: [f64; 2], xs: [f64; L]) -> ([f64; 2], f64, [[f64; 2]; 2]) {\n\
           let (v, d) = value_and_grad(f, x, xs, (3, true));\n\
           (grad(f, x, xs, (1, false)) + d, v + grad(k, 1.0, xs) + grad(k::<2>, 1.0, x), jacobian(h, x, 2))\n\
         }",
    );
}

#[test]
fn rejects_grad_of_what_is_not_a_scalar_function_of_one_float() {
    let cases: &[(&str, &str, u32, u32)] = &[
        (
            "fn g(x: f64) -> f64 { grad(sigmoid, x) }",
            "`sigmoid` is a builtin",
            1,
            28,
        ),
        (
            "fn g(x: f64) -> f64 { grad(x, x) }",
            "`x` is a variable",
            1,
            28,
        ),
        (
            "fn g(x: f64) -> f64 { grad(nope, x) }",
            "cannot find function `nope`",
            1,
            28,
        ),
        (
            "fn g(x: f64) -> f64 { grad(g) }",
            "takes at least 2 arguments",
            1,
            23,
        ),
        (
            "fn g(x: f64) -> f64 { grad::<3>(g, x) }",
            "takes no generic arguments",
            1,
            29,
        ),
        (
            "fn f(a: f64, b: f64) -> f64 { a * b }\nfn g(x: f64) -> f64 { grad(f, x) }",
            "`grad` passes `f` the point and 0 data arguments, but `f` takes 1 parameter after the point",
            2,
            23,
        ),
        (
            "fn f(a: f64) -> f64 { a }\nfn g(x: f64) -> f64 { grad(f, x, x) }",
            "`grad` passes `f` the point and 1 data argument, but `f` takes 0 parameters after the point",
            2,
            34,
        ),
        (
            "fn f(a: f64, n: i64) -> f64 { a }\nfn g(x: f64) -> f64 { grad(f, x, x) }",
            "`grad` passes this data argument to the parameter `n` of `f`, of type `i64`, but this is `f64`",
            2,
            34,
        ),
        (
            "fn f() -> f64 { 1.0 }\nfn g(x: f64) -> f64 { grad(f, x) }",
            "with respect to its first parameter, but `f` takes none",
            2,
            28,
        ),
        (
            "fn f(a: i64) -> f64 { a as f64 }\nfn g(x: i64) -> i64 { grad(f, x) }",
            "needs a float parameter",
            2,
            28,
        ),
        (
            "fn f(a: [f64; 2]) -> [f64; 2] { a }\nfn g(x: [f64; 2]) -> [f64; 2] { grad(f, x) }",
            "returning a float scalar",
            2,
            38,
        ),
        (
            "fn f(a: f64) -> i64 { a as i64 }\nfn g(x: f64) -> i64 { grad(f, x) }",
            "returning a float scalar",
            2,
            28,
        ),
        (
            "fn f(a: [f64; 2]) -> f64 { sum(a) }\nfn g(x: [f64; 3]) -> [f64; 3] { grad(f, x) }",
            "at a point of its parameter type `[f64; 2]`, but this is `[f64; 3]`",
            2,
            41,
        ),
    ];
    for (src, msg, line, col) in cases {
        check_err(src, msg, *line, *col);
    }
}

#[test]
fn rejects_what_cannot_be_differentiated() {
    let head = "fn g(x: f64) -> f64 { grad(f, x) }\n";
    let cases: &[(&str, &str, u32, u32)] = &[
        ("fn f(x: f64) -> f64 { let mut y = x; while y > 1.0 { y = y / 2.0; } y }", "`while` loop whose condition depends", 2, 44),
        ("fn f(x: f64) -> f64 { let mut y = x; loop { y = y * 2.0; if y > 9.0 { return y; } } }", "`return` from a loop under a condition", 2, 61),
        ("fn f(x: f64) -> f64 { let mut y = x; for i in 0..3 { if y > 1.0 { break; } y = y * 2.0; } y }", "`break` from a loop under a condition", 2, 57),
        ("fn f(x: f64) -> f64 { let n = x as i64; let mut y = x; for i in 0..n { y = y * 2.0; } y }", "bounds depend on the differentiated value", 2, 68),
        ("fn f(x: f64) -> f64 { let mut n = 2; if x > 0.0 { n = 3; } let mut y = x; for i in 0..n { y = y * 2.0; } y }", "bounds depend", 2, 87),
        ("fn f(x: f64) -> f64 { h(x, x as usize) }\nfn h(a: f64, n: usize) -> f64 { let mut y = a; for i in 1..=n { y = y * a; } y }", "bounds depend", 3, 61),
        ("fn f(x: f64) -> f64 { x * uniform() }", "random draw `uniform`", 2, 27),
        ("fn f(x: f64) -> f64 { x + h(x) }\nfn h(a: f64) -> f64 { if a > 1.0 { h(a / 2.0) } else { a } }", "recursive function `h`", 3, 26),
        ("fn f(x: f64) -> f64 { grad(k, x) }\nfn k(a: f64) -> f64 { a * a }", "inside differentiated code", 2, 23),
    ];
    for (body, msg, line, col) in cases {
        check_err(&format!("{head}{body}"), msg, *line, *col);
    }
}

#[test]
fn loops_and_recursion_are_differentiated_when_their_control_does_not_depend_on_the_point() {
    let head = "fn g(x: f64) -> f64 { grad(f, x) }\n";
    let cases: &[&str] = &[
        "fn f(x: f64) -> f64 { let mut i = 0; let mut y = x; while i < 4 { if y > 0.0 { y = y * 0.5; } y = y.sin(); i += 1; } y }",
        "fn f(x: f64) -> f64 { let mut i = 0; let y = loop { i += 1; if i == 3 { break x * 2.0; } }; y }",
        "fn f(x: f64) -> f64 { let mut s = 0.0; for i in 0..4 { if x > 1.0 { continue; } if i == 2 { break; } s += x; } s }",
        "fn f(x: f64) -> f64 { let mut s = x; for i in 0..3 { if x > 0.0 { for j in 0..2 { if j == i { break; } s += x; } } } s }",
        "fn f(x: f64) -> f64 { ev(x, 4) }\nfn ev(a: f64, n: i64) -> f64 { if n <= 0 { a } else { od(a * 2.0, n - 1) } }\nfn od(a: f64, n: i64) -> f64 { if n == 0 || n > 100 { a.sin() } else { ev(a, n - 1) } }",
        "fn f(x: f64) -> f64 { h(x, 3) }\nfn relu(a: f64) -> f64 { if a > 0.0 { a } else { 0.0 } }\nfn h(a: f64, n: i64) -> f64 { if n == 0 { a } else { relu(h(a, n - 1)) - 0.5 } }",
        "fn f(x: f64) -> f64 { h(x, 3) }\nfn h(a: f64, n: i64) -> f64 { let mut k = n; let mut s = a; while k > 0 { s = s * a; k -= 1; } if n == 0 { s } else { h(s.sin(), n - 1) + s } }",
    ];
    for body in cases {
        check_ok(&format!("{head}{body}"));
    }
}

#[test]
fn control_of_loops_and_recursion_may_not_depend_on_the_point() {
    let head = "fn g(x: f64) -> f64 { grad(f, x) }\n";
    let cases: &[(&str, &str, u32, u32)] = &[
        ("fn f(x: f64) -> f64 { let mut n = 0; for i in 0..4 { if x > i as f64 { continue; } n += 1; } let mut s = 0.0; let mut k = 0; while k < n { s += x; k += 1; } s }", "`while` loop whose condition depends", 2, 132),
        ("fn f(x: f64) -> f64 { let mut i = 0; let mut y = x; while i < 3 { y = y * 2.0; if y > 4.0 { i = 5; } i += 1; } y }", "`while` loop whose condition depends", 2, 59),
        ("fn f(x: f64) -> f64 { let v = loop { break x as i64; }; let mut k = 0; while k < v { k += 1; } x }", "`while` loop whose condition depends", 2, 78),
        ("fn f(x: f64) -> f64 { for i in 0..3 { if x > i as f64 { return x; } } 0.0 }", "`return` from a loop under a condition", 2, 42),
        ("fn f(x: f64) -> f64 { for i in 0..3 { if x > 0.0 { for j in 0..2 { return x; } } } 0.0 }", "`return` from a loop under a condition", 2, 42),
        ("fn f(x: f64) -> f64 { let mut y = x; while { if y < 1.0 { return y; } true } { y = y / 2.0; } y }", "`return` from a loop under a condition", 2, 49),
        ("fn f(x: f64) -> f64 { let mut i = 0; loop { i += 1; if i > 2 && x > 1.0 { break; } } x }", "`break` from a loop under a condition", 2, 56),
        ("fn f(x: f64) -> f64 { h(x, 3) }\nfn h(a: f64, n: i64) -> f64 { let stop = a > 5.0 || n == 0; select(stop, a, h(a * 2.0, n - 1)) }", "recursive function `h`", 3, 42),
        ("fn f(x: f64) -> f64 { ev(x, 4) }\nfn ev(a: f64, n: i64) -> f64 { if n <= 0 { a } else { od(a, n - 1) } }\nfn od(a: f64, n: i64) -> f64 { ev(a * 0.5, n - (a as i64)) }", "recursive function `ev`", 3, 35),
        ("fn f(x: f64) -> f64 { ev(x, 4) }\nfn ev(a: f64, n: i64) -> f64 { if n <= 0 { a } else { od(a, n - 1) } }\nfn od(a: f64, n: i64) -> f64 { if a > 0.0 { ev(a * 0.5, n) } else { a } }", "recursive function `od`", 4, 35),
    ];
    for (body, msg, line, col) in cases {
        check_err(&format!("{head}{body}"), msg, *line, *col);
    }
}

// ---------------------------------------------------------------- names

#[test]
fn rejects_unknown_names() {
    check_err("fn f() -> i64 { y }", "cannot find value `y`", 1, 17);
    check_err("fn f() -> i64 { g(1) }", "cannot find function `g`", 1, 17);
    check_err(
        "fn f(x: i64) -> i64 { x(1) }",
        "is a variable, not a function",
        1,
        23,
    );
    check_err(
        "fn f() -> i64 { let v = f; 1 }",
        "functions are not values",
        1,
        25,
    );
    check_err(
        "fn f() -> i64 { { let y = 1; } y }",
        "cannot find value `y`",
        1,
        32,
    );
}

#[test]
fn an_unknown_method_lists_the_methods_by_receiver() {
    // The list comes from the table of operations (`autobatch_ops`).
    let Err(ds) = check("fn f(x: f64) -> f64 { x.iter() }") else {
        panic!("`.iter()` accepted");
    };
    assert_eq!(
        ds[0].message,
        "the method `iter` is not supported by autobatch"
    );
    assert_eq!(
        ds[0].notes,
        ["methods: abs exp exp_m1 ln ln_1p log10 sqrt sin cos tan atan tanh floor ceil round signum recip \
          powi powf atan2 max min is_nan is_finite (floats); abs max min pow (integers); len (arrays)"]
    );
}

#[test]
fn rejects_wrong_arity() {
    check_err(
        "fn g(a: i64) -> i64 { a }\nfn f() -> i64 { g(1, 2) }",
        "takes 1 argument(s), but 2 were given",
        2,
        17,
    );
    check_err(
        "fn f(a: [f64; 3]) -> f64 { dot(a) }",
        "`dot` takes 2 argument(s)",
        1,
        28,
    );
    check_err(
        "fn f(a: f64) -> f64 { a.sqrt(2.0) }",
        "takes 0 argument(s)",
        1,
        23,
    );
    check_err(
        "fn f(a: f64, b: f64) -> f64 { max(a, b) }",
        "takes 1 argument(s)",
        1,
        31,
    );
}

// ---------------------------------------------------------------- types

#[test]
fn rejects_mixed_scalar_types() {
    check_err(
        "fn f(a: i64, b: f64) -> f64 {\n    a + b\n}",
        "cannot apply `+` to `i64` and `f64`",
        2,
        5,
    );
    check_err(
        "fn f(a: i32, b: i64) -> bool { a < b }",
        "cannot compare `i32` with `i64`",
        1,
        32,
    );
    check_err(
        "fn f() -> f64 { let x: f64 = 1; x }",
        "expected `f64`, found `{integer}`",
        1,
        30,
    );
    check_err("fn f() -> i64 { 1.5 }", "returns `i64`", 1, 17);
    check_err(
        "fn f(x: f64) -> bool { x && true }",
        "`&&` needs `bool` operands",
        1,
        24,
    );
    check_err("fn f(x: i64) { if x { } }", "must be a `bool`", 1, 19);
    check_err(
        "fn f(x: f64) -> f64 { x & 1.0 }",
        "needs `bool` or integer operands",
        1,
        23,
    );
    check_err(
        "fn f(x: bool) -> bool { x + x }",
        "needs numeric operands",
        1,
        25,
    );
    check_err(
        "fn f(x: f64) -> f64 { x << 1 }",
        "needs integer operands",
        1,
        23,
    );
    check_err("fn f(n: usize) -> usize { -n }", "`usize`", 1, 27);
    check_err(
        "fn f() -> usize { let n: usize = 1; let m = -n; m }",
        "`usize`",
        1,
        45,
    );
    check_err("fn f() -> usize { -1 }", "negative", 1, 19);
    check_err("fn f() -> i32 { 3000000000 }", "does not fit", 1, 17);
    check_err("fn f(x: f64) -> f64 { !x }", "cannot apply `!`", 1, 23);
    check_err(
        "fn f(x: i64) -> f64 { x.sqrt() }",
        "method of floats",
        1,
        23,
    );
    check_err(
        "fn f(x: f64) -> f64 { x.powi(2.0) }",
        "`i32` exponent",
        1,
        30,
    );
    check_err(
        "fn f(x: f64) -> f64 { x.pow(2) }",
        "method of integers",
        1,
        23,
    );
    check_err(
        "fn f(x: f64) -> bool { x as bool }",
        "cannot cast `f64` as `bool`",
        1,
        24,
    );
    check_err(
        "fn f(x: bool) -> f64 { x as f64 }",
        "cannot cast `bool` as `f64`",
        1,
        24,
    );
    // An array casts element by element: its shape stays.
    check_err(
        "fn f(x: [f64; 2]) -> f64 { x as f32 }",
        "body ends with a value of type `[f32; 2]`",
        1,
        28,
    );
    check_err(
        "fn f(x: [bool; 2]) -> [f64; 2] { x as f64 }",
        "cannot cast `[bool; 2]` as `f64`",
        1,
        34,
    );
    check_err(
        "fn f(x: (f64, f64)) -> f64 { x as f64 }",
        "converts scalars and arrays",
        1,
        30,
    );
    check_err("fn f(x: f64) -> f64 { x[0] }", "cannot index into", 1, 23);
    check_err(
        "fn f(x: [f64; 2]) -> f64 { x[1.0] }",
        "index must be an integer",
        1,
        30,
    );
    check_err("fn f(t: (i64, i64)) -> i64 { t.2 }", "no field `2`", 1, 32);
    check_err("fn f(t: i64) -> i64 { t.0 }", "needs a tuple", 1, 23);
    check_err(
        "fn f(t: (i64, i64)) -> i64 { t.x }",
        "fields by name",
        1,
        32,
    );
    check_err(
        "fn f() -> bool { bernoulli(1) }",
        "`f64` probability",
        1,
        28,
    );
    check_err(
        "fn f(a: [i64; 3]) -> f64 { mean(a) }",
        "1-D float array",
        1,
        33,
    );
    check_err("fn f() { let x = []; }", "empty array literal", 1, 18);
    check_err("fn f() { let x = [1, 2.0]; }", "must have one type", 1, 22);
}

#[test]
fn rejects_shape_mismatches() {
    check_err(
        "fn f(a: [f64; 3], b: [f64; 4]) -> [f64; 3] {\n    a + b\n}",
        "shape mismatch",
        2,
        5,
    );
    check_err(
        "fn f(a: [f64; 3], b: [f64; 4]) -> f64 { dot(a, b) }",
        "shape mismatch: `dot`",
        1,
        41,
    );
    check_err(
        "fn f(m: [[f64; 3]; 2], v: [f64; 2]) -> [f64; 2] { matvec(m, v) }",
        "shape mismatch: `matvec`",
        1,
        51,
    );
    check_err(
        "fn f(a: [f64; N], b: [f64; M]) -> [f64; N] { a * b }",
        "shape mismatch",
        1,
        46,
    );
    check_err(
        "fn f(a: [f64; 3], b: [f64; 3]) -> bool { a < b }",
        "comparisons apply to scalars only",
        1,
        42,
    );
    check_err("fn n2<const K: usize>(v: [f64; K], w: [f64; K]) -> f64 { dot(v, w) }\nfn g(a: [f64; 3], b: [f64; 4]) -> f64 { n2(a, b) }", "argument 2 (`w`) of `n2` must be `[f64; 3]`", 2, 47);
    check_err(
        "fn z<const K: usize>() -> [f64; K] { [0.0; K] }\nfn g() -> [f64; 4] { z() }",
        "cannot infer the const parameter `K`",
        2,
        22,
    );
    check_err(
        "fn f(m: [f64; 3]) -> f64 { transpose(m)[0] }",
        "a matrix",
        1,
        38,
    );
    check_err(
        "fn f(x: f64) -> [f64; 2] { let n = 2; [x; n] }",
        "is a variable",
        1,
        43,
    );
    check_err(
        "fn f(a: [f64; 3]) -> f64 { let mut s = 0.0; s += a; s }",
        "would change `f64` into `[f64; 3]`",
        1,
        45,
    );
}

#[test]
fn rejects_mutation_of_immutables() {
    check_err(
        "fn f() -> i64 {\n    let x = 1;\n    x = 2;\n    x\n}",
        "cannot assign to `x`, which is not declared `mut`",
        3,
        5,
    );
    check_err(
        "fn f(x: i64) -> i64 { x += 1; x }",
        "not declared `mut`",
        1,
        23,
    );
    check_err(
        "fn f(a: [f64; 2]) -> f64 { a[0] = 1.0; a[0] }",
        "not declared `mut`",
        1,
        28,
    );
    check_err(
        "extern \"autobatch\" { static X: f64; }\nfn f() { X = 1.0; }",
        "statics are read-only",
        2,
        10,
    );
    check_err(
        "const C: i64 = 1;\nfn f() { C = 2; }",
        "cannot assign to the constant",
        2,
        10,
    );
    check_err(
        "fn f() { let mut a = 1; let mut b = 2; (a, b) = (b, a); }",
        "destructuring assignment",
        1,
        40,
    );
}

#[test]
fn rejects_control_flow_errors() {
    check_err("fn f() { break; }", "`break` outside of a loop", 1, 10);
    check_err(
        "fn f() { continue; }",
        "`continue` outside of a loop",
        1,
        10,
    );
    check_err(
        "fn f() { while true { break 1; } }",
        "only allowed inside `loop`",
        1,
        23,
    );
    check_err(
        "fn f(x: i64) -> i64 {\n    if x > 0 { return 1; }\n}",
        "must return a value of type `i64`",
        3,
        1,
    );
    check_err(
        "fn f(x: i64) -> i64 { let y = x; }",
        "must return a value of type `i64`",
        1,
        34,
    );
    check_err(
        "fn f(x: i64) -> i64 { if x > 0 { 1 } }",
        "has no `else`",
        1,
        34,
    );
    check_err(
        "fn f(x: i64) -> i64 { if x > 0 { 1 } else { 2.0 } }",
        "`if` and `else` have different types",
        1,
        43,
    );
    check_err(
        "fn f() -> i64 { return; }",
        "`return` without a value",
        1,
        17,
    );
    check_err(
        "fn f() -> i64 { let x = loop { if true { break 1; } break 2.0; }; x }",
        "an earlier `break`",
        1,
        53,
    );
    check_err("fn f() { for i in 0.0..1.0 { } }", "integer bounds", 1, 19);
    check_err(
        "fn f(v: [f64; 3]) { for x in v { } }",
        "integer ranges",
        1,
        30,
    );
    check_err(
        "fn f(a: i32, b: i64) { for i in a..b { } }",
        "must have one type",
        1,
        36,
    );
    check_err("fn f() { for i in 0.. { } }", "needs both bounds", 1, 19);
    check_err("fn f() -> i64 { 1 2 }", "syntax error", 1, 19);
    check_err("fn f() { 1 }", "returns `()`", 1, 10);
}

#[test]
fn rejects_bad_asserts() {
    check_err("fn f() { assert!(1); }", "must be a `bool`", 1, 18);
    check_err(
        "fn f(x: i64) { assert!(x > 0, \"x = {}\", x); }",
        "formatting arguments",
        1,
        41,
    );
    check_err(
        "fn f(x: i64) { assert!(x > 0, \"x = {}\"); }",
        "placeholder",
        1,
        31,
    );
    check_err("fn f() { assert!(); }", "needs a condition", 1, 10);
    check_err(
        "fn f(x: i64) { assert!(x > 0, x); }",
        "must be a string literal",
        1,
        31,
    );
}

// ---------------------------------------------------------------- robustness

#[test]
fn deep_parentheses_give_a_clear_error() {
    let depth = 100_000;
    let src = format!(
        "fn f() -> i64 {{ {}1{} }}",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let ds = check(&src).expect_err("too deep");
    assert!(
        ds[0].message.contains("nested too deeply"),
        "{}",
        ds[0].message
    );
}

#[test]
fn moderately_nested_parentheses_are_fine() {
    let depth = 200;
    check_ok(&format!(
        "fn f() -> i64 {{ {}1{} }}",
        "(".repeat(depth),
        ")".repeat(depth)
    ));
}

#[test]
fn long_flat_sums_compile_or_give_a_clear_error() {
    let short = format!("fn f() -> i64 {{ {} }}", vec!["1"; 5_000].join(" + "));
    check_ok(&short);
    let long = format!("fn f() -> i64 {{ {} }}", vec!["1"; 100_000].join(" + "));
    if let Err(ds) = check(&long) {
        assert!(
            ds[0].message.contains("too long") || ds[0].message.contains("too deeply"),
            "{}",
            ds[0].message
        );
    }
}

#[test]
fn long_prefix_chains_give_a_clear_error() {
    for op in ["-", "!"] {
        let src = format!("fn f() -> i64 {{ {}1 }}", op.repeat(100_000));
        let ds = check(&src).expect_err("too deep");
        assert!(
            ds[0].message.contains("nested too deeply"),
            "{}",
            ds[0].message
        );
    }
    let src = format!("fn f() {{ let mut a = 0; {} 1; }}", "a = ".repeat(100_000));
    let ds = check(&src).expect_err("too deep");
    assert!(
        ds[0].message.contains("nested too deeply"),
        "{}",
        ds[0].message
    );
}

#[test]
fn renders_with_file_line_and_column() {
    let src = "fn f() -> i64 {\n    let x = 1.5;\n    x\n}\n";
    let ds = check(src).expect_err("mismatch");
    let text = ds[0].render(src, "prog.ab", false);
    assert!(text.contains("prog.ab"), "{text}");
    assert!(text.contains("3:5") || text.contains(":3:"), "{text}");
    assert!(text.contains("    x"), "{text}");
}

// ------------------------------------------- messages that named the wrong thing

#[test]
fn many_functions_are_accepted() {
    // The nesting limit is per expression: many functions in one file
    // never add up to "expression nested too deeply".
    let src: String = (0..10_050)
        .map(|i| format!("fn f{i}(x: i64) -> i64 {{ x + {i} }}\n"))
        .collect();
    check_ok(&src);
}

#[test]
fn many_statements_after_blocks_are_accepted() {
    let body: String = (0..10_050).map(|_| "if x < 1 { y = -y; }\n").collect();
    check_ok(&format!(
        "fn f(x: i64) -> i64 {{ let mut y = 1; {body} y }}"
    ));
}

#[test]
fn deeply_nested_type_is_called_a_type() {
    let mut ty = "f64".to_string();
    for _ in 0..300 {
        ty = format!("[{ty}; 2]");
    }
    let src = format!("fn f(x: {ty}) -> f64 {{ 1.0 }}");
    check_err(&src, "type nested too deeply", 1, 264);
    let src = format!("fn f() -> f64 {{ let x: {ty} = 0.0; 1.0 }}");
    check_err(&src, "type nested too deeply", 1, 279);
    // An array value nested as deeply is still an expression.
    let value = format!("{}0.0{}", "[".repeat(300), "]".repeat(300));
    let src = format!("fn f() -> f64 {{ let x = {value}; 1.0 }}");
    check_err(&src, "expression nested too deeply", 1, 280);
}

#[test]
fn array_lengths_beyond_the_largest_array_are_out_of_range() {
    check_err(
        "fn f(x: [f64; 18446744073709551616]) -> f64 { 1.0 }",
        "the array length 18446744073709551616 is out of range",
        1,
        15,
    );
    check_err(
        "fn f(x: [bool; 18446744073709551615]) -> f64 { 1.0 }",
        "the array length 18446744073709551615 is out of range",
        1,
        16,
    );
    check_err(
        "fn f() -> f64 { let a = [0.0; 18446744073709551616]; a[0] }",
        "the array length 18446744073709551616 is out of range",
        1,
        31,
    );
    check_err(
        "fn f(x: [f64; 4611686018427387904]) -> f64 { 1.0 }",
        "array lengths out of range",
        1,
        9,
    );
    check_err(
        "fn f(x: [[i32; 4294967296]; 4294967296]) -> f64 { 1.0 }",
        "array lengths out of range",
        1,
        9,
    );
    check_err(
        "fn f() -> f64 { let a = [[0.0; 65536]; 281474976710656]; a[0][0] }",
        "array lengths out of range",
        1,
        25,
    );
    check_err(
        "const A: usize = 18446744073709551615; fn f(x: [f64; A + 1]) -> f64 { 1.0 }",
        "overflow",
        1,
        54,
    );
    // Large but addressable, and empty, arrays are types like any other.
    check_ok("fn f(x: [bool; 9223372036854775807]) -> f64 { 1.0 }");
    check_ok("fn f(x: [[f64; 0]; 9223372036854775807]) -> f64 { 1.0 }");
}

// ---------------------------------------------------------------- instances

/// The type the checker gives the tail expression of the last function.
fn tail_type(src: &str) -> autobatch_frontend::hir::Ty {
    let m = check(src).unwrap_or_else(|ds| panic!("{src}\n{}", ds[0].message));
    let f = m.functions.last().expect("a function");
    f.body.tail.as_ref().expect("a tail").ty.clone()
}

#[test]
fn accepts_join_map_and_pfor() {
    check_ok(
        "fn sq(x: i64) -> i64 { x * x }\n\
         fn pair(p: (i64, f64)) -> (f64, i64) { (p.1, p.0) }\n\
         fn tree(d: i64) -> i64 { if d <= 0 { 1 } else { let (a, b) = join(tree(d - 1), tree(d - 2)); a + b } }\n\
         fn f(x: i64) -> (i64, (f64, i64), i64) { join(sq(x), pair((x, 0.5)), (tree(x))) }",
    );
    // map: an element, then the other arguments; a generic callee inferred
    // from the element; literals typed by the callee's parameters.
    check_ok(
        "fn poly(x: f32, a: f32, b: (f32, bool)) -> f32 { if b.1 { a * x + b.0 } else { x } }\n\
         fn scale<const K: usize>(v: [f64; K], c: f64) -> [f64; K] { v * c }\n\
         fn f(xs: [f32; 4], m: [[f64; 3]; N]) -> ([f32; 4], [[f64; 3]; N], [f32; 2], [f32; 0]) {\n\
             (map(poly, xs, 2.0, (1.0, true)), map(scale, m, 0.5), map(poly, [1.0, 2.0], 1.0, (0.0, false)), map(poly, [0.0; 0], 1.0, (0.0, true)))\n\
         }",
    );
    // pfor: counts that are numbers, constants, const expressions, const
    // generics and symbolic dimensions; a generic callee given explicitly.
    check_ok(
        "const C: usize = 2;\n\
         fn g(k: i64, v: [f64; N]) -> f64 { v[k as usize] }\n\
         fn z<const K: usize>(k: i64) -> [f64; K] { [k as f64; K] }\n\
         fn h<const M: usize>(v: [f64; N]) -> [f64; M] { pfor::<M>(g, v) }\n\
         fn f(v: [f64; N]) -> ([f64; N], [f64; 3], [f64; C], [f64; 4], [[f64; 2]; 3]) {\n\
             (pfor::<N>(g, v), h::<3>(v), pfor::<C>(g, v), pfor::<{ 2 * C }>(g, v), pfor::<3>(z::<2>))\n\
         }",
    );
    // A function of the program named like a form is called as a function.
    check_ok("fn map(x: i64) -> i64 { x }\nfn f(x: i64) -> i64 { map(x) }");
}

#[test]
fn instance_forms_have_the_types_of_their_results() {
    use autobatch_frontend::hir::{DimExpr, TensorTy, Ty};
    use autobatch_types::ScalarType::{Bool, F64, I64};
    let arr = |elem, dims: Vec<DimExpr>| Ty::Tensor(TensorTy::new(elem, dims));
    assert_eq!(
        tail_type(
            "fn s(x: f64) -> (f64, bool) { (x, x > 0.0) }\n\
             fn f(xs: [f64; 5]) -> ([f64; 5], [bool; 5]) { map(s, xs) }"
        ),
        Ty::Tuple(vec![
            arr(F64, vec![DimExpr::Fixed(5)]),
            arr(Bool, vec![DimExpr::Fixed(5)])
        ])
    );
    assert_eq!(
        tail_type(
            "fn r(k: i64) -> [i64; 2] { [k, k] }\n\
             fn f<const M: usize>() -> [[i64; 2]; M] { pfor::<M>(r) }"
        ),
        arr(I64, vec![DimExpr::Generic(0), DimExpr::Fixed(2)])
    );
    assert_eq!(
        tail_type(
            "fn a(x: i64) -> i64 { x }\n\
             fn b(x: i64) -> (f64, ()) { (x as f64, ()) }\n\
             fn f(x: i64) -> (i64, (f64, ())) { join(a(x), b(x)) }"
        ),
        Ty::Tuple(vec![
            Ty::scalar(I64),
            Ty::Tuple(vec![Ty::scalar(F64), Ty::unit()])
        ])
    );
}

#[test]
fn instance_forms_accept_arguments_that_never_finish() {
    // An argument of type `!` fits any parameter; a `map` over an array that
    // never finishes never finishes either.
    check_ok(
        "fn f(x: f64) -> f64 { x }\n\
         fn g(k: i64, x: f64) -> f64 { x }\n\
         fn a(x: [f64; 3]) -> [f64; 3] { let y = map(f, return x); y }\n\
         fn b(x: [f64; 3]) -> [f64; 3] { pfor::<3>(g, return x) }\n\
         fn c(x: f64) -> (f64, f64) { join(f(return (x, x)), f(x)) }\n\
         fn d(x: f64) -> [f64; 2] { loop { let y: [f64; 2] = map(f, break [x; 2]); } }",
    );
    assert_eq!(
        tail_type("fn f(x: f64) -> f64 { x }\nfn a(x: f64) -> f64 { map(f, return x) }"),
        autobatch_frontend::hir::Ty::Never
    );
}

#[test]
fn rejects_misused_instance_forms() {
    let f = "fn f(x: f64) -> f64 { x }\nfn g(k: i64, x: f64) -> f64 { x }\n";
    let cases: &[(&str, &str, u32, u32)] = &[
        (
            "fn h(x: f64) -> () { join() }",
            "`join` takes two calls or more, but none was given",
            3,
            22,
        ),
        (
            "fn h(x: f64) -> (f64, f64) { join::<1>(f(x), f(x)) }",
            "`join` takes no generic arguments",
            3,
            36,
        ),
        (
            "fn h(x: f64) -> (f64, f64) { join(f(x), map(f, [x])) }",
            "`map(..)` is not one",
            3,
            41,
        ),
        (
            "fn h(x: f64) -> (f64, f64) { join(f(x), x.exp()) }",
            "`.exp()` is a method",
            3,
            41,
        ),
        (
            "fn h(x: f64) -> (f64, f64) { join(f(x), exp(x)) }",
            "`exp` is a builtin",
            3,
            41,
        ),
        (
            "fn h(x: f64) -> (f64, f64) { join(f(x), x(1.0)) }",
            "`x` is a variable, not a function",
            3,
            41,
        ),
        (
            "fn h(x: f64) -> (f64, f64) { join(f(x), g(x, x)) }",
            "argument 1 (`k`) of `g` must be `i64`",
            3,
            43,
        ),
        (
            "fn h(x: f64) -> (f64, f64) { join(f(x), f(x, x)) }",
            "`f` takes 1 argument(s), but 2 were given",
            3,
            41,
        ),
        (
            "fn h(x: [f64; 2]) -> [f64; 2] { map::<2>(f, x) }",
            "`map` takes no generic arguments",
            3,
            38,
        ),
        (
            "fn h(x: [f64; 2]) -> [f64; 2] { map() }",
            "`map` takes a function and an array",
            3,
            33,
        ),
        (
            "fn h(x: [f64; 2]) -> [f64; 2] { map(x, x) }",
            "`x` is a variable",
            3,
            37,
        ),
        (
            "fn h(x: [f64; 2]) -> [f64; 2] { map(|y| y, x) }",
            "this is an expression",
            3,
            37,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { map(f, (x, x)) }",
            "`map` maps over an array, but this is `(f64, f64)`",
            3,
            35,
        ),
        (
            "fn h(x: [i32; 2]) -> [f64; 2] { map(f, x) }",
            "but they are `i32`",
            3,
            40,
        ),
        (
            "fn h(x: [[f64; 2]; 2]) -> [f64; 2] { map(f, x) }",
            "but they are `[f64; 2]`",
            3,
            45,
        ),
        (
            "fn h(x: [f64; 2]) -> [f64; 2] { map(f, x, 1.0) }",
            "`f` takes 1 argument(s), but `map` passes 2",
            3,
            33,
        ),
        (
            "fn h(x: [f64; 2]) -> [f64; 2] { map(g, x, 1.0) }",
            "the first parameter `k` of `g`, which is `i64`",
            3,
            40,
        ),
        (
            "fn h(x: [i64; 2]) -> [f64; 2] { map(g, x, 1) }",
            "argument 2 (`x`) of `g` must be `f64`, but this is `{integer}`",
            3,
            43,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { pfor::<2>(g, true) }",
            "argument 2 (`x`) of `g` must be `f64`, but this is `bool`",
            3,
            41,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { pfor::<2>(f) }",
            "passes the index of each instance as an `i64`",
            3,
            38,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { pfor::<2.0>(g, x) }",
            "mismatched types: expected `usize`, found a float",
            3,
            35,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { pfor::<g>(g, x) }",
            "cannot be used as an array length",
            3,
            35,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { pfor::<2>(exp, x) }",
            "`exp` is a builtin method",
            3,
            38,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { pfor::<2>(sum, x) }",
            "`sum` is a builtin",
            3,
            38,
        ),
        (
            "fn h(x: f64) -> [f64; 2] { pfor::<2>(g::<3>, x) }",
            "`g` has 0 const generic parameter(s), but 1 were given",
            3,
            41,
        ),
    ];
    for (body, needle, line, column) in cases {
        check_err(&format!("{f}{body}"), needle, *line, *column);
    }
    check_err(
        "fn z<const K: usize>(x: f64) -> [f64; K] { [x; K] }\nfn h(x: [f64; 3]) -> [[f64; 2]; 3] { map(z, x) }",
        "cannot infer the const parameter `K` of `z` from the arguments",
        2,
        38,
    );
    check_err(
        "extern \"autobatch\" { fn p(x: f64) -> f64; }\nfn h(x: [f64; 3]) -> [f64; 3] { map(p, x) }",
        "`map` cannot take the host primitive `p` itself",
        2,
        37,
    );
    check_err(
        "fn f(x: f64) -> [f64; 4294967296] { [x; 4294967296] }\nfn h(x: [f64; 4294967296]) -> f64 { let y = map(f, x); 1.0 }",
        "array lengths out of range",
        2,
        45,
    );
}

#[test]
fn grad_goes_through_instances_and_checks_their_callees() {
    check_ok(
        "fn f(x: f64) -> f64 { x * x }\n\
         fn j(x: f64) -> f64 { let (a, b) = join(f(x), f(x)); a * b }\n\
         fn g(x: f64) -> f64 { grad(j, x) }",
    );
    // A callee of a fork is walked as a call: its control may not depend
    // on the point (the index of `pfor` does not), also when reached through
    // calls.
    check_ok(
        "fn k(i: i64, x: [f64; 2]) -> f64 { if i == 0 { x[0] } else { x[1] * x[1] } }\n\
         fn p(x: [f64; 2]) -> f64 { sum(pfor::<2>(k, x)) }\n\
         fn g(x: [f64; 2]) -> [f64; 2] { grad(p, x) }",
    );
    check_err(
        "fn k(i: i64, x: [f64; 2]) -> f64 { let mut a = x[0]; while a > 1.0 { a = a * 0.5; } a }\n\
         fn p(x: [f64; 2]) -> f64 { sum(pfor::<2>(k, x)) }\n\
         fn q(x: [f64; 2]) -> f64 { p(x) * 2.0 }\n\
         fn g(x: [f64; 2]) -> [f64; 2] { grad(q, x) }",
        "cannot differentiate a `while` loop",
        1,
        60,
    );
    check_err(
        "fn f(x: f64) -> f64 { x + uniform() }\n\
         fn m(x: [f64; 2]) -> f64 { sum(map(f, x)) }\n\
         fn g(x: [f64; 2]) -> [f64; 2] { grad(m, x) }",
        "cannot differentiate the random draw `uniform`",
        1,
        27,
    );
}

// ------------------------------------------- tokens and syntax, as rustc reports them
//
// Each position below is where rustc 1.95 reports the same text (as a
// `.rs` file); where it differs, the comment says how.

/// The one diagnostic of `src`, which must have the labels `labels` (line,
/// column, text) besides its main one, and render with all of them.
fn check_labels(src: &str, labels: &[(u32, u32, &str)]) {
    let ds = check(src).expect_err("expected an error");
    let d = &ds[0];
    for (line, column, text) in labels {
        assert!(
            d.secondary
                .iter()
                .any(|s| s.loc.line == *line && s.loc.column == *column && s.label.contains(text)),
            "expected the label {text:?} at {line}:{column}, got {:?}",
            d.secondary
        );
    }
    let rendered = d.render(src, "test.ab", false);
    for (_, _, text) in labels {
        assert!(rendered.contains(text), "{rendered}");
    }
}

/// The first diagnostic of `src` has a note containing `text`.
fn check_note(src: &str, text: &str) {
    let ds = check(src).expect_err("expected an error");
    assert!(
        ds[0].notes.iter().any(|n| n.contains(text)),
        "expected a note containing {text:?}, got {:?}",
        ds[0].notes
    );
}

#[test]
fn reports_an_unclosed_parenthesis_at_the_parenthesis() {
    let src = "fn f(x: i64) -> i64 {\n    let y = (x + 1;\n    y\n}\n";
    check_err(src, "mismatched closing delimiter: `}`", 2, 13);
    check_labels(
        src,
        &[
            (4, 1, "mismatched closing delimiter"),
            (1, 21, "closing delimiter possibly meant for this"),
        ],
    );
    // A call missing its `)`.
    let src = "fn f() -> i64 {\n    let a = g(1, 2;\n    a\n}\n";
    check_err(src, "mismatched closing delimiter: `}`", 2, 14);
}

#[test]
fn reports_an_unclosed_bracket_and_a_mismatched_pair() {
    check_err(
        "fn f(x: i64) -> i64 {\n    let y = [x, 1;\n    y\n}\n",
        "mismatched closing delimiter: `}`",
        2,
        13,
    );
    let src = "fn f(x: i64) -> i64 {\n    let y = (x + 1];\n    y\n}\n";
    check_err(src, "mismatched closing delimiter: `]`", 2, 13);
    check_labels(src, &[(2, 19, "mismatched closing delimiter")]);
}

#[test]
fn reports_an_unclosed_brace_at_the_brace() {
    // rustc puts its main label at the end of the file and "unclosed
    // delimiter" at 1:21; the opening brace is what needs the fix.
    check_err(
        "fn f(x: i64) -> i64 {\n    let y = x + 1;\n    y\n",
        "unclosed delimiter `{`",
        1,
        21,
    );
    // A brace closed at another indentation is where the `}` went missing.
    let src =
        "fn f(x: bool) -> i64 {\n    if x {\n        1\n    else { 2 }\n}\nfn g() -> i64 { 1 }\n";
    check_err(src, "unclosed delimiter `{`", 1, 22);
    check_labels(
        src,
        &[
            (2, 10, "this delimiter might not be properly closed"),
            (5, 1, "different indentation"),
        ],
    );
}

#[test]
fn reports_an_unexpected_closing_delimiter() {
    // rustc reads this `)` as closing the `{` and reports the final `}`,
    // with a label "missing open `(` for this delimiter" at the `)`.
    check_err(
        "fn f(x: i64) -> i64 {\n    let y = x + 1);\n    y\n}\n",
        "unexpected closing delimiter: `)`",
        2,
        18,
    );
    let src = "fn f() -> i64 {\n    1\n}\n}\n";
    check_err(src, "unexpected closing delimiter: `}`", 4, 1);
    check_labels(
        src,
        &[
            (1, 15, "this opening brace"),
            (3, 1, "matches this closing brace"),
        ],
    );
}

#[test]
fn reports_unterminated_strings_and_comments_at_their_start() {
    check_err(
        "fn f(x: i64) -> i64 {\n    let y = \"abc;\n    y\n}\n",
        "unterminated double quote string",
        2,
        13,
    );
    check_err(
        "fn f(x: i64) -> i64 {\n    /* let y = x;\n    y\n}\n",
        "unterminated block comment",
        2,
        5,
    );
    // Block comments nest: the inner `*/` closes only the inner `/*`.
    check_err(
        "fn f() -> i64 {\n    /* a /* b */ c\n    1\n}\n",
        "unterminated block comment",
        2,
        5,
    );
    check_err(
        "fn f() -> i64 {\n    let a = r#\"1\";\n    a\n}\n",
        "unterminated raw string",
        2,
        13,
    );
    check_err(
        "fn f() -> i64 {\n    let a = “1”;\n    a\n}\n",
        "unknown start of token: `“`",
        2,
        13,
    );
}

#[test]
fn delimiters_in_strings_comments_and_characters_do_not_count() {
    // Each program is balanced once its literals and comments are skipped,
    // so the error is about the literal, not a delimiter.
    check_err(
        "fn f() -> i64 {\n    let s = \"(]\";\n    1\n}\n",
        "string",
        2,
        13,
    );
    check_err(
        "fn f() -> i64 {\n    let c = '{';\n    1\n}\n",
        "this kind of literal",
        2,
        13,
    );
    check_ok("fn f() -> i64 {\n    // ( [\n    /* { /* } */ ) */\n    1\n}\n");
}

#[test]
fn reports_a_missing_semicolon_after_the_statement() {
    let src = "fn f() -> i64 {\n    let a = 1\n    let b = 2;\n    a + b\n}\n";
    check_err(src, "expected `;`, found `let`", 2, 14);
    check_labels(src, &[(3, 5, "found `let`")]);
    check_err(
        "fn f() -> i64 {\n    let a = g(1)\n    a\n}\n",
        "expected `;`, found `a`",
        2,
        17,
    );
    let rendered = check("fn f() -> i64 {\n    let a = 1\n    let b = 2;\n    a + b\n}\n")
        .expect_err("an error")[0]
        .render(src, "test.ab", false);
    assert!(rendered.contains("test.ab:2:14"), "{rendered}");
    assert!(rendered.contains("    let a = 1"), "{rendered}");
    assert!(rendered.contains("expected `;` here"), "{rendered}");
}

#[test]
fn reports_common_slips_where_they_are() {
    // A missing `,` between arguments: at the second argument, as rustc.
    check_err(
        "fn f() -> i64 {\n    let a = g(1 2);\n    a\n}\n",
        "expected `,`, found `2`",
        2,
        17,
    );
    // A `let` without `=`: rustc lists the tokens that may follow (2:11).
    let src = "fn f() -> i64 {\n    let a 1;\n    a\n}\n";
    check_err(src, "expected `;`, found `1`", 2, 11);
    check_note(src, "let name = value;");
    // `=>` for `>=`: at the `=>`, as rustc, with the hint rustc gives.
    let src = "fn f(x: i64) -> bool {\n    let a = x => 1;\n    a\n}\n";
    check_err(src, "expected `;`, found `=>`", 2, 15);
    check_note(src, "write `>=`");
    // A `fn` without a body: rustc reports the next `fn` (2:1) and labels
    // the end of the signature (1:14), where the body belongs.
    let src = "fn f() -> i64\nfn g() -> i64 { 1 }\n";
    check_err(src, "expected `{`, found `fn`", 1, 14);
    check_note(src, "a function needs a body");
    check_err("fn f() -> i64", "found the end of the file", 1, 14);
}

#[test]
fn reports_a_token_that_cannot_start_an_item_where_it_is() {
    // As rustc: "expected item, found keyword `let`" at the `let`.
    check_err(
        "fn f() -> i64 { 1 }\nlet x = 3;\n",
        "expected an item",
        2,
        1,
    );
}
