//! Accuracy of `vmath` against the standard library over millions of inputs
//! spread over every exponent, plus the extremes; and the scalar, slice,
//! in-place and portable paths giving the same bits.
//!
//! Run with `--nocapture` to see the measured maximum ulp errors.

use autobatch_ir::UnaryOp;
use autobatch_kernels::vmath;

/// A small deterministic generator (xorshift64*), so the inputs are reproducible.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Any non-NaN f64: uniform over the bit patterns, so over all exponents.
    fn any_f64(&mut self) -> f64 {
        loop {
            let x = f64::from_bits(self.next());
            if !x.is_nan() {
                return x;
            }
        }
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn ulp_f64(a: f64, b: f64) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    let ord = |x: f64| {
        let bits = x.to_bits() as i64;
        if bits < 0 {
            i64::MIN.wrapping_sub(bits)
        } else {
            bits
        }
    };
    ord(a).abs_diff(ord(b))
}

fn ulp_f32(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    let ord = |x: f32| {
        let bits = x.to_bits() as i32 as i64;
        if bits < 0 {
            (i32::MIN as i64) - bits
        } else {
            bits
        }
    };
    ord(a).abs_diff(ord(b))
}

const EXTREMES: [f64; 24] = [
    0.0,
    -0.0,
    f64::MIN_POSITIVE,
    -f64::MIN_POSITIVE,
    5e-324,
    -5e-324,
    1e-300,
    -1e-300,
    1.0,
    -1.0,
    709.782712893384,
    709.7827128933841,
    -708.3964185322641,
    -745.1332191019411,
    -745.1332191019412,
    88.72283,
    -87.33654,
    -103.97208,
    f64::MAX,
    f64::MIN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    -0.9999999999999999,
];

fn std_sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn std_softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

type Case = (UnaryOp, fn(f64) -> f64, fn(f64) -> f64, u64, (f64, f64));

fn cases() -> Vec<Case> {
    vec![
        (UnaryOp::Exp, vmath::exp_f64, f64::exp, 2, (-750.0, 750.0)),
        (
            UnaryOp::ExpM1,
            vmath::exp_m1_f64,
            f64::exp_m1,
            2,
            (-50.0, 50.0),
        ),
        (UnaryOp::Ln, vmath::ln_f64, f64::ln, 2, (0.0, 4.0)),
        (UnaryOp::Ln1p, vmath::ln_1p_f64, f64::ln_1p, 2, (-1.0, 4.0)),
        (UnaryOp::Tanh, vmath::tanh_f64, f64::tanh, 4, (-20.0, 20.0)),
        (
            UnaryOp::Sigmoid,
            vmath::sigmoid_f64,
            std_sigmoid,
            4,
            (-750.0, 750.0),
        ),
        (
            UnaryOp::Softplus,
            vmath::softplus_f64,
            std_softplus,
            4,
            (-750.0, 750.0),
        ),
        (
            UnaryOp::LogSigmoid,
            vmath::log_sigmoid_f64,
            |x| -std_softplus(-x),
            4,
            (-750.0, 750.0),
        ),
    ]
}

fn inputs(gen: &mut Gen, range: (f64, f64), count: usize) -> Vec<f64> {
    let mut xs: Vec<f64> = EXTREMES.to_vec();
    for i in 0..count {
        xs.push(if i % 2 == 0 {
            gen.any_f64()
        } else {
            gen.uniform(range.0, range.1)
        });
    }
    // Small arguments at every scale, where the `_m1`/`_1p` forms matter.
    for e in -1074..=10 {
        let x = 2f64.powi(e) * gen.uniform(1.0, 2.0);
        xs.push(x);
        xs.push(-x);
    }
    xs
}

