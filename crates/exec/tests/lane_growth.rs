//! Lane storage grows geometrically, also past `--max-instances`: a
//! program-counter run of a recursive `join` over large arrays with a small
//! `--max-instances` (so that many forks find no free lane and each starts
//! one instance anyway, needing one more row of storage at a time) allocates
//! only a small multiple of the storage it holds at its peak
//! (`peak_state_bytes`). Growing the columns one row per extra lane copied
//! every column once per lane: bytes allocated quadratic in the lanes (and
//! a run hundreds of times slower). Counted by a counting global allocator,
//! so the check does not depend on timing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use autobatch_exec::{run, Arg, Batch, Env, RunOptions, Strategy};
use autobatch_types::{Scalar, Tensor};

struct Counting;

static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size.saturating_sub(layout.size());
        BYTES.fetch_add(grown as u64, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PROGRAM: &str = "
fn tree(d: i64, v: [f32; 256]) -> [f32; 256] {
    if d <= 0 { v } else {
        let (a, b) = join(tree(d - 1, v * 0.5), tree(d - 1, v + 1.0));
        a + b
    }
}
fn run(d: i64, x: f32) -> f32 { sum(tree(d, [x; 256])) }
";

const MEMBERS: usize = 32;
const DEPTH: i64 = 6;

struct Figures {
    /// Bytes allocated during the run.
    allocated: u64,
    peak_state_bytes: u64,
    peak_instances: u64,
    results: Vec<f32>,
}

fn run_with(strategy: Strategy, max_instances: usize) -> Figures {
    let mut program = autobatch_lower::compile(PROGRAM).expect("compiles");
    autobatch_passes::optimize(&mut program);
    let entry = program.function_by_name("run").expect("entry");
    let batch = Batch {
        entry,
        size: MEMBERS,
        args: vec![
            Arg::Batched(
                (0..MEMBERS)
                    .map(|_| Tensor::scalar(Scalar::I64(DEPTH)))
                    .collect(),
            ),
            Arg::Batched(
                (0..MEMBERS)
                    .map(|m| Tensor::scalar(Scalar::F32(m as f32)))
                    .collect(),
            ),
        ],
    };
    let options = RunOptions {
        threads: 1,
        max_instances: Some(max_instances),
        ..RunOptions::default()
    };
    let before = BYTES.load(Ordering::Relaxed);
    let output = run(strategy, &program, &Env::default(), &batch, &options).expect("runs");
    let allocated = BYTES.load(Ordering::Relaxed) - before;
    let results = output
        .results
        .iter()
        .map(|r| match &r.as_ref().expect("member succeeds")[0].data {
            autobatch_types::Data::F32(v) => v[0],
            other => panic!("an f32 result, got {other:?}"),
        })
        .collect();
    Figures {
        allocated,
        peak_state_bytes: output.stats.peak_state_bytes,
        peak_instances: output.stats.peak_instances,
        results,
    }
}

#[test]
fn lanes_past_max_instances_grow_geometrically() {
    let reference = run_with(Strategy::Reference, 1).results;
    for max_instances in [1, 16, 64] {
        let figures = run_with(Strategy::ProgramCounter, max_instances);
        eprintln!(
            "--max-instances {max_instances}: {} bytes allocated, peak_state_bytes {}, \
             peak_instances {}",
            figures.allocated, figures.peak_state_bytes, figures.peak_instances
        );
        assert_eq!(
            figures
                .results
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>(),
            reference.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            "--max-instances {max_instances}: results differ from the reference"
        );
        // The point of the check: forks found no free lane, so lanes were
        // needed past the bound, one at a time.
        assert!(
            figures.peak_instances > max_instances as u64 + 8,
            "--max-instances {max_instances}: peak_instances {} (no lane past the bound)",
            figures.peak_instances
        );
        // Geometric growth copies each row a few times (plus the steps'
        // temporaries and arguments); one row at a time copies the columns
        // once per extra lane, dozens of times the peak here.
        assert!(
            figures.allocated <= 8 * figures.peak_state_bytes,
            "--max-instances {max_instances}: {} bytes allocated for a peak of {} bytes \
             of lane storage",
            figures.allocated,
            figures.peak_state_bytes
        );
    }
}
