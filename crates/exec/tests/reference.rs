//! Tests of the reference executor on small IR programs built by hand.
//!
//! Each program is verified with the IR verifier before it runs, so the
//! tests exercise only programs the rest of the pipeline could produce.

use autobatch_exec::{reference, Arg, Batch, Env, OpCount, RunOptions, RunOutput};
use autobatch_ir::verify::verify_program;
use autobatch_ir::{
    BinaryOp, Block, BlockData, CompareOp, EntityVec, FuncId, Function, Op, Param, Prim, Program,
    Terminator, Var, VarData,
};
use autobatch_kernels::MemberRng;
use autobatch_types::{Data, Dim, ErrorKind, Loc, Scalar, ScalarType, Tensor, TensorType, Type};

// ---------------------------------------------------------------------------
// A tiny builder of IR functions.

fn scalar_type(elem: ScalarType) -> TensorType {
    TensorType::scalar(elem)
}

fn i64_type() -> TensorType {
    scalar_type(ScalarType::I64)
}

fn loc(line: u32, column: u32) -> Loc {
    Loc::new(line, column)
}

struct FunctionBuilder {
    function: Function,
}

impl FunctionBuilder {
    /// A function with scalar or array parameters and results (no tuples).
    fn new(
        name: &str,
        params: &[(&str, TensorType)],
        results: &[TensorType],
        at: Loc,
    ) -> FunctionBuilder {
        let mut function = Function {
            name: name.to_string(),
            signature: params
                .iter()
                .map(|(n, t)| Param {
                    name: n.to_string(),
                    ty: Type::Tensor(t.clone()),
                })
                .collect(),
            ret_type: if results.len() == 1 {
                Type::Tensor(results[0].clone())
            } else {
                Type::Tuple(results.iter().cloned().map(Type::Tensor).collect())
            },
            params: Vec::new(),
            results: results.to_vec(),
            vars: EntityVec::new(),
            blocks: EntityVec::new(),
            loc: at,
        };
        for (n, t) in params {
            let v = function.vars.push(VarData {
                ty: t.clone(),
                name: Some(n.to_string()),
            });
            function.params.push(v);
        }
        FunctionBuilder { function }
    }

    fn param(&self, k: usize) -> Var {
        self.function.params[k]
    }

    fn var(&mut self, ty: TensorType) -> Var {
        self.function.vars.push(VarData { ty, name: None })
    }

    /// A new block that returns nothing until `end` sets its terminator.
    fn block(&mut self, at: Loc) -> Block {
        self.function.blocks.push(BlockData {
            ops: Vec::new(),
            term: Terminator::Return(Vec::new()),
            loc: at,
        })
    }

    fn prim(&mut self, block: Block, dst: Option<Var>, prim: Prim, args: &[Var], at: Loc) {
        self.function.blocks[block].ops.push(Op::Prim {
            dst,
            prim,
            args: args.to_vec(),
            loc: at,
        });
    }

    /// `dst = prim(args)` into a new variable of type `ty`.
    fn value(&mut self, block: Block, ty: TensorType, prim: Prim, args: &[Var], at: Loc) -> Var {
        let dst = self.var(ty);
        self.prim(block, Some(dst), prim, args, at);
        dst
    }

    fn call(&mut self, block: Block, dsts: &[Var], callee: FuncId, args: &[Var], at: Loc) {
        self.function.blocks[block].ops.push(Op::Call {
            dsts: dsts.to_vec(),
            callee,
            args: args.to_vec(),
            loc: at,
            catch: false,
        });
    }

    fn end(&mut self, block: Block, term: Terminator) {
        self.function.blocks[block].term = term;
    }

    fn finish(self) -> Function {
        self.function
    }
}

fn program_of(functions: Vec<Function>) -> Program {
    let program = Program {
        functions: functions.into_iter().collect(),
        ..Program::default()
    };
    if let Err(errors) = verify_program(&program) {
        panic!("the test program does not verify: {errors:?}");
    }
    program
}

fn i64s(values: &[i64]) -> Arg {
    Arg::Batched(
        values
            .iter()
            .map(|&v| Tensor::scalar(Scalar::I64(v)))
            .collect(),
    )
}