#[test]
fn f64_functions_are_within_a_few_ulp_of_std() {
    let mut gen = Gen(0x9e37_79b9_7f4a_7c15);
    for (op, ours, reference, bound, range) in cases() {
        let xs = inputs(&mut gen, range, 2_000_000);
        let mut out = vec![0.0; xs.len()];
        assert!(vmath::apply_f64(op, &xs, &mut out));
        let mut worst = (0u64, 0.0f64);
        for (&x, &y) in xs.iter().zip(&out) {
            let want = reference(x);
            let err = ulp_f64(y, want);
            assert!(
                err <= bound,
                "{op:?}({x:e}) = {y:e}, std gives {want:e} ({err} ulp)"
            );
            if err > worst.0 {
                worst = (err, x);
            }
            assert_eq!(
                ours(x).to_bits(),
                y.to_bits(),
                "{op:?}({x:e}): scalar and slice differ"
            );
        }
        eprintln!(
            "f64 {op:?}: max {} ulp (at {:e}) over {} inputs",
            worst.0,
            worst.1,
            xs.len()
        );
    }
}

/// The f32 inputs: the extremes, random f32 bit patterns (so every f32
/// exponent, subnormals included), uniform values over `range` (clamped to
/// where f32 results are neither 0 nor infinite), and small arguments at
/// every f32 scale.
fn inputs_f32(gen: &mut Gen, range: (f64, f64), count: usize) -> Vec<f32> {
    let mut xs: Vec<f32> = EXTREMES.iter().map(|&x| x as f32).collect();
    xs.extend([
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::MAX,
        f32::MIN,
        88.72283,
        88.72284,
        -87.33654,
        -103.27893,
        -103.97208,
        -0.99999994,
        0.55,
        -0.55,
    ]);
    let (lo, hi) = (range.0.max(-110.0), range.1.min(110.0));
    for i in 0..count {
        xs.push(if i % 2 == 0 {
            loop {
                let x = f32::from_bits(gen.next() as u32);
                if !x.is_nan() {
                    break x;
                }
            }
        } else {
            gen.uniform(lo, hi) as f32
        });
    }
    for e in -149..=10 {
        let x = (2f64.powi(e) * gen.uniform(1.0, 2.0)) as f32;
        xs.push(x);
        xs.push(-x);
    }
    xs
}

#[test]
fn f32_functions_are_within_a_few_ulp_of_the_rounded_f64_result() {
    let mut gen = Gen(0x1234_5678_9abc_def1);
    for (op, _, reference, bound, range) in cases() {
        let xs = inputs_f32(&mut gen, range, 2_000_000);
        let mut out = vec![0.0f32; xs.len()];
        assert!(vmath::apply_f32(op, &xs, &mut out));
        let mut worst = (0, 0.0f32);
        for (&x, &y) in xs.iter().zip(&out) {
            let want = reference(x as f64) as f32;
            let err = ulp_f32(y, want);
            assert!(
                err <= bound,
                "{op:?}({x:e}) = {y:e}, want {want:e} ({err} ulp)"
            );
            if err > worst.0 {
                worst = (err, x);
            }
        }
        let scalar: fn(f32) -> f32 = match op {
            UnaryOp::Exp => vmath::exp_f32,
            UnaryOp::ExpM1 => vmath::exp_m1_f32,
            UnaryOp::Ln => vmath::ln_f32,
            UnaryOp::Ln1p => vmath::ln_1p_f32,
            UnaryOp::Tanh => vmath::tanh_f32,
            UnaryOp::Sigmoid => vmath::sigmoid_f32,
            UnaryOp::Softplus => vmath::softplus_f32,
            _ => vmath::log_sigmoid_f32,
        };
        for (&x, &y) in xs.iter().zip(&out) {
            assert_eq!(
                scalar(x).to_bits(),
                y.to_bits(),
                "{op:?}({x:e}): scalar and slice differ"
            );
        }
        eprintln!(
            "f32 {op:?}: max {} ulp (at {:e}) over {} inputs",
            worst.0,
            worst.1,
            xs.len()
        );
    }
}

