//! Optimizers with PyTorch's definitions and defaults (`torch.optim.SGD`,
//! `Adam`, `AdamW`, single-tensor form, no `amsgrad`, no `maximize`).
//! Each update is computed in the element type of its static (`f32` or
//! `f64`), element by element in order, so its bits depend on nothing but
//! the parameters, the gradient and the state.
//!
//! With gradient `g`, parameter `p`, learning rate `lr` and step `t`
//! (from 1):
//!
//! - SGD: `g += wd * p`; with momentum `mu`, `b = g` at the first step and
//!   `b = mu * b + g` after (no dampening), then `g = g + mu * b`
//!   (Nesterov) or `g = b`; `p -= lr * g`.
//! - Adam: `g += wd * p`; `m = b1 * m + (1 - b1) * g`,
//!   `v = b2 * v + (1 - b2) * g * g`;
//!   `p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
//! - AdamW: `p *= 1 - lr * wd` (decoupled weight decay), then Adam's update
//!   without the `wd * p` term.

use std::ops::{Add, Div, Mul, Sub};

use autobatch::{BoundProgram, Gradient, InputError};
use autobatch_types::{Data, Tensor};

named_kinds! {
    /// Which optimizer.
    pub enum OptimizerKind, "optimizer" {
        Sgd = "sgd",
        Adam = "adam",
        AdamW = "adamw",
    }
}

/// An optimizer and its hyperparameters. [`OptimizerConfig::new`] gives
/// PyTorch's defaults: learning rate 0.001; SGD without momentum or weight
/// decay; Adam's betas (0.9, 0.999) and eps 1e-8, weight decay 0 for Adam
/// and 0.01 for AdamW.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptimizerConfig {
    pub kind: OptimizerKind,
    pub lr: f64,
    /// SGD's momentum (0: none).
    pub momentum: f64,
    /// SGD with Nesterov momentum.
    pub nesterov: bool,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

impl OptimizerConfig {
    /// `kind` with PyTorch's defaults.
    pub fn new(kind: OptimizerKind) -> OptimizerConfig {
        OptimizerConfig {
            kind,
            lr: 1e-3,
            momentum: 0.0,
            nesterov: false,
            weight_decay: if kind == OptimizerKind::AdamW {
                1e-2
            } else {
                0.0
            },
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }

    /// Why the hyperparameters have no meaning, if they have none.
    pub fn check(&self) -> Result<(), String> {
        let finite_nonnegative = |name: &str, x: f64| {
            if x.is_finite() && x >= 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "the {name} must be a finite number at least 0, not {x}"
                ))
            }
        };
        finite_nonnegative("learning rate", self.lr)?;
        finite_nonnegative("momentum", self.momentum)?;
        finite_nonnegative("weight decay", self.weight_decay)?;
        finite_nonnegative("eps", self.eps)?;
        for (name, beta) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&beta) {
                return Err(format!("{name} must be at least 0 and below 1, not {beta}"));
            }
        }
        if self.nesterov && (self.kind != OptimizerKind::Sgd || self.momentum == 0.0) {
            return Err("Nesterov momentum needs SGD with a momentum above 0".to_owned());
        }
        if self.momentum != 0.0 && self.kind != OptimizerKind::Sgd {
            return Err(format!(
                "momentum is SGD's; {} has beta1 instead",
                self.kind
            ));
        }
        Ok(())
    }
}

/// The moments of one trained static (empty until its first update).
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    /// SGD's momentum buffer or Adam's first moment (`exp_avg`).
    pub first: Option<Tensor>,
    /// Adam's second moment (`exp_avg_sq`).
    pub second: Option<Tensor>,
}

/// An optimizer with its state: the updates made and each trained
/// static's moments.
#[derive(Clone, Debug, PartialEq)]
pub struct Optimizer {
    pub config: OptimizerConfig,
    /// The updates made so far.
    pub step: u64,
    /// One per trained static, in the order of the trained statics.
    pub moments: Vec<Moments>,
}

impl Optimizer {
    /// An optimizer of `statics` trained statics, before its first update.
    pub fn new(config: OptimizerConfig, statics: usize) -> Optimizer {
        Optimizer {
            config,
            step: 0,
            moments: vec![
                Moments {
                    first: None,
                    second: None
                };
                statics
            ],
        }
    }

    /// Updates the `names` statics of `bound` in place by `gradients` (one
    /// per name, of the static's shape and element type) at learning rate
    /// `lr`. A gradient kept to some rows ([`Gradient::Rows`]) updates
    /// those rows only: the other rows, and their moments, are left as
    /// they are (lazy updates, as DyNet's sparse updates and PyTorch's
    /// `SparseAdam`); `t` in Adam's bias corrections counts every update.
    pub fn update(
        &mut self,
        bound: &mut BoundProgram,
        names: &[String],
        gradients: &[Gradient],
        lr: f64,
    ) -> Result<(), InputError> {
        let t = self.step + 1;
        for ((name, gradient), moments) in names.iter().zip(gradients).zip(&mut self.moments) {
            let (values, shape, rows) = match gradient {
                Gradient::Dense(g) => (&g.data, &g.shape, None),
                Gradient::Rows(g) => (&g.values.data, &g.shape, Some((&g.rows[..], g.row_len()))),
            };
            match values {
                Data::F32(g) => {
                    let p = bound.static_values_mut::<f32>(name)?;
                    let touched = Touched::new(g, rows);
                    update_one(&self.config, t, lr, p, touched, moments, shape);
                }
                Data::F64(g) => {
                    let p = bound.static_values_mut::<f64>(name)?;
                    let touched = Touched::new(g, rows);
                    update_one(&self.config, t, lr, p, touched, moments, shape);
                }
                _ => unreachable!("the gradient of a float static is a float"),
            }
        }
        self.step = t;
        Ok(())
    }
}

