//! Does the logistic-regression gradient's elementwise chain gain from
//! running as the epilogue of the product that feeds it, a block of
//! members at a time, while their `z = X theta` rows are still in cache?
//!
//! ```sh
//! cargo bench -p autobatch-kernels --bench epilogue
//! ```
//!
//! One gradient step of 256 and of 1024 members (f64, X 10,000 x 100 shared): `z =
//! matvec(X, theta)`, the chain of `value_and_grad` (`Y * z`, `softplus`
//! and `sigmoid` together, `-`, `sum`, `Y - sigmoid`), `g = vecmat(r, X)`,
//! with the members in blocks of `B`: product, chain and product for one
//! block, then the next. `B` = all the members is what the executor does
//! (each operation over the whole batch); a smaller block keeps the block's
//! `z` in cache for the chain but streams `X` once per block and per
//! product.
//! Every block size gives every member the same bits (the kernels compute
//! each member's row alone), so only the time differs. Prints milliseconds
//! per step, the median of 7 steps, for three rounds over the block sizes.

use std::time::Instant;

use autobatch_ir::BinaryOp;
use autobatch_kernels::elementwise::{float_binary_on, Operand};
use autobatch_kernels::gemm::{self, Path};
use autobatch_kernels::vmath;

const N: usize = 10_000;
const D: usize = 100;

/// The shared data and the members' points.
struct Problem {
    x: Vec<f64>,
    y: Vec<f64>,
    theta: Vec<f64>,
}

/// The step's columns (`z`, `r`, the values, the gradients) and one row's
/// scratch for the chain's values that die inside it.
struct Step {
    z: Vec<f64>,
    r: Vec<f64>,
    values: Vec<f64>,
    g: Vec<f64>,
    row: [Vec<f64>; 4],
}

fn array(values: &[f64]) -> Operand<'_, f64> {
    Operand {
        values,
        broadcast: false,
    }
}

/// The chain on members `range` (their rows of `z` computed).
fn chain(path: Path, y: &[f64], step: &mut Step, range: std::ops::Range<usize>) {
    let [yz, softplus, sigmoid, terms] = &mut step.row;
    for b in range {
        let z = &step.z[b * N..(b + 1) * N];
        float_binary_on(path, BinaryOp::Mul, array(y), array(z), yz);
        vmath::softplus_sigmoid_f64(z, softplus, sigmoid);
        float_binary_on(path, BinaryOp::Sub, array(yz), array(softplus), terms);
        step.values[b] = gemm::sum(terms);
        let r = &mut step.r[b * N..(b + 1) * N];
        float_binary_on(path, BinaryOp::Sub, array(y), array(sigmoid), r);
    }
}

/// One gradient step of every member, `block` members at a time.
fn gradient_step(path: Path, problem: &Problem, step: &mut Step, block: usize) {
    let members = step.values.len();
    let mut b0 = 0;
    while b0 < members {
        let b1 = (b0 + block).min(members);
        let n = b1 - b0;
        let (rows, members) = (b0 * N..b1 * N, b0 * D..b1 * D);
        let theta = &problem.theta[members.clone()];
        gemm::matvec_into(&problem.x, N, D, theta, n, &mut step.z[rows.clone()]);
        chain(path, &problem.y, step, b0..b1);
        gemm::vecmat_into(&step.r[rows], &problem.x, n, N, D, &mut step.g[members]);
        b0 = b1;
    }
}

fn main() {
    let path = Path::detected();
    for members in [256, 1024] {
        println!("epilogue: {path:?} path, {members} members, f64, X {N} x {D}");
        let blocks: &[usize] = if members == 256 {
            &[256, 96, 48, 24, 12, 6]
        } else {
            &[1024, 512, 256, 128, 48, 6]
        };
        measure(path, members, blocks);
    }
}

/// Three rounds over the block sizes at `members` members.
fn measure(path: Path, members: usize, blocks: &[usize]) {
    let problem = Problem {
        x: (0..N * D)
            .map(|i| ((i * 7919 % 1000) as f64 - 500.0) / 5000.0)
            .collect(),
        y: (0..N).map(|i| (i % 2) as f64).collect(),
        theta: (0..members * D)
            .map(|i| ((i * 31 % 100) as f64 - 50.0) / 500.0)
            .collect(),
    };
    let mut step = Step {
        z: vec![0.0; members * N],
        r: vec![0.0; members * N],
        values: vec![0.0; members],
        g: vec![0.0; members * D],
        row: std::array::from_fn(|_| vec![0.0; N]),
    };
    let mut reference: Option<Vec<u64>> = None;
    for round in 0..3 {
        for &block in blocks {
            let mut times: Vec<f64> = (0..7)
                .map(|_| {
                    let start = Instant::now();
                    gradient_step(path, &problem, &mut step, block);
                    start.elapsed().as_secs_f64()
                })
                .collect();
            times.sort_by(f64::total_cmp);
            let bits: Vec<u64> = step
                .g
                .iter()
                .chain(&step.values)
                .map(|v| v.to_bits())
                .collect();
            assert!(
                reference.get_or_insert_with(|| bits.clone()) == &bits,
                "a block size changed a bit"
            );
            let median = times[times.len() / 2];
            println!(
                "round {round} block {block:>4}: {:.2} ms per step ({:.1} us per gradient)",
                median * 1e3,
                median * 1e6 / members as f64
            );
        }
    }
}