fn run_with(program: &Program, entry: FuncId, args: Vec<Arg>, options: &RunOptions) -> RunOutput {
    // A batch of only shared arguments has one member.
    let batched_len = |a: &Arg| match a {
        Arg::Batched(values) => Some(values.len()),
        Arg::Shared(_) => None,
    };
    let size = args.iter().find_map(batched_len).unwrap_or(1);
    reference::run(
        program,
        &Env::default(),
        &Batch { entry, size, args },
        options,
    )
}

fn ok_i64(output: &RunOutput, member: usize) -> i64 {
    match &output.results[member] {
        Ok(values) => match values[..] {
            [ref t] => match t.as_scalar() {
                Scalar::I64(v) => v,
                other => panic!("member {member}: expected an i64, got {other:?}"),
            },
            _ => panic!("member {member}: expected one result, got {}", values.len()),
        },
        Err(e) => panic!("member {member} failed: {e}"),
    }
}

fn count<'a>(output: &'a RunOutput, op: &str, at: Loc) -> &'a OpCount {
    match output
        .stats
        .op_counts
        .iter()
        .find(|c| c.op == op && c.loc == at)
    {
        Some(c) => c,
        None => panic!("no count for {op} at {at}: {:?}", output.stats.op_counts),
    }
}

// ---------------------------------------------------------------------------
// Programs.

/// ```text
/// fn sum_to(n: i64) -> i64 {          // 1:1
///     let mut s = 0; let mut i = 0;
///     while i < n {                   // 3:5, condition 3:11
///         s += i;                     // 4:9
///         i += 1;                     // 5:9
///     }
///     s                               // 7:5
/// }
/// ```
fn sum_to() -> Program {
    let mut f = FunctionBuilder::new("sum_to", &[("n", i64_type())], &[i64_type()], loc(1, 1));
    let n = f.param(0);
    let entry = f.block(loc(1, 1));
    let header = f.block(loc(3, 5));
    let body = f.block(loc(3, 17));
    let exit = f.block(loc(7, 5));
    let s = f.var(i64_type());
    let i = f.var(i64_type());
    let one = f.var(i64_type());
    let c = f.var(scalar_type(ScalarType::Bool));
    f.prim(entry, Some(s), Prim::Const(Scalar::I64(0)), &[], loc(2, 17));
    f.prim(entry, Some(i), Prim::Const(Scalar::I64(0)), &[], loc(2, 33));
    f.end(entry, Terminator::Jump(header));
    f.prim(
        header,
        Some(c),
        Prim::Compare(CompareOp::Lt),
        &[i, n],
        loc(3, 11),
    );
    f.end(
        header,
        Terminator::Branch {
            cond: c,
            then_block: body,
            else_block: exit,
        },
    );
    f.prim(
        body,
        Some(s),
        Prim::Binary(BinaryOp::Add),
        &[s, i],
        loc(4, 9),
    );
    f.prim(
        body,
        Some(one),
        Prim::Const(Scalar::I64(1)),
        &[],
        loc(5, 14),
    );
    f.prim(
        body,
        Some(i),
        Prim::Binary(BinaryOp::Add),
        &[i, one],
        loc(5, 9),
    );
    f.end(body, Terminator::Jump(header));
    f.end(exit, Terminator::Return(vec![s]));
    program_of(vec![f.finish()])
}

/// ```text
/// fn fib(n: i64) -> i64 {                                        // 1:1
///     if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) }           // 2:5 ...
/// }
/// ```
fn fib() -> Program {
    let fib_id = FuncId(0);
    let mut f = FunctionBuilder::new("fib", &[("n", i64_type())], &[i64_type()], loc(1, 1));
    let n = f.param(0);
    let entry = f.block(loc(1, 1));
    let then_block = f.block(loc(2, 15));
    let else_block = f.block(loc(2, 26));
    let one = f.value(
        entry,
        i64_type(),
        Prim::Const(Scalar::I64(1)),
        &[],
        loc(2, 13),
    );
    let c = f.value(
        entry,
        scalar_type(ScalarType::Bool),
        Prim::Compare(CompareOp::Le),
        &[n, one],
        loc(2, 8),
    );
    f.end(
        entry,
        Terminator::Branch {
            cond: c,
            then_block,
            else_block,
        },
    );
    let result = f.value(
        then_block,
        i64_type(),
        Prim::Const(Scalar::I64(1)),
        &[],
        loc(2, 17),
    );
    f.end(then_block, Terminator::Return(vec![result]));
    let two = f.value(
        else_block,
        i64_type(),
        Prim::Const(Scalar::I64(2)),
        &[],
        loc(2, 36),
    );
    let n2 = f.value(
        else_block,
        i64_type(),
        Prim::Binary(BinaryOp::Sub),
        &[n, two],
        loc(2, 32),
    );
    let a = f.var(i64_type());
    f.call(else_block, &[a], fib_id, &[n2], loc(2, 28));
    let one_again = f.value(
        else_block,
        i64_type(),
        Prim::Const(Scalar::I64(1)),
        &[],
        loc(2, 51),
    );
    let n1 = f.value(
        else_block,
        i64_type(),
        Prim::Binary(BinaryOp::Sub),
        &[n, one_again],
        loc(2, 47),
    );
    let b = f.var(i64_type());
    f.call(else_block, &[b], fib_id, &[n1], loc(2, 43));
    let sum = f.value(
        else_block,
        i64_type(),
        Prim::Binary(BinaryOp::Add),
        &[a, b],
        loc(2, 28),
    );
    f.end(else_block, Terminator::Return(vec![sum]));
    program_of(vec![f.finish()])
}

