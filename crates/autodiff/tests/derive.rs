//! The shape of the derived IR: it verifies, statics get no adjoint work,
//! products stay products, control flow stays control flow in the taped
//! derivation (a loop's backward part is a loop, a recursion's calls
//! itself), partial activity is named, and bad requests are refused. (Values are checked
//! against finite differences and hand-written gradients in the `autobatch`
//! crate's `grad` test, which runs every executor.)

use autobatch_autodiff::{derive, Derivative, Request};
use autobatch_ir::{verify::verify_program, FuncId, Function, Op, Prim, Program, Var};

fn compile(source: &str) -> Program {
    let program = autobatch_lower::compile(source).unwrap_or_else(|d| panic!("{d:?}"));
    if let Err(errors) = verify_program(&program) {
        panic!("the derived IR does not verify: {errors:?}");
    }
    program
}

fn function<'p>(p: &'p Program, name: &str) -> &'p Function {
    let id = p
        .function_by_name(name)
        .unwrap_or_else(|| panic!("no function {name}"));
    &p.functions[id]
}

/// A taped derivation's function `name` with the blocks of its forward
/// and backward parts (`name.fwd`, `name.bwd`) added: every operation the
/// gradient runs.
fn whole(p: &Program, name: &str) -> Function {
    let mut f = function(p, name).clone();
    for part in ["fwd", "bwd"] {
        let part = function(p, &format!("{name}.{part}"));
        for b in part.blocks.values() {
            f.blocks.push(b.clone());
        }
    }
    f
}

fn count(f: &Function, pred: impl Fn(&Prim) -> bool) -> usize {
    f.blocks
        .values()
        .flat_map(|b| &b.ops)
        .filter(|op| matches!(op, Op::Prim { prim, .. } if pred(prim)))
        .count()
}

fn calls(f: &Function) -> Vec<FuncId> {
    f.blocks
        .values()
        .flat_map(|b| &b.ops)
        .filter_map(|op| match op {
            Op::Call { callee, .. } => Some(*callee),
            _ => None,
        })
        .collect()
}

#[test]
fn a_static_matrix_gets_no_adjoint() {
    let p = compile(
        "extern \"autobatch\" { static X: [[f64; D]; N]; static Y: [f64; N]; }\n\
         fn ll(t: [f64; D]) -> f64 { let z = matvec(X, t); sum(Y * log_sigmoid(z) + (1.0 - Y) * log_sigmoid(-z)) }\n\
         fn g(t: [f64; D]) -> (f64, [f64; D]) { value_and_grad(ll, t) }",
    );
    assert_eq!(
        function(&p, "ll'grad.fwd").blocks.len(),
        1,
        "straight-line code stays one block"
    );
    let vjp = &whole(&p, "ll'grad");
    assert_eq!(count(vjp, |p| *p == Prim::Matvec), 1, "the forward product");
    assert_eq!(count(vjp, |p| *p == Prim::Vecmat), 1, "the adjoint of θ");
    assert_eq!(count(vjp, |p| *p == Prim::Outer), 0, "no adjoint for X");
    let sigmoid = Prim::Unary(autobatch_ir::UnaryOp::Sigmoid);
    // The adjoints of log_sigmoid(z) and log_sigmoid(-z): σ(-z) and σ(z)
    // (the backward part reads `-z` from the tape, not as a negation).
    assert_eq!(count(vjp, |p| *p == sigmoid), 2);
    assert_eq!(vjp.results.len(), 2);
    assert_eq!(vjp.params.len(), 1, "`grad` needs no adjoint parameter");
}

