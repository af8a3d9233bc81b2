//! The random stream of one batch member.
//!
//! Every member owns one ChaCha8 stream: the run's seed picks the key and the
//! member's index in the batch picks the stream (`set_stream`). A member's
//! draws therefore depend only on `(seed, member)` and on the draws that member
//! made before, never on which other members share the batch, in what order
//! an executor runs them, or how many threads it uses.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::buffer::{Rows, RowsMut, Values, ValuesMut};
use crate::internal_error;
use crate::scalar::Float;

/// The random stream of one member. Cloning it forks the stream (both copies
/// continue with the same draws).
#[derive(Clone, Debug)]
pub struct MemberRng {
    stream: ChaCha8Rng,
}

impl MemberRng {
    /// The stream of member `member` in a run seeded with `seed`.
    pub fn new(seed: u64, member: u64) -> MemberRng {
        let mut stream = ChaCha8Rng::seed_from_u64(seed);
        stream.set_stream(member);
        MemberRng { stream }
    }

    /// The stream of instance `k` of a fork (`join`, `map`, `pfor`), as
    /// JAX splits a key: the forking stream draws four words, which become
    /// the ChaCha8 key of the fork, and instance `k` takes that key's stream
    /// number `k`. The forking stream advances by four words at every fork,
    /// whether or not an instance draws; [`ForkKey::instance`] gives the
    /// instances' streams.
    pub fn fork(&mut self) -> ForkKey {
        let mut key = [0u8; 32];
        for chunk in key.chunks_exact_mut(8) {
            chunk.copy_from_slice(&self.stream.next_u64().to_le_bytes());
        }
        ForkKey { key }
    }

    /// A draw from U\[0, 1): the top 53 bits of one 64-bit word, scaled, so
    /// every value is a multiple of 2^-53 and 1.0 is never drawn.
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        (self.stream.next_u64() >> 11) as f64 * SCALE
    }

    /// A draw from N(0, 1) (`rand_distr::StandardNormal`).
    #[inline]
    pub fn normal(&mut self) -> f64 {
        StandardNormal.sample(&mut self.stream)
    }

    /// `true` with probability `p`, as `uniform() < p`: one uniform draw
    /// whatever `p` is, so `p <= 0` (and NaN) always gives `false` and
    /// `p >= 1` always `true`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// `count` uniform draws in the float type `F`, drawn as `f64` and then
    /// narrowed. Narrowing to `f32` can round a draw just below 1 up to 1.0;
    /// such a draw becomes the largest `F` below 1, so draws stay in \[0, 1).
    pub fn uniform_vec<F: Float>(&mut self, count: usize) -> Vec<F> {
        let mut out = vec![F::ZERO; count];
        self.uniform_into(&mut out);
        out
    }

    /// Fills `out` with uniform draws, in order, as [`uniform_vec`](Self::uniform_vec) does.
    pub fn uniform_into<F: Float>(&mut self, out: &mut [F]) {
        for o in out {
            let narrowed = F::from_f64(self.uniform());
            *o = if narrowed >= F::ONE {
                F::LARGEST_BELOW_ONE
            } else {
                narrowed
            };
        }
    }

    /// `count` normal draws in the float type `F` (drawn as `f64`, then narrowed).
    pub fn normal_vec<F: Float>(&mut self, count: usize) -> Vec<F> {
        let mut out = vec![F::ZERO; count];
        self.normal_into(&mut out);
        out
    }

    /// Fills `out` with normal draws, in order, as [`normal_vec`](Self::normal_vec) does.
    pub fn normal_into<F: Float>(&mut self, out: &mut [F]) {
        for o in out {
            *o = F::from_f64(self.normal());
        }
    }
}

/// The key a fork drew from its parent's stream (see [`MemberRng::fork`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForkKey {
    key: [u8; 32],
}

impl ForkKey {
    /// The stream of instance `k`.
    pub fn instance(&self, k: u64) -> MemberRng {
        let mut stream = ChaCha8Rng::from_seed(self.key);
        stream.set_stream(k);
        MemberRng { stream }
    }
}

/// A random primitive, for [`draw_rows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draw {
    /// `uniform()`: one `f64` from U\[0, 1) per row.
    Uniform,
    /// `normal()`: one `f64` from N(0, 1) per row.
    Normal,
    /// `bernoulli(p)`: one `bool` per row, `p` an `f64` per row or shared.
    Bernoulli,
    /// `uniform_like(x)`: a row of U\[0, 1) draws in the row's float type.
    UniformLike,
    /// `normal_like(x)`: a row of N(0, 1) draws in the row's float type.
    NormalLike,
}

