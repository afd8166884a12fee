//! Text log lines that input cannot forge: every field of every event and span, the message
//! included, passes through an escape function before it is written, so a value a user chose
//! (a request id, a workflow or user name, an error quoting them) never writes a raw ESC
//! (terminal control sequences), CR or LF (a forged log line), or a bidirectional control
//! (OWASP Logging Cheat Sheet, "Event data sources": sanitise event data to prevent log
//! injection, CWE-117; Unicode TR #36 §2.1). JSON lines (`--log-json`) need no help: JSON
//! escapes every control character.
//!
//! The escape function is the daemon's (`fedvol_common::limits::printable`): this crate
//! depends on no fedvol crate.

use std::fmt::Write as _;

use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

/// A field formatter for `tracing_subscriber::fmt().fmt_fields(...)` writing `name=value`
/// pairs separated by spaces (the message bare, first), every value passed through `escape`.
pub fn escaped_fields(escape: fn(&str) -> String) -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    tracing_subscriber::fmt::format::debug_fn(
        move |w: &mut Writer<'_>, field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
            let mut text = String::new();
            let _ = write!(text, "{value:?}");
            if field.name() == "message" {
                w.write_str(&escape(&text))
            } else {
                write!(w, "{}={}", field.name(), escape(&text))
            }
        },
    )
    .delimited(" ")
}