#[test]
fn the_seed_of_grad_is_folded_away() {
    // The adjoint of `sum(Y * z - softplus(z))` with a seed of one is
    // `Y - σ(z)`: no product by the seed, no negation, no filled array.
    let p = compile(
        "extern \"autobatch\" { static X: [[f64; D]; N]; static Y: [f64; N]; }\n\
         fn ll(t: [f64; D]) -> f64 { let z = matvec(X, t); sum(Y * z - softplus(z)) }\n\
         fn g(t: [f64; D]) -> (f64, [f64; D]) { value_and_grad(ll, t) }",
    );
    let grad = &whole(&p, "ll'grad");
    let unary = |op| Prim::Unary(op);
    let binary = |op| Prim::Binary(op);
    use autobatch_ir::{BinaryOp as B, UnaryOp as U};
    assert_eq!(count(grad, |p| *p == unary(U::Neg)), 0);
    assert_eq!(count(grad, |p| *p == binary(B::Mul)), 1, "Y * z only");
    assert_eq!(
        count(grad, |p| *p == binary(B::Sub)),
        2,
        "the value's and Y - σ(z)"
    );
    assert_eq!(count(grad, |p| matches!(p, Prim::Fill(_))), 0);
    assert_eq!(count(grad, |p| *p == Prim::Vecmat), 1);
}

/// The array variables the tape pushes of function `f` save.
fn pushed_arrays(f: &Function) -> Vec<Var> {
    f.blocks
        .values()
        .flat_map(|b| &b.ops)
        .filter_map(|op| match op {
            Op::Prim {
                prim: Prim::TapePush,
                args,
                ..
            } => Some(args),
            _ => None,
        })
        .flatten()
        .filter(|v| !f.vars[**v].ty.is_scalar())
        .copied()
        .collect()
}

#[test]
fn the_results_of_products_and_softplus_are_not_saved() {
    // The adjoints of `Y * z` and `softplus(z)` read `z` (and the static
    // `Y`), not the values they computed: the forward part saves `z`, not
    // `Y * z` nor `softplus(z)`; `t` (which the product's adjoint would
    // read for a gradient of `X`) is the vjp's own argument, which the
    // backward part takes as its argument instead of from the tape.
    let p = compile(
        "extern \"autobatch\" { static X: [[f64; D]; N]; static Y: [f64; N]; }\n\
         fn ll(t: [f64; D]) -> f64 { let z = matvec(X, t); sum(Y * z - softplus(z)) }\n\
         fn g(t: [f64; D]) -> (f64, [f64; D]) { value_and_grad(ll, t) }",
    );
    assert_eq!(pushed_arrays(function(&p, "ll'grad.fwd")).len(), 1);
    let pops = count(function(&p, "ll'grad.bwd"), |p| {
        matches!(p, Prim::TapePop(_))
    });
    assert_eq!(pops, 1);
}

/// The gradient of a function that is one block of primitives is one
/// counted function: the function's operations as they are (same order,
/// same locations, same block), then the adjoints reading its values in
/// place; nothing pushed or popped. The vjp calls it alone.
#[test]
fn a_function_of_one_block_is_fused_without_a_tape() {
    let p = compile(
        "extern \"autobatch\" { static X: [[f64; D]; N]; static Y: [f64; N]; }\n\
         fn ll(t: [f64; D]) -> f64 { let z = matvec(X, t); sum(Y * z - softplus(z)) }\n\
         fn g(t: [f64; D]) -> (f64, [f64; D]) { value_and_grad(ll, t) }",
    );
    let fused = p.function_by_name("ll'grad.fused").expect("the fused vjp");
    assert_eq!(calls(function(&p, "ll'grad")), [fused]);
    let (f, ll) = (&p.functions[fused], function(&p, "ll"));
    assert_eq!(f.blocks.len(), 1);
    assert!(!f.uncounted);
    let taped = count(f, |p| matches!(p, Prim::TapePush | Prim::TapePop(_)));
    assert_eq!(taped, 0);
    let (ops, own) = (&f.blocks[Function::ENTRY], &ll.blocks[Function::ENTRY]);
    assert_eq!(ops.loc, own.loc);
    assert_eq!(&ops.ops[..own.ops.len()], &own.ops[..]);
    assert_eq!(count(f, |p| *p == Prim::Vecmat), 1, "the adjoint of t");
}