/// ```text
/// fn depth(n: i64) -> i64 {                       // 1:1
///     if n == 0 { 0 } else { depth(n - 1) + 1 }   // call at 2:28
/// }
/// ```
fn depth() -> Program {
    let mut f = FunctionBuilder::new("depth", &[("n", i64_type())], &[i64_type()], loc(1, 1));
    let n = f.param(0);
    let entry = f.block(loc(1, 1));
    let base = f.block(loc(2, 15));
    let recurse = f.block(loc(2, 26));
    let zero = f.value(
        entry,
        i64_type(),
        Prim::Const(Scalar::I64(0)),
        &[],
        loc(2, 13),
    );
    let c = f.value(
        entry,
        scalar_type(ScalarType::Bool),
        Prim::Compare(CompareOp::Eq),
        &[n, zero],
        loc(2, 8),
    );
    f.end(
        entry,
        Terminator::Branch {
            cond: c,
            then_block: base,
            else_block: recurse,
        },
    );
    f.end(base, Terminator::Return(vec![zero]));
    let one = f.value(
        recurse,
        i64_type(),
        Prim::Const(Scalar::I64(1)),
        &[],
        loc(2, 38),
    );
    let m = f.value(
        recurse,
        i64_type(),
        Prim::Binary(BinaryOp::Sub),
        &[n, one],
        loc(2, 34),
    );
    let below = f.var(i64_type());
    f.call(recurse, &[below], FuncId(0), &[m], loc(2, 28));
    let result = f.value(
        recurse,
        i64_type(),
        Prim::Binary(BinaryOp::Add),
        &[below, one],
        loc(2, 28),
    );
    f.end(recurse, Terminator::Return(vec![result]));
    program_of(vec![f.finish()])
}

// ---------------------------------------------------------------------------
// Tests.

#[test]
fn a_loop_runs_per_member() {
    let program = sum_to();
    let output = run_with(
        &program,
        FuncId(0),
        vec![i64s(&[0, 1, 5, 10])],
        &RunOptions::default(),
    );
    let sums: Vec<i64> = (0..4).map(|m| ok_i64(&output, m)).collect();
    assert_eq!(sums, vec![0, 0, 10, 45]);
    // sum_to(n) enters 2n + 3 blocks: entry, n + 1 headers, n bodies, exit.
    assert_eq!(
        output.stats.steps,
        [0, 1, 5, 10].iter().map(|n| 2 * n + 3).sum::<u64>()
    );
    let add = count(&output, "add", loc(4, 9));
    assert_eq!((add.executions, add.active_lanes), (16, 16));
    assert_eq!(count(&output, "lt", loc(3, 11)).executions, 1 + 2 + 6 + 11);
}

