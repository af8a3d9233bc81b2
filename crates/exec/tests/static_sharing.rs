//! Statics are shared, not copied per call: a recursion of depth 1000 whose
//! every activation reads a static of 100,000 floats (800 KB) allocates, in
//! total, a small multiple of the static's size under every strategy, where
//! a copy per call would allocate 1000 times it (800 MB). Bytes are counted
//! by a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use autobatch_exec::{run, Arg, Batch, Env, RunOptions, Strategy};
use autobatch_types::{Data, Scalar, Tensor};

struct Counting;

/// Bytes asked of the allocator so far (never decreased by frees).
static ALLOCATED: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size as u64, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Every activation loads `X` before its call and reads it after, so that
/// the loaded value is live across the call.
const PROGRAM: &str = "
extern \"autobatch\" {
    static X: [f64; N];
}
fn deep(n: i64) -> f64 {
    if n <= 0 {
        0.0
    } else {
        let first = X[0];
        let rest = deep(n - 1);
        first + rest + X[1]
    }
}
";

const LENGTH: usize = 100_000;
const DEPTH: i64 = 1000;

/// The bytes one run of `deep(DEPTH)` allocates for 2 members.
fn allocated_bytes(strategy: Strategy) -> u64 {
    let mut program = autobatch_lower::compile(PROGRAM).expect("compiles");
    autobatch_passes::optimize(&mut program);
    let entry = program.function_by_name("deep").expect("entry");
    let env = Env {
        statics: vec![Tensor::new(vec![LENGTH], Data::F64(vec![0.5; LENGTH]))].into(),
        symbols: vec![LENGTH as u64],
        ..Env::default()
    };
    let batch = Batch {
        entry,
        size: 2,
        args: vec![Arg::Batched(vec![
            Tensor::scalar(Scalar::I64(DEPTH)),
            Tensor::scalar(Scalar::I64(DEPTH - 1)),
        ])],
    };
    let options = RunOptions {
        threads: 1,
        max_stack_depth: 2 * DEPTH as usize,
        ..RunOptions::default()
    };
    let before = ALLOCATED.load(Ordering::Relaxed);
    let output = run(strategy, &program, &env, &batch, &options).expect("runs");
    let after = ALLOCATED.load(Ordering::Relaxed);
    assert_eq!(
        output.results[0],
        Ok(vec![Tensor::scalar(Scalar::F64(DEPTH as f64))]),
        "{strategy}"
    );
    after - before
}

#[test]
fn a_deep_recursion_reading_a_static_does_not_copy_it_per_call() {
    let static_bytes = (LENGTH * 8) as u64;
    for strategy in Strategy::ALL {
        let bytes = allocated_bytes(strategy);
        eprintln!(
            "{strategy}: {} MB allocated for a {} KB static at depth {DEPTH}",
            bytes / 1_000_000,
            static_bytes / 1000
        );
        assert!(
            bytes < 10 * static_bytes,
            "{strategy}: {bytes} bytes allocated, {} times the static",
            bytes / static_bytes
        );
    }
}
