//! R-hat, ESS and quantiles on synthetic draws whose answers are known:
//! independent draws, AR(1) chains, chains that disagree in location or scale.

use autobatch_sample::diagnostics::{
    e_bfmi, ess_basic, ess_bulk, ess_tail, mcse_mean, normal_quantile, quantile, rank_normalize,
    rhat, rhat_basic, split_chains, summarize,
};

/// splitmix64 with Box-Muller: deterministic test data.
struct Rng(u64);
impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

fn iid(chains: usize, draws: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = Rng(seed);
    (0..chains)
        .map(|_| (0..draws).map(|_| rng.normal()).collect())
        .collect()
}

/// Stationary AR(1) chains x[t] = phi x[t-1] + sqrt(1 - phi^2) e[t].
fn ar1(chains: usize, draws: usize, phi: f64, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = Rng(seed);
    (0..chains)
        .map(|_| {
            let mut x = rng.normal();
            (0..draws)
                .map(|_| {
                    x = phi * x + (1.0 - phi * phi).sqrt() * rng.normal();
                    x
                })
                .collect()
        })
        .collect()
}

#[test]
fn normal_quantile_matches_known_values() {
    assert_eq!(normal_quantile(0.5), 0.0);
    for (p, z) in [
        (0.975, 1.959_963_984_540_054),
        (0.025, -1.959_963_984_540_054),
        (0.841_344_746_068_542_9, 1.0),
        (0.001, -3.090_232_306_167_813_5),
        (1e-10, -6.361_340_902_404_056),
    ] {
        let got = normal_quantile(p);
        assert!(
            (got - z).abs() < 1e-8 * z.abs().max(1.0),
            "Phi^-1({p}) = {got}, expected {z}"
        );
    }
    assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
    assert!(normal_quantile(1.5).is_nan());
}

#[test]
fn quantiles_interpolate_linearly() {
    let xs = [3.0, 1.0, 4.0, 2.0, 5.0];
    assert_eq!(quantile(&xs, 0.0), 1.0);
    assert_eq!(quantile(&xs, 0.5), 3.0);
    assert_eq!(quantile(&xs, 1.0), 5.0);
    assert!((quantile(&xs, 0.05) - 1.2).abs() < 1e-12);
    assert!((quantile(&xs, 0.95) - 4.8).abs() < 1e-12);
}

#[test]
fn split_and_rank_normalize() {
    let chains = vec![
        vec![1.0, 2.0, 3.0, 4.0, 5.0],
        vec![6.0, 7.0, 8.0, 9.0, 10.0],
    ];
    let split = split_chains(&chains);
    assert_eq!(
        split,
        vec![
            vec![1.0, 2.0],
            vec![4.0, 5.0],
            vec![6.0, 7.0],
            vec![9.0, 10.0]
        ]
    );
    // Ties share their average rank; ranks map through (r - 3/8) / (S + 1/4).
    let z = rank_normalize(&[vec![1.0, 2.0, 2.0, 3.0]]);
    let expected = |r: f64| normal_quantile((r - 0.375) / 4.25);
    assert_eq!(
        z[0],
        vec![expected(1.0), expected(2.5), expected(2.5), expected(4.0)]
    );
}

#[test]
fn independent_draws_have_rhat_one_and_full_ess() {
    let chains = iid(4, 1000, 1);
    let r = rhat(&chains);
    assert!((r - 1.0).abs() < 0.01, "R-hat of iid draws: {r}");
    let ess = ess_bulk(&chains);
    // The ESS estimate of 4000 iid draws has a relative error of a few percent.
    assert!(
        (ess / 4000.0 - 1.0).abs() < 0.1,
        "bulk ESS of 4000 iid draws: {ess}"
    );
    let summary = summarize(&chains);
    assert!(summary.mean.abs() < 4.0 / 4000f64.sqrt());
    assert!((summary.sd - 1.0).abs() < 0.05);
    assert!((summary.q5 + 1.645).abs() < 0.1 && (summary.q95 - 1.645).abs() < 0.1);
}

#[test]
fn ar1_chains_have_the_known_ess() {
    // ESS = N (1 - phi) / (1 + phi) for a stationary AR(1) chain.
    for (phi, seed) in [(0.5, 2), (0.9, 3)] {
        let chains = ar1(4, 4000, phi, seed);
        let expected = 16_000.0 * (1.0 - phi) / (1.0 + phi);
        let basic = ess_basic(&chains);
        assert!(
            (basic / expected - 1.0).abs() < 0.15,
            "phi {phi}: ESS {basic}, expected {expected}"
        );
        let bulk = ess_bulk(&chains);
        assert!(
            (bulk / expected - 1.0).abs() < 0.15,
            "phi {phi}: bulk ESS {bulk}, expected {expected}"
        );
        assert!(rhat(&chains) < 1.01);
    }
    // Anticorrelated chains are more efficient than independent draws.
    let chains = ar1(4, 2000, -0.3, 4);
    let ess = ess_basic(&chains);
    assert!(ess > 8000.0, "anticorrelated chains: ESS {ess}");
}

