//! The bounded fuzz run of the test suite: the generated programs of fixed
//! seeds compile, cover what the generator promises, and give every member
//! the reference's result under every configuration; and the shrinker
//! keeps a property while it makes a case smaller.
//!
//! The long run is `cargo run --release -p autobatch-fuzz -- programs
//! --count N --seed S` (see the crate's README).

use std::collections::BTreeSet;

use autobatch_fuzz::ast::Ty;
use autobatch_fuzz::case::{Case, InputValue};
use autobatch_fuzz::{check_seed, generate, oracle, shrink, Outcome, HEADER_LINES};
use serde_json::Value as Json;

/// The seeds of the tests of the generator.
const SEEDS: std::ops::Range<u64> = 0..300;

/// The seeds run on every configuration: more, since a strategy bug may
/// need a rare shape (some first show at a seed in the hundreds).
const RUN_SEEDS: std::ops::Range<u64> = 0..600;

#[test]
fn every_generated_program_compiles_and_its_inputs_bind() {
    let bugs: Vec<String> = SEEDS
        .filter_map(|seed| {
            let case = generate(seed);
            oracle::validate(&case)
                .err()
                .map(|why| format!("seed {seed}: {why}\n{}", case.source()))
        })
        .collect();
    assert!(
        bugs.is_empty(),
        "{} generator bugs:\n{}",
        bugs.len(),
        bugs.join("\n")
    );
}

#[test]
fn generation_is_a_function_of_the_seed() {
    for seed in 0..20 {
        assert_eq!(generate(seed), generate(seed));
    }
}

#[test]
fn the_programs_use_every_promised_construct() {
    let sources: Vec<String> = SEEDS.map(|seed| generate(seed).source()).collect();
    let all = sources.join("\n");
    let constructs = [
        "while ",
        "for ",
        "loop {",
        "break;",
        "break ",
        "continue;",
        "return ",
        "assert!(",
        "uniform()",
        "normal()",
        "static W",
        "static M: [[f64; 3]; 3]",
        "matvec(M, t)",
        "[i64; 4]",
        "[f64; 3]",
        "(i64, f64)",
        " / ",
        " % ",
        "select(",
        "(d - 1)",
        "(d - 2)",
        "(d, ",
        "] += ",
        " >> ",
        " << ",
        " ^ ",
        "(!",
        " & ",
        "= catch(",
        "= catch(dz(",
        "= join(",
        "map(",
        "pfor::<",
        "pfor::<FAN",
        "const FAN",
        "jacobian(dv",
        "map(ds, ",
        "pfor::<3>(dk, ",
        "join(dv",
        "x: [f64; 3], d: [f64; 3]) -> [f64; 3]",
        "grad(ds, ",
        "(value_and_grad(ds, ",
        "ode_rk45(dode",
        "ode_bdf_tol(dode",
        "a: [[f64; 3]; 2]",
        "q: (f64, [f64; 3])",
        "m: i64) -> [f64; 3]",
        "flip: bool) -> [f64; 3]",
        "s: f32) -> [f64; 3]",
        "[i64; L]",
        "[f64; L]",
        "-> [f64; L] {",
        "-> [i64; L] {",
        ").len() as i64)",
        "(L as i64)",
        "; L]",
        "pfor::<L>(",
        "; L], ",
        "softmax(",
        "dot(",
        "max(",
        "min(",
        "mean(",
        "logsumexp(",
        "[[f64; 3]; L]",
        "; L] as ",
        "[f32; 3]",
        "select([",
        "]] as f32)",
        "matvec([[",
        ".powi(",
        ".powf(",
        ".exp()",
        ".ln_1p()",
        "softplus(",
        "log_sigmoid(",
        ".is_nan()",
        " as f32)",
        " as i32)",
        "5f32",
        ": i32",
        ": usize",
        "usize)",
        "[f32; L]",
        "[f64; D]",
        "[[f64; D]; L]",
        "-> [f64; D] {",
        "(D as i64)",
        "; D]; L]",
        "matvec(",
        "][1..1 + ",
        "][1..4]",
        "][(1 as i32)..(1 as i32) + 3]",
        ", 0.0][..3]",
        "[0..0 + 3] ",
        "[0..3] ",
        "let part",
        "= part",
        "vecmat(",
        "fn host_affine(x: f64, k: f64) -> f64;",
        "host_affine(",
        "host_square(",
    ];
    let missing: Vec<&str> = constructs
        .iter()
        .copied()
        .filter(|c| !all.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "no generated program contains {missing:?}"
    );
    let multi_function = sources
        .iter()
        .filter(|s| s.matches("\nfn ").count() >= 2)
        .count();
    assert!(
        multi_function > SEEDS.count() / 2,
        "only {multi_function} programs with several functions"
    );
}

