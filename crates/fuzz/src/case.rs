//! A test case: a generated program, the inputs of its entry function
//! (each argument shared or batched), and the run's limits and seed; and
//! the text forms the rest of the project reads (inputs JSON, `//@ run`
//! options).

use serde_json::{json, Map, Value as Json};

use crate::ast::{print_program, Program, Ty};

/// Name of the entry function of every generated program.
pub const ENTRY: &str = "main";

/// One program with the inputs and limits it runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub program: Program,
    pub inputs: Inputs,
    pub limits: Limits,
    /// A gradient with respect to statics to check too, in programs whose
    /// helpers read the static `W` (`crate::differentiable`).
    pub gradient: Option<GradientCase>,
    /// Helpers to run beside their derivatives, in programs that have them.
    pub derived: Vec<DerivedCase>,
}

/// A function run beside entries that differentiate it, on the same
/// arguments (`crate::differentiable`): where the function stops a member
/// with an error, each derivative stops it with that error (kind, message,
/// location); where it gives a value, each derivative gives one (the
/// value itself, bit for bit, where [`DerivedEntry::value`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DerivedCase {
    pub function: String,
    pub derivatives: Vec<DerivedEntry>,
    /// The arguments by parameter name, one value per member.
    pub args: Vec<(String, Vec<Json>)>,
}

/// An entry that differentiates a [`DerivedCase`]'s function.
#[derive(Clone, Debug, PartialEq)]
pub struct DerivedEntry {
    pub entry: String,
    /// Whether it gives the function's value (`value_and_grad(..).0`).
    pub value: bool,
}

impl DerivedCase {
    /// The inputs JSON: the arguments batched, the case's statics shared.
    pub fn inputs_json(&self, case: &Case) -> Json {
        let batch: Map<String, Json> = self
            .args
            .iter()
            .map(|(name, values)| (name.clone(), Json::Array(values.clone())))
            .collect();
        json!({"batch": batch, "shared": shared_statics(case)})
    }
}

/// The values the case gives the program's statics, by name.
fn shared_statics(case: &Case) -> Map<String, Json> {
    let mut shared = Map::new();
    let is_static = |name: &str| case.program.statics.iter().any(|s| s.name == name);
    for arg in &case.inputs.args {
        if let (true, InputValue::Shared(v)) = (is_static(&arg.name), &arg.value) {
            shared.insert(arg.name.clone(), v.clone());
        }
    }
    shared
}

/// A gradient of `entry`, summed over members, with respect to `statics`
/// (`autobatch run --grad-statics`): each member's point `x`, the statics
/// those of the case's inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct GradientCase {
    pub entry: String,
    pub statics: Vec<String>,
    /// One `[f64; 3]` per member.
    pub points: Vec<Json>,
}

impl GradientCase {
    /// The inputs JSON: the points batched, the values the case gives the
    /// program's statics shared.
    pub fn inputs_json(&self, case: &Case) -> Json {
        json!({"batch": {"x": self.points}, "shared": shared_statics(case)})
    }
}

/// The entry's arguments and the statics, by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Inputs {
    /// Batch size; every batched argument has this many values.
    pub members: usize,
    pub args: Vec<InputArg>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InputArg {
    pub name: String,
    pub ty: Ty,
    pub value: InputValue,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InputValue {
    /// One value for all members (statics are always shared).
    Shared(Json),
    /// One value per member.
    Batched(Vec<Json>),
}

/// What a run may use up, and its random seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_stack_depth: usize,
    pub max_steps: u64,
    pub seed: u64,
}

impl Inputs {
    /// The `--inputs` JSON: `{"batch": {...}, "shared": {...}}`.
    pub fn to_json(&self) -> Json {
        let mut batch = Map::new();
        let mut shared = Map::new();
        for arg in &self.args {
            match &arg.value {
                InputValue::Shared(v) => shared.insert(arg.name.clone(), v.clone()),
                InputValue::Batched(vs) => batch.insert(arg.name.clone(), Json::Array(vs.clone())),
            };
        }
        json!({"batch": batch, "shared": shared})
    }
}

impl Limits {
    /// The options of a `//@ run(...)` directive.
    pub fn directive_options(&self) -> String {
        format!(
            "max-stack-depth={}, max-steps={}, seed={}",
            self.max_stack_depth, self.max_steps, self.seed
        )
    }
}

impl Case {
    /// The program's source text.
    pub fn source(&self) -> String {
        print_program(&self.program)
    }
}
