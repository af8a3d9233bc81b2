//! How the batching strategies schedule the TreeLSTM example
//! (`examples/models/treelstm.ab`, the two children of a node as one `join`):
//! the evidence, from `op_counts`, that the nodes at one level of **all**
//! members' trees run together.
//!
//! - A node's `combine` runs once per height: its matrix products execute
//!   exactly as many times as there are distinct heights of internal nodes
//!   in the batch, each execution serving every node of that height in every
//!   tree, on both batching strategies.
//! - `leaf` under `program-counter` runs once for the whole batch (every
//!   lane descends to its leaves before any leaf's products run); under
//!   `local-static` once per distinct depth of a leaf (an activation is one
//!   level of the recursion).
//! - Written without `join` (`treelstm_seq.ab`), the same products run
//!   more times (the left subtrees first, then the right ones): on the 8
//!   test trees 25 executions under `program-counter` for 14 heights.

use std::collections::BTreeSet;
use std::path::PathBuf;

use autobatch::{compile, Inputs, RunConfig, Strategy};
use serde_json::Value;

fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/models")
}

fn read(name: &str) -> String {
    let path = models().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// One member's tree: the children of each node (-1 for none) and the root.
struct Tree {
    left: Vec<i64>,
    right: Vec<i64>,
    root: usize,
}

impl Tree {
    /// A leaf has height 0, an internal node one more than its higher child.
    fn height(&self, n: usize) -> usize {
        if self.left[n] < 0 {
            0
        } else {
            1 + self
                .height(self.left[n] as usize)
                .max(self.height(self.right[n] as usize))
        }
    }

    /// Adds the heights of the internal nodes under `n` and the depths of its leaves.
    fn levels(
        &self,
        n: usize,
        depth: usize,
        heights: &mut BTreeSet<usize>,
        leaf_depths: &mut BTreeSet<usize>,
    ) {
        if self.left[n] < 0 {
            leaf_depths.insert(depth);
        } else {
            heights.insert(self.height(n));
            self.levels(self.left[n] as usize, depth + 1, heights, leaf_depths);
            self.levels(self.right[n] as usize, depth + 1, heights, leaf_depths);
        }
    }
}

fn trees(input: &Value) -> Vec<Tree> {
    let batch = &input["batch"];
    let ints = |v: &Value| -> Vec<i64> {
        v.as_array()
            .expect("an array")
            .iter()
            .map(|x| x.as_i64().expect("an integer"))
            .collect()
    };
    let lefts = batch["left"].as_array().expect("left");
    let rights = batch["right"].as_array().expect("right");
    let roots = batch["root"].as_array().expect("root");
    lefts
        .iter()
        .zip(rights)
        .zip(roots)
        .map(|((l, r), root)| Tree {
            left: ints(l),
            right: ints(r),
            root: root.as_u64().expect("a root index") as usize,
        })
        .collect()
}

/// The executions of the operation `op` at `line`, per location on that line.
fn executions(program: &str, strategy: Strategy, op: &str, line: u32) -> Vec<u64> {
    let compiled =
        compile(&read(program), program).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let inputs = Inputs::from_json_str(&read("treelstm_small.json")).expect("the input parses");
    let bound = compiled
        .bind("classify", &inputs)
        .unwrap_or_else(|e| panic!("{}", e.message()));
    let config = RunConfig {
        strategy,
        ..RunConfig::default()
    };
    let run = bound.run(&config).expect("runs");
    let found: Vec<u64> = run
        .stats
        .op_counts
        .iter()
        .filter(|c| c.op == op && c.loc.line == line)
        .map(|c| c.executions)
        .collect();
    assert!(!found.is_empty(), "{program}: no {op} at line {line}");
    found
}

/// The line of the first source line of `program` containing `text`.
fn line_of(program: &str, text: &str) -> u32 {
    let at = read(program)
        .lines()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("{program}: no line contains {text:?}"));
    at as u32 + 1
}

#[test]
fn treelstm_with_join_runs_each_level_of_all_trees_together() {
    let input: Value = serde_json::from_str(&read("treelstm_small.json")).expect("JSON");
    let mut heights = BTreeSet::new();
    let mut leaf_depths = BTreeSet::new();
    for tree in trees(&input) {
        tree.levels(tree.root, 0, &mut heights, &mut leaf_depths);
    }
    assert!(heights.len() > 5, "the test trees are deep");
    let leaf_line = line_of("treelstm.ab", "let i = sigmoid(matvec(WI, x) + BI);");
    let combine_line = line_of("treelstm.ab", "let i = sigmoid(matvec(UIL, h1)");
    for strategy in [Strategy::ProgramCounter, Strategy::LocalStatic] {
        for n in executions("treelstm.ab", strategy, "matvec", combine_line) {
            assert_eq!(
                n,
                heights.len() as u64,
                "{strategy}: combine runs once per height"
            );
        }
    }
    for n in executions("treelstm.ab", Strategy::ProgramCounter, "matvec", leaf_line) {
        assert_eq!(
            n, 1,
            "program-counter: every leaf of every tree in one execution"
        );
    }
    for n in executions("treelstm.ab", Strategy::LocalStatic, "matvec", leaf_line) {
        assert_eq!(
            n,
            leaf_depths.len() as u64,
            "local-static: leaves once per depth"
        );
    }
    let seq_line = line_of("treelstm_seq.ab", "let i = sigmoid(matvec(UIL, h1)");
    for strategy in [Strategy::ProgramCounter, Strategy::LocalStatic] {
        for n in executions("treelstm_seq.ab", strategy, "matvec", seq_line) {
            assert!(
                n > heights.len() as u64,
                "{strategy}: without join, combine runs {n} times, more than once per height"
            );
        }
    }
}
