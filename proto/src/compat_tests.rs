//! Wire compatibility with the previous release (docs/design.md §5: fields are added, never renamed):
//! the bodies it sent, written out here as JSON text, decode with this crate's endpoints; and
//! this crate's replies and failure bodies decode with the previous release's reply types
//! (copied below as they were), so a federation can run both during an upgrade.

use serde::Deserialize;
use serde_json::Value;

use crate::agent::{self, ActionReply, Heartbeat};
use crate::coordinator::{self, ClustersReply, ListReply, ReplayReply, SubmitReply};
use crate::decisions::{DecisionState, StoredDecision};
use crate::{Code, Endpoint, Failure, provisioner};

/// The workflow of a one-job Fuzzfile (a 1 GiB volume mounted at `/s`), as the previous
/// release's coordinator sent it.
fn workflow_json() -> String {
    concat!(
        r#"{"name":"w","format":"fuzzfile_v4","#,
        r#""volumes":[{"key":"s","source":{"fuzzball":{"use_":null,"name":null,"size":1073741824,"annotations":{},"reference":null}},"access_modes":["ReadWriteOnce"],"line":3}],"#,
        r#""jobs":[{"name":"j","kind":"job","image":"docker://a","mounts":[{"volume":"s","path":"/s"}],"resources":{"cpu":1,"memory":1073741824,"devices":{},"exclusive":false,"annotations":{}},"nodes":1,"depends_on":[],"constraints":[],"affinity":{"with":[],"apart_from":[]},"networks":[],"line":6}],"#,
        r#""project":null,"clusters":[],"annotations":{}}"#,
    )
    .to_string()
}

fn request_json() -> String {
    format!(
        r#"{{"request_id":"r-1","workflow":{},"user":"alice","groups":["physics"],"seed":7,"trace_limit":5}}"#,
        workflow_json()
    )
}

fn decision_json() -> String {
    let d = fedvol_common::decision::ClusterDecision::without_answer(
        fedvol_common::decision::ClusterStatus::Answered,
        1.5,
        None,
    );
    serde_json::to_string(&d).unwrap()
}

