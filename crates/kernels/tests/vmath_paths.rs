//! Every CPU path of the vmath slice functions (portable, AVX2, AVX-512,
//! forced through `vmath::apply_*_on`) gives every element the same bits,
//! out of place and in place, on odd lengths and on inputs of every
//! exponent, NaN, infinities, signed zeros and subnormals included. Paths
//! this CPU cannot run are skipped (and named on stderr). The pass that
//! computes `softplus` and `sigmoid` together keeps the bits of each.

use autobatch_ir::UnaryOp;
use autobatch_kernels::gemm::Path;
use autobatch_kernels::vmath;

const OPS: [UnaryOp; 8] = [
    UnaryOp::Exp,
    UnaryOp::ExpM1,
    UnaryOp::Ln,
    UnaryOp::Ln1p,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::LogSigmoid,
    UnaryOp::Softplus,
];

const LENGTHS: [usize; 9] = [0, 1, 7, 15, 16, 17, 100, 257, 4099];

struct Gen(u64);

impl Gen {
    fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random bit patterns (every exponent, NaNs, subnormals) and values of
/// moderate size, with the special values in front.
fn inputs_f64(len: usize, gen: &mut Gen) -> Vec<f64> {
    let special = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        5e-324,
        710.0,
        -745.5,
    ];
    (0..len)
        .map(|i| match i {
            _ if i < special.len() => special[i],
            _ if i % 2 == 0 => f64::from_bits(gen.bits()),
            _ => (gen.bits() >> 11) as f64 / (1u64 << 53) as f64 * 80.0 - 40.0,
        })
        .collect()
}

fn inputs_f32(len: usize, gen: &mut Gen) -> Vec<f32> {
    let special = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1e-45,
        89.0,
        -104.0,
    ];
    (0..len)
        .map(|i| match i {
            _ if i < special.len() => special[i],
            _ if i % 2 == 0 => f32::from_bits(gen.bits() as u32),
            _ => ((gen.bits() >> 11) as f64 / (1u64 << 53) as f64 * 80.0 - 40.0) as f32,
        })
        .collect()
}

fn paths() -> Vec<Path> {
    Path::ALL
        .into_iter()
        .filter(|p| {
            let ok = p.available();
            if !ok {
                eprintln!("vmath_paths: this CPU cannot run {p:?}; not compared");
            }
            ok
        })
        .collect()
}

#[test]
fn vmath_paths_agree_bit_for_bit_f64() {
    let mut gen = Gen(31);
    for len in LENGTHS {
        let x = inputs_f64(len, &mut gen);
        for op in OPS {
            let mut want = vec![1.0; len];
            assert!(vmath::apply_f64_on(Path::Portable, op, &x, &mut want));
            for path in paths() {
                let mut got = vec![2.0; len];
                assert!(vmath::apply_f64_on(path, op, &x, &mut got));
                let mut in_place = x.clone();
                assert!(vmath::apply_in_place_f64_on(path, op, &mut in_place));
                for i in 0..len {
                    let same =
                        |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                    assert!(
                        same(got[i], want[i]),
                        "{op:?} {path:?} x={:e}: {} vs {}",
                        x[i],
                        got[i],
                        want[i]
                    );
                    assert!(
                        same(in_place[i], want[i]),
                        "{op:?} {path:?} in place x={:e}",
                        x[i]
                    );
                }
            }
        }
    }
}

#[test]
fn vmath_paths_agree_bit_for_bit_f32() {
    let mut gen = Gen(32);
    for len in LENGTHS {
        let x = inputs_f32(len, &mut gen);
        for op in OPS {
            let mut want = vec![1.0; len];
            assert!(vmath::apply_f32_on(Path::Portable, op, &x, &mut want));
            for path in paths() {
                let mut got = vec![2.0; len];
                assert!(vmath::apply_f32_on(path, op, &x, &mut got));
                let mut in_place = x.clone();
                assert!(vmath::apply_in_place_f32_on(path, op, &mut in_place));
                for i in 0..len {
                    let same =
                        |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                    assert!(
                        same(got[i], want[i]),
                        "{op:?} {path:?} x={:e}: {} vs {}",
                        x[i],
                        got[i],
                        want[i]
                    );
                    assert!(
                        same(in_place[i], want[i]),
                        "{op:?} {path:?} in place x={:e}",
                        x[i]
                    );
                }
            }
        }
    }
}