/// A density's check arm (`autobatch_ir::line`) goes after the backward
/// part when nothing after it may fault, the block after it only
/// returning; with a later check after it, its operations run in line.
/// Either way the gradient is fused and nothing is taped.
#[test]
fn check_arms_leave_the_gradient_fused() {
    for (body, blocks) in [
        (
            "cauchy_lupdf(t[0], 0.0, 2.5) + normal_lupdf(Y, t[1] * Y, t[0])",
            3,
        ),
        (
            "normal_lupdf(Y, t[1] * Y, t[0]) + cauchy_lupdf(t[0], 0.0, 2.5)",
            1,
        ),
    ] {
        let p = compile(&format!(
            "extern \"autobatch\" {{ static Y: [f64; N]; }}\n\
             fn ll(t: [f64; 2]) -> f64 {{ {body} }}\n\
             fn g(t: [f64; 2]) -> (f64, [f64; 2]) {{ value_and_grad(ll, t) }}"
        ));
        let fused = p.function_by_name("ll'grad.fused").expect("the fused vjp");
        let f = &p.functions[fused];
        assert_eq!(f.blocks.len(), blocks, "{body}");
        let taped = count(f, |p| matches!(p, Prim::TapePush | Prim::TapePop(_)));
        assert_eq!(taped, 0, "{body}");
        let last = f.blocks.values().last().expect("a block");
        if blocks == 3 {
            assert!(last.ops.is_empty(), "the arm comes last: {body}");
        }
    }
}

#[test]
fn slices_of_a_parameter_leave_the_gradient_fused() {
    // A model's vector parameters read from the sampler's vector as
    // slices (as the generated transform reads them): one block, no tape;
    // each slice's adjoint is a `slice_set` into the gradient.
    let p = compile(
        "fn ll(t: [f64; D]) -> f64 { let a = t[1..1 + J]; let b = t[..2]; dot(a, a) + b[0] * sum(a) }\n\
         fn g(t: [f64; D]) -> (f64, [f64; D]) { value_and_grad(ll, t) }",
    );
    let fused = p.function_by_name("ll'grad.fused").expect("the fused vjp");
    let f = &p.functions[fused];
    assert_eq!(f.blocks.len(), 1);
    let taped = count(f, |p| matches!(p, Prim::TapePush | Prim::TapePop(_)));
    assert_eq!(taped, 0);
    assert_eq!(
        count(f, |p| matches!(p, Prim::Slice(_))),
        2 + 1,
        "two reads, one re-read of a's adjoint"
    );
    assert_eq!(count(f, |p| *p == Prim::SliceSet), 2);
}

#[test]
fn products_have_product_adjoints() {
    let p = compile(
        "fn f(x: [[f64; 3]; 3]) -> f64 { sum(matvec(matmul(x, x), x[0])) }\n\
         fn g(x: [[f64; 3]; 3]) -> [[f64; 3]; 3] { grad(f, x) }",
    );
    let vjp = &whole(&p, "f'grad");
    assert_eq!(count(vjp, |p| *p == Prim::Matmul), 3, "a·b, dy·bᵀ, aᵀ·dy");
    assert_eq!(
        count(vjp, |p| *p == Prim::Transpose),
        1,
        "xᵀ, computed once"
    );
    assert_eq!(
        count(vjp, |p| *p == Prim::Vecmat),
        1,
        "adjoint of the vector"
    );
    assert_eq!(
        count(vjp, |p| *p == Prim::Outer),
        1,
        "adjoint of the matrix"
    );
}

#[test]
fn a_loop_with_branches_stays_a_loop_over_a_tape() {
    let p = compile(
        "fn f(x: f64) -> f64 { let mut a = x; for i in 0..10 { if a > 1.0 { a = a.sqrt(); } else { a = a * 2.0; } } a }\n\
         fn g(x: f64) -> f64 { grad(f, x) }",
    );
    assert_eq!(
        gradient_parts(&p, "f"),
        ["f'grad", "f'grad.bwd", "f'grad.fwd"]
    );
    // The forward part is f's blocks, the backward part counts no steps
    // and calls nothing: its loop is a loop of blocks.
    let (f, fwd, bwd) = (
        function(&p, "f"),
        function(&p, "f'grad.fwd"),
        function(&p, "f'grad.bwd"),
    );
    assert_eq!(fwd.blocks.len(), f.blocks.len());
    assert!(!fwd.uncounted && bwd.uncounted);
    assert!(calls(bwd).is_empty());
    assert!(count(fwd, |p| *p == Prim::TapePush) > 0);
    assert!(count(bwd, |p| matches!(p, Prim::TapePop(_))) > 0);
    assert!(has_cycle(bwd), "the backward loop");
}

