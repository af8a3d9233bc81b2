//! The two matrix products of the logistic-regression gradient (N = 10,000
//! data points, D = 100 regressors, the data shared by every member) at batch
//! 1, 16, 64, 256 and 1024, f32 and f64, single-threaded:
//!
//! - `matvec_into`: the logits `X w` of n members at once (`vs` is n x D);
//! - `vecmat_into`: the gradient `Xᵀ r` of n members at once (`vs` is n x N);
//!
//! in GFLOP/s (2 N D n flops each), next to the `gemm` crate doing the same
//! products when the `yardstick` feature is on
//! (`cargo bench -p autobatch-kernels --features yardstick --bench products`),
//! and, at n = 1, in GB/s of the matrix read, next to the memory bandwidth
//! measured by summing a 256 MiB array. Also the throughput of `vmath`.
//! Also the small products of the dynamic models (`--small`: only those),
//! `vmath` alone (`--vmath`), and (`--chain`) the AVX2+FMA peak of one
//! core beside the two products as the fused product chain runs them, a
//! block of X's rows at a time, on every SIMD path.
//! Prints one line per figure and a JSON object at the end.

use std::hint::black_box;
use std::time::Instant;

use autobatch_ir::UnaryOp;
use autobatch_kernels::gemm::{self, GemmFloat, Path};
use autobatch_kernels::vmath;

const N: usize = 10_000;
const D: usize = 100;
const BATCHES: [usize; 5] = [1, 16, 64, 256, 1024];

/// The best time of one call of each of `fs`, in seconds, calling them in
/// turn (so that a machine shared with other work slows them alike) for
/// about `budget` seconds.
fn best_times(budget: f64, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    for f in fs.iter_mut() {
        f();
    }
    let start = Instant::now();
    let mut best = vec![f64::INFINITY; fs.len()];
    let mut rounds = 0;
    while rounds < 3 || (start.elapsed().as_secs_f64() < budget && rounds < 1000) {
        for (f, b) in fs.iter_mut().zip(best.iter_mut()) {
            let t = Instant::now();
            f();
            *b = b.min(t.elapsed().as_secs_f64());
        }
        rounds += 1;
    }
    best
}

fn best_time(budget: f64, mut f: impl FnMut()) -> f64 {
    best_times(budget, &mut [&mut f])[0]
}

trait BenchFloat: GemmFloat {
    const NAME: &'static str;
    fn of(x: f64) -> Self;
    #[cfg_attr(not(feature = "yardstick"), allow(dead_code))]
    fn wide(self) -> f64;
}

impl BenchFloat for f32 {
    const NAME: &'static str = "f32";
    fn of(x: f64) -> Self {
        x as f32
    }
    fn wide(self) -> f64 {
        self as f64
    }
}

impl BenchFloat for f64 {
    const NAME: &'static str = "f64";
    fn of(x: f64) -> Self {
        x
    }
    fn wide(self) -> f64 {
        self
    }
}

fn data<T: BenchFloat>(len: usize, seed: u64) -> Vec<T> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            T::of(((s >> 11) as f64 / (1u64 << 53) as f64) - 0.5)
        })
        .collect()
}

#[cfg(feature = "yardstick")]
mod yardstick {
    /// `dst (m x n, row-major) = lhs (m x k, strides) * rhs (k x n, strides)`, one thread.
    #[allow(clippy::too_many_arguments)]
    pub fn product<T: 'static + Copy>(
        m: usize,
        n: usize,
        k: usize,
        dst: &mut [T],
        lhs: &[T],
        lhs_rs: isize,
        lhs_cs: isize,
        rhs: &[T],
        rhs_rs: isize,
        rhs_cs: isize,
        zero: T,
        one: T,
    ) {
        // SAFETY: the strides describe matrices inside the slices (checked by the callers' shapes).
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                1,
                n as isize,
                false,
                lhs.as_ptr(),
                lhs_cs,
                lhs_rs,
                rhs.as_ptr(),
                rhs_cs,
                rhs_rs,
                zero,
                one,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    }
}

