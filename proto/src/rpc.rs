//! Calling an endpoint: request/reply without the client's shared request machinery. Every
//! request gets its own fresh inbox subscription, dropped (unsubscribed) when done, so a request
//! that times out leaves nothing behind (a timed-out `Client::request` leaks a little each time).
//! NATS answers a request nobody listens for with an immediate 503 "no responders" status,
//! reported as [`RpcError::NoResponders`].

use std::time::Duration;

use async_nats::StatusCode;
use bytes::Bytes;
use futures::StreamExt;

use crate::endpoint::Endpoint;
use crate::failure::Failure;

/// Why a call got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// Nobody subscribes to the subject (NATS status 503).
    #[error("no responders on {0}")]
    NoResponders(String),
    /// No answer within the wait.
    #[error("no answer on {subject} within {ms} ms")]
    TimedOut {
        /// The subject asked.
        subject: String,
        /// The wait, ms.
        ms: u128,
    },
    /// The client failed (connection lost, permission refused...).
    #[error("NATS error on {subject}: {message}")]
    Nats {
        /// The subject asked.
        subject: String,
        /// The client's error.
        message: String,
    },
    /// The request is larger than the server's `max_payload`; nothing was sent.
    #[error("the {what} request is {size} bytes, more than the NATS server's max_payload of {max} bytes")]
    TooLarge {
        /// The operation.
        what: String,
        /// The encoded request, bytes.
        size: usize,
        /// The server's limit, bytes.
        max: usize,
    },
    /// The answer was neither the reply nor a failure body.
    #[error("unreadable answer on {subject}: {message}")]
    BadAnswer {
        /// The subject asked.
        subject: String,
        /// The decoding error.
        message: String,
    },
}

/// True for a NATS "no responders" status message.
pub fn is_no_responders(m: &async_nats::Message) -> bool {
    m.status == Some(StatusCode::NO_RESPONDERS)
}

/// Sends `body` on `subject` with a fresh reply inbox and waits up to `wait` for the first
/// answer.
///
/// Errors: [`RpcError`] (no responders, timeout, NATS failure).
pub async fn request(
    client: &async_nats::Client,
    subject: &str,
    body: Bytes,
    wait: Duration,
) -> Result<Bytes, RpcError> {
    let nats_err = |e: &dyn std::fmt::Display| RpcError::Nats {
        subject: subject.to_string(),
        message: e.to_string(),
    };
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.map_err(|e| nats_err(&e))?;
    client
        .publish_with_reply(subject.to_string(), inbox, body)
        .await
        .map_err(|e| nats_err(&e))?;
    let answer = match tokio::time::timeout(wait, sub.next()).await {
        Ok(Some(m)) if is_no_responders(&m) => Err(RpcError::NoResponders(subject.to_string())),
        Ok(Some(m)) => Ok(m.payload),
        Ok(None) => Err(nats_err(&"the reply subscription closed")),
        Err(_) => Err(RpcError::TimedOut {
            subject: subject.to_string(),
            ms: wait.as_millis(),
        }),
    };
    let _ = sub.unsubscribe().await;
    answer
}

/// Calls endpoint `E` on `subject`: encodes `req`, refuses a body over the server's
/// `max_payload` before sending, waits up to `wait`, and decodes the answer as `speaker`
/// (`"coordinator"`, `"client"`...): the reply, or the [`Failure`] the server sent.
///
/// Errors: [`RpcError`], including [`RpcError::BadAnswer`] for an answer that is neither.
pub async fn call<E: Endpoint>(
    client: &async_nats::Client,
    subject: &str,
    req: &E::Request,
    wait: Duration,
    speaker: &str,
) -> Result<Result<E::Reply, Failure>, RpcError> {
    let body = E::encode_request(req);
    let max = client.max_payload();
    if body.len() > max {
        return Err(RpcError::TooLarge {
            what: E::NAME.to_string(),
            size: body.len(),
            max,
        });
    }
    let answer = request(client, subject, body, wait).await?;
    E::decode_reply(&answer, speaker).map_err(|e| RpcError::BadAnswer {
        subject: subject.to_string(),
        message: e.to_string(),
    })
}
