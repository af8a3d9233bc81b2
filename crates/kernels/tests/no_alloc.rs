//! The batched kernels allocate nothing: a counting global allocator sees no
//! allocation while they run on preallocated buffers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use autobatch_ir::UnaryOp;
use autobatch_kernels::{gemm, reduce, vmath};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn kernels_do_not_allocate() {
    let (rows, k, n) = (37, 21, 9);
    let m: Vec<f32> = (0..rows * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let vs: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 * 0.5).collect();
    let r: Vec<f32> = (0..n * rows).map(|i| (i % 3) as f32).collect();
    let mut out_mv = vec![0.0f32; n * rows];
    let mut out_vm = vec![0.0f32; n * k];
    let mut out_exp = vec![0.0f64; 100];
    let x64: Vec<f64> = (0..100).map(|i| i as f64 * 0.1 - 5.0).collect();
    let mut rows_out = vec![0.0f32; n];
    let mut soft = vec![0.0f32; n * rows];
    let mut mm = vec![0.0f32; rows * rows];
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    gemm::matvec_into(&m, rows, k, &vs, n, &mut out_mv);
    gemm::vecmat_into(&r, &m, n, rows, k, &mut out_vm);
    gemm::matmul_into(&m, &m[..k * rows], rows, k, rows, &mut mm);
    let d = gemm::dot(&m[..k], &vs[..k]);
    for op in [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::LogSigmoid] {
        assert!(vmath::apply_f64(op, &x64, &mut out_exp));
    }
    reduce::logsumexp_rows_into(&r, rows, &mut rows_out);
    reduce::softmax_rows_into(&r, rows, &mut soft);
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    assert_eq!(after - before, 0, "the kernels allocated");
    assert!(d.is_finite() && out_mv.iter().chain(&out_vm).all(|x| x.is_finite()));
    assert!(out_exp.iter().all(|x| x.is_finite()) && rows_out.iter().all(|x| x.is_finite()));
}
