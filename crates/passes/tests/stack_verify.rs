//! The verifier of the explicit-stack form accepts what the lowering makes
//! and rejects each kind of broken form, among them the one the lowering
//! made before the pop/push fusion was fixed (a `pop` removed although the
//! next call's argument copy reads the variable).

use autobatch_passes::stack::{
    lower_to_stack, verify_lowered, LoweredOp, LoweredProgram, PcBlock, VarClass,
};
use autobatch_passes::uniformity::Invariance;

const MUTUAL: &str = "
fn f(n: i64) -> i64 { if n <= 0 { 1 } else { let a = g(n - 1); let b = g(n); a + b + n } }
fn g(n: i64) -> i64 { if n <= 0 { 2 } else { f(n - 1) * 1 } }
";

fn lowered(source: &str) -> LoweredProgram {
    let mut program = autobatch_lower::compile(source).expect("compiles");
    autobatch_passes::optimize(&mut program);
    let entry = autobatch_ir::FuncId(0);
    let batched = vec![false; program.functions[entry].params.len()];
    let invariance = Invariance::compute(&program, entry, &batched);
    lower_to_stack(&program, &invariance)
}

/// The verifier's messages for `program`, which must be rejected.
fn rejected(program: &LoweredProgram) -> String {
    match verify_lowered(program) {
        Ok(()) => panic!("the verifier accepted a broken form"),
        Err(errors) => errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The first block holding an operation that `is` picks, and its position.
fn find_op(program: &LoweredProgram, is: impl Fn(&LoweredOp) -> bool) -> (PcBlock, usize) {
    program
        .blocks
        .iter()
        .find_map(|(pc, b)| b.ops.iter().position(&is).map(|k| (pc, k)))
        .expect("the operation exists")
}

#[test]
fn the_lowering_of_a_mutual_recursion_verifies() {
    verify_lowered(&lowered(MUTUAL)).expect("valid");
}

#[test]
fn a_restore_removed_before_an_argument_copy_is_rejected() {
    // What the fusion did before: `pop n ... push n` removed although
    // `g.n = copy n` reads `n` after the push.
    let mut program = lowered(MUTUAL);
    let (pc, k) = find_op(&program, |op| matches!(op, LoweredOp::Peek(_)));
    program.blocks[pc].ops.remove(k);
    let message = rejected(&program);
    assert!(
        message.contains("reads x0 (n)") && message.contains("overwritten by a call"),
        "{message}"
    );
}

#[test]
fn a_missing_pop_leaves_the_stack_unbalanced() {
    let mut program = lowered(MUTUAL);
    let (pc, k) = find_op(&program, |op| matches!(op, LoweredOp::Pop(_)));
    program.blocks[pc].ops.remove(k);
    let message = rejected(&program);
    assert!(
        message.contains("a push or pop is unbalanced") || message.contains("return leaves pushed"),
        "{message}"
    );
}

#[test]
fn a_pop_of_the_callers_value_is_rejected() {
    let mut program = lowered(MUTUAL);
    let full = program
        .vars
        .iter()
        .find(|(_, v)| v.class == VarClass::Full)
        .map(|(x, _)| x)
        .unwrap();
    let entry = program.functions[autobatch_ir::FuncId(0)].entry;
    program.blocks[entry].ops.insert(0, LoweredOp::Pop(full));
    let message = rejected(&program);
    assert!(
        message.contains("nothing pushed in this activation"),
        "{message}"
    );
}

#[test]
fn a_push_of_a_variable_without_a_stack_is_rejected() {
    let mut program = lowered(MUTUAL);
    let register = program
        .vars
        .iter()
        .find(|(_, v)| v.class == VarClass::Register && v.var.is_some())
        .map(|(x, _)| x)
        .unwrap();
    let entry = program.functions[autobatch_ir::FuncId(0)].entry;
    program.blocks[entry]
        .ops
        .insert(0, LoweredOp::Push(register));
    let message = rejected(&program);
    assert!(message.contains("which has no stack"), "{message}");
}

#[test]
fn a_temporary_read_in_another_block_is_rejected() {
    // `fib`'s `n - 2` is a temporary of its block; read it in the continuation.
    let mut program =
        lowered("fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }");
    let temporary = program
        .vars
        .iter()
        .find(|(_, v)| v.class == VarClass::Temporary)
        .map(|(x, _)| x)
        .unwrap();
    let (pc, _) = find_op(&program, |op| matches!(op, LoweredOp::Pop(_)));
    program.blocks[pc].ops.push(LoweredOp::Push(temporary));
    let message = rejected(&program);
    assert!(
        message.contains("a temporary not written earlier"),
        "{message}"
    );
}
