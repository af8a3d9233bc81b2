//! A model made ready to sample: the user's program checked for
//! `fn log_density(theta: [f64; D]) -> f64`, compiled together with the
//! sampler library, and its data bound and checked.

use std::fmt;

use autobatch::parameters::{Constraint, Extent, Parameter, UNCONSTRAINED_DIM};
use autobatch::{
    compile, BoundProgram, CompileError, Compiled, Diagnostic, InputErrorKind, InputValue, Inputs,
    ScalarType, Type,
};
use autobatch_ir::Program;
use autobatch_types::Dim;

/// The sampler library, in the autobatch language (see its header comment).
pub const LIBRARY: &str = include_str!("nuts.ab");

/// Where the library's text appears in diagnostics about it.
pub const LIBRARY_PATH: &str = "<autobatch-sample>/nuts.ab";

/// Why a model cannot be sampled. `exit_code` says how the command line reports it.
#[derive(Clone, Debug)]
pub enum SampleError {
    /// The model does not compile: the rendered diagnostics.
    Compile(String),
    /// The model compiles but is not a model `sample` can use.
    Model(String),
    /// The data does not fit the model.
    Data(String),
    /// Settings without meaning (no chains, ...).
    Config(String),
    /// A chain stopped with an error.
    Chain(String),
    /// The batch could not run at all.
    Run(String),
    /// A [`Stop`](crate::Stop) was requested before the run finished.
    Stopped,
}

impl SampleError {
    /// 1 for a model that cannot be compiled or used, 2 for bad data,
    /// settings, or a run that failed.
    pub fn exit_code(&self) -> i32 {
        match self {
            SampleError::Compile(_) | SampleError::Model(_) => 1,
            _ => 2,
        }
    }
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::Compile(text) => f.write_str(text.trim_end()),
            SampleError::Model(m)
            | SampleError::Data(m)
            | SampleError::Config(m)
            | SampleError::Chain(m)
            | SampleError::Run(m) => f.write_str(m),
            SampleError::Stopped => f.write_str("sampling was stopped before it finished"),
        }
    }
}

impl std::error::Error for SampleError {}

/// A model compiled with the sampler, with its data.
#[derive(Clone, Debug)]
pub struct Model {
    pub(crate) compiled: Compiled,
    /// The compiled program with the data bound: converted once, shared
    /// by every segment's batch.
    pub(crate) bound: BoundProgram,
    pub(crate) path: String,
    /// Lines of the user's source; the library starts after them.
    pub(crate) model_lines: u32,
    dim: usize,
    precision: ScalarType,
    /// The parameters `fn model` declares, when the model is written that
    /// way (else the draws are `theta` itself).
    pub(crate) parameters: Option<Parameters>,
}

/// The constrained parameters of a model and their shapes as the data
/// fixed them.
#[derive(Clone, Debug)]
pub struct Parameters {
    pub declared: Vec<autobatch::parameters::Parameter>,
    /// Each parameter's axes' lengths.
    pub shapes: Vec<Vec<u64>>,
    /// The transformed parameters and generated quantities.
    pub quantities: Vec<autobatch::quantities::Quantity>,
}

impl Parameters {
    /// The names of the reported variables: the parameters, then the
    /// transformed parameters and generated quantities.
    pub fn names(&self) -> Vec<String> {
        self.declared
            .iter()
            .map(|p| p.name.clone())
            .chain(self.quantities.iter().map(|q| q.name.clone()))
            .collect()
    }
}

