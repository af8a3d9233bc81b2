//! The fast subset of the posteriordb check (the posteriors whose
//! `check.json` says `"fast": true`), run by the same code as
//! `tools/posteriordb_check --fast`: every one must pass.

use autobatch_posteriordb::{check, examples_dir, list, summary_line, table, Tolerance};

#[test]
fn fast_posteriors_match_their_references() {
    let root = examples_dir();
    let names = list(&root, true).expect("examples/posteriordb");
    assert!(
        names.len() >= 10,
        "the fast subset has only {} posteriors: {names:?}",
        names.len()
    );
    let tolerance = Tolerance::default();
    let outcomes: Vec<_> = names
        .iter()
        .map(|name| check(&root, name, &tolerance))
        .collect();
    let report = format!("{}{}", table(&outcomes), summary_line(&outcomes));
    println!("{report}");
    assert!(outcomes.iter().all(|o| o.passed), "{report}");
}

/// The command: an unknown posterior is an error in its line of the table,
/// counted as not passed, and the exit status says so.
#[test]
fn the_command_reports_what_it_cannot_check() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_posteriordb_check"))
        .arg("no_such_posterior")
        .output()
        .expect("posteriordb_check runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("no_such_posterior") && stdout.contains("error: no posterior"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some("0 of 1 posteriors passed"));
}
