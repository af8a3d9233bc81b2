//! The derivative oracle (`autobatch_fuzz::finite`): it passes right
//! derivatives, reports wrong ones (of the kind a wrong derivation gives:
//! adjoints handed to the wrong carried variable, or lost), and skips the
//! points where the function steps between the moved points.

use autobatch::compile;
use autobatch_fuzz::finite::{
    check_derivative, check_static_gradient, noise, DerivativeCheck, Differences, Noise, Partials,
};
use autobatch_fuzz::{check_seed_derivatives, generate, Limits, Outcome};
use serde_json::{json, Map, Value as Json};

/// A loop that swaps its two carried variables, a recurrence whose next
/// value is built in an inner loop and then assigned, and a function with
/// a step (`(a * 2.0) as i64`); each with its right gradient and with
/// gradients as wrong derivations gave them.
const SOURCE: &str = r#"
fn swap(p: [f64; 2], n: usize) -> f64 {
    let mut x = p[0];
    let mut y = p[1];
    for i in 0..n {
        let t = x;
        x = y;
        y = t * 0.9 + 0.1 * t.tanh();
    }
    x + 10.0 * y
}
fn swap_grad(p: [f64; 2], n: usize) -> [f64; 2] {
    grad(swap, p, n)
}
fn swap_grad_exchanged(p: [f64; 2], n: usize) -> [f64; 2] {
    let g = grad(swap, p, n);
    [g[1], g[0]]
}
fn decay(a: [f64; 2], n: usize) -> [f64; 2] {
    let mut gamma = [0.0; 2];
    for t in 0..n {
        let mut next = [0.0; 2];
        for k in 0..2 {
            next[k] = gamma[k] * 0.5 + a[k] * a[k];
        }
        gamma = next;
    }
    gamma
}
fn decay_row(a: [f64; 2], n: usize) -> [f64; 2] {
    jacobian(decay, a, n)[1]
}
fn decay_row_lost(a: [f64; 2], n: usize) -> [f64; 2] {
    jacobian(decay, a, n)[1] * 0.0
}
fn step(a: f64) -> f64 {
    a * a + ((a * 2.0) as i64) as f64 * 0.125
}
fn step_grad(a: f64) -> f64 {
    grad(step, a)
}
"#;

fn limits() -> Limits {
    Limits {
        max_stack_depth: 256,
        max_steps: 1_000_000,
        seed: 0,
    }
}

/// The mismatches `entry` gives as the derivative of `function`.
/// `args`: each argument's name and values, the point first.
fn mismatches(
    function: &str,
    entry: &str,
    partials: Partials,
    args: &[(&str, Json)],
) -> Vec<String> {
    let compiled = compile(SOURCE, "finite.ab").expect("the program compiles");
    let args: Vec<(String, Vec<Json>)> = args
        .iter()
        .map(|(name, values)| {
            (
                name.to_string(),
                values.as_array().cloned().unwrap_or_default(),
            )
        })
        .collect();
    let check = DerivativeCheck {
        function,
        entry,
        partials,
        args: &args,
        shared: Map::new(),
        noise: Noise::ROUNDING,
    };
    check_derivative(&compiled, &check, limits()).expect("the runs are made")
}

