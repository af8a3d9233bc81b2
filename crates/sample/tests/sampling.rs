//! The sampler against targets whose answers are known: Gaussians (standard
//! and correlated, several dimensions) and a conjugate hierarchical model;
//! reproducibility; and chain i's draws independent of the strategy and of
//! the other chains. Tolerances come from the Monte Carlo error of each run
//! (its own ESS), with a margin of 4.5 standard errors.

mod common;
use autobatch::Strategy;
use autobatch_sample::diagnostics::{ess_basic, ess_bulk, rhat};
use autobatch_sample::{Model, SampleConfig, SampleRun};
use common::config;

fn sample(source: &str, data: &str, config: &SampleConfig) -> SampleRun {
    let model = Model::new(source, "test.ab", data).unwrap_or_else(|e| panic!("{e}"));
    model
        .sample(config, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Checks the mean and variance of every coordinate against the truth,
/// within 4.5 Monte Carlo standard errors estimated from the run's own ESS,
/// and that R-hat and ESS look like a converged run.
fn check_moments(run: &SampleRun, means: &[f64], variances: &[f64]) {
    for i in 0..run.dim {
        let chains = run.coordinate(i);
        let all: Vec<f64> = chains.concat();
        let n = all.len() as f64;
        let mean = all.iter().sum::<f64>() / n;
        let var = all.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
        let ess = ess_bulk(&chains);
        let r = rhat(&chains);
        assert!(r < 1.05, "theta[{i}]: R-hat {r}");
        assert!(ess > 0.1 * n, "theta[{i}]: bulk ESS {ess} of {n} draws");
        let se_mean = (variances[i] / ess).sqrt();
        assert!(
            (mean - means[i]).abs() < 4.5 * se_mean,
            "theta[{i}]: mean {mean}, truth {}, standard error {se_mean}",
            means[i]
        );
        // The variance of a Gaussian's variance estimate is 2 sigma^4 / ESS,
        // with the ESS of the squared deviations (lower than the bulk ESS for NUTS).
        let squares: Vec<Vec<f64>> = chains
            .iter()
            .map(|c| c.iter().map(|x| (x - means[i]) * (x - means[i])).collect())
            .collect();
        let ess_sq = ess_basic(&squares);
        let se_var = variances[i] * (2.0 / ess_sq).sqrt();
        assert!(
            (var - variances[i]).abs() < 4.5 * se_var,
            "theta[{i}]: variance {var}, truth {}, standard error {se_var}",
            variances[i]
        );
    }
}

const STANDARD_NORMAL: &str = "\
// A standard normal in D dimensions, D from the data.
fn log_density(theta: [f64; D]) -> f64 {
    -0.5 * dot(theta, theta)
}
";

#[test]
fn standard_normal_in_several_dimensions() {
    for (dim, seed) in [(1, 11), (4, 12), (25, 13)] {
        let run = sample(
            STANDARD_NORMAL,
            &format!("{{\"D\": {dim}}}"),
            &config(4, 400, 400, seed),
        );
        assert_eq!(run.dim, dim);
        check_moments(&run, &vec![0.0; dim], &vec![1.0; dim]);
        assert_eq!(run.divergences(), 0);
        check_energy(&run);
        for chain in 0..4 {
            // The adapted step size of a standard normal is near 1 (less in
            // more dimensions), and the metric near the identity.
            let eps = run.step_size[chain];
            assert!(eps > 0.2 && eps < 2.0, "D = {dim}: step size {eps}");
            let accept: f64 = run.accept_stat[chain].iter().sum::<f64>() / run.draws as f64;
            assert!(
                accept > 0.6,
                "D = {dim}: mean acceptance statistic {accept}"
            );
            for v in &run.inv_metric[chain] {
                assert!(*v > 0.5 && *v < 2.0, "D = {dim}: inverse metric {v}");
            }
        }
    }
}

/// A model written in f32 is sampled through a wrapper that rounds the
/// point to f32 and widens the log density and gradient back: the moments
/// are right, and a chain's draws still do not depend on the strategy.
#[test]
fn a_model_in_f32_samples_its_target() {
    let source = "\
// A standard normal in 4 dimensions, scaled by data, in f32.
extern \"autobatch\" { static s: [f32; 4]; }
fn log_density(theta: [f32; 4]) -> f32 {
    let z = theta / s;
    -0.5 * dot(z, z)
}
";
    let data = r#"{"s": [1.0, 2.0, 0.5, 1.0]}"#;
    let model = Model::new(source, "f32.ab", data).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(model.precision(), autobatch::ScalarType::F32);
    let run = model
        .sample(&config(4, 400, 400, 31), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    check_moments(&run, &[0.0; 4], &[1.0, 4.0, 0.25, 1.0]);
    assert_eq!(run.divergences(), 0);
    let mut c = config(3, 60, 20, 5);
    let pc = model.sample(&c, &mut |_| {}).unwrap();
    c.run.strategy = Strategy::LocalStatic;
    let ls = model.sample(&c, &mut |_| {}).unwrap();
    c.run.strategy = Strategy::Reference;
    let reference = model.sample(&c, &mut |_| {}).unwrap();
    for chain in 0..3 {
        assert!(
            same_draws(&pc, chain, &ls, chain),
            "chain {chain}: local-static"
        );
        assert!(
            same_draws(&pc, chain, &reference, chain),
            "chain {chain}: reference"
        );
    }
}

/// The energies of a standard normal in D dimensions: at each draw the
/// energy is -lp plus a kinetic energy (never negative); in equilibrium
/// both halves are chi-square(D) / 2, so the energy has mean D (within 4.5
/// standard errors from its own ESS); and a Gaussian target's E-BFMI is
/// near 1, far above Stan's 0.3.
fn check_energy(run: &SampleRun) {
    let dim = run.dim as f64;
    for (k, energies) in run.energy.iter().enumerate() {
        assert_eq!(energies.len(), run.draws);
        for (e, lp) in energies.iter().zip(&run.log_density[k]) {
            assert!(*e >= -lp, "chain {k}: energy {e} below -lp {}", -lp);
        }
    }
    let ess = ess_basic(&run.energy);
    let all: Vec<f64> = run.energy.concat();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let se = (dim / ess).sqrt();
    assert!(
        (mean - dim).abs() < 4.5 * se,
        "D = {dim}: mean energy {mean}, standard error {se}"
    );
    for (k, x) in run.e_bfmi().iter().enumerate() {
        assert!(
            *x > 0.6 && *x < 1.6,
            "D = {dim}: E-BFMI of chain {k} is {x}"
        );
    }
}

/// A Gaussian with mean m and covariance S = diag(s) R diag(s), R_ij =
/// rho^|i-j|, given by its (tridiagonal) precision matrix.
fn correlated_gaussian(dim: usize, rho: f64, scales: &[f64], means: &[f64]) -> (String, String) {
    let source = "\
extern \"autobatch\" {
    static P: [[f64; D]; D];
    static m: [f64; D];
}
fn log_density(theta: [f64; D]) -> f64 {
    let r = theta - m;
    -0.5 * dot(r, matvec(P, r))
}
"
    .to_string();
    let c = 1.0 / (1.0 - rho * rho);
    let mut p = vec![vec![0.0; dim]; dim];
    for i in 0..dim {
        let diag = if i == 0 || i == dim - 1 {
            c
        } else {
            (1.0 + rho * rho) * c
        };
        p[i][i] = diag / (scales[i] * scales[i]);
        if i + 1 < dim {
            p[i][i + 1] = -rho * c / (scales[i] * scales[i + 1]);
            p[i + 1][i] = p[i][i + 1];
        }
    }
    (
        source,
        serde_json::json!({ "P": p, "m": means }).to_string(),
    )
}

#[test]
fn correlated_gaussians() {
    for (dim, rho, seed) in [(2, 0.9, 21), (6, 0.7, 22)] {
        let scales: Vec<f64> = (0..dim).map(|i| 0.5 + i as f64).collect();
        let means: Vec<f64> = (0..dim).map(|i| i as f64 - 1.5).collect();
        let (source, data) = correlated_gaussian(dim, rho, &scales, &means);
        let run = sample(&source, &data, &config(4, 500, 500, seed));
        let variances: Vec<f64> = scales.iter().map(|s| s * s).collect();
        check_moments(&run, &means, &variances);
        // The correlation of neighbours.
        let x0: Vec<f64> = run.coordinate(0).concat();
        let x1: Vec<f64> = run.coordinate(1).concat();
        let n = x0.len() as f64;
        let (m0, m1) = (x0.iter().sum::<f64>() / n, x1.iter().sum::<f64>() / n);
        let cov = x0
            .iter()
            .zip(&x1)
            .map(|(a, b)| (a - m0) * (b - m1))
            .sum::<f64>()
            / n;
        let sd0 = (x0.iter().map(|a| (a - m0) * (a - m0)).sum::<f64>() / n).sqrt();
        let sd1 = (x1.iter().map(|b| (b - m1) * (b - m1)).sum::<f64>() / n).sqrt();
        let corr = cov / (sd0 * sd1);
        assert!(
            (corr - rho).abs() < 0.05,
            "D = {dim}: correlation {corr}, truth {rho}"
        );
        // The diagonal metric adapts to the scales.
        for chain in 0..4 {
            let last = run.inv_metric[chain][dim - 1];
            assert!(
                last > 0.4 * variances[dim - 1],
                "metric {last} for variance {}",
                variances[dim - 1]
            );
        }
    }
}

/// Solves Q x = b by Gaussian elimination with partial pivoting.
fn solve(mut q: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| q[i][col].abs().total_cmp(&q[j][col].abs()))
            .unwrap();
        q.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = q.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, row) in lower.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[col + 1 + offset] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| q[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / q[row][row];
    }
    x
}

