//! The submit operation: plan everywhere, choose, commit, store — idempotent by request id.
//!
//! 1. The request id is the client's (validated as a bucket key) or a fresh unique one
//!    (`<workflow>-<random>`); the seed is the client's or `seed_from_request_id`; the groups
//!    come from the directory (or, in dev mode, from the client).
//! 2. A request id already stored returns the stored decision without planning again (to its
//!    owner only: another user's submit under that id is refused with `not_owner`). A
//!    decision still being committed by another coordinator is waited for; one left `planned`
//!    by a coordinator that died mid-commit (older than the whole commit phase can take) is
//!    taken over and its commit finished. A stored dry run is replaced by a real submit of the
//!    same id. A dry run is stored only when it asks (`keep`); otherwise it skips steps 2 and 4
//!    and is answered with its decision (issue 14: no bucket write on a plan's reply path).
//! 3. Issue 18: the priority class is resolved (an unknown one is `bad_request`) and the
//!    request is admitted to the federation-wide quotas that apply to it ([`admit_quota`]: a
//!    refusal is `quota_exceeded`, stored `failed` without asking any cluster). Then
//!    [`fan_out`], holding nothing (admission to capacity happens at commit: see `commit`), then
//!    [`choose_cluster`]. A submit that asked to wait for capacity and found no room is stored
//!    `queued` ([`super::queue`]) instead of `failed`.
//! 4. The decision is stored (`planned`, with a pending commit attempt on the chosen cluster;
//!    `failed` at once when nothing fits), then committed ([`commit_phase`]) and stored again
//!    (`committed` or `failed`; a `failed` decision leaves the quota ledgers, a waiting one is
//!    queued instead). Each write is a compare-and-set, so two coordinators racing on
//!    one id end with one decision; an agent commits a request id once.
//! 5. A commit in doubt (not answered, outcome unknown: see `commit`) is not stored as an
//!    outcome: the decision stays `planned` and the client gets `commit_outcome_unknown` with
//!    it. A submit of the same id after the commit phase's bound, or the reconciler, takes it
//!    over like an abandoned one: it settles the pending attempts, then finishes.

use std::sync::Arc;
use std::time::Duration;

use fedvol_common::choice::choose_cluster;
use fedvol_common::decision::Decision;
use fedvol_common::funnel::{PlanRequest, seed_from_request_id};
use fedvol_proto::coordinator::{SubmitMsg, SubmitReply};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, ProtoError, now_ms};

use super::Coordinator;
use super::commit::{Phase, RELEASE_WAIT_MS, Start, commit_phase, pending_attempt, settle_window_ms};
use super::config::MAX_DEADLINE_MS;
use super::fanout::fan_out;
use super::store::{Write, valid_key};

/// How often a submit polls a decision another coordinator is committing, ms.
const POLL_MS: u64 = 100;

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

