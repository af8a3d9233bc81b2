//! The run's copies of the statics ([`StaticPool`]), lent to the slots of
//! the activations that load them, and the hooks that lend them
//! ([`Lending`]).

use super::*;

/// The run's copies of the statics, each lent to at most one slot at a
/// time. A copy is made only when every copy of the static is lent, so
/// there are never more copies of a static than one activation holds at once.
pub(super) struct StaticPool<'a> {
    pub(super) statics: &'a [Tensor],
    /// Per static, its copies that no slot holds.
    pub(super) idle: Vec<Vec<Tensor>>,
}

/// A slot of an activation holding a static lent by the [`StaticPool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Loan {
    pub(super) slot: usize,
    pub(super) id: usize,
}

impl StaticPool<'_> {
    /// A copy of static `id` (made when every copy is lent), or `None` if
    /// there is no such static.
    pub(super) fn lend(&mut self, id: usize) -> Option<Tensor> {
        let idle = self.idle.get_mut(id)?.pop();
        idle.or_else(|| self.statics.get(id).cloned())
    }

    /// Takes the loans of `loans` back from `slots`, which become unassigned.
    pub(super) fn take_back(&mut self, slots: &mut [Slot], loans: &[Loan]) {
        for loan in loans {
            if let Slot::Invariant(value @ Some(_)) = &mut slots[loan.slot] {
                self.idle[loan.id].extend(value.take());
            }
        }
    }

    /// Lends the statics of `loans` to their slots again.
    pub(super) fn lend_again(&mut self, slots: &mut [Slot], loans: &[Loan]) {
        for loan in loans {
            slots[loan.slot] = Slot::Invariant(self.lend(loan.id));
        }
    }

    /// Before `slot` is written: if it holds a loan, takes it back.
    pub(super) fn before_write(&mut self, slots: &mut [Slot], loans: &mut Vec<Loan>, slot: usize) {
        if let Some(k) = loans.iter().position(|l| l.slot == slot) {
            let loan = loans.swap_remove(k);
            self.take_back(slots, &[loan]);
        }
    }

    /// Runs `dst = load_static` by lending the static to the invariant slot
    /// `dst`; false (nothing done) for any other operation.
    pub(super) fn load(
        &mut self,
        prim: &Prim,
        dst: Option<usize>,
        slots: &mut [Slot],
        loans: &mut Vec<Loan>,
    ) -> bool {
        let (Prim::LoadStatic(id), Some(slot)) = (prim, dst) else {
            return false;
        };
        if !matches!(slots[slot], Slot::Invariant(_)) {
            return false;
        }
        let id = id.0 as usize;
        let Some(copy) = self.lend(id) else {
            return false;
        };
        slots[slot] = Slot::Invariant(Some(copy));
        loans.push(Loan { slot, id });
        true
    }
}

/// The hooks of an activation's steps: statics are lent by the pool.
pub(super) struct Lending<'s, 'a> {
    pub(super) statics: &'s mut StaticPool<'a>,
    pub(super) loans: &'s mut Vec<Loan>,
}

impl StepHooks for Lending<'_, '_> {
    fn before_write(&mut self, slots: &mut [Slot], slot: usize) {
        self.statics.before_write(slots, self.loans, slot);
    }

    fn run_instead(&mut self, prim: &Prim, dst: Option<usize>, slots: &mut [Slot]) -> bool {
        self.statics.load(prim, dst, slots, self.loans)
    }
}
