//! Compiling a source file (front end, lowering, the shared passes) into a
//! [`Compiled`] program, and the views of it that people read: the IR text
//! and the names of the functions that can be run.

use std::fmt;
use std::sync::Arc;

use autobatch_exec::{BatchHostFn, HostFn, Hosts};
use autobatch_ir::{EntityRef, FuncId, Op, Prim, Program};
use autobatch_types::{Loc, Tensor, TensorType, Value};

use crate::bind::{InputError, InputErrorKind};
use crate::frontend_bridge::{self, Diagnostic};

/// Compiles the program `source`, read from `path` (used only in messages).
///
/// On success the program has been type-checked, lowered to the IR and run
/// through the passes every executor shares. On failure the error holds every
/// diagnostic the front end reported.
pub fn compile(source: &str, path: &str) -> Result<Compiled, CompileError> {
    let mut program =
        frontend_bridge::lower_source(source).map_err(|diagnostics| CompileError {
            diagnostics,
            source: source.to_owned(),
            path: path.to_owned(),
        })?;
    verify_and_optimize(&mut program);
    Ok(Compiled {
        program: Arc::new(program),
        source: source.to_owned(),
        path: path.to_owned(),
        hosts: Hosts::default(),
    })
}

/// The names of the host primitives `program` calls, in order of first call.
pub(crate) fn host_names(program: &Program) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for function in program.functions.values() {
        for op in function.blocks.values().flat_map(|b| &b.ops) {
            if let Op::Prim {
                prim: Prim::Host(host),
                ..
            } = op
            {
                if !names.contains(&host.name) {
                    names.push(host.name.clone());
                }
            }
        }
    }
    names
}

/// A host function over values, as the executors call it: operands as
/// values, a tuple or a panic turned into the member's error message.
fn host_fn(
    name: &str,
    function: impl Fn(&[Value]) -> Result<Value, String> + Send + Sync + 'static,
) -> HostFn {
    let name = name.to_owned();
    Arc::new(move |args: &[&Tensor]| {
        let values: Vec<Value> = args.iter().map(|t| Value::Tensor((*t).clone())).collect();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| function(&values))) {
            Ok(outcome) => tensor_outcome(outcome),
            Err(panic) => Err(format!(
                "the host function `{name}` panicked: {}",
                panic_text(panic.as_ref())
            )),
        }
    })
}

/// A batched host function over values, as the executors call it.
fn batch_host_fn(
    name: &str,
    function: impl Fn(&[Vec<Value>]) -> Vec<Result<Value, String>> + Send + Sync + 'static,
) -> BatchHostFn {
    let name = name.to_owned();
    Arc::new(move |calls: &[Vec<&Tensor>]| {
        let values: Vec<Vec<Value>> = calls
            .iter()
            .map(|args| args.iter().map(|t| Value::Tensor((*t).clone())).collect())
            .collect();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| function(&values))) {
            Ok(outcomes) => outcomes.into_iter().map(tensor_outcome).collect(),
            Err(panic) => {
                let message = format!(
                    "the host function `{name}` panicked: {}",
                    panic_text(panic.as_ref())
                );
                calls.iter().map(|_| Err(message.clone())).collect()
            }
        }
    })
}

/// A value a host function gave, as the tensor it must be.
fn tensor_outcome(outcome: Result<Value, String>) -> Result<Tensor, String> {
    match outcome {
        Ok(Value::Tensor(tensor)) => Ok(tensor),
        Ok(Value::Tuple(_)) => Err("it returned a tuple".to_owned()),
        Err(message) => Err(message),
    }
}

/// What a panic said.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Verifies a lowered program, optimizes it and verifies it again.
pub(crate) fn verify_and_optimize(program: &mut Program) {
    verify_or_panic(program, "lowering");
    autobatch_passes::optimize(program);
    verify_or_panic(program, "optimization");
}

/// A broken IR invariant is a compiler bug, never the user's fault, so it is
/// a panic (the command line turns it into one "internal error" line) rather
/// than a diagnostic about the user's program.
fn verify_or_panic(program: &Program, after: &str) {
    if let Err(errors) = autobatch_ir::verify::verify_program(program) {
        let listed: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        panic!("the IR after {after} is invalid: {}", listed.join("; "));
    }
}