#[test]
fn recursive_fib_and_its_counts() {
    let program = fib();
    let inputs = [3, 7, 4, 5];
    let output = run_with(
        &program,
        FuncId(0),
        vec![i64s(&inputs)],
        &RunOptions::default(),
    );
    let results: Vec<i64> = (0..4).map(|m| ok_i64(&output, m)).collect();
    assert_eq!(results, vec![3, 21, 5, 8]);
    // Each call tree with fib(n) leaves has fib(n) - 1 additions: one per member execution.
    let add = count(&output, "add", loc(2, 28));
    assert_eq!(
        add.executions,
        results.iter().map(|r| (r - 1) as u64).sum::<u64>()
    );
    assert_eq!(add.executions, 33);
    assert_eq!(add.active_lanes, add.executions);
    // 2 fib(n) - 1 calls per member, each comparing once.
    assert_eq!(
        count(&output, "le", loc(2, 8)).executions,
        results.iter().map(|r| (2 * r - 1) as u64).sum::<u64>()
    );
    assert!((output.stats.lane_utilization - 0.25).abs() < 1e-15);
    // Constants are bookkeeping; the two subtractions are separate entries.
    assert!(output.stats.op_counts.iter().all(|c| c.op != "const"));
    let names: Vec<(&str, u32)> = output
        .stats
        .op_counts
        .iter()
        .map(|c| (c.op, c.loc.column))
        .collect();
    assert_eq!(
        names,
        vec![("le", 8), ("add", 28), ("sub", 32), ("sub", 47)]
    );
}

#[test]
fn stack_overflow_stops_only_that_member() {
    let program = depth();
    let options = RunOptions {
        max_stack_depth: 8,
        ..RunOptions::default()
    };
    // depth(n) needs n + 1 activations.
    let output = run_with(&program, FuncId(0), vec![i64s(&[3, 20, 7, 8])], &options);
    assert_eq!(ok_i64(&output, 0), 3);
    assert_eq!(ok_i64(&output, 2), 7);
    for member in [1, 3] {
        let error = output.results[member].as_ref().unwrap_err();
        assert_eq!(error.kind, ErrorKind::StackOverflow);
        assert_eq!(error.loc, loc(2, 28));
        assert_eq!(
            error.message,
            "stack depth exceeded the limit of 8 (--max-stack-depth)"
        );
    }
}

#[test]
fn deep_recursion_does_not_use_the_host_stack() {
    let program = depth();
    let options = RunOptions {
        max_stack_depth: 1_000_000,
        ..RunOptions::default()
    };
    let output = run_with(&program, FuncId(0), vec![i64s(&[200_000])], &options);
    assert_eq!(ok_i64(&output, 0), 200_000);
}

#[test]
fn a_zero_stack_limit_stops_every_member_at_the_entry() {
    let program = depth();
    let options = RunOptions {
        max_stack_depth: 0,
        ..RunOptions::default()
    };
    let output = run_with(&program, FuncId(0), vec![i64s(&[0, 1])], &options);
    for result in &output.results {
        let error = result.as_ref().unwrap_err();
        assert_eq!(
            (error.kind, error.loc),
            (ErrorKind::StackOverflow, loc(1, 1))
        );
    }
    assert_eq!(output.stats.steps, 0);
    assert_eq!(output.stats.lane_utilization, 0.0);
    assert!(
        output.stats.op_counts.iter().all(|c| c.executions == 0),
        "ops that never ran are listed with zero"
    );
    let names: Vec<&str> = output.stats.op_counts.iter().map(|c| c.op).collect();
    assert_eq!(names, vec!["eq", "add", "sub"]);
}

#[test]
fn step_limit_stops_on_entering_a_block() {
    let program = sum_to();
    // sum_to(5) needs exactly 13 steps; sum_to(6) needs 15.
    let options = RunOptions {
        max_steps: 13,
        ..RunOptions::default()
    };
    let output = run_with(
        &program,
        FuncId(0),
        vec![i64s(&[5, 6, 1_000_000_000])],
        &options,
    );
    assert_eq!(ok_i64(&output, 0), 10);
    for member in [1, 2] {
        let error = output.results[member].as_ref().unwrap_err();
        assert_eq!(error.kind, ErrorKind::StepLimit);
        // After 13 steps (entry, then header/body six times and a half) the member
        // is about to go back to the loop header.
        assert_eq!(error.loc, loc(3, 5));
        assert!(
            error.message.contains("13") && error.message.contains("--max-steps"),
            "{}",
            error.message
        );
    }
    assert_eq!(output.stats.steps, 13 * 3);
}

