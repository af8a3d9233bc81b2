//! Transformed parameters (`fn transformed`) and generated quantities
//! (`fn generated`): reported with every draw under their names, each the
//! closed-form function of that draw's parameters; the generated ones
//! drawn from per-draw random streams with the moments of their
//! distributions; the errors of a wrong declaration, located at it.

mod common;

use autobatch_sample::{Model, SampleError};

fn columns_of(run: &autobatch_sample::SampleRun, name: &str) -> Vec<usize> {
    run.columns
        .iter()
        .enumerate()
        .filter(|(_, c)| *c == name || c.starts_with(&format!("{name}.")))
        .map(|(i, _)| i)
        .collect()
}

/// Every value of column `i` over every chain and draw.
fn values(run: &autobatch_sample::SampleRun, i: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for k in 0..run.finished() {
        for d in 0..run.draws {
            out.push(run.reported(k, d)[i]);
        }
    }
    out
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    (
        m,
        x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0),
    )
}

const EIGHT_SCHOOLS: &str = "\
extern \"autobatch\" { static y: [f64; J]; static sigma: [f64; J]; }
fn model(theta_trans: [f64; J], mu: f64, #[lower = 0.0] tau: f64) -> f64 {
    let (theta, _) = transformed(theta_trans, mu, tau);
    normal_lupdf(theta_trans, 0.0, 1.0) + normal_lupdf(y, theta, sigma)
        + normal_lupdf(mu, 0.0, 5.0) + cauchy_lupdf(tau, 0.0, 5.0)
}
fn transformed(theta_trans: [f64; J], mu: f64, tau: f64) -> ([f64; J], f64) {
    let theta = theta_trans * tau + mu;
    let tau_squared = tau * tau;
    (theta, tau_squared)
}
fn generated(tau_squared: f64, theta: [f64; J]) -> [[f64; 2]; J] {
    let mut pairs = [[0.0; 2]; J];
    for j in 0..J {
        pairs[j][0] = theta[j] - tau_squared;
        pairs[j][1] = (j as f64) * 2.0;
    }
    pairs
}
";

const EIGHT_SCHOOLS_DATA: &str =
    r#"{"y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}"#;

/// The transformed parameters and deterministic generated quantities of
/// each draw are the closed-form functions of its parameters, named and
/// shaped in the draws, the CSV and the table.
#[test]
fn transformed_parameters_are_functions_of_each_draw() {
    let model = Model::new(EIGHT_SCHOOLS, "m.ab", EIGHT_SCHOOLS_DATA).expect("compiles");
    assert_eq!(model.dim(), 10);
    let run = model
        .sample(&common::config(2, 150, 100, 3), &mut |_| {})
        .expect("samples");
    let shapes: Vec<(String, Vec<usize>)> = run
        .variables
        .iter()
        .map(|v| (v.name.clone(), v.shape.clone()))
        .collect();
    let wanted: Vec<(String, Vec<usize>)> = [
        ("theta_trans", vec![8]),
        ("mu", vec![]),
        ("tau", vec![]),
        ("theta", vec![8]),
        ("tau_squared", vec![]),
        ("pairs", vec![8, 2]),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s))
    .collect();
    assert_eq!(shapes, wanted);
    assert_eq!(run.columns.len(), 8 + 2 + 8 + 1 + 16);
    assert_eq!(run.columns[10], "theta.0");
    assert_eq!(run.columns[18], "tau_squared");
    assert_eq!(run.columns[19 + 2 * 7 + 1], "pairs.7.1");
    for k in 0..run.finished() {
        for d in 0..run.draws {
            let x = run.reported(k, d);
            let (theta_trans, mu, tau) = (&x[..8], x[8], x[9]);
            assert!(tau > 0.0);
            for j in 0..8 {
                let theta = theta_trans[j] * tau + mu;
                assert_eq!(x[10 + j], theta, "theta.{j}");
                assert_eq!(x[19 + 2 * j], theta - tau * tau, "pairs.{j}.0");
                assert_eq!(x[19 + 2 * j + 1], 2.0 * j as f64, "pairs.{j}.1");
            }
            assert_eq!(x[18], tau * tau);
        }
    }
    let mut csv = Vec::new();
    autobatch_sample::report::write_csv(&run, &mut csv).expect("writes");
    let csv = String::from_utf8(csv).expect("text");
    let header = csv.lines().next().unwrap_or("");
    assert!(
        header.contains(",tau,theta.0,") && header.contains(",tau_squared,pairs.0.0,"),
        "{header}"
    );
    let table = autobatch_sample::report::table(&run);
    assert!(
        table.contains("theta.7") && table.contains("pairs.3.1"),
        "{table}"
    );
}

const GENERATED: &str = "\
fn model(mu: f64) -> f64 { normal_lupdf(mu, 0.0, 1.0) }
fn generated(mu: f64) -> (f64, i64, f64) {
    let y_rep = normal_rng(mu, 1.0);
    let hit = bernoulli_rng(0.3);
    let u = uniform();
    (y_rep, hit, u)
}
";

