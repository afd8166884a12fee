//! `submit`: plan everywhere, choose, commit, store — idempotent by request id. An entry point
//! over the decision's lifecycle ([`crate::daemon::lifecycle`]): the steps below that are not
//! about the request id (admission, planning, committing, storing the outcome) are its.
//!
//! 1. The request id is the client's (validated as a bucket key) or a fresh unique one
//!    (`<workflow>-<random>`); the seed is the client's or `seed_from_request_id`; the groups
//!    come from the directory (or, in dev mode, from the client).
//!    A fresh id, a dry run, and a client's id the decision index vouches is not stored
//!    ([`crate::daemon::index::DecisionIndex::vouches_absent`]) when no quota applies, skip the
//!    lookup of step 2: creating the key finds a stored one, resolved as step 2 would.
//! 2. A request id already stored returns the stored decision without planning again (to its
//!    owner only: another user's submit under that id is refused with `not_owner`). A
//!    decision still being committed by another coordinator is waited for; one left `planned`
//!    by a coordinator that died mid-commit (older than the whole commit phase can take) is
//!    taken over and its commit finished. A stored dry run is replaced by a real submit of the
//!    same id, and so is a decision stored `failed` because clusters did not answer
//!    (`clusters_unavailable`, retryable: planned again). A dry run is stored only when it asks
//!    (`keep`); otherwise it skips steps 2 and 4 and is answered with its decision (no bucket
//!    write on a plan's reply path).
//! 3. The priority class is resolved (an unknown one is `bad_request`) and the request is
//!    admitted to the federation-wide quotas that apply to it ([`admit_quota`]: a refusal is
//!    `quota_exceeded`, stored `failed` without asking any cluster). Then
//!    [`fan_out`](crate::daemon::fanout::fan_out), holding nothing (admission to capacity
//!    happens at commit: see [`crate::daemon::commit`]), then
//!    [`choose_cluster`](fedvol_common::choice::choose_cluster). A submit that asked to wait
//!    for capacity and found no room is stored `queued` ([`crate::daemon::queue`]) instead of
//!    `failed`, unless no cluster can ever place it (`unresolvable`: refused at once,
//!    [`crate::daemon::lifecycle::judge_unplaced`]).
//! 4. The decision is stored (`planned`, with a pending commit attempt on the chosen cluster;
//!    `failed` at once when nothing fits), then committed and stored again
//!    ([`commit_and_save`]: `committed` or `failed`; a `failed` decision leaves the quota
//!    ledgers, a waiting one is queued instead). Each write is a compare-and-set, so two
//!    coordinators racing on one id end with one decision; an agent commits a request id once.
//! 5. A commit in doubt (not answered, outcome unknown: see [`crate::daemon::commit`]) is not
//!    stored as an outcome: the decision stays `planned` and the client gets
//!    `commit_outcome_unknown` with it. A submit of the same id after the commit phase's bound,
//!    or the reconciler, takes it over like an abandoned one: it settles the pending attempts,
//!    then finishes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fedvol_common::decision::Decision;
use fedvol_common::funnel::{PlanRequest, seed_from_request_id};
use fedvol_proto::coordinator::{SubmitMsg, SubmitReply};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, ProtoError, now_ms};

use crate::daemon::Coordinator;
use crate::daemon::commit::{Start, pending_attempt};
use crate::daemon::config::MAX_DEADLINE_MS;
use crate::daemon::lifecycle::{
    ANSWER_WITHIN_MS, admit_quota, commit_and_save, commit_phase_bound_ms, error_reply, no_room, outcome_reply, plan,
    resume, still_settling, stored_reply,
};
use crate::daemon::store::{Write, valid_key};

/// How often a submit polls a decision another coordinator is committing, ms.
const POLL_MS: u64 = 100;

/// A fresh request id for a workflow: [`fedvol_proto::coordinator::request_id_for`] with a NUID (unique
/// across processes).
pub fn new_request_id(co: &Coordinator, workflow: &str) -> String {
    fedvol_proto::coordinator::request_id_for(workflow, &fedvol_proto::coordinator::unique_token(&co.client))
}

