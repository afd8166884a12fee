//! The CLI's side of the coordinator API: connect with the user's NATS identity and make one
//! request per call on `<prefix>.coordinator.<op>.<user>` (the operators' on
//! `<prefix>.operator.<op>.<user>`) through [`fedvol_proto::rpc`] (a
//! fresh reply inbox under the connection's inbox prefix, never the leaking `request()` on
//! timeout), adding what a person at a terminal needs: a refusal by the NATS server ends the
//! wait at once, and every error says what to do ("no coordinator", timeouts, permissions).

use std::time::Duration;

use fedvol_proto::coordinator::CoordinatorEndpoint;
use fedvol_proto::nats::{NatsAuth, ServerErrors, connect_watching, redact_url};
use fedvol_proto::rpc::{self, RpcError};
use fedvol_proto::{Failure, Subjects};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// NATS could not be reached.
    #[error("{0}")]
    Connect(String),
    /// Nobody subscribes to the subject (NATS answered "no responders").
    #[error("no coordinator is answering on {subject} (is fedvol-coordinator running and connected to {url}?)")]
    NoCoordinator {
        /// The subject.
        subject: String,
        /// The server URL (credentials redacted).
        url: String,
    },
    /// No answer in time.
    #[error("no answer from a coordinator on {subject} within {timeout_ms} ms{}", refused_hint(.refused))]
    Timeout {
        /// The subject.
        subject: String,
        /// The wait, ms.
        timeout_ms: u64,
        /// The NATS server's last error on this connection (a permissions violation), if any.
        refused: Option<String>,
    },
    /// The NATS server refused the request's publish or its reply subscription (a permissions
    /// violation, reported as soon as the server sends it rather than after the timeout).
    #[error("the NATS server refused this request on {subject}{}", refused_hint(&Some(.message.clone())))]
    Refused {
        /// The subject.
        subject: String,
        /// The server's error.
        message: String,
    },
    /// The answer was not what the protocol says.
    #[error("unreadable answer on {subject}: {message}")]
    BadReply {
        /// The subject.
        subject: String,
        /// The decoding error.
        message: String,
    },
    /// The request is larger than the NATS server accepts (its `max_payload`).
    #[error(
        "the {op} request is {size} bytes, more than the NATS server's max_payload of {max} bytes: make the workflow smaller (or split it), or raise max_payload in the server's configuration"
    )]
    TooLarge {
        /// The operation.
        op: String,
        /// The encoded request, bytes.
        size: usize,
        /// The server's limit, bytes.
        max: usize,
    },
    /// A setting is not valid (e.g. the user name).
    #[error("{0}")]
    Invalid(String),
    /// Publishing or subscribing failed.
    #[error("NATS error on {subject}: {message}")]
    Nats {
        /// The subject.
        subject: String,
        /// The client's error.
        message: String,
    },
}

/// What a timeout adds when the server refused something on the connection: its error and,
/// for a permissions violation, what usually causes it.
fn refused_hint(refused: &Option<String>) -> String {
    let Some(e) = refused else {
        return String::new();
    };
    let hint = if e.contains("Subscription") && e.contains("_INBOX") {
        " (your NATS user may not read this reply inbox: the inbox prefix is _INBOX_<NATS user> (--nats-user, else -u), else _INBOX; pass --nats-inbox-prefix with the one your NATS permissions allow)"
    } else if e.contains("Publish") && e.contains(".operator.") {
        " (only operators may drain or undrain clusters: your NATS user may not send operator requests; the shipped NATS configurations give that right to the `ops` user alone)"
    } else if e.contains("Publish") && e.contains(".coordinator.") {
        " (your NATS user may not send requests under this name: -u must be your NATS user)"
    } else {
        ""
    };
    format!(": the NATS server refused this client: {e}{hint}")
}

/// Whether a server error is a refusal of this client's publish or subscription.
fn is_refusal(e: &str) -> bool {
    e.to_ascii_lowercase().contains("permissions violation")
}

/// A connected CLI client.
pub struct Client {
    /// The NATS connection.
    pub nats: async_nats::Client,
    /// Subjects.
    pub subjects: Subjects,
    /// The user identity token of the subjects.
    pub user: String,
    /// Per-call timeout.
    pub timeout: Duration,
    url: String,
    errors: ServerErrors,
}

