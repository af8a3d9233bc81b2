//! Every CPU path of the float elementwise operations (portable, AVX2,
//! AVX-512, forced through `elementwise::float_binary_on` and
//! `float_unary_on`) gives every element the same bits, on odd lengths, with
//! a broadcast operand on either side, and on inputs of every exponent, NaN,
//! infinities, signed zeros and subnormals included. Paths this CPU cannot
//! run are skipped (and named on stderr).

use autobatch_ir::{BinaryOp, UnaryOp};
use autobatch_kernels::elementwise::{float_binary_on, float_unary_on, Operand};
use autobatch_kernels::gemm::Path;
use autobatch_kernels::scalar::Float;

const BINARY: [BinaryOp; 8] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Rem,
    BinaryOp::Max,
    BinaryOp::Min,
    BinaryOp::Powf,
];

const UNARY: [UnaryOp; 12] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Sqrt,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Signum,
    UnaryOp::Recip,
    UnaryOp::Log10,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
];

const LENGTHS: [usize; 7] = [1, 7, 16, 17, 100, 257, 4099];

struct Gen(u64);

impl Gen {
    fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random bit patterns and moderate values, with the special values in front.
fn inputs_f64(len: usize, gen: &mut Gen) -> Vec<f64> {
    let special = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        f64::MIN_POSITIVE / 8.0,
        1.0,
        -2.5,
    ];
    (0..len)
        .map(|i| match special.get(i) {
            Some(v) => *v,
            None if i % 2 == 0 => f64::from_bits(gen.bits()),
            None => (gen.bits() >> 11) as f64 / (1u64 << 50) as f64 - 4.0,
        })
        .collect()
}

fn available() -> Vec<Path> {
    Path::ALL
        .into_iter()
        .filter(|p| {
            let ok = p.available();
            if !ok {
                eprintln!("skipping the {p:?} path: this CPU cannot run it");
            }
            ok
        })
        .collect()
}

fn check<F: Float>(convert: impl Fn(f64) -> F, to_bits: impl Fn(F) -> u64) {
    let mut gen = Gen(0x2545_f491_4f6c_dd1d);
    let paths = available();
    for len in LENGTHS {
        let x: Vec<F> = inputs_f64(len, &mut gen)
            .into_iter()
            .map(&convert)
            .collect();
        let y: Vec<F> = inputs_f64(len, &mut gen)
            .into_iter()
            .map(&convert)
            .collect();
        let scalar = [convert(-1.75)];
        let shapes = [
            (
                Operand {
                    values: &x[..],
                    broadcast: false,
                },
                Operand {
                    values: &y[..],
                    broadcast: false,
                },
            ),
            (
                Operand {
                    values: &scalar[..],
                    broadcast: true,
                },
                Operand {
                    values: &y[..],
                    broadcast: false,
                },
            ),
            (
                Operand {
                    values: &x[..],
                    broadcast: false,
                },
                Operand {
                    values: &scalar[..],
                    broadcast: true,
                },
            ),
        ];
        for op in BINARY {
            for (a, b) in shapes {
                let results: Vec<Vec<u64>> = paths
                    .iter()
                    .map(|&path| {
                        let mut out = vec![convert(0.0); len];
                        float_binary_on(path, op, a, b, &mut out);
                        out.into_iter().map(&to_bits).collect()
                    })
                    .collect();
                for (path, r) in paths.iter().zip(&results) {
                    assert_eq!(r, &results[0], "{op:?} len {len} on {path:?}");
                }
            }
        }
        for op in UNARY {
            let results: Vec<Vec<u64>> = paths
                .iter()
                .map(|&path| {
                    let mut out = vec![convert(0.0); len];
                    float_unary_on(path, op, &x, &mut out);
                    out.into_iter().map(&to_bits).collect()
                })
                .collect();
            for (path, r) in paths.iter().zip(&results) {
                assert_eq!(r, &results[0], "{op:?} len {len} on {path:?}");
            }
        }
    }
}

#[test]
fn every_path_gives_the_same_bits_f64() {
    check(|v| v, f64::to_bits);
}

#[test]
fn every_path_gives_the_same_bits_f32() {
    check(|v| v as f32, |v: f32| v.to_bits() as u64);
}