fn bench_type<T: BenchFloat>(json: &mut Vec<String>, bandwidth: f64) {
    let x: Vec<T> = data(N * D, 1);
    for &n in &BATCHES {
        let flops = 2.0 * (N * D * n) as f64;
        let budget = 1.0;
        let w: Vec<T> = data(n * D, 2);
        let r: Vec<T> = data(n * N, 3);
        let mut logits = vec![T::ACC_ZERO; n * N];
        let mut grad = vec![T::ACC_ZERO; n * D];
        let (mut logits2, mut grad2) = (logits.clone(), grad.clone());
        #[cfg(feature = "yardstick")]
        let (mut out_mv, mut out_vm) = (vec![T::ACC_ZERO; n * N], vec![T::ACC_ZERO; n * D]);
        let times = {
            let mut ours_mv =
                || gemm::matvec_into(black_box(&x), N, D, black_box(&w), n, &mut logits);
            let mut ours_vm =
                || gemm::vecmat_into(black_box(&r), black_box(&x), n, N, D, &mut grad);
            // The AVX2 path, for comparison (the detected one when it is the best).
            let avx2 = if Path::Avx2.available() {
                Path::Avx2
            } else {
                Path::Portable
            };
            let mut avx2_mv =
                || gemm::matvec_into_on(avx2, black_box(&x), N, D, black_box(&w), n, &mut logits2);
            let mut avx2_vm =
                || gemm::vecmat_into_on(avx2, black_box(&r), black_box(&x), n, N, D, &mut grad2);
            #[cfg(feature = "yardstick")]
            {
                // logits (n x N) = w (n x D) * Xᵀ (D x N), with Xᵀ[p][i] = x[i * D + p];
                // grad (n x D) = r (n x N) * X (N x D).
                let one = T::of(1.0);
                let mut theirs_mv = || {
                    yardstick::product(
                        n,
                        N,
                        D,
                        &mut out_mv,
                        &w,
                        D as isize,
                        1,
                        &x,
                        1,
                        D as isize,
                        T::ACC_ZERO,
                        one,
                    )
                };
                let mut theirs_vm = || {
                    yardstick::product(
                        n,
                        D,
                        N,
                        &mut out_vm,
                        &r,
                        N as isize,
                        1,
                        &x,
                        D as isize,
                        1,
                        T::ACC_ZERO,
                        one,
                    )
                };
                best_times(
                    budget,
                    &mut [
                        &mut ours_mv,
                        &mut ours_vm,
                        &mut avx2_mv,
                        &mut avx2_vm,
                        &mut theirs_mv,
                        &mut theirs_vm,
                    ],
                )
            }
            #[cfg(not(feature = "yardstick"))]
            {
                best_times(
                    budget,
                    &mut [&mut ours_mv, &mut ours_vm, &mut avx2_mv, &mut avx2_vm],
                )
            }
        };
        let (t_mv, t_vm) = (times[0], times[1]);
        let bytes = (N * D * std::mem::size_of::<T>()) as f64;
        let mut line = format!(
            "{} n={:4}  matvec {:7.2} GFLOP/s  vecmat {:7.2} GFLOP/s  both {:8.1} products-of-two/s",
            T::NAME,
            n,
            flops / t_mv / 1e9,
            flops / t_vm / 1e9,
            n as f64 / (t_mv + t_vm)
        );
        let mut entry = format!(
            "{{\"type\":\"{}\",\"n\":{},\"matvec_gflops\":{:.3},\"vecmat_gflops\":{:.3},\"gradients_per_s_products_only\":{:.1}",
            T::NAME,
            n,
            flops / t_mv / 1e9,
            flops / t_vm / 1e9,
            n as f64 / (t_mv + t_vm)
        );
        let (a_mv, a_vm) = (times[2], times[3]);
        line += &format!(
            "  | AVX2 path: matvec {:7.2}  vecmat {:7.2} GFLOP/s",
            flops / a_mv / 1e9,
            flops / a_vm / 1e9
        );
        entry += &format!(
            ",\"avx2_matvec_gflops\":{:.3},\"avx2_vecmat_gflops\":{:.3}",
            flops / a_mv / 1e9,
            flops / a_vm / 1e9
        );
        if n == 1 {
            let gbs = 2.0 * bytes / (t_mv + t_vm) / 1e9;
            line += &format!(
                "  matrix read {:.2} GB/s over both = {:.0}% of memory bandwidth",
                gbs,
                100.0 * gbs / bandwidth
            );
            entry += &format!(
                ",\"gb_per_s\":{gbs:.3},\"fraction_of_bandwidth\":{:.3}",
                gbs / bandwidth
            );
        }
        #[cfg(feature = "yardstick")]
        {
            let (g_mv, g_vm) = (times[4], times[5]);
            // The yardstick computes the same products (other rounding order).
            for (a, b) in out_mv.iter().zip(&logits).chain(out_vm.iter().zip(&grad)) {
                let (a, b) = (a.wide(), b.wide());
                assert!(
                    (a - b).abs() <= 1e-3 * (1.0 + b.abs()),
                    "gemm crate {a} vs ours {b}"
                );
            }
            line += &format!(
                "  | gemm crate: matvec {:7.2}  vecmat {:7.2} GFLOP/s  (ours/gemm both: {:.0}%)",
                flops / g_mv / 1e9,
                flops / g_vm / 1e9,
                100.0 * (g_mv + g_vm) / (t_mv + t_vm)
            );
            entry += &format!(
                ",\"gemm_matvec_gflops\":{:.3},\"gemm_vecmat_gflops\":{:.3},\"ours_over_gemm\":{:.3}",
                flops / g_mv / 1e9,
                flops / g_vm / 1e9,
                (g_mv + g_vm) / (t_mv + t_vm)
            );
        }
        entry += "}";
        println!("{line}");
        json.push(entry);
    }
}