/// The seeds of [`members_fault_in_every_way_beside_members_that_do_not`]:
/// more than [`SEEDS`], since a host primitive's error is rare (scalar
/// programs call none; the first other program with one is seed 365),
/// and the first seed with a library function's `domain_error` (an
/// argument out of its domain takes a rare draw: the next is seed 1106).
fn fault_seeds() -> impl Iterator<Item = u64> {
    (0..400).chain([785])
}

#[test]
fn members_fault_in_every_way_beside_members_that_do_not() {
    let mut kinds = BTreeSet::new();
    let mut mixed = 0;
    for seed in fault_seeds() {
        let case = generate(seed);
        let source = format!("{}{}", "\n".repeat(HEADER_LINES), case.source());
        let results =
            oracle::reference_results(&source, &case.inputs.to_json().to_string(), case.limits)
                .unwrap_or_else(|why| panic!("seed {seed}: {why}"));
        let member_kinds: BTreeSet<String> = results
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["error"]["kind"].as_str().unwrap_or("ok").to_owned())
            .collect();
        if member_kinds.len() > 1 && member_kinds.contains("ok") {
            mixed += 1;
        }
        kinds.extend(member_kinds);
    }
    let expected = [
        "assertion_failed",
        "division_by_zero",
        "domain_error",
        "host_error",
        "index_out_of_bounds",
        "ok",
        "stack_overflow",
        "step_limit",
    ];
    assert_eq!(kinds, expected.iter().map(|k| k.to_string()).collect());
    assert!(
        mixed >= 20,
        "only {mixed} batches mix failing and succeeding members"
    );
}

/// What checking `seed` found, if it fails.
fn seed_failure(seed: u64) -> Option<String> {
    match check_seed(seed) {
        Outcome::Pass => None,
        Outcome::GeneratorBug { why, .. } => Some(format!("seed {seed}: generator bug: {why}")),
        Outcome::ConflictAccepted { why, inputs, .. } => Some(format!(
            "seed {seed}: conflicting ragged inputs {inputs} not refused: {why}"
        )),
        Outcome::Fail { findings, .. } => Some(format!(
            "seed {seed}: {} configurations differ, first {}: {}",
            findings.len(),
            findings[0].configuration,
            findings[0].detail
        )),
    }
}

/// Fails while a strategy disagrees with the reference. The seeds run on
/// two threads (CI has two cores).
#[test]
fn every_configuration_matches_the_reference() {
    const WORKERS: u64 = 2;
    let mut failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                scope.spawn(move || {
                    RUN_SEEDS
                        .filter(|seed| seed % WORKERS == w)
                        .filter_map(seed_failure)
                        .collect::<Vec<String>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|_| vec!["a worker panicked".into()])
            })
            .collect()
    });
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} programs fail (reproduce and shrink with `cargo run --release -p autobatch-fuzz -- programs --count 1 --seed SEED`):\n{}",
        failures.len(),
        RUN_SEEDS.count(),
        failures.join("\n")
    );
}

#[test]
fn the_shrinker_keeps_the_property_and_makes_the_case_smaller() {
    // A stand-in for "still fails": the program draws a normal number and
    // still compiles.
    let property = |case: &autobatch_fuzz::Case| {
        case.source().contains("normal()") && oracle::validate(case).is_ok()
    };
    let seed = SEEDS
        .clone()
        .find(|&s| property(&generate(s)))
        .expect("some program draws normal()");
    let case = generate(seed);
    let shrunk = shrink::shrink(&case, property);
    assert!(property(&shrunk));
    assert!(
        shrunk.source().len() * 2 < case.source().len(),
        "shrunk:\n{}",
        shrunk.source()
    );
    assert!(
        shrunk.inputs.members <= 1,
        "members left: {}",
        shrunk.inputs.members
    );
}