#[test]
fn step_limit_counts_the_entry_blocks_of_calls() {
    let program = depth();
    // depth(2) enters: entry, recurse, entry, recurse, entry, base = 6 blocks.
    let exact = RunOptions {
        max_steps: 6,
        ..RunOptions::default()
    };
    let output = run_with(&program, FuncId(0), vec![i64s(&[2])], &exact);
    assert_eq!(ok_i64(&output, 0), 2);
    assert_eq!(output.stats.steps, 6);
    let short = RunOptions {
        max_steps: 4,
        ..RunOptions::default()
    };
    let output = run_with(&program, FuncId(0), vec![i64s(&[2])], &short);
    let error = output.results[0].as_ref().unwrap_err();
    assert_eq!((error.kind, error.loc), (ErrorKind::StepLimit, loc(1, 1)));
}

#[test]
fn division_by_zero_stops_only_that_member() {
    // fn quotient(a: i64, b: i64) -> i64 { a / b }   // division at 1:40
    let mut f = FunctionBuilder::new(
        "quotient",
        &[("a", i64_type()), ("b", i64_type())],
        &[i64_type()],
        loc(1, 1),
    );
    let (a, b) = (f.param(0), f.param(1));
    let entry = f.block(loc(1, 1));
    let q = f.value(
        entry,
        i64_type(),
        Prim::Binary(BinaryOp::Div),
        &[a, b],
        loc(1, 40),
    );
    f.end(entry, Terminator::Return(vec![q]));
    let program = program_of(vec![f.finish()]);
    let args = vec![
        Arg::Shared(Tensor::scalar(Scalar::I64(12))),
        i64s(&[4, 0, -5]),
    ];
    let output = run_with(&program, FuncId(0), args, &RunOptions::default());
    assert_eq!(ok_i64(&output, 0), 3);
    assert_eq!(ok_i64(&output, 2), -2);
    let error = output.results[1].as_ref().unwrap_err();
    assert_eq!(error.kind, ErrorKind::DivisionByZero);
    assert_eq!(error.loc, loc(1, 40));
    assert_eq!(error.message, "attempt to divide by zero");
    // The faulting division still counts as executed by the member that reached it.
    assert_eq!(count(&output, "div", loc(1, 40)).executions, 3);
}

#[test]
fn a_failed_assert_stops_the_member_with_its_message() {
    // fn checked(x: i64) -> i64 { assert!(x > 0, "x must be positive"); x }
    let mut f = FunctionBuilder::new("checked", &[("x", i64_type())], &[i64_type()], loc(1, 1));
    let x = f.param(0);
    let entry = f.block(loc(1, 1));
    let zero = f.value(
        entry,
        i64_type(),
        Prim::Const(Scalar::I64(0)),
        &[],
        loc(1, 37),
    );
    let c = f.value(
        entry,
        scalar_type(ScalarType::Bool),
        Prim::Compare(CompareOp::Gt),
        &[x, zero],
        loc(1, 33),
    );
    f.prim(
        entry,
        None,
        Prim::Assert {
            message: "x must be positive".into(),
        },
        &[c],
        loc(1, 25),
    );
    f.end(entry, Terminator::Return(vec![x]));
    let program = program_of(vec![f.finish()]);
    let output = run_with(
        &program,
        FuncId(0),
        vec![i64s(&[1, -1, 0, 2])],
        &RunOptions::default(),
    );
    assert_eq!(ok_i64(&output, 0), 1);
    assert_eq!(ok_i64(&output, 3), 2);
    for member in [1, 2] {
        let error = output.results[member].as_ref().unwrap_err();
        assert_eq!(error.kind, ErrorKind::AssertionFailed);
        assert_eq!(error.message, "x must be positive");
        assert_eq!(error.loc, loc(1, 25));
    }
}

/// `fn draws(k: i64) -> (f64, f64, bool, [f64; 3]) { (uniform(), normal(), bernoulli(0.5), normal_like([0.0; 3])) }`
fn draws() -> Program {
    let f64_type = scalar_type(ScalarType::F64);
    let array_type = TensorType {
        elem: ScalarType::F64,
        dims: vec![Dim::Fixed(3)],
    };
    let results = [
        f64_type.clone(),
        f64_type.clone(),
        scalar_type(ScalarType::Bool),
        array_type.clone(),
    ];
    let mut f = FunctionBuilder::new("draws", &[("k", i64_type())], &results, loc(1, 1));
    let entry = f.block(loc(1, 1));
    let u = f.value(entry, f64_type.clone(), Prim::Uniform, &[], loc(2, 6));
    let n = f.value(entry, f64_type.clone(), Prim::Normal, &[], loc(2, 17));
    let half = f.value(
        entry,
        f64_type.clone(),
        Prim::Const(Scalar::F64(0.5)),
        &[],
        loc(2, 37),
    );
    let b = f.value(
        entry,
        scalar_type(ScalarType::Bool),
        Prim::Bernoulli,
        &[half],
        loc(2, 27),
    );
    let zero = f.value(
        entry,
        f64_type,
        Prim::Const(Scalar::F64(0.0)),
        &[],
        loc(2, 55),
    );
    let zeros = f.value(
        entry,
        array_type.clone(),
        Prim::Fill(Dim::Fixed(3)),
        &[zero],
        loc(2, 54),
    );
    let v = f.value(entry, array_type, Prim::NormalLike, &[zeros], loc(2, 42));
    f.end(entry, Terminator::Return(vec![u, n, b, v]));
    program_of(vec![f.finish()])
}

