//! STAND-IN (replaced at merge by the template helper's version): detection of unrendered Go
//! template actions (`{{ ... }}`) in a file's text.

use crate::yaml::Span;

/// The position (1-based line and column) of the first `{{` that is later closed by `}}`, or
/// `None` when the text holds no template action.
pub fn find_template(text: &str) -> Option<Span> {
    let start = text.find("{{")?;
    text[start + 2..].find("}}")?;
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    Some(Span { line, col })
}