/// A program that compiled: its IR, with the source it came from.
#[derive(Clone, Debug)]
pub struct Compiled {
    // Shared with every `BoundBatch` made from it, so that binding does not
    // copy the program and a batch does not borrow the `Compiled`.
    program: Arc<Program>,
    source: String,
    path: String,
    /// The host functions registered with [`Compiled::with_host`].
    hosts: Hosts,
}

impl Compiled {
    /// Wraps an IR program built without the front end (by a tool or a
    /// test). The program is used as given: it is neither verified nor optimized.
    pub fn from_ir(program: Program, source: &str, path: &str) -> Compiled {
        Compiled {
            program: Arc::new(program),
            source: source.to_owned(),
            path: path.to_owned(),
            hosts: Hosts::default(),
        }
    }

    /// Registers `function` as the host function of the host primitive
    /// `name` (a bodiless `fn` of an `extern "autobatch"` block that the
    /// program calls). Each member's call gets its operands as values and
    /// gives its result, or a message: the member then stops with a
    /// `host_error` naming the primitive and the message (as it does when
    /// the value is not of the declared type and shape, or the function
    /// panics), and the other members go on. Calls of one member run in its
    /// order; calls of different members may run in any order and on any
    /// thread, so the function must give each member's call the same
    /// result whatever the others do.
    ///
    /// ```
    /// use autobatch::typed::{FromValue, IntoValue};
    /// use autobatch::{compile, ErrorKind, RunConfig, Value};
    /// let source = r#"
    ///     extern "autobatch" { fn log_gamma(x: f64) -> f64; }
    ///     fn f(x: f64) -> f64 { log_gamma(x) + 1.0 }
    /// "#;
    /// let program = compile(source, "f.ab").unwrap().with_host("log_gamma", |args: &[Value]| {
    ///     let x = f64::from_value(args[0].clone()).ok_or("not a number")?;
    ///     if x <= 0.0 {
    ///         return Err(format!("log_gamma of {x}"));
    ///     }
    ///     Ok(x.ln().into_value()) // a stand-in, for the example
    /// }).unwrap();
    /// let out = program.call("f").batched("x", [1.0, -2.0]).run::<f64>(&RunConfig::default()).unwrap();
    /// assert_eq!(out.members[0], Ok(1.0));
    /// let error = out.members[1].as_ref().unwrap_err();
    /// assert_eq!(error.kind, ErrorKind::HostError);
    /// assert_eq!(error.message, "host primitive `log_gamma` failed: log_gamma of -2");
    /// ```
    pub fn with_host(
        mut self,
        name: &str,
        function: impl Fn(&[Value]) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Result<Compiled, InputError> {
        self.check_host_name(name)?;
        self.hosts.insert(name, host_fn(name, function));
        Ok(self)
    }

    /// [`Compiled::with_host`] for a function that takes the calls of many
    /// members at once: `calls[m]` holds one call's operands, and the
    /// function gives one outcome per call, in order, each depending on its
    /// call alone. Every executor gives it the calls of the members that
    /// reach the primitive together (program-counter and local-static: the
    /// active members of a step, in any grouping; the reference: one at a
    /// time), so a vectorized function (a numerical library's batched
    /// routine, a model served on a GPU) runs once per step instead of once
    /// per member. A panic fails every call of that batch.
    ///
    /// ```
    /// use autobatch::typed::{FromValue, IntoValue};
    /// use autobatch::{compile, RunConfig, Value};
    /// let source = r#"
    ///     extern "autobatch" { fn norm(v: [f64; 2]) -> f64; }
    ///     fn f(v: [f64; 2]) -> f64 { norm(v) }
    /// "#;
    /// let program = compile(source, "f.ab").unwrap().with_batched_host("norm", |calls: &[Vec<Value>]| {
    ///     calls.iter().map(|args| {
    ///         let v = Vec::<f64>::from_value(args[0].clone()).ok_or("not a vector")?;
    ///         Ok(v.iter().map(|x| x * x).sum::<f64>().sqrt().into_value())
    ///     }).collect()
    /// }).unwrap();
    /// let out = program.call("f").batched("v", [[3.0, 4.0], [6.0, 8.0]]).run::<f64>(&RunConfig::default()).unwrap();
    /// assert_eq!(out.members, [Ok(5.0), Ok(10.0)]);
    /// ```
    pub fn with_batched_host(
        mut self,
        name: &str,
        function: impl Fn(&[Vec<Value>]) -> Vec<Result<Value, String>> + Send + Sync + 'static,
    ) -> Result<Compiled, InputError> {
        self.check_host_name(name)?;
        self.hosts
            .insert_batched(name, batch_host_fn(name, function));
        Ok(self)
    }

    /// Whether the program calls a host primitive `name`.
    fn check_host_name(&self, name: &str) -> Result<(), InputError> {
        let called = host_names(&self.program);
        if called.iter().any(|n| n == name) {
            return Ok(());
        }
        let listed = if called.is_empty() {
            "it calls none".to_owned()
        } else {
            format!("it calls: {}", called.join(", "))
        };
        Err(InputError::about_the_request(
            InputErrorKind::UnknownName,
            format!(
                "`{name}` is not a host primitive that {} calls ({listed})",
                self.path
            ),
        ))
    }

    /// The declared result type of the host primitive `name` that the
    /// program calls (for hosts that convert a function's value, as the
    /// Python package does).
    pub fn host_result_type(&self, name: &str) -> Option<TensorType> {
        self.program
            .functions
            .values()
            .flat_map(|f| f.blocks.values().flat_map(|b| &b.ops))
            .find_map(|op| match op {
                Op::Prim {
                    prim: Prim::Host(host),
                    ..
                } if host.name == name => Some(host.result.clone()),
                _ => None,
            })
    }

    /// The registered host functions.
    pub(crate) fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    /// The IR program (after the shared passes).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The same source, path and host functions with another program (one
    /// derived from this one's source).
    pub(crate) fn with_program(&self, program: Program) -> Compiled {
        Compiled {
            program: Arc::new(program),
            source: self.source.clone(),
            path: self.path.clone(),
            hosts: self.hosts.clone(),
        }
    }

    pub(crate) fn shared_program(&self) -> Arc<Program> {
        Arc::clone(&self.program)
    }

    /// The source text the program was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The path given to [`compile`].
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The names of the functions that can be run as an entry, in the order
    /// of the program. Instances of const-generic functions (`norm2<3>`) and
    /// derived gradient functions (`f'grad`, `f'vjp`) are left out: they are an
    /// artifact of compilation, not something the user wrote.
    pub fn entry_names(&self) -> Vec<&str> {
        self.program
            .functions
            .values()
            .map(|f| f.name.as_str())
            .filter(|name| !name.contains('<') && !name.contains('\''))
            .collect()
    }

    /// Finds the entry function `name`, or says which functions exist.
    pub(crate) fn entry_function(&self, name: &str) -> Result<FuncId, InputError> {
        match self.program.function_by_name(name) {
            Some(id) if !name.contains('<') && !name.contains('\'') => Ok(id),
            _ => {
                let available = self.entry_names();
                let listed = if available.is_empty() {
                    "the program has no function that can be an entry".to_owned()
                } else {
                    format!("available: {}", available.join(", "))
                };
                let message = match self.const_params_of(name) {
                    Some(params) => format!(
                        "`{name}` in {} cannot be an entry: it has const generic parameters ({}), \
                         whose values a run cannot give; call it from a function without them ({listed})",
                        self.path,
                        params.join(", ")
                    ),
                    None => format!("no function named `{name}` in {} ({listed})", self.path),
                };
                Err(InputError::new(InputErrorKind::UnknownEntry, message))
            }
        }
    }

    /// The const generic parameters of the source's function `name`, if it
    /// has some. The IR keeps only their instances, so this checks the source
    /// again: only to explain why `name` is not an entry.
    fn const_params_of(&self, name: &str) -> Option<Vec<String>> {
        let module = autobatch_frontend::check(&self.source).ok()?;
        let function = module.functions.iter().find(|f| f.name == name)?;
        (!function.const_params.is_empty()).then(|| function.const_params.clone())
    }

    /// The IR of the whole program in its one text form.
    pub fn ir_text(&self) -> String {
        autobatch_ir::print::program_to_string(&self.program)
    }

    /// The IR of the functions reachable from the entry `entry` (itself
    /// included), in id order, after the symbols and statics. Ids are those
    /// of the whole program, so calls still name the right functions.
    pub fn ir_text_for_entry(&self, entry: &str) -> Result<String, InputError> {
        let entry_id = self.entry_function(entry)?;
        Ok(self.ir_text_from(entry_id))
    }

    /// The IR of the functions reachable from `entry_id` (see
    /// [`Compiled::ir_text_for_entry`]).
    pub(crate) fn ir_text_from(&self, entry_id: FuncId) -> String {
        let program = &*self.program;
        let reachable = reachable_functions(program, entry_id);
        let mut out = String::new();
        // Same header as `program_to_string`, so that the two texts agree
        // when every function is reachable.
        autobatch_ir::print::write_header(&mut out, program)
            .expect("writing to a String cannot fail");
        for (i, id) in reachable.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            autobatch_ir::print::write_function(&mut out, program, *id, &program.functions[*id])
                .expect("writing to a String cannot fail");
        }
        out
    }