/// The standard error of the mean of stationary AR(1) chains of unit
/// variance is sqrt((1 + phi) / ((1 - phi) N)) for N draws in all; and
/// the spread of many independent runs' means agrees with the estimate.
#[test]
fn ar1_chains_have_the_known_mcse_of_the_mean() {
    for (phi, seed) in [(0.0, 5), (0.5, 6), (0.9, 7)] {
        let chains = ar1(4, 4000, phi, seed);
        let expected = ((1.0 + phi) / ((1.0 - phi) * 16_000.0)).sqrt();
        let mcse = mcse_mean(&chains);
        assert!(
            (mcse / expected - 1.0).abs() < 0.1,
            "phi {phi}: MCSE {mcse}, expected {expected}"
        );
    }
    let runs: Vec<f64> = (0..400)
        .map(|seed| {
            let chains = ar1(4, 250, 0.5, 100 + seed);
            chains.concat().iter().sum::<f64>() / 1000.0
        })
        .collect();
    let spread = (runs.iter().map(|m| m * m).sum::<f64>() / runs.len() as f64).sqrt();
    let mcse = mcse_mean(&ar1(4, 250, 0.5, 99));
    assert!(
        (mcse / spread - 1.0).abs() < 0.25,
        "MCSE {mcse}, spread of the means of 400 runs {spread}"
    );
    assert!(mcse_mean(&ar1(2, 7, 0.5, 1)).is_nan(), "7 draws per chain");
}

#[test]
fn disagreeing_chains_have_large_rhat() {
    // One chain shifted by one standard deviation.
    let mut shifted = iid(4, 500, 5);
    for x in &mut shifted[3] {
        *x += 1.0;
    }
    let r = rhat(&shifted);
    assert!(r > 1.1, "R-hat with a shifted chain: {r}");
    // Same location, one chain three times wider: the bulk R-hat hardly sees
    // it, the tail R-hat (distances to the median) does.
    let mut wide = iid(4, 1000, 6);
    for x in &mut wide[0] {
        *x *= 3.0;
    }
    let bulk_only = rhat_basic(&rank_normalize(&split_chains(&wide)));
    let r = rhat(&wide);
    assert!(
        r > 1.05 && r > bulk_only,
        "R-hat {r} with a wide chain (bulk alone {bulk_only})"
    );
}

#[test]
fn degenerate_inputs_give_nan_not_a_panic() {
    assert!(rhat(&[vec![1.0; 10], vec![1.0; 10]]).is_nan());
    assert!(ess_bulk(&[vec![2.0; 3]]).is_nan());
    assert!(rhat(&[vec![1.0, f64::NAN, 2.0, 3.0]]).is_nan());
    assert!(rhat(&[]).is_nan());
    // One chain: split R-hat still compares its two halves.
    let one = iid(1, 1000, 7);
    assert!((rhat(&one) - 1.0).abs() < 0.02);
}

#[test]
fn e_bfmi_is_twice_one_minus_the_autocorrelation() {
    // For a stationary AR(1) series, E[(x[t] - x[t-1])^2] = 2 (1 - phi) Var x.
    for (phi, seed) in [(0.0, 41), (0.5, 42), (0.9, 43)] {
        let chain = &ar1(1, 40_000, phi, seed)[0];
        let x = e_bfmi(chain);
        let truth = 2.0 * (1.0 - phi);
        assert!(
            (x - truth).abs() < 0.05,
            "phi {phi}: E-BFMI {x}, truth {truth}"
        );
    }
    assert!(e_bfmi(&[1.0]).is_nan());
    assert!(e_bfmi(&[2.0, 2.0, 2.0]).is_nan());
}

/// Draws made the same way in Rust and in the Python script that computed
/// the expected values below with ArviZ: a 64-bit LCG's top 53 bits as
/// uniforms, four of them summed less 2 as the innovation of an AR(`phi`)
/// series, chain `c` shifted by `offset * c`, and rounded down to a
/// multiple of `step` (to make ties) when `step` is not 0.
fn lcg_draws(
    seed: u64,
    chains: usize,
    n: usize,
    phi: f64,
    offset: f64,
    step: f64,
) -> Vec<Vec<f64>> {
    let mut state = seed;
    let mut uniform = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..chains)
        .map(|c| {
            let mut x = 0.0;
            (0..n)
                .map(|_| {
                    let e = uniform() + uniform() + uniform() + uniform() - 2.0;
                    x = phi * x + e;
                    let v = x + offset * c as f64;
                    if step == 0.0 {
                        v
                    } else {
                        (v / step).floor() * step
                    }
                })
                .collect()
        })
        .collect()
}