/// Each member's length of the ragged arguments of a case (`None` for a
/// member whose ragged arguments disagree), and whether one is shared.
fn ragged_lengths(case: &Case) -> (Vec<Option<usize>>, bool) {
    let len = |v: &Json| v.as_array().map_or(0, Vec::len);
    let mut lengths: Vec<Option<usize>> = Vec::new();
    let mut shared = false;
    for (i, arg) in case
        .inputs
        .args
        .iter()
        .filter(|a| a.ty.is_ragged())
        .enumerate()
    {
        let of_member: Vec<usize> = match &arg.value {
            InputValue::Shared(v) => {
                shared = true;
                vec![len(v); case.inputs.members]
            }
            InputValue::Batched(vs) => vs.iter().map(len).collect(),
        };
        if i == 0 {
            lengths = of_member.into_iter().map(Some).collect();
        } else {
            for (l, n) in lengths.iter_mut().zip(of_member) {
                *l = l.filter(|&l| l == n);
            }
        }
    }
    (lengths, shared)
}

#[test]
fn ragged_inputs_give_each_member_its_own_length() {
    let (mut ragged, mut differing, mut shared, mut empty, mut long) = (0, 0, 0, 0, 0);
    for seed in SEEDS {
        let case = generate(seed);
        let (lengths, is_shared) = ragged_lengths(&case);
        if lengths.is_empty() {
            continue;
        }
        ragged += 1;
        assert!(
            lengths.iter().all(Option::is_some),
            "seed {seed}: a member's ragged arguments differ in length: {lengths:?}"
        );
        let lengths: Vec<usize> = lengths.into_iter().flatten().collect();
        assert!(lengths.iter().all(|&l| l <= 6), "seed {seed}: {lengths:?}");
        differing += usize::from(lengths.windows(2).any(|w| w[0] != w[1]));
        shared += usize::from(is_shared);
        empty += usize::from(lengths.contains(&0));
        long += usize::from(lengths.iter().any(|&l| l >= 5));
    }
    assert!(
        ragged >= SEEDS.count() / 4,
        "only {ragged} programs take ragged arrays"
    );
    assert!(
        differing >= ragged / 3,
        "only {differing} of {ragged} batches are ragged"
    );
    assert!(shared >= 5, "only {shared} cases share a ragged argument");
    assert!(
        empty >= 10 && long >= 5,
        "{empty} cases with empty, {long} with long arrays"
    );
}

/// Each member's `D` (the length of its `[f64; D]` arguments, of the rows
/// of its `[[f64; D]; L]` ones), if the entry takes such arguments
/// batched; `None` for a member whose arguments disagree.
fn inner_lengths(case: &Case) -> Vec<Option<usize>> {
    let mut lengths: Vec<Option<Option<usize>>> = vec![None; case.inputs.members];
    for arg in &case.inputs.args {
        let InputValue::Batched(values) = &arg.value else {
            continue;
        };
        for (m, value) in values.iter().enumerate() {
            let widths: Vec<usize> = match (arg.ty, value.as_array()) {
                (Ty::ColsRagged, Some(items)) => vec![items.len()],
                (Ty::GridRagged, Some(rows)) => rows
                    .iter()
                    .map(|r| r.as_array().map_or(0, Vec::len))
                    .collect(),
                _ => continue,
            };
            for w in widths {
                lengths[m] = match lengths[m] {
                    None => Some(Some(w)),
                    Some(seen) => Some(seen.filter(|&s| s == w)),
                };
            }
        }
    }
    lengths.into_iter().flatten().collect()
}

#[test]
fn the_second_ragged_dimension_is_each_members_own() {
    let (mut programs, mut differing) = (0, 0);
    for seed in SEEDS {
        let case = generate(seed);
        let lengths = inner_lengths(&case);
        if lengths.is_empty() {
            continue;
        }
        programs += 1;
        assert!(
            lengths.iter().all(Option::is_some),
            "seed {seed}: a member's `D` differs between its arguments: {lengths:?}"
        );
        differing += usize::from(lengths.windows(2).any(|w| w[0] != w[1]));
    }
    assert!(
        programs >= SEEDS.count() / 20,
        "only {programs} programs take `D` arrays batched"
    );
    assert!(
        differing >= programs / 3,
        "only {differing} of {programs} batches differ in `D`"
    );
}

