//! `instances [--quick]`: a TreeLSTM-like recursion over per-member binary
//! trees (the motivating case of TFP's autobatching paper), its two child calls made one after
//! the other or as one `join`, on the batching strategies.
//!
//! ```sh
//! cargo run --release -p autobatch-bench -- instances [--quick]
//! ```
//!
//! Each member has its own tree (a random shape of 4 to 32 leaves, given
//! as child-index arrays `left`/`right` padded to length `N`, and a feature
//! row per node); a node's state is `tanh(W x)` at a leaf and
//! `tanh(W (a + b) + x)` above. Reported per variant and strategy: the
//! median execution seconds, lane utilization, steps, instances and their
//! peak.
//!
//! The second part measures what passing the per-member trees down the
//! recursion costs: the same trees with the arrays padded to a growing `N`
//! (the work per node does not change), the bytes the explicit-stack form
//! moves per internal node (saves of full variables and argument copies
//! for the two calls, or the two instances' parameters), and the seconds
//! per node visited on program-counter (at most 512 instances alive: each
//! holds its copy of the member's arrays).
//!
//! The front end has no `join` yet on this branch: the join variant is the
//! sequential one's IR with the two calls of `node` made one fork
//! ([`join_children`]).

use std::time::Instant;

use autobatch_exec::{run, Arg, Batch, BatchingOptions, Env, LaneMode, RunOptions, Strategy};
use autobatch_ir::{Instances, JoinCall, Op, Program};
use autobatch_passes::stack::{lower_to_stack, LoweredArg, LoweredOp, LoweredTerm};
use autobatch_passes::uniformity::Invariance;
use autobatch_types::{Data, Tensor};
use serde_json::{json, Value};

/// The width of a node's state.
const D: usize = 8;

/// The program for arrays of length `n`.
fn source(n: usize) -> String {
    format!(
        "
fn node(left: [i64; {n}], right: [i64; {n}], x: [[f64; {D}]; {n}], w: [[f64; {D}]; {D}], i: i64) -> [f64; {D}] {{
    if left[i] < 0 {{
        matvec(w, x[i]).tanh()
    }} else {{
        let a = node(left, right, x, w, left[i]);
        let b = node(left, right, x, w, right[i]);
        (matvec(w, a + b) + x[i]).tanh()
    }}
}}
fn tree(left: [i64; {n}], right: [i64; {n}], x: [[f64; {D}]; {n}], w: [[f64; {D}]; {D}]) -> f64 {{
    sum(node(left, right, x, w, 0))
}}
"
    )
}

/// The program for arrays of length `n`, sequential or with a `join`.
fn program(n: usize, join: bool) -> Program {
    let mut program = autobatch_lower::compile(&source(n))
        .unwrap_or_else(|d| panic!("the tree program does not compile: {d:?}"));
    if join {
        join_children(&mut program, "node");
    }
    if let Err(errors) = autobatch_ir::verify::verify_program(&program) {
        panic!("the join variant does not verify: {errors:?}");
    }
    autobatch_passes::optimize(&mut program);
    program
}

/// Makes the first two calls of one block of `function` one `join`: the
/// operations between them that do not depend on the first call's results
/// (the second call's arguments) move before it, the others after.
pub fn join_children(program: &mut Program, function: &str) {
    let id = program.function_by_name(function).expect("the function");
    let f = &mut program.functions[id];
    for block in f.blocks.values_mut() {
        let calls: Vec<usize> = (0..block.ops.len())
            .filter(|i| matches!(block.ops[*i], Op::Call { catch: false, .. }))
            .collect();
        let [first, second, ..] = calls[..] else {
            continue;
        };
        let ops = std::mem::take(&mut block.ops);
        let mut dependent: Vec<autobatch_ir::Var> = ops[first].defs().to_vec();
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for op in &ops[first + 1..second] {
            if op.uses().iter().any(|v| dependent.contains(v)) {
                dependent.extend_from_slice(op.defs());
                after.push(op.clone());
            } else {
                before.push(op.clone());
            }
        }
        let (
            Op::Call {
                dsts: d1,
                callee: c1,
                args: a1,
                loc,
                ..
            },
            Op::Call {
                dsts: d2,
                callee: c2,
                args: a2,
                loc: loc2,
                ..
            },
        ) = (&ops[first], &ops[second])
        else {
            unreachable!("both are calls")
        };
        assert!(a2.iter().all(|a| !dependent.contains(a)), "dependent calls");
        let fork = Op::Fork {
            dsts: d1.iter().chain(d2).copied().collect(),
            args: a1.iter().chain(a2).copied().collect(),
            instances: Instances::Join(vec![
                JoinCall {
                    callee: *c1,
                    args: a1.len(),
                    loc: *loc,
                },
                JoinCall {
                    callee: *c2,
                    args: a2.len(),
                    loc: *loc2,
                },
            ]),
            loc: *loc,
            tape: autobatch_ir::TapeMode::None,
        };
        let mut rewritten = ops[..first].to_vec();
        rewritten.extend(before);
        rewritten.push(fork);
        rewritten.extend(after);
        rewritten.extend_from_slice(&ops[second + 1..]);
        block.ops = rewritten;
        return;
    }
    panic!("no block of `{function}` makes two calls");
}

