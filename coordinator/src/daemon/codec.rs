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

#[derive(serde::Deserialize)]
struct Peek {
    #[serde(default)]
    v: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct PeekNumber {
    v: u64,
}

/// Decodes a `what` body: it must be a JSON object whose `v` is [`VERSION`], then decodes the
/// same bytes as `T` (so u128 sizes survive).
///
/// Errors: one sentence naming `what` and the problem (not JSON, missing or unsupported
/// version, a field of the wrong shape).
pub fn decode<T: serde::de::DeserializeOwned>(payload: &[u8], what: &str) -> Result<T, String> {
    if payload.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(format!("{what}: not a JSON object"));
    }
    let peek: Peek = serde_json::from_slice(payload).map_err(|e| format!("{what}: not a JSON object: {e}"))?;
    if peek.v.is_none() {
        return Err(format!("{what}: missing protocol version field `v`"));
    }
    match serde_json::from_slice::<PeekNumber>(payload) {
        Ok(p) if p.v == u64::from(VERSION) => {}
        Ok(p) => {
            return Err(format!(
                "{what}: protocol version {} is not supported (this coordinator speaks {VERSION})",
                p.v
            ));
        }
        Err(_) => return Err(format!("{what}: the protocol version `v` must be a whole number")),
    }
    serde_json::from_slice(payload).map_err(|e| format!("{what}: {e}"))
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
}
