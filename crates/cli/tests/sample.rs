//! `autobatch sample` as scripts use it: help, exit codes and one-line
//! errors for bad models and data, the CSV of draws and the stats JSON.

use std::path::PathBuf;
use std::process::{Command, Output};

const MODEL: &str = "\
extern \"autobatch\" {
    static y: [f64; N];
}
// mu and log(sigma) of normal data, flat priors.
fn log_density(theta: [f64; 2]) -> f64 {
    let r = (y - theta[0]) / theta[1].exp();
    -0.5 * dot(r, r) - N as f64 * theta[1]
}
";

const DATA: &str = r#"{"y": [1.2, 0.4, 2.2, 1.7, 0.9, 1.4], "N": 6}"#;

struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("autobatch-sample-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch { dir }
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a scratch file");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn autobatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autobatch"))
        .args(args)
        .output()
        .expect("run autobatch")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit code `code`, and for code 2 exactly one `error: ` line on stderr containing `wanted`.
fn assert_fails(output: &Output, code: i32, wanted: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    assert!(
        stderr.contains(wanted),
        "stderr does not contain `{wanted}`: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    if code == 2 {
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
}

#[test]
fn help_describes_the_flags() {
    let output = autobatch(&["sample", "--help"]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    for flag in [
        "--data",
        "--chains",
        "--warmup",
        "--draws",
        "--seed",
        "--strategy",
        "--output",
        "--stats",
        "--max-depth",
        "--target-accept",
        "--pooled-adaptation",
        "--pool-every",
        "--init",
    ] {
        assert!(stdout.contains(flag), "help lacks {flag}: {stdout}");
    }
}

#[test]
fn draws_csv_stats_json_and_summary() {
    let s = Scratch::new("ok");
    let model = s.file("model.ab", MODEL);
    let data = s.file("data.json", DATA);
    let csv = s.dir.join("draws.csv");
    let stats = s.dir.join("stats.json");
    let args = [
        "sample",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--chains",
        "3",
        "--warmup",
        "150",
        "--draws",
        "120",
        "--seed",
        "4",
        "--output",
        csv.to_str().unwrap(),
        "--stats",
        stats.to_str().unwrap(),
    ];
    let output = autobatch(&args);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // No progress bar when stderr is not a terminal: only the warnings on
    // the diagnostics of so short a run (360 draws).
    let stderr = text(&output.stderr);
    assert!(!stderr.contains('\r'), "{stderr}");
    for line in stderr.lines() {
        assert!(line.starts_with("warning: "), "{line}");
    }

    let stdout = text(&output.stdout);
    for word in [
        "mean",
        "sd",
        "5%",
        "50%",
        "95%",
        "R-hat",
        "ESS",
        "theta[0]",
        "theta[1]",
        "divergences",
        "tree depth",
        "per second",
    ] {
        assert!(stdout.contains(word), "summary lacks `{word}`:\n{stdout}");
    }

    let draws = std::fs::read_to_string(&csv).expect("the CSV");
    let mut lines = draws.lines();
    assert_eq!(
        lines.next(),
        Some("chain,draw,theta[0],theta[1],lp__,accept_stat__,treedepth__,n_leapfrog__,divergent__,energy__")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3 * 120);
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), 10);
        assert_eq!(row[0].parse::<usize>().unwrap(), k / 120);
        assert_eq!(row[1].parse::<usize>().unwrap(), k % 120);
        assert!(row[2].parse::<f64>().unwrap().is_finite());
        // The sampler's figures: lp__ finite, accept_stat__ in [0, 1],
        // tree depth and leapfrog steps consistent, divergent__ 0 or 1,
        // energy__ at least -lp__ (the kinetic energy is not negative).
        let lp: f64 = row[4].parse().unwrap();
        let accept: f64 = row[5].parse().unwrap();
        let (depth, leapfrogs): (u32, u64) = (row[6].parse().unwrap(), row[7].parse().unwrap());
        assert!(lp.is_finite() && (0.0..=1.0).contains(&accept), "{row:?}");
        assert!(leapfrogs >= 1 && leapfrogs < 1 << (depth + 1), "{row:?}");
        assert!(row[8] == "0" || row[8] == "1");
        assert!(row[9].parse::<f64>().unwrap() >= -lp, "{row:?}");
    }
    // The posterior mean of mu is near the data's mean (1.3).
    let mu: f64 = rows
        .iter()
        .map(|r| r[2].parse::<f64>().unwrap())
        .sum::<f64>()
        / rows.len() as f64;
    assert!((mu - 1.3).abs() < 0.3, "mean of mu: {mu}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    for key in [
        "warmup_seconds",
        "sampling_seconds",
        "gradient_evaluations_warmup",
        "gradient_evaluations_sampling",
        "divergences",
        "mean_tree_depth",
        "step_size",
    ] {
        assert!(json.get(key).is_some(), "stats lack `{key}`: {json}");
    }
    assert_eq!(json["step_size"].as_array().unwrap().len(), 3);
    assert!(json["gradient_evaluations_sampling"].as_u64().unwrap() >= 3 * 120);
    assert!(json["warmup_seconds"].as_f64().unwrap() > 0.0);
    // The default strategy is native, and it compiled the sampler and the model.
    assert_eq!(json["strategy"], "native", "{json}");
    assert_eq!(json["native"]["compiled"], true, "{json}");

    // The same command gives the same draws, whatever the strategy.
    let again = autobatch(&args);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), draws);
    for strategy in ["local-static", "program-counter", "native-batched"] {
        let mut other = args.to_vec();
        other.extend(["--strategy", strategy]);
        assert_eq!(autobatch(&other).status.code(), Some(0), "{strategy}");
        assert_eq!(std::fs::read_to_string(&csv).unwrap(), draws, "{strategy}");
    }
}

