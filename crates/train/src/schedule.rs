//! Learning-rate schedules: the factor the base learning rate is multiplied
//! by at each optimizer step, as Hugging Face's `transformers` defines
//! them (`get_constant_schedule_with_warmup`,
//! `get_linear_schedule_with_warmup`, `get_cosine_schedule_with_warmup`).
//!
//! Steps count from 0 (the first update is step 0). During the warmup
//! (`step < warmup`) the factor is `step / warmup`, so the first update of
//! a warmup has learning rate 0; after it:
//!
//! - constant: 1;
//! - linear: `max(0, (total - step) / max(1, total - warmup))`, reaching 0
//!   at the last step's end;
//! - cosine: `max(0, (1 + cos(pi * p)) / 2)` with
//!   `p = (step - warmup) / max(1, total - warmup)`.

named_kinds! {
    /// The shape of a schedule after its warmup.
    pub enum ScheduleKind, "schedule" {
        Constant = "constant",
        Linear = "linear",
        Cosine = "cosine",
    }
}

/// A learning-rate schedule over `total` optimizer steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    pub kind: ScheduleKind,
    /// The steps of linear warmup from 0 (none: 0).
    pub warmup: u64,
    /// The steps of the whole run.
    pub total: u64,
}

impl Schedule {
    /// The factor of the base learning rate at `step` (from 0).
    pub fn factor(&self, step: u64) -> f64 {
        if step < self.warmup {
            return step as f64 / self.warmup.max(1) as f64;
        }
        let after = (step - self.warmup) as f64;
        let span = self.total.saturating_sub(self.warmup).max(1) as f64;
        match self.kind {
            ScheduleKind::Constant => 1.0,
            ScheduleKind::Linear => ((span - after) / span).max(0.0),
            ScheduleKind::Cosine => {
                let progress = after / span;
                (0.5 * (1.0 + (std::f64::consts::PI * progress).cos())).max(0.0)
            }
        }
    }
}
