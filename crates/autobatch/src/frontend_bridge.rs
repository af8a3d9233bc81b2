//! The one place where this crate talks to the front end and the lowering,
//! so that a change in their interface touches one file.

use autobatch_ir::Program;
use autobatch_types::Loc;

pub use autobatch_frontend::Diagnostic;

/// Parses, checks and lowers `source` to the CFG IR.
pub(crate) fn lower_source(source: &str) -> Result<Program, Vec<Diagnostic>> {
    autobatch_lower::compile(source)
}

/// [`lower_source`], then the gradient of `entry` with respect to
/// `statics` (`entry'sgrad`, whose id comes with the program).
pub(crate) fn lower_static_gradient(
    source: &str,
    entry: &str,
    statics: &[String],
) -> Result<(Program, autobatch_ir::FuncId), Vec<Diagnostic>> {
    autobatch_lower::compile_static_gradient(source, entry, statics)
}

/// Where a diagnostic starts.
pub(crate) fn diagnostic_start(diagnostic: &Diagnostic) -> Loc {
    diagnostic.loc
}

/// Everything a diagnostic says in words (message, labels, notes), without
/// the quoted source, for tests that match on text.
pub(crate) fn diagnostic_words(diagnostic: &Diagnostic) -> String {
    let mut words = diagnostic.message.clone();
    let secondary = diagnostic.secondary.iter().map(|s| &s.label);
    for extra in std::iter::once(&diagnostic.label)
        .chain(secondary)
        .chain(&diagnostic.notes)
    {
        if !extra.is_empty() {
            words.push('\n');
            words.push_str(extra);
        }
    }
    words
}