/// What the store says about a request id before planning.
enum Existing {
    /// Nothing stored: plan, and create the key.
    Fresh,
    /// A dry run, or a decision no cluster was chosen for because clusters did not answer
    /// (`clusters_unavailable`: nothing was booked), is stored at this revision: plan for
    /// real, and replace it.
    Replace(u64),
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
            return Existing::Replace(rev);
        }
        // Retryable: asked again under its request id, it is planned again (the clusters that
        // did not answer may answer now).
        if stored.state == DecisionState::Failed
            && !dry_run
            && stored
                .decision
                .refused
                .as_ref()
                .is_some_and(|r| Code::ClustersUnavailable.is(r))
        {
            tracing::info!("clusters did not answer this request's last plan: planned again");
            return Existing::Replace(rev);
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
/// it (one request id, one workflow): another workflow, other groups or another seed
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
    // A dry run not asked to be kept never touches the bucket: it is answered and
    // forgotten, and its id is not taken.
    // A client's id the decision index vouches is not stored (its watch runs and has caught
    // up, and no decision of that id reached it) skips the lookup too, when no quota applies:
    // a decision stored within the watch's lag makes the create conflict, resolved below the
    // same way. A repeat of a stored id, what a client's retry is, is known to the index and
    // looked up first, so that it is answered without planning again. Where quotas apply the
    // lookup stays: admission counts the id in the quota ledgers before the create, and an id
    // stored by another request (another user's) must be refused before that, not after.
    let kept = !msg.dry_run || msg.keep;
    let digest = if kept { msg.digest() } else { String::new() };
    let groups = co.groups(user, &msg.groups);
    let quotas_apply = !co.cfg.policy.applicable(&msg.workflow, user, &groups).is_empty();
    let look_up_first = !msg.request_id.is_empty() && !msg.dry_run && (quotas_apply || !co.index.vouches_absent(&id));
    let replace = if look_up_first {
        match existing(&co, &id, user, msg.dry_run, &digest).await {
            Existing::Done(reply) => return *reply,
            Existing::Fresh => None,
            Existing::Replace(rev) => Some(rev),
        }
    } else {
        None
    };

    let seed = msg.seed.unwrap_or_else(|| seed_from_request_id(&id));
    let request = PlanRequest::new(id.clone(), msg.workflow, user)
        .with_groups(groups)
        .with_seed(seed)
        .with_trace_limit(msg.trace_limit.unwrap_or(co.cfg.trace_limit))
        .with_choice(co.cfg.choice_for(msg.choice));
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
            drained: Default::default(),
        },
        request,
        attempts: Vec::new(),
        completion: None,
        updated_ms: now_ms(),
        dry_run: msg.dry_run,
        request_digest: kept.then(|| digest.clone()),
        run_failure: None,
        completing: None,
        priority_class,
        priority,
        wait_for_capacity: msg.wait_for_capacity && !msg.dry_run,
        queued_ms: None,
    };
    // A new key is bounded per user when no quota bounds them (`daemon::retention`).
    if kept
        && replace.is_none()
        && let Some(e) = crate::daemon::retention::cap(&co, user, quotas_apply).await
    {
        tracing::warn!(code = %e.code, "submit refused: the user's decisions are at the limit");
        return SubmitReply::error(e);
    }
    if let Err(reply) = admit_quota(&co, &mut stored).await {
        return reply;
    }
    if stored.decision.refused.is_none()
        && let Err(reply) = plan(&co, &mut stored, wait_ms).await
    {
        crate::daemon::quota::release(&co, &id, &stored.decision.quota).await;
        return reply;
    }
    if !kept {
        tracing::info!(chosen = ?stored.decision.chosen_cluster, "dry run answered (not kept)");
        return outcome_reply(stored);
    }
    if stored.state == DecisionState::Failed
        && stored.wait_for_capacity
        && no_room(&stored)
        && let Err(e) = crate::daemon::waiting::to_queue(&co, &mut stored).await
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
    // Encoded once: a decision that ends here is answered with the record written.
    let record = fedvol_proto::encode_sized(&stored, stored.encoded_size_hint());
    let written = loop {
        tries += 1;
        let written = match replace {
            Some(rev) => co.store.update_record(&id, &stored, record.clone(), rev).await,
            None => co.store.create_record(&id, &stored, record.clone()).await,
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
            Existing::Replace(rev) if tries < 3 => replace = Some(rev),
            _ => {
                return error_reply(
                    Code::StoreUnavailable,
                    "the decision changed under this request; submit again",
                );
            }
        }
    };
    let rev = match written {
        Ok(rev) => rev,
        Err(e) => {
            // Nothing stored: nothing stands behind its quota count.
            crate::daemon::quota::release(&co, &id, &stored.decision.quota).await;
            return error_reply(Code::StoreUnavailable, e.to_string());
        }
    };
    tracing::info!(state = ?stored.state, chosen = ?stored.decision.chosen_cluster, "decision planned");
    if stored.state != DecisionState::Planned || stored.dry_run {
        if stored.state == DecisionState::Failed && !stored.dry_run {
            crate::daemon::quota::release(&co, &id, &stored.decision.quota).await;
        }
        return outcome_reply(stored).with_record(record);
    }
    commit_and_save(&co, stored, rev, Start::Fresh).await
}

/// [`submit`] as [`super::dispatch`] serves it: its error logged (and `failed` set), its stored
/// state and failure kind counted in the metrics.
pub(super) async fn counted(co: &Arc<Coordinator>, user: &str, msg: SubmitMsg, failed: &AtomicBool) -> SubmitReply {
    let reply = submit(co.clone(), user, msg).await;
    if let Some(e) = &reply.error {
        failed.store(true, Ordering::Relaxed);
        tracing::warn!(code = %e.code, error = %fedvol_common::limits::printable(&e.message), "submit answered with an error");
    }
    if let Some(stored) = &reply.stored {
        co.metrics.decision(stored.state.as_str());
        if let Some(kind) = stored.failure() {
            co.metrics.failed(kind);
        }
    }
    reply
}
