//! Clipping gradients by their global norm, as PyTorch's
//! `torch.nn.utils.clip_grad_norm_` does: the norm is the Euclidean norm
//! of all the gradients' elements together, and when it exceeds the
//! bound every gradient is multiplied by `max_norm / (norm + 1e-6)`. A
//! gradient kept to some rows is given by those rows' values (the others
//! are zero: they add nothing to the norm and stay zero when scaled).

use autobatch_types::{Data, Tensor};

/// The global Euclidean norm of `gradients` (accumulated in `f64`, in
/// order: the same bits on every run).
pub fn global_norm<'a>(gradients: impl IntoIterator<Item = &'a Tensor>) -> f64 {
    let mut sum = 0.0_f64;
    for gradient in gradients {
        match &gradient.data {
            Data::F32(values) => {
                sum += values
                    .iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum::<f64>()
            }
            Data::F64(values) => sum += values.iter().map(|&x| x * x).sum::<f64>(),
            _ => {}
        }
    }
    sum.sqrt()
}

/// Scales `gradients` so that their global norm (`norm`, from
/// [`global_norm`]) is at most `max_norm`; leaves them when it is.
pub fn clip_to<'a>(gradients: impl IntoIterator<Item = &'a mut Tensor>, norm: f64, max_norm: f64) {
    let coefficient = max_norm / (norm + 1e-6);
    if coefficient >= 1.0 {
        return;
    }
    for gradient in gradients {
        match &mut gradient.data {
            Data::F32(values) => values.iter_mut().for_each(|x| *x *= coefficient as f32),
            Data::F64(values) => values.iter_mut().for_each(|x| *x *= coefficient),
            _ => {}
        }
    }
}
