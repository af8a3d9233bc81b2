//! Where the command's outputs go: `-`, symbolic links (to files, to
//! nothing, to standard output), devices, FIFOs, a file's permissions,
//! owner and other hard links, read-only directories. Each output is the
//! path's target, written; nothing beside it is created, renamed or
//! removed. Cases whose outcome depends on permissions run the command as
//! `nobody`, or are skipped with the reason printed when that is impossible.

use std::fs;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::process::Output;

mod common;
use common::{
    assert_one_line_error, autobatch, autobatch_as_nobody, autobatch_with_input, give_to_nobody,
    listing, stderr, stdout, Scratch,
};

const FIB: &str = "fn fib(n: i64) -> i64 { if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) } }\n";
const INPUTS: &str = r#"{"batch": {"n": [5]}}"#;
const RESULTS: &str = "{\"results\":[{\"ok\":8}]}\n";

/// `run` of `fib` on `INPUTS` in the scratch directory, writing `--output`
/// to `to` (relative to the directory).
fn run_to(scratch: &Scratch, to: &str) -> Output {
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", INPUTS);
    let args = [
        "run", &program, "--entry", "fib", "--inputs", &inputs, "--output", to,
    ];
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_autobatch"));
    command.args(args).current_dir(&scratch.dir);
    command.output().expect("run the autobatch binary")
}

/// The `run` arguments with `--output to`, for running as `nobody` in the
/// scratch directory (given to `nobody`).
fn nobody_args(to: &str) -> Vec<String> {
    [
        "run",
        "fib.ab",
        "--entry",
        "fib",
        "--inputs",
        "inputs.json",
        "--output",
        to,
    ]
    .map(String::from)
    .to_vec()
}

/// Prepares the scratch directory for `nobody`: the program and inputs
/// written, everything given to `nobody`.
fn for_nobody(scratch: &Scratch) {
    scratch.file("fib.ab", FIB);
    scratch.file("inputs.json", INPUTS);
    give_to_nobody(&scratch.dir);
}

fn as_nobody(scratch: &Scratch, args: &[String]) -> Option<Output> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match autobatch_as_nobody(&scratch.dir, &args) {
        Ok(output) => Some(output),
        Err(reason) => {
            println!("skipped the part run as `nobody`: {reason}");
            None
        }
    }
}

fn assert_ran(output: &Output) {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
}

