//! What the command says: flags' values out of range name the range,
//! input errors name the file, the argument, what was expected and what
//! was found (a number as written), no message names an internal
//! function, every error starts `error:`, and the help and the README's
//! synopsis list the same commands and flags.

use std::collections::BTreeSet;
use std::process::Output;

mod common;
use common::{assert_one_line_error, autobatch, stderr, stdout, Scratch};

const PREDICT: &str = "\
extern \"autobatch\" {
    static W: f64;
}
fn predict(x: f64, n: i64) -> f64 { W * x + (n as f64) }
fn shaped(v: [i64; 2], t: (f64, i32)) -> i64 { v[0] + (t.1 as i64) }
";

/// `run` of `entry` of PREDICT on `inputs` (written to `in.json`).
fn run_predict(scratch: &Scratch, entry: &str, inputs: &str, extra: &[&str]) -> (Output, String) {
    let program = scratch.file("predict.ab", PREDICT);
    let path = scratch.file("in.json", inputs);
    let args = ["run", &program, "--entry", entry, "--inputs", &path];
    (autobatch(&[&args[..], extra].concat()), path)
}

/// No message may name what the compiler made rather than what the user wrote.
fn assert_no_internal_name(output: &Output) {
    let err = stderr(output);
    for internal in ["'", "@", "vjp", "sgrad"] {
        assert!(!err.contains(internal), "{internal:?} in: {err}");
    }
}

