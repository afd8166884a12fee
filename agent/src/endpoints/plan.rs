//! Plan: run the funnel on the effective inventory; with `reserve`, hold what it chose (a hold
//! is acknowledged state: it reaches the disk before the answer, and survives kill -9 like a
//! commit); with `summary`, answer with the summary and keep the whole answer
//! ([`crate::answers`]). At most one plan per core is computed at once; the slot is released before the
//! answer waits for the disk.

use std::sync::Arc;
use std::time::Instant;

use fedvol_proto::agent::{PlanMsg, PlanReply};
use fedvol_proto::{Code, Failure, now_ms};

use crate::restore_gate::RestoreGate;
use crate::shared::{Shared, durable, internal, lock, store_failed};
use crate::state::core::plan_with;

/// Inventories up to this many hosts are planned on the async worker that received the
/// request: such a plan takes well under a millisecond (`plan_synth`: about 0.05 ms
/// per 1,000 hosts), less than handing it to another thread and back. Larger ones go to the
/// blocking pool, so that heartbeats and other requests are not held up behind them.
pub const INLINE_PLAN_MAX_HOSTS: usize = 20_000;

/// Answers a plan (broadcast or cluster-addressed).
pub async fn handle(shared: Arc<Shared>, msg: PlanMsg) -> Option<Result<PlanReply, Failure>> {
    let started = Instant::now();
    // A fresh state's free capacity is not free until the restore (crate::restore_gate): no
    // cluster is chosen on it meanwhile.
    if shared.restore.closed() {
        return Some(Err(Failure::new(
            Code::Restoring,
            RestoreGate::refusal(&shared.cluster),
        )));
    }
    let Ok(slot) = shared.plan_slots.acquire().await else {
        return Some(Err(internal("the agent is shutting down")));
    };
    let msg_summary = msg.summary;
    // Requests served beside this one (it holds one admission permit itself: crate::service).
    let others = shared
        .max_in_flight
        .saturating_sub(shared.admission.available_permits())
        .saturating_sub(1);
    let compute = {
        let sh = shared.clone();
        move || {
            if msg.reserve {
                lock(&sh).plan_and_hold(&msg, now_ms()).map_err(|e| e.to_string())
            } else {
                let (inv, prepared, state, manager, runner, generation) = {
                    let core = lock(&sh);
                    let (inv, prepared, state) = core.snapshot_for(&msg.request.request_id);
                    (
                        inv,
                        prepared,
                        state,
                        core.resource_manager(),
                        core.runner(),
                        core.generation(),
                    )
                };
                let mut decision = plan_with(runner.as_ref(), &inv, &prepared, &state, &msg.request);
                // For the commit that may follow (none follows a dry run): admission at commit
                // takes it when nothing changed meanwhile (Core::keep_plan says when it is kept).
                if !msg.dry_run {
                    lock(&sh).keep_plan(&msg.request, generation, &decision, others);
                }
                decision.resource_manager = manager;
                Ok(PlanReply {
                    request_id: msg.request.request_id.clone(),
                    cluster: sh.cluster.clone(),
                    decision,
                    hold: None,
                })
            }
        }
    };
    let hosts = lock(&shared).host_count();
    let result = if hosts <= INLINE_PLAN_MAX_HOSTS {
        Ok(compute())
    } else {
        tokio::task::spawn_blocking(compute).await
    };
    // The slot is for computing only, not for waiting on the disk below.
    drop(slot);
    let mut reply = match result {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => store_failed(&e),
        Err(e) => return Some(Err(internal(e))),
    };
    reply.decision.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    if msg_summary {
        // The whole answer stays here for `answer`; its summary crosses NATS.
        if let Err(e) = shared.answers.keep(&reply.request_id, &reply.decision, now_ms()) {
            tracing::warn!(request_id = %reply.request_id, error = %e, "the whole answer could not be kept");
        }
        reply.decision = reply.decision.summary();
    }
    let held = reply.hold.is_some();
    tracing::info!(
        request_id = %reply.request_id,
        feasible = reply.decision.feasible,
        held,
        elapsed_ms = reply.decision.elapsed_ms,
        "plan answered"
    );
    Some(if held { durable(&shared, reply).await } else { Ok(reply) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan answered for a dry run keeps nothing for admission at commit (no commit follows
    /// it), nor one answered while another request is in progress on the agent; one that a
    /// commit may follow, served alone, is kept.
    #[tokio::test]
    async fn a_dry_run_plan_is_not_kept_for_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::shared::one_host_for_tests(dir.path());
        let wf = fedvol_formats::parse_workflow_str(
            "wf.yaml",
            "wf",
            "version: v4\njobs:\n  j:\n    image: {uri: docker://a}\n    resource: {cpu: {cores: 1}, memory: {size: 1GiB}}\n",
        )
        .unwrap()
        .value;
        let plan = |id: &str, dry_run: bool| PlanMsg {
            request: fedvol_common::funnel::PlanRequest::new(id, wf.clone(), "u"),
            deadline_ms: u64::MAX,
            reserve: false,
            ttl_ms: 0,
            summary: false,
            dry_run,
        };
        let r = handle(shared.clone(), plan("dry", true)).await.unwrap().unwrap();
        assert!(r.decision.feasible, "{r:?}");
        assert_eq!(lock(&shared).kept_plans(), 0, "nothing kept for a dry run");
        // Served as the service serves it: holding its admission permit.
        let permit = shared.admission.clone().try_acquire_owned().unwrap();
        let other = shared.admission.clone().try_acquire_owned().unwrap();
        handle(shared.clone(), plan("busy", false)).await.unwrap().unwrap();
        assert_eq!(
            lock(&shared).kept_plans(),
            0,
            "not kept while another request is in progress"
        );
        drop(other);
        handle(shared.clone(), plan("real", false)).await.unwrap().unwrap();
        assert_eq!(lock(&shared).kept_plans(), 1, "kept for the commit that may follow");
        drop(permit);
    }
}