/// A fresh request id for a workflow: [`fedvol_proto::coordinator::request_id_for`] with a NUID (unique
/// across processes).
pub fn new_request_id(co: &Coordinator, workflow: &str) -> String {
    fedvol_proto::coordinator::request_id_for(workflow, &fedvol_proto::coordinator::unique_token(&co.client))
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

/// What the store says about a request id before planning.
enum Existing {
    /// Nothing stored: plan, and create the key.
    Fresh,
    /// A dry run is stored at this revision: plan for real, and replace it.
    ReplaceDryRun(u64),
    /// The answer is ready.
    Done(Box<SubmitReply>),
}

/// Looks the request id up; waits while another coordinator is committing it; takes over an
/// abandoned commit.
async fn existing(co: &Arc<Coordinator>, id: &str, user: &str, dry_run: bool, digest: &str) -> Existing {
    let answer_by = tokio::time::Instant::now() + Duration::from_millis(ANSWER_WITHIN_MS);
    loop {
        let (stored, rev) = match co.store.get(id).await {
            Err(e) => return Existing::Done(Box::new(error_reply(Code::StoreUnavailable, e.to_string()))),
            Ok(None) => return Existing::Fresh,
            Ok(Some(x)) => x,
        };
        if stored.request.user != user {
            tracing::warn!(owner = %fedvol_common::limits::printable(&stored.request.user), "submit under another user's request id refused");
            return Existing::Done(Box::new(error_reply(
                Code::NotOwner,
                format!("request id `{id}` belongs to another user's decision: choose another request id"),
            )));
        }
        if let Some(conflict) = conflict(id, &stored, dry_run, digest) {
            tracing::warn!(stored_workflow = %fedvol_common::limits::printable(&stored.decision.workflow), "a different request under a stored request id refused");
            return Existing::Done(Box::new(SubmitReply::error(conflict)));
        }
        if stored.dry_run && !dry_run {
            return Existing::ReplaceDryRun(rev);
        }
        if stored.state == DecisionState::Planned && !stored.dry_run {
            let age = now_ms().saturating_sub(stored.updated_ms);
            if age > commit_phase_bound_ms(co) {
                tracing::warn!(age_ms = age, "taking over a commit its coordinator abandoned");
                return Existing::Done(Box::new(resume(co, stored, rev).await));
            }
            if tokio::time::Instant::now() >= answer_by {
                return Existing::Done(Box::new(still_settling(co, stored, age)));
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
            continue;
        }
        tracing::info!(state = ?stored.state, "request id already decided: stored decision returned");
        return Existing::Done(Box::new(stored_reply(stored)));
    }
}

/// Why a submit (`dry_run`, `digest`) under request id `id` is not the request `stored` under
/// it (issue 12: one request id, one workflow): another workflow, other groups or another seed
/// ([`fedvol_proto::coordinator::SubmitMsg::digest`]), or a dry run of a real decision. A real
/// submit of a stored dry run of the same request is no conflict: it takes the dry run over.
/// Records of earlier releases carry no digest and are not checked.
fn conflict(id: &str, stored: &StoredDecision, dry_run: bool, digest: &str) -> Option<ProtoError> {
    let what = if stored.dry_run { "dry run" } else { "decision" };
    let differs = match &stored.request_digest {
        Some(d) if d != digest => Some("another workflow, other groups or another seed"),
        _ if dry_run && !stored.dry_run => Some("a dry run, and the stored decision is a real submit"),
        _ => None,
    }?;
    let state = format!("{:?}", stored.state).to_lowercase();
    Some(Code::RequestIdConflict.error(format!(
        "request id `{id}` is taken by the {what} of workflow `{}` ({state}), and this request differs: {differs}; submit it under another request id, or the same request to get the stored decision",
        fedvol_common::limits::printable(&stored.decision.workflow)
    )))
}

/// Finishes the commit of a decision left `planned` by a coordinator that stopped answering (or
/// whose commit was in doubt): settles its pending attempts, then goes on with the commit phase.
pub async fn resume(co: &Arc<Coordinator>, mut stored: StoredDecision, rev: u64) -> SubmitReply {
    let mut rev = rev;
    match timed_commit_phase(co, &mut stored, &mut rev, Start::TakeOver).await {
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
    }
}

/// Stores the outcome of a commit phase over revision `rev`. A decision that failed for want
/// of room and asked to wait is queued instead ([`super::queue::to_queue`]); one that failed
/// otherwise leaves the quota ledgers.
pub async fn save(co: &Arc<Coordinator>, mut stored: StoredDecision, rev: u64) -> SubmitReply {
    let id = stored.decision.request_id.clone();
    if stored.state == DecisionState::Failed {
        if stored.wait_for_capacity && no_room(&stored) {
            if let Err(e) = super::queue::to_queue(co, &mut stored).await {
                tracing::warn!(error = %e, "the decision could not be queued; stored failed");
                super::quota::release(co, &id, &stored.decision.quota).await;
            }
        } else {
            super::quota::release(co, &id, &stored.decision.quota).await;
        }
    }
    match co.store.update(&id, &stored, rev).await {
        Ok(Write::Done(_)) => {
            tracing::info!(state = ?stored.state, chosen = ?stored.decision.chosen_cluster, "decision stored");
            outcome_reply(stored)
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
/// it refused (`quota_exceeded`, `queue_full`, `queue_timeout`), the decision alone otherwise.
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
    }
}

/// True when a failed decision failed for want of room only: refused by a quota, nothing
/// feasible, or every commit refused because the capacity went to others (`no_longer_fits`,
/// `capacity_in_flight`). Such a decision may wait in the queue; one whose commit failed
/// otherwise (a driver) may not.
pub fn no_room(stored: &StoredDecision) -> bool {
    match &stored.decision.refused {
        Some(r) => Code::QuotaExceeded.is(r),
        None => stored
            .attempts
            .iter()
            .all(|a| a.ok || a.pending || super::commit::is_contention(&a.error)),
    }
}

/// Checks the request against the federation-wide quotas that apply to it (issue 18): a dry run
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
/// ([`choose_cluster`]): fills the decision's slots and choice; the state is `failed` when no
/// cluster was chosen (a dry run stays `planned`).
///
/// Errors: NATS failed (`nats_error`), as the reply.
pub async fn plan(co: &Arc<Coordinator>, stored: &mut StoredDecision, wait_ms: u64) -> Result<(), SubmitReply> {
    let asked = std::time::Instant::now();
    let gathered = fan_out(co, &stored.request, Duration::from_millis(wait_ms))
        .await
        .map_err(|e| error_reply(Code::NatsError, e.to_string()))?;
    co.metrics.gathered(
        asked.elapsed(),
        gathered.slots.iter().map(|(name, s)| (name.as_str(), s.status)),
    );
    let (chosen, choice) = choose_cluster(&stored.request, &gathered.slots, stored.decision.seed);
    stored.state = if stored.dry_run || chosen.is_some() {
        DecisionState::Planned
    } else {
        DecisionState::Failed
    };
    stored.decision.chosen_cluster = chosen;
    stored.decision.clusters = gathered.slots;
    stored.decision.choice = choice;
    stored.updated_ms = now_ms();
    Ok(())
}

/// Handles one submit of `user`. Never fails: every problem is an error in the reply.
pub async fn submit(co: Arc<Coordinator>, user: &str, msg: SubmitMsg) -> SubmitReply {
    let id = if msg.request_id.is_empty() {
        new_request_id(&co, &msg.workflow.name)
    } else {
        msg.request_id.clone()
    };
    // Checked before it is logged: an invalid id is user input that may carry ESC, CR or LF
    // (OWASP Logging Cheat Sheet: log injection), so the span and the error show it escaped.
    if !valid_key(&id) {
        let shown = fedvol_common::limits::printable(&id.chars().take(80).collect::<String>());
        tracing::Span::current().record("request_id", tracing::field::display(&shown));
        return error_reply(
            Code::BadRequest,
            format!(
                "request id `{shown}` is not valid: use 1 to 256 letters, digits, `-`, `_`, `=` or `.` (not at either end)"
            ),
        );
    }
    tracing::Span::current().record("request_id", tracing::field::display(&id));
    // A fresh id the coordinator made, or a dry run (which holds nothing), skips the lookup:
    // creating the key fails if the id is taken, and that conflict is resolved below exactly as
    // the lookup would have (the stored decision, its owner check, a take-over). One store
    // round trip less per plan.
    // A dry run not asked to be kept never touches the bucket (issue 14): it is answered and
    // forgotten, and its id is not taken.
    let kept = !msg.dry_run || msg.keep;
    let digest = if kept { msg.digest() } else { String::new() };
    let look_up_first = !msg.request_id.is_empty() && !msg.dry_run;
    let replace = if look_up_first {
        match existing(&co, &id, user, msg.dry_run, &digest).await {
            Existing::Done(reply) => return *reply,
            Existing::Fresh => None,
            Existing::ReplaceDryRun(rev) => Some(rev),
        }
    } else {
        None
    };

    let groups = co.groups(user, &msg.groups);
    let seed = msg.seed.unwrap_or_else(|| seed_from_request_id(&id));
    let request = PlanRequest {
        request_id: id.clone(),
        workflow: msg.workflow,
        user: user.to_string(),
        groups,
        seed,
        trace_limit: msg.trace_limit.unwrap_or(co.cfg.trace_limit),
        choice: co.cfg.choice_for(msg.choice),
    };
    let (priority_class, priority) = match co.cfg.policy.priority(msg.priority.as_deref(), &request.workflow) {
        Ok(p) => p,
        Err(e) => return error_reply(Code::BadRequest, e),
    };
    let wait_ms = if msg.timeout_ms == 0 {
        co.cfg.deadline_ms
    } else {
        msg.timeout_ms.min(MAX_DEADLINE_MS)
    };
    tracing::info!(workflow = %fedvol_common::limits::printable(&request.workflow.name), dry_run = msg.dry_run, seed, wait_ms, priority, "submit");
    let mut stored = StoredDecision {
        state: DecisionState::Planned,
        decision: Decision {
            request_id: id.clone(),
            workflow: request.workflow.name.clone(),
            seed,
            chosen_cluster: None,
            clusters: Default::default(),
            choice: Vec::new(),
            quota: Vec::new(),
            refused: None,
        },
        request,
        attempts: Vec::new(),
        completion: None,
        updated_ms: now_ms(),
        dry_run: msg.dry_run,
        request_digest: kept.then(|| digest.clone()),
        priority_class,
        priority,
        wait_for_capacity: msg.wait_for_capacity && !msg.dry_run,
        queued_ms: None,
    };
    if let Err(reply) = admit_quota(&co, &mut stored).await {
        return reply;
    }
    if stored.decision.refused.is_none()
        && let Err(reply) = plan(&co, &mut stored, wait_ms).await
    {
        super::quota::release(&co, &id, &stored.decision.quota).await;
        return reply;
    }
    if !kept {
        tracing::info!(chosen = ?stored.decision.chosen_cluster, "dry run answered (not kept)");
        return outcome_reply(stored);
    }
    if stored.state == DecisionState::Failed
        && stored.wait_for_capacity
        && let Err(e) = super::queue::to_queue(&co, &mut stored).await
    {
        return error_reply(Code::StoreUnavailable, e.to_string());
    }
    // The first commit attempt is recorded with the decision, before it is sent.
    if stored.state == DecisionState::Planned
        && !msg.dry_run
        && let Some(c) = stored.decision.chosen_cluster.clone()
    {
        let first = pending_attempt(&stored, &c);
        stored.attempts.push(first);
    }
    let mut replace = replace;
    let mut tries = 0;
    let written = loop {
        tries += 1;
        let written = match replace {
            Some(rev) => co.store.update(&id, &stored, rev).await,
            None => co.store.create(&id, &stored).await,
        };
        match written {
            Ok(Write::Done(rev)) => break Ok(rev),
            Err(e) => break Err(e),
            Ok(Write::Conflict) => {}
        }
        // Another submit of the same id stored first. A real submit replaces a dry run that won
        // the race (as it would have, had it come first); anything else is the answer.
        tracing::info!("the same request id was stored meanwhile by a concurrent submit");
        match existing(&co, &id, user, msg.dry_run, &digest).await {
            Existing::Done(reply) => return *reply,
            Existing::ReplaceDryRun(rev) if tries < 3 => replace = Some(rev),
            _ => {
                return error_reply(
                    Code::StoreUnavailable,
                    "the decision changed under this request; submit again",
                );
            }
        }
    };
    let mut rev = match written {
        Ok(rev) => rev,
        Err(e) => {
            // Nothing stored: nothing stands behind its quota count.
            super::quota::release(&co, &id, &stored.decision.quota).await;
            return error_reply(Code::StoreUnavailable, e.to_string());
        }
    };
    tracing::info!(state = ?stored.state, chosen = ?stored.decision.chosen_cluster, "decision planned");
    if stored.state != DecisionState::Planned || stored.dry_run {
        if stored.state == DecisionState::Failed && !stored.dry_run {
            super::quota::release(&co, &id, &stored.decision.quota).await;
        }
        return outcome_reply(stored);
    }
    match timed_commit_phase(&co, &mut stored, &mut rev, Start::Fresh).await {
        Phase::Done => save(&co, stored, rev).await,
        Phase::InDoubt(doubt) => in_doubt(stored, doubt),
        Phase::Superseded(theirs) => stored_reply(*theirs),
    }
}
