//! The posteriordb models in `examples/posteriordb/<name>/` (model.ab,
//! data.json, reference.json with posterior summaries of the unconstrained
//! parameters from long Stan runs): the sampler's means, standard deviations
//! and quantiles must agree within Monte Carlo error.

use std::path::PathBuf;

use autobatch::RunConfig;
use autobatch_sample::diagnostics::{ess_basic, ess_bulk, rhat, summarize};
use autobatch_sample::{Model, SampleConfig};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/posteriordb")
}

fn check(name: &str, seed: u64) {
    check_model(name, "model.ab", seed);
}

/// Samples `examples/posteriordb/<name>/<file>` and compares its
/// unconstrained draws with the reference.
fn check_model(name: &str, file: &str, seed: u64) -> autobatch_sample::SampleRun {
    let dir = examples().join(name);
    let reference = std::fs::read_to_string(dir.join("reference.json"))
        .unwrap_or_else(|e| panic!("{name}: reference.json: {e}"));
    let reference: serde_json::Value = serde_json::from_str(&reference).expect("reference JSON");
    let source = std::fs::read_to_string(dir.join(file)).expect("the model");
    let data = std::fs::read_to_string(dir.join("data.json")).expect("data.json");
    let model = Model::new(&source, &format!("{name}/{file}"), &data)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let config = SampleConfig {
        chains: 4,
        warmup: 500,
        draws: 500,
        run: RunConfig {
            options: autobatch::RunOptions {
                seed,
                ..RunConfig::default().options
            },
            ..RunConfig::default()
        },
        ..SampleConfig::default()
    };
    let run = model
        .sample(&config, &mut |_| {})
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let parameters = reference["parameters"].as_array().expect("parameters");
    assert_eq!(parameters.len(), run.dim, "{name}: dimension");
    for p in parameters {
        let i = p["index"].as_u64().expect("index") as usize;
        let label = format!("{name} {} (theta[{i}])", p["name"].as_str().unwrap_or("?"));
        let field = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{label}: no {k}"));
        let chains = run.coordinate(i);
        let ours = summarize(&chains);
        let r = rhat(&chains);
        assert!(r < 1.05, "{label}: R-hat {r}");
        let ess = ess_bulk(&chains);
        let (mean, sd) = (field("mean"), field("sd"));
        // Our Monte Carlo error and the reference's, combined.
        let se_mean = (sd * sd / ess + field("mcse_mean").powi(2)).sqrt();
        assert!(
            (ours.mean - mean).abs() < 4.5 * se_mean,
            "{label}: mean {} against {mean} (standard error {se_mean})",
            ours.mean
        );
        let squares: Vec<Vec<f64>> = chains
            .iter()
            .map(|c| c.iter().map(|x| (x - mean) * (x - mean)).collect())
            .collect();
        // The standard error of an sd estimate, from the spread of the squared
        // deviations: sd(x^2) / (2 sd sqrt(ESS)).
        let all_sq: Vec<f64> = squares.concat();
        let m_sq = all_sq.iter().sum::<f64>() / all_sq.len() as f64;
        let sd_sq = (all_sq.iter().map(|s| (s - m_sq) * (s - m_sq)).sum::<f64>()
            / all_sq.len() as f64)
            .sqrt();
        let se_sd = (sd_sq / (2.0 * sd * ess_basic(&squares).sqrt())).hypot(field("mcse_sd"));
        assert!(
            (ours.sd - sd).abs() < 4.5 * se_sd,
            "{label}: sd {} against {sd} (standard error {se_sd})",
            ours.sd
        );
        // Quantiles: within 4.5 standard errors of the mean, a loose but
        // honest bound for the 5% and 95% points of these posteriors.
        for (k, q) in [("q05", ours.q5), ("q50", ours.q50), ("q95", ours.q95)] {
            let want = field(k);
            assert!(
                (q - want).abs() < 4.5 * sd * (4.0 / ess).sqrt() + 4.5 * se_mean,
                "{label}: {k} {q} against {want}"
            );
        }
    }
    assert!(
        run.divergences() <= (run.chains * run.draws) as u64 / 100,
        "{name}: {} divergences",
        run.divergences()
    );
    run
}

#[test]
fn eight_schools_noncentered() {
    check("eight_schools", 101);
}

/// Eight schools with its parameters declared (`#[lower = 0.0] tau`): the
/// same posterior as the hand-written model, and its draws named and on
/// the constrained scale (`tau` the exponential of the sampler's log tau).
#[test]
fn eight_schools_constrained() {
    let run = check_model("eight_schools", "model_constrained.ab", 101);
    // The target: every mean within 0.1 reference sd.
    let reference = std::fs::read_to_string(examples().join("eight_schools/reference.json"))
        .expect("reference.json");
    let reference: serde_json::Value = serde_json::from_str(&reference).expect("reference JSON");
    for p in reference["parameters"].as_array().expect("parameters") {
        let i = p["index"].as_u64().expect("index") as usize;
        let (mean, sd) = (p["mean"].as_f64().unwrap(), p["sd"].as_f64().unwrap());
        let ours = summarize(&run.coordinate(i)).mean;
        assert!(
            (ours - mean).abs() < 0.1 * sd,
            "theta[{i}]: mean {ours} against {mean} (sd {sd})"
        );
    }
    let mut names = vec!["mu".to_string(), "tau".to_string()];
    names.extend((0..8).map(|j| format!("theta_tilde.{j}")));
    assert_eq!(run.columns, names);
    for k in 0..run.finished() {
        for d in 0..run.draws {
            let (theta, x) = (run.draw(k, d), run.reported(k, d));
            assert_eq!(x[0], theta[0]);
            assert!((x[1] - theta[1].exp()).abs() <= 1e-14 * x[1], "tau");
            assert_eq!(x[2..], theta[2..]);
        }
    }
}

#[test]
fn kidiq() {
    check("kidiq", 102);
}

#[test]
fn ark() {
    check("arK", 103);
}

/// kidiq and arK with their parameters declared (`#[lower = 0.0] sigma`):
/// the same posteriors as the hand-written models.
#[test]
fn kidiq_constrained() {
    let run = check_model("kidiq", "model_constrained.ab", 102);
    assert_eq!(run.columns, ["beta.0", "beta.1", "sigma"]);
}

#[test]
fn ark_constrained() {
    let run = check_model("arK", "model_constrained.ab", 103);
    assert_eq!(
        run.columns,
        ["alpha", "beta.0", "beta.1", "beta.2", "beta.3", "beta.4", "sigma"]
    );
}
