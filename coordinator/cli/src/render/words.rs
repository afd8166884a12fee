//! The words and times every view of a decision shares (the terminal tables of `fedvol`, the
//! web view of `fedvol ui`): one spelling of each status, mode, action and state, and one way
//! to print a time.

use fedvol_common::decision::{Action, ClusterStatus, Mode};
use fedvol_proto::decisions::{DecisionState, FailureKind};

/// A cluster's answer status as the decision document spells it (`answered`, `timed_out`,
/// `unreachable`, `error`).
pub fn status(s: ClusterStatus) -> &'static str {
    match s {
        ClusterStatus::Answered => "answered",
        ClusterStatus::TimedOut => "timed_out",
        ClusterStatus::Unreachable => "unreachable",
        ClusterStatus::Error => "error",
    }
}

/// A volume's selection mode (`named`, `by_name`, `automatic`, `claim`).
pub fn mode(m: Mode) -> &'static str {
    match m {
        Mode::Named => "named",
        Mode::ByName => "by_name",
        Mode::Automatic => "automatic",
        Mode::Claim => "claim",
    }
}

/// What happens to a volume (`bind`, `provision`, `existing`), `-` when nothing was chosen.
pub fn action(a: Option<Action>) -> &'static str {
    match a {
        Some(Action::Bind) => "bind",
        Some(Action::Provision) => "provision",
        Some(Action::Existing) => "existing",
        None => "-",
    }
}

/// A volume's action as a plan that was not carried out reads (`would provision`, `would
/// use existing`): the actions of every cluster but the chosen one, and all of them when none
/// was chosen, never happened. `-` stays `-`.
pub fn planned_action(a: Option<Action>, done: bool) -> String {
    match (a, done) {
        (None, _) | (_, true) => action(a).to_string(),
        (Some(Action::Existing), false) => "would use existing".to_string(),
        (Some(_), false) => format!("would {}", action(a)),
    }
}

/// `n` and the noun, singular for one (`1 volume`, `2 volumes`); `plural` is the noun's
/// plural form.
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// A stored decision's lifecycle state (`queued`, `planned`, `committed`, `completed`,
/// `failed`, `cancelled`).
pub fn state(s: DecisionState) -> &'static str {
    s.as_str()
}

/// What failed, for a `failed` decision ([`FailureKind`]): `nothing fits`, `refused` (by the
/// coordinators' policy), `unavailable` (clusters did not answer: retryable), `commit failed`,
/// `job failed`.
pub fn failure(f: FailureKind) -> &'static str {
    match f {
        FailureKind::NothingFits => "nothing fits",
        FailureKind::Refused => "refused",
        FailureKind::Unavailable => "unavailable",
        FailureKind::CommitFailed => "commit failed",
        FailureKind::JobFailed => "job failed",
    }
}

/// A decision's state with, when it failed, what failed: `failed (nothing fits)`,
/// `failed (job failed)`; the state alone otherwise (and for records that do not say).
pub fn state_with(s: DecisionState, f: Option<FailureKind>) -> String {
    match f {
        Some(f) if s == DecisionState::Failed => format!("{} ({})", state(s), failure(f)),
        _ => state(s).to_string(),
    }
}

/// A listed decision's state in words ([`state_with`]), and `committed (completing)` for a
/// committed one whose `complete` its cluster has not answered yet
/// (`DecisionSummary::completing_since_ms`): `decisions list` (and `decisions watch`, which
/// shortens that one to `completing`).
pub fn listed_state(d: &fedvol_proto::coordinator::DecisionSummary) -> String {
    if d.state == DecisionState::Committed && d.completing_since_ms.is_some() {
        return format!("{} (completing)", state(d.state));
    }
    state_with(d.state, d.failure)
}

/// Every state, in lifecycle order (the web view's state filter offers these).
pub const STATES: [DecisionState; 6] = [
    DecisionState::Queued,
    DecisionState::Planned,
    DecisionState::Committed,
    DecisionState::Completed,
    DecisionState::Failed,
    DecisionState::Cancelled,
];

/// How long before `now_ms` the time `ms` was (both ms since the epoch), spelled as `kubectl
/// get` spells ages: `now` (under a second, or a time after `now_ms`), `12s ago`, `5m ago`,
/// `3h ago` (under 48 hours), `2d ago`. The one spelling of an age in every view (terminal
/// tables, notes, the web view).
pub fn ago(ms: u64, now_ms: u64) -> String {
    let s = now_ms.saturating_sub(ms) / 1000;
    match s {
        0 => "now".to_string(),
        1..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=172_799 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// The time `ms` (ms since the epoch) in UTC, RFC 3339 to the second
/// (`2025-03-01T12:00:05Z`); the number itself when it is out of range.
pub fn utc(ms: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000);
    let text = t.ok().and_then(|t| {
        t.replace_nanosecond(0)
            .ok()
            .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
    });
    text.unwrap_or_else(|| format!("{ms} ms"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(count(1, "volume", "volumes"), "1 volume");
        assert_eq!(count(0, "volume", "volumes"), "0 volumes");
        assert_eq!(count(2, "job", "jobs"), "2 jobs");
        assert_eq!(planned_action(Some(Action::Provision), false), "would provision");
        assert_eq!(planned_action(Some(Action::Bind), true), "bind");
        assert_eq!(planned_action(Some(Action::Existing), false), "would use existing");
        assert_eq!(planned_action(None, false), "-");
    }

    #[test]
    fn a_failed_state_says_what_failed() {
        assert_eq!(
            state_with(DecisionState::Failed, Some(FailureKind::Unavailable)),
            "failed (unavailable)"
        );
        assert_eq!(
            state_with(DecisionState::Failed, Some(FailureKind::JobFailed)),
            "failed (job failed)"
        );
        assert_eq!(state_with(DecisionState::Failed, None), "failed");
        assert_eq!(state_with(DecisionState::Committed, None), "committed");
    }

    /// `decisions list` and `watch` say when a committed decision's complete is unanswered.
    #[test]
    fn a_listed_decision_being_completed_says_so() {
        let mut d: fedvol_proto::coordinator::DecisionSummary = serde_json::from_value(serde_json::json!({
            "request_id": "r", "workflow": "w", "state": "committed", "chosen_cluster": "c",
            "updated_ms": 1
        }))
        .unwrap();
        assert_eq!(listed_state(&d), "committed");
        d.completing_since_ms = Some(1);
        assert_eq!(listed_state(&d), "committed (completing)");
        d.state = DecisionState::Failed;
        d.failure = Some(FailureKind::JobFailed);
        assert_eq!(listed_state(&d), "failed (job failed)");
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(ago(1_000, 1_400), "now");
        assert_eq!(ago(0, 12_300), "12s ago");
        assert_eq!(ago(0, 5 * 60_000 + 1), "5m ago");
        assert_eq!(ago(0, 3 * 3_600_000), "3h ago");
        assert_eq!(ago(0, 3 * 86_400_000), "3d ago");
        assert_eq!(ago(5, 1), "now", "a time after now is now");
    }

    #[test]
    fn utc_is_rfc3339_to_the_second() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_740_830_405_123), "2025-03-01T12:00:05Z");
    }
}