#[test]
fn conjugate_hierarchical_model() {
    // y[j] ~ normal(mu + tau * eta[j], sigma[j]), eta[j] ~ normal(0, 1),
    // mu ~ normal(0, 5), tau = 4 known: non-centred, funnel-free, and its
    // posterior is Gaussian with precision Q and mean Q^-1 b.
    let source = "\
extern \"autobatch\" {
    static y: [f64; J];
    static sigma: [f64; J];
    static tau: f64;
}
fn log_density(theta: [f64; D]) -> f64 {
    let mu = theta[0];
    let mut lp = -0.5 * (mu / 5.0) * (mu / 5.0);
    for j in 0..J {
        let eta = theta[1 + j];
        let z = (y[j] - mu - tau * eta) / sigma[j];
        lp += -0.5 * eta * eta - 0.5 * z * z;
    }
    lp
}
";
    let y = [28.0, 8.0, -3.0, 7.0, -1.0];
    let sigma = [15.0, 10.0, 16.0, 11.0, 9.0];
    let tau = 4.0;
    let j = y.len();
    let data = serde_json::json!({ "y": y, "sigma": sigma, "tau": tau, "D": j + 1 }).to_string();
    let dim = j + 1;
    // -log p = 0.5 mu^2/25 + 0.5 sum eta^2 + 0.5 sum (y - mu - tau eta)^2 / sigma^2
    let mut q = vec![vec![0.0; dim]; dim];
    let mut b = vec![0.0; dim];
    q[0][0] = 1.0 / 25.0;
    for k in 0..j {
        let w = 1.0 / (sigma[k] * sigma[k]);
        q[0][0] += w;
        q[0][1 + k] += tau * w;
        q[1 + k][0] += tau * w;
        q[1 + k][1 + k] += 1.0 + tau * tau * w;
        b[0] += y[k] * w;
        b[1 + k] += tau * y[k] * w;
    }
    let means = solve(q.clone(), b);
    let variances: Vec<f64> = (0..dim)
        .map(|i| {
            let mut e = vec![0.0; dim];
            e[i] = 1.0;
            solve(q.clone(), e)[i]
        })
        .collect();
    let run = sample(source, &data, &config(4, 500, 500, 31));
    check_moments(&run, &means, &variances);
    assert_eq!(run.divergences(), 0);
}

