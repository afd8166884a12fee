//! The steps of a decision's life that every entry point shares (submit, the queue's drain,
//! the reconciler's take-over, the operations): admission to the quotas ([`admit_quota`]),
//! planning everywhere and choosing ([`plan`]), committing and storing the outcome
//! ([`commit_and_save`], [`save`]), taking over a decision left `planned` ([`resume`]), and the
//! answers they give. The entry points sit
//! above this module; it imports none of them (a decision that must wait for capacity goes to
//! [`super::waiting`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fedvol_common::choice::choose_cluster_drained;
use fedvol_common::decision::ClusterStatus;
use fedvol_proto::coordinator::SubmitReply;
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, ProtoError, now_ms};

use super::Coordinator;
use super::actions::{RELEASE_WAIT_MS, settle_window_ms};
use super::commit::{Phase, Start, commit_phase};
use super::fanout::{fan_out, fan_out_to};
use super::store::Write;

/// How often a plan asks again the clusters whose agents answered `restoring`, ms
/// ([`plan`]).
pub const RESTORE_ASK_AGAIN_MS: u64 = 100;

/// How long a submit or complete waits for a decision another coordinator is committing
/// before it answers that the decision is still being settled, ms: well within the CLI's
/// default wait (15 s), so that a client asking about a decision whose coordinator died
/// mid-commit gets an answer rather than a timeout (the decision is taken over once the commit
/// phase's bound has passed: [`commit_phase_bound_ms`]; one that passes within this wait is
/// taken over and answered with its outcome).
pub const ANSWER_WITHIN_MS: u64 = 10_000;

/// The answer for a decision still `planned` `age_ms` after its last change (its coordinator
/// may be committing it, or may have died): the decision as stored, and
/// `commit_outcome_unknown` saying by when it is settled at the latest.
pub fn still_settling(co: &Coordinator, stored: StoredDecision, age_ms: u64) -> SubmitReply {
    let left_s = commit_phase_bound_ms(co).saturating_sub(age_ms).div_ceil(1000);
    let id = stored.decision.request_id.clone();
    tracing::info!(
        age_ms,
        left_s,
        "decision still being committed: answered as being settled"
    );
    SubmitReply {
        stored: Some(stored),
        error: Some(Code::CommitOutcomeUnknown.error(format!(
            "decision `{id}` is still being committed (planned {} s ago; its coordinator may have stopped): it is settled within {left_s} s at the latest, by its coordinator or by another one taking it over; ask again then (nothing is booked twice)",
            age_ms / 1000
        ))),
        stored_record: None,
    }
}

/// A reply carrying an error only.
pub fn error_reply(code: Code, message: impl Into<String>) -> SubmitReply {
    SubmitReply::error(code.error(message))
}

/// A reply carrying a stored decision.
pub fn stored_reply(stored: StoredDecision) -> SubmitReply {
    SubmitReply::stored(stored)
}

/// How long a live coordinator may take from storing `planned` to storing the outcome, ms:
/// beyond that, a `planned` decision is taken to be abandoned (or its commit to be in doubt).
///
/// Per attempt: the commit's wait, the probes that settle an unanswered commit (their window
/// plus one probe's wait and pause), and the commit asked again; then the time clusters busy
/// with other requests' commits are asked again (one commit timeout), and a second for the
/// store.
pub fn commit_phase_bound_ms(co: &Coordinator) -> u64 {
    let ct = co.cfg.commit_timeout_ms;
    let release = ct.min(RELEASE_WAIT_MS) + 200;
    let per_attempt = (ct + 200)
        .saturating_mul(2)
        .saturating_add(settle_window_ms(co))
        .saturating_add(release + 200);
    per_attempt
        .saturating_mul(u64::from(co.cfg.commit_attempts))
        .saturating_add(ct)
        .saturating_add(release + 1000)
}