/// A loop that writes one element of an array per iteration and reads
/// the elements before it (a GARCH recursion) keeps only scalars on its
/// tape: the adjoints of `index` and `index_set` read the index, not the
/// array, so nothing pushes the array once per iteration (which made the
/// gradient's tape, and its time, grow with the square of the length).
#[test]
fn a_recursion_over_an_array_tapes_no_array() {
    let p = compile(
        "fn f(theta: [f64; 2], y: [f64; 64], n: i64) -> f64 {\n\
             let mut sigma = [0.0; 64];\n\
             sigma[0] = 1.0;\n\
             for t in 1..(n as usize) {\n\
                 let d = y[t - 1] - theta[0];\n\
                 sigma[t] = (theta[1] * (d * d) + 0.5 * (sigma[t - 1] * sigma[t - 1])).sqrt();\n\
             }\n\
             sum(sigma)\n\
         }\n\
         fn g(theta: [f64; 2], y: [f64; 64], n: i64) -> [f64; 2] { grad(f, theta, y, n) }",
    );
    let part = |suffix: &str| {
        let name = gradient_parts(&p, "f")
            .into_iter()
            .find(|n| n.ends_with(suffix))
            .unwrap_or_else(|| panic!("no part {suffix}"));
        function(&p, name)
    };
    let fwd = part(".fwd");
    assert!(has_cycle(fwd), "the forward part loops");
    let arrays: Vec<String> = pushed_arrays(fwd)
        .iter()
        .map(|v| format!("{v}: {:?}", fwd.vars[*v].ty))
        .collect();
    assert!(arrays.is_empty(), "arrays pushed: {arrays:?}");
    let bwd = part(".bwd");
    let popped = count(bwd, |p| matches!(p, Prim::TapePop(t) if !t.is_scalar()));
    assert_eq!(popped, 0, "arrays popped");
}

/// The names of the functions derived from `f`'s gradient, sorted.
fn gradient_parts<'p>(p: &'p Program, f: &str) -> Vec<&'p str> {
    let prefix = format!("{f}'grad");
    let mut names: Vec<&str> = p
        .functions
        .values()
        .map(|f| f.name.as_str())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    names.sort();
    names
}

#[test]
fn a_function_holding_catch_is_derived_over_a_tape() {
    let p = compile(
        "fn inv(k: i64) -> i64 { 12 / k }\n\
         fn f(x: f64, n: i64) -> f64 {\n\
             let mut a = x;\n\
             let mut i = 0;\n\
             while i < n { let (ok, q) = catch(inv(i)); if ok { a = a * x + q as f64; } i += 1; }\n\
             a\n\
         }\n\
         fn g(x: f64, n: i64) -> f64 { grad(f, x, n) }",
    );
    assert_eq!(
        gradient_parts(&p, "f"),
        ["f'grad", "f'grad.bwd", "f'grad.fwd"]
    );
    // The forward part makes the catching call as `f` does; the backward
    // part has nothing to do for it.
    let inv = p.function_by_name("inv").expect("inv");
    let catching = |f: &Function| {
        f.blocks
            .values()
            .flat_map(|b| &b.ops)
            .filter(|op| matches!(op, Op::Call { callee, catch: true, .. } if *callee == inv))
            .count()
    };
    assert_eq!(catching(function(&p, "f'grad.fwd")), 1);
    assert!(calls(function(&p, "f'grad.bwd")).is_empty());
}

#[test]
fn a_function_that_never_returns_is_derived_over_a_tape() {
    let p = compile(
        "fn f(x: f64) -> f64 { let mut a = x; loop { a = a * 2.0; } }\n\
         fn g(x: f64) -> f64 { grad(f, x) }",
    );
    assert_eq!(
        gradient_parts(&p, "f"),
        ["f'grad", "f'grad.bwd", "f'grad.fwd"]
    );
}

