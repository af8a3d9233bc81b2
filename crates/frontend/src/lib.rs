//! The front end of autobatch: parses a program (Rust syntax, with `syn`),
//! resolves names, infers and checks types and array shapes, and returns the
//! checked program as [`hir::Module`] or a list of [`Diagnostic`]s.
//!
//! Architecture Invariant: this crate knows nothing about the IR, about
//! execution or about batching. It describes what the user wrote, checked;
//! the `lower` crate turns that into IR.
//!
//! Pipeline: the source is split into tokens (where that fails,
//! `delimiters` says why: an unclosed delimiter, an unterminated string);
//! [`guard`] bounds the nesting of the token stream so that `syn`
//! cannot exhaust the stack; `syn::parse_file` parses (`syntax` words and
//! places its errors); [`items`] collects
//! items, evaluates constants, collects symbolic dimensions and resolves
//! signatures; [`body`] checks each function body into HIR; `differentiable`
//! checks what `grad` / `value_and_grad` differentiate. The ODE solvers'
//! calls get their solvers, written in the language, appended to the
//! source before the items are collected ([`ode`]). Before all that,
//! [`parameters`] lowers a model whose `fn model` declares constrained
//! parameters to the sampler's `log_density` over an unconstrained vector,
//! and [`quantities`] finds its transformed parameters and generated
//! quantities (`fn transformed`, `fn generated`), reported with the draws.

pub mod hir;
pub mod parameters;
pub mod quantities;

mod body;
mod delimiters;
mod diagnostic;
mod differentiable;
mod guard;
mod items;
mod location;
mod ode;
mod syntax;

pub use diagnostic::{Diagnostic, SecondaryLabel};
pub use differentiable::check_static_gradient;

/// The function of `module` that gives the derivative of function `index`
/// (a custom derivative, `autobatch_autodiff::CustomVjp`), if any: a
/// generated ODE solver's, which solves the sensitivities.
pub fn custom_vjp_of(module: &hir::Module, index: usize) -> Option<usize> {
    ode::custom_vjp_of(module, index)
}

use autobatch_types::Loc;

/// Stack size of the thread that compiles (deeply nested input recurses deeply).
pub const COMPILER_STACK_BYTES: usize = 256 * 1024 * 1024;

/// Parses and checks a program: names, types, shapes, mutability, control flow.
/// Runs on a thread with a large stack; never panics.
pub fn check(source: &str) -> Result<hir::Module, Vec<Diagnostic>> {
    let source = source.to_string();
    match run_with_big_stack(move || check_on_this_thread(&source)) {
        Ok(result) => result,
        Err(d) => Err(vec![d]),
    }
}

/// [`check`] on the calling thread, which must have a large stack
/// ([`COMPILER_STACK_BYTES`]); used by the lowering, which runs both stages on
/// one big-stack thread.
pub fn check_on_this_thread(source: &str) -> Result<hir::Module, Vec<Diagnostic>> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(vec![too_large(source.len())]);
    }
    // `syn` skips a byte order mark and a `#!` line; the guard must see the same tokens.
    let mut guarded: String = source
        .strip_prefix('\u{feff}')
        .unwrap_or(source)
        .to_string();
    if guarded.starts_with("#!") && !guarded.starts_with("#![") {
        let first_line_len = guarded.find('\n').unwrap_or(guarded.len());
        guarded.replace_range(..first_line_len, &" ".repeat(first_line_len));
    }
    match guarded.parse::<proc_macro2::TokenStream>() {
        Ok(tokens) => guard::check_nesting(tokens).map_err(|d| vec![d])?,
        Err(e) => {
            let stopped = location::start_of(e.span());
            return Err(vec![
                delimiters::scan(&guarded).tokenizer_error(&guarded, stopped)
            ]);
        }
    }
    let file = syn::parse_file(source).map_err(|e| vec![syntax::syntax_error(&guarded, &e)])?;
    let expanded = ode::expand(source, &file);
    match &expanded.source {
        Some(with_solvers) => match syn::parse_file(with_solvers) {
            Ok(file) => items::check_file(with_solvers, &file),
            Err(e) => Err(vec![syntax::syntax_error(with_solvers, &e)]),
        },
        None => items::check_file(source, &file),
    }
}

/// The largest program accepted, in bytes. Checking takes time linear in the
/// size but memory of about 150 times it (16 MiB of source: over 2 GiB), and
/// real programs are far smaller.
pub const MAX_SOURCE_BYTES: usize = 16 * 1024 * 1024;

fn too_large(bytes: usize) -> Diagnostic {
    Diagnostic::new(
        format!("the program is too large: {bytes} bytes, more than the {MAX_SOURCE_BYTES} bytes (16 MiB) the compiler accepts"),
        Loc::new(1, 1),
        Loc::new(1, 2),
        "the program starts here",
    )
    .with_note("split the work into several smaller programs")
}

/// Runs `work` on a fresh thread with a [`COMPILER_STACK_BYTES`] stack. A
/// panic (a compiler bug) becomes an "internal compiler error" diagnostic
/// instead of crashing the caller.
pub fn run_with_big_stack<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Diagnostic> {
    let internal = |what: &str| {
        Diagnostic::new(
            format!("internal compiler error: {what}"),
            Loc::new(1, 1),
            Loc::new(1, 2),
            "the compiler failed here",
        )
        .with_note(
            "this is a bug in autobatch, not in your program; please report it with the program",
        )
    };
    let handle = std::thread::Builder::new()
        .name("autobatch-compiler".into())
        .stack_size(COMPILER_STACK_BYTES)
        .spawn(work)
        .map_err(|_| internal("could not start the compiler thread"))?;
    handle.join().map_err(|_| internal("the compiler crashed"))
}
