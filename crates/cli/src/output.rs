//! Every file the command writes goes through here: `run --output` and
//! `--profile`, `sample --output`, `--stats` and the pictures of `--plots`.
//! One rule for all of them, where `NAME` is the path as given:
//!
//! - `-` is standard output.
//! - A path that is the command's own standard output or error
//!   (`/dev/stdout`, `/dev/fd/2`) is written through that stream.
//! - A symbolic link is followed and its target written; a link to a file
//!   that does not exist creates that file, as `cp` and `>` do.
//! - A character device or a FIFO (`/dev/null`, a named pipe) is opened and
//!   written in place.
//! - A regular file, existing or new, is written to a temporary file in
//!   its own directory (`.autobatch-PID.partial.NAME`), which gets the
//!   existing file's permissions and owner and is renamed over it once
//!   complete: an interrupted run leaves the old file or none, never half
//!   a file. Where that cannot be done (the directory may not be written,
//!   the owner cannot be kept, or the file has other hard links, which
//!   would keep the old contents) an existing file that may be written is
//!   truncated and written in place instead.
//!
//! Nothing else is created, renamed or removed. A directory, a socket, a
//! block device, a file that may not be written, or a new file in a
//! directory that may not be written is an error naming the path, found
//! by [`check`] before the run.
//!
//! Pictures are drawn by `autobatch-plots` into a file; that file is made
//! in a private directory of the system's temporary directory, then
//! written to `NAME` by the same rule and removed.

use std::ffi::CString;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::Failure;

/// What writes an output's bytes into the writer it is given.
pub type Contents<'a> = dyn FnMut(&mut dyn Write) -> io::Result<()> + 'a;

/// Whether `named` is `-`, standard input or output.
pub fn is_standard(named: &Path) -> bool {
    named.as_os_str() == "-"
}

/// Checks, before any long work, that `named` can be written, without
/// changing anything.
pub fn check(named: &Path) -> Result<(), Failure> {
    let destination = resolve(named).map_err(|reason| cannot(named, reason))?;
    let problem = match &destination {
        Destination::Stdout | Destination::Stderr => None,
        Destination::Stream(path) => not_writable(path, libc::W_OK),
        Destination::File {
            target,
            existing: Some(_),
        } => not_writable(target, libc::W_OK),
        Destination::File {
            target,
            existing: None,
        } => {
            let dir = directory_of(target);
            not_writable(&dir, libc::W_OK | libc::X_OK)
                .map(|reason| format!("cannot create a file in `{}`: {reason}", dir.display()))
        }
    };
    match problem {
        None => Ok(()),
        Some(reason) => Err(cannot(named, with_target(named, &destination, reason))),
    }
}

/// Writes the output `named` by `contents` (see the module's rule).
/// `contents` is called once, or twice when a replacement fails after
/// writing and the file is then written in place.
pub fn write(named: &Path, contents: &mut Contents) -> Result<(), Failure> {
    let destination = resolve(named).map_err(|reason| cannot(named, reason))?;
    destination
        .write(contents)
        .map_err(|e| cannot(named, with_target(named, &destination, e.to_string())))
}

/// Writes `bytes` as the output `named`.
pub fn write_bytes(named: &Path, bytes: &[u8]) -> Result<(), Failure> {
    write(named, &mut |out| out.write_all(bytes))
}

/// Writes the picture `named`, which `draw` draws into the file it is
/// given (a path ending in `named`'s extension, from which the format is
/// read).
pub fn draw(named: &Path, draw: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), Failure> {
    let scratch = Scratch::new().map_err(|e| {
        cannot(
            named,
            format!("cannot make a temporary directory to draw in: {e}"),
        )
    })?;
    let extension = named
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default();
    let picture = scratch.dir.join(format!("picture.{extension}"));
    draw(&picture).map_err(|message| {
        let message = message.replace(&picture.display().to_string(), &named.display().to_string());
        cannot(named, message)
    })?;
    let bytes = fs::read(&picture).map_err(|e| cannot(named, e.to_string()))?;
    write_bytes(named, &bytes)
}

