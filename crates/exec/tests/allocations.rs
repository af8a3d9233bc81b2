//! No allocation per operation in steady state: a program-counter run whose
//! loop does elementwise operations on length-4 vectors and a product with a
//! shared matrix allocates as often for 1000 iterations as for 100 (up to a
//! small constant), counted by a counting global allocator; and so does the
//! gradient of such a loop on the native strategies (the forward's tape
//! pushes, the backward's pops and products, and the instances' tapes of
//! a `join` in the loop), and on program-counter (whose tapes keep the
//! arrays pushed in buffers reused from push to push).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use autobatch_exec::{run, Arg, Batch, BatchingOptions, Env, LaneMode, RunOptions, Strategy};
use autobatch_types::{Data, Scalar, Tensor};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests count one global figure: they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const PROGRAM: &str = "
fn steps(x: [f64; 4], m: [[f64; 4]; 4], n: i64) -> f64 {
    let mut a = x;
    let mut b = [1.0, 2.0, 3.0, 4.0];
    for _i in 0..n {
        a = matvec(m, a) * 0.5 + b;
        b = (b - a * 0.25).tanh();
        if sum(a) > 1000.0 {
            a = a * 0.001;
        }
    }
    sum(a) + sum(b)
}
";

/// The arguments of `steps(x, m, n)` for `members` members: member i's
/// `x` starts with `first(i)`, the matrix is shared, and members run
/// different numbers of steps from `iterations` on (so the loop runs with
/// every member active and then with fewer and fewer).
fn loop_batch(
    entry: autobatch_ir::FuncId,
    members: usize,
    iterations: i64,
    first: impl Fn(usize) -> f64,
) -> Batch {
    let x = (0..members)
        .map(|i| Tensor::new(vec![4], Data::F64(vec![first(i), 0.3, -0.2, 0.5])))
        .collect();
    let m = Tensor::new(
        vec![4, 4],
        Data::F64((0..16).map(|k| (k as f64 - 7.0) / 8.0).collect()),
    );
    let n = (0..members)
        .map(|i| Tensor::scalar(Scalar::I64(iterations + (i % 4) as i64)))
        .collect();
    Batch {
        entry,
        size: members,
        args: vec![Arg::Batched(x), Arg::Shared(m), Arg::Batched(n)],
    }
}

/// Allocations made by one run of `iterations` loop steps for 64 members.
fn allocations(iterations: i64, lanes: LaneMode) -> u64 {
    let mut program = autobatch_lower::compile(PROGRAM).expect("compiles");
    autobatch_passes::optimize(&mut program);
    let entry = program.function_by_name("steps").expect("entry");
    let batch = loop_batch(entry, 64, iterations, |i| i as f64);
    let options = RunOptions {
        threads: 1,
        ..RunOptions::default()
    };
    let batching = BatchingOptions {
        lanes,
        ..BatchingOptions::default()
    };
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let output = run(
        Strategy::ProgramCounter,
        &program,
        &Env::default(),
        &batch,
        &RunOptions {
            batching,
            ..options.clone()
        },
    )
    .expect("runs");
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    assert!(output.results.iter().all(|r| r.is_ok()));
    assert!(output.stats.steps > iterations as u64);
    after - before
}

#[test]
fn the_loop_allocates_nothing_per_iteration() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for lanes in [LaneMode::Mask, LaneMode::Compact, LaneMode::Auto] {
        let short = allocations(100, lanes);
        let long = allocations(1000, lanes);
        eprintln!("lanes {lanes}: {short} allocations for 100 iterations, {long} for 1000");
        // 900 more iterations run about 9,000 more operations; one
        // allocation per operation would add thousands.
        assert!(
            long <= short + 16,
            "lanes {lanes}: {short} allocations for 100 iterations, {long} for 1000"
        );
    }
}

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
    }
    sum(a * a)
}

fn gradient(x: [f64; 4], m: [[f64; 4]; 4], n: i64) -> [f64; 4] {
    grad(steps, x, m, n)
}
";

/// Allocations made by one `strategy` run of `gradient` in `source` over
/// `iterations` loop steps for 16 members, one thread.
fn taped_allocations(source: &str, strategy: Strategy, iterations: i64) -> u64 {
    let mut program = autobatch_lower::compile(source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    let entry = program.function_by_name("gradient").expect("entry");
    let batch = loop_batch(entry, 16, iterations, |i| i as f64 * 0.1);
    let options = RunOptions {
        threads: 1,
        ..RunOptions::default()
    };
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let output = run(strategy, &program, &Env::default(), &batch, &options).expect("runs");
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    assert!(output.results.iter().all(|r| r.is_ok()));
    after - before
}

#[test]
fn a_taped_gradient_allocates_nothing_per_iteration_on_native() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for strategy in [Strategy::Native, Strategy::NativeBatched] {
        // (A first run of the longest loop fills the thread's spare tapes
        // for the instances of as many joins: the steady state of a
        // training loop, whose steps run alike.)
        taped_allocations(TAPED, strategy, 1000);
        let short = taped_allocations(TAPED, strategy, 100);
        let long = taped_allocations(TAPED, strategy, 1000);
        eprintln!("{strategy}: {short} allocations for 100 iterations, {long} for 1000");
        // 900 more iterations push, pop and multiply thousands of times
        // per member; the tapes grow by doubling.
        assert!(
            long <= short + 16 * 64,
            "{strategy}: {short} allocations for 100 iterations, {long} for 1000"
        );
    }
}

const TAPED_ARRAYS: &str = "
fn steps(x: [f64; 4], m: [[f64; 4]; 4], n: i64) -> f64 {
    let mut a = x;
    for _i in 0..n {
        let z = matvec(m, a);
        a = (z * 0.5).tanh() + a * 0.25 - softplus(z) * 0.125;
        if sum(a) > 1.0 {
            a = a * 0.5;
        }
    }
    sum(a * a)
}

fn gradient(x: [f64; 4], m: [[f64; 4]; 4], n: i64) -> [f64; 4] {
    grad(steps, x, m, n)
}
";

#[test]
fn a_taped_gradient_allocates_nothing_per_iteration_on_program_counter() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let strategy = Strategy::ProgramCounter;
    let short = taped_allocations(TAPED_ARRAYS, strategy, 100);
    let long = taped_allocations(TAPED_ARRAYS, strategy, 1000);
    eprintln!("{strategy}: {short} allocations for 100 iterations, {long} for 1000");
    // 900 more iterations push and pop thousands of arrays per member;
    // each member's tape grows by doubling.
    assert!(
        long <= short + 16 * 64,
        "{strategy}: {short} allocations for 100 iterations, {long} for 1000"
    );
}
