//! The Cholesky factorization and triangular solves, for one member:
//! `cholesky_decompose` (with its domain checks), `mdivide_left_tri_low`,
//! the solve with the transposed factor, the lower triangle, and the
//! reverse-mode adjoint of the factorization. Float operands only, computed
//! in `f64` in a fixed order (one member's result never depends on others)
//! and rounded once for `f32`.

use autobatch_types::{Data, Tensor};

use crate::{internal_error, Fault};

/// Stan's tolerance of asymmetry: `|a[i][j] - a[j][i]|` at most this.
const SYMMETRY_TOLERANCE: f64 = 1e-8;

/// A float tensor's values as `f64`.
fn values(what: &str, t: &Tensor) -> Vec<f64> {
    match &t.data {
        Data::F64(v) => v.clone(),
        Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        other => internal_error(format!("{what} needs floats, got {}", other.ty())),
    }
}

/// `f64` values back in the type of `like`, with `shape`.
fn tensor_like(like: &Tensor, shape: Vec<usize>, v: Vec<f64>) -> Tensor {
    let data = match like.data {
        Data::F32(_) => Data::F32(v.into_iter().map(|x| x as f32).collect()),
        _ => Data::F64(v),
    };
    Tensor::new(shape, data)
}

/// The order `K` of a square matrix operand.
fn order(what: &str, t: &Tensor) -> usize {
    match t.shape[..] {
        [m, k] if m == k => k,
        _ => internal_error(format!("{what} needs a square matrix, got {:?}", t.shape)),
    }
}

/// The lower Cholesky factor `L` of a symmetric positive definite `a`
/// (`L Lᵀ = a`), reading `a`'s lower triangle; a `domain_error` if `a` is
/// not symmetric (to 1e-8) or not positive definite.
pub fn cholesky(a: &Tensor) -> Result<Tensor, Fault> {
    let k = order("cholesky_decompose", a);
    let a_values = values("cholesky_decompose", a);
    let l = cholesky_values(&a_values, k)?;
    Ok(tensor_like(a, a.shape.clone(), l))
}

/// [`cholesky`] on row-major `f64` values of order `k`.
pub fn cholesky_values(a: &[f64], k: usize) -> Result<Vec<f64>, Fault> {
    for i in 0..k {
        for j in 0..i {
            let (x, y) = (a[i * k + j], a[j * k + i]);
            if (x - y).abs() > SYMMETRY_TOLERANCE || x.is_nan() || y.is_nan() {
                return Err(Fault::domain_error(
                    "Cholesky factorization: the matrix is not symmetric",
                ));
            }
        }
    }
    let mut l = vec![0.0; k * k];
    for j in 0..k {
        let row_j = &l[j * k..j * k + j];
        let mut s = a[j * k + j];
        for x in row_j {
            s -= x * x;
        }
        if !(s > 0.0 && s.is_finite()) {
            return Err(Fault::domain_error(
                "Cholesky factorization: the matrix is not positive definite",
            ));
        }
        let d = s.sqrt();
        l[j * k + j] = d;
        for i in j + 1..k {
            let (above, below) = l.split_at_mut(i * k);
            let row_j = &above[j * k..j * k + j];
            let mut t = a[i * k + j];
            for (x, y) in below[..j].iter().zip(row_j) {
                t -= x * y;
            }
            below[j] = t / d;
        }
    }
    Ok(l)
}

/// The columns of `b` (`[K]` or `[K, M]`): `(K, M)`.
fn columns(what: &str, b: &Tensor, k: usize) -> usize {
    match b.shape[..] {
        [n] if n == k => 1,
        [n, m] if n == k => m,
        _ => internal_error(format!(
            "{what}: a right-hand side of shape {:?} for order {k}",
            b.shape
        )),
    }
}

/// `L⁻¹ b` for the lower triangle of `l` (`mdivide_left_tri_low`), `b` a
/// vector or a matrix: forward substitution, column by column.
pub fn tri_solve(l: &Tensor, b: &Tensor) -> Tensor {
    let k = order("mdivide_left_tri_low", l);
    let m = columns("mdivide_left_tri_low", b, k);
    let mut x = values("mdivide_left_tri_low", b);
    forward_substitute(&values("mdivide_left_tri_low", l), k, &mut x, m);
    tensor_like(b, b.shape.clone(), x)
}

