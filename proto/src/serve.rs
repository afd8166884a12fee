//! Serving an endpoint: everything a server does to one request around its handler, the same
//! for every party ([`answer`]):
//!
//! 1. a body over the server's limit (`maxBodyBytes`) is refused unread (`bad_request`);
//! 2. the body is decoded ([`Endpoint::decode_request`]) and checked ([`Endpoint::check`]);
//!    a malformed one is refused (`bad_request`) and changes nothing;
//! 3. a request past its deadline ([`Endpoint::deadline_ms`]) is dropped: the caller has
//!    stopped waiting, and answering late would only cost work;
//! 4. the handler runs; its reply or [`Failure`] is encoded (a failure names the cluster and
//!    the request when the handler did not);
//! 5. an answer over the server's `max_payload` (which NATS would refuse, leaving the caller to
//!    time out) becomes a `reply_too_large` failure naming both sizes.

use std::future::Future;

use bytes::Bytes;

use crate::code::Code;
use crate::endpoint::Endpoint;
use crate::failure::Failure;
use crate::version::{body_too_large, now_ms};

/// Who serves, and the limits of its connection.
#[derive(Debug, Clone)]
pub struct Server<'a> {
    /// Who is speaking in version errors: `"agent"`, `"coordinator"`, `"provisioner"`.
    pub speaker: &'static str,
    /// The cluster an agent serves (named in its failures), `None` for other parties.
    pub cluster: Option<&'a str>,
    /// Largest request body read, bytes.
    pub max_body_bytes: usize,
    /// The NATS server's `max_payload`, bytes (`Client::max_payload`).
    pub max_payload: usize,
    /// What to tell the caller when an answer is over `max_payload` (after the sizes), e.g.
    /// "raise max_payload in the NATS server's configuration".
    pub too_large_hint: &'a str,
}

impl Server<'_> {
    fn fail(&self, f: Failure, request_id: Option<&str>) -> Failure {
        let mut f = f;
        if f.cluster.is_none() {
            f.cluster = self.cluster.map(str::to_string);
        }
        if f.request_id.is_none() {
            f.request_id = request_id.map(str::to_string);
        }
        f
    }
}

/// Answers one request of endpoint `E` (see the module docs). `handler` gets the decoded,
/// checked, in-time request; it returns `None` to drop the request unanswered, else the reply
/// or a failure. Returns the body to send, or `None` to send nothing.
pub async fn answer<E, F, Fut>(server: &Server<'_>, payload: &[u8], handler: F) -> Option<Bytes>
where
    E: Endpoint,
    F: FnOnce(E::Request) -> Fut,
    Fut: Future<Output = Option<Result<E::Reply, Failure>>>,
{
    if payload.len() > server.max_body_bytes {
        tracing::warn!(
            endpoint = E::NAME,
            bytes = payload.len(),
            limit = server.max_body_bytes,
            "request body over the limit refused unread"
        );
        let f = Failure::bad_request(body_too_large(
            &format!("{} request", E::NAME),
            payload.len(),
            server.max_body_bytes,
        ));
        return Some(E::encode_failure(&server.fail(f, None)));
    }
    let request = match E::decode_request(payload, server.speaker).map_err(|e| Failure::bad_request(e.to_string())) {
        Ok(r) => match E::check(&r) {
            Ok(()) => r,
            Err(e) => {
                tracing::warn!(endpoint = E::NAME, error = %e, "request over a limit refused");
                return Some(E::encode_failure(&server.fail(e.into(), E::request_id(&r))));
            }
        },
        Err(f) => {
            tracing::warn!(endpoint = E::NAME, error = %f, "malformed request refused");
            return Some(E::encode_failure(&server.fail(f, None)));
        }
    };
    let request_id = E::request_id(&request).map(str::to_string);
    if let Some(deadline) = E::deadline_ms(&request)
        && now_ms() > deadline
    {
        tracing::info!(endpoint = E::NAME, request_id = ?request_id, "request past its deadline: dropped");
        return None;
    }
    let body = match handler(request).await? {
        Ok(reply) => E::encode_reply(&reply),
        Err(f) => E::encode_failure(&server.fail(f, request_id.as_deref())),
    };
    if body.len() <= server.max_payload {
        return Some(body);
    }
    tracing::warn!(
        endpoint = E::NAME,
        bytes = body.len(),
        limit = server.max_payload,
        "answer over the server's max_payload replaced by an error"
    );
    let whose = match server.cluster {
        Some(c) => format!("the {} answer of cluster {c}", E::NAME),
        None => format!("the {} answer", E::NAME),
    };
    let f = Failure::new(
        Code::ReplyTooLarge,
        format!(
            "{whose} is {} bytes, more than the NATS server's max_payload of {} bytes; {}",
            body.len(),
            server.max_payload,
            server.too_large_hint
        ),
    );
    Some(E::encode_failure(&server.fail(f, request_id.as_deref())))
}

/// The answer to a request refused because the server is at its limit of requests in progress
/// (`overloaded`; nothing was read or done), for endpoint `E`.
pub fn overloaded<E: Endpoint>(server: &Server<'_>, limit: usize) -> Bytes {
    let mut f = Failure::new(
        Code::Overloaded,
        format!(
            "{} requests are in progress, this server's limit (maxInFlight): ask again later",
            limit
        ),
    );
    f.cluster = server.cluster.map(str::to_string);
    E::encode_failure(&f)
}