/// The elements an update touches and their gradient: every element, or
/// whole rows (`rows[k]`'s gradient is the `k`-th `row_len` values).
struct Touched<'a, T> {
    values: &'a [T],
    rows: Option<(&'a [usize], usize)>,
}

impl<'a, T> Touched<'a, T> {
    fn new(values: &'a [T], rows: Option<(&'a [usize], usize)>) -> Touched<'a, T> {
        Touched { values, rows }
    }

    /// Each run of touched elements: its range in the static and its
    /// gradient, in order.
    fn segments(&self) -> Vec<(std::ops::Range<usize>, &'a [T])> {
        match self.rows {
            None => vec![(0..self.values.len(), self.values)],
            Some((rows, n)) => rows
                .iter()
                .zip(self.values.chunks_exact(n))
                .map(|(&row, g)| (row * n..(row + 1) * n, g))
                .collect(),
        }
    }
}

/// The element types an update is computed in.
pub trait Float:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
{
    fn of(x: f64) -> Self;
    fn sqrt(self) -> Self;
    fn zeros(n: usize) -> Data;
    fn values(data: &mut Data) -> &mut [Self];
}

impl Float for f32 {
    fn of(x: f64) -> f32 {
        x as f32
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn zeros(n: usize) -> Data {
        Data::F32(vec![0.0; n])
    }
    fn values(data: &mut Data) -> &mut [f32] {
        match data {
            Data::F32(v) => v,
            _ => unreachable!("moments have their static's element type"),
        }
    }
}

impl Float for f64 {
    fn of(x: f64) -> f64 {
        x
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn zeros(n: usize) -> Data {
        Data::F64(vec![0.0; n])
    }
    fn values(data: &mut Data) -> &mut [f64] {
        match data {
            Data::F64(v) => v,
            _ => unreachable!("moments have their static's element type"),
        }
    }
}

/// The moment tensor `slot` holds, made of zeros first.
fn moment<'a, T: Float>(slot: &'a mut Option<Tensor>, shape: &[usize], n: usize) -> &'a mut [T] {
    let tensor = slot.get_or_insert_with(|| Tensor::new(shape.to_vec(), T::zeros(n)));
    T::values(&mut tensor.data)
}

/// One static's update at step `t` (from 1), of the elements `touched`
/// gives a gradient for.
fn update_one<T: Float>(
    config: &OptimizerConfig,
    t: u64,
    lr: f64,
    p: &mut [T],
    touched: Touched<'_, T>,
    moments: &mut Moments,
    shape: &[usize],
) {
    let n = p.len();
    let wd = T::of(config.weight_decay);
    let decay = |g: T, p: T| {
        if config.weight_decay != 0.0 {
            g + wd * p
        } else {
            g
        }
    };
    match config.kind {
        OptimizerKind::Sgd => {
            let mu = T::of(config.momentum);
            let first_step = moments.first.is_none();
            let mut buffer =
                (config.momentum != 0.0).then(|| moment::<T>(&mut moments.first, shape, n));
            let step = T::of(lr);
            for (range, g) in touched.segments() {
                let p = &mut p[range.clone()];
                match buffer.as_deref_mut() {
                    None => {
                        for (p, &g) in p.iter_mut().zip(g) {
                            *p = *p - step * decay(g, *p);
                        }
                    }
                    Some(b) => {
                        for ((p, &g), b) in p.iter_mut().zip(g).zip(b[range].iter_mut()) {
                            let g = decay(g, *p);
                            *b = if first_step { g } else { mu * *b + g };
                            let d = if config.nesterov { g + mu * *b } else { *b };
                            *p = *p - step * d;
                        }
                    }
                }
            }
        }
        OptimizerKind::Adam | OptimizerKind::AdamW => {
            let decoupled = config.kind == OptimizerKind::AdamW;
            let (b1, b2) = (config.beta1, config.beta2);
            let step_size = T::of(lr / (1.0 - b1.powi(t as i32)));
            let correction2 = T::of((1.0 - b2.powi(t as i32)).sqrt());
            let (one_b1, one_b2) = (T::of(1.0 - b1), T::of(1.0 - b2));
            let (b1, b2, eps) = (T::of(b1), T::of(b2), T::of(config.eps));
            let shrink = T::of(1.0 - lr * config.weight_decay);
            let m = moment::<T>(&mut moments.first, shape, n);
            let v = moment::<T>(&mut moments.second, shape, n);
            for (range, g) in touched.segments() {
                let (p, m) = (&mut p[range.clone()], &mut m[range.clone()]);
                let v = &mut v[range];
                for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                    let g = if decoupled {
                        *p = *p * shrink;
                        g
                    } else {
                        decay(g, *p)
                    };
                    *m = b1 * *m + one_b1 * g;
                    *v = b2 * *v + one_b2 * g * g;
                    let denominator = v.sqrt() / correction2 + eps;
                    *p = *p - step_size * (*m / denominator);
                }
            }
        }
    }
}