/// Finishes the commit of a decision left `planned` by a coordinator that stopped answering (or
/// whose commit was in doubt): settles its pending attempts, then goes on with the commit phase
/// ([`commit_and_save`]).
pub async fn resume(co: &Arc<Coordinator>, stored: StoredDecision, rev: u64) -> SubmitReply {
    commit_and_save(co, stored, rev, Start::TakeOver).await
}

/// Commits a decision stored `planned` at revision `rev` ([`commit_phase`], from `start`) and
/// stores the outcome ([`save`]). The answer: the decision as stored; a commit in doubt leaves
/// it `planned` and answers `commit_outcome_unknown` with it; a decision another coordinator
/// changed meanwhile is answered as they stored it.
pub async fn commit_and_save(co: &Arc<Coordinator>, mut stored: StoredDecision, rev: u64, start: Start) -> SubmitReply {
    let mut rev = rev;
    match timed_commit_phase(co, &mut stored, &mut rev, start).await {
        Phase::Done => save(co, stored, rev).await,
        Phase::InDoubt(doubt) => in_doubt(stored, doubt),
        Phase::Superseded(theirs) => stored_reply(*theirs),
    }
}

/// The answer for a commit in doubt: the decision as it stays stored (`planned`, with this
/// commit phase's attempts), and the reason.
fn in_doubt(stored: StoredDecision, reason: ProtoError) -> SubmitReply {
    tracing::warn!(chosen = ?stored.decision.chosen_cluster, "commit in doubt: the decision stays planned");
    SubmitReply {
        stored: Some(stored),
        error: Some(reason),
        stored_record: None,
    }
}

/// Stores the outcome of a commit phase over revision `rev`. A decision that failed for want
/// of room is judged first ([`judge_unplaced`]: clusters that never answered make it
/// `clusters_unavailable`, not "nothing fits"); one that asked to wait is then queued instead
/// ([`super::waiting::to_queue`]); one that failed otherwise leaves the quota ledgers.
pub async fn save(co: &Arc<Coordinator>, mut stored: StoredDecision, rev: u64) -> SubmitReply {
    let id = stored.decision.request_id.clone();
    if stored.state == DecisionState::Failed {
        if stored.decision.refused.is_none() && no_room(&stored) {
            judge_unplaced(&mut stored);
        }
        if stored.wait_for_capacity && no_room(&stored) {
            if let Err(e) = super::waiting::to_queue(co, &mut stored).await {
                tracing::warn!(error = %e, "the decision could not be queued; stored failed");
                super::quota::release(co, &id, &stored.decision.quota).await;
            }
        } else {
            super::quota::release(co, &id, &stored.decision.quota).await;
        }
    }
    // Encoded once: the record written is the answer's body too.
    let record = fedvol_proto::encode_sized(&stored, stored.encoded_size_hint());
    match co.store.update_record(&id, &stored, record.clone(), rev).await {
        Ok(Write::Done(_)) => {
            tracing::info!(state = ?stored.state, chosen = ?stored.decision.chosen_cluster, "decision stored");
            outcome_reply(stored).with_record(record)
        }
        Ok(Write::Conflict) => match co.store.get(&id).await {
            Ok(Some((theirs, _))) => stored_reply(theirs),
            Ok(None) => error_reply(Code::StoreUnavailable, "the decision vanished from the store"),
            Err(e) => error_reply(Code::StoreUnavailable, e.to_string()),
        },
        Err(e) => {
            tracing::error!(error = %e, "the decision could not be stored");
            SubmitReply {
                stored: Some(stored),
                error: Some(Code::StoreUnavailable.error(e.to_string())),
                stored_record: None,
            }
        }
    }
}

/// [`commit_phase`], counted in `fedvol_coordinator_commits_in_flight` while it runs and timed
/// in `fedvol_coordinator_commit_duration_seconds`.
async fn timed_commit_phase(co: &Arc<Coordinator>, stored: &mut StoredDecision, rev: &mut u64, start: Start) -> Phase {
    let _in_flight = co.metrics.commit_started();
    let began = std::time::Instant::now();
    let phase = commit_phase(co, stored, rev, start).await;
    co.metrics.commit_took(began.elapsed());
    phase
}

