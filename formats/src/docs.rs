//! Reading a file's YAML documents for a parser, below every parser of this crate:
//! [`load_docs`] (an unrendered template refused with a clear error, YAML errors turned into
//! diagnostics naming the file), and [`Loaded`], what a parser returns.

use crate::kube::notice;
use crate::template::find_template;
use crate::yaml::{Diagnostic, Diagnostics, Limits, LoadError, Node, Span, load_documents};

/// A parsed value and the notices produced while reading it (informational, not errors: e.g.
/// "skipped Deployment `fio`").
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded<T> {
    /// The parsed value.
    pub value: T,
    /// Notices in file order, each naming file, line and column.
    pub notices: Vec<Diagnostic>,
}

/// Turns a YAML load error into diagnostics for `label`.
pub(crate) fn load_error(label: &str, e: &LoadError) -> Diagnostics {
    Diagnostics(vec![notice(label, e.span, "", format!("invalid YAML: {}", e.message))])
}

/// The error for an unrendered template, pointing at its first `{{`.
pub(crate) fn template_error(label: &str, span: Span) -> Diagnostics {
    Diagnostics(vec![crate::template::unrendered_template(label, span)])
}

/// Loads documents for a parser: a template is refused with a clear error, YAML errors are
/// turned into diagnostics.
pub(crate) fn load_docs(label: &str, text: &str) -> Result<Vec<Node>, Diagnostics> {
    if let Some(span) = find_template(text) {
        return Err(template_error(label, span));
    }
    load_documents(text, Limits::default()).map_err(|e| load_error(label, &e))
}
