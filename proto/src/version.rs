//! The protocol version and the versioned JSON body: every body on the wire (and every record
//! in the decision bucket) is a JSON object carrying `"v": VERSION` beside its fields. The
//! body types do not hold `v` themselves: [`encode`] adds it and [`decode`] checks it.

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Protocol version carried in every body's `v` field.
pub const VERSION: u32 = 1;

/// Default largest request body an agent or coordinator accepts, bytes (1 MiB, nats-server's
/// default `max_payload`). Larger bodies are refused with an error saying so; both daemons
/// take `maxBodyBytes` to change it.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// The current time in milliseconds since the Unix epoch (0 if the clock is before 1970).
/// Deadlines on the wire are absolute times in this unit.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Why a body could not be decoded. Every message names `what` was being read (e.g. "plan",
/// "commit answer") and never repeats the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body is not a JSON object (serde would otherwise fill a struct from an array).
    #[error("{what}: not a JSON object{}", detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    NotAnObject {
        /// What was being read.
        what: String,
        /// The parser's message, when it got that far.
        detail: Option<String>,
    },
    /// No `v` field.
    #[error("{what}: missing protocol version field `v`")]
    MissingVersion {
        /// What was being read.
        what: String,
    },
    /// `v` is not a whole number.
    #[error("{what}: the protocol version `v` must be a whole number")]
    VersionNotANumber {
        /// What was being read.
        what: String,
    },
    /// `v` is a version this build does not speak.
    #[error("{what}: protocol version {found} is not supported (this {speaker} speaks {VERSION})")]
    UnsupportedVersion {
        /// What was being read.
        what: String,
        /// The version found.
        found: u64,
        /// Who is reading ("agent", "coordinator", "client").
        speaker: String,
    },
    /// A field is missing or has the wrong shape.
    #[error("{what}: {message}")]
    Shape {
        /// What was being read.
        what: String,
        /// serde's message (field name, expected type, line and column).
        message: String,
    },
}

/// The error sentence for a request body of `size` bytes over a `limit` of bytes, naming
/// `what` (e.g. "submit request") and the setting that raises the limit.
pub fn body_too_large(what: &str, size: usize, limit: usize) -> String {
    format!("{what} body of {size} bytes is larger than this server's limit of {limit} bytes (maxBodyBytes)")
}

/// JSON bytes of `body` with `"v": VERSION` first. `body` must serialize as a JSON object (every
/// body type of this crate does); anything else is encoded as `{"v":1}` alone, which every
/// reader refuses as a body of the wrong shape.
pub fn encode<T: Serialize + ?Sized>(body: &T) -> Bytes {
    encode_sized(body, 128)
}

/// [`encode`] into a buffer that starts with room for `capacity` bytes: a caller that knows
/// its body is large (a decision of 1,000 clusters is about 450 KB) spares the buffer's twelve
/// doublings and their copies. An estimate more than four times too large is cut back to
/// the bytes' size after the write (one copy of a smaller body).
pub fn encode_sized<T: Serialize + ?Sized>(body: &T, capacity: usize) -> Bytes {
    #[derive(Serialize)]
    struct Versioned<'a, T: ?Sized> {
        v: u32,
        #[serde(flatten)]
        body: &'a T,
    }
    let mut out = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut out, &Versioned { v: VERSION, body }) {
        Ok(()) => {
            // The bytes keep their buffer for as long as they live (a record stays in
            // `own_writes` until its write is seen): room of more than four times what was
            // written is given back.
            if out.capacity() > 4 * out.len().max(1 << 10) {
                out.shrink_to_fit();
            }
            Bytes::from(out)
        }
        Err(_) => Bytes::from(serde_json::to_vec(&serde_json::json!({ "v": VERSION })).unwrap_or_default()),
    }
}

/// Decodes a `what` body as `T`, reading as `speaker` ("agent", "coordinator", "client"): it
/// must be a JSON object whose `v` is the whole number [`VERSION`]; then the same bytes are
/// decoded straight as `T` (a `serde_json::Value` detour would lose byte sizes above 2^64).
///
/// Errors: [`DecodeError`], one sentence naming `what` and the problem.
///
/// One pass over the bytes when the body starts as [`encode`] writes it (`{"v":1,`): the
/// version checks run only when decoding fails, so that every error is the one the full checks
/// give.
pub fn decode<T: DeserializeOwned>(payload: &[u8], what: &str, speaker: &str) -> Result<T, DecodeError> {
    // JSON is UTF-8 (RFC 8259, section 8.1). Checked over the whole body: on the fast path the
    // decoder skips the strings of unknown fields without reading them, so a body with bytes
    // that are not UTF-8 there was accepted.
    // Read as the text it was just found to be, so the decoder does not check each string's
    // UTF-8 a second time.
    let text = match std::str::from_utf8(payload) {
        Ok(text) => text,
        Err(e) => {
            return Err(DecodeError::NotAnObject {
                what: what.to_string(),
                detail: Some(format!("not UTF-8 at byte {} (JSON text is UTF-8)", e.valid_up_to())),
            });
        }
    };
    let fast = starts_versioned(payload);
    if !fast {
        check_version(payload, what, speaker)?;
    }
    serde_json::from_str(text).map_err(|e| {
        if fast && let Err(v) = check_version(payload, what, speaker) {
            return v;
        }
        DecodeError::Shape {
            what: what.to_string(),
            message: e.to_string(),
        }
    })
}