/// The reply for a decision as it ends here: with the coordinator's refusal as the error when
/// it refused (`quota_exceeded`, `queue_full`, `queue_timeout`, `clusters_unavailable`,
/// `unresolvable`), the decision alone otherwise.
pub fn outcome_reply(stored: StoredDecision) -> SubmitReply {
    let error = match (&stored.decision.refused, stored.state) {
        (Some(r), DecisionState::Failed) => Some(ProtoError {
            code: Code::parse(&r.code),
            message: r.message.clone(),
        }),
        _ => None,
    };
    SubmitReply {
        stored: Some(stored),
        error,
        stored_record: None,
    }
}

/// True when a failed decision failed for want of room only: refused by a quota, nothing
/// feasible, clusters that did not answer (`clusters_unavailable`), only drained clusters able
/// to place it (`clusters_drained`: it waits for another cluster), or every commit refused
/// because the capacity went to others (`no_longer_fits`, `capacity_in_flight`). Such a
/// decision may wait in the queue; one whose commit failed otherwise (a driver), or that no
/// cluster can ever place (`unresolvable`), may not.
pub fn no_room(stored: &StoredDecision) -> bool {
    match &stored.decision.refused {
        Some(r) => Code::QuotaExceeded.is(r) || Code::ClustersUnavailable.is(r) || Code::ClustersDrained.is(r),
        None => stored
            .attempts
            .iter()
            .all(|a| a.ok || a.pending || super::commit::is_contention(&a.error)),
    }
}

/// At most this many clusters are named in the message of a `clusters_unavailable` or
/// `unresolvable` refusal (the others are counted).
const NAMED_IN_REFUSAL: usize = 5;

