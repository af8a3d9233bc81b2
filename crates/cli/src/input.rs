//! Reading the files named on the command line: a program, and `run
//! --inputs` and `sample --data`, for which `-` is standard input. Text
//! that could not be parsed in the available memory is refused with one
//! line, never an abort.

use std::io::Read;
use std::path::Path;

use autobatch::{CompileError, Compiled};

use crate::Failure;

/// Parsing a file takes at most about this many bytes of memory per byte of
/// text (a JSON number of two characters becomes a 32-byte value).
const PARSED_BYTES_PER_BYTE: u64 = 64;

/// How a file named on the command line is called in messages.
fn display(path: &Path, stdin: bool) -> String {
    if stdin {
        "standard input".to_owned()
    } else {
        format!("`{}`", path.display())
    }
}

/// How an error about what an inputs or data file holds starts: the
/// file's name (`standard input` for `-`).
pub fn source_name(path: &Path) -> String {
    if crate::output::is_standard(path) {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    }
}

/// An error of reading or binding the inputs `path` holds: one about
/// what the file holds starts with its name; one about the request (no
/// such entry, a static `--grad-statics` cannot take) does not.
pub fn inputs_error(path: &Path, error: autobatch::InputError) -> Failure {
    if error.is_about_the_inputs() {
        Failure::Usage(format!("{}: {}", source_name(path), error.message()))
    } else {
        Failure::Usage(error.message().to_owned())
    }
}

/// The bytes of a file named on the command line, or of standard input if
/// `stdin`. A file whose parsed form could not fit in the available memory
/// is refused before it is read (or, from a pipe, once that much has been
/// read), and the buffer is reserved fallibly.
fn read_bytes(path: &Path, what: &str, stdin: bool) -> Result<Vec<u8>, Failure> {
    let cannot = |reason: String| {
        Failure::Usage(format!(
            "cannot read {what} {}: {reason}",
            display(path, stdin)
        ))
    };
    let available = autobatch::available_memory_bytes();
    let too_large = |len: u64| {
        cannot(format!(
            "it is {} MiB, and reading it would take about {} MiB, but only {} MiB of memory is available",
            len >> 20,
            len.saturating_mul(PARSED_BYTES_PER_BYTE) >> 20,
            available >> 20
        ))
    };
    let limit = available / PARSED_BYTES_PER_BYTE;
    let (source, len): (Box<dyn Read>, u64) = if stdin {
        (Box::new(std::io::stdin().lock()), 0)
    } else {
        let file = std::fs::File::open(path).map_err(|e| cannot(e.to_string()))?;
        let len = file.metadata().map_err(|e| cannot(e.to_string()))?.len();
        (Box::new(file), len)
    };
    if len > limit {
        return Err(too_large(len));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len as usize)
        .map_err(|_| cannot(format!("{} MiB of memory is not available", len >> 20)))?;
    source
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| cannot(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A data or inputs file (`-`: standard input): unreadable or not UTF-8
/// is bad input (exit 2).
pub fn read_file(path: &Path, what: &str) -> Result<String, Failure> {
    let stdin = crate::output::is_standard(path);
    String::from_utf8(read_bytes(path, what, stdin)?).map_err(|_| {
        Failure::Usage(format!(
            "cannot read {what} {}: stream did not contain valid UTF-8",
            display(path, stdin)
        ))
    })
}

/// A program's source. A file that is not UTF-8 is a program that does not
/// compile (exit 1), as rustc reports it; one that cannot be read is bad usage.
pub fn read_program(path: &Path) -> Result<String, Failure> {
    String::from_utf8(read_bytes(path, "program", false)?).map_err(|_| {
        Failure::Model(format!(
            "couldn't read `{}`: stream did not contain valid UTF-8",
            path.display()
        ))
    })
}

/// A program file, compiled.
pub fn compile_file(path: &Path) -> Result<Compiled, Failure> {
    let source = read_program(path)?;
    autobatch::compile(&source, &path.display().to_string())
        .map_err(|e: CompileError| Failure::DoesNotCompile(e))
}