/// A small deterministic generator (xorshift), so that the bench needs no
/// random crate.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// A random binary tree of `leaves` leaves, in preorder from index 0:
/// `left[i]`, `right[i]` are its children (-1 at a leaf).
fn tree_shape(leaves: u64, rng: &mut Xorshift, left: &mut Vec<i64>, right: &mut Vec<i64>) -> i64 {
    let i = left.len();
    left.push(-1);
    right.push(-1);
    if leaves > 1 {
        let on_left = 1 + rng.below(leaves - 1);
        let l = tree_shape(on_left, rng, left, right);
        let r = tree_shape(leaves - on_left, rng, left, right);
        left[i] = l;
        right[i] = r;
    }
    i as i64
}

/// `members` trees of 4 to 32 leaves (at most 63 nodes), arrays of length
/// `n`; the nodes of all trees.
fn batch(program: &Program, members: usize, n: usize) -> (Batch, usize) {
    let entry = program.function_by_name("tree").expect("entry");
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let (mut lefts, mut rights, mut xs) = (Vec::new(), Vec::new(), Vec::new());
    let mut nodes = 0;
    for _ in 0..members {
        let (mut left, mut right) = (Vec::new(), Vec::new());
        tree_shape(4 + rng.below(29), &mut rng, &mut left, &mut right);
        nodes += left.len();
        left.resize(n, -1);
        right.resize(n, -1);
        lefts.push(Tensor::new(vec![n], Data::I64(left)));
        rights.push(Tensor::new(vec![n], Data::I64(right)));
        let x = (0..n * D).map(|_| rng.unit()).collect();
        xs.push(Tensor::new(vec![n, D], Data::F64(x)));
    }
    let w = Tensor::new(
        vec![D, D],
        Data::F64((0..D * D).map(|_| rng.unit()).collect()),
    );
    let batch = Batch {
        entry,
        size: members,
        args: vec![
            Arg::Batched(lefts),
            Arg::Batched(rights),
            Arg::Batched(xs),
            Arg::Shared(w),
        ],
    };
    (batch, nodes)
}

/// The median of `runs` runs, and the figures of the last.
fn measure(
    program: &Program,
    batch: &Batch,
    strategy: Strategy,
    runs: usize,
    max_instances: Option<usize>,
) -> Value {
    let options = RunOptions {
        max_instances,
        batching: BatchingOptions {
            lanes: LaneMode::Auto,
            ..BatchingOptions::default()
        },
        ..RunOptions::default()
    };
    let mut seconds = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let output = run(strategy, program, &Env::default(), batch, &options)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(output.results.iter().all(|r| r.is_ok()), "a member failed");
        seconds.push(output.stats.wall_seconds);
        last = Some(output);
    }
    seconds.sort_by(f64::total_cmp);
    let output = last.expect("at least one run");
    json!({
        "median_seconds": seconds[seconds.len() / 2],
        "lane_utilization": output.stats.lane_utilization,
        "steps": output.stats.steps,
        "instances": output.stats.instances,
        "peak_instances": output.stats.peak_instances,
        "results": output.results.iter().map(|r| match r {
            Ok(values) => match values[0].as_scalar() {
                autobatch_types::Scalar::F64(x) => x,
                _ => f64::NAN,
            },
            Err(_) => f64::NAN,
        }).collect::<Vec<f64>>(),
    })
}