/// The random streams of a batch, by row: row `r` draws from
/// `rngs[member_of(r)]`.
pub struct Streams<'a> {
    pub rngs: &'a mut [MemberRng],
    pub member_of: &'a dyn Fn(u32) -> usize,
}

impl Streams<'_> {
    /// The stream row `r` draws from.
    #[inline]
    pub fn of(&mut self, r: u32) -> &mut MemberRng {
        &mut self.rngs[(self.member_of)(r)]
    }
}

/// Each row `r` of `rows` draws from its member's stream into row `r` of
/// `out` (the whole column; the other rows are left alone), in the order
/// the per-member primitives draw: what `uniform()`, `normal()`,
/// `bernoulli(p)` (`p` read at row `r`), `uniform_like(x)` and
/// `normal_like(x)` give that member.
pub fn draw_rows(
    draw: Draw,
    p: Option<Rows<'_>>,
    rows: &[u32],
    streams: &mut Streams<'_>,
    out: RowsMut<'_>,
) {
    let n = out.row_len;
    match (draw, out.values) {
        (Draw::Uniform, ValuesMut::F64(out)) if n == 1 => {
            for &r in rows {
                out[r as usize] = streams.of(r).uniform();
            }
        }
        (Draw::Normal, ValuesMut::F64(out)) if n == 1 => {
            for &r in rows {
                out[r as usize] = streams.of(r).normal();
            }
        }
        (Draw::Bernoulli, ValuesMut::Bool(out)) if n == 1 => {
            let Some(p) = p else {
                internal_error("bernoulli without its probability".to_string())
            };
            for &r in rows {
                let Values::F64(&[p]) = p.row(r as usize) else {
                    internal_error(format!("bernoulli of a {} probability", p.ty()))
                };
                out[r as usize] = streams.of(r).bernoulli(p);
            }
        }
        (Draw::UniformLike, ValuesMut::F32(out)) => like_rows(rows, streams, n, out, true),
        (Draw::UniformLike, ValuesMut::F64(out)) => like_rows(rows, streams, n, out, true),
        (Draw::NormalLike, ValuesMut::F32(out)) => like_rows(rows, streams, n, out, false),
        (Draw::NormalLike, ValuesMut::F64(out)) => like_rows(rows, streams, n, out, false),
        (draw, out) => internal_error(format!(
            "{draw:?} into rows of {n} elements of {}",
            out.ty()
        )),
    }
}

