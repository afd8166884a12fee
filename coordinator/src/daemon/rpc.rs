//! Request/reply over NATS without the client's shared request machinery: every request gets
//! its own fresh inbox subscription, dropped (unsubscribed) when done, so a request that times
//! out leaves nothing behind. NATS answers a request nobody listens for with an immediate 503
//! "no responders" status, reported as [`RpcError::NoResponders`].

use std::time::Duration;

use async_nats::StatusCode;
use bytes::Bytes;
use futures::StreamExt;

/// Why a request got no usable answer.
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
}

/// True for a NATS "no responders" status message.
pub fn is_no_responders(m: &async_nats::Message) -> bool {
    m.status == Some(StatusCode::NO_RESPONDERS)
}

/// Sends `body` on `subject` and waits up to `wait` for the first answer.
///
/// Errors: [`RpcError`].
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
    match tokio::time::timeout(wait, sub.next()).await {
        Ok(Some(m)) if is_no_responders(&m) => Err(RpcError::NoResponders(subject.to_string())),
        Ok(Some(m)) => Ok(m.payload),
        Ok(None) => Err(nats_err(&"the reply subscription closed")),
        Err(_) => Err(RpcError::TimedOut {
            subject: subject.to_string(),
            ms: wait.as_millis(),
        }),
    }
}
