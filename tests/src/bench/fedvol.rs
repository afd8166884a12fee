//! One fedvol request as the benchmark sends it (`plan` = a dry-run submit, or `submit`) and
//! how its answer is judged.
//!
//! A request succeeds only when the coordinator answered with a full decision: no error, every
//! one of the federation's clusters present with status `answered`, a cluster chosen, and the
//! state the mode expects (`planned` for a dry run, `committed` for a submit). Anything else is
//! a failure of a named kind: `error:<code>` (the coordinator's error reply), `cluster_<status>`
//! (a cluster that timed out, was unreachable or answered with an error), `clusters_missing`,
//! `nothing_fits`, `state_<state>` (e.g. `state_failed`), `timeout` (no answer within the
//! request's wait), `no_responders` (no coordinator), `nats_error`, `bad_answer`.

use std::collections::HashMap;
use std::time::Duration;

use fedvol_common::model::Workflow;

use crate::bench::driver::{Failed, Outcome};
use crate::bench::workflow::submit_body;
use crate::load::{CallError, call_raw};

#[derive(serde::Deserialize)]
struct Reply {
    #[serde(default)]
    stored: Option<Stored>,
    #[serde(default)]
    error: Option<Code>,
}

#[derive(serde::Deserialize)]
struct Code {
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(serde::Deserialize)]
struct Stored {
    state: String,
    decision: Decision,
}

#[derive(serde::Deserialize)]
struct Decision {
    #[serde(default)]
    chosen_cluster: Option<String>,
    #[serde(default)]
    clusters: HashMap<String, Slot>,
}

/// A cluster's slot: its status and error, from the object of a whole answer or the array of a
/// summary (`[status, elapsed_ms, inventory_version, feasible, load, soft_matched, volumes,
/// jobs, trace, holds_named_volume, error, ...]`, docs/design.md §4).
struct Slot {
    status: String,
    error: Option<Code>,
}

impl<'de> serde::Deserialize<'de> for Slot {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Slot;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a cluster's answer (object or summary array)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Slot, A::Error> {
                let (mut status, mut error) = (None, None);
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "status" => status = Some(m.next_value()?),
                        "error" => error = m.next_value()?,
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let status = status.ok_or_else(|| serde::de::Error::missing_field("status"))?;
                Ok(Slot { status, error })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Slot, A::Error> {
                let status: String = s
                    .next_element()?
                    .ok_or_else(|| serde::de::Error::invalid_length(0, &"a status"))?;
                for _ in 1..10 {
                    if s.next_element::<IgnoredAny>()?.is_none() {
                        return Ok(Slot { status, error: None });
                    }
                }
                let error = s.next_element::<Option<Code>>()?.flatten();
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Slot { status, error })
            }
        }
        d.deserialize_any(V)
    }
}

/// Judges a coordinator's answer to a submit (`dry_run`: a plan) in a federation of `clusters`
/// clusters. Reads only the fields it needs (the rest of the decision is skipped).
pub fn judge(answer: &[u8], dry_run: bool, clusters: usize) -> Outcome {
    let reply: Reply = serde_json::from_slice(answer).map_err(|e| Failed::new("bad_answer", e.to_string()))?;
    if let Some(e) = reply.error {
        return Err(Failed::new(format!("error:{}", e.code), e.message));
    }
    let stored = reply
        .stored
        .ok_or_else(|| Failed::new("bad_answer", "neither a decision nor an error"))?;
    let d = &stored.decision;
    if let Some((name, slot)) = d.clusters.iter().find(|(_, s)| s.status != "answered") {
        let why = slot.error.as_ref().map(|e| e.message.as_str()).unwrap_or("");
        return Err(Failed::new(
            format!("cluster_{}", slot.status),
            format!("{name}: {why}"),
        ));
    }
    if d.clusters.len() < clusters {
        return Err(Failed::new(
            "clusters_missing",
            format!("{} of {clusters} clusters in the decision", d.clusters.len()),
        ));
    }
    let expected = if dry_run { "planned" } else { "committed" };
    if stored.state != expected {
        return Err(Failed::new(
            format!("state_{}", stored.state),
            format!("expected {expected}"),
        ));
    }
    if d.chosen_cluster.is_none() {
        return Err(Failed::new("nothing_fits", "no cluster chosen"));
    }
    Ok(())
}

