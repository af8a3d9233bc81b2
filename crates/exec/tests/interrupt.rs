//! A run's interrupt flag (`RunOptions::interrupt`, the command line's
//! Ctrl-C) stops it on every strategy: the members that finish within a
//! few thousand steps of it keep their results, whether they were running,
//! waiting behind the others or not started; the others end with
//! `interrupted` at the entry, which `catch` does not catch, inside forks
//! as outside. Native code looks at the flag while a member runs only when
//! the interrupt asks (`Interrupt::within_members`); otherwise it starts
//! no member once the flag is raised and finishes those running.

use std::time::Duration;

use autobatch_exec::{run, Arg, Batch, Env, Interrupt, RunOptions, RunOutput, Strategy};
use autobatch_ir::Program;
use autobatch_types::{ErrorKind, Scalar, Tensor};

/// `spin(-1)` never ends (the step limit is out of reach); `spin(n)` for
/// `n >= 0` takes a few steps.
const PROGRAM: &str = "
fn spin(n: i64) -> i64 {
    let mut i = 0;
    while i != n {
        i += 1;
    }
    i
}
fn caught(n: i64) -> i64 {
    let (ok, v) = catch(spin(n));
    if ok { v } else { -7 }
}
fn forked(n: i64) -> i64 {
    let (a, b) = join(spin(n), spin(2));
    a + b
}
";

fn compile() -> Program {
    let mut program = autobatch_lower::compile(PROGRAM).expect("compiles");
    autobatch_passes::optimize(&mut program);
    program
}

/// How long the other thread waits before it raises the interrupt: long
/// enough that every strategy has members running.
const RAISE_AFTER: Duration = Duration::from_millis(200);

/// Runs `entry` on members `ns` with `strategy`, the interrupt raised from
/// another thread after [`RAISE_AFTER`] (native code looking at it as
/// members run).
fn interrupted_run(program: &Program, strategy: Strategy, entry: &str, ns: &[i64]) -> RunOutput {
    let batch = Batch {
        entry: program.function_by_name(entry).expect("entry"),
        size: ns.len(),
        args: vec![Arg::Batched(
            ns.iter().map(|n| Tensor::scalar(Scalar::I64(*n))).collect(),
        )],
    };
    let interrupt = Interrupt::new().within_members();
    let options = RunOptions {
        max_steps: u64::MAX,
        threads: 2,
        interrupt: Some(interrupt.clone()),
        ..RunOptions::default()
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(RAISE_AFTER);
            interrupt.request();
        });
        run(strategy, program, &Env::default(), &batch, &options).expect("runs")
    })
}

#[test]
fn finished_members_keep_their_results_and_the_others_are_interrupted() {
    let program = compile();
    let ns = [3, -1, 5, -1, 2, 4];
    for entry in ["spin", "caught", "forked"] {
        let entry_loc = program.functions[program.function_by_name(entry).unwrap()].loc;
        for strategy in Strategy::ALL {
            let name = format!("{entry} on {}", strategy.name());
            let output = interrupted_run(&program, strategy, entry, &ns);
            for (member, (&n, result)) in ns.iter().zip(&output.results).enumerate() {
                if n >= 0 {
                    let want = if entry == "forked" { n + 2 } else { n };
                    let got = result.as_ref().unwrap_or_else(|e| panic!("{name}: {e:?}"));
                    assert_eq!(
                        got,
                        &[Tensor::scalar(Scalar::I64(want))],
                        "{name}: {member}"
                    );
                } else {
                    let error = result.as_ref().expect_err(&name);
                    assert_eq!(error.kind, ErrorKind::Interrupted, "{name}: {error:?}");
                    assert_eq!(error.loc, entry_loc, "{name}");
                }
            }
        }
    }
}

#[test]
fn a_run_without_the_flag_raised_is_the_same_run() {
    let program = compile();
    let batch = Batch {
        entry: program.function_by_name("forked").expect("entry"),
        size: 3,
        args: vec![Arg::Batched(
            [1, 6, 40]
                .iter()
                .map(|n| Tensor::scalar(Scalar::I64(*n)))
                .collect(),
        )],
    };
    for strategy in Strategy::ALL {
        let plain = RunOptions::default();
        let watched = RunOptions {
            interrupt: Some(Interrupt::new()),
            ..RunOptions::default()
        };
        let run_with = |options: &RunOptions| {
            run(strategy, &program, &Env::default(), &batch, options).expect("runs")
        };
        let (a, b) = (run_with(&plain), run_with(&watched));
        assert_eq!(a.results, b.results, "{}", strategy.name());
        assert_eq!(a.stats.steps, b.stats.steps, "{}", strategy.name());
        assert_eq!(a.stats.op_counts, b.stats.op_counts, "{}", strategy.name());
    }
}

#[test]
fn raised_before_the_run_native_code_starts_no_member_and_the_others_give_the_grace() {
    // Without `within_members`, native code looks at the flag only before
    // a member starts: none does. The interpreters and native-lockstep
    // give every member the grace, in which the short ones finish.
    let program = compile();
    let ns = [3, -1, 5];
    let batch = Batch {
        entry: program.function_by_name("caught").expect("entry"),
        size: ns.len(),
        args: vec![Arg::Batched(
            ns.iter().map(|n| Tensor::scalar(Scalar::I64(*n))).collect(),
        )],
    };
    let interrupt = Interrupt::new();
    interrupt.request();
    for threads in [1, 2] {
        let options = RunOptions {
            max_steps: u64::MAX,
            threads,
            interrupt: Some(interrupt.clone()),
            ..RunOptions::default()
        };
        // `auto` runs one of the others, by its rule: not a behaviour of its own.
        for strategy in Strategy::ALL.into_iter().filter(|s| *s != Strategy::Auto) {
            let name = format!("{} on {threads} threads", strategy.name());
            let output = run(strategy, &program, &Env::default(), &batch, &options).expect("runs");
            let starts_none = [Strategy::Native, Strategy::NativeBatched].contains(&strategy);
            for (&n, result) in ns.iter().zip(&output.results) {
                match result {
                    Ok(values) if n >= 0 && !starts_none => {
                        assert_eq!(values, &[Tensor::scalar(Scalar::I64(n))], "{name}")
                    }
                    Err(e) if n < 0 || starts_none => {
                        assert_eq!(e.kind, ErrorKind::Interrupted, "{name}: {e:?}")
                    }
                    other => panic!("{name}: member {n} gave {other:?}"),
                }
            }
        }
    }
}