fn bench_vmath(json: &mut Vec<String>) {
    let len = 1 << 16;
    let x64: Vec<f64> = data::<f64>(len, 5).iter().map(|v| v * 40.0).collect();
    let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
    let mut o64 = vec![0.0f64; len];
    let mut o32 = vec![0.0f32; len];
    for op in [
        UnaryOp::Exp,
        UnaryOp::Ln,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::LogSigmoid,
        UnaryOp::Softplus,
    ] {
        let pos: Vec<f64> = x64.iter().map(|v| v.abs()).collect();
        let input = if op == UnaryOp::Ln { &pos } else { &x64 };
        let t64 = best_time(0.1, || {
            vmath::apply_f64(op, black_box(input), &mut o64);
        });
        let std_fn: fn(f64) -> f64 = match op {
            UnaryOp::Exp => f64::exp,
            UnaryOp::Ln => f64::ln,
            UnaryOp::Tanh => f64::tanh,
            _ => |v: f64| v.max(0.0) + (-v.abs()).exp().ln_1p(),
        };
        let t_std = best_time(0.1, || {
            for (o, &v) in o64.iter_mut().zip(black_box(input)) {
                *o = std_fn(v);
            }
        });
        let t32 = best_time(0.1, || {
            vmath::apply_f32(op, black_box(&x32), &mut o32);
        });
        println!(
            "vmath {op:?}: f64 {:.2} ns/elem (std scalar {:.2}), f32 {:.2} ns/elem",
            t64 / len as f64 * 1e9,
            t_std / len as f64 * 1e9,
            t32 / len as f64 * 1e9
        );
        json.push(format!(
            "{{\"vmath\":\"{op:?}\",\"f64_ns\":{:.3},\"std_f64_ns\":{:.3},\"f32_ns\":{:.3}}}",
            t64 / len as f64 * 1e9,
            t_std / len as f64 * 1e9,
            t32 / len as f64 * 1e9
        ));
    }
}

/// `softplus` and `sigmoid` of one operand (a `softplus`'s gradient needs
/// both): apart, and in the one pass that shares each exponential.
fn bench_softplus_sigmoid(json: &mut Vec<String>) {
    let len = 10_000;
    let x64: Vec<f64> = data::<f64>(len, 6).iter().map(|v| v * 40.0).collect();
    let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
    let (mut p64, mut s64) = (vec![0.0f64; len], vec![0.0f64; len]);
    let (mut p32, mut s32) = (vec![0.0f32; len], vec![0.0f32; len]);
    let apart64 = best_time(0.1, || {
        vmath::apply_f64(UnaryOp::Softplus, black_box(&x64), &mut p64);
        vmath::apply_f64(UnaryOp::Sigmoid, black_box(&x64), &mut s64);
    });
    let together64 = best_time(0.1, || {
        vmath::softplus_sigmoid_f64(black_box(&x64), &mut p64, &mut s64);
    });
    let apart32 = best_time(0.1, || {
        vmath::apply_f32(UnaryOp::Softplus, black_box(&x32), &mut p32);
        vmath::apply_f32(UnaryOp::Sigmoid, black_box(&x32), &mut s32);
    });
    let together32 = best_time(0.1, || {
        vmath::softplus_sigmoid_f32(black_box(&x32), &mut p32, &mut s32);
    });
    let ns = |t: f64| t / len as f64 * 1e9;
    println!(
        "vmath softplus and sigmoid: f64 apart {:.2} ns/elem, together {:.2}; f32 apart {:.2}, together {:.2}",
        ns(apart64),
        ns(together64),
        ns(apart32),
        ns(together32)
    );
    json.push(format!(
        "{{\"vmath\":\"softplus+sigmoid\",\"f64_apart_ns\":{:.3},\"f64_together_ns\":{:.3},\"f32_apart_ns\":{:.3},\"f32_together_ns\":{:.3}}}",
        ns(apart64),
        ns(together64),
        ns(apart32),
        ns(together32)
    ));
}

