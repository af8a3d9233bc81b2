//! The fields `--stats` writes are the fields `docs/language.md` documents,
//! both ways: the tables of section 16 (`run --stats` and `sample
//! --stats`) are read from the markdown and compared with the JSON the
//! command writes, under every strategy.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const STRATEGIES: [&str; 6] = [
    "reference",
    "local-static",
    "program-counter",
    "native",
    "native-batched",
    "native-lockstep",
];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn autobatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autobatch"))
        .args(args)
        .output()
        .expect("run autobatch")
}

/// The rows of the first table under the heading `heading` of
/// `docs/language.md`: per row, its cells.
fn documented_rows(heading: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(repository().join("docs/language.md")).unwrap();
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("docs/language.md has no heading {heading}"));
    let section = &text[start + heading.len()..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let rows: Vec<Vec<String>> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        // The header and the separator.
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    assert!(!rows.is_empty(), "no table under {heading}");
    rows
}

/// The names in backticks in `cell`.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The top-level fields a table documents: the names in its rows' first
/// cells (`op_counts[].op` and the like describe a field's parts).
fn documented_fields(rows: &[Vec<String>]) -> BTreeSet<String> {
    rows.iter()
        .flat_map(|row| backticked(&row[0]))
        .filter(|name| !name.contains('[') && !name.contains('.'))
        .collect()
}

/// Asserts that the written and documented fields are the same.
fn assert_same(written: &BTreeSet<String>, documented: &BTreeSet<String>, what: &str) {
    let undocumented: Vec<_> = written.difference(documented).collect();
    let unwritten: Vec<_> = documented.difference(written).collect();
    assert!(
        undocumented.is_empty() && unwritten.is_empty(),
        "{what}: written but not documented: {undocumented:?}; documented but not written: {unwritten:?}"
    );
}

fn keys(object: &serde_json::Value) -> BTreeSet<String> {
    object
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn run_stats_fields_are_the_documented_ones() {
    let root = repository();
    let program = root.join("examples/fib.ab");
    let inputs = root.join("examples/fib.json");
    let mut written = BTreeSet::new();
    for strategy in STRATEGIES {
        let output = autobatch(&[
            "run",
            program.to_str().unwrap(),
            "--entry",
            "fib",
            "--inputs",
            inputs.to_str().unwrap(),
            "--strategy",
            strategy,
            "--stats",
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{strategy}: {stderr}");
        let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        written.extend(keys(&document["stats"]));
    }
    let rows = documented_rows("### `autobatch run --stats`");
    assert_same(&written, &documented_fields(&rows), "run --stats");
}

#[test]
fn sample_stats_fields_are_the_documented_ones() {
    let root = repository();
    let model = root.join("examples/normal.ab");
    let data = root.join("examples/normal.json");
    let dir = std::env::temp_dir().join(format!("autobatch-stats-fields-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut written = BTreeSet::new();
    let mut summary_keys = BTreeSet::new();
    for strategy in STRATEGIES {
        let stats = dir.join(format!("{strategy}.json"));
        let output = autobatch(&[
            "sample",
            model.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--chains",
            "2",
            "--warmup",
            "20",
            "--draws",
            "20",
            "--strategy",
            strategy,
            "--stats",
            stats.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{strategy}: {stderr}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        written.extend(keys(&json));
        for row in json["summary"].as_array().unwrap() {
            summary_keys.extend(keys(row));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let rows = documented_rows("### `autobatch sample --stats STATS.json`");
    assert_same(&written, &documented_fields(&rows), "sample --stats");
    // The summary's row names every field of a parameter's summary.
    let summary = rows
        .iter()
        .find(|row| row[0] == "`summary`")
        .expect("a row for `summary`");
    let described: BTreeSet<String> = backticked(&summary[1]).into_iter().collect();
    let missing: Vec<_> = summary_keys.difference(&described).collect();
    assert!(
        missing.is_empty(),
        "summary fields not documented: {missing:?}"
    );
}
