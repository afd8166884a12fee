//! [`Endpoint`]: one operation of one party, with its request and reply types, and the
//! encoding and decoding of both through the versioned body ([`crate::version`]) and the
//! [`Failure`] body.
//!
//! What the serve layer needs to know of a request (its id, its deadline, the checks beyond its
//! shape) and of a reply (whether it carries its own `error`, the fields earlier readers of its
//! failures required, how it is written) are facts of the body types: [`RequestBody`] and
//! [`ReplyBody`], implemented beside each body. An operation is then one row of its party's
//! table (`operations!`, in `operations.rs`): its wire name, its request and its reply; the endpoint's
//! `NAME` comes from the row, so the subject a caller uses and the one a server serves are built
//! from the same value.

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::code::ProtoError;
use crate::failure::Failure;
use crate::version::{DecodeError, check_version, decode, decode_optional, encode};

/// A request with no fields: the body may be empty or `{"v": 1}` (status, inventory,
/// clusters, list).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoArgs {}

/// A request body, and what a server reads of it before the handler runs (see
/// [`crate::serve`]). Every method has a default: a body implements the ones that apply to it.
pub trait RequestBody: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// Decodes the body of a `what` request read by `speaker` (default: [`decode`], strict).
    ///
    /// Errors: [`DecodeError`].
    fn decode_body(payload: &[u8], what: &str, speaker: &str) -> Result<Self, DecodeError> {
        decode(payload, what, speaker)
    }

    /// Checks the decoded body of a `what` request beyond its shape (e.g. the workflow limits
    /// of [`fedvol_common::limits`]).
    ///
    /// Errors: a `bad_request` [`ProtoError`] saying what is over which limit, starting with
    /// `what`.
    fn check(&self, _what: &str) -> Result<(), ProtoError> {
        Ok(())
    }

    /// The request's absolute deadline, ms since the epoch: past it the request is dropped
    /// unanswered (the caller has stopped waiting). `None`: no deadline.
    fn deadline_ms(&self) -> Option<u64> {
        None
    }

    /// The request's id, for logs and for the [`Failure`] answered to it.
    fn request_id(&self) -> Option<&str> {
        None
    }
}

/// A reply body, and how its operation's answers are written and read.
pub trait ReplyBody: Serialize + DeserializeOwned + Send + 'static {
    /// True when the reply body has its own `error` field beside its result (a commit that
    /// failed after provisioning reports each volume's outcome; a submit whose commit is in
    /// doubt returns the stored decision with the reason). A [`Failure`] body then decodes as
    /// a reply with that error set, as it did before this crate existed.
    const CARRIES_ERROR: bool = false;

    /// Fields that readers of the previous release required in this reply's error bodies,
    /// added to a [`Failure`] body so they still read it (default: none).
    fn legacy_failure_fields(_failure: &Failure) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }

    /// The reply's wire body (default: [`encode`]).
    fn encode_body(&self) -> Bytes {
        encode(self)
    }
}

impl RequestBody for NoArgs {
    /// An empty body, or any versioned object (its fields are ignored): [`decode_no_args`].
    fn decode_body(payload: &[u8], what: &str, speaker: &str) -> Result<Self, DecodeError> {
        decode_no_args(payload, what, speaker)
    }
}

