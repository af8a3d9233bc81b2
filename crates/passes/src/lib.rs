//! Analyses and transformations of the CFG IR that every executor shares.
//!
//! [`optimize`] is the pipeline run between lowering and execution; what it
//! does is part of the meaning of a program (a self tail call does not grow
//! the stack), so every executor runs its output.
//!
//! This crate must not know about syntax or about how a strategy executes:
//! it reads and rewrites IR only.

pub mod hoist;
pub mod last_reads;
pub mod member;
pub mod stack;
pub mod tail_calls;
pub mod uniformity;
pub mod views;

use autobatch_ir::Program;

/// The passes every program goes through before it is run, in order.
pub fn optimize(program: &mut Program) {
    tail_calls::eliminate_self_tail_calls(program);
    hoist::hoist_loop_invariants(program);
}