fn assert_close(what: &str, ours: f64, arviz: f64) {
    assert!(
        (ours - arviz).abs() <= 1e-9 * arviz.abs(),
        "{what}: ours {ours}, ArviZ {arviz}"
    );
}

/// Draws and the figures ArviZ gives for them.
struct ArvizCase {
    name: &'static str,
    draws: Vec<Vec<f64>>,
    rhat: f64,
    ess_bulk: f64,
    ess_tail: f64,
}

/// Rank-normalized split R-hat (`az.rhat(x, method="rank")`), bulk ESS
/// (`az.ess(x, method="bulk")`) and tail ESS (`method="tail"`) of the same
/// draws, computed with ArviZ 0.23.4 (numpy 2.4.6, scipy's normal
/// quantile): mixed AR(0.7) chains, chains of odd length that disagree,
/// draws with many ties, and the shortest chains that have an ESS (halves
/// of 4, 4 and 6 draws: too short for a pair of autocorrelations, their
/// ESS is N log10 N, the most it may be).
#[test]
fn rhat_and_ess_are_arviz_s() {
    let case = |name, draws, rhat, ess_bulk, ess_tail| ArvizCase {
        name,
        draws,
        rhat,
        ess_bulk,
        ess_tail,
    };
    let cases = [
        case(
            "mixed",
            lcg_draws(2, 4, 100, 0.7, 0.0, 0.0),
            1.0069148072132152,
            82.4545358295851,
            168.147233198031,
        ),
        case(
            "unmixed_odd",
            lcg_draws(3, 3, 51, 0.3, 0.8, 0.0),
            1.4640643229379793,
            6.658030582470941,
            83.28383944822305,
        ),
        case(
            "ties",
            lcg_draws(4, 2, 40, 0.5, 0.0, 0.5),
            1.3210705554042808,
            6.611183905308566,
            33.36259877085162,
        ),
        case(
            "eight",
            lcg_draws(1, 4, 8, 0.0, 0.0, 0.0),
            1.0866524712043761,
            48.16479930623699,
            48.16479930623699,
        ),
        case(
            "nine",
            lcg_draws(5, 3, 9, 0.5, 0.0, 0.0),
            1.215693629118912,
            33.12506980107854,
            33.12506980107854,
        ),
        case(
            "twelve",
            lcg_draws(6, 2, 12, 0.5, 0.0, 0.0),
            0.9996812221960293,
            33.12506980107854,
            33.12506980107854,
        ),
    ];
    for ArvizCase {
        name,
        draws,
        rhat: want_rhat,
        ess_bulk: want_bulk,
        ess_tail: want_tail,
    } in cases
    {
        // Acklam's normal quantile is within 1.2e-9 of scipy's: R-hat and
        // the bulk ESS move by less than that.
        let near = |ours: f64, arviz: f64, what: &str| {
            assert!(
                (ours - arviz).abs() <= 1e-7 * arviz.abs(),
                "{name} {what}: ours {ours}, ArviZ {arviz}"
            )
        };
        near(rhat(&draws), want_rhat, "R-hat");
        near(ess_bulk(&draws), want_bulk, "bulk ESS");
        // The tail ESS uses no normal quantile: the same to rounding.
        assert_close(&format!("{name} tail ESS"), ess_tail(&draws), want_tail);
        let summary = summarize(&draws);
        assert_eq!(summary.rhat.to_bits(), rhat(&draws).to_bits(), "{name}");
        assert_eq!(
            summary.ess_bulk.to_bits(),
            ess_bulk(&draws).to_bits(),
            "{name}"
        );
        assert_eq!(
            summary.ess_tail.to_bits(),
            ess_tail(&draws).to_bits(),
            "{name}"
        );
    }
}

/// Four chains of five draws (too few for any diagnostic to mean much):
/// R-hat is still ArviZ's (0.23.4: `az.rhat(x, method="rank")`), which
/// can be below 1 with two draws per split half; the ESS is not defined
/// below 8 draws per chain, as in Stan (ArviZ would give 19.3 and 16).
#[test]
fn five_draws_give_arviz_s_rhat_and_no_ess() {
    let chains = lcg_draws(1, 4, 5, 0.0, 0.0, 0.0);
    let r = rhat(&chains);
    assert!((r - 1.2782720954265723).abs() < 1e-7, "R-hat {r}");
    assert!(ess_bulk(&chains).is_nan() && ess_tail(&chains).is_nan());
}

/// E-BFMI per chain as ArviZ 0.23.4's `az.bfmi` gives it for the "mixed"
/// draws above taken as energies.
#[test]
fn e_bfmi_is_arviz_s() {
    let energies = lcg_draws(2, 4, 100, 0.7, 0.0, 0.0);
    let want = [
        0.5252349780026182,
        0.5671813641983392,
        0.6417805638170068,
        0.6484648087010029,
    ];
    for (chain, want) in energies.iter().zip(want) {
        assert_close("E-BFMI", e_bfmi(chain), want);
    }
}
