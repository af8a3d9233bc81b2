//! The native strategies read the arrays a gradient's backward part pops
//! where they lie on the member's tape, without copying them into its
//! frame (`autobatch_native::popped_bytes` counts the bytes popped each
//! way), and the gradients keep the reference's bits.

use autobatch_exec::{run, Arg, Batch, Env, RunOptions, Strategy};
use autobatch_types::{Data, Scalar, Tensor};

const TAPED: &str = "
fn half(a: [f64; 4], m: [[f64; 4]; 4]) -> [f64; 4] {
    (matvec(m, a) * 0.5).tanh()
}

fn steps(x: [f64; 4], m: [[f64; 4]; 4], n: i64) -> f64 {
    let mut a = x;
    for _i in 0..n {
        let (p, q) = join(half(a, m), half(a * 0.5, m));
        a = p + q;
        if sum(a) > 1.0 {
            a = a * 0.5;
        }
        a = select(a[0] > 0.25, a, a * 0.75);
    }
    sum(a * a)
}

fn gradient(x: [f64; 4], m: [[f64; 4]; 4], n: i64) -> [f64; 4] {
    grad(steps, x, m, n)
}
";

/// `gradient(x, m, n)` for 16 members, member i's `x` and `n` its own.
fn batch(program: &autobatch_ir::Program) -> Batch {
    let members = 16;
    let x = (0..members)
        .map(|i| Tensor::new(vec![4], Data::F64(vec![i as f64 * 0.1, 0.3, -0.2, 0.5])))
        .collect();
    let m = Tensor::new(
        vec![4, 4],
        Data::F64((0..16).map(|k| (k as f64 - 7.0) / 8.0).collect()),
    );
    let n = (0..members)
        .map(|i| Tensor::scalar(Scalar::I64(20 + (i % 5) as i64)))
        .collect();
    Batch {
        entry: program.function_by_name("gradient").expect("entry"),
        size: members,
        args: vec![Arg::Batched(x), Arg::Shared(m), Arg::Batched(n)],
    }
}

#[test]
fn the_native_backward_reads_popped_arrays_on_the_tape() {
    let mut program = autobatch_lower::compile(TAPED).expect("compiles");
    autobatch_passes::optimize(&mut program);
    let batch = batch(&program);
    let options = RunOptions {
        threads: 1,
        ..RunOptions::default()
    };
    let reference = run(
        Strategy::Reference,
        &program,
        &Env::default(),
        &batch,
        &options,
    )
    .expect("runs")
    .results;
    for strategy in [Strategy::Native, Strategy::NativeBatched] {
        let before = autobatch_native::popped_bytes();
        let output = run(strategy, &program, &Env::default(), &batch, &options).expect("runs");
        let after = autobatch_native::popped_bytes();
        assert_eq!(
            output.results, reference,
            "{strategy}: the reference's bits"
        );
        let copied = after.copied - before.copied;
        let in_place = after.in_place - before.in_place;
        eprintln!("{strategy}: {copied} bytes popped by copying, {in_place} read in place");
        assert!(in_place > 0, "{strategy}: nothing was popped in place");
        assert_eq!(copied, 0, "{strategy}: popped arrays were copied");
    }
}
