//! The one property test of the wire decoding (moved here from the agent and the
//! coordinator): every request decoder of every endpoint and every reply decoder, on arbitrary
//! bytes, on JSON of the wrong shapes, on damaged real bodies and on other versions, returns an
//! error or a value, never panics, and accepts only a JSON object whose `v` is [`VERSION`].
//! Case counts follow `PROPTEST_CASES` (default 256; the long run in RELIABILITY.md uses
//! 100000).

use proptest::prelude::*;

use crate::agent::{self, ActionMsg, Heartbeat, PlanMsg, WhyNotMsg};
use crate::coordinator::{self, DecisionRef, SubmitMsg, WhyNotQuery};
use crate::provisioner;
use crate::{Endpoint, VERSION};
use fedvol_common::funnel::why_not::Target;

/// The workflow of a Fuzzfile with a volume of 800 EB (beyond 2^64 bytes), a named volume, a
/// GPU and a soft constraint, as a body carries it.
fn workflow() -> fedvol_common::model::Workflow {
    const WORKFLOW: &str = r#"{
      "name": "w",
      "format": "fuzzfile_v4",
      "volumes": [
        {"key":"s","source":{"fuzzball":{"use_":null,"name":null,"size":800000000000000000000,"annotations":{"tier":"fast"},"reference":null}},"access_modes":["ReadWriteOnce"],"line":4},
        {"key":"d","source":{"fuzzball":{"use_":"nfs","name":"data","size":null,"annotations":{},"reference":null}},"access_modes":["ReadWriteOnce"],"line":7}
      ],
      "jobs": [
        {"name":"j","kind":"job","image":"docker://a","mounts":[{"volume":"s","path":"/s"},{"volume":"d","path":"/d"}],"resources":{"cpu":2,"memory":1073741824,"devices":{"nvidia.com/gpu":1},"exclusive":false,"annotations":{}},"nodes":1,"depends_on":[],"constraints":[{"negated":false,"key":"gpu","value":null,"strength":"soft"}],"affinity":{"with":[],"apart_from":[]},"networks":[],"line":9}
      ],
      "project": null,
      "clusters": ["a","b"],
      "annotations": {}
    }"#;
    serde_json::from_str(WORKFLOW).unwrap()
}

fn request() -> fedvol_common::funnel::PlanRequest {
    fedvol_common::funnel::PlanRequest::new("r-1", workflow(), "u")
        .with_groups(["g"])
        .with_seed(7)
        .with_trace_limit(5)
}

/// Real bodies of every request shape, as sent.
fn samples() -> Vec<Vec<u8>> {
    let plan = PlanMsg {
        request: request(),
        deadline_ms: 1_900_000_000_000,
        reserve: true,
        ttl_ms: 1000,
        summary: true,
        dry_run: false,
    };
    let submit = SubmitMsg {
        priority: None,
        wait_for_capacity: false,
        request_id: "r-1".into(),
        workflow: workflow(),
        dry_run: false,
        seed: Some(3),
        groups: vec!["g".into()],
        timeout_ms: 100,
        trace_limit: None,
        keep: false,
        choice: None,
    };
    vec![
        agent::Plan::encode_request(&plan).to_vec(),
        coordinator::Submit::encode_request(&submit).to_vec(),
        agent::Commit::encode_request(&ActionMsg {
            request: Some(request()),
            attempt: 2,
            ..ActionMsg::new("r-1", 5)
        })
        .to_vec(),
        agent::Plan::encode_reply(&agent::PlanReply {
            request_id: "r-1".into(),
            cluster: "a".into(),
            decision: summarized(),
            hold: None,
        })
        .to_vec(),
    ]
}