/// `L⁻ᵀ b` for the lower triangle of `l`: back substitution.
pub fn tri_solve_transposed(l: &Tensor, b: &Tensor) -> Tensor {
    let k = order("tri_solve_t", l);
    let m = columns("tri_solve_t", b, k);
    let mut x = values("tri_solve_t", b);
    back_substitute(&values("tri_solve_t", l), k, &mut x, m);
    tensor_like(b, b.shape.clone(), x)
}

/// Solves `L x = b` in place (`x` holds `b`, `k x m` row-major). Row `i`
/// of `x` is `b`'s row less `l[i][p]` times each solved row `p < i`, in
/// that order, then divided by `l[i][i]`: each element takes the steps of
/// a scalar substitution, all the columns of a row at once.
fn forward_substitute(l: &[f64], k: usize, x: &mut [f64], m: usize) {
    for i in 0..k {
        let (solved, rest) = x.split_at_mut(i * m);
        let row = &mut rest[..m];
        let l_row = &l[i * k..i * k + i];
        for (&lip, solved_row) in l_row.iter().zip(solved.chunks_exact(m)) {
            subtract_multiple(row, lip, solved_row);
        }
        divide(row, l[i * k + i]);
    }
}

/// Solves `Lᵀ x = b` in place (`x` holds `b`, `k x m` row-major): row `i`
/// less `l[p][i]` times each solved row `p > i`, in ascending `p`, then
/// divided by `l[i][i]`.
fn back_substitute(l: &[f64], k: usize, x: &mut [f64], m: usize) {
    for i in (0..k).rev() {
        let (head, solved) = x.split_at_mut((i + 1) * m);
        let row = &mut head[i * m..];
        for (p, solved_row) in (i + 1..k).zip(solved.chunks_exact(m)) {
            subtract_multiple(row, l[p * k + i], solved_row);
        }
        divide(row, l[i * k + i]);
    }
}

/// `row[c] -= a * other[c]` for every column: a product, then a difference.
fn subtract_multiple(row: &mut [f64], a: f64, other: &[f64]) {
    for (r, o) in row.iter_mut().zip(other) {
        *r -= a * o;
    }
}

/// `row[c] /= d` for every column.
fn divide(row: &mut [f64], d: f64) {
    for r in row {
        *r /= d;
    }
}

/// The lower triangle of a square matrix (the diagonal included), zeros above.
pub fn tril(a: &Tensor) -> Tensor {
    let k = order("tril", a);
    let mut v = values("tril", a);
    for i in 0..k {
        for j in i + 1..k {
            v[i * k + j] = 0.0;
        }
    }
    tensor_like(a, a.shape.clone(), v)
}

/// The diagonal of a square matrix.
pub fn diagonal(a: &Tensor) -> Tensor {
    let k = order("diagonal", a);
    let v = values("diagonal", a);
    tensor_like(a, vec![k], (0..k).map(|i| v[i * k + i]).collect())
}

/// The square matrix with `v` on its diagonal and zeros elsewhere.
pub fn diag_matrix(v: &Tensor) -> Tensor {
    let k = match v.shape[..] {
        [k] => k,
        _ => internal_error(format!("diag_matrix needs a vector, got {:?}", v.shape)),
    };
    let d = values("diag_matrix", v);
    let mut out = vec![0.0; k * k];
    for (i, x) in d.into_iter().enumerate() {
        out[i * k + i] = x;
    }
    tensor_like(v, vec![k, k], out)
}

