//! Differential fuzzing of autobatch: random programs, run under every
//! strategy, lanes mode and block choice, must give every member exactly
//! what the reference executor gives it.
//!
//! - [`generate`]: a seed gives a [`Case`]: a well-typed, terminating
//!   program (1–4 functions; mutual and multiple recursion bounded by a
//!   depth argument; `i64`, `f64`, `i32` and `usize` (wrapping, shifts, division by
//!   zero), `f32` and `[f32; 3]` (arithmetic, reductions, `softmax`,
//!   casts between every pair of number types, arrays cast element by
//!   element); every builtin of the operation table (a test checks it):
//!   the elementwise float ones (`exp`, `ln_1p`, `powi`, `softplus`,
//!   `is_nan`, ...) on scalars and arrays of both float types, integer
//!   `pow`, `argmax`/`argmin`, `matmul`/`transpose`/`outer` of 3-by-3
//!   matrices, `uniform_like`/`normal_like`/`bernoulli`; values, arrays and tuples live across calls; calls
//!   nested in arguments and several in one expression; `while`, `for` and
//!   `loop` with `break value`, `break`, `continue` and calls inside;
//!   `catch`; instances (`join`, `map`, `pfor`); rows of `jacobian`s of
//!   differentiable helpers that fork, some with a data argument, and
//!   `grad` of a scalar helper with a data argument ([`differentiable`]),
//!   helpers that read the static `W` and a loss of them whose gradient
//!   with respect to `W`, summed over members, is checked too
//!   ([`case::GradientCase`]: every configuration's bits and the members
//!   in reverse order, each member's loss and error those of the loss
//!   alone); helpers with operations that fault for some points (their
//!   value most often unused, or caught by a `catch` on values that do
//!   not depend on the point), run beside entries that differentiate
//!   them, which must fault exactly when and as they do
//!   ([`case::DerivedCase`]);
//!   random draws;
//!   members that fault beside members that do not; in some programs ragged
//!   arrays `[i64; L]`, `[f64; L]`, `[[f64; 3]; L]` whose length is each
//!   member's own, and in some of those a second ragged dimension `D`
//!   (`[f64; D]`, `[[f64; D]; L]`: reductions, `softmax`, rows, `matvec`
//!   and `vecmat` over both, loops over `D`, `map` giving rows), with
//!   shared and batched inputs (ragged ones of each member's own length, or
//!   of one length and then possibly shared) and limits; and inputs that
//!   fix `L` in conflicting ways, which must be refused. About 15% of the
//!   seeds give *scalar programs* ([`generate::scalar_program`]): scalars
//!   and pairs of them only, no forks, `catch`, draws, host primitives or
//!   statics, so that the lock-step strategy compiles them rather than
//!   leaving them to an interpreter.
//! - [`oracle`]: compiles and runs a case through the `autobatch` library
//!   API and compares each member with the reference, bit for bit.
//! - [`finite`]: the derivative oracle, independent of the derivation:
//!   each derivative a case checks (gradients, rows of Jacobians, the
//!   gradient with respect to statics) against central differences of its
//!   function on the reference executor, with Richardson extrapolation,
//!   skipping the points where the function has a kink or a step between
//!   the moved points. Every executor runs the same derived program, so
//!   only this sees a wrong derivative.
//! - [`shrink`]: makes a failing case smaller while it still fails.
//! - [`regression_file`]: a failing case as a `tests/programs` test file.
//!
//! The `autobatch-fuzz programs` command (`src/main.rs`, see the crate's
//! README) runs many seeds on all cores and saves shrunk failures.
//!
//! Architecture Invariant: this crate reaches autobatch only through the
//! `autobatch` crate's public API, and knows nothing of how a strategy
//! works: the reference executor is the only oracle (for derivatives,
//! with the function's own values on the reference). Nothing in the
//! pipeline depends on it.

pub mod ast;
pub mod case;
pub mod differentiable;
pub mod finite;
pub mod generate;
pub mod oracle;
pub mod shrink;

pub use case::{Case, Limits};
pub use generate::generate;
pub use oracle::{check, Finding, Verdict};

