//! Reading the files named on the command line: a program, `run --inputs`
//! and `--shared`, and `sample --data`, for which `-` is standard input.
//! Text that could not be parsed in the available memory is refused with
//! one line, never an abort.
//!
//! The inputs of `run` may come from several files, each by its extension:
//! `.npz` and `.safetensors` files hold arrays (`arrays`), `NAME=FILE.npy`
//! one array, anything else is JSON. An `--inputs` file holds both
//! sections (JSON: `{"batch": .., "shared": ..}`; arrays: named
//! `batch/NAME`, whose first axis is the members, and `shared/NAME`); a
//! `--shared` file holds shared values only, by name (JSON: one object).
//! An error about a value names the file it came from.

use std::io::Read;
use std::path::{Path, PathBuf};

use autobatch::{ArrayInput, CompileError, Compiled, InputError, Inputs};

use crate::arrays::{self, NamedArray};
use crate::Failure;

/// Parsing a file takes at most about this many bytes of memory per byte of
/// text (a JSON number of two characters becomes a 32-byte value).
const PARSED_BYTES_PER_BYTE: u64 = 64;

/// Reading arrays from a binary file takes at most about this many bytes of
/// memory per byte of the file (its bytes, the arrays, their conversion).
const ARRAY_BYTES_PER_BYTE: u64 = 4;

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
fn read_bytes(path: &Path, what: &str, stdin: bool, per_byte: u64) -> Result<Vec<u8>, Failure> {
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
            len.saturating_mul(per_byte) >> 20,
            available >> 20
        ))
    };
    let limit = available / per_byte;
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

/// The bytes of an array file: mapped from the system's cache of the file
/// where it can be, so that its arrays are decoded straight from the
/// file's pages (no copy of the file, and no fresh memory to fault in);
/// else read as [`read_bytes`] reads (which also says what is wrong with a
/// file that cannot be read).
fn array_file_bytes(path: &Path, what: &str) -> Result<FileBytes, Failure> {
    let limit = autobatch::available_memory_bytes() / ARRAY_BYTES_PER_BYTE;
    let mapped = std::fs::File::open(path).ok().and_then(|file| {
        let metadata = file.metadata().ok()?;
        if !metadata.is_file() || metadata.len() == 0 || metadata.len() > limit {
            return None;
        }
        // SAFETY: the map is read-only and lives only while the file's
        // arrays are decoded from it (they are copied out). Another process
        // truncating the file in that time would fault the reads past its
        // new end; an input file is not expected to change while it is read.
        unsafe { memmap2::Mmap::map(&file) }.ok()
    });
    match mapped {
        Some(map) => Ok(FileBytes::Mapped(map)),
        None => read_bytes(path, what, false, ARRAY_BYTES_PER_BYTE).map(FileBytes::Read),
    }
}

/// The bytes of a file: mapped, or read into memory.
enum FileBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(map) => map,
            FileBytes::Read(bytes) => bytes,
        }
    }
}

/// A data or inputs file (`-`: standard input): unreadable or not UTF-8
/// is bad input (exit 2).
pub fn read_file(path: &Path, what: &str) -> Result<String, Failure> {
    let stdin = crate::output::is_standard(path);
    String::from_utf8(read_bytes(path, what, stdin, PARSED_BYTES_PER_BYTE)?).map_err(|_| {
        Failure::Usage(format!(
            "cannot read {what} {}: stream did not contain valid UTF-8",
            display(path, stdin)
        ))
    })
}

