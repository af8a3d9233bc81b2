//! An observer sees a run's operation counts while it goes, on every
//! strategy, and changes nothing: the counts it sees grow, never pass the
//! final ones, and the results are the same with and without it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use autobatch_exec::{run, Arg, Batch, Env, Interrupt, Observer, RunOptions, RunOutput, Strategy};
use autobatch_ir::Program;
use autobatch_types::{Scalar, Tensor};

/// Line 5 (`acc = ...`) runs once per iteration of each member.
const PROGRAM: &str = "
fn count(n: i64) -> i64 {
    let mut acc = 0;
    for i in 0..n {
        acc = acc + i * i % 7;
    }
    acc
}
";
const ITERATION_LINE: u32 = 5;

fn compile() -> Program {
    let mut program = autobatch_lower::compile(PROGRAM).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

fn run_on(program: &Program, strategy: Strategy, observer: Option<Observer>) -> RunOutput {
    let members = 64;
    let batch = Batch {
        entry: program.function_by_name("count").expect("entry"),
        size: members,
        args: vec![Arg::Batched(
            (0..members)
                .map(|i| Tensor::scalar(Scalar::I64(200 + 37 * i as i64)))
                .collect(),
        )],
    };
    let options = RunOptions {
        observer,
        ..RunOptions::default()
    };
    run(strategy, program, &Env::default(), &batch, &options).expect("runs")
}

/// The active lanes of the loop's line, summed, at the end of a run.
fn iteration_lanes(output: &RunOutput) -> u64 {
    output
        .stats
        .op_counts
        .iter()
        .filter(|op| op.loc.line == ITERATION_LINE)
        .map(|op| op.active_lanes)
        .sum()
}

#[test]
fn an_observer_sees_growing_counts_and_changes_nothing() {
    let program = compile();
    let total_iterations: u64 = (0..64).map(|i| 200 + 37 * i as u64).sum();
    for strategy in Strategy::ALL {
        let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
        let record = Arc::clone(&seen);
        let observer = Observer {
            interval: Duration::ZERO,
            callback: Arc::new(move |progress| {
                let lanes = progress.active_lanes_at_line(ITERATION_LINE);
                record.lock().unwrap().push((progress.steps, lanes));
            }),
        };
        let observed = run_on(&program, strategy, Some(observer));
        let plain = run_on(&program, strategy, None);
        assert_eq!(observed.results, plain.results, "{strategy}");
        assert_eq!(
            observed.stats.op_counts, plain.stats.op_counts,
            "{strategy}"
        );
        let final_lanes = iteration_lanes(&observed);
        // Two operations (a multiplication and a remainder, then an add) per
        // iteration at that line: the count is a multiple of the iterations.
        assert_eq!(final_lanes % total_iterations, 0, "{strategy}");
        assert!(final_lanes > 0);
        let seen = seen.lock().unwrap();
        assert!(
            seen.len() > 10,
            "{strategy}: the observer was called {} times",
            seen.len()
        );
        for pair in seen.windows(2) {
            assert!(pair[0].0 <= pair[1].0, "{strategy}: steps went back");
            assert!(pair[0].1 <= pair[1].1, "{strategy}: counts went back");
        }
        let last = seen.last().expect("called");
        assert!(last.0 <= observed.stats.steps, "{strategy}");
        assert!(last.1 <= final_lanes, "{strategy}");
        assert!(
            seen.iter()
                .any(|&(_, lanes)| lanes > 0 && lanes < final_lanes),
            "{strategy}: no count seen part way"
        );
    }
}

#[test]
fn an_observer_is_called_at_most_once_per_interval() {
    let program = compile();
    let calls = Arc::new(Mutex::new(0_u32));
    let counted = Arc::clone(&calls);
    let observer = Observer {
        interval: Duration::from_secs(3600),
        callback: Arc::new(move |_| *counted.lock().unwrap() += 1),
    };
    run_on(&program, Strategy::ProgramCounter, Some(observer));
    assert_eq!(*calls.lock().unwrap(), 0, "no hour has passed");
}

/// What an observer that stops a run unwinds with.
struct StopTheRun;

#[test]
fn an_observer_that_panics_stops_long_members_on_every_strategy() {
    // Members far too long to finish (a loop of 10^12 iterations): the
    // observer's panic (a host's Ctrl-C) ends the run soon after, and
    // goes on to the caller. Under native and native-batched each member
    // is one long run of machine code, interrupted inside: the run's
    // interrupt asks the code to look at the flag, which the observer's
    // panic raises.
    let program = compile();
    for strategy in Strategy::ALL {
        if strategy == Strategy::Reference {
            continue; // it calls the observer between members only
        }
        let began = std::time::Instant::now();
        let observer = Observer {
            interval: Duration::from_millis(5),
            callback: Arc::new(move |_| {
                if began.elapsed() > Duration::from_millis(200) {
                    std::panic::resume_unwind(Box::new(StopTheRun));
                }
            }),
        };
        let batch = Batch {
            entry: program.function_by_name("count").expect("entry"),
            size: 4,
            args: vec![Arg::Batched(vec![
                Tensor::scalar(Scalar::I64(
                    1_000_000_000_000
                ));
                4
            ])],
        };
        let options = RunOptions {
            observer: Some(observer),
            interrupt: Some(Interrupt::new().within_members()),
            max_steps: u64::MAX,
            threads: 2,
            ..RunOptions::default()
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(strategy, &program, &Env::default(), &batch, &options)
        }));
        let name = strategy.name();
        match outcome {
            Err(payload) => assert!(payload.is::<StopTheRun>(), "{name}: another panic"),
            Ok(result) => panic!("{name}: the run ended without the stop: {result:?}"),
        }
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "{name}: stopped after {:?}",
            began.elapsed()
        );
    }
}

#[test]
fn an_observer_sees_a_long_native_member_go() {
    // One member, one long loop: under `native` it is one run of machine
    // code, whose counts reach the observer as it goes (every slice of
    // steps, in code that looks at the interrupt), not only when it ends.
    let program = compile();
    let n = 20_000_000_i64;
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let record = Arc::clone(&seen);
    let observer = Observer {
        interval: Duration::from_millis(1),
        callback: Arc::new(move |progress| {
            let lanes = progress.active_lanes_at_line(ITERATION_LINE);
            record.lock().unwrap().push(lanes);
        }),
    };
    let batch = Batch {
        entry: program.function_by_name("count").expect("entry"),
        size: 1,
        args: vec![Arg::Batched(vec![Tensor::scalar(Scalar::I64(n))])],
    };
    let options = RunOptions {
        observer: Some(observer),
        interrupt: Some(Interrupt::new().within_members()),
        threads: 1,
        ..RunOptions::default()
    };
    let observed = run(
        Strategy::Native,
        &program,
        &Env::default(),
        &batch,
        &options,
    )
    .expect("runs");
    let final_lanes = iteration_lanes(&observed);
    assert_eq!(final_lanes % n as u64, 0);
    let seen = seen.lock().unwrap();
    assert!(
        seen.windows(2).all(|pair| pair[0] <= pair[1]),
        "counts went back"
    );
    assert!(seen.iter().all(|&lanes| lanes <= final_lanes));
    assert!(
        seen.iter().any(|&lanes| lanes > 0 && lanes < final_lanes),
        "no count seen part way in {} calls: {:?}",
        seen.len(),
        &seen[..seen.len().min(10)]
    );
}