    /// The explicit-stack form run by the program-counter strategy
    /// (`autobatch ir --lowered`). Entry parameters are taken as batched, so
    /// only values built from constants and statics show as invariant.
    pub fn lowered_ir_text(&self, entry: Option<&str>) -> Result<String, InputError> {
        let program = &*self.program;
        let entry_id = match entry {
            Some(name) => self.entry_function(name)?,
            None => FuncId(0),
        };
        let mut out = String::new();
        if program.functions.is_empty() {
            return Ok(out);
        }
        let batched = vec![false; program.functions[entry_id].params.len()];
        let invariance =
            autobatch_passes::uniformity::Invariance::compute(program, entry_id, &batched);
        let lowered = autobatch_passes::stack::lower_to_stack(program, &invariance);
        out.push_str(&autobatch_passes::stack::lowered_to_string(
            program, &lowered,
        ));
        Ok(out)
    }
}

/// The functions `entry` may run, through calls and forks (the callees of
/// a `join`, `map` or `pfor`), with `entry` itself, sorted by id.
fn reachable_functions(program: &Program, entry: FuncId) -> Vec<FuncId> {
    let reach = program.reachable(entry);
    program
        .functions
        .keys()
        .filter(|f| reach[f.index()])
        .collect()
}

/// The program did not compile: every diagnostic, with the source they point into.
#[derive(Clone, Debug)]
pub struct CompileError {
    diagnostics: Vec<Diagnostic>,
    source: String,
    path: String,
}

impl CompileError {
    /// `diagnostics` about the source of `compiled`.
    pub(crate) fn new(diagnostics: Vec<Diagnostic>, compiled: &Compiled) -> CompileError {
        CompileError {
            diagnostics,
            source: compiled.source().to_owned(),
            path: compiled.path().to_owned(),
        }
    }

    /// The diagnostics, in the order the front end reported them.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Each diagnostic's start and what it says in words (message, label and
    /// notes, without the quoted source): what tests match against.
    pub fn located_messages(&self) -> Vec<(Loc, String)> {
        self.diagnostics
            .iter()
            .map(|d| {
                (
                    frontend_bridge::diagnostic_start(d),
                    frontend_bridge::diagnostic_words(d),
                )
            })
            .collect()
    }

    /// Every diagnostic rendered for people: file, line, column, the source
    /// line and a marker; ANSI colors if `color`.
    pub fn render(&self, color: bool) -> String {
        let mut out = String::new();
        for diagnostic in &self.diagnostics {
            let text = diagnostic.render(&self.source, &self.path, color);
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}

impl fmt::Display for CompileError {
    /// The rendered diagnostics, without colors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.render(false).trim_end())
    }
}

impl std::error::Error for CompileError {}