impl Model {
    /// Checks and compiles `source` (read from `path`) with the sampler, and
    /// binds `data`, the text of a JSON object holding every static by name
    /// (and optionally symbolic dimensions by name). The sampler takes the
    /// gradient of `log_density` by `value_and_grad`.
    pub fn new(source: &str, path: &str, data: &str) -> Result<Model, SampleError> {
        let lowered = autobatch::parameters::lower_model(source).map_err(|diagnostics| {
            SampleError::Compile(
                diagnostics
                    .iter()
                    .map(|d| d.render(source, path, false))
                    .collect::<Vec<_>>()
                    .join(""),
            )
        })?;
        let user_lines = source.lines().count() as u32;
        let source = lowered.as_ref().map_or(source, |l| l.source.as_str());
        // The model alone first, so that its diagnostics point into its own text.
        let alone = compile(source, path).map_err(|e| {
            SampleError::Compile(if lowered.is_some() {
                generated_errors(&e, source, path, user_lines)
            } else {
                e.render(false)
            })
        })?;
        let ModelSignature {
            dim_text,
            precision,
        } = check_log_density(&alone, path)?;
        let generated = |name: &str| {
            lowered.is_some() && autobatch::parameters::GENERATED_FUNCTIONS.contains(&name)
        };
        for function in alone.program().functions.values() {
            if function.name.starts_with("nuts_") && !generated(&function.name) {
                return Err(SampleError::Model(format!(
                    "{path}:{}:{}: the function `{}` has a name starting with `nuts_`, which the sampler reserves for its own functions; rename it",
                    function.loc.line, function.loc.column, function.name
                )));
            }
        }

        let library = library_for(precision).replace("NUTS_DIM", &dim_text);
        let mut combined = String::with_capacity(source.len() + library.len() + 1);
        combined.push_str(source);
        if !source.ends_with('\n') {
            combined.push('\n');
        }
        let model_lines = combined.lines().count() as u32;
        combined.push_str(&library);
        let compiled = compile(&combined, path)
            .map_err(|e| combined_errors(&e, &combined, path, model_lines, &library))?;

        let (declared, quantities) = match lowered {
            Some(l) => (Some(l.parameters), l.quantities),
            None => (None, Vec::new()),
        };
        let (bound, dim, shapes) = bind_data(&compiled, data, path, declared.as_deref())?;
        Ok(Model {
            compiled,
            bound,
            path: path.to_string(),
            model_lines,
            dim,
            precision,
            parameters: declared.map(|declared| Parameters {
                declared,
                shapes,
                quantities,
            }),
        })
    }

    /// The number of parameters (the length of `theta`).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The parameters `fn model` declares with their shapes, when the
    /// model is written that way.
    pub fn parameters(&self) -> Option<&Parameters> {
        self.parameters.as_ref()
    }

    /// The float type the model is written in.
    pub fn precision(&self) -> ScalarType {
        self.precision
    }

    /// The program that runs: the model followed by the sampler library.
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Where a location of the combined program is, for people.
    pub(crate) fn describe_loc(&self, line: u32, column: u32) -> String {
        if line <= self.model_lines {
            format!("{}:{line}:{column}", self.path)
        } else {
            format!(
                "{LIBRARY_PATH}:{}:{column} (in the sampler)",
                line - self.model_lines
            )
        }
    }
}

/// What the sampler needs to know of `log_density`: the text of its length
/// `D` to put into the library (a number, or the name of a symbolic
/// dimension), and the float type it is written in.
struct ModelSignature {
    dim_text: String,
    precision: ScalarType,
}

/// The wrapper through which the sampler (in f64) calls a model written in
/// f32: the point rounded to f32 (an array cast, element by element), the
/// log density widened back (the casts' derivative is 1: the gradient is
/// the model's own, widened). One line, in place of the library's marker
/// line, so that the library's line numbers do not change.
const F32_WRAPPER: &str =
    "fn nuts_log_density_f32(theta: [f64; NUTS_DIM]) -> f64 { log_density(theta as f32) as f64 }";

/// The sampler's library for a model written in `precision`, `NUTS_DIM`
/// still to replace.
fn library_for(precision: ScalarType) -> String {
    let (wrapper, model) = match precision {
        ScalarType::F32 => (F32_WRAPPER, "nuts_log_density_f32"),
        _ => ("", "log_density"),
    };
    let lines: Vec<String> = LIBRARY
        .lines()
        .map(|line| {
            if line.starts_with("// NUTS_MODEL_WRAPPER") && !wrapper.is_empty() {
                wrapper.to_string()
            } else {
                line.replace("NUTS_MODEL", model)
            }
        })
        .collect();
    lines.join("\n") + "\n"
}