/// The products of the dynamic models (a TreeLSTM's or an RNN's gate
/// matrices, f32, hidden size H): one matrix of `rows x k` times 1 to 8
/// vectors, as member-by-member native code (1) and `native-batched`'s
/// waits (a few) call them; first one matrix again and again (it stays in
/// L2), then 8 matrices in turn (as a model's gate matrices: together they
/// overflow L2 from H = 128 on).
fn bench_small(json: &mut Vec<String>) {
    for matrices in [1, 8] {
        for (rows, k) in [(128, 128), (384, 128), (256, 256), (768, 256)] {
            let mats: Vec<Vec<f32>> = (0..matrices).map(|s| data(rows * k, 10 + s)).collect();
            for n in [1, 2, 3, 8] {
                let vs: Vec<f32> = data(n * k, 4);
                let mut out = vec![0.0f32; n * rows];
                let t = best_time(0.3, || {
                    for m in &mats {
                        gemm::matvec_into(black_box(m), rows, k, black_box(&vs), n, &mut out);
                    }
                }) / mats.len() as f64;
                let gflops = 2.0 * (rows * k * n) as f64 / t / 1e9;
                println!(
                    "small matvec f32 {rows}x{k}, {matrices} matrices in turn, {n} vectors: \
                     {gflops:.1} GFLOP/s"
                );
                json.push(format!(
                    "{{\"small_matvec\":\"{rows}x{k}\",\"matrices\":{matrices},\
                     \"vectors\":{n},\"gflops\":{gflops:.2}}}"
                ));
            }
        }
    }
}

/// This thread's CPU time in seconds (Linux `CLOCK_THREAD_CPUTIME_ID`):
/// on a machine shared with other work, the time this thread ran, not the
/// time it waited for a core.
fn thread_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The AVX2+FMA peak of this core in GFLOP/s for `T`: twelve independent
/// `mul_add` chains on 256-bit registers (enough to cover the FMA latency
/// on two units), best of a few runs.
#[cfg(target_arch = "x86_64")]
fn fma_peak<T: GemmFloat>() -> f64 {
    use gemm::Vector;
    #[target_feature(enable = "avx2,fma")]
    unsafe fn chains<T: GemmFloat>(iters: usize) -> T {
        // One opaque multiplier, read once: inside the loop `black_box`
        // would store and reload it at every FMA, which bounds the rate by
        // the loads and stores rather than the FMA units on some CPUs.
        let a = black_box(T::Avx::splat(T::ACC_ZERO));
        let mut acc = [T::Avx::zero(); 12];
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = T::Avx::mul_add(a, *x, *x);
            }
        }
        let mut out = [T::ACC_ZERO; 64];
        for (i, x) in acc.iter().enumerate() {
            x.store_partial(out.as_mut_ptr().add(i), 1);
        }
        out[..12].iter().fold(T::ACC_ZERO, |s, &x| s + x)
    }
    if !Path::Avx2.available() {
        return f64::NAN;
    }
    let iters = 1 << 22;
    let mut t = f64::INFINITY;
    for _ in 0..20 {
        let start = thread_seconds();
        // SAFETY: the CPU runs the AVX2 path.
        black_box(unsafe { chains::<T>(iters) });
        t = t.min(thread_seconds() - start);
    }
    (iters * 12 * <T::Avx as Vector<T>>::L * 2) as f64 / t / 1e9
}

/// The two products of the logistic gradient as the fused product chain
/// (`product_chain::blocked`) runs them: a block of about 256 KiB of X's
/// rows at a time, `z` of those rows for every member, then the closing
/// product's sums over them; without the elementwise chain between them.
fn blocked_pair<T: GemmFloat>(
    path: Path,
    x: &[T],
    w: &[T],
    n: usize,
    z: &mut [T],
    r: &[T],
    g: &mut [T],
) {
    let block = (256 * 1024 / (D * std::mem::size_of::<T>())) / 8 * 8;
    let mut start = 0;
    while start < N {
        let end = (start + block).min(N);
        let rows = end - start;
        let xb = &x[start * D..end * D];
        gemm::matvec_into_on(path, xb, rows, D, w, n, &mut z[..n * rows]);
        let rb = &r[..n * rows];
        if start == 0 {
            gemm::vecmat_into_on(path, rb, xb, n, rows, D, g);
        } else {
            gemm::vecmat_add_into_on(path, rb, xb, n, rows, D, g);
        }
        start = end;
    }
}

