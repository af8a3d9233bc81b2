//! Ctrl-C (SIGINT) stops `autobatch run` and `autobatch sample` with what
//! had finished: under every strategy, the members that finished keep
//! their results, the others end with the error `interrupted`, the
//! outputs are written and the command exits with 130. `run`'s native
//! code looks at Ctrl-C only before a member starts (the members running
//! finish); `sample`'s, whose chains are long members, as they run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Members with `n >= 0` return at once; `n = -1` counts on for ever (the
/// step limit is raised out of reach).
const PROGRAM: &str = "\
fn spin(n: i64) -> i64 {
    let mut i = 0;
    while i != n {
        i += 1;
    }
    i
}
";

/// The strategies that stop a member as it runs.
const STOPPING_MEMBERS: [&str; 4] = [
    "reference",
    "local-static",
    "program-counter",
    "native-lockstep",
];

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("autobatch-interrupt-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The CPU seconds `pid` has used so far (user and system), from
/// `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's name (in parentheses, which may hold spaces).
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are the 14th and 15th fields, the 12th and 13th here.
    (ticks(11) + ticks(12)) / 100.0
}

/// Waits until `child` has spent `seconds` of CPU (so it is well into its
/// run: reading and compiling take a few milliseconds), then sends it
/// SIGINT and waits for it to end, at most a minute.
fn interrupt_when_busy(mut child: Child, seconds: f64) -> std::process::Output {
    let pid = child.id();
    let began = Instant::now();
    while cpu_seconds(pid) < seconds {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "the child never got busy"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child ended before it was interrupted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: `kill` sends a signal to a process of ours that has not been reaped.
    let sent = unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0, "SIGINT could not be sent");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    receiver
        .recv_timeout(Duration::from_secs(60))
        .expect("the child ended within a minute of SIGINT")
        .expect("the child's output")
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_autobatch"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start autobatch")
}

/// `autobatch run` of `spin` on `inputs` (the step limit out of reach),
/// interrupted once it has used 0.3 s of CPU.
fn interrupted_spin(
    program: &Path,
    inputs: &Path,
    strategy: &str,
    threads: &str,
) -> std::process::Output {
    let child = spawn(&[
        "run",
        program.to_str().unwrap(),
        "--entry",
        "spin",
        "--inputs",
        inputs.to_str().unwrap(),
        "--strategy",
        strategy,
        "--threads",
        threads,
        "--max-steps",
        "1000000000000000",
    ]);
    interrupt_when_busy(child, 0.3)
}

/// Members that finish fast, between members that never do: under every
/// strategy that stops a member as it runs, on one thread and on two, the
/// fast ones keep their results
/// (each member may take a few thousand steps more once Ctrl-C came, so
/// one that waits behind the endless ones, or has not started, still
/// finishes) and the endless ones end with `interrupted`.
#[test]
fn ctrl_c_keeps_the_finished_members_under_the_strategies_that_stop_members() {
    let s = Scratch::new("run");
    let program = s.file("spin.ab", PROGRAM);
    let inputs = s.file("inputs.json", r#"{"batch": {"n": [3, -1, 5, -1, 2]}}"#);
    for strategy in STOPPING_MEMBERS {
        for threads in ["1", "2"] {
            let name = format!("{strategy} on {threads} threads");
            let output = interrupted_spin(&program, &inputs, strategy, threads);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(130), "{name}: {stderr}");
            assert!(
                stderr.starts_with("error: interrupted (Ctrl-C)") && stderr.lines().count() == 1,
                "{name}: {stderr}"
            );
            let document: serde_json::Value = serde_json::from_slice(&output.stdout)
                .unwrap_or_else(|e| panic!("{name}: the results are JSON ({e})"));
            let results = document["results"].as_array().unwrap();
            for (member, n) in [(0, 3), (2, 5), (4, 2)] {
                assert_eq!(results[member]["ok"], n, "{name}: member {member}");
            }
            for member in [1, 3] {
                let error = &results[member]["error"];
                assert_eq!(error["kind"], "interrupted", "{name}: {error}");
                // At the entry function, whatever the strategy.
                assert_eq!((&error["line"], &error["column"]), (&1.into(), &1.into()));
            }
        }
    }
}

/// Under `native` and `native-batched`, whose code looks at Ctrl-C only
/// before a member (a chunk of members) starts, the members running
/// finish and those not started end with `interrupted`: under `native` on
/// one thread, the members done are the first ones.
#[test]
fn ctrl_c_under_native_code_finishes_the_members_running_and_starts_no_more() {
    let s = Scratch::new("native");
    let program = s.file("spin.ab", PROGRAM);
    let n = 50_000_000;
    let members = 64;
    let inputs = s.file(
        "inputs.json",
        &format!(r#"{{"batch": {{"n": {:?}}}}}"#, vec![n; members]),
    );
    for strategy in ["native", "native-batched"] {
        for threads in ["1", "2"] {
            let name = format!("{strategy} on {threads} threads");
            let output = interrupted_spin(&program, &inputs, strategy, threads);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(130), "{name}: {stderr}");
            let document: serde_json::Value = serde_json::from_slice(&output.stdout)
                .unwrap_or_else(|e| panic!("{name}: the results are JSON ({e})"));
            let done: Vec<bool> = document["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|result| match result["ok"].as_i64() {
                    Some(value) => {
                        assert_eq!(value, n, "{name}");
                        true
                    }
                    None => {
                        assert_eq!(result["error"]["kind"], "interrupted", "{name}: {result}");
                        false
                    }
                })
                .collect();
            assert_eq!(done.len(), members, "{name}");
            if strategy == "native" {
                assert!(done.contains(&false), "{name}: no member was interrupted");
                if threads == "1" {
                    let first = done.iter().take_while(|d| **d).count();
                    assert!(done[first..].iter().all(|d| !d), "{name}: {done:?}");
                }
            }
        }
    }
}

#[test]
fn ctrl_c_stops_sample_and_writes_nothing_when_no_chain_finished() {
    let s = Scratch::new("sample");
    let model = s.file(
        "model.ab",
        "fn log_density(theta: [f64; 2]) -> f64 { -0.5 * dot(theta, theta) }\n",
    );
    let data = s.file("data.json", "{}");
    let csv = s.0.join("draws.csv");
    for strategy in ["native", "program-counter"] {
        let child = spawn(&[
            "sample",
            model.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--chains",
            "2",
            "--warmup",
            "2000000000",
            "--draws",
            "10",
            "--strategy",
            strategy,
            "--output",
            csv.to_str().unwrap(),
        ]);
        let output = interrupt_when_busy(child, 0.5);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "{strategy}: {stderr}");
        assert_eq!(
            stderr.trim_end(),
            "error: interrupted (Ctrl-C) before any chain finished: nothing written",
            "{strategy}"
        );
        assert!(output.stdout.is_empty(), "{strategy}");
        assert!(!csv.exists(), "{strategy}: a CSV was written");
    }
}