/// The one-line error about the output `named`.
fn cannot(named: &Path, reason: String) -> Failure {
    if is_standard(named) {
        return Failure::Usage(format!("cannot write to standard output: {reason}"));
    }
    Failure::Usage(format!("cannot write `{}`: {reason}", named.display()))
}

/// `reason`, saying which file a link led to when `named` is a link.
fn with_target(named: &Path, destination: &Destination, reason: String) -> String {
    let is_link = fs::symlink_metadata(named).is_ok_and(|m| m.file_type().is_symlink());
    match destination {
        Destination::File { target, .. } | Destination::Stream(target)
            if is_link && target != named =>
        {
            format!("it is a link to `{}`: {reason}", target.display())
        }
        _ => reason,
    }
}

/// Where an output goes.
enum Destination {
    Stdout,
    Stderr,
    /// A character device or FIFO, written as it is.
    Stream(PathBuf),
    /// A regular file at `target` (links followed), and what it is now if
    /// it exists.
    File {
        target: PathBuf,
        existing: Option<Metadata>,
    },
}

/// Where the output `named` goes, or why it cannot go there.
fn resolve(named: &Path) -> Result<Destination, String> {
    if is_standard(named) {
        return Ok(Destination::Stdout);
    }
    match fs::metadata(named) {
        Ok(metadata) => resolve_existing(named, metadata),
        Err(e) if e.kind() == io::ErrorKind::NotFound => resolve_new(named),
        Err(e) => Err(e.to_string()),
    }
}

/// An output that exists (`metadata` is its own, links followed).
fn resolve_existing(named: &Path, metadata: Metadata) -> Result<Destination, String> {
    if same_file(&metadata, io::stdout().as_fd()) {
        return Ok(Destination::Stdout);
    }
    if same_file(&metadata, io::stderr().as_fd()) {
        return Ok(Destination::Stderr);
    }
    let kind = metadata.file_type();
    if kind.is_dir() {
        Err("it is a directory".into())
    } else if kind.is_char_device() || kind.is_fifo() {
        Ok(Destination::Stream(named.to_owned()))
    } else if kind.is_file() {
        let target = fs::canonicalize(named).map_err(|e| e.to_string())?;
        Ok(Destination::File {
            target,
            existing: Some(metadata),
        })
    } else {
        Err("it is neither a regular file, a character device nor a FIFO".into())
    }
}

/// An output that does not exist yet: `named`, or the file a link (or a
/// chain of links) leads to. Its directory must exist.
fn resolve_new(named: &Path) -> Result<Destination, String> {
    let mut target = named.to_owned();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&target) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = fs::read_link(&target).map_err(|e| e.to_string())?;
                target = directory_of(&target).join(link);
            }
            _ => break,
        }
    }
    let dir = directory_of(&target);
    match fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(Destination::File {
            target,
            existing: None,
        }),
        Ok(_) => Err(format!("`{}` is not a directory", dir.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(format!("the directory `{}` does not exist", dir.display()))
        }
        Err(e) => Err(format!(
            "cannot reach the directory `{}`: {e}",
            dir.display()
        )),
    }
}

/// The links followed before an output is given up on (Linux's limit).
const MAX_LINKS: usize = 40;

/// The directory a file named `path` is in (`.` for a bare name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Whether `metadata` is that of the file open as `fd`.
fn same_file(metadata: &Metadata, fd: BorrowedFd) -> bool {
    let Ok(owned) = fd.try_clone_to_owned() else {
        return false;
    };
    File::from(owned)
        .metadata()
        .is_ok_and(|open| open.dev() == metadata.dev() && open.ino() == metadata.ino())
}