/// Whether the blocks of `f` jump in a cycle.
fn has_cycle(f: &Function) -> bool {
    let n = f.blocks.len();
    (0..n).any(|start| {
        let mut stack = f.blocks[autobatch_ir::Block(start as u32)]
            .term
            .successors();
        let mut seen = vec![false; n];
        while let Some(b) = stack.pop() {
            if b.0 as usize == start {
                return true;
            }
            if !std::mem::replace(&mut seen[b.0 as usize], true) {
                stack.extend(f.blocks[b].term.successors());
            }
        }
        false
    })
}

#[test]
fn partially_active_calls_are_named_and_skip_inactive_adjoints() {
    let p = compile(
        "extern \"autobatch\" { static S: f64; }\n\
         fn h(a: f64, b: f64) -> f64 { a * b.exp() }\n\
         fn f(x: f64) -> f64 { let y = h(x, S); if y > 1.0 { y } else { y * 2.0 } }\n\
         fn g(x: f64) -> f64 { grad(f, x) }",
    );
    // (`f` branches: a one-block `f` would have `h` spliced into it and
    // be derived fused, with no call of `h`'s vjp.)
    let partial = &whole(&p, "h'vjp@10");
    assert_eq!(
        partial.results.len(),
        2,
        "h's result and the adjoint of a only"
    );
    assert_eq!(
        count(partial, |p| *p == Prim::Unary(autobatch_ir::UnaryOp::Exp)),
        1
    );
}

#[test]
fn bad_requests_are_refused() {
    let mut p = compile("fn f(n: i64, x: f64) -> f64 { x * (n as f64) }");
    let f = p.function_by_name("f").unwrap();
    let not_float = derive(
        &mut p,
        &[Request {
            function: f,
            active: vec![true, false],
            kind: Derivative::Gradient,
        }],
    );
    assert!(not_float.unwrap_err().message.contains("not a float"));
    let wrong_len = derive(
        &mut p,
        &[Request {
            function: f,
            active: vec![true],
            kind: Derivative::Gradient,
        }],
    );
    assert!(wrong_len.unwrap_err().message.contains("parameter flags"));
    let ok = derive(
        &mut p,
        &[Request {
            function: f,
            active: vec![false, true],
            kind: Derivative::Gradient,
        }],
    )
    .expect("derives");
    assert_eq!(p.functions[ok[0].id].name, "f'grad");
    verify_program(&p).expect("verifies");
}

/// The derived functions named `prefix...`, with how many functions carry each name.
fn derived<'p>(p: &'p Program, prefix: &str) -> Vec<(&'p str, usize)> {
    let mut out: Vec<(&str, usize)> = Vec::new();
    for f in p.functions.values() {
        if f.name.starts_with(prefix) {
            match out.iter_mut().find(|(n, _)| *n == f.name) {
                Some((_, k)) => *k += 1,
                None => out.push((f.name.as_str(), 1)),
            }
        }
    }
    out
}