/// True when `payload` begins (after whitespace) with `{"v":1,` or is `{"v":1}`: the version
/// [`encode`] writes first. A body that starts so has a current version field; whether the rest
/// is valid is for the decoder to say. Other bodies (another writer's field order, spaces) go
/// through [`check_version`].
pub fn starts_versioned(payload: &[u8]) -> bool {
    let start = payload
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(payload.len());
    let Some(after) = payload[start..].strip_prefix(b"{\"v\":") else {
        return false;
    };
    let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
    let version = std::str::from_utf8(&after[..digits])
        .ok()
        .and_then(|d| d.parse::<u32>().ok());
    version == Some(VERSION) && matches!(after.get(digits), Some(b',' | b'}'))
}

/// Checks that `payload` is a JSON object whose `v` is [`VERSION`] (see [`decode`]). Reads the
/// whole body twice: use it on error paths, or where [`starts_versioned`] is false.
///
/// Errors: [`DecodeError`] other than `Shape`.
pub fn check_version(payload: &[u8], what: &str, speaker: &str) -> Result<(), DecodeError> {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        v: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct PeekNumber {
        v: u64,
    }
    let what_s = || what.to_string();
    if payload.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(DecodeError::NotAnObject {
            what: what_s(),
            detail: None,
        });
    }
    let peek: Peek = serde_json::from_slice(payload).map_err(|e| DecodeError::NotAnObject {
        what: what_s(),
        detail: Some(e.to_string()),
    })?;
    if peek.v.is_none() {
        return Err(DecodeError::MissingVersion { what: what_s() });
    }
    match serde_json::from_slice::<PeekNumber>(payload) {
        Ok(p) if p.v == u64::from(VERSION) => Ok(()),
        Ok(p) => Err(DecodeError::UnsupportedVersion {
            what: what_s(),
            found: p.v,
            speaker: speaker.to_string(),
        }),
        Err(_) => Err(DecodeError::VersionNotANumber { what: what_s() }),
    }
}

/// Decodes an optional body: empty (or only whitespace) means "no options" (`Ok(None)`),
/// anything else must pass [`decode`].
///
/// Errors: as [`decode`].
pub fn decode_optional<T: DeserializeOwned>(
    payload: &[u8],
    what: &str,
    speaker: &str,
) -> Result<Option<T>, DecodeError> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    decode(payload, what, speaker).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Big {
        request_id: String,
        size: fedvol_common::size::ByteSize,
    }

    #[test]
    fn encode_puts_the_version_first_and_keeps_u128() {
        let b = Big {
            request_id: "r".into(),
            size: fedvol_common::size::ByteSize(u128::MAX),
        };
        let bytes = encode(&b);
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(
            text.starts_with(r#"{"v":1,"request_id":"r","size":340282366920938463463374607431768211455"#),
            "{text}"
        );
        let back: Big = decode(&bytes, "big", "agent").unwrap();
        assert_eq!(back, b);
    }

    #[test]
    fn the_version_is_checked_and_named() {
        let e = decode::<Big>(br#"{"v":2,"request_id":"r","size":1}"#, "get", "coordinator").unwrap_err();
        assert_eq!(
            e.to_string(),
            "get: protocol version 2 is not supported (this coordinator speaks 1)"
        );
        let e = decode::<Big>(br#"{"request_id":"r"}"#, "get", "agent").unwrap_err();
        assert!(e.to_string().contains("missing protocol version"), "{e}");
        let e = decode::<Big>(br#"{"v":"1"}"#, "get", "agent").unwrap_err();
        assert!(e.to_string().contains("whole number"), "{e}");
        let e = decode::<Big>(b"[1]", "get", "agent").unwrap_err();
        assert!(e.to_string().contains("not a JSON object"), "{e}");
        let e = decode::<Big>(br#"{"v":1}"#, "get", "agent").unwrap_err();
        assert!(e.to_string().contains("request_id"), "{e}");
        assert_eq!(decode_optional::<Big>(b"  ", "x", "agent").unwrap(), None);
    }

    /// A body that starts as `encode` writes it but holds bytes that are not UTF-8 in a field
    /// the decoder would skip (a fuzzed key) is refused, not read around (RFC 8259, 8.1).
    #[test]
    fn a_body_that_is_not_utf8_is_refused_even_in_a_skipped_field() {
        let mut body = br#"{"v":1,"request_id":"r","size":1,"requesZ_id":"fz-"#.to_vec();
        body.extend_from_slice(&[0xff, 0xfe]);
        body.extend_from_slice(br#""}"#);
        let e = decode::<Big>(&body, "submit request", "coordinator").unwrap_err();
        assert!(e.to_string().contains("not UTF-8 at byte 50"), "{e}");
        assert!(
            decode::<Big>(
                "{\"v\":1,\"request_id\":\"r\",\"size\":1,\"x\":\"é\"}".as_bytes(),
                "x",
                "agent"
            )
            .is_ok()
        );
    }
}
