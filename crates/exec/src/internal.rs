//! Internal errors: a broken invariant of an executor or the engine is
//! reported where it is found, by [`internal_error`].

/// Reports a broken invariant of an executor or the engine (never the
/// consequence of a value a program computes).
#[cold]
#[track_caller]
pub(crate) fn internal_error(message: impl std::fmt::Display) -> ! {
    panic!("internal error: {message}")
}
