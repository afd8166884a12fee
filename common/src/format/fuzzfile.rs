//! STAND-IN (replaced at merge by the Fuzzfile helper's version).

use crate::model::Workflow;
use crate::yaml::{Diagnostic, Diagnostics};

/// Parses a Fuzzfile named `name` read from `label`. This stand-in always refuses.
pub fn parse_fuzzfile(label: &str, name: &str, text: &str) -> Result<Workflow, Diagnostics> {
    let _ = (name, text);
    Err(Diagnostics(vec![Diagnostic {
        file: label.to_string(),
        line: 1,
        col: 1,
        field: String::new(),
        message: "Fuzzfile parsing is not part of this build".to_string(),
        hint: None,
    }]))
}
