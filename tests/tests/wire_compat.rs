//! Wire compatibility end to end: the JSON bodies the previous release
//! sent, written out as text exactly as its coordinator and CLI wrote them (with `v`, with
//! `null` fields), sent over a real nats-server to a real agent and coordinator of this
//! release; every answer reads with the shapes the previous release decoded (docs/design.md §5:
//! fields are added, never renamed).

use std::time::Duration;

use fedvol_formats::parse_workflow_str;
use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::load::call_raw;
use fedvol_tests::{NatsServer, kit::SLOT_WORKFLOW};
use serde_json::Value;

fn workflow_json() -> String {
    let wf = parse_workflow_str("wf.yaml", "compat", SLOT_WORKFLOW).unwrap().value;
    serde_json::to_string(&wf).unwrap()
}

/// Sends `body` (JSON text) on `subject`; the answer as JSON.
async fn ask(client: &async_nats::Client, subject: &str, body: String) -> Value {
    let bytes = call_raw(client, subject, body.into_bytes(), Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{subject}: {e}"));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{subject}: {e}: {}", String::from_utf8_lossy(&bytes)))
}

fn far() -> u64 {
    fedvol_proto::now_ms() + 600_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_releases_bodies_work_against_this_release() {
    let nats = NatsServer::start();
    let mut agent = AgentProc::start(&nats, 300, |d| slots_inventory("old", 2, d, "all")).await;
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "2000", "--discovery-ms", "300"]).await;
    let client = nats.client().await;
    // The fresh agent admits plans and commits once the coordinator restored it (gate as
    // shipped).
    agent
        .proc
        .wait_for_log("new commits are admitted", Duration::from_secs(20))
        .await;
    let wf = workflow_json();
    let request =
        format!(r#"{{"request_id":"old-1","workflow":{wf},"user":"alice","groups":[],"seed":7,"trace_limit":5}}"#);

    // The agent, as the previous coordinator spoke to it.
    let plan = ask(
        &client,
        "fedvol.v1.cluster.old.plan",
        format!(
            r#"{{"v":1,"request":{request},"deadline_ms":{},"reserve":true,"ttl_ms":60000}}"#,
            far()
        ),
    )
    .await;
    assert_eq!(
        (plan["v"].as_u64(), plan["cluster"].as_str()),
        (Some(1), Some("old")),
        "{plan}"
    );
    assert_eq!(plan["decision"]["feasible"], true, "{plan}");
    assert!(plan["hold"]["expires_ms"].is_u64(), "a hold: {plan}");
    let action = |id: &str| format!(r#"{{"v":1,"request_id":"{id}","deadline_ms":{}}}"#, far());
    let commit = ask(&client, "fedvol.v1.cluster.old.commit", action("old-1")).await;
    assert_eq!(
        (commit["ok"].as_bool(), commit["request_id"].as_str()),
        (Some(true), Some("old-1")),
        "{commit}"
    );
    assert_eq!(commit["volumes"][0]["outcome"], "provisioned", "{commit}");
    // The settle code a previous coordinator matches on.
    let release = ask(&client, "fedvol.v1.cluster.old.release", action("old-1")).await;
    assert_eq!(
        (release["ok"].as_bool(), release["error"]["code"].as_str()),
        (Some(false), Some("committed"))
    );
    let status = ask(&client, "fedvol.v1.cluster.old.status", r#"{"v":1}"#.into()).await;
    assert_eq!(status["committed"], serde_json::json!(["old-1"]), "{status}");
    let why = ask(
        &client,
        "fedvol.v1.cluster.old.why_not",
        format!(
            r#"{{"v":1,"request":{request},"deadline_ms":{},"zone":"z1","host":null,"provisioner":null}}"#,
            far()
        ),
    )
    .await;
    assert!(why["summary"].is_string() && why["blockers"].is_array(), "{why}");
    let done = ask(&client, "fedvol.v1.cluster.old.complete", action("old-1")).await;
    assert_eq!(done["ok"], true, "{done}");
    // A malformed body: the previous error shape (`v`, `error` with code and message).
    let bad = ask(&client, "fedvol.v1.cluster.old.commit", r#"{"v":1}"#.into()).await;
    assert_eq!(
        (bad["v"].as_u64(), bad["error"]["code"].as_str()),
        (Some(1), Some("bad_request")),
        "{bad}"
    );

    // The coordinator, as the previous CLI spoke to it.
    let submit = ask(
        &client,
        "fedvol.v1.coordinator.submit.alice",
        format!(
            r#"{{"v":1,"request_id":"old-2","workflow":{wf},"dry_run":false,"seed":null,"groups":[],"timeout_ms":0}}"#
        ),
    )
    .await;
    assert!(submit["error"].is_null(), "{submit}");
    assert_eq!(submit["stored"]["state"], "committed", "{submit}");
    assert_eq!(submit["stored"]["decision"]["chosen_cluster"], "old", "{submit}");
    let dref = r#"{"v":1,"request_id":"old-2"}"#;
    let get = ask(&client, "fedvol.v1.coordinator.get.alice", dref.into()).await;
    assert_eq!(get["stored"]["decision"]["request_id"], "old-2", "{get}");
    let list = ask(&client, "fedvol.v1.coordinator.list.alice", r#"{"v":1}"#.into()).await;
    assert!(
        list["decisions"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x["request_id"] == "old-2")),
        "{list}"
    );
    let clusters = ask(&client, "fedvol.v1.coordinator.clusters.alice", String::new()).await;
    assert_eq!(clusters["clusters"][0]["name"], "old", "{clusters}");
    let replay = ask(&client, "fedvol.v1.coordinator.replay.alice", dref.into()).await;
    assert_eq!(
        replay["identical"], true,
        "a replay sees the cluster without its own commit: {replay}"
    );
    assert!(replay["differences"].is_array(), "{replay}");
    let why = ask(
        &client,
        "fedvol.v1.coordinator.why_not.alice",
        r#"{"v":1,"request_id":"old-2","cluster":"old","zone":"z1","host":null,"provisioner":null}"#.into(),
    )
    .await;
    assert!(why["summary"].is_string() && why["blockers"].is_array(), "{why}");
    let complete = ask(&client, "fedvol.v1.coordinator.complete.alice", dref.into()).await;
    assert_eq!(complete["stored"]["state"], "completed", "{complete}");
    // Errors keep the fields the previous CLI read: a why_not of an unknown decision has
    // `cluster`, `blockers` and `summary` beside the error.
    let unknown = ask(
        &client,
        "fedvol.v1.coordinator.why_not.alice",
        r#"{"v":1,"request_id":"nope","cluster":"old","zone":"z1"}"#.into(),
    )
    .await;
    assert_eq!(unknown["error"]["code"], "not_found", "{unknown}");
    assert!(
        unknown["summary"].is_string() && unknown["blockers"].is_array(),
        "{unknown}"
    );
    assert_eq!(unknown["cluster"], "old", "{unknown}");
    drop(agent);
}
