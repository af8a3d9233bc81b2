//! `posteriordb_check [--fast] [--json FILE] [NAME ...]`: checks the
//! posteriors of `examples/posteriordb` against posteriordb's reference
//! posteriors (see the library), prints the table and, as the last line,
//! `N of M posteriors passed`. Exits 0 when every posterior passed, 1 when
//! some did not, 2 on bad arguments or files.

use std::path::PathBuf;
use std::process::ExitCode;

use autobatch_posteriordb::{check, examples_dir, list, summary_line, table, to_json, Tolerance};
use clap::Parser;

/// Samples posteriordb's posteriors with their models in examples/posteriordb
/// and compares each parameter with the reference posterior: mean within
/// 0.1 reference sd + 3 MCSE, sd within 10%, R-hat below 1.01.
#[derive(Parser)]
#[command(name = "posteriordb_check")]
struct Args {
    /// Only the posteriors whose check.json says `"fast": true`.
    #[arg(long)]
    fast: bool,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The directory of the posteriors.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The posteriors to check (directory names); all that have a model.ab
    /// when none is given.
    names: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let root = args.root.unwrap_or_else(examples_dir);
    let names = if args.names.is_empty() {
        match list(&root, args.fast) {
            Ok(names) => names,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        args.names
    };
    let tolerance = Tolerance::default();
    let mut outcomes = Vec::new();
    for name in &names {
        eprintln!("checking {name}");
        outcomes.push(check(&root, name, &tolerance));
    }
    print!("{}", table(&outcomes));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&to_json(&outcomes, &tolerance))
            .expect("JSON of numbers and strings");
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    println!("{}", summary_line(&outcomes));
    if outcomes.iter().all(|o| o.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
