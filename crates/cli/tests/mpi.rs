//! `mpirun -n K autobatch run|sample ...` against one process: the same
//! bytes (timing figures aside) on 2 ranks and on 3 (batches that do not
//! divide evenly), with and without pooled adaptation; a rank that fails
//! ends the job with one error naming it, exit code 2, and no output file.
//!
//! Needs the `mpi` feature and Open MPI's `mpirun` (`--oversubscribe`, the
//! ranks may outnumber the cores). Without `mpirun` the tests say so and
//! pass, except under CI (`CI` set), where they fail.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;

const PROGRAM: &str = "\
// A random walk of n steps from x, and a sum that may fault.
fn walk(n: i64, x: f64) -> (f64, i64) {
    let mut s = x;
    let mut i = 0;
    while i < n {
        s = s + normal();
        i += 1;
    }
    let v = [1, 2, 3];
    (s, v[n as usize % 4])
}
";

const MODEL: &str = "\
extern \"autobatch\" {
    static y: [f64; N];
}
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
        let dir = std::env::temp_dir().join(format!("autobatch-mpi-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch { dir }
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a scratch file");
        path
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    /// The files in the directory (a failed run must leave no partial one).
    fn files(&self) -> Vec<String> {
        common::listing(&self.dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const BIN: &str = env!("CARGO_BIN_EXE_autobatch");

/// Whether `mpirun` is here; if not, says so (and fails under CI).
fn have_mpirun() -> bool {
    let found = Command::new("mpirun").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the MPI tests: install Open MPI (openmpi-bin)"
        );
        eprintln!("skipped: no `mpirun` (install Open MPI's openmpi-bin to run the MPI tests)");
    }
    found
}

/// `mpirun` with the settings every test needs: the ranks may outnumber
/// the cores, and the tests may run as root (in containers, CI).
fn mpirun() -> Command {
    let mut command = Command::new("mpirun");
    command
        .arg("--oversubscribe")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Only shared memory between the ranks of one machine.
        .env("OMPI_MCA_btl", "self,vader")
        .env_remove("CI");
    command
}

fn on_ranks(ranks: usize, args: &[&str]) -> Output {
    mpirun()
        .args(["-n", &ranks.to_string(), BIN])
        .args(args)
        .output()
        .expect("run mpirun")
}

fn alone(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run autobatch")
}

fn succeeded(output: &Output) -> &Output {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// JSON without the named keys of its top object (or of `in_key`'s).
fn without(mut json: Value, in_key: Option<&str>, keys: &[&str]) -> Value {
    let object = match in_key {
        Some(k) => &mut json[k],
        None => &mut json,
    };
    for key in keys {
        object.as_object_mut().expect("an object").remove(*key);
    }
    json
}

#[test]
fn run_on_ranks_writes_the_bytes_of_one_process() {
    if !have_mpirun() {
        return;
    }
    let scratch = Scratch::new("run");
    let program = scratch.file("walk.ab", PROGRAM);
    let n: Vec<i64> = (0..10).map(|i| (i * 7) % 13).collect();
    let x: Vec<f64> = (0..10).map(|i| f64::from(i) * 0.25).collect();
    let inputs = scratch.file(
        "inputs.json",
        &serde_json::json!({"batch": {"n": n, "x": x}}).to_string(),
    );
    for strategy in ["program-counter", "local-static", "reference"] {
        let args = |output: &Path| -> Vec<String> {
            [
                "run",
                s(&program),
                "--entry",
                "walk",
                "--inputs",
                s(&inputs),
                "--seed",
                "11",
                "--threads",
                "1",
                "--strategy",
                strategy,
                "--output",
                s(output),
            ]
            .map(String::from)
            .to_vec()
        };
        let one = scratch.path("one.json");
        let args_one = args(&one);
        succeeded(&alone(
            &args_one.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        for ranks in [2, 3] {
            let many = scratch.path(&format!("many{ranks}.json"));
            let args_many = args(&many);
            succeeded(&on_ranks(
                ranks,
                &args_many.iter().map(String::as_str).collect::<Vec<_>>(),
            ));
            assert_eq!(read(&many), read(&one), "{strategy} on {ranks} ranks");
        }
    }
    // Stdout and --stats: the reference's figures are those of one process
    // but the timing and the utilization (each rank's lanes are its own).
    let common = [
        "run",
        s(&program),
        "--entry",
        "walk",
        "--inputs",
        s(&inputs),
        "--seed",
        "3",
        "--strategy",
        "reference",
        "--stats",
    ];
    let one: Value = serde_json::from_slice(&succeeded(&alone(&common)).stdout).expect("JSON");
    let many: Value =
        serde_json::from_slice(&succeeded(&on_ranks(3, &common)).stdout).expect("JSON");
    let varying = [
        "wall_seconds",
        "read_seconds",
        "bind_seconds",
        "lane_utilization",
    ];
    assert_eq!(
        without(many, Some("stats"), &varying),
        without(one, Some("stats"), &varying)
    );
}

#[test]
fn sample_on_ranks_writes_the_bytes_of_one_process() {
    if !have_mpirun() {
        return;
    }
    let scratch = Scratch::new("sample");
    let model = scratch.file("model.ab", MODEL);
    let data = scratch.file("data.json", DATA);
    for pooled in [false, true] {
        let run = |ranks: usize| {
            let (csv, stats) = (
                scratch.path(&format!("draws{ranks}.csv")),
                scratch.path(&format!("stats{ranks}.json")),
            );
            let mut args = vec![
                "sample",
                s(&model),
                "--data",
                s(&data),
                "--chains",
                "5",
                "--warmup",
                "150",
                "--draws",
                "100",
                "--seed",
                "4",
                "--threads",
                "1",
                "--output",
                s(&csv),
                "--stats",
                s(&stats),
            ];
            if pooled {
                args.extend(["--pooled-adaptation", "--pool-every", "10"]);
            }
            let output = if ranks == 1 {
                alone(&args)
            } else {
                on_ranks(ranks, &args)
            };
            let table = String::from_utf8(succeeded(&output).stdout.clone()).expect("UTF-8");
            (read(&csv), read(&stats), table)
        };
        let (csv, stats, table) = run(1);
        for ranks in [2, 3] {
            let (csv_k, stats_k, table_k) = run(ranks);
            assert_eq!(csv_k, csv, "draws on {ranks} ranks, pooled: {pooled}");
            let timing = [
                "warmup_seconds",
                "sampling_seconds",
                "gradient_evaluations_per_second",
                "gradient_utilization",
                "gradient_utilization_warmup",
                "gradient_utilization_sampling",
                // Memory: each rank's own batch and process.
                "peak_batch_bytes",
                "peak_resident_bytes",
                // The executor's own figures: rank 0's runs, and the
                // compile time (under the strategy that ran: auto runs
                // this model, without products, as native code).
                "native",
            ];
            let parse = |b: &[u8]| -> Value { serde_json::from_slice(b).expect("stats JSON") };
            assert_eq!(
                without(parse(&stats_k), None, &timing),
                without(parse(&stats), None, &timing),
                "stats on {ranks} ranks, pooled: {pooled}"
            );
            // The table, but its lines of seconds and gradients per
            // second, and of memory (each rank's own).
            let head = |t: &str| {
                t.lines()
                    .filter(|l| !l.starts_with("gradient evaluations") && !l.starts_with("memory:"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            assert_eq!(head(&table_k), head(&table), "summary on {ranks} ranks");
        }
    }
}

/// Two ranks started differently: `mpirun`'s MPMD form (`A : B`).
fn two_programs(first: &[&str], second: &[&str]) -> Output {
    mpirun()
        .args(["-n", "1"])
        .args(first)
        .args([":", "-n", "1"])
        .args(second)
        .output()
        .expect("run mpirun")
}

fn assert_rank_failed(output: &Output, wanted: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "one error line: {stderr}");
    for w in wanted {
        assert!(errors[0].contains(w), "`{w}` in {stderr}");
    }
}

#[test]
fn a_failing_rank_ends_the_job_naming_it() {
    if !have_mpirun() {
        return;
    }
    let scratch = Scratch::new("fail");
    let program = scratch.file("walk.ab", PROGRAM);
    let inputs = scratch.file(
        "inputs.json",
        r#"{"batch": {"n": [1, 2, 3, 4], "x": [0.0, 1.0, 2.0, 3.0]}}"#,
    );
    let model = scratch.file("model.ab", MODEL);
    let data = scratch.file("data.json", DATA);
    let out = scratch.path("out.json");
    let run = [
        "run",
        s(&program),
        "--entry",
        "walk",
        "--inputs",
        s(&inputs),
        "--output",
        s(&out),
    ];
    // Rank 1 alone has no memory (a limit of 1 byte): its slice cannot run.
    let starved: Vec<&str> = ["env", "AUTOBATCH_MEMORY_LIMIT=1", BIN]
        .into_iter()
        .chain(run)
        .collect();
    let first: Vec<&str> = [BIN].into_iter().chain(run).collect();
    let output = two_programs(&first, &starved);
    assert_rank_failed(&output, &["rank 1: "]);
    for pooled in [false, true] {
        let csv = scratch.path("draws.csv");
        let mut sample = vec![
            "sample",
            s(&model),
            "--data",
            s(&data),
            "--chains",
            "4",
            "--warmup",
            "50",
            "--draws",
            "20",
            "--output",
            s(&csv),
        ];
        if pooled {
            sample.push("--pooled-adaptation");
        }
        let starved: Vec<&str> = ["env", "AUTOBATCH_MEMORY_LIMIT=1", BIN]
            .into_iter()
            .chain(sample.iter().copied())
            .collect();
        let first: Vec<&str> = [BIN].into_iter().chain(sample.iter().copied()).collect();
        assert_rank_failed(&two_programs(&first, &starved), &["rank 1: ", "memory"]);
    }
    // Ranks started with different arguments must not compute at all.
    let first: Vec<&str> = [BIN].into_iter().chain(run).collect();
    let seeded: Vec<&str> = first.iter().copied().chain(["--seed", "2"]).collect();
    assert_rank_failed(
        &two_programs(&first, &seeded),
        &["rank 1 was started with other arguments"],
    );
    // Rank 1 crashes (a segmentation fault, sent to it a second into a
    // long run): one line naming it, exit code 2. The run is long however
    // fast the machine: 10^8 warmup iterations, which keep no draws, so
    // it neither ends nor writes its draws before the signal.
    let csv = scratch.path("draws.csv");
    let long = format!(
        "{BIN} sample {} --data {} --chains 4 --warmup 100000000 --draws 10 --threads 1 --output {} & sleep 1; kill -SEGV $!; wait $!",
        s(&model),
        s(&data),
        s(&csv)
    );
    let first: Vec<&str> = [
        BIN,
        "sample",
        s(&model),
        "--data",
        s(&data),
        "--chains",
        "4",
        "--warmup",
        "100000000",
        "--draws",
        "10",
        "--threads",
        "1",
        "--output",
        s(&csv),
    ]
    .to_vec();
    let crashed = two_programs(&first, &["sh", "-c", &long]);
    assert_rank_failed(&crashed, &["rank 1: the process crashed"]);
    // No output claims a complete run; no partial file is left either.
    assert_eq!(
        scratch.files(),
        ["data.json", "inputs.json", "model.ab", "walk.ab"]
    );
}