/// What the explicit-stack form moves for each internal node, that is per
/// pair of calls of `node` to itself (saves of full variables, argument
/// copies), or per `join` (the two instances' parameters), in bytes.
fn bytes_moved(program: &Program, batch: &Batch) -> Value {
    let shared: Vec<bool> = batch
        .args
        .iter()
        .map(|a| matches!(a, Arg::Shared(_)))
        .collect();
    let invariance = Invariance::compute(program, batch.entry, &shared);
    let lowered = lower_to_stack(program, &invariance);
    let node = program.function_by_name("node").expect("node");
    let bytes = |x: autobatch_passes::stack::GlobalVar| {
        autobatch_exec::memory::value_bytes(&lowered.vars[x].ty, &[]) as u64
    };
    let (mut saves, mut copies, mut params) = (0, 0, 0);
    for block in lowered.blocks.values().filter(|b| b.func == node) {
        match &block.term {
            LoweredTerm::PushJump { callee, .. } if *callee == node => {
                let callee_params = &lowered.functions[node].params;
                for op in &block.ops {
                    match op {
                        LoweredOp::Push(x) => saves += bytes(*x),
                        LoweredOp::Prim {
                            dst: Some(d),
                            prim: autobatch_ir::Prim::Copy,
                            ..
                        } if callee_params.contains(d) => copies += bytes(*d),
                        _ => {}
                    }
                }
            }
            LoweredTerm::Fork(fork) => {
                for call in &fork.calls {
                    for (p, arg) in &call.params {
                        if !matches!(arg, LoweredArg::Index) {
                            params += bytes(*p);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    json!({
        "saved_per_internal_node": saves,
        "argument_copies_per_internal_node": copies,
        "instance_parameters_per_internal_node": params,
    })
}

/// `instances [--quick] [--only VARIANT/STRATEGY]` (`--only join/program-counter`:
/// that one measurement, ten runs, for a profiler).
pub fn main(args: &[String]) {
    let quick = args.iter().any(|a| a == "--quick");
    let members = if quick { 64 } else { 256 };
    let runs = 3;
    if let Some(only) = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
    {
        let (variant, strategy) = only.split_once('/').expect("VARIANT/STRATEGY");
        let program = program(64, variant == "join");
        let (batch, _) = batch(&program, members, 64);
        let strategy: Strategy = strategy.parse().expect("a strategy");
        let mut figures = measure(&program, &batch, strategy, 10, None);
        figures.as_object_mut().map(|o| o.remove("results"));
        println!("{figures}");
        return;
    }
    let strategies = [Strategy::LocalStatic, Strategy::ProgramCounter];
    let mut variants = Vec::new();
    for join in [false, true] {
        let program = program(64, join);
        let (batch, nodes) = batch(&program, members, 64);
        let mut row = serde_json::Map::new();
        row.insert(
            "variant".into(),
            json!(if join { "join" } else { "sequential" }),
        );
        row.insert("members".into(), json!(members));
        row.insert("nodes".into(), json!(nodes));
        for strategy in strategies {
            let started = Instant::now();
            row.insert(
                strategy.name().into(),
                measure(&program, &batch, strategy, runs, None),
            );
            eprintln!("{} {strategy}: {:.1?}", row["variant"], started.elapsed());
        }
        variants.push(Value::Object(row));
    }
    let same = |s: &str| variants[0][s]["results"] == variants[1][s]["results"];
    assert!(
        strategies.iter().all(|s| same(s.name())),
        "the join variant gives other results"
    );
    for v in &mut variants {
        for s in strategies {
            v[s.name()].as_object_mut().map(|o| o.remove("results"));
        }
    }
    let lengths: &[usize] = if quick {
        &[64, 1024]
    } else {
        &[64, 1024, 8192]
    };
    let mut padding = Vec::new();
    for &n in lengths {
        for join in [false, true] {
            let program = program(n, join);
            let (batch, nodes) = batch(&program, members, n);
            // At most 512 instances alive: a lane holds the member's arrays.
            let bound = Some(512);
            let mut figures = measure(&program, &batch, Strategy::ProgramCounter, runs, bound);
            let seconds = figures["median_seconds"].as_f64().unwrap_or(0.0);
            figures.as_object_mut().map(|o| o.remove("results"));
            padding.push(json!({
                "array_length": n,
                "variant": if join { "join" } else { "sequential" },
                "bytes_moved": bytes_moved(&program, &batch),
                "program_counter": figures,
                "microseconds_per_node": seconds * 1e6 / nodes as f64,
            }));
            eprintln!("N = {n}, join {join}: done");
        }
    }
    let report = json!({
        "benchmark": "instances",
        "tree_lstm": variants,
        "per_member_data": padding,
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