#[test]
fn bad_models_exit_1() {
    let s = Scratch::new("model");
    let data = s.file("data.json", "{}");
    let none = s.file("none.ab", "fn f(x: f64) -> f64 { x }\n");
    assert_fails(
        &sample_files(&none, &data, &[]),
        1,
        "no function `log_density`",
    );
    let signature = s.file(
        "sig.ab",
        "fn log_density(theta: [f64; 2], k: i64) -> f64 { theta[0] }\n",
    );
    assert_fails(
        &sample_files(&signature, &data, &[]),
        1,
        "takes 2 parameters",
    );
    let broken = s.file(
        "broken.ab",
        "fn log_density(theta: [f64; 2]) -> f64 {\n    theta[0] +\n}\n",
    );
    assert_fails(&sample_files(&broken, &data, &[]), 1, "broken.ab");
}

#[test]
fn bad_data_and_usage_exit_2() {
    let s = Scratch::new("data");
    let model = s.file("model.ab", MODEL);
    let run = |data: &str| {
        let path = s.file("data.json", data);
        autobatch(&[
            "sample",
            model.to_str().unwrap(),
            "--data",
            path.to_str().unwrap(),
            "--warmup",
            "10",
            "--draws",
            "10",
        ])
    };
    assert_fails(&run("{"), 2, "not valid JSON");
    assert_fails(&run("{}"), 2, "no `y`");
    assert_fails(&run(r#"{"y": [1.0], "N": 2}"#), 2, "`N` = 2");
    assert_fails(&run(r#"{"y": [1.0], "x": 2}"#), 2, "`x`");
    assert_fails(&run(r#"{"y": ["a"]}"#), 2, "y");
    assert_fails(
        &autobatch(&[
            "sample",
            model.to_str().unwrap(),
            "--data",
            "/nonexistent/data.json",
        ]),
        2,
        "cannot read data",
    );
    assert_fails(
        &autobatch(&["sample", model.to_str().unwrap()]),
        2,
        "--data",
    );
    let data = s.file("ok.json", DATA);
    assert_fails(
        &autobatch(&[
            "sample",
            model.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--strategy",
            "fast",
        ]),
        2,
        "fast",
    );
}

/// A chain whose log density faults is named on stderr and left out; the
/// others' draws are written and the run exits 0, as `run` does when some
/// members fail. When every chain fails, the run exits 2 naming the error.
#[test]
fn failed_chains_are_named_and_the_others_kept() {
    let s = Scratch::new("failing");
    let model = s.file(
        "model.ab",
        // Defined only for theta[0] > 1.98: a chain whose 100 initial draws
        // all fall outside stops with the model's error; a fault met later
        // only rejects a step.
        "fn log_density(theta: [f64; 2]) -> f64 {
    let table = [1.0, 1.0];
    if theta[0] > 1.98 { -0.5 * dot(theta, theta) * table[0] } else { table[5] }
}
",
    );
    let data = s.file("data.json", "{}");
    let csv = s.dir.join("draws.csv");
    let stats = s.dir.join("stats.json");
    let output = sample_files(
        &model,
        &data,
        &[
            "--chains",
            "8",
            "--warmup",
            "150",
            "--draws",
            "150",
            "--seed",
            "4",
            "--output",
            csv.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
        ],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: chain "))
        .collect();
    assert!(!warnings.is_empty() && warnings.len() < 8, "{stderr}");
    for line in &warnings {
        assert!(line.starts_with("warning: chain "), "{line}");
        assert!(line.contains("index_out_of_bounds at "), "{line}");
        assert!(line.contains("model.ab:3:71:"), "{line}");
    }
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let failed = stats["failed_chains"].as_array().unwrap();
    let finished = stats["finished_chains"].as_array().unwrap();
    assert_eq!(failed.len(), warnings.len());
    assert_eq!(failed.len() + finished.len(), 8);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + finished.len() * 150);
    for chain in failed {
        let prefix = format!("\n{},", chain["chain"]);
        assert!(
            !csv.contains(&prefix),
            "chain {} in the CSV",
            chain["chain"]
        );
    }
    assert!(text(&output.stdout).contains("stopped with an error"));

    let all_fail = s.file(
        "bad.ab",
        "fn log_density(theta: [f64; 2]) -> f64 {
    let table = [1.0, 1.0];
    let i = if theta[0] > -100.0 { 5 } else { 0 };
    -0.5 * dot(theta, theta) * table[i]
}
",
    );
    assert_fails(
        &autobatch(&[
            "sample",
            all_fail.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--warmup",
            "10",
            "--draws",
            "10",
        ]),
        2,
        "every chain stopped with an error; the first: chain 0 stopped: index_out_of_bounds at",
    );
}

/// A model that faults at every point, in an operation whose value nothing
/// reads, fails every chain with that error where it arises: its gradient
/// faults where it does, so no initial point is found. The run exits 2
/// with the error and writes no draws.
#[test]
fn a_model_that_faults_everywhere_fails_every_chain() {
    let s = Scratch::new("faulting");
    let model = s.file(
        "model.ab",
        "fn log_density(theta: [f64; 1]) -> f64 {
    let k = 1 / 0;
    -0.5 * theta[0] * theta[0]
}
",
    );
    let data = s.file("data.json", "{}");
    let csv = s.dir.join("draws.csv");
    let output = sample_files(
        &model,
        &data,
        &[
            "--warmup",
            "20",
            "--draws",
            "20",
            "--output",
            csv.to_str().unwrap(),
        ],
    );
    let wanted = format!(
        "every chain stopped with an error; the first: chain 0 stopped: \
         division_by_zero at {}:2:13: attempt to divide by zero",
        model.display()
    );
    assert_fails(&output, 2, &wanted);
    assert_eq!(text(&output.stdout), "");
    assert!(!csv.exists(), "draws were written");
}

#[test]
fn pooled_adaptation_gives_every_chain_one_step_size() {
    let s = Scratch::new("pooled");
    let model = s.file("model.ab", MODEL);
    let data = s.file("data.json", DATA);
    let stats = s.dir.join("stats.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "sample",
            model.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--chains",
            "3",
            "--warmup",
            "120",
            "--draws",
            "50",
            "--stats",
            stats.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        autobatch(&args)
    };
    let output = run(&["--pooled-adaptation", "--pool-every", "5"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stats_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let steps = stats_json["step_size"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert!(steps.iter().all(|s| s == &steps[0]), "{steps:?}");
    assert!(stats_json["batch_runs"].as_u64().unwrap() > 20);

    let output = run(&[]);
    assert_eq!(output.status.code(), Some(0));
    let stats_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(stats_json["batch_runs"], 1);
    let steps = stats_json["step_size"].as_array().unwrap();
    assert!(steps.iter().any(|s| s != &steps[0]), "{steps:?}");

    // A higher target acceptance gives smaller steps.
    let output = run(&["--target-accept", "0.99"]);
    assert_eq!(output.status.code(), Some(0));
    let careful: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let mean = |v: &serde_json::Value| {
        let steps = v["step_size"].as_array().unwrap();
        steps.iter().map(|s| s.as_f64().unwrap()).sum::<f64>() / steps.len() as f64
    };
    assert!(mean(&careful) < mean(&stats_json), "{careful} {stats_json}");
    assert_fails(&run(&["--target-accept", "1"]), 2, "between 0 and 1");

    // --pool-every only means something with --pooled-adaptation.
    assert_fails(&run(&["--pool-every", "5"]), 2, "--pooled-adaptation");
    assert_fails(
        &run(&["--pooled-adaptation", "--pool-every", "0"]),
        2,
        "--pool-every",
    );
}

/// `sample` with `extra` settings on MODEL and DATA.
fn sample_with(s: &Scratch, extra: &[&str]) -> Output {
    sample_files(
        &s.file("model.ab", MODEL),
        &s.file("data.json", DATA),
        extra,
    )
}

/// `sample MODEL --data DATA` with `extra` settings.
fn sample_files(model: &std::path::Path, data: &std::path::Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "sample",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    autobatch(&args)
}

/// Settings out of range are refused at once, naming the flag and the
/// allowed range; none is run with a wrapped count, panics or hangs.
#[test]
fn out_of_range_settings_name_the_flag_and_the_range() {
    let s = Scratch::new("ranges");
    let refused = |extra: &[&str], flag: &str, range: &str| {
        let output = sample_with(&s, extra);
        assert_fails(&output, 2, flag);
        let stderr = text(&output.stderr);
        assert!(stderr.contains(range), "{extra:?}: {stderr}");
        assert!(!stderr.contains("internal error"), "{extra:?}: {stderr}");
    };
    let max = "2147483647";
    refused(
        &["--warmup", "9223372036854775807", "--draws", "1"],
        "--warmup",
        max,
    );
    refused(&["--warmup", "18446744073709551615"], "--warmup", max);
    refused(&["--draws", "18446744073709551616"], "--draws", max);
    refused(
        &["--warmup", "2000000000", "--draws", "2000000000"],
        "--draws",
        max,
    );
    refused(
        &[
            "--pooled-adaptation",
            "--pool-every",
            "18446744073709551615",
        ],
        "--pool-every",
        max,
    );
    refused(&["--max-depth", "31"], "--max-depth", "30");
    refused(&["--threads", "100000"], "--threads", "between 1 and");
}

/// The largest pooling interval runs (it pools at every window's end only).
#[test]
fn the_largest_pool_interval_runs() {
    let s = Scratch::new("pool_every_max");
    let output = sample_with(
        &s,
        &[
            "--pooled-adaptation",
            "--pool-every",
            "2147483647",
            "--warmup",
            "200",
            "--draws",
            "20",
            "--chains",
            "2",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
}

/// A typo in `--output` or `--stats` is reported before sampling, not
/// after: this run would take a long time.
#[test]
fn output_paths_are_checked_before_sampling() {
    let s = Scratch::new("paths_first");
    for flag in ["--output", "--stats"] {
        let missing = s.dir.join("no/such/dir/file");
        let wanted = missing.to_str().unwrap();
        assert_refused_at_once(&s, flag, &missing, wanted);
    }
}

/// `sample` with `flag PATH` on a run that would take long fails with
/// exit 2 and `wanted` at once, before sampling.
fn assert_refused_at_once(s: &Scratch, flag: &str, path: &std::path::Path, wanted: &str) {
    let started = std::time::Instant::now();
    let output = sample_with(
        s,
        &[
            "--warmup",
            "2000000",
            "--draws",
            "10",
            flag,
            path.to_str().unwrap(),
        ],
    );
    assert_fails(&output, 2, wanted);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{flag}: the error came after {:?}",
        started.elapsed()
    );
}

/// A parameter of scale 1e-30 shows significant digits, not `0.000`; one
/// chain is "1 chain".
#[test]
fn the_summary_uses_significant_digits_and_singulars() {
    let s = Scratch::new("tiny");
    let model = s.file(
        "tiny.ab",
        "fn log_density(theta: [f64; 1]) -> f64 { let z = theta[0] * 1.0e30; -0.5 * z * z }\n",
    );
    let data = s.file("data.json", "{}");
    let output = sample_files(
        &model,
        &data,
        &["--chains", "1", "--warmup", "200", "--draws", "100"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let row = stdout
        .lines()
        .find(|l| l.starts_with("theta[0]"))
        .expect("a row for theta[0]");
    let sd: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(sd > 1e-31 && sd < 1e-29, "sd {sd} in: {row}");
    assert!(!row.contains("0.000"), "{row}");
    assert!(
        stdout.contains("1 chain, 200 warmup iterations and 100 draws each"),
        "{stdout}"
    );
}

/// Too few draws for the diagnostics (the issue's 10 warmup iterations
/// and 5 draws): the table marks R-hat's and the ESS's gaps `NA` and says
/// why under it; stderr warns, and names at most four parameters per
/// warning.
#[test]
fn too_few_draws_and_low_ess_are_warned_about() {
    let s = Scratch::new("few");
    let model = s.file(
        "six.ab",
        "fn log_density(theta: [f64; 6]) -> f64 { -0.5 * dot(theta, theta) }\n",
    );
    let data = s.file("data.json", "{}");
    let output = sample_files(&model, &data, &["--warmup", "10", "--draws", "5"]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let row = stdout.lines().find(|l| l.starts_with("theta[0]")).unwrap();
    assert!(row.ends_with("NA       NA"), "no ESS with 5 draws: {row}");
    assert!(
        stdout.contains("NA: not defined: R-hat needs 4 draws per chain and the ESS 8"),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: 5 draws per chain are too few for the diagnostics"),
        "{stderr}"
    );
    // R-hat is computed from 5 draws (ArviZ's rule), and the warnings on
    // it name at most four parameters.
    if let Some(line) = stderr.lines().find(|l| l.contains("R-hat above 1.01")) {
        assert!(line.matches("theta[").count() <= 4, "{line}");
    }

    let output = sample_files(&model, &data, &["--warmup", "100", "--draws", "20"]);
    let stderr = text(&output.stderr);
    let low = stderr
        .lines()
        .find(|l| l.starts_with("warning: bulk ESS below 400 (100 per chain) for "))
        .unwrap_or_else(|| panic!("no warning on the bulk ESS: {stderr}"));
    assert!(
        low.contains("theta[0], theta[1], theta[2], theta[3] and 2 more"),
        "{low}"
    );
    assert!(!stderr.contains("too few"), "{stderr}");
}

/// `--plots DIR` creates the directory and writes, as PNG and SVG, the
/// trace and rank plots of every parameter and the energy plot; the
/// summary names the lowest E-BFMI; `--stats` lists each chain's. A
/// directory that cannot be made is refused before sampling.
#[test]
fn plots_of_every_parameter_and_the_energy() {
    let s = Scratch::new("plots");
    let dir = s.dir.join("pictures/new");
    let stats = s.dir.join("stats.json");
    let output = sample_with(
        &s,
        &[
            "--chains",
            "3",
            "--warmup",
            "150",
            "--draws",
            "100",
            "--plots",
            dir.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected = vec!["energy.png".to_string(), "energy.svg".to_string()];
    for kind in ["rank", "trace"] {
        for i in 0..2 {
            for extension in ["png", "svg"] {
                expected.push(format!("{kind}-theta-{i}.{extension}"));
            }
        }
    }
    assert_eq!(names, expected);
    let trace = std::fs::read_to_string(dir.join("trace-theta-1.svg")).unwrap();
    assert!(trace.contains("theta[1]: trace (3 chains)"));
    let energy = std::fs::read_to_string(dir.join("energy.svg")).unwrap();
    assert!(energy.contains("E-BFMI: lowest"));
    let png = std::fs::read(dir.join("rank-theta-0.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
    assert!(text(&output.stdout).contains("E-BFMI: lowest"));
    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let e_bfmi = figures["e_bfmi"].as_array().unwrap();
    assert_eq!(e_bfmi.len(), 3);
    assert!(
        e_bfmi.iter().all(|x| x.as_f64().unwrap() > 0.3),
        "{figures}"
    );

    let file = s.file("a-file", "");
    assert_refused_at_once(&s, "--plots", &file, "it is not a directory");
}

/// A model whose `fn model` declares constrained parameters: the summary,
/// the CSV, the stats JSON and the plots name them on their constrained
/// scale; a wrong constraint exits 1 with an error located at it.
#[test]
fn constrained_parameters_are_named_everywhere() {
    let s = Scratch::new("constrained");
    let model = s.file(
        "model.ab",
        "extern \"autobatch\" {
    static y: [f64; N];
}
fn model(mu: f64, #[lower = 0.0] sigma: f64, #[simplex] w: [f64; 2]) -> f64 {
    let r = (y - mu) / sigma;
    -0.5 * dot(r, r) - N as f64 * sigma.ln() - sigma + w[0].ln() + w[1].ln()
}
",
    );
    let data = s.file("data.json", DATA);
    let csv = s.dir.join("draws.csv");
    let stats = s.dir.join("stats.json");
    let plots = s.dir.join("plots");
    let output = sample_files(
        &model,
        &data,
        &[
            "--chains",
            "2",
            "--warmup",
            "100",
            "--draws",
            "50",
            "--output",
            csv.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
            "--plots",
            plots.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for name in ["mu", "sigma", "w.0", "w.1"] {
        assert!(stdout.contains(&format!("\n{name} ")), "{stdout}");
    }
    let draws = std::fs::read_to_string(&csv).unwrap();
    let header = draws.lines().next().unwrap();
    assert!(
        header.starts_with("chain,draw,mu,sigma,w.0,w.1,lp__,"),
        "{header}"
    );
    for row in draws.lines().skip(1) {
        let values: Vec<f64> = row.split(',').map(|v| v.parse().unwrap()).collect();
        assert!(values[3] > 0.0, "sigma {row}");
        assert!((values[4] + values[5] - 1.0).abs() < 1e-15, "w {row}");
    }
    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let summary: Vec<&str> = figures["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["parameter"].as_str().unwrap())
        .collect();
    assert_eq!(summary, ["mu", "sigma", "w.0", "w.1"]);
    assert_eq!(figures["dimension"], 3);
    let trace = std::fs::read_to_string(plots.join("trace-w-1.svg")).unwrap();
    assert!(trace.contains("w.1: trace (2 chains)"));

    // Initial values by name: accepted, or refused naming the file and the
    // parameter.
    let init = s.file("init.json", r#"{"mu": 1.0, "sigma": 0.5, "w": [0.3, 0.7]}"#);
    let output = sample_files(
        &model,
        &data,
        &[
            "--chains",
            "1",
            "--warmup",
            "20",
            "--draws",
            "5",
            "--init",
            init.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let bad = s.file("bad.json", r#"{"mu": 1.0, "sigma": -0.5, "w": [0.3, 0.7]}"#);
    let output = sample_files(&model, &data, &["--init", bad.to_str().unwrap()]);
    assert_fails(
        &output,
        2,
        "the initial value of `sigma` does not satisfy its constraint",
    );
    assert!(
        text(&output.stderr).contains("bad.json"),
        "{}",
        text(&output.stderr)
    );

    let wrong = s.file(
        "wrong.ab",
        "extern \"autobatch\" { static y: [f64; N]; }\nfn model(#[simplex] s: f64) -> f64 { s }\n",
    );
    let output = sample_files(&wrong, &data, &[]);
    assert_fails(&output, 1, "`simplex` needs a vector");
    assert!(
        text(&output.stderr).contains("wrong.ab:2:"),
        "{}",
        text(&output.stderr)
    );
}