#[test]
fn members_of_ragged_programs_fault_against_their_own_length() {
    let (mut out_of_bounds, mut result_lengths_differ) = (0, 0);
    for seed in SEEDS {
        let case = generate(seed);
        if ragged_lengths(&case).0.is_empty() {
            continue;
        }
        let source = format!("{}{}", "\n".repeat(HEADER_LINES), case.source());
        let results =
            oracle::reference_results(&source, &case.inputs.to_json().to_string(), case.limits)
                .unwrap_or_else(|why| panic!("seed {seed}: {why}"));
        let results = results.as_array().cloned().unwrap_or_default();
        let kinds: BTreeSet<&str> = results
            .iter()
            .map(|r| r["error"]["kind"].as_str().unwrap_or("ok"))
            .collect();
        if kinds.contains("index_out_of_bounds") && kinds.contains("ok") {
            out_of_bounds += 1;
        }
        let array_lengths: BTreeSet<usize> = results
            .iter()
            .filter_map(|r| r["ok"].as_array().map(Vec::len))
            .collect();
        if case.source().contains("-> [f64; L] {\n") || case.source().contains("-> [i64; L] {\n") {
            result_lengths_differ += usize::from(array_lengths.len() > 1);
        }
    }
    assert!(
        out_of_bounds >= 3,
        "only {out_of_bounds} ragged batches where a member is out of bounds beside one that is not"
    );
    assert!(
        result_lengths_differ >= 3,
        "only {result_lengths_differ} batches whose results differ in length"
    );
}

#[test]
fn conflicting_ragged_inputs_are_refused() {
    let mut refused = 0;
    for seed in SEEDS {
        let case = generate(seed);
        let Some(inputs) = autobatch_fuzz::generate::conflicting_inputs(&case) else {
            continue;
        };
        let message = oracle::refuses_inputs(&case, &inputs)
            .unwrap_or_else(|why| panic!("seed {seed}: {why}\n{}", case.source()));
        assert!(
            message.contains("shared") || message.contains("argument"),
            "{message}"
        );
        refused += 1;
    }
    assert!(refused >= 5, "only {refused} cases with conflicting inputs");
}

#[test]
fn the_shrinker_shortens_ragged_inputs() {
    // A stand-in for "still fails": two members of different lengths.
    let property = |case: &Case| {
        let lengths: Vec<usize> = ragged_lengths(case).0.into_iter().flatten().collect();
        lengths.iter().any(|&l| l != lengths[0]) && oracle::validate(case).is_ok()
    };
    let seed = SEEDS
        .clone()
        .find(|&s| {
            let case = generate(s);
            property(&case) && ragged_lengths(&case).0.iter().flatten().any(|&l| l >= 3)
        })
        .expect("some batch is ragged");
    let shrunk = shrink::shrink(&generate(seed), property);
    assert!(property(&shrunk));
    let lengths: Vec<usize> = ragged_lengths(&shrunk).0.into_iter().flatten().collect();
    assert_eq!(lengths.iter().max(), Some(&1), "{lengths:?}");
    assert_eq!(shrunk.inputs.members, 2);
}

#[test]
fn the_shrinker_narrows_the_second_ragged_dimension() {
    // A stand-in for "still fails": two members of different `D`.
    let property = |case: &Case| {
        let widths: Vec<usize> = inner_lengths(case).into_iter().flatten().collect();
        widths.iter().any(|&w| w != widths[0]) && oracle::validate(case).is_ok()
    };
    let seed = SEEDS
        .clone()
        .find(|&s| {
            let case = generate(s);
            property(&case) && inner_lengths(&case).iter().flatten().any(|&w| w >= 3)
        })
        .expect("some batch differs in `D`");
    let shrunk = shrink::shrink(&generate(seed), property);
    assert!(property(&shrunk));
    let widths: Vec<usize> = inner_lengths(&shrunk).into_iter().flatten().collect();
    assert_eq!(widths.iter().max(), Some(&1), "{widths:?}");
    assert_eq!(shrunk.inputs.members, 2);
}