/// Finds `fn log_density(theta: [f64; D]) -> f64` (or the same in f32) and
/// returns what the sampler needs of it.
fn check_log_density(compiled: &Compiled, path: &str) -> Result<ModelSignature, SampleError> {
    let program = compiled.program();
    let wanted = "`fn log_density(theta: [f64; D]) -> f64` (or f32 for both)";
    let Some(function) = program
        .functions
        .values()
        .find(|f| f.name == "log_density" || f.name.starts_with("log_density<"))
    else {
        return Err(SampleError::Model(format!(
            "{path}: the model has no function `log_density`; `sample` needs {wanted}, the log density of the parameters up to a constant, or `fn model(...) -> f64` over the parameters with their constraints (docs/sampler.md)"
        )));
    };
    let at = format!("{path}:{}:{}", function.loc.line, function.loc.column);
    if function.name != "log_density" {
        return Err(SampleError::Model(format!(
            "{at}: `log_density` must not be generic; `sample` needs {wanted} with a fixed or symbolic length D"
        )));
    }
    if function.signature.len() != 1 {
        return Err(SampleError::Model(format!(
            "{at}: `log_density` takes {} parameters; `sample` needs {wanted}, one parameter",
            function.signature.len()
        )));
    }
    let param = &function.signature[0];
    let float = |t: ScalarType| matches!(t, ScalarType::F64 | ScalarType::F32);
    let (dim, precision) = match &param.ty {
        Type::Tensor(t) if float(t.elem) && t.dims.len() == 1 => (t.dims[0], t.elem),
        other => {
            return Err(SampleError::Model(format!(
                "{at}: the parameter `{}` of `log_density` has type {}; `sample` needs {wanted}, a one-dimensional array of f64 (or f32)",
                param.name,
                type_text(program, other)
            )))
        }
    };
    match &function.ret_type {
        Type::Tensor(t) if t.elem == precision && t.dims.is_empty() => {}
        other => {
            return Err(SampleError::Model(format!(
                "{at}: `log_density` returns {}; `sample` needs {wanted}, an {precision} like its parameter",
                type_text(program, other)
            )))
        }
    }
    let dim_text = match dim {
        Dim::Fixed(0) => {
            return Err(SampleError::Model(format!(
                "{at}: the parameter of `log_density` has length 0: there is nothing to sample"
            )))
        }
        Dim::Fixed(n) => n.to_string(),
        Dim::Symbolic(id) => program.symbol_name(id),
    };
    Ok(ModelSignature {
        dim_text,
        precision,
    })
}

fn type_text(program: &Program, ty: &Type) -> String {
    match ty {
        Type::Tensor(t) => format!("`{}`", program.type_name(t)),
        Type::Tuple(items) if items.is_empty() => "`()`".to_string(),
        Type::Tuple(_) => "a tuple".to_string(),
    }
}

/// The diagnostics of a model lowered from `fn model`: those in the code
/// generated after the user's `user_lines` lines (a bound of the wrong
/// type, say) say so.
fn generated_errors(error: &CompileError, source: &str, path: &str, user_lines: u32) -> String {
    let mut out = String::new();
    for diagnostic in error.diagnostics() {
        let mut d = diagnostic.clone();
        if d.loc.line > user_lines {
            d = d.with_note(
                "this is in the code generated from the constraints of `fn model`'s parameters: a bound, offset or multiplier must be an f64, or an array of f64 of its parameter's shape",
            );
        }
        out.push_str(&d.render(source, path, false));
    }
    out
}

