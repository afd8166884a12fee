//! JSON bodies on the wire: decoding with a protocol-version check straight from the bytes
//! (never through `serde_json::Value`, which cannot hold the u128 byte sizes of volumes), and
//! the error bodies every coordinator operation answers with.

use bytes::Bytes;
use fedvol_common::decision::Reason;
use fedvol_common::wire::VERSION;
use serde::Serialize;

/// Stable codes of the coordinator's own errors (the agents' codes pass through unchanged).
pub mod codes {
    /// The request body is not what the operation takes (not JSON, wrong version, bad field).
    pub const BAD_REQUEST: &str = "bad_request";
    /// No decision is stored under the request id.
    pub const NOT_FOUND: &str = "not_found";
    /// The decision is not committed (dry run, failed, or still being committed).
    pub const NOT_COMMITTED: &str = "not_committed";
    /// The decision store (JetStream KV) failed.
    pub const STORE: &str = "store_unavailable";
    /// A cluster did not answer in time.
    pub const TIMED_OUT: &str = "timed_out";
    /// Nobody listens on the cluster's subject (NATS "no responders"), or the cluster is
    /// known dead or suspect.
    pub const UNREACHABLE: &str = "unreachable";
    /// The cluster answered something the coordinator could not read.
    pub const BAD_ANSWER: &str = "bad_answer";
    /// A commit on a cluster failed; the next cluster in the ranking was tried.
    pub const COMMIT_FAILED: &str = "commit_failed";
    /// A commit was not answered and its outcome could not be learnt: the decision stays
    /// `planned` until a submit of the same request id settles it.
    pub const COMMIT_UNKNOWN: &str = "commit_outcome_unknown";
    /// The commit attempts allowed (`commitAttempts`) were used up.
    pub const ATTEMPTS_EXHAUSTED: &str = "commit_attempts_exhausted";
    /// NATS failed while talking to a cluster.
    pub const NATS: &str = "nats_error";
    /// The answer would be larger than the NATS server's `max_payload`.
    pub const REPLY_TOO_LARGE: &str = "reply_too_large";
    /// The decision belongs to another user: only its owner may change it (complete it, or
    /// submit again under its request id).
    pub const NOT_OWNER: &str = "not_owner";
}

/// Decodes a `what` body: [`fedvol_common::wire::decode_body`], speaking as the coordinator.
///
/// Errors: as `decode_body` (not a JSON object, missing or unsupported version, a field of the
/// wrong shape).
pub fn decode<T: serde::de::DeserializeOwned>(payload: &[u8], what: &str) -> Result<T, String> {
    fedvol_common::wire::decode_body(payload, what, "coordinator")
}

/// Decodes an optional body: empty means "no options" (`Ok(None)`), anything else must pass
/// [`decode`].
///
/// Errors: as [`decode`].
pub fn decode_optional<T: serde::de::DeserializeOwned>(payload: &[u8], what: &str) -> Result<Option<T>, String> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    decode(payload, what).map(Some)
}