#[test]
fn random_draws_depend_only_on_seed_and_member() {
    let program = draws();
    let options = RunOptions {
        seed: 2024,
        ..RunOptions::default()
    };
    let small = run_with(&program, FuncId(0), vec![i64s(&[0; 4])], &options);
    let large = run_with(&program, FuncId(0), vec![i64s(&[0; 10])], &options);
    for member in 0..4 {
        assert_eq!(
            small.results[member], large.results[member],
            "member {member}"
        );
    }
    // Member 3's draws are exactly its own stream, in program order.
    let mut rng = MemberRng::new(2024, 3);
    let expected = vec![
        Tensor::scalar(Scalar::F64(rng.uniform())),
        Tensor::scalar(Scalar::F64(rng.normal())),
        Tensor::scalar(Scalar::Bool(rng.bernoulli(0.5))),
        Tensor::new(vec![3], Data::F64(rng.normal_vec(3))),
    ];
    assert_eq!(small.results[3].as_ref().unwrap(), &expected);
    assert_ne!(
        small.results[2], small.results[3],
        "members draw from different streams"
    );
    let other_seed = run_with(
        &program,
        FuncId(0),
        vec![i64s(&[0; 4])],
        &RunOptions { seed: 7, ..options },
    );
    assert_ne!(other_seed.results[3], small.results[3]);
}

#[test]
fn ops_with_the_same_name_and_loc_merge_and_unrun_ops_count_zero() {
    // Two copies of one const-generic function (as monomorphization makes them),
    // each negating at 5:9, and an entry that calls only the first copy.
    let mut copies = Vec::new();
    for name in ["neg<1>", "neg<2>"] {
        let mut f = FunctionBuilder::new(name, &[("x", i64_type())], &[i64_type()], loc(5, 1));
        let x = f.param(0);
        let entry = f.block(loc(5, 1));
        let y = f.value(
            entry,
            i64_type(),
            Prim::Unary(autobatch_ir::UnaryOp::Neg),
            &[x],
            loc(5, 9),
        );
        f.end(entry, Terminator::Return(vec![y]));
        copies.push(f.finish());
    }
    let mut main = FunctionBuilder::new("main", &[("x", i64_type())], &[i64_type()], loc(1, 1));
    let x = main.param(0);
    let entry = main.block(loc(1, 1));
    let y = main.var(i64_type());
    main.call(entry, &[y], FuncId(1), &[x], loc(2, 5));
    // The argument is still read after the call, so it must not be moved into it.
    let z = main.value(
        entry,
        i64_type(),
        Prim::Binary(BinaryOp::Mul),
        &[x, y],
        loc(2, 20),
    );
    main.end(entry, Terminator::Return(vec![z]));
    let mut functions = vec![main.finish()];
    functions.extend(copies);
    let program = program_of(functions);
    let output = run_with(
        &program,
        FuncId(0),
        vec![i64s(&[2, 3])],
        &RunOptions::default(),
    );
    assert_eq!(ok_i64(&output, 0), -4);
    assert_eq!(ok_i64(&output, 1), -9);
    let summary: Vec<(&str, Loc, u64)> = output
        .stats
        .op_counts
        .iter()
        .map(|c| (c.op, c.loc, c.executions))
        .collect();
    assert_eq!(summary, vec![("mul", loc(2, 20), 2), ("neg", loc(5, 9), 2)]);
    assert!((output.stats.lane_utilization - 0.5).abs() < 1e-15);
    assert!(output.stats.wall_seconds >= 0.0);
}