/// A summarized answer (written in its compact array form), planned on a small synthetic
/// cluster.
fn summarized() -> fedvol_common::decision::ClusterDecision {
    let sizes = fedvol_common::synth::SynthSizes {
        hosts: 12,
        provisioners: 2,
        volumes: 3,
    };
    let inv = fedvol_common::synth::cluster("a", sizes);
    let req = fedvol_common::funnel::PlanRequest::new("r-1", fedvol_common::synth::workflow(2, 1), "u");
    let mut d = fedvol_common::funnel::plan_cluster(&inv, &Default::default(), &req);
    d.summarize();
    d
}

/// Every decoder of requests and answers, on the same bytes. Returns which accepted.
fn decode_all(bytes: &[u8]) -> Vec<bool> {
    vec![
        agent::Plan::decode_request(bytes, "agent").is_ok(),
        agent::Commit::decode_request(bytes, "agent").is_ok(),
        agent::WhyNot::decode_request(bytes, "agent").is_ok(),
        coordinator::Submit::decode_request(bytes, "coordinator").is_ok(),
        coordinator::Get::decode_request(bytes, "coordinator").is_ok(),
        coordinator::WhyNot::decode_request(bytes, "coordinator").is_ok(),
        coordinator::List::decode_request(bytes, "coordinator")
            .is_ok_and(|_| !bytes.iter().all(u8::is_ascii_whitespace)),
        provisioner::Provision::decode_request(bytes, "provisioner").is_ok(),
        crate::decode::<Heartbeat>(bytes, "heartbeat", "coordinator").is_ok(),
        agent::Plan::decode_reply(bytes, "coordinator").is_ok(),
        agent::Commit::decode_reply(bytes, "coordinator").is_ok(),
        coordinator::Submit::decode_reply(bytes, "client").is_ok(),
        coordinator::Replay::decode_reply(bytes, "client").is_ok(),
        coordinator::WhatIf::decode_request(bytes, "coordinator").is_ok(),
        coordinator::WhatIf::decode_reply(bytes, "client").is_ok(),
        agent::Answer::decode_request(bytes, "agent").is_ok(),
        agent::Answer::decode_reply(bytes, "coordinator").is_ok(),
        crate::listing::listing("r".into(), bytes).is_ok(),
    ]
}

/// The contract: a JSON object whose `v` is the protocol version. (serde_json skips the fields
/// a message does not read without checking their strings' UTF-8 or their numbers' range, so
/// only the object and its `v` are checked here.)
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
        Just(serde_json::json!("800EB")),
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
                    Just("cluster".to_string()),
                    Just("decision".to_string()),
                    Just("error".to_string()),
                    Just("ok".to_string()),
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
    /// Arbitrary bytes: an error or a value, never a panic; accepted only as a versioned JSON
    /// object.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if decode_all(&bytes).iter().any(|b| *b) {
            prop_assert!(is_versioned_object(&bytes), "{:?}", String::from_utf8_lossy(&bytes));
        }
    }

    /// Arbitrary JSON shapes (wrong types, missing and unknown fields, arrays, other versions)
    /// with the contract's field names.
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
        if decode_all(&bytes).iter().any(|b| *b) {
            prop_assert!(is_versioned_object(&bytes), "{v}");
        }
    }

    /// Real bodies (a plan, a submit with sizes beyond u64, a commit), damaged: cut, bytes
    /// replaced, bytes inserted.
    #[test]
    fn damaged_bodies_never_panic(
        which in 0usize..4,
        cut in 0usize..8192,
        edits in prop::collection::vec((0usize..8192, any::<u8>(), any::<bool>()), 0..6),
    ) {
        let mut bytes = samples().swap_remove(which);
        bytes.truncate(cut.max(1).min(bytes.len()));
        for (at, byte, insert) in edits {
            let i = at % bytes.len().max(1);
            if insert { bytes.insert(i, byte) } else if !bytes.is_empty() { bytes[i] = byte }
        }
        if decode_all(&bytes).iter().any(|b| *b) {
            prop_assert!(is_versioned_object(&bytes));
        }
    }

    /// Any other version, or a version that is not a whole number, is refused by name.
    #[test]
    fn other_versions_are_refused(v in prop_oneof![
        any::<u64>().prop_filter("not ours", |v| *v != u64::from(VERSION)).prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        "\\PC{0,4}".prop_map(serde_json::Value::from),
    ]) {
        let mut msg: serde_json::Value = serde_json::from_slice(&samples()[0]).unwrap();
        msg["v"] = v.clone();
        let e = agent::Plan::decode_request(&serde_json::to_vec(&msg).unwrap(), "agent").unwrap_err();
        prop_assert!(e.to_string().contains("protocol version"), "{}: {}", v, e);
    }
}

