//! Compile errors as the user sees them: a message, a source range, a label
//! under the offending code and optional notes, rendered with `ariadne`.
//!
//! Every error the front end or the lowering reports is a [`Diagnostic`];
//! the command line prints them with [`Diagnostic::render`].

use autobatch_types::Loc;

/// One compile error, located in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// What is wrong, in words for the person who wrote the program.
    pub message: String,
    /// Where the offending code starts (1-based line and column, in characters).
    pub loc: Loc,
    /// Where it ends (exclusive); on the same line as `loc` or later.
    pub end: Loc,
    /// A short text printed under the offending code.
    pub label: String,
    /// Further explanations or hints, printed after the source excerpt.
    pub notes: Vec<String>,
    /// Other places the message refers to (an opening delimiter, the token
    /// found instead), each with its own label.
    pub secondary: Vec<SecondaryLabel>,
}

/// A place in the source a [`Diagnostic`] refers to besides its main one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondaryLabel {
    pub loc: Loc,
    /// Exclusive, as [`Diagnostic::end`].
    pub end: Loc,
    pub label: String,
}

impl Diagnostic {
    /// A diagnostic covering `loc..end`.
    pub fn new(
        message: impl Into<String>,
        loc: Loc,
        end: Loc,
        label: impl Into<String>,
    ) -> Diagnostic {
        let end = if end <= loc {
            Loc::new(loc.line, loc.column + 1)
        } else {
            end
        };
        Diagnostic {
            message: message.into(),
            loc,
            end,
            label: label.into(),
            notes: Vec::new(),
            secondary: Vec::new(),
        }
    }

    /// Adds a label at `loc..end`, another place the message refers to.
    pub fn with_secondary(mut self, loc: Loc, end: Loc, label: impl Into<String>) -> Diagnostic {
        let end = if end <= loc {
            Loc::new(loc.line, loc.column + 1)
        } else {
            end
        };
        self.secondary.push(SecondaryLabel {
            loc,
            end,
            label: label.into(),
        });
        self
    }

    /// Adds a note printed after the source excerpt.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// The diagnostic as an `ariadne` report: file, line, column, the source
    /// line and an underline of the offending code, then the notes.
    pub fn render(&self, source: &str, path: &str, color: bool) -> String {
        use ariadne::{Config, Label, Report, ReportKind, Source};
        let total_chars = source.chars().count();
        let (start, end) = char_range(source, total_chars, self.loc, self.end);
        let id = path.to_string();
        let mut report = Report::build(ReportKind::Error, (id.clone(), start..end))
            .with_config(Config::default().with_color(color))
            .with_message(format!(
                "{} (at {}:{})",
                self.message, self.loc.line, self.loc.column
            ))
            .with_label(Label::new((id.clone(), start..end)).with_message(&self.label));
        for other in &self.secondary {
            let (start, end) = char_range(source, total_chars, other.loc, other.end);
            report =
                report.with_label(Label::new((id.clone(), start..end)).with_message(&other.label));
        }
        for note in &self.notes {
            report = report.with_note(note);
        }
        let mut out = Vec::new();
        let written = report.finish().write((id, Source::from(source)), &mut out);
        match written {
            // ariadne spells the kind `Error:`; every other message of the
            // command starts `error:` (its own `Custom` kind would colour the
            // word even without colours).
            Ok(()) => String::from_utf8_lossy(&out).replacen("Error:", "error:", 1),
            // ariadne only fails on I/O, which a Vec never does; keep a plain
            // fallback so that an error is never lost.
            Err(_) => format!(
                "error: {} at {}:{}:{}\n",
                self.message, path, self.loc.line, self.loc.column
            ),
        }
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.loc.line, self.loc.column, self.message)
    }
}

/// The characters `loc..end` of `source` (at least one). A range past the
/// end of the text (an error at end of file) is clamped so that ariadne
/// still shows the last line.
fn char_range(source: &str, total_chars: usize, loc: Loc, end: Loc) -> (usize, usize) {
    let start = char_offset(source, loc);
    let end = char_offset(source, end).max(start + 1);
    if start >= total_chars && total_chars > 0 {
        (total_chars - 1, total_chars)
    } else {
        (start, end.min(total_chars.max(start + 1)))
    }
}

/// The character offset of a 1-based line and column in `source`
/// (clamped to the end of the line / text).
pub(crate) fn char_offset(source: &str, loc: Loc) -> usize {
    let mut offset = 0usize;
    let mut line = 1u32;
    let mut chars = source.chars().peekable();
    while line < loc.line {
        match chars.next() {
            Some('\n') => {
                line += 1;
                offset += 1;
            }
            Some(_) => offset += 1,
            None => return offset,
        }
    }
    let mut column = 1u32;
    while column < loc.column {
        match chars.peek() {
            Some('\n') | None => break,
            Some(_) => {
                chars.next();
                offset += 1;
                column += 1;
            }
        }
    }
    offset
}

/// The text between two locations (used for `assert!` messages).
pub(crate) fn source_text(source: &str, loc: Loc, end: Loc) -> String {
    let start = char_offset(source, loc);
    let stop = char_offset(source, end);
    source
        .chars()
        .skip(start)
        .take(stop.saturating_sub(start))
        .collect()
}
