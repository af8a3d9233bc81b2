//! What the tests of the command share: the built binary, run as root or
//! as the unprivileged user `nobody`, scratch directories, and the checks
//! of an error line.

// Each test file uses its own part of these.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scratch directory of its own for each test, removed on drop.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(test_name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("autobatch-cli-{}-{test_name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch { dir }
    }

    pub fn file(&self, name: &str, contents: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).expect("write a scratch file");
        path.to_string_lossy().into_owned()
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn autobatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autobatch"))
        .args(args)
        .output()
        .expect("run the autobatch binary")
}

/// Runs the command in `dir` with `input` on its standard input.
pub fn autobatch_with_input(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_autobatch"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the autobatch binary");
    let mut stdin = child.stdin.take().expect("standard input");
    stdin.write_all(input).expect("write standard input");
    drop(stdin);
    child.wait_with_output().expect("wait for autobatch")
}

/// Runs the command in `dir` as the user `nobody` (`setpriv`), or says
/// why it cannot (this process is not root, or `setpriv` is missing): the
/// caller then skips what depends on it, printing the reason.
pub fn autobatch_as_nobody(dir: &Path, args: &[&str]) -> Result<Output, String> {
    // SAFETY: `geteuid` only reads this process's effective user id.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root, so the command cannot be run as another user".into());
    }
    Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_autobatch"))
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run setpriv: {e}"))
}

/// Gives `path` (and, for a directory, what is directly in it) to `nobody`.
pub fn give_to_nobody(path: &Path) {
    const NOBODY: u32 = 65534;
    let chown = |p: &Path| std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).expect("chown");
    chown(path);
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read the directory") {
            chown(&entry.expect("an entry").path());
        }
    }
}

/// The names in `dir`, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Exit code 2 and exactly one stderr line, `error: ...`, containing `text`.
pub fn assert_one_line_error(output: &Output, text: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "exit code; stderr:\n{err}");
    assert!(
        err.starts_with("error: "),
        "stderr must start with `error: `:\n{err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "stderr must be one line:\n{err}"
    );
    assert!(err.contains(text), "stderr lacks {text:?}:\n{err}");
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    assert!(
        output.stdout.is_empty(),
        "nothing on stdout after an error: {}",
        stdout(output)
    );
}
