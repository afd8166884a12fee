//! What bounds the decision bucket: a retention of final decisions, and a cap on the decisions
//! one user stores.
//!
//! **Retention** (`decisionRetentionMs`, 30 days by default; 0 keeps them forever). A decision
//! is final when nothing will change it again: `completed`, `failed`, or a kept dry run. The
//! reconciler's holder removes every final decision whose last change is older than the
//! retention ([`collect`], run at start of its lease and every [`COLLECT_EVERY`]), each by a
//! compare-and-set purge on the revision it read, so a decision changed meanwhile is kept.
//! Live decisions (`planned`, `committed`, `queued`) are never removed, however old. This is
//! the rule of Nomad's core scheduler, which garbage-collects evaluations (and their
//! allocations) once they are terminal and older than `eval_gc_threshold`, and never a
//! non-terminal one (Nomad: `nomad/core_sched.go`, `evalGC`; agent configuration
//! `server.eval_gc_threshold`).
//!
//! **Per-user cap** (`maxDecisionsPerUser`, 10,000 by default; 0 = no cap). When no quota
//! applies to a submit, a user who has that many decisions stored gets `too_many_decisions`
//! for a new request id ([`cap`]); nothing is stored. Submits of a stored id (answered from
//! the store) are not refused. The count is the coordinator's index of the bucket
//! ([`super::index::DecisionIndex::stored_by`]), so concurrent submits of one user may pass
//! the cap by as many as are in progress at once (at most its `maxInFlightPerUser`).

use std::time::Duration;

use fedvol_proto::coordinator::DecisionSummary;
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::{Code, now_ms};

use super::Coordinator;
use super::store::{StoreError, Write};

/// How often the reconciler's holder removes expired decisions.
pub const COLLECT_EVERY: Duration = Duration::from_secs(60);

/// Whether a decision in `state` (a dry run when `dry_run`) is final: nothing changes it
/// again, and retention may remove it. Every state is named, so a new one must be judged here.
pub fn is_final(state: DecisionState, dry_run: bool) -> bool {
    match state {
        DecisionState::Completed | DecisionState::Failed | DecisionState::Cancelled => true,
        DecisionState::Planned | DecisionState::Committed | DecisionState::Queued => dry_run,
    }
}

/// Whether retention removes the decision `s` at `now_ms` with a retention of `retention_ms`.
pub fn expired(s: &DecisionSummary, now_ms: u64, retention_ms: u64) -> bool {
    retention_ms > 0 && is_final(s.state, s.dry_run) && now_ms.saturating_sub(s.updated_ms) > retention_ms
}

/// Removes every final decision older than `decisionRetentionMs` (see the module docs).
/// Returns how many were removed.
///
/// Errors: the store failed; what was removed before stays removed.
pub async fn collect(co: &Coordinator) -> Result<usize, StoreError> {
    let retention = co.cfg.decision_retention_ms;
    if retention == 0 || !co.index.running() {
        return Ok(0);
    }
    let now = now_ms();
    let due = co.index.select(|s| expired(s, now, retention));
    let mut removed = 0;
    for (id, revision) in due {
        match co.store.purge(&id, revision).await? {
            Write::Done(_) => removed += 1,
            Write::Conflict => tracing::debug!(request_id = %id, "retention: the decision changed meanwhile; kept"),
        }
    }
    if removed > 0 {
        tracing::info!(
            removed,
            retention_ms = retention,
            "retention: final decisions older than decisionRetentionMs removed"
        );
    }
    Ok(removed)
}

/// How long [`cap`] waits for the index to catch up with the bucket.
const CATCH_UP: Duration = Duration::from_secs(2);

/// The refusal of a submit of a new request id by `user` when no quota applies to it and the
/// user has `maxDecisionsPerUser` decisions stored; `None` when it may go on. Near the limit
/// (within the user's `maxInFlightPerUser`), the index is first brought up to the bucket's last
/// revision, so that the user's own decisions stored just before are counted.
pub async fn cap(co: &Coordinator, user: &str, quotas_apply: bool) -> Option<fedvol_proto::ProtoError> {
    let limit = co.cfg.max_decisions_per_user;
    if limit == 0 || quotas_apply {
        return None;
    }
    if co.index.stored_by(user) + co.cfg.max_in_flight_per_user >= limit {
        co.index.catch_up(&co.store, CATCH_UP).await;
    }
    let stored = co.index.stored_by(user);
    if stored < limit {
        return None;
    }
    let days = co.cfg.decision_retention_ms as f64 / 86_400_000.0;
    let kept = if co.cfg.decision_retention_ms == 0 {
        "final decisions are kept until someone removes them".to_string()
    } else {
        format!("final decisions are removed {days:.1} days after their last change")
    };
    Some(Code::TooManyDecisions.error(format!(
        "user {} has {stored} decisions stored, this federation's limit per user (maxDecisionsPerUser: {limit}); {kept}: ask an operator to raise the limit, or submit again once older decisions are removed",
        fedvol_common::limits::printable(user)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(state: DecisionState, dry_run: bool, updated_ms: u64) -> DecisionSummary {
        DecisionSummary {
            request_id: "r".into(),
            workflow: "w".into(),
            state,
            chosen_cluster: None,
            updated_ms,
            user: "alice".into(),
            dry_run,
            priority_class: None,
            priority: 0,
            queued_ms: None,
            jobs: Vec::new(),
            reason: None,
            failure: None,
            completing_since_ms: None,
        }
    }

    #[test]
    fn only_final_decisions_past_the_retention_expire() {
        let day = 86_400_000;
        let now = 100 * day;
        let old = now - 31 * day;
        let retention = 30 * day;
        for (state, dry, expect) in [
            (DecisionState::Completed, false, true),
            (DecisionState::Failed, false, true),
            (DecisionState::Cancelled, false, true),
            (DecisionState::Planned, true, true),
            (DecisionState::Committed, false, false),
            (DecisionState::Planned, false, false),
            (DecisionState::Queued, false, false),
        ] {
            assert_eq!(
                expired(&summary(state, dry, old), now, retention),
                expect,
                "{state:?} {dry}"
            );
        }
        assert!(!expired(
            &summary(DecisionState::Completed, false, now - day),
            now,
            retention
        ));
        assert!(
            !expired(&summary(DecisionState::Completed, false, 0), now, 0),
            "0 keeps them"
        );
    }
}