/// `uniform_like` (or `normal_like`) into each row of `rows`.
fn like_rows<F: Float>(
    rows: &[u32],
    streams: &mut Streams<'_>,
    n: usize,
    out: &mut [F],
    uniform: bool,
) {
    for &r in rows {
        let row = &mut out[r as usize * n..(r as usize + 1) * n];
        let rng = streams.of(r);
        if uniform {
            rng.uniform_into(row);
        } else {
            rng.normal_into(row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniforms(rng: &mut MemberRng, n: usize) -> Vec<f64> {
        (0..n).map(|_| rng.uniform()).collect()
    }

    #[test]
    fn same_seed_and_member_give_the_same_stream() {
        let a = uniforms(&mut MemberRng::new(42, 3), 20);
        let b = uniforms(&mut MemberRng::new(42, 3), 20);
        assert_eq!(a, b);
        let mut x = MemberRng::new(1, 0);
        let mut y = MemberRng::new(1, 0);
        for _ in 0..10 {
            assert_eq!(x.normal().to_bits(), y.normal().to_bits());
        }
    }

    #[test]
    fn different_members_or_seeds_give_different_streams() {
        let base = uniforms(&mut MemberRng::new(42, 3), 8);
        assert_ne!(base, uniforms(&mut MemberRng::new(42, 4), 8));
        assert_ne!(base, uniforms(&mut MemberRng::new(43, 3), 8));
        assert_ne!(
            uniforms(&mut MemberRng::new(0, 0), 8),
            uniforms(&mut MemberRng::new(0, 1), 8)
        );
    }

    #[test]
    fn a_stream_does_not_depend_on_other_streams() {
        let alone = uniforms(&mut MemberRng::new(7, 5), 16);
        // Interleave draws of other members with member 5's draws.
        let mut others: Vec<MemberRng> = (0..5).map(|m| MemberRng::new(7, m)).collect();
        let mut member5 = MemberRng::new(7, 5);
        let mut interleaved = Vec::new();
        for _ in 0..16 {
            for o in &mut others {
                o.normal();
                o.uniform();
            }
            interleaved.push(member5.uniform());
        }
        assert_eq!(alone, interleaved);
    }

    #[test]
    fn uniform_draws_are_in_the_unit_interval() {
        let mut rng = MemberRng::new(9, 9);
        let draws = uniforms(&mut rng, 10_000);
        assert!(draws.iter().all(|&u| (0.0..1.0).contains(&u)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert!(draws
            .iter()
            .all(|&u| (u * (1u64 << 53) as f64).fract() == 0.0));
    }

    #[test]
    fn normal_draws_have_unit_moments() {
        let mut rng = MemberRng::new(11, 2);
        let draws: Vec<f64> = (0..20_000).map(|_| rng.normal()).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / draws.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
    }

    #[test]
    fn bernoulli_is_uniform_below_p() {
        let mut a = MemberRng::new(5, 1);
        let mut b = MemberRng::new(5, 1);
        for p in [0.0, 0.3, 0.5, 0.9, 1.0] {
            assert_eq!(a.bernoulli(p), b.uniform() < p);
        }
        let mut rng = MemberRng::new(5, 2);
        assert!((0..100).all(|_| !rng.bernoulli(0.0)));
        assert!((0..100).all(|_| !rng.bernoulli(-3.0)));
        assert!((0..100).all(|_| !rng.bernoulli(f64::NAN)));
        assert!((0..100).all(|_| rng.bernoulli(1.0)));
        assert!((0..100).all(|_| rng.bernoulli(2.0)));
        let hits = (0..10_000).filter(|_| rng.bernoulli(0.25)).count();
        assert!((2300..2700).contains(&hits), "{hits}");
    }

    #[test]
    fn narrowed_uniform_draws_stay_below_one() {
        const { assert!(<f32 as Float>::LARGEST_BELOW_ONE < 1.0) };
        assert_eq!(
            (<f32 as Float>::LARGEST_BELOW_ONE as f64 + f32::EPSILON as f64 / 2.0),
            1.0
        );
        assert_eq!(
            ((1.0 - f64::EPSILON / 2.0) as f32),
            1.0,
            "the case being guarded"
        );
        assert_eq!(<f64 as Float>::LARGEST_BELOW_ONE, 1.0 - f64::EPSILON / 2.0);
    }

    #[test]
    fn vectors_of_draws_narrow_f64_draws() {
        let mut a = MemberRng::new(3, 3);
        let mut b = MemberRng::new(3, 3);
        let narrow: Vec<f32> = a.uniform_vec(5);
        let wide: Vec<f64> = b.uniform_vec(5);
        assert_eq!(narrow, wide.iter().map(|&x| x as f32).collect::<Vec<_>>());
        let narrow: Vec<f32> = a.normal_vec(5);
        let wide: Vec<f64> = b.normal_vec(5);
        assert_eq!(narrow, wide.iter().map(|&x| x as f32).collect::<Vec<_>>());
    }

    #[test]
    fn a_fork_takes_four_words_and_gives_each_instance_its_own_stream() {
        let mut parent = MemberRng::new(7, 2);
        let mut twin = MemberRng::new(7, 2);
        let key = parent.fork();
        let words: Vec<u64> = (0..4).map(|_| twin.stream.next_u64()).collect();
        let mut bytes = [0u8; 32];
        for (chunk, w) in bytes.chunks_exact_mut(8).zip(&words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        assert_eq!(key, ForkKey { key: bytes });
        // The parent goes on after the four words, whatever the instances do.
        assert_eq!(parent.uniform(), twin.uniform());
        // Instance k is the key's stream k: distinct, and reproducible.
        let draws: Vec<f64> = (0..3).map(|k| key.instance(k).uniform()).collect();
        assert_ne!(draws[0], draws[1]);
        assert_ne!(draws[1], draws[2]);
        assert_eq!(draws[1], key.instance(1).uniform());
        let mut direct = ChaCha8Rng::from_seed(bytes);
        direct.set_stream(2);
        assert_eq!(
            draws[2],
            (direct.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        );
        // Two forks of one stream differ.
        assert_ne!(parent.fork(), key);
    }
}