/// Says why no cluster was chosen for `stored`, in its `refused`, when "nothing fits" would
/// not be the truth ([`fedvol_common::unplaced`]):
/// - clusters that can place it answered, but an operator drained every one of them:
///   `clusters_drained`, naming them with who drained them, when and why (a
///   `wait_for_capacity` submit is queued: it waits for another cluster);
/// - clusters did not answer (timed out, unreachable, `restoring`...), or none is known:
///   `clusters_unavailable`, retryable (the submit may be sent again under its request id; a
///   `wait_for_capacity` submit is queued);
/// - every cluster answered and none can ever place it as it is: `unresolvable`, only for a
///   submit that asked to wait for capacity (it is refused at once rather than queued; a
///   plain submit keeps its plain "nothing fits" answer).
///
/// A refusal already set (a quota) is kept.
pub fn judge_unplaced(stored: &mut StoredDecision) {
    use fedvol_common::unplaced::{Unplaced, why_unplaced};
    if stored.decision.refused.is_some() {
        return;
    }
    let named = |names: Vec<String>| {
        let more = names.len().saturating_sub(NAMED_IN_REFUSAL);
        let mut text = names.into_iter().take(NAMED_IN_REFUSAL).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    let drained = fedvol_common::unplaced::drained_fits(&stored.decision.clusters, &stored.decision.drained);
    if !drained.is_empty() {
        let list = named(
            drained
                .iter()
                .map(|(name, d)| format!("{} ({})", fedvol_common::limits::printable(name), d.describe()))
                .collect(),
        );
        let refused = Code::ClustersDrained.reason(format!(
            "this workflow fits only on drained clusters: {list}; a drained cluster is never chosen for new work, so nothing was booked: ask again once an operator undrains one (fedvol clusters undrain), or submit with --wait-for-capacity to queue it until a cluster has room"
        ));
        tracing::info!(code = %refused.code, why = %refused.message, "no cluster chosen");
        stored.decision.refused = Some(refused);
        return;
    }
    let refused = match why_unplaced(&stored.decision.clusters) {
        Unplaced::NothingFits => return,
        Unplaced::Unanswered(none) if none.is_empty() => Code::ClustersUnavailable.reason(
            "no cluster is known to this coordinator yet (no agent's heartbeat or discovery answer): nothing was asked and nothing was booked; ask again once the clusters' agents run",
        ),
        Unplaced::Unanswered(silent) => {
            let answered = stored.decision.clusters.len() - silent.len();
            let count = silent.len();
            let list = named(
                silent
                    .into_iter()
                    .map(|(name, c)| {
                        let why = c.error.as_ref().map_or_else(
                            || super::metrics::status_label(c.status).to_string(),
                            |e| e.code.clone(),
                        );
                        format!("{} ({why})", fedvol_common::limits::printable(name))
                    })
                    .collect(),
            );
            let clusters = if count == 1 {
                "1 cluster".to_string()
            } else {
                format!("{count} clusters")
            };
            let once = if count == 1 { "once it answers" } else { "once they answer" };
            Code::ClustersUnavailable.reason(format!(
                "{clusters} did not answer: {list}; {}, so it may fit there {once}; nothing was booked: ask again",
                match answered {
                    0 => "no cluster answered".to_string(),
                    1 => "the 1 cluster that answered cannot place this workflow".to_string(),
                    n => format!("none of the {n} clusters that answered can place this workflow"),
                },
            ))
        }
        Unplaced::Unresolvable(_) if !stored.wait_for_capacity => return,
        Unplaced::Unresolvable(why) => {
            let list = named(
                why.into_iter()
                    .map(|(name, b)| {
                        format!(
                            "{}: {} ({})",
                            fedvol_common::limits::printable(name),
                            fedvol_common::limits::printable(&b.subject),
                            b.codes.join(", ")
                        )
                    })
                    .collect(),
            );
            Code::Unresolvable.reason(format!(
                "no cluster can ever place this workflow as it is, whatever capacity frees: {list}; waiting would not help, so it is not queued"
            ))
        }
    };
    tracing::info!(code = %refused.code, why = %refused.message, "no cluster chosen");
    stored.decision.refused = Some(refused);
}

/// Checks the request against the federation-wide quotas that apply to it: a dry run
/// only reads the usage ledgers; a real submit is counted in them ([`super::quota::admit`]).
/// Sets the decision's `quota` checks; over a quota, sets `refused` (`quota_exceeded`, with
/// the figures) and the state `failed`.
///
/// Errors: the ledgers could not be read or written (`store_unavailable`), as the reply.
pub async fn admit_quota(co: &Coordinator, stored: &mut StoredDecision) -> Result<(), SubmitReply> {
    let request = &stored.request;
    let applicable = co
        .cfg
        .policy
        .applicable(&request.workflow, &request.user, &request.groups);
    if applicable.is_empty() {
        return Ok(());
    }
    let asked = fedvol_common::quota::Amounts::of(&request.workflow);
    let id = &stored.decision.request_id;
    let verdict = if stored.dry_run {
        super::quota::peek(co, id, &applicable, &asked).await
    } else {
        super::quota::admit(co, id, &applicable, &asked).await
    }
    .map_err(|e| error_reply(Code::StoreUnavailable, format!("quota usage: {e}")))?;
    stored.decision.refused = fedvol_common::quota::refusal_message(&verdict.checks)
        .filter(|_| verdict.exceeded)
        .map(|m| Code::QuotaExceeded.reason(m));
    stored.decision.quota = verdict.checks;
    if let Some(r) = &stored.decision.refused {
        tracing::info!(why = %r.message, "quota exceeded");
        stored.state = DecisionState::Failed;
        stored.decision.chosen_cluster = None;
    }
    Ok(())
}

/// Plans the request on every cluster ([`fan_out`], holding nothing) and chooses
/// ([`choose_cluster_drained`], with the drains in force among them, kept in the decision's
/// `drained`): fills the decision's slots and choice; the state is `failed` when no
/// cluster was chosen (a dry run stays `planned`). When no cluster that answered can place
/// it and some clusters answered `restoring` (their agents wait for the reconciler's restore),
/// those are asked again every [`RESTORE_ASK_AGAIN_MS`] until they answer otherwise or
/// `wait_ms` from the start has passed.
///
/// Errors: NATS failed (`nats_error`), as the reply.
pub async fn plan(co: &Arc<Coordinator>, stored: &mut StoredDecision, wait_ms: u64) -> Result<(), SubmitReply> {
    let asked = std::time::Instant::now();
    let until = asked + Duration::from_millis(wait_ms);
    let nats = |e: fedvol_proto::rpc::RpcError| error_reply(Code::NatsError, e.to_string());
    let mut gathered = fan_out(co, &stored.request, stored.dry_run, Duration::from_millis(wait_ms))
        .await
        .map_err(nats)?;
    // The drains in force now among the clusters asked (docs/design.md §2.5): a drained
    // cluster answers, but the `drained` rule drops it.
    let mut drained = co.drains.among(gathered.slots.keys().map(String::as_str));
    let (mut chosen, mut choice) =
        choose_cluster_drained(&stored.request, &gathered.slots, stored.decision.seed, &drained);
    // No answering cluster can place it, and some agents wait for their restore (a fresh
    // federation, an agent restarted on a new state): they admit new work within a round trip
    // of the reconciler's restore, so they are asked again until they answer or the plan's
    // deadline passes.
    loop {
        let restoring: BTreeSet<String> = gathered
            .slots
            .iter()
            .filter(|(_, s)| {
                s.status == ClusterStatus::Error && s.error.as_ref().is_some_and(|e| Code::Restoring.is(e))
            })
            .map(|(name, _)| name.clone())
            .collect();
        let left = until.saturating_duration_since(std::time::Instant::now());
        if chosen.is_some() || restoring.is_empty() || left < Duration::from_millis(RESTORE_ASK_AGAIN_MS) {
            break;
        }
        tracing::info!(restoring = ?restoring, left_ms = left.as_millis() as u64, "no answering cluster can place it; asking again the clusters waiting for their restore");
        tokio::time::sleep(Duration::from_millis(RESTORE_ASK_AGAIN_MS)).await;
        let left = until.saturating_duration_since(std::time::Instant::now());
        let again = fan_out_to(co, &stored.request, Some(&restoring), stored.dry_run, left)
            .await
            .map_err(nats)?;
        for (name, slot) in again.slots {
            gathered.slots.insert(name, slot);
        }
        drained = co.drains.among(gathered.slots.keys().map(String::as_str));
        (chosen, choice) = choose_cluster_drained(&stored.request, &gathered.slots, stored.decision.seed, &drained);
    }
    co.metrics.gathered(
        asked.elapsed(),
        gathered.slots.iter().map(|(name, s)| (name.as_str(), s.status)),
    );
    stored.state = if stored.dry_run || chosen.is_some() {
        DecisionState::Planned
    } else {
        DecisionState::Failed
    };
    let placed = chosen.is_some();
    stored.decision.chosen_cluster = chosen;
    stored.decision.clusters = gathered.slots;
    stored.decision.choice = choice;
    stored.decision.drained = drained;
    if !placed {
        judge_unplaced(stored);
    }
    // Past three clusters, only the chosen one and the two a failed commit would try next keep
    // their whole answer (fetched from their agents when these answered with summaries); the
    // others are stored as summaries (docs/design.md §4).
    let kept = fedvol_common::summary::summarize_unlisted(
        &stored.request,
        &mut stored.decision,
        fedvol_common::summary::LISTED_CLUSTERS,
    );
    super::whole::fetch(co, &stored.request.request_id, &mut stored.decision.clusters, &kept).await;
    stored.updated_ms = now_ms();
    Ok(())
}
