//! Tidiness of the repository, checked on every test run: every crate has
//! its heading in `ARCHITECTURE.md` and every module of a crate is named in
//! that crate's section; every Rust file opens with a `//!` doc saying what
//! it is for.

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