/// JSON bytes of `v` (an empty body only if serialization fails, which the wire types never do).
pub fn to_bytes<T: Serialize>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// The generic error body `{"v": 1, "error": {"code", "message"}}`, for operations whose reply
/// type has no error field (clusters, list).
pub fn error_body(reason: Reason) -> Bytes {
    #[derive(Serialize)]
    struct ErrorBody {
        v: u32,
        error: Reason,
    }
    to_bytes(&ErrorBody {
        v: VERSION,
        error: reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::wire::DecisionRef;

    #[test]
    fn version_is_checked_and_bodies_decode() {
        let ok: DecisionRef = decode(br#"{"v":1,"request_id":"r"}"#, "get").unwrap();
        assert_eq!(ok.request_id, "r");
        let e = decode::<DecisionRef>(br#"{"v":2,"request_id":"r"}"#, "get").unwrap_err();
        assert!(e.contains("protocol version 2"), "{e}");
        let e = decode::<DecisionRef>(br#"{"request_id":"r"}"#, "get").unwrap_err();
        assert!(e.contains("missing protocol version"), "{e}");
        let e = decode::<DecisionRef>(br#"{"v":"1"}"#, "get").unwrap_err();
        assert!(e.contains("whole number"), "{e}");
        let e = decode::<DecisionRef>(b"[1]", "get").unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
        let e = decode::<DecisionRef>(br#"{"v":1}"#, "get").unwrap_err();
        assert!(e.contains("request_id"), "{e}");
        assert_eq!(decode_optional::<DecisionRef>(b"  ", "x").unwrap(), None);
    }

    #[test]
    fn sizes_beyond_u64_survive() {
        #[derive(serde::Deserialize)]
        struct Big {
            size: fedvol_common::size::ByteSize,
        }
        let b: Big = decode(br#"{"v":1,"size":340282366920938463463374607431768211455}"#, "x").unwrap();
        assert_eq!(b.size.0, u128::MAX);
    }

    /// Fuzzing of the coordinator's wire decoding (issue 6): requests from users, answers and
    /// heartbeats from agents. Case counts follow `PROPTEST_CASES` (default 256).
    mod fuzz {
        use super::*;
        use crate::daemon::fanout::AgentAnswer;
        use fedvol_common::wire::{ActionReply, Heartbeat, SubmitMsg, WhyNotQuery};
        use proptest::prelude::*;

        fn sample_submit() -> Vec<u8> {
            let wf = fedvol_common::format::parse_workflow_str(
                "w.yaml",
                "w",
                "version: v4\nclusters: [a, b]\nvolumes:\n  s:\n    size: 800EB\n  d: {use: nfs, name: data}\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: s, /d: d}\n    resource: {cpu: {cores: 2}, memory: {size: 1GiB}, devices: {nvidia.com/gpu: 1}}\n    constraints: [\"gpu:soft\"]\n",
            )
            .unwrap()
            .value;
            serde_json::to_vec(&SubmitMsg {
                v: VERSION,
                request_id: "r-1".into(),
                workflow: wf,
                dry_run: false,
                seed: Some(3),
                groups: vec!["g".into()],
                timeout_ms: 100,
                trace_limit: None,
            })
            .unwrap()
        }

        /// Every decoder the coordinator uses, on the same bytes; which accepted.
        fn decode_all(bytes: &[u8]) -> Vec<bool> {
            vec![
                decode::<SubmitMsg>(bytes, "submit").is_ok(),
                decode::<DecisionRef>(bytes, "get").is_ok(),
                decode::<WhyNotQuery>(bytes, "why_not").is_ok(),
                decode::<Heartbeat>(bytes, "heartbeat").is_ok(),
                decode::<AgentAnswer>(bytes, "plan answer").is_ok(),
                decode::<ActionReply>(bytes, "commit").is_ok(),
                decode_optional::<DecisionRef>(bytes, "list").is_ok_and(|o| o.is_some()),
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
                any::<f64>().prop_map(|f| serde_json::json!(f)),
                "\\PC{0,12}".prop_map(serde_json::Value::from),
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
                            Just("workflow".to_string()),
                            Just("cluster".to_string()),
                            Just("decision".to_string()),
                            Just("volumes".to_string()),
                            Just("jobs".to_string()),
                            Just("size".to_string()),
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
                if decode_all(&bytes).iter().any(|b| *b) {
                    prop_assert!(is_versioned_object(&bytes));
                }
            }

            /// Wrong types, missing and unknown fields, arrays, nesting.
            #[test]
            fn wrong_shapes_are_errors_not_panics(v in json_value()) {
                let bytes = serde_json::to_vec(&v).unwrap();
                if decode_all(&bytes).iter().any(|b| *b) {
                    prop_assert!(is_versioned_object(&bytes), "{}", v);
                }
            }

            /// A real submit (with a workflow and sizes beyond u64), damaged.
            #[test]
            fn damaged_submits_never_panic(
                cut in 0usize..8192,
                edits in prop::collection::vec((0usize..8192, any::<u8>(), any::<bool>()), 0..6),
            ) {
                let mut bytes = sample_submit();
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
                let mut msg: serde_json::Value = serde_json::from_slice(&sample_submit()).unwrap();
                msg["v"] = v.clone();
                let e = decode::<SubmitMsg>(&serde_json::to_vec(&msg).unwrap(), "submit").unwrap_err();
                prop_assert!(e.contains("protocol version"), "{}: {}", v, e);
            }
        }

        #[test]
        fn the_sample_submit_decodes() {
            let m: SubmitMsg = decode(&sample_submit(), "submit").unwrap();
            assert_eq!(m.workflow.volumes[0].key, "s");
        }

        /// Deep nesting (100 000 levels, in a field the message ignores and in one it reads)
        /// is an error, never a stack overflow.
        #[test]
        fn deep_nesting_is_an_error() {
            let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
            for body in [
                format!("{{\"v\":1,\"extra\":{deep}}}"),
                format!("{{\"v\":1,\"request_id\":\"r\",\"workflow\":{{\"name\":{deep}}}}}"),
                format!("{{\"v\":1,\"extra\":{}", "{\"a\":".repeat(100_000)),
            ] {
                assert!(decode::<SubmitMsg>(body.as_bytes(), "submit").is_err());
            }
        }
    }
}