#[test]
fn every_path_gives_the_same_bits() {
    let mut gen = Gen(42);
    for (op, ..) in cases() {
        let xs = inputs(&mut gen, (-30.0, 30.0), 200_000);
        let mut fast = vec![0.0; xs.len()];
        let mut portable = vec![0.0; xs.len()];
        assert!(vmath::apply_f64(op, &xs, &mut fast));
        assert!(vmath::apply_portable_f64(op, &xs, &mut portable));
        let mut in_place = xs.clone();
        assert!(vmath::apply_in_place_f64(op, &mut in_place));
        for i in 0..xs.len() {
            assert_eq!(
                fast[i].to_bits(),
                portable[i].to_bits(),
                "{op:?}({:e})",
                xs[i]
            );
            assert_eq!(
                fast[i].to_bits(),
                in_place[i].to_bits(),
                "{op:?}({:e})",
                xs[i]
            );
        }
        let mut xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        xs32.extend(inputs_f32(&mut gen, (-100.0, 100.0), 200_000));
        let mut fast = vec![0.0f32; xs32.len()];
        let mut portable = vec![0.0f32; xs32.len()];
        assert!(vmath::apply_f32(op, &xs32, &mut fast));
        assert!(vmath::apply_portable_f32(op, &xs32, &mut portable));
        let mut in_place = xs32.clone();
        assert!(vmath::apply_in_place_f32(op, &mut in_place));
        for i in 0..xs32.len() {
            assert_eq!(
                fast[i].to_bits(),
                portable[i].to_bits(),
                "{op:?}({:e})",
                xs32[i]
            );
            assert_eq!(
                fast[i].to_bits(),
                in_place[i].to_bits(),
                "{op:?}({:e})",
                xs32[i]
            );
        }
    }
}

#[test]
fn other_operations_are_left_alone() {
    let x = [1.0, 2.0];
    let mut out = [7.0, 7.0];
    for op in [UnaryOp::Sqrt, UnaryOp::Log10, UnaryOp::Sin, UnaryOp::Neg] {
        assert!(!vmath::is_vmath_op(op));
        assert!(!vmath::apply_f64(op, &x, &mut out));
        assert_eq!(out, [7.0, 7.0]);
    }
}

/// Median time of `apply` over a slice, in ns per element.
fn median_ns_per_element(len: usize, mut apply: impl FnMut()) -> f64 {
    apply();
    let mut times: Vec<f64> = (0..301)
        .map(|_| {
            let t = std::time::Instant::now();
            apply();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2] / len as f64 * 1e9
}

/// Throughput of `apply_f32` and `apply_f64` (single thread, 10,000
/// elements, median of 301 calls). Not a correctness test: run with
/// `cargo test --release -p autobatch-kernels --test vmath_accuracy -- --ignored --nocapture throughput`.
#[test]
#[ignore = "timing, run by hand in release mode"]
fn throughput() {
    const LEN: usize = 10_000;
    let mut gen = Gen(7);
    eprintln!("fast path (AVX2+FMA): {}", vmath::fast_path_available());
    for (op, ..) in cases() {
        let (lo, hi) = match op {
            UnaryOp::Ln => (1e-3, 1e3),
            UnaryOp::Ln1p => (-0.99, 100.0),
            _ => (-20.0, 20.0),
        };
        let x64: Vec<f64> = (0..LEN).map(|_| gen.uniform(lo, hi)).collect();
        let x32: Vec<f32> = x64.iter().map(|&x| x as f32).collect();
        let mut o64 = vec![0.0f64; LEN];
        let mut o32 = vec![0.0f32; LEN];
        let t64 = median_ns_per_element(LEN, || {
            vmath::apply_f64(op, std::hint::black_box(&x64), &mut o64);
        });
        let t32 = median_ns_per_element(LEN, || {
            vmath::apply_f32(op, std::hint::black_box(&x32), &mut o32);
        });
        eprintln!("{op:?}: f32 {t32:.3} ns/elem, f64 {t64:.3} ns/elem");
        std::hint::black_box((&o64, &o32));
    }
}
