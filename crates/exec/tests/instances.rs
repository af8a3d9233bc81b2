//! Instances at scale and their figures: a `pfor` over many elements in
//! every member runs in chunks of `--max-instances` lanes with the results
//! of an unbounded run; the figures count instances and their peak; a fork
//! draws its key from the member's stream.

use autobatch_exec::{run, Arg, Batch, Env, RunOptions, RunOutput, Strategy};
use autobatch_ir::Program;
use autobatch_kernels::MemberRng;
use autobatch_types::{Scalar, Tensor};

/// `fn sq(k: i64, c: i64) -> i64 { k * k + c }`
/// `fn big(c: i64) -> i64 { sum(pfor::<COUNT>(sq, c)) }`
fn program(count: usize) -> Program {
    let text = format!(
        "
fn f0 sq(v0 k: i64, v1 c: i64) -> (i64)  @1:1
  vars: v0 k: i64, v1 c: i64, v2: i64, v3: i64
b0:  @1:1
  v2 = mul v0, v0  @1:40
  v3 = add v2, v1  @1:40
  return v3

fn f1 big(v0 c: i64) -> (i64)  @2:1
  vars: v0 c: i64, v1: [i64; {count}], v2: i64
b0:  @2:1
  v1 = map.{count} f0 sq(index, v0)  @2:30
  v2 = sum v1  @2:26
  return v2
"
    );
    let mut program = autobatch_ir::parse::parse_program(&text).expect("parses");
    autobatch_ir::verify::verify_program(&program).expect("verifies");
    autobatch_passes::optimize(&mut program);
    program
}

fn run_big(
    program: &Program,
    strategy: Strategy,
    cs: &[i64],
    max_instances: Option<usize>,
) -> RunOutput {
    let batch = Batch {
        entry: program.function_by_name("big").expect("entry"),
        size: cs.len(),
        args: vec![Arg::Batched(
            cs.iter().map(|c| Tensor::scalar(Scalar::I64(*c))).collect(),
        )],
    };
    let options = RunOptions {
        max_instances,
        ..RunOptions::default()
    };
    run(strategy, program, &Env::default(), &batch, &options).expect("runs")
}

#[test]
fn a_large_map_runs_in_bounded_chunks_with_the_same_results() {
    let count = 100_000usize;
    let program = program(count);
    let cs = [0, 5, -3];
    let n = count as i64;
    let squares = (n - 1) * n * (2 * n - 1) / 6;
    for strategy in [Strategy::LocalStatic, Strategy::ProgramCounter] {
        let mut figures = Vec::new();
        for max in [Some(1000), Some(7), None] {
            let output = run_big(&program, strategy, &cs, max);
            for (result, c) in output.results.iter().zip(cs) {
                let expected = Tensor::scalar(Scalar::I64(squares + n * c));
                assert_eq!(result.as_ref().expect("ok"), &vec![expected]);
            }
            assert_eq!(output.stats.instances, (count * cs.len()) as u64);
            if let Some(max) = max {
                // One more per fork that found no free lane.
                assert!(
                    output.stats.peak_instances <= (max + cs.len()) as u64,
                    "{strategy}: {} instances alive at once with a bound of {max}",
                    output.stats.peak_instances
                );
            }
            figures.push((max, output.stats.peak_instances, output.stats.wall_seconds));
        }
        eprintln!("{strategy}: (bound, peak, seconds) {figures:?}");
    }
}

#[test]
fn every_fork_draws_its_key_from_the_members_stream() {
    // `nothing` of tests/ir/fork_nested.ir: a fork with no instance, then a
    // draw: the stream's fifth word (four went to the fork's key).
    for (member, expected) in [(0, 0.4264957804306275), (1, 0.7874477682628583)] {
        let mut rng = MemberRng::new(5, member);
        let _key = rng.fork();
        assert_eq!(rng.uniform(), expected);
    }
}