const SMALL: &str = "\
fn log_density(theta: [f64; 3]) -> f64 {
    let s = [1.0, 2.0, 0.5];
    let z = theta / s;
    -0.5 * dot(z, z) + 0.3 * theta[0] * theta[1] / 2.0
}
";

fn same_draws(a: &SampleRun, chain_a: usize, b: &SampleRun, chain_b: usize) -> bool {
    a.samples[chain_a]
        .iter()
        .map(|x| x.to_bits())
        .eq(b.samples[chain_b].iter().map(|x| x.to_bits()))
        && a.tree_depth[chain_a] == b.tree_depth[chain_b]
        && a.step_size[chain_a].to_bits() == b.step_size[chain_b].to_bits()
}

#[test]
fn the_same_seed_gives_the_same_draws() {
    let model = Model::new(SMALL, "small.ab", "{}").unwrap();
    let run = |seed| {
        model
            .sample(&config(3, 120, 130, seed), &mut |_| {})
            .unwrap()
    };
    let (a, b, c) = (run(5), run(5), run(6));
    for chain in 0..3 {
        assert!(
            same_draws(&a, chain, &b, chain),
            "chain {chain} differs between two runs with seed 5"
        );
        assert!(
            !same_draws(&a, chain, &c, chain),
            "chain {chain} is the same with seeds 5 and 6"
        );
    }
    // Chains differ from one another, and segments do not repeat their draws.
    assert!(!same_draws(&a, 0, &a, 1));
    assert_ne!(a.draw(0, 0), a.draw(0, 100));
}