/// `mu ~ normal(0, 1)` and `y_rep ~ normal(mu, 1)` per draw: `y_rep - mu`
/// is a standard normal independent of `mu`, `y_rep` normal with variance
/// 2; `hit` a Bernoulli(0.3) reported as 0 or 1; every draw's stream its
/// own, fixed by the seed.
#[test]
fn generated_quantities_draw_per_draw() {
    let model = Model::new(GENERATED, "m.ab", "{}").expect("compiles");
    let config = common::config(4, 300, 2000, 11);
    let run = model.sample(&config, &mut |_| {}).expect("samples");
    assert_eq!(run.columns, ["mu", "y_rep", "hit", "u"].map(String::from));
    let mu = values(&run, 0);
    let y_rep = values(&run, 1);
    let noise: Vec<f64> = y_rep.iter().zip(&mu).map(|(y, m)| y - m).collect();
    let n = noise.len() as f64;
    let (m, v) = mean_var(&noise);
    assert!(m.abs() < 4.0 / n.sqrt(), "mean of y_rep - mu: {m}");
    assert!((v - 1.0).abs() < 0.1, "variance of y_rep - mu: {v}");
    let (_, v) = mean_var(&y_rep);
    assert!((v - 2.0).abs() < 0.3, "variance of y_rep: {v}");
    let (mm, _) = mean_var(&mu);
    let cov = noise
        .iter()
        .zip(&mu)
        .map(|(e, x)| e * (x - mm))
        .sum::<f64>()
        / n;
    assert!(cov.abs() < 0.06, "covariance of y_rep - mu and mu: {cov}");
    let hit = values(&run, 2);
    assert!(hit.iter().all(|&h| h == 0.0 || h == 1.0));
    let (p, _) = mean_var(&hit);
    assert!(
        (p - 0.3).abs() < 4.0 * (0.21 / n).sqrt(),
        "mean of hit: {p}"
    );
    let u = values(&run, 3);
    let mut seen = u.clone();
    seen.sort_by(f64::total_cmp);
    seen.dedup();
    assert_eq!(seen.len(), u.len(), "two draws share a uniform draw");
    let (mu_u, _) = mean_var(&u);
    assert!((mu_u - 0.5).abs() < 4.0 * (1.0 / 12.0 / n).sqrt());
    let again = model.sample(&config, &mut |_| {}).expect("samples");
    assert_eq!(values(&again, 3), u, "the same seed draws the same");
    assert_eq!(columns_of(&run, "y_rep"), vec![1]);
}

/// A generated quantity that faults stops the run with the error located
/// in the user's `fn generated`, naming the chain and draw.
#[test]
fn a_fault_in_generated_quantities_is_located() {
    let source = "\
fn model(mu: f64) -> f64 { normal_lupdf(mu, 0.0, 1.0) }
fn generated(mu: f64) -> f64 {
    let y_rep = normal_rng(mu, -1.0);
    y_rep
}
";
    let model = Model::new(source, "m.ab", "{}").expect("compiles");
    let Err(error) = model.sample(&common::config(1, 20, 5, 1), &mut |_| {}) else {
        panic!("sampled");
    };
    let text = error.to_string();
    assert!(text.contains("chain 0, draw 0"), "{text}");
    assert!(text.contains("m.ab:3:17"), "{text}");
    assert!(!text.contains("nuts_"), "{text}");
}

fn compile_error(source: &str) -> String {
    match Model::new(source, "m.ab", "{}") {
        Err(SampleError::Compile(text)) => text,
        Err(other) => panic!("not a compile error: {other}"),
        Ok(_) => panic!("compiled:\n{source}"),
    }
}

#[test]
fn wrong_quantities_are_errors_located_at_them() {
    let model = "fn model(mu: f64, #[lower = 0.0] s: f64) -> f64 { -mu * mu - s }\n";
    for (function, wanted, at) in [
        (
            "fn generated(x: f64) -> f64 { let y = x; y }",
            "`fn generated` takes `x`, which is not one of the parameters of `fn model` or results of `fn transformed` (those are: mu, s)",
            "m.ab:2:14",
        ),
        (
            "fn transformed(mu: [f64; 2]) -> f64 { let y = mu[0]; y }",
            "the argument `mu` of `fn transformed` has the type `[f64; 2]`, but `mu` is a parameter of `fn model` of type `f64`",
            "m.ab:2:20",
        ),
        (
            "fn transformed(mu: f64) -> f64 { mu * 2.0 }",
            "a result of `fn transformed` must be a name",
            "m.ab:2:34",
        ),
        (
            "fn transformed(mu: f64) -> (f64, f64) { let a = mu; (a,) }",
            "declares 2 results but ends with 1 names",
            "m.ab:2:53",
        ),
        (
            "fn transformed(mu: f64) -> f64 { mu }",
            "has the name of a parameter of `fn model`",
            "m.ab:2:34",
        ),
        (
            "fn generated(mu: f64) { let a = mu; }",
            "`fn generated` returns nothing",
            "m.ab:2:4",
        ),
        (
            "fn generated(mu: f64) -> bool { let b = mu > 0.0; b }",
            "the result `b` is reported with the draws, so it must be an `f64`, an `i64`",
            "m.ab:2:26",
        ),
        (
            "fn generated(mu: f64) -> f64 { let a = mu; return a; }",
            "does not end with its results",
            "m.ab:2:4",
        ),
        (
            "fn generated(mu: f64) -> f64 { let nuts_a = mu; nuts_a }",
            "which the sampler reserves",
            "m.ab:2:49",
        ),
        (
            "fn transformed(mu: f64) -> f64 { let t = mu; t }\nfn generated(t: f64) -> (f64, f64) { let u = t; (u, u) }",
            "`fn generated` names two results `u`",
            "m.ab:3:53",
        ),
    ] {
        let text = compile_error(&format!("{model}{function}\n"));
        assert!(text.contains(wanted), "{function}: {text}");
        assert!(text.contains(at), "{function}: not at {at}: {text}");
        assert!(!text.contains("nuts_constrain"), "{function}: {text}");
    }
}
