//! The agent's NATS service: one queue group per cluster (`agent.<cluster>`, so replicas share
//! the load and each cluster answers a broadcast once), registered with the NATS service API as
//! `fedvol-agent` with the cluster in its metadata. Endpoints:
//!
//! - `<prefix>.plan` and `<prefix>.cluster.<c>.plan`: run the funnel; with `reserve`, hold.
//! - `<prefix>.cluster.<c>.{commit,release,complete}`: act on a request's hold or allocation.
//! - `<prefix>.cluster.<c>.{why_not,status,inventory}`: explain and report.
//!
//! Requests past their deadline are dropped, not answered late. Malformed requests get an
//! error reply and change nothing. State changes go through one lock ([`Core`]) and reach the
//! disk before the reply.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use serde::Serialize;

use fedvol_common::decision::Reason;
use fedvol_common::funnel::plan_cluster;
use fedvol_common::wire::{ActionMsg, ActionReply, PlanMsg, PlanReply, Subjects, VERSION, WhyNotMsg, now_ms};

use crate::drivers::Drivers;
use crate::state::Core;
use crate::state::core::{DriverResult, Next};
use crate::whynot::why_not;

/// What every handler shares.
pub struct Shared {
    /// The state, behind one lock (never held across an await).
    pub core: Mutex<Core>,
    /// Storage drivers.
    pub drivers: Drivers,
    /// Cluster name.
    pub cluster: String,
    /// Largest request body served, bytes; larger ones get `bad_request` unread.
    pub max_body_bytes: usize,
    /// One sync of the store at a time; answers waiting for the disk wait here without
    /// holding a thread (a blocked thread per waiter made the blocking pool grow to hundreds
    /// of threads under load, and memory with it).
    pub sync_turn: tokio::sync::Mutex<()>,
    /// Plans computed at once: the number of cores (more only adds threads and switching).
    pub plan_slots: tokio::sync::Semaphore,
}

impl Shared {
    /// What every handler shares, for `core` served with `drivers`.
    pub fn new(core: Core, drivers: Drivers, cluster: &str, max_body_bytes: usize) -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Shared {
            core: Mutex::new(core),
            drivers,
            cluster: cluster.to_string(),
            max_body_bytes,
            sync_turn: tokio::sync::Mutex::new(()),
            plan_slots: tokio::sync::Semaphore::new(cores),
        }
    }
}