/// Lines before the program in a regression file (comment, `run`, `expect`);
/// cases are checked with this many blank lines first, so that error lines
/// are those of the file.
pub const HEADER_LINES: usize = 3;

/// What one seed gave.
#[derive(Clone, Debug)]
pub enum Outcome {
    Pass,
    /// The generated program or its inputs were refused: a bug of the generator.
    GeneratorBug {
        source: String,
        why: String,
    },
    Fail {
        case: Case,
        findings: Vec<Finding>,
    },
    /// Inputs that fix the ragged dimension `L` both in `shared` and, with
    /// other lengths, in `batch` ([`generate::conflicting_inputs`]) were
    /// not refused with an input error.
    ConflictAccepted {
        source: String,
        inputs: String,
        why: String,
    },
}

/// Generates and checks the case of `seed`.
pub fn check_seed(seed: u64) -> Outcome {
    let case = generate(seed);
    match check(&case, HEADER_LINES) {
        Verdict::Pass => check_conflict(&case),
        Verdict::Invalid(why) => Outcome::GeneratorBug {
            source: case.source(),
            why,
        },
        Verdict::Fail(findings) => Outcome::Fail { case, findings },
    }
}

/// Generates the case of `seed` and checks only its derivatives against
/// central differences ([`finite`]), on the reference: a cheap long run of
/// the derivative oracle.
pub fn check_seed_derivatives(seed: u64) -> Outcome {
    let case = generate(seed);
    match oracle::check_derivatives_only(&case, HEADER_LINES) {
        Verdict::Pass => Outcome::Pass,
        Verdict::Invalid(why) => Outcome::GeneratorBug {
            source: case.source(),
            why,
        },
        Verdict::Fail(findings) => Outcome::Fail { case, findings },
    }
}

/// Checks that conflicting ragged inputs for the case's program, if it
/// has two ragged entry parameters, are refused with an input error.
fn check_conflict(case: &Case) -> Outcome {
    let Some(inputs) = generate::conflicting_inputs(case) else {
        return Outcome::Pass;
    };
    match oracle::refuses_inputs(case, &inputs) {
        Ok(_) => Outcome::Pass,
        Err(why) => Outcome::ConflictAccepted {
            source: case.source(),
            inputs: inputs.to_json().to_string(),
            why,
        },
    }
}

/// The smallest variant of a failing case that still fails.
pub fn shrink_failure(case: &Case) -> Case {
    shrink::shrink(case, |variant| {
        matches!(check(variant, HEADER_LINES), Verdict::Fail(_))
    })
}

/// A failing case as a test file of `tests/programs` (format in its
/// README): a comment naming the seed and the first finding, the `run`
/// directive, and the reference's results as the `expect` directive.
pub fn regression_file(seed: u64, case: &Case) -> Result<String, String> {
    let findings = match check(case, HEADER_LINES) {
        Verdict::Fail(findings) => findings,
        Verdict::Pass => return Err("the case passes".into()),
        Verdict::Invalid(why) => return Err(why),
    };
    let first = findings
        .first()
        .map(|f| format!("{}: {}", f.configuration, f.detail))
        .unwrap_or_default();
    let comment = format!(
        "Found by `autobatch-fuzz programs` (seed {seed}), shrunk; {} configurations differed, first {first}",
        findings.len()
    );
    write_test_file(&comment, case)
}

/// A case as a test file of `tests/programs`, whatever it gives.
pub fn test_file(seed: u64, case: &Case) -> Result<String, String> {
    write_test_file(
        &format!("Generated by `autobatch-fuzz show --seed {seed}`"),
        case,
    )
}

/// `// comment`, the `run` directive, the reference's results as `expect`, the program.
fn write_test_file(comment: &str, case: &Case) -> Result<String, String> {
    let program = case.source();
    let inputs = case.inputs.to_json().to_string();
    let padded = format!("{}{program}", "\n".repeat(HEADER_LINES));
    let expected = oracle::reference_results(&padded, &inputs, case.limits)?;
    Ok(format!(
        "// {comment}\n//@ run({}): {} {inputs}\n//@ expect: {expected}\n{program}",
        case.limits.directive_options(),
        case::ENTRY,
    ))
}