#[test]
fn a_recursive_cycle_gets_one_vjp_per_function_and_activity() {
    // `even` and `odd` call each other; `swap` calls itself with its
    // parameters exchanged, so its vjp with respect to the first one calls
    // its vjp with respect to the second one, and back.
    let p = compile(
        "fn even(a: f64, n: i64) -> f64 { if n == 0 { a } else { odd(a * 1.5, n - 1) + a.sin() } }\n\
         fn odd(a: f64, n: i64) -> f64 { if n == 0 { -a * a } else { even(a.tanh(), n - 1) } }\n\
         fn swap(a: f64, b: f64, n: i64) -> f64 { if n == 0 { a * b.exp() } else { swap(b, a, n - 1) * 2.0 } }\n\
         fn f(x: f64) -> f64 { even(x, 5) + swap(x, 0.5, 3) }\n\
         fn g(x: f64) -> f64 { grad(f, x) }",
    );
    for prefix in ["even'", "odd'", "swap'"] {
        for (name, k) in derived(&p, prefix) {
            assert_eq!(k, 1, "{name} is derived once");
        }
    }
    // (With respect to every float parameter: no `@` in the names.) The
    // forward and backward parts call each other's as the functions do.
    let id = |name: &str| {
        p.function_by_name(name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    for part in ["fwd", "bwd"] {
        let even = id(&format!("even'vjp.{part}"));
        let odd = id(&format!("odd'vjp.{part}"));
        assert!(calls(&p.functions[even]).contains(&odd));
        assert!(calls(&p.functions[odd]).contains(&even));
        let swap_a = id(&format!("swap'vjp@100.{part}"));
        let swap_b = id(&format!("swap'vjp@010.{part}"));
        assert!(calls(&p.functions[swap_a]).contains(&swap_b));
        assert!(calls(&p.functions[swap_b]).contains(&swap_a));
    }
    // Per activity: the vjp, its parts, and the forward part's copy that
    // counts no steps (`'again`: a recursion may be recomputed past the
    // tape bound); and `swap`'s own such copy.
    assert_eq!(derived(&p, "swap'").len(), 9, "{:?}", derived(&p, "swap'"));
    assert!(derived(&p, "swap'")
        .iter()
        .any(|(name, _)| *name == "swap'vjp@100.fwd'again"));
}

#[test]
fn while_loop_and_break_stay_loops_over_a_tape() {
    // A `while` over data and a `loop` left by two `break`s with values:
    // the backward part has a loop for each, and no activation per
    // iteration (it calls nothing).
    let p = compile(
        "extern \"autobatch\" { static D: [f64; 4]; }\n\
         fn f(x: f64) -> f64 {\n\
           let mut h = x; let mut i = 0;\n\
           while i < 4 && D[i] > 0.0 { h = (h + D[i]).tanh(); i += 1; }\n\
           let mut k = 0;\n\
           let v = loop { k += 1; h = h * 1.5; if k == 3 { break h; } if D[k] < 0.0 { break -h; } };\n\
           v + h }\n\
         fn g(x: f64) -> f64 { grad(f, x) }",
    );
    let bwd = function(&p, "f'grad.bwd");
    assert!(calls(bwd).is_empty());
    assert!(has_cycle(bwd));
    assert_eq!(
        function(&p, "f'grad.fwd").blocks.len(),
        function(&p, "f").blocks.len()
    );
}

/// The forks of `f`, as (callees' names, whether it is a `map`).
fn forks<'p>(p: &'p Program, f: &Function) -> Vec<(Vec<&'p str>, bool)> {
    f.blocks
        .values()
        .flat_map(|b| &b.ops)
        .filter_map(|op| match op {
            Op::Fork { instances, .. } => Some((
                instances
                    .callees()
                    .into_iter()
                    .map(|c| p.functions[c].name.as_str())
                    .collect(),
                matches!(instances, autobatch_ir::Instances::Map { .. }),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn the_adjoint_of_a_fork_is_a_fork_of_backward_parts() {
    let p = compile(
        "fn sq(x: f64, a: f64) -> f64 { a * x * x }
         fn cube(x: f64) -> f64 { x * x * x }
         fn j(x: f64) -> f64 { let (a, b) = join(sq(x, 2.0), cube(x)); a + b }
         fn one(x: f64) -> f64 { let (a, b) = join(sq(x, 2.0), cube(3.0)); a + b }
         fn m(x: [f64; 3]) -> f64 { sum(map(sq, x, x[0])) + sum(map(sq, x, 1.5)) }
         fn row(i: i64, x: [f64; 3]) -> f64 { x[i as usize] }
         fn p(x: [f64; 3]) -> f64 { sum(pfor::<3>(row, x)) }
         fn g(x: f64, v: [f64; 3]) -> (f64, f64, [f64; 3], [f64; 3]) {
             (grad(j, x), grad(one, x), grad(m, v), grad(p, v))
         }",
    );
    // Taped: the forward forks the callees' forward parts, the backward
    // forks their backward parts over the same instances.
    let fj = |name: &str| forks(&p, function(&p, name));
    assert_eq!(
        fj("j'grad.fwd"),
        vec![(vec!["sq'vjp@10.fwd", "cube'vjp.fwd"], false)]
    );
    assert_eq!(
        fj("j'grad.bwd"),
        vec![(vec!["sq'vjp@10.bwd", "cube'vjp.bwd"], false)]
    );
    assert_eq!(fj("one'grad.fwd").len(), 1);
    assert_eq!(fj("one'grad.bwd").len(), 1);
    assert_eq!(
        fj("m'grad.fwd"),
        vec![(vec!["sq'vjp.fwd"], true), (vec!["sq'vjp@10.fwd"], true)]
    );
    assert_eq!(
        fj("m'grad.bwd"),
        vec![(vec!["sq'vjp@10.bwd"], true), (vec!["sq'vjp.bwd"], true)]
    );
    assert_eq!(fj("p'grad.bwd"), vec![(vec!["row'vjp.bwd"], true)]);
}

#[test]
fn a_jacobian_is_a_pfor_over_rows() {
    let p = compile(
        "fn h(x: [f64; 3]) -> [f64; 2] { [x[0] * x[1], x[2].sin()] }
         fn g(x: [f64; 3]) -> [[f64; 3]; 2] { jacobian(h, x) }",
    );
    let jac = function(&p, "h'jacobian");
    assert_eq!(forks(&p, jac), vec![(vec!["h'jrow"], true)]);
    let row = function(&p, "h'jrow");
    assert_eq!(
        calls(row),
        vec![p.function_by_name("h'vjp").unwrap()],
        "each row is one vjp"
    );
}

#[test]
fn a_jacobian_of_the_wrong_shape_is_refused() {
    let mut p = compile("fn f(x: [f64; 2]) -> f64 { x[0] }");
    let f = p.function_by_name("f").unwrap();
    let err = derive(
        &mut p,
        &[Request {
            function: f,
            active: vec![true],
            kind: Derivative::Jacobian,
        }],
    )
    .unwrap_err();
    assert!(err.message.contains("both arrays of floats"), "{err}");
}

/// `grad(f, x, d..)`: the gradient takes `f`'s parameters, the data
/// flattened (the tuple's two parts), and gives the value and the adjoint
/// of `x` only; a float data argument gets no adjoint work (no `outer` for
/// the matrix `m`); the Jacobian passes the data whole to every row.
#[test]
fn data_arguments_are_passed_through_without_adjoints() {
    let p = compile(
        "fn f(x: [f64; 3], m: [[f64; 3]; 2], p: (i64, f64)) -> f64 { sum(matvec(m, x)) * p.1 + p.0 as f64 }
         fn g(x: [f64; 3], m: [[f64; 3]; 2], p: (i64, f64)) -> (f64, [f64; 3]) { value_and_grad(f, x, m, p) }
         fn h(x: [f64; 3], m: [[f64; 3]; 2]) -> [f64; 2] { matvec(m, x) }
         fn j(x: [f64; 3], m: [[f64; 3]; 2]) -> [[f64; 3]; 2] { jacobian(h, x, m) }",
    );
    let grad = &whole(&p, "f'grad@1000");
    assert_eq!(grad.params.len(), 4, "x, m and the tuple's two parts");
    assert_eq!(grad.results.len(), 2, "the value and the adjoint of x");
    assert_eq!(count(grad, |p| *p == Prim::Outer), 0, "no adjoint for m");
    assert_eq!(count(grad, |p| *p == Prim::Vecmat), 1, "the adjoint of x");
    let jac = function(&p, "h'jacobian");
    assert_eq!(jac.params.len(), 2);
    assert_eq!(forks(&p, jac), vec![(vec!["h'jrow"], true)]);
    let row = function(&p, "h'jrow");
    assert_eq!(row.params.len(), 3, "the row index, x and m");
    assert_eq!(calls(row), vec![p.function_by_name("h'vjp@10").unwrap()]);
}

/// The index_set operations of `f` that write into another variable than
/// the one they read (each copies the whole array).
fn copying_index_sets(f: &Function) -> usize {
    f.blocks
        .values()
        .flat_map(|b| &b.ops)
        .filter(|op| {
            matches!(op, Op::Prim { dst: Some(d), prim: Prim::IndexSet, args, .. } if *d != args[0])
        })
        .count()
}

#[test]
fn every_loop_is_a_loop_of_the_backward_part() {
    let p = compile(
        "extern \"autobatch\" { static Y: [[f64; 3]; N]; }\n\
         fn taped(t: [f64; 3]) -> f64 { let mut s = 0.0; for i in 0..N { for k in 0..3 { s += t[k] * Y[i][k]; } } s * s }\n\
         fn runtime(t: [f64; 3], n: i64) -> f64 { let mut s = 0.0; for i in 0..n { s += t[(i % 3) as usize]; } s }\n\
         fn g(t: [f64; 3]) -> ([f64; 3], [f64; 3]) { (grad(taped, t), grad(runtime, t, 5)) }",
    );
    // Every loop, with a constant bound or a runtime one, is a loop of the
    // backward part, which calls no function; the adjoint of t,
    // accumulated element by element, is one array updated in place.
    for name in ["taped'grad.bwd", "runtime'grad.bwd"] {
        let bwd = function(&p, name);
        assert!(calls(bwd).is_empty(), "{name}");
        assert!(has_cycle(bwd), "{name}");
        assert_eq!(copying_index_sets(bwd), 0, "{name}");
    }
}

#[test]
fn the_rows_of_a_differentiated_static_are_read_again_not_saved() {
    // `W[D]` is a row of a differentiated static: the backward part reads
    // it again from the static (its adjoint goes to the static's log as an
    // outer product). Only `h` of each step is saved: one array an iteration.
    let source = "extern \"autobatch\" { static W: [[[f64; 4]; 4]; 2]; }\n\
         fn cell<const D: usize>(h: [f64; 4]) -> [f64; 4] { matvec(W[D], h).tanh() }\n\
         fn loss(h0: [f64; 4], n: usize) -> f64 {\n\
             let mut h = h0;\n\
             for t in 0..n { h = cell::<1>(h); }\n\
             sum(h)\n\
         }";
    let (p, _) = autobatch_lower::compile_static_gradient(source, "loss", &["W".to_string()])
        .unwrap_or_else(|d| panic!("{d:?}"));
    if let Err(errors) = verify_program(&p) {
        panic!("the derived IR does not verify: {errors:?}");
    }
    let cells: Vec<&Function> = p
        .functions
        .values()
        .filter(|f| f.name.starts_with("cell") && f.name.ends_with(".fwd"))
        .collect();
    assert!(!cells.is_empty(), "the cell has a forward part");
    for f in cells {
        let pushed = pushed_arrays(f);
        let matrices = pushed.iter().filter(|v| f.vars[**v].ty.dims.len() == 2);
        assert_eq!(matrices.count(), 0, "{}: no matrix is saved", f.name);
    }
}

/// Parameters passed unchanged down the gradient (`x`, `w`, `k`: `f`
/// hands `leaf` its own) reach a backward part only when it reads them:
/// the adjoint of `leaf` reads `x` (for `cos x`) and the value `w[k]` the
/// tape holds, not `w` or `k`, and `leaf` (which neither calls nor loops)
/// is never recomputed, so its backward part takes the result's adjoint
/// and `x`, and `f`'s (a `grad`: no adjoint parameter) `x` alone.
#[test]
fn a_backward_part_takes_only_the_passed_parameters_it_reads() {
    let p = compile(
        "fn leaf(x: f64, w: [f64; 4], k: i64) -> f64 { x.sin() * w[k as usize] }\n\
         fn f(x: f64, w: [f64; 4], k: i64) -> f64 { let y = leaf(x, w, k); if y > 0.0 { y } else { -y } }\n\
         fn g(x: f64, w: [f64; 4]) -> f64 { grad(f, x, w, 2) }",
    );
    let names = |name: &str| -> Vec<String> {
        let part = function(&p, name);
        part.params
            .iter()
            .map(|v| part.vars[*v].name.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(names("leaf'vjp@100.bwd"), ["d.result0", "x"]);
    assert_eq!(names("f'grad@100.bwd"), ["x"]);
    let id = p.function_by_name("leaf'vjp@100.bwd").expect("the part");
    let call = function(&p, "f'grad@100.bwd")
        .blocks
        .values()
        .flat_map(|b| &b.ops)
        .find(|op| matches!(op, Op::Call { callee, .. } if *callee == id))
        .expect("f's backward part calls leaf's");
    assert_eq!(call.uses().len(), 2);
}