fn swap_args() -> [(&'static str, Json); 2] {
    [
        ("p", json!([[1.0, 2.0], [0.5, -1.5], [0.25, 0.75]])),
        ("n", json!([3, 5, 40])),
    ]
}

#[test]
fn a_right_gradient_through_a_swap_passes() {
    let found = mismatches("swap", "swap_grad", Partials::Gradient, &swap_args());
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn a_gradient_handed_to_the_other_carried_variable_is_reported() {
    let found = mismatches(
        "swap",
        "swap_grad_exchanged",
        Partials::Gradient,
        &swap_args(),
    );
    // Every member's two partials differ (the three members' loops end
    // with different variables holding the larger adjoint).
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains("`swap_grad_exchanged` member 0 (p = [1.0,2.0], n = 3), along"));
}

#[test]
fn a_row_of_a_jacobian_lost_after_an_inner_loop_is_reported() {
    let args = [
        ("a", json!([[1.0, 2.0], [-0.5, 0.25]])),
        ("n", json!([3, 6])),
    ];
    let right = mismatches("decay", "decay_row", Partials::Row(1), &args);
    assert_eq!(right, Vec::<String>::new());
    let lost = mismatches("decay", "decay_row_lost", Partials::Row(1), &args);
    assert_eq!(lost.len(), 2, "{lost:#?}");
}

#[test]
fn a_step_between_the_moved_points_is_skipped() {
    // At 0.5 and 1.0 the function steps by 0.125 between the moved
    // points; at 0.3 it is smooth across them.
    let found = mismatches(
        "step",
        "step_grad",
        Partials::Gradient,
        &[("a", json!([0.5, 1.0, 0.3]))],
    );
    assert_eq!(found, Vec::<String>::new());
    let differences = |values| Differences {
        h: 0.01,
        close: 1e-7,
        values,
    };
    let step = differences([0.125, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(
        step.judge(0.0, Noise::ROUNDING),
        None,
        "a step is not judged"
    );
    let apart = differences([0.01, -0.01, 0.005, -0.005, 1e-7, -1e-7, 0.125]);
    assert_eq!(
        apart.judge(1.0, Noise::ROUNDING),
        None,
        "a value apart is not judged"
    );
    let smooth = differences([0.01, -0.01, 0.005, -0.005, 1e-7, -1e-7, 0.0]);
    assert_eq!(smooth.judge(1.0, Noise::ROUNDING), Some(Ok(())));
    assert!(matches!(smooth.judge(1.1, Noise::ROUNDING), Some(Err(_))));
    // Steep within 1e-5 of the point, flat beyond: not judged at the scale
    // of `h`.
    let steep = differences([
        0.0102 + 1e-4,
        -0.0102 - 1e-4,
        0.0051 + 1e-4,
        -0.0051 - 1e-4,
        0.0037,
        -0.0037,
        0.0,
    ]);
    assert_eq!(steep.judge(37000.0, Noise::ROUNDING), None);
    assert_eq!(steep.judge(1.0, Noise::ROUNDING), None);
    // Slope -0.5 on the right of the point and -0.7 on its left (seed
    // 1830's shape: a piecewise-constant term times a factor zero at the
    // point): continuous, so no step shows, and the central differences
    // give the mean slope where the derivative is the right side's.
    let slope = |t: f64| if t >= 0.0 { -0.5 * t } else { -0.7 * t };
    let bend = differences([0.01, -0.01, 0.005, -0.005, 1e-7, -1e-7, 0.0].map(slope));
    assert_eq!(
        bend.judge(-0.5, Noise::ROUNDING),
        None,
        "a bend at the point is not judged"
    );
}

#[test]
fn a_bend_at_the_point_of_a_function_that_reaches_a_solver_is_skipped() {
    // Seed 1073's shape: a piecewise-constant term (`7 % ((x1 * 2.0) as
    // i64)` at x1 = 1.0) times an ODE solution zero at the point. The
    // solver's noise is that of differences `h` apart; the close
    // differences are held to rounding, so the bend shows.
    let slope = |t: f64| if t >= 0.0 { 0.0 } else { 0.0416 * t };
    let bend = Differences {
        h: 0.01,
        close: 1e-7,
        values: [0.01, -0.01, 0.005, -0.005, 1e-7, -1e-7, 0.0].map(slope),
    };
    assert_eq!(bend.judge(0.0416, Noise::SOLVER), None);
}

#[test]
fn a_derivative_is_judged_by_the_close_difference_where_the_extrapolation_is_off() {
    // Seed 610's shape: higher derivatives large at the scale of `h`, so
    // that `R` is off by more than the spread of the differences. Here
    // `t - 50 t³ + 4e5 t⁵`, whose differences at `h` and `h/2` agree
    // (0.999) while its derivative at 0 is 1.
    let f = |t: f64| t - 50.0 * t.powi(3) + 4e5 * t.powi(5);
    let steep = Differences {
        h: 0.01,
        close: 1e-7,
        values: [0.01, -0.01, 0.005, -0.005, 1e-7, -1e-7, 0.0].map(f),
    };
    assert_eq!(steep.judge(1.0, Noise::ROUNDING), Some(Ok(())));
    assert!(matches!(steep.judge(1.001, Noise::ROUNDING), Some(Err(_))));
    assert!(matches!(steep.judge(1.1, Noise::ROUNDING), Some(Err(_))));
}

/// The first seed whose case has a gradient with respect to statics.
fn case_with_a_gradient() -> autobatch_fuzz::Case {
    (0..200)
        .map(generate)
        .find(|case| case.gradient.is_some())
        .expect("some case has a gradient")
}

#[test]
fn a_wrong_gradient_with_respect_to_statics_is_reported() {
    let case = case_with_a_gradient();
    let gradient = case.gradient.clone().expect("a gradient");
    let compiled = compile(&case.source(), "generated.ab").expect("compiles");
    let inputs =
        autobatch::Inputs::from_json_str(&gradient.inputs_json(&case).to_string()).expect("inputs");
    let statics: Vec<&str> = gradient.statics.iter().map(String::as_str).collect();
    let bound = compiled
        .bind_static_gradient(&gradient.entry, &statics, &inputs)
        .expect("binds");
    let mut run = bound
        .run(&autobatch::RunConfig::default())
        .expect("the gradient runs");
    let noise = noise(&case.program, &gradient.entry);
    let right = check_static_gradient(&compiled, &case, &gradient, &run, noise).expect("runs");
    assert_eq!(right, Vec::<String>::new(), "{}", case.source());
    // Double every element of the first static's gradient.
    let (name, tensor) = &mut run.static_gradients[0];
    let doubled: Vec<f64> = (0..tensor.len())
        .map(|i| match tensor.data.get(i) {
            autobatch::Scalar::F64(v) => 2.0 * v,
            other => panic!("not an f64: {other:?}"),
        })
        .collect();
    let name = name.clone();
    *tensor = autobatch::Tensor::new(tensor.shape.clone(), autobatch::Data::F64(doubled));
    let wrong = check_static_gradient(&compiled, &case, &gradient, &run, noise).expect("runs");
    assert!(
        wrong
            .iter()
            .any(|m| m.contains(&format!("with respect to {name}, along"))),
        "{wrong:#?}"
    );
}

/// The derivative findings of `seeds` (`autobatch-fuzz programs
/// --derivatives-only`), described.
fn derivative_findings(seeds: &[u64]) -> Vec<String> {
    seeds
        .iter()
        .filter_map(|&seed| match check_seed_derivatives(seed) {
            Outcome::Pass => None,
            Outcome::Fail { findings, .. } => {
                let details: Vec<&str> = findings.iter().map(|f| f.detail.as_str()).collect();
                Some(format!("seed {seed}: {}", details.join("; ")))
            }
            other => Some(format!("seed {seed}: {other:?}")),
        })
        .collect()
}

/// Seeds the oracle misjudged (true derivatives: `python3
/// tools/derivative_seeds.py`): 610 (`ode_rk45` with its coefficients a
/// `[[f64; 3]; 2]` and an integer passed, `h` beyond the range of `h²`
/// convergence: judged by the close difference; the derivative the true
/// one to 8e-7), 1073 (a cast's step times an ODE solution zero at the
/// point: a bend the solver's noise hid), 3102 and 3922 (`ode_bdf_tol`,
/// 3102's solve passing a matrix and an `f32`, whose computed solution
/// jumps between points `h` apart; the derivative is that of the solution
/// computed, its close difference, off the true one by 1.1e-5 and 3.8e-2:
/// judged by the close difference, or skipped as a feature narrower than
/// `h`).
#[test]
fn seeds_the_oracle_misjudged_pass() {
    let found = derivative_findings(&[610, 1073, 3102, 3922]);
    assert!(found.is_empty(), "{found:#?}");
}

/// An ODE solve from a state exactly zero (the helpers' `x * (x[1] +
/// x[0])`, `dl(x)` at `x[0] = 0`): the state's error estimate is zero
/// there, so only a step control that also measures the sensitivities
/// gives the true derivative (mpmath, `expm` of the linear system;
/// `tools/derivative_seeds.py`).
#[test]
#[ignore = "long in a debug build: `cargo test --release -p autobatch-fuzz --test finite -- --include-ignored`"]
fn ode_gradients_at_a_zero_state() {
    let found = derivative_findings(&[2289, 4328, 6273]);
    assert!(found.is_empty(), "{found:#?}");
}