/// About 15% of the programs are scalar programs
/// ([`autobatch_fuzz::generate::scalar_program`]): no array anywhere, no
/// fork, catching call, random draw, host primitive, static or helper,
/// so that the lock-step strategy compiles them (the other programs it
/// leaves to an interpreter); and they still call, recurse, loop, fault
/// and assert.
#[test]
fn scalar_programs_are_compiled_in_lock_step() {
    let scalar: Vec<u64> = SEEDS
        .filter(|&s| autobatch_fuzz::generate::scalar_program(s))
        .collect();
    assert!(
        (SEEDS.count() / 10..=SEEDS.count() / 5).contains(&scalar.len()),
        "{} scalar programs of {}",
        scalar.len(),
        SEEDS.count()
    );
    let lockstep =
        autobatch::Strategy::from_name("native-lockstep").expect("the lock-step strategy");
    let sources: Vec<String> = scalar.iter().map(|&s| generate(s).source()).collect();
    let all = sources.join("\n");
    for (seed, source) in scalar.iter().zip(&sources) {
        let forbidden = [
            "[",
            "catch(",
            "join(",
            "map(",
            "pfor",
            "uniform",
            "normal",
            "bernoulli",
            "host_",
            "static",
            "grad(",
            "jacobian(",
            ".len()",
        ];
        let found: Vec<&str> = forbidden
            .into_iter()
            .filter(|f| source.contains(f))
            .collect();
        assert!(found.is_empty(), "seed {seed} has {found:?}:\n{source}");
    }
    for construct in [
        "(d - 1)",
        "break;",
        "continue;",
        "return ",
        "assert!(",
        " / ",
        " % ",
        "while ",
        "for ",
        "loop {",
        ": bool",
        "(i64, f64)",
        ": i32",
        ": usize",
        ": f32",
    ] {
        assert!(
            all.contains(construct),
            "no scalar program has {construct:?}"
        );
    }
    for &seed in &scalar {
        let stats = oracle::stats(&generate(seed), lockstep)
            .unwrap_or_else(|why| panic!("seed {seed}: {why}"));
        let report = &stats[lockstep.name()];
        assert_eq!(
            report["compiled"],
            Json::Bool(true),
            "seed {seed}: not compiled for lock-step: {report}\n{}",
            generate(seed).source()
        );
    }
}

/// Some recursive `i64` functions end with `e + self(d - k, ..)` or
/// `e * self(d - k, ..)`, which native code makes a jump back to the
/// function's entry (`tail_calls` in its report): the programs' checks on
/// every strategy then cover that code, its depth limits and its steps.
#[test]
fn folded_self_calls_are_generated_and_made_jumps() {
    let folded = |source: &str| {
        (0..8).any(|f| {
            let name = if f == 0 {
                "main".to_owned()
            } else {
                format!("f{f}")
            };
            [" + ", " * "]
                .iter()
                .any(|op| source.contains(&format!("{op}{name}((d - ")))
        })
    };
    let seeds: Vec<u64> = SEEDS.filter(|&s| folded(&generate(s).source())).collect();
    assert!(
        seeds.len() >= SEEDS.count() / 50,
        "{} programs of {} have a folded self call",
        seeds.len(),
        SEEDS.count()
    );
    let native = autobatch::Strategy::from_name("native").expect("the native strategy");
    let jumps = seeds
        .iter()
        .filter(|&&seed| {
            let stats = oracle::stats(&generate(seed), native)
                .unwrap_or_else(|why| panic!("seed {seed}: {why}"));
            stats[native.name()]["tail_calls"]
                .as_u64()
                .is_some_and(|n| n > 0)
        })
        .count();
    assert!(jumps > 0, "no folded self call of {seeds:?} became a jump");
}