/// A program's source. A file that is not UTF-8 is a program that does not
/// compile (exit 1), as rustc reports it; one that cannot be read is bad usage.
pub fn read_program(path: &Path) -> Result<String, Failure> {
    String::from_utf8(read_bytes(path, "program", false, PARSED_BYTES_PER_BYTE)?).map_err(|_| {
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

/// How a file's values are written, by its extension.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Npy,
    Npz,
    Safetensors,
}

/// Whether `path` names a `.npz` file (an output written as arrays).
pub fn is_npz(path: &Path) -> bool {
    format_of(path) == Format::Npz
}

fn format_of(path: &Path) -> Format {
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match extension.as_deref() {
        Some("npy") => Format::Npy,
        Some("npz") => Format::Npz,
        Some("safetensors") => Format::Safetensors,
        _ => Format::Json,
    }
}

/// The arrays of a `.npz` or `.safetensors` file.
fn read_arrays(path: &Path, what: &str, format: Format) -> Result<Vec<NamedArray>, Failure> {
    let bytes = array_file_bytes(path, what)?;
    let arrays = match format {
        Format::Npz => arrays::read_npz(&bytes),
        _ => arrays::read_safetensors(&bytes),
    };
    arrays.map_err(|reason| Failure::Usage(format!("{}: {reason}", source_name(path))))
}

/// A `--shared` value: a file of shared values by name, or one array
/// (`NAME=FILE.npy`).
fn parse_shared(spec: &str) -> (Option<&str>, &Path) {
    match spec.split_once('=') {
        Some((name, file)) if format_of(Path::new(file)) == Format::Npy && !name.is_empty() => {
            (Some(name), Path::new(file))
        }
        _ => (None, Path::new(spec)),
    }
}

/// The inputs of `run`, from its `--inputs` files and `--shared` values,
/// and which file gave each name.
pub fn read_run_inputs(
    inputs: &[PathBuf],
    shared: &[String],
) -> Result<(Inputs, InputSources), Failure> {
    let mut all = Inputs::new();
    let mut sources = InputSources::default();
    for path in inputs {
        let read = match format_of(path) {
            Format::Json => {
                let text = read_file(path, "inputs")?;
                Inputs::from_json_str(&text).map_err(|e| inputs_error(path, e))?
            }
            Format::Npy => {
                return Err(Failure::Usage(format!(
                    "{}: a .npy file holds one unnamed array; give it as `--shared NAME={}`",
                    source_name(path),
                    path.display()
                )))
            }
            format => sectioned_arrays(path, read_arrays(path, "inputs", format)?)?,
        };
        sources.add(path, &read);
        all = all.merge(read);
    }
    for spec in shared {
        let (name, path) = parse_shared(spec);
        let read = match (name, format_of(path)) {
            (Some(name), _) => {
                let bytes = array_file_bytes(path, "array")?;
                let array = arrays::read_npy(&bytes)
                    .map_err(|reason| Failure::Usage(format!("{}: {reason}", source_name(path))))?;
                Inputs::new().shared(name, array)
            }
            (None, Format::Json) => shared_json(path)?,
            (None, Format::Npy) => {
                return Err(Failure::Usage(format!(
                    "{}: a .npy file holds one unnamed array; name it as `--shared NAME={}`",
                    source_name(path),
                    path.display()
                )))
            }
            (None, format) => read_arrays(path, "shared values", format)?
                .into_iter()
                .fold(Inputs::new(), |inputs, a| inputs.shared(&a.name, a.array)),
        };
        sources.add(path, &read);
        all = all.merge(read);
    }
    Ok((all, sources))
}

/// The arrays of an `--inputs` file, by their names `batch/NAME` (split
/// into members along the first axis) and `shared/NAME`.
fn sectioned_arrays(path: &Path, arrays: Vec<NamedArray>) -> Result<Inputs, Failure> {
    let mut inputs = Inputs::new();
    for NamedArray { name, array } in arrays {
        if let Some(argument) = name.strip_prefix("batch/") {
            if array.tensor.shape.is_empty() {
                return Err(Failure::Usage(format!(
                    "{}: array `{name}` is a scalar, but a batched argument needs one value per member (its first axis)",
                    source_name(path)
                )));
            }
            inputs = inputs.batched(argument, ArrayInput::rows(array));
        } else if let Some(shared) = name.strip_prefix("shared/") {
            inputs = inputs.shared(shared, array);
        } else {
            return Err(Failure::Usage(format!(
                "{}: array `{name}` is neither `batch/NAME` nor `shared/NAME` (an inputs file names \
                 its arrays by section; give a file of shared values by name with --shared)",
                source_name(path)
            )));
        }
    }
    Ok(inputs)
}

/// A JSON file of shared values: one object, by name.
fn shared_json(path: &Path) -> Result<Inputs, Failure> {
    let text = read_file(path, "shared values")?;
    Inputs::shared_from_json_str(&text).map_err(|e| {
        let reason = match e.kind() {
            autobatch::InputErrorKind::BadLayout => {
                "shared values must be a JSON object holding each value by name".to_owned()
            }
            _ => format!("shared values are not valid JSON: {}", e.message()),
        };
        Failure::Usage(format!("{}: {reason}", source_name(path)))
    })
}

/// Which file gave each name of the inputs.
#[derive(Default)]
pub struct InputSources {
    files: Vec<(PathBuf, Vec<String>)>,
}

impl InputSources {
    fn add(&mut self, path: &Path, inputs: &Inputs) {
        self.files
            .push((path.to_owned(), inputs.names().map(str::to_owned).collect()));
    }

    /// An error of binding the inputs: one about a value starts with the
    /// name of the file that gave it (with one file, every error about
    /// what the inputs hold does); one about the request does not.
    pub fn error(&self, error: InputError) -> Failure {
        if !error.is_about_the_inputs() {
            return Failure::Usage(error.message().to_owned());
        }
        let given_in: Vec<&PathBuf> = match error.input_name() {
            Some(name) => self
                .files
                .iter()
                .filter(|(_, names)| names.iter().any(|n| n == name))
                .map(|(path, _)| path)
                .collect(),
            None => Vec::new(),
        };
        if let ([first, second, ..], Some(name)) = (given_in.as_slice(), error.input_name()) {
            return Failure::Usage(format!(
                "`{name}` is given both in {} and in {}; give it once",
                source_name(first),
                source_name(second)
            ));
        }
        match (given_in.first().copied(), self.files.as_slice()) {
            (Some(path), _) | (None, [(path, _)]) => {
                Failure::Usage(format!("{}: {}", source_name(path), error.message()))
            }
            _ => Failure::Usage(error.message().to_owned()),
        }
    }
}

/// The named arrays of a checkpoint (`.npz` or `.safetensors`).
pub fn read_checkpoint(path: &Path) -> Result<Vec<NamedArray>, Failure> {
    match format_of(path) {
        format @ (Format::Npz | Format::Safetensors) => read_arrays(path, "checkpoint", format),
        _ => Err(Failure::Usage(format!(
            "{}: a checkpoint is a .npz or .safetensors file",
            source_name(path)
        ))),
    }
}