#[test]
fn a_chain_does_not_depend_on_the_strategy_or_the_other_chains() {
    let model = Model::new(SMALL, "small.ab", "{}").unwrap();
    let run = |chains, strategy| {
        let mut c = config(chains, 110, 30, 9);
        c.run.strategy = strategy;
        model.sample(&c, &mut |_| {}).unwrap()
    };
    let pc8 = run(8, Strategy::ProgramCounter);
    let alone = run(1, Strategy::ProgramCounter);
    assert!(
        same_draws(&pc8, 0, &alone, 0),
        "chain 0 alone differs from chain 0 of 8"
    );
    let ls = run(8, Strategy::LocalStatic);
    let reference = run(3, Strategy::Reference);
    for chain in 0..8 {
        assert!(
            same_draws(&pc8, chain, &ls, chain),
            "chain {chain}: local-static differs"
        );
    }
    for chain in 0..3 {
        assert!(
            same_draws(&pc8, chain, &reference, chain),
            "chain {chain}: reference differs"
        );
    }
}

#[test]
fn the_native_strategy_compiles_the_sampler_and_gives_program_counters_draws() {
    let model = Model::new(SMALL, "small.ab", "{}").unwrap();
    let run = |strategy| {
        let mut c = config(4, 60, 20, 3);
        c.run.strategy = strategy;
        model.sample(&c, &mut |_| {}).unwrap()
    };
    let native = run(Strategy::from_name("native").expect("registered"));
    let compiled = native
        .executor_report
        .iter()
        .find(|f| f.name == "compiled")
        .map(|f| &f.value);
    assert_eq!(
        compiled,
        Some(&autobatch::ReportValue::Bool(true)),
        "{:?}",
        native.executor_report
    );
    // Chains run one after the other under native (each a member in
    // machine code), so the moment the last one ends warmup says nothing
    // of the phases: their seconds are split by gradients (a run long
    // enough for the progress observer to see chains go).
    let mut long = config(4, 3000, 3000, 3);
    long.run.strategy = Strategy::from_name("native").expect("registered");
    long.run.options.threads = 1;
    let long = model.sample(&long, &mut |_| {}).unwrap();
    let (w, s) = (long.warmup_figures, long.sampling_figures);
    assert!(w.gradient_evaluations > 0 && s.gradient_evaluations > 0);
    let time_share = s.seconds / (w.seconds + s.seconds);
    let gradient_share =
        s.gradient_evaluations as f64 / (w.gradient_evaluations + s.gradient_evaluations) as f64;
    assert!((time_share - gradient_share).abs() < 1e-6, "{w:?} {s:?}");
    let pc = run(Strategy::ProgramCounter);
    assert_eq!(native.samples, pc.samples);
    assert_eq!(native.tree_depth, pc.tree_depth);
    assert_eq!(native.step_size, pc.step_size);
    assert_eq!(native.inv_metric, pc.inv_metric);
}