/// The failure of a request that got no usable answer.
pub fn call_failure(e: &CallError) -> Failed {
    let kind = match e {
        CallError::TimedOut(..) => "timeout",
        CallError::NoResponders(_) => "no_responders",
        CallError::Nats(_) => "nats_error",
        CallError::BadAnswer(_) => "bad_answer",
        CallError::Refused(_) => "refused",
    };
    Failed::new(kind, e.to_string())
}

/// Sends one submit of `workflow` (a dry run when `dry_run`) under request id `id` on
/// `subject` and judges the answer, waiting at most `wait`.
pub async fn request(
    client: &async_nats::Client,
    subject: &str,
    workflow: &Workflow,
    id: &str,
    dry_run: bool,
    clusters: usize,
    wait: Duration,
) -> Outcome {
    match call_raw(client, subject, submit_body(workflow, id, dry_run), wait).await {
        Ok(bytes) => judge(&bytes, dry_run, clusters),
        Err(e) => Err(call_failure(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(state: &str, chosen: Option<&str>, statuses: &[&str]) -> Vec<u8> {
        let clusters: serde_json::Map<String, serde_json::Value> = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("c{i}"), serde_json::json!({"status": s, "trace": [1, 2, 3]})))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "v": 1,
            "stored": {"state": state, "decision": {"chosen_cluster": chosen, "clusters": clusters, "seed": 1}},
        }))
        .unwrap()
    }

    fn kind(o: Outcome) -> Result<(), String> {
        o.map_err(|f| f.kind)
    }

    #[test]
    fn summaries_are_read_from_their_array_form() {
        let body = br#"{"stored": {"state": "planned", "decision": {"chosen_cluster": "c0", "seed": 1,
            "clusters": {"c0": {"status": "answered"},
                         "c1": ["answered", 1.5, "v", true, 0.1, 0, {}, {}, []],
                         "c2": ["error", 1.5, null, false, 0, 0, {}, {}, [], false, {"code": "internal", "message": "disk"}]}}}}"#;
        let e = judge(body, true, 3).unwrap_err();
        assert_eq!((e.kind.as_str(), e.detail.as_str()), ("cluster_error", "c2: disk"));
    }

    #[test]
    fn only_a_full_decision_in_the_expected_state_succeeds() {
        assert_eq!(
            kind(judge(&answer("planned", Some("c0"), &["answered"; 2]), true, 2)),
            Ok(())
        );
        assert_eq!(
            kind(judge(&answer("committed", Some("c1"), &["answered"; 2]), false, 2)),
            Ok(())
        );
        assert_eq!(
            kind(judge(
                &answer("planned", Some("c0"), &["answered", "timed_out"]),
                true,
                2
            )),
            Err("cluster_timed_out".into())
        );
        assert_eq!(
            kind(judge(&answer("planned", Some("c0"), &["answered"]), true, 2)),
            Err("clusters_missing".into())
        );
        assert_eq!(
            kind(judge(&answer("failed", None, &["answered"]), false, 1)),
            Err("state_failed".into())
        );
        assert_eq!(
            kind(judge(&answer("planned", None, &["answered"]), true, 1)),
            Err("nothing_fits".into())
        );
        let err = br#"{"v":1,"error":{"code":"store_unavailable","message":"x"}}"#;
        assert_eq!(judge(err, false, 1), Err(Failed::new("error:store_unavailable", "x")));
        assert_eq!(kind(judge(b"nope", false, 1)), Err("bad_answer".into()));
    }
}