/// Locks the state. A panic while holding the lock (a bug) must not wedge the agent: the
/// state on disk is the truth, and the in-memory copy is only changed after a write succeeds.
pub fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Core> {
    shared.core.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn to_bytes<T: Serialize>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

fn bad_request(message: String) -> Bytes {
    to_bytes(&serde_json::json!({
        "v": VERSION,
        "error": Reason::new("bad_request", message),
    }))
}

fn internal(request_id: &str, cluster: &str, e: impl std::fmt::Display) -> Bytes {
    to_bytes(&ActionReply {
        v: VERSION,
        request_id: request_id.to_string(),
        cluster: cluster.to_string(),
        ok: false,
        volumes: Vec::new(),
        error: Some(Reason::new("internal", e.to_string())),
    })
}

/// Decodes a request body: [`fedvol_common::wire::decode_body`], speaking as the agent.
fn decode<T: serde::de::DeserializeOwned>(payload: &[u8], what: &str) -> Result<T, String> {
    fedvol_common::wire::decode_body(payload, what, "agent")
}

/// The answer to a request whose body is over `limit` bytes: `bad_request` saying so, with the
/// cluster (so the coordinator files it under this cluster). The body is not parsed.
pub fn body_too_large(cluster: &str, endpoint: &str, size: usize, limit: usize) -> Bytes {
    to_bytes(&serde_json::json!({
        "v": VERSION,
        "cluster": cluster,
        "ok": false,
        "error": Reason::new("bad_request", fedvol_common::wire::body_too_large(endpoint, size, limit)),
    }))
}

/// What is sent instead of an answer of `size` bytes that NATS would refuse (over the server's
/// `max_payload` of `limit` bytes): an error naming both sizes and how to shrink the answer.
pub fn reply_too_large(cluster: &str, endpoint: &str, size: usize, limit: usize) -> Bytes {
    to_bytes(&serde_json::json!({
        "v": VERSION,
        "cluster": cluster,
        "ok": false,
        "error": Reason::new(
            "reply_too_large",
            format!(
                "the {endpoint} answer of cluster {cluster} is {size} bytes, more than the NATS server's max_payload of {limit} bytes; raise max_payload in the NATS server's configuration"
            ),
        ),
    }))
}

/// Handles a plan (broadcast or cluster-addressed). `None` = drop (deadline passed).
///
/// A request whose workflow breaks a limit of [`fedvol_common::limits`] (counts, name and
/// annotation lengths) gets `bad_request` and plans nothing.
pub async fn handle_plan(shared: Arc<Shared>, payload: Bytes) -> Option<Bytes> {
    let msg: PlanMsg = match decode(&payload, "plan") {
        Ok(m) => m,
        Err(e) => return Some(bad_request(e)),
    };
    let problems = fedvol_common::limits::workflow_problems(&msg.request.workflow);
    if !problems.is_empty() {
        return Some(bad_request(format!(
            "plan: {}",
            fedvol_common::limits::join_problems(&problems)
        )));
    }
    if now_ms() > msg.deadline_ms {
        tracing::info!(request_id = %msg.request.request_id, "plan past its deadline: dropped");
        return None;
    }
    let request_id = msg.request.request_id.clone();
    let started = Instant::now();
    let sh = shared.clone();
    let Ok(slot) = shared.plan_slots.acquire().await else {
        return Some(internal(&request_id, &shared.cluster, "the agent is shutting down"));
    };
    let result = tokio::task::spawn_blocking(move || -> Result<PlanReply, String> {
        if msg.reserve {
            lock(&sh).plan_and_hold(&msg, now_ms()).map_err(|e| e.to_string())
        } else {
            let (inv, state) = lock(&sh).snapshot_for(&msg.request.request_id);
            Ok(PlanReply {
                v: VERSION,
                request_id: msg.request.request_id.clone(),
                cluster: sh.cluster.clone(),
                decision: plan_cluster(&inv, &state, &msg.request),
                hold: None,
                error: None,
            })
        }
    })
    .await;
    // The slot is for computing only, not for waiting on the disk below.
    drop(slot);
    let mut reply = match result {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Some(internal(&request_id, &shared.cluster, e)),
        Err(e) => return Some(internal(&request_id, &shared.cluster, e)),
    };
    reply.decision.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let body = to_bytes(&reply);
    // A hold is acknowledged state: it survives kill -9 like a commit.
    let body = if reply.hold.is_some() {
        durable(&shared, &request_id, body).await
    } else {
        body
    };
    tracing::info!(
        request_id = %request_id,
        feasible = reply.decision.feasible,
        held = reply.hold.is_some(),
        elapsed_ms = reply.decision.elapsed_ms,
        "plan answered"
    );
    Some(body)
}

/// Handles commit: the hold becomes durable allocations, new volumes are provisioned through
/// their drivers (and removed again if a later one fails), the record reaches the disk, then
/// the reply goes out.
pub async fn handle_commit(shared: Arc<Shared>, payload: Bytes) -> Option<Bytes> {
    let msg: ActionMsg = match decode(&payload, "commit") {
        Ok(m) => m,
        Err(e) => return Some(bad_request(e)),
    };
    if now_ms() > msg.deadline_ms {
        tracing::info!(request_id = %msg.request_id, "commit past its deadline: dropped");
        return None;
    }
    let id = msg.request_id.clone();
    let begun = lock(&shared).begin_commit(&id, now_ms());
    let work = match begun {
        Err(e) => return Some(internal(&id, &shared.cluster, e)),
        Ok(Next::Answer(reply)) => return Some(durable(&shared, &id, to_bytes(&reply)).await),
        Ok(Next::Run(work)) => work,
    };
    // The hold is marked `committing` before any driver runs: that mark must be on disk, so
    // that an agent restarted after a crash knows assets may exist.
    if let Err(e) = sync(&shared).await {
        return Some(internal(&id, &shared.cluster, e));
    }
    let mut results = Vec::new();
    let mut failed = false;
    for w in work {
        if failed {
            break;
        }
        tracing::info!(request_id = %id, volume = %w.volume.name, provisioner = %w.provisioner.name, "provisioning");
        let r = shared
            .drivers
            .provision(&w.provisioner, &w.volume, &id, msg.deadline_ms)
            .await;
        match r {
            Ok(created) => results.push((w, DriverResult::Ok(created.source))),
            Err(e) => {
                tracing::warn!(request_id = %id, volume = %w.volume.name, error = %e, "provisioning failed");
                results.push((w, DriverResult::Failed(e.to_string())));
                failed = true;
            }
        }
    }
    if failed {
        // Seed 001: an asset whose volume cannot be recorded is deleted again; nothing leaks.
        for (w, r) in &results {
            if let DriverResult::Ok(source) = r {
                let del = shared
                    .drivers
                    .delete(&w.provisioner, &w.volume.name, Some(source), &id, msg.deadline_ms)
                    .await;
                if let Err(e) = del {
                    tracing::error!(request_id = %id, volume = %w.volume.name, error = %e, "rollback delete failed");
                }
            }
        }
    }
    let finished = lock(&shared).finish_commit(&id, results, now_ms());
    match finished {
        Ok(reply) => {
            let answer = durable(&shared, &id, to_bytes(&reply)).await;
            tracing::info!(request_id = %id, ok = reply.ok, "commit answered");
            Some(answer)
        }
        Err(e) => Some(internal(&id, &shared.cluster, e)),
    }
}

/// Makes every state change so far durable, then gives `answer` back: called before any answer
/// that acknowledges state (a hold, a commit, a release, a completion), including one read from memory (a
/// repeated request may see a change another task made and has not yet synced). Answers waiting
/// together share one fsync ([`crate::state::store::Store::sync_through`]). If the disk fails,
/// the answer becomes an `internal` error: the change is not known durable.
async fn durable(shared: &Arc<Shared>, request_id: &str, answer: Bytes) -> Bytes {
    match sync(shared).await {
        Ok(()) => answer,
        Err(e) => internal(request_id, &shared.cluster, e),
    }
}

/// Waits until every state change made so far is on disk (one fsync shared with every caller
/// waiting at the same moment). Errors: the disk failed, as text.
async fn sync(shared: &Arc<Shared>) -> Result<(), String> {
    let store = lock(shared).store();
    let seq = store.written();
    let _turn = shared.sync_turn.lock().await;
    if store.is_durable(seq) {
        return Ok(());
    }
    match tokio::task::spawn_blocking(move || store.sync_through(seq)).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Handles release (idempotent).
pub async fn handle_release(shared: Arc<Shared>, payload: Bytes) -> Option<Bytes> {
    let msg: ActionMsg = match decode(&payload, "release") {
        Ok(m) => m,
        Err(e) => return Some(bad_request(e)),
    };
    if now_ms() > msg.deadline_ms {
        return None;
    }
    let r = lock(&shared).release(&msg.request_id);
    Some(match r {
        Ok(reply) => durable(&shared, &msg.request_id, to_bytes(&reply)).await,
        Err(e) => internal(&msg.request_id, &shared.cluster, e),
    })
}

/// Handles complete: allocations shrink; volumes follow their reclaim policy (Delete: the
/// driver deletes the asset, then the record goes; Retain: Released, never bound again).
pub async fn handle_complete(shared: Arc<Shared>, payload: Bytes) -> Option<Bytes> {
    let msg: ActionMsg = match decode(&payload, "complete") {
        Ok(m) => m,
        Err(e) => return Some(bad_request(e)),
    };
    if now_ms() > msg.deadline_ms {
        return None;
    }
    let id = msg.request_id.clone();
    let begun = lock(&shared).begin_complete(&id);
    let work = match begun {
        Next::Answer(reply) => return Some(durable(&shared, &id, to_bytes(&reply)).await),
        Next::Run(work) => work,
    };
    let mut results = Vec::new();
    for w in work {
        let r = shared
            .drivers
            .delete(&w.provisioner, &w.id.name, w.source.as_deref(), &id, msg.deadline_ms)
            .await;
        results.push(match r {
            Ok(m) => (w, DriverResult::Ok(m)),
            Err(e) => (w, DriverResult::Failed(e.to_string())),
        });
    }
    let finished = lock(&shared).finish_complete(&id, results, now_ms());
    Some(match finished {
        Ok(reply) => durable(&shared, &id, to_bytes(&reply)).await,
        Err(e) => internal(&id, &shared.cluster, e),
    })
}

/// Handles why_not.
pub async fn handle_why_not(shared: Arc<Shared>, payload: Bytes) -> Option<Bytes> {
    let msg: WhyNotMsg = match decode(&payload, "why_not") {
        Ok(m) => m,
        Err(e) => return Some(bad_request(e)),
    };
    if now_ms() > msg.deadline_ms {
        return None;
    }
    let sh = shared.clone();
    let r = tokio::task::spawn_blocking(move || {
        let (inv, state) = lock(&sh).snapshot();
        why_not(
            &sh.cluster,
            &inv,
            &state,
            &msg.request,
            msg.zone.as_deref(),
            msg.host.as_deref(),
            msg.provisioner.as_deref(),
        )
    })
    .await;
    Some(match r {
        Ok(reply) => to_bytes(&reply),
        Err(e) => bad_request(e.to_string()),
    })
}

/// Handles status.
pub async fn handle_status(shared: Arc<Shared>, _payload: Bytes) -> Option<Bytes> {
    Some(to_bytes(&lock(&shared).status()))
}

/// Handles inventory: the effective inventory (files plus fedvol's changes) and the status.
pub async fn handle_inventory(shared: Arc<Shared>, _payload: Bytes) -> Option<Bytes> {
    let (inv, status) = {
        let core = lock(&shared);
        (core.snapshot().0, core.status())
    };
    Some(to_bytes(
        &serde_json::json!({ "v": VERSION, "cluster": shared.cluster, "inventory": &*inv, "status": status }),
    ))
}

type Handler = fn(Arc<Shared>, Bytes) -> futures::future::BoxFuture<'static, Option<Bytes>>;

/// Registers the service and serves until the client closes. Returns when every endpoint
/// stream ends.
///
/// Errors: the service or an endpoint could not be registered.
pub async fn serve(
    client: async_nats::Client,
    subjects: &Subjects,
    shared: Arc<Shared>,
) -> Result<(), async_nats::Error> {
    use async_nats::service::ServiceExt;
    let cluster = shared.cluster.clone();
    let service = client
        .service_builder()
        .description(format!("fedvol agent of cluster {cluster}"))
        .metadata(HashMap::from([("cluster".to_string(), cluster.clone())]))
        .queue_group(Subjects::agent_queue(&cluster))
        .start("fedvol-agent", env!("CARGO_PKG_VERSION"))
        .await?;
    let routes: Vec<(&str, String, Handler)> = vec![
        ("plan", subjects.plan(), |s, p| Box::pin(handle_plan(s, p))),
        ("cluster_plan", subjects.cluster(&cluster, "plan"), |s, p| {
            Box::pin(handle_plan(s, p))
        }),
        ("commit", subjects.cluster(&cluster, "commit"), |s, p| {
            Box::pin(handle_commit(s, p))
        }),
        ("release", subjects.cluster(&cluster, "release"), |s, p| {
            Box::pin(handle_release(s, p))
        }),
        ("complete", subjects.cluster(&cluster, "complete"), |s, p| {
            Box::pin(handle_complete(s, p))
        }),
        ("why_not", subjects.cluster(&cluster, "why_not"), |s, p| {
            Box::pin(handle_why_not(s, p))
        }),
        ("status", subjects.cluster(&cluster, "status"), |s, p| {
            Box::pin(handle_status(s, p))
        }),
        ("inventory", subjects.cluster(&cluster, "inventory"), |s, p| {
            Box::pin(handle_inventory(s, p))
        }),
    ];
    let mut tasks = Vec::new();
    for (name, subject, handler) in routes {
        let mut endpoint = service.endpoint_builder().name(name).add(subject.clone()).await?;
        let shared = shared.clone();
        let client = client.clone();
        tracing::info!(endpoint = name, subject = %subject, queue = %Subjects::agent_queue(&cluster), "serving");
        tasks.push(tokio::spawn(async move {
            while let Some(request) = endpoint.next().await {
                let shared = shared.clone();
                let client = client.clone();
                // Each request in its own task: a slow commit never holds up a plan.
                tokio::spawn(async move {
                    let payload = request.message.payload.clone();
                    let body = if payload.len() > shared.max_body_bytes {
                        tracing::warn!(
                            endpoint = name,
                            bytes = payload.len(),
                            limit = shared.max_body_bytes,
                            "request body over the limit refused"
                        );
                        Some(body_too_large(
                            &shared.cluster,
                            name,
                            payload.len(),
                            shared.max_body_bytes,
                        ))
                    } else {
                        handler(shared.clone(), payload).await
                    };
                    let Some(mut body) = body else { return };
                    let limit = client.max_payload();
                    if body.len() > limit {
                        tracing::warn!(
                            endpoint = name,
                            bytes = body.len(),
                            limit,
                            "answer over the server's max_payload replaced by an error"
                        );
                        body = reply_too_large(&shared.cluster, name, body.len(), limit);
                    }
                    if let Err(e) = request.respond(Ok(body)).await {
                        tracing::warn!(error = %e, "reply could not be sent");
                    }
                });
            }
        }));
    }
    // Make sure the server has every subscription before anyone is told we are ready.
    client.flush().await?;
    tracing::info!(cluster = %cluster, "endpoints ready");
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_keeps_u128_sizes_and_checks_the_version() {
        let mut wf = fedvol_common::format::parse_workflow_str(
            "w.yaml",
            "w",
            "version: v4\nvolumes:\n  big:\n    size: 800EB\n",
        )
        .unwrap()
        .value;
        wf.name = "big".into();
        let msg = PlanMsg {
            v: VERSION,
            request: fedvol_common::funnel::PlanRequest {
                request_id: "r".into(),
                workflow: wf,
                user: "u".into(),
                groups: vec![],
                seed: 1,
                trace_limit: 1,
            },
            deadline_ms: 1,
            reserve: false,
            ttl_ms: 0,
        };
        let bytes = serde_json::to_vec(&msg).unwrap();
        let back: PlanMsg = decode(&bytes, "plan").unwrap();
        assert_eq!(back, msg, "800EB survives the trip");
        let e = decode::<PlanMsg>(br#"{"v": 2}"#, "plan").unwrap_err();
        assert!(e.contains("protocol version 2"), "{e}");
        assert!(
            decode::<PlanMsg>(b"nope", "plan")
                .unwrap_err()
                .contains("not a JSON object")
        );
    }

    /// Fuzzing of the wire decoding (issue 6). Case counts follow `PROPTEST_CASES` (default
    /// 256; the long run in RELIABILITY.md uses 100000).
    mod fuzz {
        use super::*;
        use fedvol_common::wire::{ActionMsg, WhyNotMsg};
        use proptest::prelude::*;

        fn sample_plan() -> Vec<u8> {
            let wf = fedvol_common::format::parse_workflow_str(
                "w.yaml",
                "w",
                "version: v4\nvolumes:\n  s:\n    size: 1GiB\n    annotations: {tier: fast}\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: s}\n    resource: {cpu: {cores: 2}, memory: {size: 1GiB}}\n",
            )
            .unwrap()
            .value;
            let msg = PlanMsg {
                v: VERSION,
                request: fedvol_common::funnel::PlanRequest {
                    request_id: "r-1".into(),
                    workflow: wf,
                    user: "u".into(),
                    groups: vec!["g".into()],
                    seed: 7,
                    trace_limit: 5,
                },
                deadline_ms: 1_900_000_000_000,
                reserve: true,
                ttl_ms: 1000,
            };
            serde_json::to_vec(&msg).unwrap()
        }

        /// Every decoder the agent's endpoints use, on the same bytes. Returns which accepted.
        fn decode_all(bytes: &[u8]) -> [bool; 3] {
            [
                decode::<PlanMsg>(bytes, "plan").is_ok(),
                decode::<ActionMsg>(bytes, "commit").is_ok(),
                decode::<WhyNotMsg>(bytes, "why_not").is_ok(),
            ]
        }

        /// The contract: a JSON object whose `v` is the protocol version. (serde_json skips
        /// the fields a message does not read without checking their strings' UTF-8 or their
        /// numbers' range, so only the object and its `v` are checked here.)
        fn is_versioned_object(bytes: &[u8]) -> bool {
            #[derive(serde::Deserialize)]
            struct Peek {
                v: u64,
            }
            bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
                && serde_json::from_slice::<Peek>(bytes).is_ok_and(|p| p.v == u64::from(VERSION))
        }

        fn json_value() -> impl Strategy<Value = serde_json::Value> {
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<i64>().prop_map(serde_json::Value::from),
                any::<u64>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(|f| serde_json::json!(f)),
                "\\PC{0,12}".prop_map(serde_json::Value::from),
                Just(serde_json::json!("r-1")),
                Just(serde_json::json!(1)),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                    prop::collection::btree_map(
                        prop_oneof![
                            Just("v".to_string()),
                            Just("request_id".to_string()),
                            Just("deadline_ms".to_string()),
                            Just("request".to_string()),
                            Just("reserve".to_string()),
                            Just("workflow".to_string()),
                            "[a-z_]{1,8}",
                        ],
                        inner,
                        0..6
                    )
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            /// Arbitrary bytes: an error or a value, never a panic; accepted only as a
            /// versioned JSON object.
            #[test]
            fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
                let ok = decode_all(&bytes);
                if ok.iter().any(|b| *b) {
                    prop_assert!(is_versioned_object(&bytes), "{:?}", String::from_utf8_lossy(&bytes));
                }
            }

            /// Arbitrary JSON shapes (wrong types, missing and unknown fields, arrays, other
            /// versions) with the contract's field names.
            #[test]
            fn wrong_shapes_are_errors_not_panics(v in prop_oneof![
                json_value(),
                // Arrays that start like a message (`v` first).
                prop::collection::vec(json_value(), 0..4).prop_map(|mut a| {
                    a.insert(0, serde_json::json!(1));
                    serde_json::Value::Array(a)
                }),
            ]) {
                let bytes = serde_json::to_vec(&v).unwrap();
                let ok = decode_all(&bytes);
                if ok.iter().any(|b| *b) {
                    prop_assert!(is_versioned_object(&bytes), "{v}");
                }
            }

            /// A real plan message, damaged: cut, bytes replaced, bytes inserted.
            #[test]
            fn damaged_plans_never_panic(
                cut in 0usize..4096,
                edits in prop::collection::vec((0usize..4096, any::<u8>(), any::<bool>()), 0..6),
            ) {
                let mut bytes = sample_plan();
                bytes.truncate(cut.max(1).min(bytes.len()));
                for (at, byte, insert) in edits {
                    let i = at % bytes.len().max(1);
                    if insert { bytes.insert(i, byte) } else if !bytes.is_empty() { bytes[i] = byte }
                }
                let ok = decode_all(&bytes);
                if ok.iter().any(|b| *b) {
                    prop_assert!(is_versioned_object(&bytes));
                }
            }

            /// Any version but the agent's is refused with a message naming it.
            #[test]
            fn other_versions_are_refused(v in any::<u64>().prop_filter("not ours", |v| *v != u64::from(VERSION))) {
                let mut msg: serde_json::Value = serde_json::from_slice(&sample_plan()).unwrap();
                msg["v"] = serde_json::json!(v);
                let e = decode::<PlanMsg>(&serde_json::to_vec(&msg).unwrap(), "plan").unwrap_err();
                prop_assert!(e.contains(&format!("protocol version {v}")), "{}", e);
            }
        }

        #[test]
        fn the_sample_plan_decodes() {
            // A why_not carries a request and a deadline too: the plan reads as one.
            assert_eq!(decode_all(&sample_plan()), [true, false, true]);
        }

        /// Regression (issue 6): the agent read a JSON array as a message (serde fills a
        /// struct's fields from a sequence in order), so `[1, "r", 5]` was a commit of `r`.
        #[test]
        fn arrays_are_not_messages() {
            for body in [&br#"[1, "r", 5]"#[..], br#"[1]"#, br#" [1, "r", 5, 6]"#] {
                let e = decode::<ActionMsg>(body, "commit").unwrap_err();
                assert!(e.contains("not a JSON object"), "{e}");
            }
        }
    }
}