/// A linear regression on a static design matrix, its linear predictor
/// written as a product with the matrix (`matvec(X, beta)`) and as
/// `normal_id_glm`: the products that `native-batched` computes once for
/// the chains of a thread waiting at them.
const GLM: &str = "\
extern \"autobatch\" {
    static X: [[f64; K]; N];
    static y: [f64; N];
}

fn model(alpha: f64, beta: [f64; K], #[lower = 0.0] sigma: f64) -> f64 {
    normal_lpdf(beta, 0.0, 5.0) + normal_lpdf(alpha, 0.0, 5.0)
        + normal_lupdf(y, alpha + matvec(X, beta), sigma)
}
";

const GLM_ID: &str = "\
extern \"autobatch\" {
    static X: [[f64; K]; N];
    static y: [f64; N];
}

fn model(alpha: f64, beta: [f64; K], #[lower = 0.0] sigma: f64) -> f64 {
    normal_lpdf(beta, 0.0, 5.0) + normal_lpdf(alpha, 0.0, 5.0)
        + normal_id_glm_lupdf(y, X, alpha, beta, sigma)
}
";

/// 30 rows of 3 predictors, and outcomes near `1 + X (0.5, -1, 2)`.
fn glm_data() -> String {
    let (rows, columns) = (30, 3);
    let x: Vec<Vec<f64>> = (0..rows)
        .map(|i| {
            (0..columns)
                .map(|k| ((i * 7 + k * 5) % 13) as f64 / 4.0 - 1.5)
                .collect()
        })
        .collect();
    let y: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, r)| 1.0 + 0.5 * r[0] - r[1] + 2.0 * r[2] + ((i % 5) as f64 - 2.0) * 0.3)
        .collect();
    serde_json::json!({ "X": x, "y": y }).to_string()
}

#[test]
fn a_glm_shares_its_products_and_its_draws_do_not_depend_on_the_strategy() {
    let data = glm_data();
    for source in [GLM, GLM_ID] {
        let model = Model::new(source, "glm.ab", &data).unwrap_or_else(|e| panic!("{e}"));
        let run = |strategy| {
            let mut c = config(8, 80, 40, 21);
            c.run.strategy = strategy;
            c.run.options.threads = 2;
            model.sample(&c, &mut |_| {}).unwrap()
        };
        // `X` is 30 x 3, a product with it cheaper than suspending the
        // chains to share it: `auto` runs the chains alone.
        let auto = run(Strategy::Auto);
        let picked = auto.strategy_choice.as_ref().map(|c| c.strategy);
        assert_eq!(picked, Some(Strategy::Native), "{:?}", auto.strategy_choice);
        // The chains of a thread waited at the products with `X` together:
        // fewer products than waits.
        let batched = run(Strategy::NativeBatched);
        let count = |name: &str| {
            batched
                .executor_report
                .iter()
                .find(|f| f.name == name)
                .map(|f| match f.value {
                    autobatch::ReportValue::Count(n) => n,
                    _ => panic!("{name} is not a count"),
                })
        };
        let (products, waits) = (count("batched_products"), count("batched_waits"));
        assert!(
            products.zip(waits).is_some_and(|(p, w)| p > 0 && p < w),
            "{:?}",
            batched.executor_report
        );
        let pc = run(Strategy::ProgramCounter);
        for other in [&batched, &pc] {
            assert_eq!(auto.samples, other.samples);
            assert_eq!(auto.tree_depth, other.tree_depth);
            assert_eq!(auto.step_size, other.step_size);
            assert_eq!(auto.inv_metric, other.inv_metric);
        }
    }
}