#[test]
fn dash_is_standard_output_and_standard_input() {
    let scratch = Scratch::new("dash");
    let output = run_to(&scratch, "-");
    assert_ran(&output);
    assert_eq!(stdout(&output), RESULTS);
    assert!(!scratch.dir.join("-").exists(), "no file named `-`");
    // Standard output that cannot take the results is one error line.
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", INPUTS);
    let full = std::process::Command::new(env!("CARGO_BIN_EXE_autobatch"))
        .args([
            "run", &program, "--entry", "fib", "--inputs", &inputs, "--output", "-",
        ])
        .stdout(fs::File::create("/dev/full").expect("open /dev/full"))
        .output()
        .expect("run the autobatch binary");
    assert_one_line_error(
        &full,
        "cannot write to standard output: No space left on device",
    );

    let args = ["run", &program, "--entry", "fib", "--inputs", "-"];
    let output = autobatch_with_input(&scratch.dir, &args, INPUTS.as_bytes());
    assert_ran(&output);
    assert_eq!(stdout(&output), RESULTS);
    // A mistake in them is named as being in standard input.
    let output = autobatch_with_input(&scratch.dir, &args, br#"{"batch": {"m": [1]}}"#);
    assert_one_line_error(
        &output,
        "standard input: `m` in `batch` is not a parameter of `fib`",
    );
}

#[test]
fn a_link_is_followed_and_stays_a_link() {
    let scratch = Scratch::new("link");
    fs::create_dir(scratch.dir.join("real")).unwrap();
    scratch.file("real/target.json", "old\n");
    symlink("real/target.json", scratch.dir.join("link.json")).unwrap();
    assert_ran(&run_to(&scratch, "link.json"));
    let link = fs::symlink_metadata(scratch.dir.join("link.json")).unwrap();
    assert!(link.file_type().is_symlink(), "the link is still a link");
    assert_eq!(
        fs::read_to_string(scratch.dir.join("real/target.json")).unwrap(),
        RESULTS
    );
    assert_eq!(listing(&scratch.dir.join("real")), ["target.json"]);
}

/// A link to nothing creates its target, as `cp` and `>` do.
#[test]
fn a_dangling_link_creates_its_target() {
    let scratch = Scratch::new("dangling");
    fs::create_dir(scratch.dir.join("real")).unwrap();
    symlink("real/new.json", scratch.dir.join("link.json")).unwrap();
    assert_ran(&run_to(&scratch, "link.json"));
    assert!(fs::symlink_metadata(scratch.dir.join("link.json"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_to_string(scratch.dir.join("real/new.json")).unwrap(),
        RESULTS
    );
    // A link into a directory that does not exist is an error naming the link.
    symlink("nowhere/new.json", scratch.dir.join("lost.json")).unwrap();
    let output = run_to(&scratch, "lost.json");
    assert_one_line_error(&output, "cannot write `lost.json`");
    assert!(stderr(&output).contains("nowhere"), "{}", stderr(&output));
}

/// A link to the command's own standard output writes to it (as
/// `/dev/stdout` does), leaving the link alone.
#[test]
fn a_link_to_standard_output_writes_to_it() {
    let scratch = Scratch::new("stdout_link");
    symlink("/proc/self/fd/1", scratch.dir.join("out")).unwrap();
    let output = run_to(&scratch, "out");
    assert_ran(&output);
    assert_eq!(stdout(&output), RESULTS);
    assert!(fs::symlink_metadata(scratch.dir.join("out"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_fifo_is_written_in_place() {
    let scratch = Scratch::new("fifo");
    let fifo = scratch.dir.join("pipe");
    let c_path = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; `mkfifo` only reads it.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    // The read end, opened first without waiting, holds what is written.
    let mut reader = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    assert_ran(&run_to(&scratch, "pipe"));
    let mut received = String::new();
    std::io::Read::read_to_string(&mut reader, &mut received).unwrap();
    assert_eq!(received, RESULTS);
    assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

/// A character device is written in place: a copy of `/dev/null` (made
/// with `mknod`, as root), and, as `nobody`, `/dev/null` itself.
#[test]
fn a_character_device_is_written_in_place() {
    let scratch = Scratch::new("device");
    let null = scratch.dir.join("null");
    let c_path = std::ffi::CString::new(null.to_string_lossy().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; `mknod` only reads it.
    let made = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if made == 0 {
        assert_ran(&run_to(&scratch, "null"));
        assert!(fs::metadata(&null).unwrap().file_type().is_char_device());
    } else {
        println!("skipped the copy of /dev/null: mknod failed (not root)");
    }
    for_nobody(&scratch);
    if let Some(output) = as_nobody(&scratch, &nobody_args("/dev/null")) {
        assert_ran(&output);
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}

/// The file written keeps its permissions, its owner and its other hard
/// links (which see the new contents).
#[test]
fn a_file_keeps_its_permissions_owner_and_links() {
    let scratch = Scratch::new("permissions");
    let private = scratch.file("private.json", "old\n");
    fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).unwrap();
    assert_ran(&run_to(&scratch, "private.json"));
    let after = fs::metadata(&private).unwrap();
    assert_eq!(after.mode() & 0o7777, 0o600);
    assert_eq!(fs::read_to_string(&private).unwrap(), RESULTS);

    let shared = scratch.file("shared.json", "old\n");
    fs::hard_link(&shared, scratch.dir.join("other-name.json")).unwrap();
    assert_ran(&run_to(&scratch, "shared.json"));
    assert_eq!(
        fs::read_to_string(scratch.dir.join("other-name.json")).unwrap(),
        RESULTS
    );

    // As root, a file of another owner stays theirs.
    let theirs = scratch.file("theirs.json", "old\n");
    if std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).is_ok() {
        assert_ran(&run_to(&scratch, "theirs.json"));
        let after = fs::metadata(&theirs).unwrap();
        assert_eq!((after.uid(), after.gid()), (65534, 65534));
        assert_eq!(fs::read_to_string(&theirs).unwrap(), RESULTS);
    } else {
        println!("skipped the file of another owner: chown failed (not root)");
    }
    assert_eq!(
        listing(&scratch.dir),
        [
            "fib.ab",
            "inputs.json",
            "other-name.json",
            "private.json",
            "shared.json",
            "theirs.json"
        ]
    );
}

/// In a directory `nobody` may not write: a file it may write is written
/// in place; a new file is an error naming the path; a file it may not
/// write is an error, unchanged.
#[test]
fn a_read_only_directory() {
    let scratch = Scratch::new("read_only");
    fs::create_dir(scratch.dir.join("ro")).unwrap();
    scratch.file("ro/open.json", "old\n");
    scratch.file("ro/closed.json", "old\n");
    for_nobody(&scratch);
    give_to_nobody(&scratch.dir.join("ro"));
    fs::set_permissions(
        scratch.dir.join("ro/open.json"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    fs::set_permissions(
        scratch.dir.join("ro/closed.json"),
        fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    fs::set_permissions(scratch.dir.join("ro"), fs::Permissions::from_mode(0o555)).unwrap();

    if let Some(output) = as_nobody(&scratch, &nobody_args("ro/open.json")) {
        assert_ran(&output);
        assert_eq!(
            fs::read_to_string(scratch.dir.join("ro/open.json")).unwrap(),
            RESULTS
        );
    }
    if let Some(output) = as_nobody(&scratch, &nobody_args("ro/new.json")) {
        assert_one_line_error(&output, "cannot write `ro/new.json`");
        assert!(
            stderr(&output).contains("Permission denied"),
            "{}",
            stderr(&output)
        );
    }
    if let Some(output) = as_nobody(&scratch, &nobody_args("ro/closed.json")) {
        assert_one_line_error(&output, "cannot write `ro/closed.json`");
        assert_eq!(
            fs::read_to_string(scratch.dir.join("ro/closed.json")).unwrap(),
            "old\n"
        );
    }
    assert_eq!(
        listing(&scratch.dir.join("ro")),
        ["closed.json", "open.json"]
    );
    fs::set_permissions(scratch.dir.join("ro"), fs::Permissions::from_mode(0o755)).unwrap();
}

/// `sample` writes its draws and figures by the same rule: `-` for one of
/// them sends the summary to stderr; both cannot be `-`.
#[test]
fn sample_outputs_to_standard_output_and_links() {
    let scratch = Scratch::new("sample_outputs");
    let model = scratch.file(
        "normal.ab",
        "fn log_density(theta: [f64; 1]) -> f64 { -0.5 * theta[0] * theta[0] }\n",
    );
    let data = scratch.file("data.json", "{}");
    let base = [
        "sample", &model, "--data", &data, "--chains", "2", "--warmup", "5", "--draws", "3",
    ];
    let output = autobatch(&[&base[..], &["--output", "-"]].concat());
    assert_ran(&output);
    let csv = stdout(&output);
    assert!(csv.starts_with("chain,draw,theta[0],lp__"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "{csv}");
    assert!(
        stderr(&output).contains("theta[0]"),
        "the summary: {}",
        stderr(&output)
    );

    fs::create_dir(scratch.dir.join("real")).unwrap();
    symlink("real/stats.json", scratch.dir.join("stats.json")).unwrap();
    let stats = scratch.path("stats.json");
    let output = autobatch(&[&base[..], &["--stats", &stats]].concat());
    assert_ran(&output);
    assert!(fs::symlink_metadata(&stats)
        .unwrap()
        .file_type()
        .is_symlink());
    let figures = fs::read_to_string(scratch.dir.join("real/stats.json")).unwrap();
    assert!(figures.contains("\"chains\""), "{figures}");

    let both = autobatch(&[&base[..], &["--output", "-", "--stats", "-"]].concat());
    assert_one_line_error(&both, "--output and --stats cannot both be `-`");
}

/// A picture through a link draws the link's target; `-` is refused, its
/// format being read from the file name.
#[test]
fn profile_pictures_follow_links() {
    let scratch = Scratch::new("profile_link");
    fs::create_dir(scratch.dir.join("real")).unwrap();
    symlink("real/profile.svg", scratch.dir.join("profile.svg")).unwrap();
    let program = scratch.file("fib.ab", FIB);
    let inputs = scratch.file("inputs.json", INPUTS);
    let base = ["run", &program, "--entry", "fib", "--inputs", &inputs];
    let picture = scratch.path("profile.svg");
    let output = autobatch(&[&base[..], &["--profile", &picture]].concat());
    assert_ran(&output);
    assert!(fs::symlink_metadata(&picture)
        .unwrap()
        .file_type()
        .is_symlink());
    let svg = fs::read_to_string(scratch.dir.join("real/profile.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    assert_eq!(listing(&scratch.dir.join("real")), ["profile.svg"]);

    let output = autobatch(&[&base[..], &["--profile", "-"]].concat());
    assert_one_line_error(&output, "--profile `-`");
}