#[test]
fn indexed_assignment_in_a_loop_and_values_read_after_an_update() {
    // fn squares(n: usize) -> ([i64; 4], [i64; 4]) {
    //     let mut a = [0; 4]; let before = a;
    //     let mut i = 0; while i < n { a[i] = (i * i) as i64; i += 1 }
    //     (a, before)
    // }
    let usize_type = scalar_type(ScalarType::Usize);
    let array_type = TensorType {
        elem: ScalarType::I64,
        dims: vec![Dim::Fixed(4)],
    };
    let mut f = FunctionBuilder::new(
        "squares",
        &[("n", usize_type.clone())],
        &[array_type.clone(), array_type.clone()],
        loc(1, 1),
    );
    let n = f.param(0);
    let entry = f.block(loc(1, 1));
    let header = f.block(loc(3, 20));
    let body = f.block(loc(3, 34));
    let exit = f.block(loc(4, 5));
    let zero = f.value(
        entry,
        i64_type(),
        Prim::Const(Scalar::I64(0)),
        &[],
        loc(2, 18),
    );
    let a = f.value(
        entry,
        array_type.clone(),
        Prim::Fill(Dim::Fixed(4)),
        &[zero],
        loc(2, 17),
    );
    let before = f.value(entry, array_type.clone(), Prim::Copy, &[a], loc(2, 38));
    let i = f.value(
        entry,
        usize_type.clone(),
        Prim::Const(Scalar::Usize(0)),
        &[],
        loc(3, 17),
    );
    f.end(entry, Terminator::Jump(header));
    let c = f.value(
        header,
        scalar_type(ScalarType::Bool),
        Prim::Compare(CompareOp::Lt),
        &[i, n],
        loc(3, 26),
    );
    f.end(
        header,
        Terminator::Branch {
            cond: c,
            then_block: body,
            else_block: exit,
        },
    );
    let square = f.value(
        body,
        usize_type.clone(),
        Prim::Binary(BinaryOp::Mul),
        &[i, i],
        loc(3, 44),
    );
    let as_i64 = f.value(
        body,
        i64_type(),
        Prim::Cast(ScalarType::I64),
        &[square],
        loc(3, 43),
    );
    f.prim(body, Some(a), Prim::IndexSet, &[a, i, as_i64], loc(3, 36));
    let one = f.value(
        body,
        usize_type.clone(),
        Prim::Const(Scalar::Usize(1)),
        &[],
        loc(3, 60),
    );
    f.prim(
        body,
        Some(i),
        Prim::Binary(BinaryOp::Add),
        &[i, one],
        loc(3, 55),
    );
    f.end(body, Terminator::Jump(header));
    f.end(exit, Terminator::Return(vec![a, before]));
    let program = program_of(vec![f.finish()]);
    let args = vec![Arg::Batched(vec![
        Tensor::scalar(Scalar::Usize(4)),
        Tensor::scalar(Scalar::Usize(2)),
    ])];
    let output = run_with(&program, FuncId(0), args, &RunOptions::default());
    let zeros = Tensor::new(vec![4], Data::I64(vec![0; 4]));
    assert_eq!(
        output.results[0],
        Ok(vec![
            Tensor::new(vec![4], Data::I64(vec![0, 1, 4, 9])),
            zeros.clone()
        ])
    );
    assert_eq!(
        output.results[1],
        Ok(vec![
            Tensor::new(vec![4], Data::I64(vec![0, 1, 0, 0])),
            zeros.clone()
        ])
    );
    // An index past the end faults at the indexed assignment.
    let args = vec![Arg::Shared(Tensor::scalar(Scalar::Usize(5)))];
    let output = run_with(&program, FuncId(0), args, &RunOptions::default());
    let error = output.results[0].as_ref().unwrap_err();
    assert_eq!(error.kind, ErrorKind::IndexOutOfBounds);
    assert_eq!(error.loc, loc(3, 36));
    assert_eq!(
        error.message,
        "index 4 is out of bounds for an array of length 4"
    );
}

#[test]
fn an_empty_batch_runs_nothing() {
    let program = fib();
    let output = run_with(&program, FuncId(0), vec![i64s(&[])], &RunOptions::default());
    assert!(output.results.is_empty());
    assert_eq!(output.stats.steps, 0);
    assert_eq!(output.stats.lane_utilization, 0.0);
    assert_eq!(output.stats.op_counts.len(), 4);
}
