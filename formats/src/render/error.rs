//! Why a template did not render: typed, each naming the file, line and column.

use crate::yaml::{Diagnostic, Diagnostics, Span};

/// One call of a function fedvol does not provide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFunction {
    /// The function's name as written.
    pub name: String,
    /// Where the name stands in the template.
    pub span: Span,
    /// The closest function fedvol has, when one is close.
    pub did_you_mean: Option<String>,
}

/// A template that could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The template, or a values file, could not be read; or a values file is invalid (every
    /// problem, each positioned in its values file).
    #[error("{0}")]
    Input(Diagnostics),
    /// The template is not valid Go template syntax (an unclosed action, a stray `{{end}}`...).
    #[error("{file}:{span}: template syntax: {message}")]
    Syntax {
        /// The template file, as the user named it.
        file: String,
        /// Where the parser stopped.
        span: Span,
        /// The parser's words.
        message: String,
    },
    /// The template calls functions fedvol does not provide (every call, in file order).
    #[error("{}", unknown_functions_text(file, calls))]
    UnknownFunctions {
        /// The template file, as the user named it.
        file: String,
        /// Each call of an unknown function.
        calls: Vec<UnknownFunction>,
    },
    /// The template prints a value that no values file sets (Go would print `<no value>`).
    #[error("{file}:{span}: {}", unset_text(names, values_files))]
    Unset {
        /// The template file, as the user named it.
        file: String,
        /// The action that prints it.
        span: Span,
        /// The names (`.Name`) the template reads on that line that no values file sets; empty
        /// when the unset value came from elsewhere (a variable set from one, a missing map key).
        names: Vec<String>,
        /// The values files given, as the user named them.
        values_files: Vec<String>,
    },
    /// The template stopped itself with `fail "message"` (a check of its values failed).
    #[error("{file}:{span}: the template stopped with `fail`: {message}")]
    Failed {
        /// The template file, as the user named it.
        file: String,
        /// The action that called `fail`.
        span: Span,
        /// The template's own message.
        message: String,
    },
    /// Rendering failed in an action: a function refused its arguments, a value has the wrong
    /// type, an index is out of range...
    #[error("{file}:{span}: {message}")]
    Exec {
        /// The template file, as the user named it.
        file: String,
        /// The action being rendered.
        span: Span,
        /// What went wrong (with the unset names read on that line, if any).
        message: String,
    },
    /// The rendered text would exceed the largest file fedvol reads.
    #[error("{file}: the rendered text is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The template file, as the user named it.
        file: String,
        /// The limit in bytes.
        limit: usize,
    },
}

fn unknown_functions_text(file: &str, calls: &[UnknownFunction]) -> String {
    calls
        .iter()
        .map(|c| format!("{file}:{}: {}", c.span, unknown_function_message(c)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn unknown_function_message(c: &UnknownFunction) -> String {
    let mut m = format!(
        "the template calls function `{}`, which fedvol does not provide (fedvol renders Go text/template \
         built-ins and the sprig functions listed by `fedvol render --help`)",
        c.name
    );
    if let Some(d) = &c.did_you_mean {
        m.push_str(&format!("; did you mean `{d}`?"));
    }
    m
}

fn unset_text(names: &[String], files: &[String]) -> String {
    let from = if files.is_empty() {
        "no values file was given".to_string()
    } else {
        format!("set by no values file ({})", files.join(", "))
    };
    match names {
        [] => format!("the template prints a value that is not set (Go's `<no value>`); {from}"),
        [one] => format!("the template prints `.{one}`, which is {from}"),
        many => format!(
            "the template prints a value that is not set; `.{}` are {from}",
            many.join("`, `.")
        ),
    }
}

impl RenderError {
    /// The error as diagnostics (one per problem), for printing like every other input error.
    pub fn diagnostics(&self) -> Diagnostics {
        let d = |file: &str, span: Span, message: String| Diagnostic {
            file: file.to_string(),
            line: span.line,
            col: span.col,
            field: String::new(),
            message,
            hint: None,
        };
        match self {
            RenderError::Input(ds) => ds.clone(),
            RenderError::Syntax { file, span, message } => {
                Diagnostics(vec![d(file, *span, format!("template syntax: {message}"))])
            }
            RenderError::UnknownFunctions { file, calls } => Diagnostics(
                calls
                    .iter()
                    .map(|c| d(file, c.span, unknown_function_message(c)))
                    .collect(),
            ),
            RenderError::Unset {
                file,
                span,
                names,
                values_files,
            } => Diagnostics(vec![d(file, *span, unset_text(names, values_files))]),
            RenderError::Failed { file, span, message } => Diagnostics(vec![d(
                file,
                *span,
                format!("the template stopped with `fail`: {message}"),
            )]),
            RenderError::Exec { file, span, message } => Diagnostics(vec![d(file, *span, message.clone())]),
            RenderError::TooLarge { file, limit } => Diagnostics(vec![d(
                file,
                Span { line: 1, col: 1 },
                format!("the rendered text is larger than the limit of {limit} bytes"),
            )]),
        }
    }
}
