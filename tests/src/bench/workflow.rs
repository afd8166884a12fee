//! The benchmark's workflow and the request bodies built from it.
//!
//! One fixed small workflow: a 1 MiB automatic (ephemeral) volume `scratch` annotated
//! `tier: fast`, shared by two jobs of 1 core and 1 GiB each; the second job has a hard
//! `!maintenance` and a soft `gpu` constraint, so the host stages reject hosts and count soft
//! matches. It is sent as [`SubmitMsg`] JSON, as `fedvol submit` sends it, with a unique
//! request id per request.

use fedvol_common::funnel::{PlanRequest, trace::STORED_TRACE_LIMIT};
use fedvol_common::model::Workflow;
use fedvol_formats::parse_workflow_str;
use fedvol_proto::agent::{Plan, PlanMsg};
use fedvol_proto::coordinator::{Submit, SubmitMsg};
use fedvol_proto::{Endpoint, now_ms};

/// The user every benchmark request is sent as (the coordinator runs without a directory, in
/// dev mode, so the groups the request claims are used).
pub const USER: &str = "bench";

/// The most requests the driver keeps in flight per user: half a coordinator's default
/// `maxInFlightPerUser` (64), so that the per-user cap (a feature) is never what is measured.
pub const IN_FLIGHT_PER_USER: usize = 32;

/// The users `in_flight` requests are spread over, round robin: `bench` alone up to
/// [`IN_FLIGHT_PER_USER`], else `bench0`, `bench1`... (one per 32 in flight, rounded up).
pub fn users(in_flight: usize) -> Vec<String> {
    let n = in_flight.div_ceil(IN_FLIGHT_PER_USER);
    if n <= 1 {
        vec![USER.to_string()]
    } else {
        (0..n).map(|k| format!("{USER}{k}")).collect()
    }
}

/// The group the requests claim.
pub const GROUP: &str = "bench";

/// The workflow (Fuzzfile v4).
pub const WORKFLOW_YAML: &str = "\
version: v4
volumes:
  scratch:
    size: 1MiB
    annotations: {tier: fast}
jobs:
  prep:
    image: {uri: docker://alpine:3.20}
    mounts: {/scratch: scratch}
    resource: {cpu: {cores: 1}, memory: {size: 1GiB}}
  run:
    image: {uri: docker://alpine:3.20}
    mounts: {/scratch: scratch}
    resource: {cpu: {cores: 1}, memory: {size: 1GiB}}
    constraints: [\"!maintenance\", \"gpu:soft\"]
";

/// [`WORKFLOW_YAML`] parsed as the CLI parses it.
///
/// Errors: the diagnostics, should the workflow ever stop being valid.
pub fn workflow() -> Result<Workflow, String> {
    parse_workflow_str("bench-workflow.yaml", "bench", WORKFLOW_YAML)
        .map(|l| l.value)
        .map_err(|d| format!("the benchmark workflow is invalid: {d}"))
}

/// The JSON of a submit of `workflow` under request id `id` (a dry run, i.e. `plan`, when
/// `dry_run`), waiting the coordinator's default deadline.
pub fn submit_body(workflow: &Workflow, id: &str, dry_run: bool) -> Vec<u8> {
    let msg = SubmitMsg {
        priority: None,
        wait_for_capacity: false,
        request_id: id.to_string(),
        workflow: workflow.clone(),
        dry_run,
        seed: None,
        groups: vec![GROUP.to_string()],
        timeout_ms: 0,
        trace_limit: None,
        keep: false,
        choice: None,
    };
    Submit::encode_request(&msg).to_vec()
}

/// The JSON of the plan broadcast a coordinator sends for a submit of `workflow` under request
/// id `id` (as `daemon::fanout` builds it: the same request, trace limit and seed), holding
/// when `reserve`, asking for the summary when `summary` (as a coordinator does past three
/// clusters), with a deadline `wait_ms` from now.
pub fn plan_body(workflow: &Workflow, id: &str, reserve: bool, summary: bool, wait_ms: u64) -> Vec<u8> {
    let msg = PlanMsg {
        request: PlanRequest::new(id, workflow.clone(), USER)
            .with_groups([GROUP])
            .with_trace_limit(STORED_TRACE_LIMIT),
        deadline_ms: now_ms() + wait_ms,
        reserve,
        ttl_ms: 0,
        summary,
        dry_run: false,
    };
    Plan::encode_request(&msg).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_32_in_flight_the_requests_are_spread_over_users() {
        assert_eq!(users(1), ["bench"]);
        assert_eq!(users(32), ["bench"]);
        assert_eq!(users(64), ["bench0", "bench1"]);
        assert_eq!(users(256).len(), 8);
    }

    #[test]
    fn the_workflow_is_two_one_core_jobs_sharing_one_volume() {
        let w = workflow().unwrap();
        assert_eq!(w.volumes.len(), 1);
        assert_eq!(w.jobs.len(), 2);
        assert!(w.jobs.iter().all(|j| j.resources.cpu == 1 && j.mounts.len() == 1));
        let body: SubmitMsg = serde_json::from_slice(&submit_body(&w, "r-1", true)).unwrap();
        assert_eq!((body.request_id.as_str(), body.dry_run), ("r-1", true));
        let plan: PlanMsg = serde_json::from_slice(&plan_body(&w, "r-2", false, false, 1000)).unwrap();
        assert_eq!(plan.request.workflow, w);
        assert!(!plan.reserve);
    }
}