/// Why this process may not access `path` as `mode` says (`access(2)`),
/// or `None` if it may.
fn not_writable(path: &Path, mode: libc::c_int) -> Option<String> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call;
    // `access` only reads it.
    let status = unsafe { libc::access(c_path.as_ptr(), mode) };
    (status != 0).then(|| io::Error::last_os_error().to_string())
}

impl Destination {
    fn write(&self, contents: &mut Contents) -> io::Result<()> {
        match self {
            Destination::Stdout => ignore_closed_pipe(write_stream(io::stdout().lock(), contents)),
            Destination::Stderr => write_stream(io::stderr().lock(), contents),
            Destination::Stream(path) => {
                let stream = OpenOptions::new().write(true).open(path)?;
                ignore_closed_pipe(write_stream(stream, contents))
            }
            Destination::File { target, existing } => {
                write_file(target, existing.as_ref(), contents)
            }
        }
    }
}

/// A reader that closed the pipe early (`autobatch ... | head`) is not an
/// error worth a message.
fn ignore_closed_pipe(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

fn write_stream(stream: impl Write, contents: &mut Contents) -> io::Result<()> {
    let mut out = io::BufWriter::new(stream);
    contents(&mut out)?;
    out.flush()
}

/// Writes the regular file `target`: replaced whole if possible, else
/// (an existing file) in place.
fn write_file(
    target: &Path,
    existing: Option<&Metadata>,
    contents: &mut Contents,
) -> io::Result<()> {
    let other_links = existing.is_some_and(|m| m.nlink() > 1);
    if !other_links {
        match replace(target, existing, contents) {
            Ok(()) => return Ok(()),
            Err(Replacing::Failed(e)) => return Err(e),
            Err(Replacing::Impossible(e)) if existing.is_none() => return Err(e),
            Err(Replacing::Impossible(_)) => {}
        }
    }
    let file = OpenOptions::new().write(true).truncate(true).open(target)?;
    write_stream(file, contents)
}

/// Why a file could not be replaced whole.
enum Replacing {
    /// The temporary file could not be made like the target, or not
    /// renamed over it: writing in place may still work.
    Impossible(io::Error),
    /// Writing the contents failed (a full disk): so would writing in place.
    Failed(io::Error),
}

/// Writes `target` through a temporary file beside it, renamed over it once
/// complete; the temporary is removed if anything fails.
fn replace(
    target: &Path,
    existing: Option<&Metadata>,
    contents: &mut Contents,
) -> Result<(), Replacing> {
    let temporary = temporary_beside(target);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .map_err(Replacing::Impossible)?;
    let result = (|| {
        if let Some(existing) = existing {
            keep_owner_and_mode(&file, existing).map_err(Replacing::Impossible)?;
        }
        let mut out = io::BufWriter::new(file);
        contents(&mut out).map_err(Replacing::Failed)?;
        let file = out
            .into_inner()
            .map_err(|e| Replacing::Failed(e.into_error()))?;
        file.sync_all().map_err(Replacing::Failed)?;
        fs::rename(&temporary, target).map_err(Replacing::Impossible)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

/// Gives `file` the owner and permissions of the file it replaces.
fn keep_owner_and_mode(file: &File, existing: &Metadata) -> io::Result<()> {
    let now = file.metadata()?;
    if (now.uid(), now.gid()) != (existing.uid(), existing.gid()) {
        std::os::unix::fs::fchown(file, Some(existing.uid()), Some(existing.gid()))?;
    }
    file.set_permissions(fs::Permissions::from_mode(existing.mode() & 0o7777))
}

/// `dir/.autobatch-PID.partial.name` for `dir/name`.
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".autobatch-{}.partial.{name}", std::process::id()))
}

/// A directory of this process's own in the system's temporary directory,
/// removed with everything in it on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new() -> io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut attempt = 0;
        loop {
            let dir = base.join(format!("autobatch-{}-{attempt}", std::process::id()));
            match fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(Scratch { dir }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