#[test]
fn negative_and_zero_counts_name_the_range() {
    let scratch = Scratch::new("counts");
    let inputs = r#"{"batch": {"x": [1.0], "n": [1]}, "shared": {"W": 2.0}}"#;
    let max = u64::MAX.to_string();
    for (flag, value, range) in [
        ("--seed", "-1", format!("from 0 to {max}")),
        ("--max-steps", "0", format!("from 1 to {max}")),
        ("--max-steps", "-3", format!("from 1 to {max}")),
        ("--max-stack-depth", "0", "from 1 to".to_string()),
        ("--max-instances", "-1", "from 1 to".to_string()),
        ("--threads", "-2", "between 1 and".to_string()),
    ] {
        let (output, _) = run_predict(&scratch, "predict", inputs, &[flag, value]);
        assert_one_line_error(&output, flag);
        let err = stderr(&output);
        assert!(err.contains(&range), "{flag} {value}: {err}");
        assert!(!err.contains("tip"), "{flag} {value}: {err}");
    }
    // Both limits give the reason they must be at least 1.
    let (output, _) = run_predict(&scratch, "predict", inputs, &["--max-steps", "0"]);
    assert_one_line_error(&output, "at least one step");

    let model = scratch.file(
        "m.ab",
        "fn log_density(theta: [f64; 1]) -> f64 { -theta[0] * theta[0] }\n",
    );
    let data = scratch.file("data.json", "{}");
    for (flag, value, range) in [
        ("--chains", "-1", "from 1 to"),
        ("--max-depth", "-1", "from 1 to 30"),
        ("--warmup", "-5", "from 0 to 2147483647"),
        ("--seed", "-1", "from 0 to"),
        ("--target-accept", "-0.5", "strictly between 0 and 1"),
    ] {
        let output = autobatch(&["sample", &model, "--data", &data, flag, value]);
        assert_one_line_error(&output, flag);
        assert!(
            stderr(&output).contains(range),
            "{flag} {value}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn inputs_that_are_not_an_object_say_what_is_expected() {
    let scratch = Scratch::new("top_level");
    for (inputs, found) in [
        ("[1, 2]", "found a list of 2 values"),
        ("  7.50", "found 7.50"),
        ("\"batch\"", "found the string \"batch\""),
    ] {
        let (output, path) = run_predict(&scratch, "predict", inputs, &[]);
        assert_one_line_error(
            &output,
            &format!("{path}: the inputs must be a JSON object"),
        );
        let err = stderr(&output);
        assert!(err.contains(r#"the keys "batch" and "shared""#), "{err}");
        assert!(err.contains(found), "{err}");
        assert!(!err.contains("column 0"), "{err}");
    }
}

/// A number is quoted as the user wrote it, wherever it is.
#[test]
fn numbers_are_quoted_as_written() {
    let scratch = Scratch::new("numbers");
    for (entry, inputs, quoted) in [
        (
            "predict",
            r#"{"batch": {"x": [1.0], "n": [99999999999999999999]}, "shared": {"W": 2}}"#,
            "argument `n` of member 0 must be an integer that fits i64, found 99999999999999999999,",
        ),
        (
            "predict",
            r#"{"batch": {"x": [1.0, 2.0], "n": [1, 1.50e0]}, "shared": {"W": 2}}"#,
            "argument `n` of member 1 must be an integer (i64), found 1.50e0\n",
        ),
        (
            "predict",
            r#"{"batch": {"x": [1.0], "n": 1.0e3}, "shared": {"W": 2}}"#,
            "batched argument `n` must be a list with one value per member, found 1.0e3",
        ),
        (
            "shaped",
            r#"{"shared": {"v": [1, 12345678901234567890123], "t": [0.5, 2], "W": 1}}"#,
            "argument `v`: `v[1]` must be an integer that fits i64, found 12345678901234567890123,",
        ),
        (
            "shaped",
            r#"{"batch": {"v": [[1, 2]], "t": [[0.5, 3.0e9]]}, "shared": {"W": 1}}"#,
            "argument `t` of member 0: `t.1` must be an integer that fits i32, found 3.0e9,",
        ),
        (
            "shaped",
            r#"{"batch": {"v": [[1, 2]], "t": [[0.5, 1]]}, "shared": {"W": true}}"#,
            "static `W` must be a number (f64)",
        ),
    ] {
        let (output, path) = run_predict(&scratch, entry, inputs, &[]);
        assert_one_line_error(&output, &format!("{path}: "));
        let err = stderr(&output);
        assert!(err.contains(quoted), "{err}");
        assert!(!err.contains("e+"), "{err}");
    }
}

/// Every error about what the inputs hold names the file first; one about
/// the request does not blame it.
#[test]
fn input_errors_name_the_file_the_input_and_what_was_found() {
    let scratch = Scratch::new("input_errors");
    for inputs in [
        r#"{"batch": {"x": [1.0]}, "shared": {"W": 2.0}}"#,
        r#"{"batch": {"x": [1.0], "n": [1], "k": [2]}, "shared": {"W": 2.0}}"#,
        r#"{"batch": {"x": [1.0], "n": [1]}}"#,
        r#"{"batch": {"x": [[1.0]], "n": [1]}, "shared": {"W": 2.0}}"#,
        r#"{"batch": {"x": [1.0], "n": [1, 2]}, "shared": {"W": 2.0}}"#,
        r#"{"batch": {"x": [1.0], "n": [1]}, "shared": {"W": 2.0}, "extra": 1}"#,
    ] {
        let (output, path) = run_predict(&scratch, "predict", inputs, &[]);
        assert_one_line_error(&output, &format!("error: {path}: "));
    }
    let good = r#"{"batch": {"x": [1.0], "n": [1]}, "shared": {"W": 2.0}}"#;
    let (output, path) = run_predict(&scratch, "missing", good, &[]);
    assert_one_line_error(&output, "no function named `missing`");
    assert!(!stderr(&output).contains(&path), "{}", stderr(&output));
}

/// With `--grad-statics`, the messages about the inputs name the user's
/// entry, never the gradient function derived from it.
#[test]
fn gradient_runs_name_the_users_function() {
    let scratch = Scratch::new("grad_names");
    for (inputs, wanted) in [
        (
            r#"{"batch": {"x": [1.0]}, "shared": {"W": 2.0}}"#,
            "missing argument `n` of `predict`",
        ),
        (
            r#"{"batch": {"x": [1.0], "n": [1], "m": [3]}, "shared": {"W": 2.0}}"#,
            "`m` in `batch` is not a parameter of `predict` (the parameters of `predict` are: x, n)",
        ),
        (
            r#"{"batch": {"x": [1.0], "n": [1]}, "shared": {"W": 2.0, "q": 1}}"#,
            "`q` in `shared` is neither a parameter of `predict` nor a static",
        ),
    ] {
        let (output, _) = run_predict(&scratch, "predict", inputs, &["--grad-statics", "W"]);
        assert_one_line_error(&output, wanted);
        assert_no_internal_name(&output);
    }
}

/// A program that does not compile gets `error:` too, as every other error.
#[test]
fn every_error_starts_the_same_way() {
    let scratch = Scratch::new("spelling");
    let program = scratch.file(
        "bad.ab",
        "fn f() -> i64 {\n    let y: i64 = true;\n    y\n}\n",
    );
    let output = autobatch(&["check", &program]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("Error:"), "{err}");
}

#[test]
fn run_help_is_true_and_fits_a_terminal() {
    let output = autobatch(&["run", "--help"]);
    let help = stdout(&output);
    assert!(help.contains("--profile <FILE.svg|FILE.png>"), "{help}");
    for line in help.lines() {
        assert!(
            line.chars().count() <= 100,
            "a line of {} characters: {line}",
            line.chars().count()
        );
    }
    for strategy in [
        "reference",
        "local-static",
        "program-counter",
        "native",
        "native-batched",
        "native-lockstep",
    ] {
        let starts = help
            .lines()
            .filter(|l| l.trim_start().starts_with(&format!("- {strategy}: ")))
            .count();
        assert_eq!(starts, 1, "one line for {strategy}:\n{help}");
    }
}

/// The `--flag`s of `text`, without `--help` and `--version`, which every
/// command has.
fn flags(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        let follows_word = text[..i].ends_with(|c: char| c.is_alphanumeric());
        if !name.is_empty() && !follows_word && name != "help" && name != "version" {
            found.insert(format!("--{name}"));
        }
    }
    found
}

/// The flags each command's `--help` lists in its options.
fn help_flags(command: &str) -> BTreeSet<String> {
    let help = stdout(&autobatch(&[command, "--help"]));
    let options = help.split("Options:").nth(1).unwrap_or("");
    let option_lines: String = options
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .map(|l| l.trim_start().split("  ").next().unwrap_or("").to_string() + "\n")
        .collect();
    flags(&option_lines)
}

/// The commands `autobatch --help` lists (but `help`).
fn help_commands() -> Vec<String> {
    let help = stdout(&autobatch(&["--help"]));
    let commands = help.split("Commands:").nth(1).unwrap_or("");
    commands
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect()
}

/// The synopsis of `document`: the first code block after `heading`, by
/// command (a line `autobatch COMMAND ...` starts one; the lines after it
/// continue it).
fn synopsis(document: &str, heading: &str) -> Vec<(String, BTreeSet<String>)> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(document),
    )
    .expect("read the document");
    let after = text.split(heading).nth(1).expect("the heading");
    let block = after.split("```").nth(1).expect("a code block");
    let mut commands: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some("autobatch") {
            let command = words.next().unwrap_or("").to_string();
            commands.push((command, String::new()));
        }
        if let Some((_, text)) = commands.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    commands
        .into_iter()
        .map(|(command, text)| (command, flags(&text)))
        .collect()
}

/// The README's synopsis and `docs/language.md`'s list every command and
/// every flag `--help` lists, and nothing else.
#[test]
fn the_synopses_list_what_help_lists() {
    let commands = help_commands();
    assert_eq!(commands, ["check", "ir", "run", "sample", "train"]);
    for (document, heading) in [
        ("README.md", "## The command"),
        ("docs/language.md", "## 13. The command line"),
    ] {
        let listed = synopsis(document, heading);
        let listed_commands: Vec<&str> = listed.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(listed_commands, commands, "the commands of {document}");
        for (command, flags) in &listed {
            assert_eq!(
                flags,
                &help_flags(command),
                "{document}'s synopsis of `{command}` against `autobatch {command} --help`"
            );
        }
    }
}