/// `--chain`: the FMA peak, then the products of the blocked chain on
/// every path at 256 and 1024 members (median of interleaved runs), in
/// the thread's CPU time ([`thread_seconds`]). The peak is measured in
/// `f32`; `f64`'s is half of it (the same 256-bit FMAs per cycle, half
/// the lanes).
fn bench_chain<T: BenchFloat>(json: &mut Vec<String>) {
    #[cfg(target_arch = "x86_64")]
    let peak = fma_peak::<f32>() * (4.0 / std::mem::size_of::<T>() as f64);
    #[cfg(not(target_arch = "x86_64"))]
    let peak = f64::NAN;
    println!("{} AVX2+FMA peak of one core: {peak:.1} GFLOP/s", T::NAME);
    let x: Vec<T> = data(N * D, 1);
    let paths: Vec<Path> = Path::ALL
        .into_iter()
        .filter(|p| p.available() && *p != Path::Portable)
        .collect();
    for n in [256, 1024] {
        let w: Vec<T> = data(n * D, 2);
        let r: Vec<T> = data(n * N, 3);
        let mut z = vec![T::ACC_ZERO; n * N];
        let mut g = vec![T::ACC_ZERO; n * D];
        let mut medians = Vec::new();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        for _ in 0..15 {
            for (p, s) in paths.iter().zip(samples.iter_mut()) {
                let start = thread_seconds();
                blocked_pair(*p, &x, &w, n, &mut z, &r, &mut g);
                s.push(thread_seconds() - start);
            }
        }
        for s in samples.iter_mut() {
            s.sort_by(|a, b| a.total_cmp(b));
            medians.push(s[s.len() / 2]);
        }
        for (p, t) in paths.iter().zip(&medians) {
            let gflops = 4.0 * (N * D * n) as f64 / t / 1e9;
            println!(
                "{} n={n:4} path {:7}: blocked pair {:8.1} gradients/s, {gflops:6.1} GFLOP/s = {:.0}% of the AVX2 FMA peak",
                T::NAME,
                p.name(),
                n as f64 / t,
                100.0 * gflops / peak
            );
            json.push(format!(
                "{{\"type\":\"{}\",\"n\":{n},\"path\":\"{}\",\"blocked_pair_gradients_per_s\":{:.1},\"gflops\":{gflops:.2},\"avx2_fma_peak_gflops\":{peak:.2}}}",
                T::NAME,
                p.name(),
                n as f64 / t
            ));
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if std::env::args().any(|a| a == "--chain") {
        let mut json = Vec::new();
        bench_chain::<f32>(&mut json);
        bench_chain::<f64>(&mut json);
        println!("[{}]", json.join(",\n"));
        return;
    }
    println!(
        "CPU fast path (AVX2+FMA): {}; products path: {:?}; yardstick gemm crate: {}",
        vmath::fast_path_available(),
        Path::detected(),
        cfg!(feature = "yardstick")
    );
    if std::env::args().any(|a| a == "--vmath") {
        let mut json = Vec::new();
        bench_vmath(&mut json);
        bench_softplus_sigmoid(&mut json);
        return;
    }
    if std::env::args().any(|a| a == "--small") {
        let mut json = Vec::new();
        bench_small(&mut json);
        println!("[{}]", json.join(",\n"));
        return;
    }
    let big: Vec<f64> = vec![1.0; 32 << 20];
    let t = best_time(1.0, || {
        black_box(gemm::sum(black_box(&big)));
    });
    let bandwidth = (big.len() * 8) as f64 / t / 1e9;
    println!("memory bandwidth (sum of 256 MiB): {bandwidth:.2} GB/s");
    drop(big);
    let mut json = vec![format!("{{\"memory_bandwidth_gb_per_s\":{bandwidth:.3}}}")];
    bench_small(&mut json);
    bench_type::<f32>(&mut json, bandwidth);
    bench_type::<f64>(&mut json, bandwidth);
    bench_vmath(&mut json);
    bench_softplus_sigmoid(&mut json);
    println!("[{}]", json.join(",\n"));
}