/// Many programs have a loop without calls or loops inside it, whose
/// native code tests the step limit once per pass (`fast_loops` in its
/// report), and some of those run under a step limit low enough to stop
/// members inside it: the programs' checks on every strategy then cover
/// the pass's dispatch and the stop at the very block the reference stops.
#[test]
fn simple_loops_are_generated_and_tested_once_per_pass() {
    let native = autobatch::Strategy::from_name("native").expect("the native strategy");
    let fast: Vec<u64> = SEEDS
        .filter(|&seed| {
            let stats = oracle::stats(&generate(seed), native)
                .unwrap_or_else(|why| panic!("seed {seed}: {why}"));
            stats[native.name()]["fast_loops"]
                .as_u64()
                .is_some_and(|n| n > 0)
        })
        .collect();
    assert!(
        fast.len() >= SEEDS.count() / 10,
        "{} programs of {} have a loop tested once per pass",
        fast.len(),
        SEEDS.count()
    );
    let usual = autobatch_fuzz::generate::USUAL_LIMITS.max_steps;
    let limited = fast
        .iter()
        .filter(|&&seed| generate(seed).limits.max_steps < usual)
        .count();
    assert!(limited > 0, "none of {fast:?} runs under a low step limit");
}

/// Some programs compute a chain between two products with the static
/// `M` (`vecmat(f(matvec(M, v)) op u, M)`), and some of those run it fused
/// with both products (`chains_between_products` in program-counter's
/// report): the programs' checks on every strategy then cover that path.
#[test]
fn chains_between_products_are_generated_and_run_fused() {
    let pc = autobatch::Strategy::ProgramCounter;
    let between: Vec<u64> = SEEDS
        .filter(|&seed| {
            let source = generate(seed).source();
            ["sigmoid(matvec(M, ", "softplus(matvec(M, ", "(matvec(M, "]
                .iter()
                .any(|f| source.contains(&format!("vecmat(({f}")))
        })
        .collect();
    assert!(
        between.len() >= SEEDS.count() / 50,
        "{} programs of {} have a product of M after a chain",
        between.len(),
        SEEDS.count()
    );
    let fused = between
        .iter()
        .filter(|&&seed| {
            let stats = oracle::stats(&generate(seed), pc)
                .unwrap_or_else(|why| panic!("seed {seed}: {why}"));
            stats[pc.name()]["chains_between_products"]
                .as_u64()
                .is_some_and(|n| n > 0)
        })
        .count();
    assert!(
        fused > 0,
        "no chain of {between:?} ran between its products"
    );
}

/// The seeds whose programs' sources the coverage tests read (generating a
/// program is cheap; some builtins are drawn rarely, so that a change to
/// what the generator draws elsewhere does not leave them out of a short
/// range).
const COVERAGE_SEEDS: std::ops::Range<u64> = 0..1000;

/// Every builtin of the operation table appears in the programs of
/// [`COVERAGE_SEEDS`]: a builtin added to the table without the generator
/// learning it fails here.
#[test]
fn every_builtin_of_the_table_is_generated() {
    let all: String = COVERAGE_SEEDS.map(|seed| generate(seed).source()).collect();
    let called = |name: &str, method: bool| {
        let needle = if method {
            format!(").{name}(")
        } else {
            format!("{name}(")
        };
        all.match_indices(&needle).any(|(at, _)| {
            method
                || !all[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
        })
    };
    let missing: Vec<&str> = autobatch::ops::Builtin::ALL
        .iter()
        .filter(|b| {
            let spelling = b.spelling();
            let as_method = spelling.method().is_some_and(|m| called(m, true));
            let as_function = spelling.function().is_some_and(|f| called(f, false));
            !(as_method || as_function)
        })
        .map(|b| b.name())
        .collect();
    assert!(missing.is_empty(), "no generated program calls {missing:?}");
}

#[test]
fn every_library_function_of_the_generator_is_generated() {
    let all: String = COVERAGE_SEEDS.map(|seed| generate(seed).source()).collect();
    let missing: Vec<&str> = autobatch_fuzz::generate::LIBRARY
        .iter()
        .map(|(name, _)| *name)
        .chain(
            autobatch_fuzz::generate::LIBRARY_TWINS
                .iter()
                .map(|(_, twin)| *twin),
        )
        .filter(|name| !all.contains(&format!("{name}(")))
        .collect();
    assert!(missing.is_empty(), "no generated program calls {missing:?}");
}