/// The adjoint of `a` in `L = cholesky(a)`, given `L` and the adjoint `dl`
/// of `L`: with `P` the lower triangle of `Lᵀ dl` with its diagonal
/// halved, `S = L⁻ᵀ P L⁻¹`, the symmetric `(S + Sᵀ) / 2`.
pub fn cholesky_adjoint(l: &Tensor, dl: &Tensor) -> Tensor {
    let k = order("cholesky_adjoint", l);
    let (lv, dv) = (
        values("cholesky_adjoint", l),
        values("cholesky_adjoint", dl),
    );
    // P = Φ(Lᵀ dl): only the lower triangle of L and dl count. Each
    // element sums its terms in ascending `r`, a row's elements at once.
    let mut p = vec![0.0; k * k];
    for i in 0..k {
        let row = &mut p[i * k..i * k + i + 1];
        for r in i..k {
            let a = lv[r * k + i];
            for (s, d) in row.iter_mut().zip(&dv[r * k..r * k + i + 1]) {
                *s += a * d;
            }
        }
        row[i] *= 0.5;
    }
    tensor_like(l, l.shape.clone(), adjoint_of_p(&lv, k, p))
}

/// The Cholesky adjoint from `P = Φ(Lᵀ dl)`: `Y = L⁻ᵀ P`, then
/// `Sᵀ = L⁻ᵀ Yᵀ`, symmetrized.
fn adjoint_of_p(lv: &[f64], k: usize, mut p: Vec<f64>) -> Vec<f64> {
    back_substitute(lv, k, &mut p, k);
    let mut yt = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            yt[j * k + i] = p[i * k + j];
        }
    }
    back_substitute(lv, k, &mut yt, k);
    let mut out = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            out[i * k + j] = 0.5 * (yt[i * k + j] + yt[j * k + i]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(k: usize, v: &[f64]) -> Tensor {
        Tensor::new(vec![k, k], Data::F64(v.to_vec()))
    }

    fn f64s(t: &Tensor) -> Vec<f64> {
        values("test", t)
    }

    #[test]
    fn factor_times_its_transpose_is_the_matrix() {
        let a = [4.0, 2.0, 0.4, 2.0, 5.0, 1.0, 0.4, 1.0, 3.0];
        let l = f64s(&cholesky(&matrix(3, &a)).unwrap());
        for i in 0..3 {
            for j in 0..3 {
                let s: f64 = (0..3).map(|p| l[i * 3 + p] * l[j * 3 + p]).sum();
                assert!((s - a[i * 3 + j]).abs() < 1e-14, "{i} {j}");
            }
        }
        assert_eq!(l[1], 0.0);
    }

    #[test]
    fn refuses_indefinite_and_asymmetric_matrices() {
        let e = cholesky(&matrix(2, &[1.0, 2.0, 2.0, 1.0])).unwrap_err();
        assert!(e.message.contains("positive definite"), "{e}");
        let e = cholesky(&matrix(2, &[1.0, 0.5, 0.4, 1.0])).unwrap_err();
        assert!(e.message.contains("symmetric"), "{e}");
        assert!(cholesky(&matrix(1, &[f64::NAN])).is_err());
    }

    /// A lower triangle with a dominant diagonal, and a `k x m` right-hand
    /// side, from a fixed sequence.
    fn triangle_and_rhs(k: usize, m: usize) -> (Vec<f64>, Vec<f64>) {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut l = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..i {
                l[i * k + j] = next();
            }
            l[i * k + i] = 1.5 + next();
        }
        let b = (0..k * m).map(|_| next()).collect();
        (l, b)
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The solves and the adjoint's products take, element by element, the
    /// steps of the scalar definitions written here (one column at a time,
    /// terms in ascending order): the same bits.
    #[test]
    fn row_at_a_time_loops_give_the_scalar_definitions_bits() {
        for (k, m) in [(1, 1), (4, 1), (11, 11), (7, 3)] {
            let (l, b) = triangle_and_rhs(k, m);
            let mut forward = b.clone();
            let mut back = b.clone();
            let (mut forward_scalar, mut back_scalar) = (b.clone(), b.clone());
            forward_substitute(&l, k, &mut forward, m);
            back_substitute(&l, k, &mut back, m);
            for c in 0..m {
                for i in 0..k {
                    let mut s = forward_scalar[i * m + c];
                    for p in 0..i {
                        s -= l[i * k + p] * forward_scalar[p * m + c];
                    }
                    forward_scalar[i * m + c] = s / l[i * k + i];
                }
                for i in (0..k).rev() {
                    let mut s = back_scalar[i * m + c];
                    for p in i + 1..k {
                        s -= l[p * k + i] * back_scalar[p * m + c];
                    }
                    back_scalar[i * m + c] = s / l[i * k + i];
                }
            }
            assert_eq!(bits(&forward), bits(&forward_scalar), "forward, {k} x {m}");
            assert_eq!(bits(&back), bits(&back_scalar), "back, {k} x {m}");
        }
        let k = 11;
        let (l, dl) = triangle_and_rhs(k, k);
        let adjoint = f64s(&cholesky_adjoint(&matrix(k, &l), &matrix(k, &dl)));
        let mut p = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..=i {
                let mut s = 0.0;
                for r in i..k {
                    s += l[r * k + i] * dl[r * k + j];
                }
                p[i * k + j] = if i == j { 0.5 * s } else { s };
            }
        }
        assert_eq!(bits(&adjoint), bits(&adjoint_of_p(&l, k, p)));
        // The factor: each element's sum in ascending order.
        let a: Vec<f64> = (0..k * k)
            .map(|n| {
                let (i, j) = (n / k, n % k);
                (0..k).map(|p| l[i * k + p] * l[j * k + p]).sum::<f64>()
            })
            .collect();
        let factor = cholesky_values(&a, k).unwrap();
        let mut scalar = vec![0.0; k * k];
        for j in 0..k {
            let mut s = a[j * k + j];
            for p in 0..j {
                s -= scalar[j * k + p] * scalar[j * k + p];
            }
            let d = s.sqrt();
            scalar[j * k + j] = d;
            for i in j + 1..k {
                let mut t = a[i * k + j];
                for p in 0..j {
                    t -= scalar[i * k + p] * scalar[j * k + p];
                }
                scalar[i * k + j] = t / d;
            }
        }
        assert_eq!(bits(&factor), bits(&scalar));
    }

    #[test]
    fn solves_invert_the_triangle() {
        let l = matrix(2, &[2.0, 9.0, 1.0, 3.0]);
        let b = Tensor::new(vec![2], Data::F64(vec![4.0, 5.0]));
        assert_eq!(f64s(&tri_solve(&l, &b)), vec![2.0, 1.0]);
        // Lᵀ = [[2, 1], [0, 3]]: x = [(4 - 5/3) / 2, 5/3].
        let x = f64s(&tri_solve_transposed(&l, &b));
        assert!((x[0] - 7.0 / 6.0).abs() < 1e-15 && (x[1] - 5.0 / 3.0).abs() < 1e-15);
        assert_eq!(f64s(&tril(&l)), vec![2.0, 0.0, 1.0, 3.0]);
    }

    #[test]
    fn adjoint_matches_central_differences() {
        // f(A) = sum(w ∘ chol(A)), perturbed symmetrically.
        let a = [4.0, 2.0, 0.4, 2.0, 5.0, 1.0, 0.4, 1.0, 3.0];
        let w = [0.3, 0.0, 0.0, -1.2, 0.7, 0.0, 2.0, 0.5, -0.4];
        let f = |a: &[f64]| -> f64 {
            let l = cholesky_values(a, 3).unwrap();
            l.iter().zip(&w).map(|(x, y)| x * y).sum()
        };
        let adjoint = f64s(&cholesky_adjoint(
            &cholesky(&matrix(3, &a)).unwrap(),
            &matrix(3, &w),
        ));
        for i in 0..3 {
            for j in 0..=i {
                let h = 1e-6;
                let moved = |t: f64| {
                    let mut m = a;
                    m[i * 3 + j] += t;
                    if i != j {
                        m[j * 3 + i] += t;
                    }
                    f(&m)
                };
                let numeric = (moved(h) - moved(-h)) / (2.0 * h);
                let analytic = if i == j {
                    adjoint[i * 3 + j]
                } else {
                    adjoint[i * 3 + j] + adjoint[j * 3 + i]
                };
                assert!(
                    (numeric - analytic).abs() < 1e-7,
                    "{i} {j}: {numeric} {analytic}"
                );
            }
        }
    }
}
