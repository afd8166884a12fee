//! An operator's drain of a cluster (docs/design.md §2.5, §5): who drained it, when and why.
//! A drained cluster is still asked to plan, and its answer is kept, but the cross-cluster
//! choice never picks it for new work (rule `drained`, [`crate::choice`]); work already
//! committed there runs on. As Kubernetes' `kubectl drain` / cordon marks a node unschedulable
//! without touching what runs on it, and Slurm's `scontrol update NodeName=... State=DRAIN
//! Reason=...` lets running jobs finish while no new job starts there, with the reason kept.
//!
//! A decision keeps the drains in force when it was planned ([`crate::decision::Decision::drained`]),
//! so that every later run of its choice (a commit falling back, replay, why-not) ranks as the
//! first did. Pure: no I/O.

use std::collections::BTreeMap;

/// Longest drain reason, in characters (one line of a table or a log).
pub const MAX_REASON_CHARS: usize = 300;

/// One cluster's drain: the operator (the NATS user of the request), when (ms since the
/// epoch, the coordinator's clock) and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Drain {
    /// The operator who drained it: the user token of the drain request's subject, which the
    /// NATS permissions tie to the operator's credentials.
    pub by: String,
    /// When, ms since the epoch.
    pub at_ms: u64,
    /// Why, as the operator wrote it (one line, at most [`MAX_REASON_CHARS`] characters).
    pub reason: String,
}

/// Drains by cluster name.
pub type Drains = BTreeMap<String, Drain>;

impl Drain {
    /// `drained by ops at 2026-03-01T12:00:05Z: disk replacement` (names and reason escaped
    /// with [`crate::limits::printable`]): how the choice and `why-not` say it.
    pub fn describe(&self) -> String {
        format!(
            "drained by {} at {}: {}",
            crate::limits::printable(&self.by),
            utc(self.at_ms),
            crate::limits::printable(&self.reason)
        )
    }
}

/// The time `ms` (ms since the epoch) in UTC, RFC 3339 to the second (`2026-03-01T12:00:05Z`).
pub fn utc(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Checks a drain's reason: 1 to [`MAX_REASON_CHARS`] characters once trimmed, visible text
/// only (no control, bidirectional-control or invisible character: [`crate::limits::visible`]).
///
/// Errors: a sentence saying what is wrong.
pub fn check_reason(reason: &str) -> Result<(), String> {
    let r = reason.trim();
    if r.is_empty() {
        return Err("a drain needs a reason (--reason TEXT): say why, for the people who will read it".into());
    }
    let n = r.chars().count();
    if n > MAX_REASON_CHARS {
        return Err(format!(
            "the reason is {n} characters long, more than the limit of {MAX_REASON_CHARS}"
        ));
    }
    if let Some((at, c)) = r.chars().enumerate().find(|(_, c)| !crate::limits::visible(*c)) {
        return Err(format!(
            "the reason contains {} at character {}; it must be visible text on one line",
            crate::limits::describe(c),
            at + 1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_says_who_when_and_why() {
        let d = Drain {
            by: "ops".into(),
            at_ms: 1_700_000_000_123,
            reason: "disk swap".into(),
        };
        assert_eq!(d.describe(), "drained by ops at 2023-11-14T22:13:20Z: disk swap");
    }

    #[test]
    fn reasons_are_one_visible_line_of_bounded_length() {
        assert!(check_reason("rack 4 power work").is_ok());
        assert!(check_reason("  ").unwrap_err().contains("needs a reason"));
        assert!(
            check_reason(&"x".repeat(MAX_REASON_CHARS + 1))
                .unwrap_err()
                .contains("limit of 300")
        );
        assert!(check_reason("a\nb").unwrap_err().contains("U+000A"));
        assert!(check_reason("evil\u{202e}txt").unwrap_err().contains("U+202E"));
    }
}
