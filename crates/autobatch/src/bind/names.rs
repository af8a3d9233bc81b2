//! Which names the inputs of a binding give: every parameter of the entry
//! exactly once (in `batch` or `shared`), every static in `shared` when the
//! statics come with the inputs or nowhere when they are bound already, and
//! nothing else.

use autobatch_ir::{Function, Program};

use super::{InputError, InputErrorKind};
use crate::inputs::Inputs;

/// The parameters of `function`, for messages.
pub(super) fn parameter_list(function: &Function) -> String {
    let name = function.user_name();
    if function.signature.is_empty() {
        format!("`{name}` has no parameters")
    } else {
        let names: Vec<&str> = function.signature.iter().map(|p| p.name.as_str()).collect();
        format!("the parameters of `{name}` are: {}", names.join(", "))
    }
}

/// The error for a parameter of `function` the inputs do not give.
pub(super) fn missing_argument(function: &Function, name: &str) -> InputError {
    InputError::new(
        InputErrorKind::MissingName,
        format!(
            "missing argument `{name}` of `{}`: give it in `batch` (one value per member) or in `shared`",
            function.user_name()
        ),
    )
}

/// The error for a static the inputs do not give.
pub(super) fn missing_static(name: &str) -> InputError {
    InputError::new(
        InputErrorKind::MissingName,
        format!("missing static `{name}`: give it in `shared`"),
    )
}

/// Where the statics of a binding come from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Statics {
    /// In the inputs' `shared` section, with the arguments.
    Given,
    /// Bound before, by a [`BoundProgram`]: the inputs may not name them.
    Bound,
}

/// Every parameter given exactly once, every static in `shared` (when the
/// statics are given with the inputs) or nowhere (when they are bound
/// already), nothing else.
pub(super) fn check_names(
    program: &Program,
    function: &Function,
    inputs: &Inputs,
    statics: Statics,
) -> Result<(), InputError> {
    let names = Names {
        program,
        function,
        statics,
    };
    names.check_no_clash()?;
    check_no_duplicates(inputs)?;
    names.check_batch(inputs)?;
    names.check_shared(inputs)?;
    names.check_parameters_given(inputs)?;
    if statics == Statics::Given {
        check_statics_given(program, inputs)?;
    }
    Ok(())
}

/// The names a binding accepts: the entry's parameters and the program's
/// statics.
struct Names<'a> {
    program: &'a Program,
    function: &'a Function,
    statics: Statics,
}

impl Names<'_> {
    fn is_param(&self, name: &str) -> bool {
        self.function.signature.iter().any(|p| p.name == name)
    }

    fn is_static(&self, name: &str) -> bool {
        self.program.statics.values().any(|s| s.name == name)
    }

    /// No parameter of the entry is named as a static (the inputs could not
    /// give both).
    fn check_no_clash(&self) -> Result<(), InputError> {
        for param in &self.function.signature {
            if self.is_static(&param.name) {
                return Err(InputError::new(
                    InputErrorKind::NameClash,
                    format!(
                        "parameter `{}` of `{}` has the same name as a static, so the inputs cannot give both; rename one",
                        param.name,
                        self.function.user_name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every name in `batch` is a parameter, given in `batch` only.
    fn check_batch(&self, inputs: &Inputs) -> Result<(), InputError> {
        for (name, _) in &inputs.batch {
            if inputs.shared.iter().any(|(n, _)| n == name) {
                return Err(InputError::new(
                    InputErrorKind::DuplicatedName,
                    format!("argument `{name}` is given in both `batch` and `shared`; give it in one of them"),
                )
                .about_input(name));
            }
            if self.is_static(name) && self.statics == Statics::Bound {
                return Err(bound_already(name));
            }
            if self.is_static(name) {
                return Err(InputError::new(
                    InputErrorKind::StaticInBatch,
                    format!(
                        "static `{name}` is shared by all members: give it in `shared`, not in `batch`"
                    ),
                ));
            }
            if !self.is_param(name) {
                return Err(InputError::new(
                    InputErrorKind::UnknownName,
                    format!(
                        "`{name}` in `batch` is not a parameter of `{}` ({})",
                        self.function.user_name(),
                        parameter_list(self.function)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every name in `shared` is a parameter or a static not bound already.
    fn check_shared(&self, inputs: &Inputs) -> Result<(), InputError> {
        for (name, _) in &inputs.shared {
            if self.is_static(name) && self.statics == Statics::Bound {
                return Err(bound_already(name));
            }
            if !self.is_param(name) && !self.is_static(name) {
                return Err(InputError::new(
                    InputErrorKind::UnknownName,
                    format!(
                        "`{name}` in `shared` is neither a parameter of `{}` nor a static ({})",
                        self.function.user_name(),
                        parameter_list(self.function)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every parameter is given, in `batch` or in `shared`.
    fn check_parameters_given(&self, inputs: &Inputs) -> Result<(), InputError> {
        for param in &self.function.signature {
            let given = inputs.batch.iter().any(|(n, _)| *n == param.name)
                || inputs.shared.iter().any(|(n, _)| *n == param.name);
            if !given {
                return Err(missing_argument(self.function, &param.name));
            }
        }
        Ok(())
    }
}

/// No name given twice in `batch` or twice in `shared`.
fn check_no_duplicates(inputs: &Inputs) -> Result<(), InputError> {
    let batch: Vec<&str> = inputs.batch.iter().map(|(n, _)| n.as_str()).collect();
    let shared: Vec<&str> = inputs.shared.iter().map(|(n, _)| n.as_str()).collect();
    for (section, names) in [("batch", batch), ("shared", shared)] {
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(InputError::new(
                    InputErrorKind::DuplicatedName,
                    format!("`{name}` is given twice in `{section}`"),
                )
                .about_input(name));
            }
        }
    }
    Ok(())
}

/// Every static in `shared`.
pub(super) fn check_statics_given(program: &Program, inputs: &Inputs) -> Result<(), InputError> {
    for decl in program.statics.values() {
        if !inputs.shared.iter().any(|(n, _)| *n == decl.name) {
            return Err(missing_static(&decl.name));
        }
    }
    Ok(())
}

/// A static named in the inputs of a batch of a [`BoundProgram`], which holds it.
fn bound_already(name: &str) -> InputError {
    InputError::new(
        InputErrorKind::DuplicatedName,
        format!(
            "static `{name}` is bound already (the program holds its statics); \
             replace its value with `set_static` rather than giving it with a batch"
        ),
    )
}
