//! Parameters that every call site passes the same shared value
//! (`autobatch_passes::views`) are invariant; the others are not.

use autobatch_ir::{FuncId, Program, Var};
use autobatch_passes::uniformity::Invariance;

const PROGRAM: &str = include_str!("../../../tests/programs/static_arguments.ab");

fn param(program: &Program, function: &str, name: &str) -> (FuncId, Var) {
    let f = program.function_by_name(function).expect("function");
    let params = &program.functions[f].params;
    let v = params
        .iter()
        .copied()
        .find(|p| program.functions[f].vars[*p].name.as_deref() == Some(name))
        .expect("parameter");
    (f, v)
}

fn invariance(source: &str, entry: &str, shared: &[bool]) -> (Program, Invariance) {
    let mut program = autobatch_lower::compile(source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    let entry = program.function_by_name(entry).expect("entry");
    let invariance = Invariance::compute(&program, entry, shared);
    (program, invariance)
}

#[test]
fn a_static_passed_at_every_call_site_is_invariant() {
    let (program, inv) = invariance(PROGRAM, "run", &[false, false]);
    let invariant = |f: &str, p: &str| {
        let (f, v) = param(&program, f, p);
        inv.is_invariant(f, v)
    };
    // Through a recursion, a join's instances and a map's extra argument.
    assert!(invariant("shear", "w"));
    assert!(invariant("halves", "w"));
    assert!(invariant("scale", "w"));
    assert!(invariant("swap_rows", "w"));
    // Two different statics at two call sites; per-member data.
    assert!(!invariant("either", "w"));
    assert!(!invariant("shear", "x"));
    assert!(!invariant("swap_rows", "row"));
}

#[test]
fn different_views_or_member_values_are_not() {
    let source = "
extern \"autobatch\" { static WS: [[f64; 2]; 3]; }
fn get(w: [f64; 2], k: usize) -> f64 { w[k] }
fn first(v: [f64; 2]) -> f64 { v[0] }
fn twice(w: [f64; 2]) -> f64 { w[1] }
fn run(i: usize, shared: [f64; 2]) -> f64 {
    get(WS[0], 0) + get(WS[1], 0) + first(WS[i]) + twice(shared) + twice(shared)
}
";
    let (program, inv) = invariance(source, "run", &[false, true]);
    let invariant = |f: &str, p: &str| {
        let (f, v) = param(&program, f, p);
        inv.is_invariant(f, v)
    };
    // `WS[0]` and `WS[1]`: two views; `WS[i]`: a per-member index.
    assert!(!invariant("get", "w"));
    assert!(!invariant("first", "v"));
    // The entry's shared parameter, passed at two call sites.
    assert!(invariant("twice", "w"));
    // A called entry: its parameters come from outside too.
    let recursive = "
fn run(w: [f64; 2], n: i64) -> f64 { if n <= 0 { w[0] } else { w[1] + run(w, n - 1) } }
";
    let (program, inv) = invariance(recursive, "run", &[true, false]);
    let (f, v) = param(&program, "run", "w");
    assert!(!inv.is_invariant(f, v));
}

/// A variable every definition of which loads one and the same static
/// (derived code reloads a static where the forward code loaded it) holds
/// that static whenever it is read: invariant. Loads of two statics, or a
/// load and another definition, are not.
#[test]
fn a_variable_reloading_one_static_is_invariant() {
    let source = "
extern \"autobatch\" { static W: [f64; 2]; static V: [f64; 2]; }
fn run(n: i64, x: f64) -> f64 {
    let mut same = W;
    let mut two = W;
    let mut other = W;
    let mut s = 0.0;
    let mut i = 0;
    while i < n {
        s = s + same[0] + two[1] + other[0];
        same = W;
        two = V;
        other = other * x;
        i = i + 1;
    }
    s
}
";
    let (program, inv) = invariance(source, "run", &[false, false]);
    let f = program.function_by_name("run").expect("run");
    let invariant = |name: &str| {
        let vars = &program.functions[f].vars;
        let v = vars
            .iter()
            .find(|(_, data)| data.name.as_deref() == Some(name))
            .map(|(v, _)| v)
            .expect("variable");
        inv.is_invariant(f, v)
    };
    assert!(invariant("same"));
    assert!(!invariant("two"));
    assert!(!invariant("other"));
}