/// `softplus_sigmoid_*_on`, which computes each element's exponential once
/// for both functions, gives exactly the bits of `softplus` and `sigmoid`
/// apart (NaN payloads included), on every path.
#[test]
fn softplus_and_sigmoid_together_keep_their_bits() {
    let mut gen = Gen(33);
    for len in LENGTHS {
        let x = inputs_f64(len, &mut gen);
        let (mut softplus, mut sigmoid) = (vec![1.0; len], vec![1.0; len]);
        assert!(vmath::apply_f64_on(
            Path::Portable,
            UnaryOp::Softplus,
            &x,
            &mut softplus
        ));
        assert!(vmath::apply_f64_on(
            Path::Portable,
            UnaryOp::Sigmoid,
            &x,
            &mut sigmoid
        ));
        let x32 = inputs_f32(len, &mut gen);
        let (mut softplus32, mut sigmoid32) = (vec![1.0; len], vec![1.0; len]);
        assert!(vmath::apply_f32_on(
            Path::Portable,
            UnaryOp::Softplus,
            &x32,
            &mut softplus32
        ));
        assert!(vmath::apply_f32_on(
            Path::Portable,
            UnaryOp::Sigmoid,
            &x32,
            &mut sigmoid32
        ));
        for path in paths() {
            let (mut p, mut s) = (vec![2.0; len], vec![2.0; len]);
            vmath::softplus_sigmoid_f64_on(path, &x, &mut p, &mut s);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&p), bits(&softplus), "softplus f64 {path:?} len {len}");
            assert_eq!(bits(&s), bits(&sigmoid), "sigmoid f64 {path:?} len {len}");
            let (mut p, mut s) = (vec![2.0; len], vec![2.0; len]);
            vmath::softplus_sigmoid_f32_on(path, &x32, &mut p, &mut s);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&p),
                bits(&softplus32),
                "softplus f32 {path:?} len {len}"
            );
            assert_eq!(bits(&s), bits(&sigmoid32), "sigmoid f32 {path:?} len {len}");
        }
    }
}

/// The slice loops (which run `tanh`, `softplus` and `log_sigmoid` in two
/// stages, a tile of elements at a time) give each element the bits of
/// the scalar function, across tile boundaries, on every path.
#[test]
fn slices_give_the_scalar_functions_bits() {
    type Pair = (UnaryOp, fn(f64) -> f64, fn(f32) -> f32);
    let scalar: [Pair; 8] = [
        (UnaryOp::Exp, vmath::exp_f64, vmath::exp_f32),
        (UnaryOp::ExpM1, vmath::exp_m1_f64, vmath::exp_m1_f32),
        (UnaryOp::Ln, vmath::ln_f64, vmath::ln_f32),
        (UnaryOp::Ln1p, vmath::ln_1p_f64, vmath::ln_1p_f32),
        (UnaryOp::Tanh, vmath::tanh_f64, vmath::tanh_f32),
        (UnaryOp::Sigmoid, vmath::sigmoid_f64, vmath::sigmoid_f32),
        (
            UnaryOp::LogSigmoid,
            vmath::log_sigmoid_f64,
            vmath::log_sigmoid_f32,
        ),
        (UnaryOp::Softplus, vmath::softplus_f64, vmath::softplus_f32),
    ];
    let mut gen = Gen(34);
    let x = inputs_f64(1000, &mut gen);
    let x32 = inputs_f32(1000, &mut gen);
    for (op, f64_fn, f32_fn) in scalar {
        for path in paths() {
            let mut got = vec![0.0; x.len()];
            assert!(vmath::apply_f64_on(path, op, &x, &mut got));
            for (v, g) in x.iter().zip(&got) {
                let want = f64_fn(*v);
                assert!(
                    want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()),
                    "{op:?} {path:?} f64 x={v:e}: slice {g} scalar {want}"
                );
            }
            let mut got = vec![0.0; x32.len()];
            assert!(vmath::apply_f32_on(path, op, &x32, &mut got));
            for (v, g) in x32.iter().zip(&got) {
                let want = f32_fn(*v);
                assert!(
                    want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()),
                    "{op:?} {path:?} f32 x={v:e}: slice {g} scalar {want}"
                );
            }
        }
    }
}