/// The diagnostics of the combined program: those in the model as usual,
/// those in the library rendered against the library's own text.
fn combined_errors(
    error: &CompileError,
    combined: &str,
    path: &str,
    model_lines: u32,
    library: &str,
) -> SampleError {
    let mut out = String::new();
    for diagnostic in error.diagnostics() {
        let text = if diagnostic.loc.line <= model_lines {
            let mut own = diagnostic.clone();
            own.message = relocate(&own.message, model_lines);
            own.label = relocate(&own.label, model_lines);
            own.notes = own.notes.iter().map(|n| relocate(n, model_lines)).collect();
            own.render(combined, path, false)
        } else {
            let mut shifted: Diagnostic = diagnostic.clone();
            shifted.loc.line -= model_lines;
            shifted.end.line = shifted.end.line.saturating_sub(model_lines).max(1);
            format!(
                "error while compiling the model together with the sampler:\n{}",
                shifted.render(library, LIBRARY_PATH, false)
            )
        };
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    SampleError::Compile(out)
}

/// Rewrites each `LINE:COLUMN` in `text` that lies in the library (after
/// the model's `model_lines` lines) as a place in the sampler's own text.
fn relocate(text: &str, model_lines: u32) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts_number =
            chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if starts_number {
            let mut j = i;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            let mut k = j + 1;
            while j < chars.len() && chars[j] == ':' && k < chars.len() && chars[k].is_ascii_digit()
            {
                k += 1;
            }
            let line: String = chars[i..j].iter().collect();
            if k > j + 1 {
                let column: String = chars[j + 1..k].iter().collect();
                if let Ok(line) = line.parse::<u32>() {
                    if line > model_lines {
                        out.push_str(&format!(
                            "{}:{column} of the sampler ({LIBRARY_PATH})",
                            line - model_lines
                        ));
                        i = k;
                        continue;
                    }
                }
            }
            out.push_str(&line);
            i = j;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Reads the data object: every static by name, and optionally symbolic
/// dimensions by name (checked against the shapes). Returns the program
/// with the statics bound, the length of `theta`, and the shapes of the
/// declared `parameters` (none for a model written as `log_density`).
fn bind_data(
    compiled: &Compiled,
    data: &str,
    path: &str,
    parameters: Option<&[Parameter]>,
) -> Result<(BoundProgram, usize, Vec<Vec<u64>>), SampleError> {
    let program = compiled.program();
    let bound = match crate::data::read(program, data).and_then(|c| bind_compact(compiled, c)) {
        Some(bound) => bound,
        None => bind_json(compiled, data, path)?,
    };
    finish_binding(compiled, bound, parameters)
}

/// The shapes of the declared parameters, their lengths fixed by
/// `dim_values`, and the length of the unconstrained vector they make.
fn parameter_shapes(
    program: &Program,
    parameters: &[Parameter],
    dim_values: &[Option<u64>],
) -> Result<(Vec<Vec<u64>>, u64), SampleError> {
    let mut shapes = Vec::new();
    let mut total = 0;
    for p in parameters {
        let mut shape = Vec::new();
        for extent in &p.shape {
            shape.push(match extent {
                Extent::Fixed(n) => *n,
                Extent::Named(name) => program
                    .symbols
                    .iter()
                    .position(|s| s == name)
                    .and_then(|id| dim_values[id])
                    .ok_or_else(|| {
                        SampleError::Data(format!(
                            "the length {name} of the parameter `{}` is not fixed by the shapes of the statics; give it in the data, as \"{name}\": LENGTH",
                            p.name
                        ))
                    })?,
            });
        }
        let structured = !matches!(
            p.constraint,
            Constraint::None | Constraint::Bounds { .. } | Constraint::Affine { .. }
        );
        let too_small = shape.contains(&0)
            || (p.constraint == Constraint::CholeskyFactorCov && shape[0] < shape[1]);
        if structured && too_small {
            return Err(SampleError::Data(format!(
                "the data makes the parameter `{}` {:?} in shape, which its constraint does not allow (a Cholesky factor of a covariance matrix needs at least as many rows as columns; every other constraint at least one element)",
                p.name, shape
            )));
        }
        total += p.unconstrained_len(&shape);
        shapes.push(shape);
    }
    Ok((shapes, total))
}

/// Checks the dimensions the data gives against the statics' shapes and
/// finds the length of `theta`.
fn finish_binding(
    compiled: &Compiled,
    bound: BoundData,
    parameters: Option<&[Parameter]>,
) -> Result<(BoundProgram, usize, Vec<Vec<u64>>), SampleError> {
    let program = compiled.program();
    let BoundData {
        statics: converted,
        symbols,
        given_dims,
    } = bound;
    let fixed_by_statics = |id: usize| {
        program.statics.values().any(|s| {
            s.ty.dims
                .iter()
                .any(|d| matches!(d, Dim::Symbolic(x) if x.0 as usize == id))
        })
    };
    let mut dim_values: Vec<Option<u64>> = (0..program.symbols.len())
        .map(|id| fixed_by_statics(id).then(|| symbols.get(id).copied().unwrap_or(0)))
        .collect();
    for (name, n) in &given_dims {
        let id = program
            .symbols
            .iter()
            .position(|s| s == name)
            .expect("a symbol");
        match dim_values[id] {
            Some(bound) if bound != *n => {
                return Err(SampleError::Data(format!(
                    "the data gives `{name}` = {n}, but the shapes of the statics give {name} = {bound}"
                )))
            }
            _ => dim_values[id] = Some(*n),
        }
    }
    let mut shapes = Vec::new();
    if let Some(parameters) = parameters {
        let (found, total) = parameter_shapes(program, parameters, &dim_values)?;
        shapes = found;
        if let Some(id) = program.symbols.iter().position(|s| s == UNCONSTRAINED_DIM) {
            dim_values[id] = Some(total);
        }
    }

    let log_density = program
        .functions
        .values()
        .find(|f| f.name == "log_density")
        .expect("checked before");
    let Type::Tensor(theta) = &log_density.signature[0].ty else {
        unreachable!("checked before")
    };
    let dim = match theta.dims[0] {
        Dim::Fixed(n) => n,
        Dim::Symbolic(id) => {
            let name = program.symbol_name(id);
            match dim_values[id.0 as usize] {
                Some(0) if parameters.is_some() => {
                    return Err(SampleError::Data(
                        "the data makes every parameter of `model` empty: there is nothing to sample".into(),
                    ))
                }
                Some(0) => {
                    return Err(SampleError::Data(format!(
                        "the data makes the length {name} of `theta` 0: there is nothing to sample"
                    )))
                }
                Some(n) => n,
                None => {
                    return Err(SampleError::Data(format!(
                        "the length {name} of `theta` is not fixed by the shapes of the statics; give it in the data, as \"{name}\": LENGTH"
                    )))
                }
            }
        }
    };
    Ok((converted, dim as usize, shapes))
}

/// The data bound: the statics as tensors, the values of the symbolic
/// dimensions they fix, and the dimensions the data gives by name.
#[derive(Debug)]
struct BoundData {
    statics: BoundProgram,
    symbols: Vec<u64>,
    given_dims: Vec<(String, u64)>,
}

impl PartialEq for BoundData {
    /// The same statics' values, dimensions and given dimensions.
    fn eq(&self, other: &BoundData) -> bool {
        self.statics.statics() == other.statics.statics()
            && self.symbols == other.symbols
            && self.given_dims == other.given_dims
    }
}

/// Binds the data read by `crate::data::read`, or `None` if the binder
/// refuses it (then the JSON path says why, in its words).
fn bind_compact(compiled: &Compiled, compact: crate::data::Compact) -> Option<BoundData> {
    let program = compiled.program();
    if program
        .statics
        .values()
        .any(|decl| !compact.statics.iter().any(|(name, _)| *name == decl.name))
    {
        return None;
    }
    let mut inputs = Inputs::new();
    for (name, tensor) in compact.statics {
        inputs = inputs.shared(&name, autobatch::Value::Tensor(tensor));
    }
    // In the order the JSON path takes them (its objects sort their keys),
    // so that the first dimension found wrong is the same.
    let mut given_dims = compact.dims;
    given_dims.sort_by(|a, b| a.0.cmp(&b.0));
    probe(compiled, inputs, given_dims).ok()
}

/// Binds the statics `inputs` once, for every segment's batch to share,
/// and checks them with a probe batch of one chain; `inputs` is dropped
/// once they are converted, so at most two copies of the data exist at once.
fn probe(
    compiled: &Compiled,
    inputs: Inputs,
    given_dims: Vec<(String, u64)>,
) -> Result<BoundData, autobatch::InputError> {
    let statics = compiled.with_statics(&inputs)?;
    drop(inputs);
    let probe = statics.bind("nuts_probe", &Inputs::new().batched("nuts_chain", [0_i64]))?;
    Ok(BoundData {
        symbols: probe.env().symbols.clone(),
        statics,
        given_dims,
    })
}

/// Binds the data through `serde_json::Value`: accepts everything the
/// binder accepts and names what it refuses.
fn bind_json(compiled: &Compiled, data: &str, path: &str) -> Result<BoundData, SampleError> {
    let program = compiled.program();
    // One strict parse (a repeated key is an error, as in the inputs of
    // `run`), which keeps the text for messages; the JSON is dropped once
    // the statics are tensors.
    let mut inputs = Inputs::shared_from_json_str(data).map_err(|e| {
        let message = e.message();
        SampleError::Data(match e.kind() {
            InputErrorKind::BadLayout => {
                "the data must be a JSON object holding each static of the model by name".into()
            }
            _ if message.starts_with("duplicate key") => {
                format!("the data repeats a key: {message}")
            }
            _ => format!("the data is not valid JSON: {message}"),
        })
    })?;
    for decl in program.statics.values() {
        if !inputs.names().any(|name| name == decl.name) {
            return Err(SampleError::Data(format!(
                "the data has no `{}` (static declared at {path}:{}:{})",
                decl.name, decl.loc.line, decl.loc.column
            )));
        }
    }
    let names: Vec<String> = inputs.names().map(str::to_owned).collect();
    let mut given_dims: Vec<(String, u64)> = Vec::new();
    for key in names {
        if program.statics.values().any(|s| s.name == key) {
            continue;
        }
        if !program.symbols.contains(&key) {
            return Err(SampleError::Data(format!(
                "the data has `{key}`, which is neither a static of the model nor one of its symbolic dimensions"
            )));
        }
        // Every value of a JSON text is JSON.
        let value = match inputs.take_shared(&key) {
            Some(InputValue::Json(value)) => value,
            _ => serde_json::Value::Null,
        };
        let Some(n) = value.as_u64() else {
            return Err(SampleError::Data(format!(
                "the data gives the dimension `{key}` as {}; a dimension is a non-negative integer",
                inputs.describe_shared(&key, &value)
            )));
        };
        given_dims.push((key, n));
    }
    probe(compiled, inputs, given_dims)
        .map_err(|e| SampleError::Data(format!("the data does not fit the model: {}", e.message())))
}

#[cfg(test)]
mod tests {
    //! The fast reader of the data (`crate::data`) binds exactly what the
    //! JSON path binds, or gives way to it: what is accepted, the tensors'
    //! bits and the errors stay the JSON path's.

    use super::*;

    const MODEL: &str = r#"
extern "autobatch" {
    static X: [[f64; D]; N];
    static y: [f32; N];
    static k: [i32; 3];
    static u: usize;
    static b: [bool; 2];
    static Z: [[[i64; 2]; 2]; 2];
}
fn log_density(theta: [f64; D]) -> f64 { sum(matvec(X, theta)) }
"#;

    fn compiled() -> Compiled {
        let library = library_for(ScalarType::F64).replace("NUTS_DIM", "D");
        compile(&format!("{MODEL}\n{library}"), "m.ab").expect("the test model compiles")
    }

    const GOOD: &str = r#"{"X": [[1, -2, 3e2], [0.5, -2.5E+2, 1e-300]],
        "y": [0.1, 16777217], "k": [-2147483648, 2147483647, 0], "u": 18446744073709551615,
        "b": [true, false], "Z": [[[1, -9223372036854775808], [3, 4]], [[5, 6], [7, 9223372036854775807]]],
        "N": 2, "D": 3}"#;

    /// Each data text: whether the fast reader takes it, and that the
    /// outcome of `bind_data` is the JSON path's.
    #[test]
    fn the_fast_reader_binds_what_the_json_path_binds_or_gives_way() {
        let compiled = compiled();
        let cases: Vec<(String, bool)> = vec![
            (GOOD.to_string(), true),
            (GOOD.replace(r#""N": 2, "D": 3"#, r#""D": 3"#), true),
            // The JSON path accepts these; the fast reader leaves them to it.
            (GOOD.replace("0.5", "\"NaN\""), false),
            (GOOD.replace("[0.1, 16777217]", "[\"inf\", 1]"), false),
            // Refused, with the JSON path's words.
            (GOOD.replace("0.1", "1e39"), false),
            (GOOD.replace("-2147483648", "-2147483649"), false),
            (GOOD.replace("[-2147483648, 2147483647, 0]", "[1.0, 2, 3]"), false),
            (GOOD.replace("18446744073709551615", "-1"), false),
            (GOOD.replace("[true, false]", "[1, 0]"), false),
            (GOOD.replace("[0.5, -2.5E+2, 1e-300]", "[0.5, -2.5E+2]"), false),
            (GOOD.replace(r#""N": 2"#, r#""N": 3"#), true),
            (GOOD.replace(r#""N": 2"#, r#""N": 2, "N": 2"#), false),
            (GOOD.replace(r#""N": 2"#, r#""M": 2"#), false),
            // Read, but a static is missing: bound the JSON way, which names it.
            (GOOD.replace(r#""u": 18446744073709551615,"#, ""), true),
            (r#"{"X": [], "y": [], "k": [1, 2, 3], "u": 1, "b": [true, true], "Z": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]], "D": 3}"#.to_string(), false),
            ("[1, 2]".to_string(), false),
            ("{\"X\": ".to_string(), false),
        ];
        for (data, fast) in cases {
            let read = crate::data::read(compiled.program(), &data);
            assert_eq!(read.is_some(), fast, "fast reader on {data}");
            let json = bind_json(&compiled, &data, "m.ab");
            if let Some(compact) = read {
                let bound = bind_compact(&compiled, compact);
                match (&bound, &json) {
                    (Some(bound), Ok(json)) => assert_eq!(bound, json, "bound from {data}"),
                    (None, Err(_)) => {}
                    other => panic!("{data}: fast {:?}, JSON {:?}", other.0, other.1),
                }
            }
            let via_data = bind_data(&compiled, &data, "m.ab", None);
            let via_json = json.and_then(|bound| finish_binding(&compiled, bound, None));
            assert_eq!(
                format!("{via_data:?}"),
                format!("{via_json:?}"),
                "bind_data on {data}"
            );
        }
    }

    /// The tensors hold the binder's conversions: f32 rounding of decimals,
    /// integers as floats, the extremes of every integer type.
    #[test]
    fn the_fast_reader_converts_numbers_as_the_binder_does() {
        let compiled = compiled();
        let compact = crate::data::read(compiled.program(), GOOD).expect("taken");
        let find = |name: &str| {
            compact
                .statics
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
                .expect("present")
        };
        let x = find("X");
        assert_eq!(x.shape, vec![2, 3]);
        assert_eq!(
            x.data,
            autobatch_types::Data::F64(vec![1.0, -2.0, 300.0, 0.5, -250.0, 1e-300])
        );
        assert_eq!(
            find("y").data,
            autobatch_types::Data::F32(vec![0.1_f64 as f32, 16777216.0])
        );
        assert_eq!(
            find("k").data,
            autobatch_types::Data::I32(vec![i32::MIN, i32::MAX, 0])
        );
        assert_eq!(find("u").shape, Vec::<usize>::new());
        assert_eq!(find("u").data, autobatch_types::Data::Usize(vec![u64::MAX]));
        assert_eq!(find("Z").shape, vec![2, 2, 2]);
        assert_eq!(
            compact.dims,
            vec![("N".to_string(), 2), ("D".to_string(), 3)]
        );
    }
}
