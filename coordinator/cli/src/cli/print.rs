//! Printing what the commands answer: a document in the asked format (`-o table|wide|json|yaml`),
//! a stored decision or the error that came instead, a failed call, and the diagnostics and
//! notices of input files. Every line that is not the document goes to stderr.

use fedvol_formats::yaml::Diagnostics;
use fedvol_proto::coordinator::SubmitReply;
use fedvol_proto::decisions::StoredDecision;

use super::exit::EXIT_BAD_INPUT;
use crate::client::ClientError;
use crate::render::stored::stored_table;
use crate::render::{Output, yaml};

/// Prints `value` as `o` asks: the table view `table_text` makes (its names escaped), or
/// the JSON or YAML document; false (after an error line) when it cannot be rendered.
pub fn print_doc<T: serde::Serialize>(o: Output, value: &T, table_text: impl FnOnce() -> String) -> bool {
    let text = match o {
        // Names stored before they were checked may hold bidirectional controls or invisible
        // characters (Unicode TR #36 §2.1): tables show them escaped.
        Output::Table | Output::Wide => Ok(fedvol_common::limits::printable_lines(&table_text())),
        Output::Json => serde_json::to_string_pretty(value).map(|s| s + "\n"),
        Output::Yaml => yaml::render(value),
    };
    match text {
        Ok(t) => {
            print!("{t}");
            true
        }
        Err(e) => {
            eprintln!("error: cannot render the answer: {e}");
            false
        }
    }
}

/// Prints a failed call (`error: <what happened>`); exit 1.
pub fn fail(e: &ClientError) -> u8 {
    eprintln!("error: {e}");
    EXIT_BAD_INPUT
}

/// Prints the stored decision of `reply` (or its error, prefixed with `what`); returns the
/// decision, or the exit code when there is none, it could not be printed, or the answer
/// carries an error besides the decision (a complete the cluster refused or did not answer,
/// a commit in doubt, a decision that could not be stored): the decision is printed, then the
/// error, and the exit code is 1.
pub fn show_stored<'r>(reply: &'r SubmitReply, o: Output, what: &str) -> Result<&'r StoredDecision, u8> {
    match (&reply.stored, &reply.error) {
        (Some(s), error) => {
            if !print_doc(o, s, || stored_table(s, o == Output::Wide)) {
                return Err(EXIT_BAD_INPUT);
            }
            match error {
                Some(e) => {
                    eprintln!("error: {what}: {} ({})", e.message, e.code);
                    Err(EXIT_BAD_INPUT)
                }
                None => Ok(s),
            }
        }
        (None, Some(e)) => {
            eprintln!("error: {what}: {} ({})", e.message, e.code);
            Err(EXIT_BAD_INPUT)
        }
        (None, None) => {
            eprintln!("error: {what}: the coordinator answered with neither a decision nor an error");
            Err(EXIT_BAD_INPUT)
        }
    }
}

/// Prints every diagnostic to stderr, one per line, prefixed with `error: `.
pub fn print_diagnostics(d: &Diagnostics) {
    for x in &d.0 {
        eprintln!("error: {x}");
    }
}

/// Prints notices (skipped documents and the like) to stderr, prefixed with `notice: `.
pub fn print_notices(n: &[fedvol_formats::yaml::Diagnostic]) {
    for x in n {
        eprintln!("notice: {x}");
    }
}

/// A file argument as the user wrote it, for messages.
pub fn label(p: &std::path::Path) -> String {
    p.display().to_string()
}