impl Client {
    /// Connects to NATS as `user` with `auth`.
    ///
    /// Errors: [`ClientError::Connect`] with the server's URL (credentials redacted).
    pub async fn connect(auth: &NatsAuth, prefix: &str, user: &str, timeout: Duration) -> Result<Client, ClientError> {
        let (nats, errors) = connect_watching(&format!("fedvol cli {user}"), auth)
            .await
            .map_err(|e| ClientError::Connect(e.to_string()))?;
        Ok(Client {
            nats,
            subjects: Subjects::new(prefix),
            user: user.to_string(),
            timeout,
            url: redact_url(&auth.url),
            errors,
        })
    }

    /// Sends `req` to the coordinators' endpoint `E` and decodes the one answer: the reply, or
    /// the [`Failure`] a coordinator answered with instead.
    ///
    /// Errors: a body over the server's `max_payload` ([`ClientError::TooLarge`], nothing is
    /// sent), no coordinator, timeout, unreadable answer, NATS failure.
    pub async fn call<E: CoordinatorEndpoint>(
        &self,
        req: &E::Request,
    ) -> Result<Result<E::Reply, Failure>, ClientError> {
        self.call_inner::<E>(req, self.timeout, false).await
    }

    /// [`Client::call`] for a long poll (`changes`, answered only when something changed or at
    /// its own wait): waits up to `timeout` instead of the client's timeout, and gives up as
    /// soon as the client has reconnected to NATS meanwhile (the request or its answer went
    /// with the old connection), so that the caller asks again at once.
    ///
    /// Errors: as [`Client::call`]; [`ClientError::Nats`] after a reconnect.
    pub async fn call_within<E: CoordinatorEndpoint>(
        &self,
        req: &E::Request,
        timeout: Duration,
    ) -> Result<Result<E::Reply, Failure>, ClientError> {
        self.call_inner::<E>(req, timeout, true).await
    }

    /// One call through [`fedvol_proto::rpc::call`] (its own inbox, the `max_payload` check,
    /// "no responders", the typed answer), ended early by a refusal of this client by the NATS
    /// server and, for `end_on_reconnect`, by a reconnect; its errors in the CLI's words.
    async fn call_inner<E: CoordinatorEndpoint>(
        &self,
        req: &E::Request,
        timeout: Duration,
        end_on_reconnect: bool,
    ) -> Result<Result<E::Reply, Failure>, ClientError> {
        let connects = || {
            self.nats
                .statistics()
                .connects
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let connection = connects();
        let subject = self.subjects.coordinator(E::OP, &self.user);
        // Refusals come back asynchronously; one sent after this point is this request's (the
        // CLI's connection carries nothing else), and ends the wait at once.
        let mut refusals = self.errors.watch();
        let refused = async {
            loop {
                if refusals.changed().await.is_err() {
                    // The connection is gone with its error watcher: only the timeout is left.
                    std::future::pending::<()>().await;
                }
                if let Some(e) = refusals.borrow_and_update().clone()
                    && is_refusal(&e)
                {
                    return e;
                }
            }
        };
        let answer = tokio::select! {
            a = rpc::call::<E>(&self.nats, &subject, req, timeout, "client") => a,
            message = refused => return Err(ClientError::Refused { subject, message }),
            _ = async {
                loop {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if connects() != connection {
                        return;
                    }
                }
            }, if end_on_reconnect => {
                return Err(ClientError::Nats {
                    subject,
                    message: "the NATS connection was re-established while waiting for the answer".into(),
                });
            }
        };
        answer.map_err(|e| match e {
            RpcError::NoResponders(subject) => ClientError::NoCoordinator {
                subject,
                url: self.url.clone(),
            },
            RpcError::TimedOut { subject, ms } => ClientError::Timeout {
                subject,
                timeout_ms: u64::try_from(ms).unwrap_or(u64::MAX),
                refused: self.errors.last(),
            },
            RpcError::Nats { subject, message } => ClientError::Nats { subject, message },
            RpcError::TooLarge { what, size, max } => ClientError::TooLarge { op: what, size, max },
            RpcError::BadAnswer { subject, message } => ClientError::BadReply { subject, message },
        })
    }
}