/// Requests as the previous release's coordinator and CLI sent them.
#[test]
fn the_previous_releases_requests_decode() {
    let plan = format!(
        r#"{{"v":1,"request":{},"deadline_ms":1900000000000,"reserve":true,"ttl_ms":0}}"#,
        request_json()
    );
    let m = agent::Plan::decode_request(plan.as_bytes(), "agent").unwrap();
    assert!(m.reserve && m.request.request_id == "r-1");
    assert!(!m.dry_run, "a commit may follow a plan of the previous release");
    let action = br#"{"v":1,"request_id":"r-1","deadline_ms":1900000000000}"#;
    for decoded in [
        agent::Commit::decode_request(action, "agent"),
        agent::Release::decode_request(action, "agent"),
        agent::Complete::decode_request(action, "agent"),
    ] {
        let m = decoded.unwrap();
        assert_eq!(m.request_id, "r-1");
        assert!(m.jobs.is_empty() && m.more_request_ids.is_empty() && !m.restore && !m.cancel);
    }
    // A commit that restores no jobs is written as before: no `jobs` key for an earlier agent.
    let body = agent::Commit::encode_request(&agent::ActionMsg::new("r-1", 1));
    assert!(!String::from_utf8_lossy(&body).contains("jobs"));
    assert!(!String::from_utf8_lossy(&body).contains("more_request_ids"));
    let why = format!(
        r#"{{"v":1,"request":{},"deadline_ms":1,"zone":null,"host":"h1","provisioner":null}}"#,
        request_json()
    );
    let decoded = agent::WhyNot::decode_request(why.as_bytes(), "agent").unwrap();
    assert_eq!(decoded.target.host.as_deref(), Some("h1"));
    // The why-not target is one type flattened into the body: written as before, field for field.
    assert_eq!(&agent::WhyNot::encode_request(&decoded)[..], why.as_bytes());
    // status and inventory took any body.
    assert!(agent::Status::decode_request(br#"{"v":1}"#, "agent").is_ok());
    assert!(agent::Inventory::decode_request(b"", "agent").is_ok());

    let submit = format!(
        r#"{{"v":1,"request_id":"s-1","workflow":{},"dry_run":true,"seed":null,"groups":["physics"],"timeout_ms":0}}"#,
        workflow_json()
    );
    let s = coordinator::Submit::decode_request(submit.as_bytes(), "coordinator").unwrap();
    assert!(s.dry_run && s.trace_limit.is_none());
    let dref = br#"{"v":1,"request_id":"s-1"}"#;
    assert!(coordinator::Get::decode_request(dref, "coordinator").is_ok());
    assert!(coordinator::Complete::decode_request(dref, "coordinator").is_ok());
    assert!(coordinator::Replay::decode_request(dref, "coordinator").is_ok());
    let wq = br#"{"v":1,"request_id":"s-1","cluster":"a","zone":"z1","host":null,"provisioner":null}"#;
    let q = coordinator::WhyNot::decode_request(wq, "coordinator").unwrap();
    assert_eq!(&coordinator::WhyNot::encode_request(&q)[..], &wq[..]);
    assert!(coordinator::List::decode_request(br#"{"v":1}"#, "coordinator").is_ok());
    assert!(coordinator::Clusters::decode_request(b"", "coordinator").is_ok());

    let provision = br#"{"v":1,"request_id":"r-1","volume":{"name":"pvc-1","provisioner":"dirs","capacity":1048576,"access_modes":["ReadWriteOnce"],"volume_mode":"Filesystem","labels":{},"annotations":{},"reclaim_policy":"Delete","ephemeral":true,"host":null},"parameters":{}}"#;
    let p = provisioner::Provision::decode_request(provision, "provisioner");
    assert!(p.is_ok(), "{p:?}");
}

/// Replies and records as the previous release's agents, coordinators and provisioners wrote
/// them, with their `v` and their `error: null`.
#[test]
fn the_previous_releases_replies_and_records_decode() {
    let plan_reply = format!(
        r#"{{"v":1,"request_id":"r-1","cluster":"a","decision":{},"hold":{{"expires_ms":5}},"error":null}}"#,
        decision_json()
    );
    let r = agent::Plan::decode_reply(plan_reply.as_bytes(), "coordinator")
        .unwrap()
        .unwrap();
    assert_eq!((r.cluster.as_str(), r.hold.map(|h| h.expires_ms)), ("a", Some(5)));
    // The previous agent's internal error to a plan was shaped like an action reply.
    let internal = br#"{"v":1,"request_id":"r-1","cluster":"a","ok":false,"volumes":[],"error":{"code":"internal","message":"disk"}}"#;
    let f = agent::Plan::decode_reply(internal, "coordinator").unwrap().unwrap_err();
    assert_eq!((f.cluster.as_deref(), f.code()), (Some("a"), &Code::Internal));
    // A refusal to release that settles a lost commit.
    let committed = br#"{"v":1,"request_id":"r-1","cluster":"a","ok":false,"volumes":[],"error":{"code":"committed","message":"use complete"}}"#;
    let r = agent::Release::decode_reply(committed, "coordinator").unwrap().unwrap();
    assert!(!r.ok && r.error.unwrap().is(&Code::Committed));
    let hb = br#"{"v":1,"cluster":"a","instance":"a-1","inventory_version":"x","holds":0,"load":0.5,"sent_ms":1,"interval_ms":2000}"#;
    assert_eq!(
        crate::decode::<Heartbeat>(hb, "heartbeat", "coordinator")
            .unwrap()
            .cluster,
        "a"
    );
    let list = br#"{"v":1,"decisions":[{"request_id":"s-1","workflow":"w","state":"committed","chosen_cluster":"a","updated_ms":3}]}"#;
    let l = coordinator::List::decode_reply(list, "client").unwrap().unwrap();
    assert_eq!(l.decisions[0].state, DecisionState::Committed);
    let list_error = br#"{"v":1,"decisions":[],"error":{"code":"store_unavailable","message":"down"}}"#;
    let f = coordinator::List::decode_reply(list_error, "client")
        .unwrap()
        .unwrap_err();
    assert_eq!(f.code(), &Code::StoreUnavailable);
    // The one-pass reading gives what the full checks give: a top-level error is a
    // failure however it is spelled or spaced, and `"error": null` fields are no error.
    for body in [
        r#"{"v":1,"decisions":[],"err\u006fr":{"code":"store_unavailable","message":"down"}}"#,
        r#"{ "v" : 1, "decisions" : [], "error" : {"code":"store_unavailable","message":"down"} }"#,
        r#"{"error":{"code":"store_unavailable","message":"down"},"v":1,"decisions":[]}"#,
    ] {
        let f = coordinator::List::decode_reply(body.as_bytes(), "client").unwrap();
        assert_eq!(f.unwrap_err().code(), &Code::StoreUnavailable, "{body}");
    }
    let nulls = format!(
        r#"{{"v":1,"request_id":"r-1","cluster":"a","decision":{},"error" :  null}}"#,
        decision_json()
    );
    assert!(
        agent::Plan::decode_reply(nulls.as_bytes(), "coordinator")
            .unwrap()
            .is_ok()
    );
    let e = agent::Plan::decode_reply(br#"{"v":2,"cluster":"a"}"#, "coordinator").unwrap_err();
    assert!(e.to_string().contains("protocol version 2"), "{e}");
    let e = agent::Plan::decode_reply(br#"{"v":1,"cluster":"a","decision":5}"#, "coordinator").unwrap_err();
    assert!(matches!(e, crate::DecodeError::Shape { .. }), "{e}");
    let provisioner_reply = br#"{"v":1,"ok":false,"source":null,"error":"unknown parameter(s): x"}"#;
    let p = provisioner::Provision::decode_reply(provisioner_reply, "agent")
        .unwrap()
        .unwrap();
    assert_eq!(p.error.as_deref(), Some("unknown parameter(s): x"));

    // A decision the previous coordinators stored in the bucket.
    let stored = format!(
        r#"{{"v":1,"state":"committed","decision":{{"request_id":"s-1","workflow":"w","seed":1,"chosen_cluster":"a","clusters":{{"a":{}}},"choice":[]}},"request":{},"attempts":[{{"cluster":"b","ok":false,"error":{{"code":"commit_failed","message":"x"}},"volumes":[]}},{{"cluster":"a","ok":true,"error":null,"volumes":[]}}],"completion":null,"updated_ms":9,"dry_run":false}}"#,
        decision_json(),
        request_json()
    );
    let s: StoredDecision = crate::decode(stored.as_bytes(), "stored decision", "coordinator").unwrap();
    assert_eq!(
        s.attempts[0].error.as_ref().map(|e| e.code.clone()),
        Some(Code::CommitFailed)
    );
}

// The previous release's reply types, as they were.

#[derive(Debug, Deserialize)]
struct OldReason {
    code: String,
    message: String,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldActionReply {
    v: u32,
    request_id: String,
    cluster: String,
    ok: bool,
    #[serde(default)]
    volumes: Vec<Value>,
    #[serde(default)]
    error: Option<OldReason>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldAgentAnswer {
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default)]
    decision: Option<Value>,
    #[serde(default)]
    error: Option<OldReason>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldWhyNotReply {
    v: u32,
    cluster: String,
    blockers: Vec<Value>,
    summary: String,
    #[serde(default)]
    error: Option<OldReason>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldReplayReply {
    v: u32,
    identical: bool,
    differences: Vec<String>,
    #[serde(default)]
    error: Option<OldReason>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldSubmitReply {
    v: u32,
    #[serde(default)]
    stored: Option<Value>,
    #[serde(default)]
    error: Option<OldReason>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldListReply {
    v: u32,
    #[serde(default)]
    decisions: Vec<Value>,
    #[serde(default)]
    error: Option<OldReason>,
}

fn old<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

/// Every failure this release sends reads, with the previous release's types, as the error
/// reply of that operation, naming the same code and message.
#[test]
fn failures_read_as_the_previous_releases_error_replies() {
    let bad = Failure::bad_request("plan: missing field `request`");
    let named = Failure::new(Code::Internal, "disk full")
        .from_cluster("a")
        .for_request("r-1");
    for f in [&bad, &named] {
        let a: OldActionReply = old(&agent::Commit::encode_failure(f));
        assert_eq!(
            (a.ok, a.error.as_ref().map(|e| e.code.as_str())),
            (false, Some(f.error.code.as_str()))
        );
        let p: OldAgentAnswer = old(&agent::Plan::encode_failure(f));
        assert_eq!(p.cluster, f.cluster);
        assert_eq!(p.error.map(|e| e.message), Some(f.error.message.clone()));
        let w: OldWhyNotReply = old(&coordinator::WhyNot::encode_failure(f));
        assert_eq!(w.summary, f.error.message);
        assert_eq!(w.error.map(|e| e.code), Some(f.error.code.to_string()));
        let r: OldReplayReply = old(&coordinator::Replay::encode_failure(f));
        assert!(!r.identical && r.error.is_some());
        for body in [
            coordinator::Submit::encode_failure(f),
            coordinator::Get::encode_failure(f),
            coordinator::Complete::encode_failure(f),
        ] {
            let s: OldSubmitReply = old(&body);
            assert!(s.stored.is_none() && s.error.is_some());
        }
        let l: OldListReply = old(&coordinator::List::encode_failure(f));
        assert!(l.decisions.is_empty() && l.error.is_some());
    }
}

/// This release's replies read with the previous release's types.
#[test]
fn replies_read_with_the_previous_releases_types() {
    let a: OldActionReply = old(&agent::Commit::encode_reply(&ActionReply::done("a", "r-1", Vec::new())));
    assert!(a.ok && a.v == 1);
    let refused = ActionReply::refused("a", "r-1", Code::CommitInProgress.error("running"));
    let a: OldActionReply = old(&agent::Release::encode_reply(&refused));
    assert_eq!(a.error.map(|e| e.code), Some("commit_in_progress".to_string()));
    let s: OldSubmitReply = old(&coordinator::Submit::encode_reply(&SubmitReply::error(
        Code::NotOwner.error("not yours"),
    )));
    assert_eq!(s.error.map(|e| e.code), Some("not_owner".to_string()));
    let l: OldListReply = old(&coordinator::List::encode_reply(&ListReply { decisions: Vec::new() }));
    assert!(l.error.is_none());
    let c: Value = old(&coordinator::Clusters::encode_reply(&ClustersReply {
        clusters: Vec::new(),
        drained_unknown: Vec::new(),
    }));
    assert_eq!(c["v"], 1);
    let r: OldReplayReply = old(&coordinator::Replay::encode_reply(&ReplayReply {
        identical: true,
        differences: Vec::new(),
        replayed: None,
    }));
    assert!(r.identical);
}

/// The priority, queue and cost additions (`PlanRequest.choice`, `Job.timeout_ms`, `SubmitMsg.choice`,
/// `ClusterDecision.cost`) are left out of the bodies when unset, so a request without them is
/// the previous release's body and its submit digest is unchanged; set, they travel and decode,
/// and out-of-range default hours are refused as `bad_request`.
#[test]
fn cost_choice_fields_are_optional_additions() {
    let m = agent::Plan::decode_request(
        format!(r#"{{"v":1,"request":{},"deadline_ms":1900000000000}}"#, request_json()).as_bytes(),
        "agent",
    )
    .unwrap();
    assert_eq!(m.request.choice, None);
    let sent = String::from_utf8(agent::Plan::encode_request(&m).to_vec()).unwrap();
    assert!(!sent.contains("choice") && !sent.contains("timeout_ms"), "{sent}");
    assert!(!decision_json().contains("\"cost\""));

    let mut with = m.clone();
    with.request.choice = Some(fedvol_common::choice::ChoiceOptions {
        cost: true,
        default_hours: Some(2.0),
    });
    let back = agent::Plan::decode_request(&agent::Plan::encode_request(&with), "agent").unwrap();
    assert_eq!(back.request.choice, with.request.choice);
    with.request.choice = Some(fedvol_common::choice::ChoiceOptions {
        cost: true,
        default_hours: Some(-1.0),
    });
    assert!(agent::Plan::check(&back).is_ok());
    let e = agent::Plan::check(&with).unwrap_err();
    assert_eq!(e.code, Code::BadRequest, "{e:?}");
    assert!(e.message.contains("default hours"), "{e:?}");

    let submit = format!(r#"{{"v":1,"workflow":{}}}"#, workflow_json());
    let s = coordinator::Submit::decode_request(submit.as_bytes(), "coordinator").unwrap();
    assert_eq!(s.choice, None);
    let mut wished = s.clone();
    wished.choice = Some(fedvol_common::choice::ChoiceOptions {
        cost: true,
        default_hours: None,
    });
    assert_ne!(s.digest(), wished.digest(), "another wish is another request");
    wished.choice = Some(fedvol_common::choice::ChoiceOptions {
        cost: true,
        default_hours: Some(f64::MAX),
    });
    assert_eq!(coordinator::Submit::check(&wished).unwrap_err().code, Code::BadRequest);
}

/// The previous release's listing line and cluster entry, as they were.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldDecisionSummary {
    request_id: String,
    workflow: String,
    state: crate::decisions::DecisionState,
    chosen_cluster: Option<String>,
    updated_ms: u64,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct OldClusterInfo {
    name: String,
    alive: bool,
    suspect: bool,
    last_seen_ms: u64,
    inventory_version: String,
    load: f64,
    holds: usize,
    instances: Vec<String>,
}

/// What says what happened to a decision only grows the contract: a decision no cluster was
/// chosen for because clusters did not answer is still `failed` for a reader of the previous
/// release, with the new code in its refusal and the reply's error; the listing's `failure`
/// and a cluster's `restoring` are fields it skips.
#[test]
fn failure_kinds_unavailable_and_restoring_read_with_the_previous_releases_types() {
    let mut s = crate::listing::tests::stored(3);
    s.state = crate::decisions::DecisionState::Failed;
    s.decision.chosen_cluster = None;
    s.attempts.clear();
    s.decision.refused = Some(Code::ClustersUnavailable.reason("1 cluster did not answer: c2 (timed_out)"));
    let reply = SubmitReply {
        stored: Some(s.clone()),
        error: Some(Code::ClustersUnavailable.error("1 cluster did not answer")),
        stored_record: None,
    };
    let old_reply: OldSubmitReply = old(&coordinator::Submit::encode_reply(&reply));
    assert_eq!(old_reply.stored.unwrap()["state"], "failed");
    assert_eq!(
        old_reply.error.map(|e| e.code),
        Some("clusters_unavailable".to_string())
    );

    let summary = coordinator::DecisionSummary::of("r".into(), &s);
    assert_eq!(summary.failure, Some(crate::decisions::FailureKind::Unavailable));
    let list = coordinator::List::encode_reply(&ListReply {
        decisions: vec![summary],
    });
    let text = String::from_utf8(list.to_vec()).unwrap();
    assert!(text.contains(r#""failure":"unavailable""#), "{text}");
    let l: OldListReply = old(&list);
    let line: OldDecisionSummary = serde_json::from_value(l.decisions[0].clone()).unwrap();
    assert_eq!(line.state, crate::decisions::DecisionState::Failed);

    let info = coordinator::ClusterInfo {
        name: "a".into(),
        alive: true,
        suspect: false,
        last_seen_ms: 1,
        inventory_version: "v".into(),
        load: 0.0,
        holds: 0,
        instances: vec!["a-1".into()],
        degraded: None,
        restoring: true,
        drain: None,
    };
    let c: Value = old(&coordinator::Clusters::encode_reply(&ClustersReply {
        clusters: vec![info.clone()],
        drained_unknown: Vec::new(),
    }));
    let old_info: OldClusterInfo = serde_json::from_value(c["clusters"][0].clone()).unwrap();
    assert!(old_info.alive);
    assert_eq!(c["clusters"][0]["restoring"], true);
    // A heartbeat-fed entry that is not restoring says nothing new.
    let quiet = coordinator::ClusterInfo {
        restoring: false,
        drain: None,
        ..info
    };
    assert!(!serde_json::to_string(&quiet).unwrap().contains("restoring"));
    // A record of the previous release (no refusal, no failure field anywhere) classifies.
    let mut before = crate::listing::tests::stored(3);
    before.state = crate::decisions::DecisionState::Failed;
    before.attempts.clear();
    assert_eq!(before.failure(), Some(crate::decisions::FailureKind::NothingFits));
}

/// A plan's `dry_run` is an addition: written only when set (so a plan a commit may follow
/// is the bytes the previous release sent), read back as sent.
#[test]
fn a_plans_dry_run_is_written_only_when_set() {
    let request: fedvol_common::funnel::PlanRequest = serde_json::from_str(&request_json()).unwrap();
    let mut msg = agent::PlanMsg {
        request,
        deadline_ms: 1_900_000_000_000,
        reserve: false,
        ttl_ms: 0,
        summary: false,
        dry_run: false,
    };
    let plain = agent::Plan::encode_request(&msg);
    assert!(!String::from_utf8_lossy(&plain).contains("dry_run"));
    msg.dry_run = true;
    let dry = agent::Plan::encode_request(&msg);
    assert!(agent::Plan::decode_request(&dry, "agent").unwrap().dry_run);
}