#[test]
fn the_samples_decode_where_they_belong() {
    let s = samples();
    let plan = agent::Plan::decode_request(&s[0], "agent").unwrap();
    assert_eq!(plan.request.workflow.volumes[0].key, "s");
    // 800EB is more than 2^64 bytes: it survives the trip.
    let fedvol_common::model::VolumeSource::Fuzzball(v) = &plan.request.workflow.volumes[0].source else {
        panic!("a Fuzzfile volume")
    };
    assert_eq!(v.size.map(|b| b.0), Some(800 * 10u128.pow(18)));
    assert!(coordinator::Submit::decode_request(&s[1], "coordinator").is_ok());
    // A why_not carries a request and a deadline too: the plan reads as one.
    assert!(agent::WhyNot::decode_request(&s[0], "agent").is_ok());
    assert!(agent::Commit::decode_request(&s[0], "agent").is_err());
    // A summary crosses in its compact array form and reads back as it was.
    assert!(String::from_utf8_lossy(&s[3]).contains(r#""decision":["answered""#));
    let reply = agent::Plan::decode_reply(&s[3], "coordinator").unwrap().unwrap();
    let mut want = summarized();
    want.elapsed_ms = (want.elapsed_ms * 100.0).round() / 100.0;
    assert_eq!(reply.decision, want);
}

/// Regression: a JSON array was read as a message (serde fills a struct's fields
/// from a sequence in order), so `[1, "r", 5]` was a commit of `r`.
#[test]
fn arrays_are_not_messages() {
    for body in [&br#"[1, "r", 5]"#[..], br#"[1]"#, br#" [1, "r", 5, 6]"#] {
        let e = agent::Commit::decode_request(body, "agent").unwrap_err();
        assert!(e.to_string().contains("not a JSON object"), "{e}");
    }
}

/// Deep nesting (100 000 levels, in a field the message ignores and in one it reads) is an
/// error, never a stack overflow.
#[test]
fn deep_nesting_is_an_error() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for body in [
        format!("{{\"v\":1,\"extra\":{deep}}}"),
        format!("{{\"v\":1,\"request_id\":\"r\",\"workflow\":{{\"name\":{deep}}}}}"),
        format!("{{\"v\":1,\"extra\":{}", "{\"a\":".repeat(100_000)),
    ] {
        assert!(coordinator::Submit::decode_request(body.as_bytes(), "coordinator").is_err());
    }
}

#[test]
fn queries_decode() {
    let q = DecisionRef {
        request_id: "r".into(),
        cancel: false,
        whole: None,
    };
    let b = coordinator::Get::encode_request(&q);
    assert_eq!(coordinator::Get::decode_request(&b, "coordinator").unwrap(), q);
    let w = WhyNotQuery {
        request_id: "r".into(),
        cluster: "a".into(),
        target: Target {
            zone: Some("z".into()),
            ..Target::default()
        },
    };
    let b = coordinator::WhyNot::encode_request(&w);
    assert_eq!(coordinator::WhyNot::decode_request(&b, "coordinator").unwrap(), w);
    let m = WhyNotMsg {
        request: request(),
        deadline_ms: 1,
        target: Target {
            host: Some("h".into()),
            ..Target::default()
        },
    };
    let b = agent::WhyNot::encode_request(&m);
    assert_eq!(agent::WhyNot::decode_request(&b, "agent").unwrap(), m);
}
