//! Tidiness of the repository, checked on every test run: every crate has
//! its heading in `ARCHITECTURE.md` and every module of a crate is named in
//! that crate's section; every Rust file opens with a `//!` doc saying what
//! it is for; no function in `crates/*/src` is longer than a reader can
//! hold in their head and no file is longer than a reader can find their way
//! in, but for the few named exceptions below.

use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    todo.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn crates() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repository().join("crates"))
        .expect("crates/")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The text of `crate_name`'s section of ARCHITECTURE.md, if it has one.
fn section<'a>(architecture: &'a str, crate_name: &str) -> Option<&'a str> {
    let heading = format!("### `crates/{crate_name}`");
    let start = architecture.find(&heading)?;
    let rest = &architecture[start + heading.len()..];
    let end = rest
        .find("\n## ")
        .into_iter()
        .chain(rest.find("\n### "))
        .min();
    Some(&rest[..end.unwrap_or(rest.len())])
}

/// The modules of a crate: each file of `src/` but the crate roots, named
/// by its path from `src/` (`stack/verify.rs` is `stack::verify`,
/// `stack/mod.rs` is `stack`).
fn modules(crate_dir: &Path) -> Vec<String> {
    let src = crate_dir.join("src");
    rust_files(&src)
        .into_iter()
        .filter_map(|file| {
            let relative = file.strip_prefix(&src).ok()?.with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
                return None;
            }
            if parts.first().is_some_and(|p| p == "bin") {
                return None;
            }
            Some(parts.join("::"))
        })
        .collect()
}

#[test]
fn every_crate_and_module_is_mapped_in_architecture() {
    let architecture =
        std::fs::read_to_string(repository().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut missing = Vec::new();
    for name in crates() {
        let Some(text) = section(&architecture, &name) else {
            missing.push(format!(
                "crate `crates/{name}` has no `### `crates/{name}`` heading"
            ));
            continue;
        };
        for module in modules(&repository().join("crates").join(&name)) {
            // Named in full (`stack::verify`) or by its last part in backticks.
            let last = module.rsplit("::").next().unwrap_or(&module);
            let named = text.contains(&format!("`{module}`"))
                || text.contains(&format!("`{last}`"))
                || text.contains(&format!("{module}::"))
                || text.contains(&format!("`{module}.rs`"));
            if !named {
                missing.push(format!("module `{module}` of crates/{name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not mapped in ARCHITECTURE.md (add them to the crate's section):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let root = repository();
    let mut undocumented = Vec::new();
    for dir in ["crates", "fuzz"] {
        for file in rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            if !first.starts_with("//!") {
                undocumented.push(
                    file.strip_prefix(&root)
                        .unwrap_or(&file)
                        .display()
                        .to_string(),
                );
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "files without a `//!` doc on their first line:\n  {}",
        undocumented.join("\n  ")
    );
}

/// The most lines a function in `crates/*/src` may span, from `fn` to its
/// closing brace.
const MOST_FUNCTION_LINES: usize = 100;

/// A function allowed to be longer than [`MOST_FUNCTION_LINES`], and why.
struct LongFunction {
    file: &'static str,
    function: &'static str,
    why: &'static str,
}

/// The functions allowed to be longer: generated tables and printers (a
/// list read one entry at a time), and the ones whose files other work is
/// changing at present. Each `why` is for the reader of this list.
const LONG_FUNCTIONS: &[LongFunction] = &[
    LongFunction {
        file: "crates/fuzz/src/ast.rs",
        function: "write_expr",
        why: "a printer: one arm per kind of expression",
    },
    LongFunction {
        file: "crates/ir/src/prim.rs",
        function: "result_type",
        why: "a table: one arm per kind of operation signature",
    },
    LongFunction {
        file: "crates/autodiff/src/rules.rs",
        function: "unary_adjoint",
        why: "a table: one derivative rule per operation",
    },
    LongFunction {
        file: "crates/autodiff/src/rules.rs",
        function: "binary_adjoint",
        why: "a table: one derivative rule per operation",
    },
];

/// The most lines a file in `crates/*/src` may have.
const MOST_FILE_LINES: usize = 1500;

/// The files allowed to be longer: the random-program generator, one
/// generator per kind of statement and expression that the language has.
const LONG_FILES: &[&str] = &["crates/fuzz/src/generate.rs"];

/// Every `.rs` file under `crates/*/src`, by its path from the repository.
fn source_files() -> Vec<(String, PathBuf)> {
    let root = repository();
    crates()
        .into_iter()
        .flat_map(|name| rust_files(&root.join("crates").join(name).join("src")))
        .map(|file| {
            let relative = file.strip_prefix(&root).unwrap_or(&file);
            let relative = relative.display().to_string().replace('\\', "/");
            (relative, file)
        })
        .collect()
}

/// A function's name and the lines it spans.
struct FunctionSpan {
    name: String,
    lines: usize,
}

/// Collects every function with a body (free, in an `impl`, a trait's
/// default, nested) with the lines from `fn` to its closing brace.
#[derive(Default)]
struct Functions(Vec<FunctionSpan>);

impl Functions {
    fn add(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let first = sig.fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        self.0.push(FunctionSpan {
            name: sig.ident.to_string(),
            lines: last + 1 - first,
        });
    }
}

impl<'ast> syn::visit::Visit<'ast> for Functions {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.add(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.add(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.add(&f.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_is_longer_than_a_reader_can_hold() {
    let mut long = Vec::new();
    let mut allowed_seen = Vec::new();
    for (relative, file) in source_files() {
        let text = std::fs::read_to_string(&file).expect("a source file");
        let syntax =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("{relative} does not parse: {e}"));
        let mut functions = Functions::default();
        syn::visit::Visit::visit_file(&mut functions, &syntax);
        for f in functions.0 {
            if f.lines <= MOST_FUNCTION_LINES {
                continue;
            }
            let allowed = LONG_FUNCTIONS
                .iter()
                .any(|long| long.file == relative && long.function == f.name);
            if allowed {
                allowed_seen.push((relative.clone(), f.name));
            } else {
                long.push(format!("{relative}: `{}` ({} lines)", f.name, f.lines));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MOST_FUNCTION_LINES} lines (split them into named phases):\n  {}",
        long.join("\n  ")
    );
    let stale: Vec<String> = LONG_FUNCTIONS
        .iter()
        .filter(|long| {
            !allowed_seen
                .iter()
                .any(|(file, name)| file == long.file && name == long.function)
        })
        .map(|long| format!("{}: `{}` ({})", long.file, long.function, long.why))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed to be long but no longer are (take them off LONG_FUNCTIONS):\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn no_file_is_longer_than_a_reader_can_find_their_way_in() {
    let mut long = Vec::new();
    for (relative, file) in source_files() {
        let lines = std::fs::read_to_string(&file)
            .expect("a source file")
            .lines()
            .count();
        if lines > MOST_FILE_LINES && !LONG_FILES.contains(&relative.as_str()) {
            long.push(format!("{relative} ({lines} lines)"));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MOST_FILE_LINES} lines (split them by what their parts are for):\n  {}",
        long.join("\n  ")
    );
}