/// One operation: its name, request and reply types, and the checks every server applies
/// before the handler runs (see [`crate::serve`]). Implemented by the operation tables
/// (`operations!`, in `operations.rs`); the provided methods follow the body types' [`RequestBody`] and
/// [`ReplyBody`].
pub trait Endpoint: 'static {
    /// The operation's name: its subject token, its service endpoint name and the `what` of
    /// error messages (e.g. `"commit"`).
    const NAME: &'static str;

    /// The request body.
    type Request: RequestBody;
    /// The reply body.
    type Reply: ReplyBody;

    /// Decodes a request body read by `speaker` ([`RequestBody::decode_body`], unless the
    /// operation's row overrides it).
    ///
    /// Errors: [`DecodeError`].
    fn decode_request(payload: &[u8], speaker: &str) -> Result<Self::Request, DecodeError> {
        Self::Request::decode_body(payload, Self::NAME, speaker)
    }

    /// Checks a decoded request beyond its shape ([`RequestBody::check`]).
    ///
    /// Errors: a `bad_request` [`ProtoError`] saying what is over which limit.
    fn check(request: &Self::Request) -> Result<(), ProtoError> {
        request.check(Self::NAME)
    }

    /// The request's absolute deadline, ms since the epoch ([`RequestBody::deadline_ms`]).
    fn deadline_ms(request: &Self::Request) -> Option<u64> {
        request.deadline_ms()
    }

    /// The request's id ([`RequestBody::request_id`]).
    fn request_id(request: &Self::Request) -> Option<&str> {
        request.request_id()
    }

    /// The request's wire body.
    fn encode_request(request: &Self::Request) -> Bytes {
        encode(request)
    }

    /// The reply's wire body ([`ReplyBody::encode_body`]).
    fn encode_reply(reply: &Self::Reply) -> Bytes {
        reply.encode_body()
    }

    /// A failure's wire body for this endpoint, with its reply's legacy fields
    /// ([`ReplyBody::legacy_failure_fields`]).
    fn encode_failure(failure: &Failure) -> Bytes {
        failure.encode_with(Self::Reply::legacy_failure_fields(failure))
    }

    /// Decodes an answer read by `speaker`: the reply, or the [`Failure`] the server sent
    /// instead (a body with an `error` object, unless the reply type carries its own error and
    /// the body reads as one).
    ///
    /// Errors: [`DecodeError`] when the body is neither.
    fn decode_reply(payload: &[u8], speaker: &str) -> Result<Result<Self::Reply, Failure>, DecodeError> {
        let carries_error = <Self::Reply as ReplyBody>::CARRIES_ERROR;
        let what = format!("{} answer", Self::NAME);
        // One pass in the common case: a body that starts as `encode` writes it and
        // reads as the reply, with no top-level `error` (checked only when the bytes could hold
        // one), is the reply. Every other case takes the full checks, with the same outcome.
        let fast = crate::version::starts_versioned(payload);
        if !fast {
            check_version(payload, &what, speaker)?;
        }
        let reply = serde_json::from_slice::<Self::Reply>(payload);
        let has_error = || {
            #[derive(serde::Deserialize)]
            struct PeekError {
                #[serde(default)]
                error: Option<serde::de::IgnoredAny>,
            }
            may_name_error(payload) && serde_json::from_slice::<PeekError>(payload).is_ok_and(|p| p.error.is_some())
        };
        let as_failure = || decode::<Failure>(payload, &what, speaker);
        match reply {
            Ok(r) if carries_error || !has_error() => Ok(Ok(r)),
            Ok(_) => as_failure().map(Err),
            Err(e) => {
                if fast {
                    check_version(payload, &what, speaker)?;
                }
                let e = DecodeError::Shape {
                    what: what.clone(),
                    message: e.to_string(),
                };
                if has_error() {
                    as_failure().map(Err).map_err(|f| if carries_error { e } else { f })
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// False only when `payload` cannot hold a key `error` with a value other than `null` (which
/// reads as no error): every `"error"` in it is followed by `: null`, and no `\u` escape could
/// spell the key otherwise. Nested decisions carry `"error": null` fields; a body that says
/// nothing else about errors is read in one pass.
fn may_name_error(payload: &[u8]) -> bool {
    const KEY: &[u8] = b"\"error\"";
    if memchr::memmem::find(payload, b"\\u").is_some() {
        return true;
    }
    let skip_ws = |mut i: usize| {
        while payload.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    for at in memchr::memmem::find_iter(payload, KEY) {
        let i = skip_ws(at + KEY.len());
        if payload.get(i) != Some(&b':') {
            return true;
        }
        if !payload[skip_ws(i + 1)..].starts_with(b"null") {
            return true;
        }
    }
    false
}

/// [`Endpoint::decode_request`] for requests that take no fields: an empty body, or any
/// versioned object (its fields are ignored).
///
/// Errors: a non-empty body that is not a versioned JSON object.
pub fn decode_no_args(payload: &[u8], what: &str, speaker: &str) -> Result<NoArgs, DecodeError> {
    decode_optional::<NoArgs>(payload, what, speaker).map(Option::unwrap_or_default)
}

/// A row's `decode_request` for requests whose body is not read at all (the agent's status and
/// inventory: a request to them carries nothing, so any body is taken as none).
pub fn decode_unread(_payload: &[u8], _what: &str, _speaker: &str) -> Result<NoArgs, DecodeError> {
    Ok(NoArgs {})
}
