//! `external`: an out-of-tree provisioner named `vendor/name` (the Kubernetes volume provisioning design), reached by NATS
//! request/reply on `<prefix>.provisioner.<cluster>.<name as token>.{provision,delete}` with
//! JSON [`ProvisionMsg`] / [`DeleteMsg`] bodies answered by a [`ProvisionerReply`].
//!
//! Each attempt uses a fresh inbox subscription, publishes with that inbox as the reply
//! subject and waits up to the attempt timeout (cut short by the request's deadline); the
//! subscription is dropped (unsubscribed) whatever happens, so nothing is left behind by an
//! attempt that timed out. Timeouts, "no responders" (status 503) and transport errors are
//! retried with exponential backoff; a refusal (`ok: false`) is final.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use async_nats::{Client, StatusCode};
use bytes::Bytes;
use fedvol_common::decision::NewVolume;
use fedvol_proto::Endpoint as _;
use fedvol_proto::provisioner::{Delete, DeleteMsg, Provision, ProvisionMsg, ProvisionerReply};
use futures::StreamExt;

use super::secrets::Redacted;
use super::{Created, DriverError, RetryPolicy};

/// Where and how to ask one external provisioner.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint<'a> {
    /// The NATS connection.
    pub client: &'a Client,
    /// The provisioner's `vendor/name`.
    pub provisioner: &'a str,
    /// The provision subject (`...provision`).
    pub provision_subject: &'a str,
    /// The delete subject (`...delete`).
    pub delete_subject: &'a str,
    /// Attempts, backoff and per-attempt timeout.
    pub policy: RetryPolicy,
}

/// Why one attempt got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AttemptError {
    /// Nobody subscribes to the subject (the server's 503 status).
    NoResponders,
    /// The request was delivered (or may have been) but no answer came within this many ms.
    Timeout(u128),
    /// Subscribing or publishing failed, or the connection closed.
    Transport(String),
    /// The answer was not a provisioner reply.
    BadReply(String),
}

impl AttemptError {
    /// True when a provisioner may have received the request (and so may have acted on it).
    fn maybe_delivered(&self) -> bool {
        matches!(self, AttemptError::Timeout(_) | AttemptError::BadReply(_))
    }
}

impl fmt::Display for AttemptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptError::NoResponders => f.write_str("no responders: nothing subscribes to the subject"),
            AttemptError::Timeout(ms) => write!(f, "no answer within {ms} ms"),
            AttemptError::Transport(e) => write!(f, "transport error: {e}"),
            AttemptError::BadReply(e) => write!(f, "unreadable reply: {e}"),
        }
    }
}

/// Every attempt failed.
struct Exhausted {
    attempts: u32,
    elapsed: Duration,
    last: AttemptError,
    delivered: bool,
    deadline_cut: bool,
}

/// One request/reply exchange: fresh inbox, publish, wait up to `wait`.
async fn attempt(
    client: &Client,
    subject: &str,
    payload: Bytes,
    wait: Duration,
) -> Result<ProvisionerReply, AttemptError> {
    let inbox = client.new_inbox();
    let mut sub = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| AttemptError::Transport(e.to_string()))?;
    client
        .publish_with_reply(subject.to_string(), inbox, payload)
        .await
        .map_err(|e| AttemptError::Transport(e.to_string()))?;
    let msg = match tokio::time::timeout(wait, sub.next()).await {
        Err(_) => return Err(AttemptError::Timeout(wait.as_millis())),
        Ok(None) => return Err(AttemptError::Transport("the connection closed the subscription".into())),
        Ok(Some(m)) => m,
    };
    // `sub` drops here, which unsubscribes the inbox.
    match msg.status {
        Some(StatusCode::NO_RESPONDERS) => Err(AttemptError::NoResponders),
        Some(s) if !s.is_success() => Err(AttemptError::Transport(format!(
            "status {} {}",
            s.as_u16(),
            msg.description.as_deref().unwrap_or("")
        ))),
        // Both operations answer with a `ProvisionerReply`.
        _ => match Provision::decode_reply(&msg.payload, "agent") {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(failure)) => Err(AttemptError::BadReply(failure.to_string())),
            Err(e) => Err(AttemptError::BadReply(e.to_string())),
        },
    }
}

/// Time left before `deadline_ms` (ms since the epoch); `None` when there is no deadline (0).
fn remaining(deadline_ms: u64) -> Option<Duration> {
    (deadline_ms != 0).then(|| Duration::from_millis(deadline_ms.saturating_sub(fedvol_proto::now_ms())))
}

/// Attempts until an answer, the attempt budget or the deadline. Returns the reply and the
/// number of the attempt that got it.
async fn exchange(
    ep: &Endpoint<'_>,
    subject: &str,
    payload: Bytes,
    request_id: &str,
    deadline_ms: u64,
) -> Result<(ProvisionerReply, u32), Exhausted> {
    let start = Instant::now();
    let max = ep.policy.max_attempts();
    let per_attempt = Duration::from_millis(ep.policy.attempt_timeout_ms);
    let mut delivered = false;
    let mut last = AttemptError::Timeout(0);
    let mut n = 0;
    loop {
        let left = remaining(deadline_ms);
        if left.is_some_and(|l| l.is_zero()) {
            return Err(Exhausted {
                attempts: n,
                elapsed: start.elapsed(),
                last,
                delivered,
                deadline_cut: true,
            });
        }
        let wait = left.map_or(per_attempt, |l| l.min(per_attempt));
        n += 1;
        match attempt(ep.client, subject, payload.clone(), wait).await {
            Ok(reply) => return Ok((reply, n)),
            Err(e) => {
                delivered |= e.maybe_delivered();
                let pause = ep.policy.backoff(n);
                let out_of_time = remaining(deadline_ms).is_some_and(|l| l <= pause);
                tracing::warn!(
                    request_id,
                    provisioner = ep.provisioner,
                    subject,
                    attempt = n,
                    of = max,
                    error = %e,
                    retry_in_ms = (n < max && !out_of_time).then_some(pause.as_millis() as u64),
                    "external provisioner attempt failed"
                );
                last = e;
                if n >= max || out_of_time {
                    return Err(Exhausted {
                        attempts: n,
                        elapsed: start.elapsed(),
                        last,
                        delivered,
                        deadline_cut: out_of_time && n < max,
                    });
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

fn failed(ep: &Endpoint<'_>, op: &str, subject: &str, x: &Exhausted, extra: &str) -> DriverError {
    if x.attempts == 0 {
        return DriverError::Failed(format!(
            "external provisioner {} was not asked to {op}: the request's deadline had passed before the first attempt",
            ep.provisioner
        ));
    }
    let cut = if x.deadline_cut {
        ", stopped by the request's deadline"
    } else {
        ""
    };
    // Nobody listening is the one failure with an obvious fix: say it.
    let hint = if x.last == AttemptError::NoResponders {
        format!(
            "; no provisioner serves {subject}: start the out-of-tree provisioner {} for this cluster \
             (see deploy/examples/external-provisioner/)",
            ep.provisioner
        )
    } else {
        String::new()
    };
    DriverError::Failed(format!(
        "external provisioner {} gave no answer to {op} on {subject}: {} attempt(s) of {} in {} ms{cut} \
         (last: {}){extra}{hint}",
        ep.provisioner,
        x.attempts,
        ep.policy.max_attempts(),
        x.elapsed.as_millis(),
        x.last
    ))
}

/// Asks the provisioner to create `v` with the storage class `parameters`. The reply's `source`
/// becomes [`Created::source`] (the volume name when the provisioner gives none); the message
/// names the attempt that succeeded ("attempt 3 of 4").
///
/// When every attempt failed after at least one may have reached the provisioner (timeouts), a
/// best-effort delete for the volume is published (request id `<request_id>.cleanup`, not
/// awaited) so that an asset created by a late answer does not leak.
///
/// Errors: `Refused` with the provisioner's reason when it answers `ok: false` (first answer,
/// no retry); `Failed` naming the attempts made when none was answered. Parameter values whose
/// key looks secret are never logged.
pub async fn provision(
    ep: &Endpoint<'_>,
    parameters: &BTreeMap<String, String>,
    v: &NewVolume,
    request_id: &str,
    deadline_ms: u64,
) -> Result<Created, DriverError> {
    let body = Provision::encode_request(&ProvisionMsg {
        request_id: request_id.to_string(),
        volume: v.clone(),
        parameters: parameters.clone(),
    });
    tracing::info!(
        request_id,
        provisioner = ep.provisioner,
        subject = ep.provision_subject,
        volume = %v.name,
        parameters = %Redacted(parameters),
        "asking external provisioner to provision"
    );
    match exchange(ep, ep.provision_subject, body, request_id, deadline_ms).await {
        Ok((reply, n)) if reply.ok => {
            let source = reply.source.filter(|s| !s.is_empty()).unwrap_or_else(|| v.name.clone());
            let message = format!(
                "external provisioner {} created {source} (attempt {n} of {})",
                ep.provisioner,
                ep.policy.max_attempts()
            );
            Ok(Created { source, message })
        }
        Ok((reply, _)) => Err(refused(ep, reply)),
        Err(x) => {
            let extra = if x.delivered {
                cleanup(ep, v, request_id).await;
                "; a cleanup delete was sent in case the volume was created late"
            } else {
                ""
            };
            Err(failed(ep, "provision", ep.provision_subject, &x, extra))
        }
    }
}

/// Asks the provisioner to delete `volume` of storage class `storage_class`.
///
/// Errors: `Refused` when it answers `ok: false`; `Failed` naming the attempts made when none
/// was answered.
pub async fn delete(
    ep: &Endpoint<'_>,
    storage_class: &str,
    volume: &str,
    request_id: &str,
    deadline_ms: u64,
) -> Result<String, DriverError> {
    let body = Delete::encode_request(&DeleteMsg {
        request_id: request_id.to_string(),
        volume: volume.to_string(),
        provisioner: storage_class.to_string(),
    });
    tracing::info!(
        request_id,
        provisioner = ep.provisioner,
        subject = ep.delete_subject,
        volume,
        "asking external provisioner to delete"
    );
    match exchange(ep, ep.delete_subject, body, request_id, deadline_ms).await {
        Ok((reply, n)) if reply.ok => Ok(format!(
            "external provisioner {} deleted {volume} (attempt {n} of {})",
            ep.provisioner,
            ep.policy.max_attempts()
        )),
        Ok((reply, _)) => Err(refused(ep, reply)),
        Err(x) => Err(failed(ep, "delete", ep.delete_subject, &x, "")),
    }
}

fn refused(ep: &Endpoint<'_>, reply: ProvisionerReply) -> DriverError {
    let why = reply
        .error
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "no reason given".into());
    DriverError::Refused(format!("{}: {why}", ep.provisioner))
}

/// Fire-and-forget delete after a provisioning that may have reached the provisioner but got
/// no answer; flushed (briefly) so it leaves before the caller moves on.
async fn cleanup(ep: &Endpoint<'_>, v: &NewVolume, request_id: &str) {
    let cleanup_id = format!("{request_id}.cleanup");
    let body = Delete::encode_request(&DeleteMsg {
        request_id: cleanup_id.clone(),
        volume: v.name.clone(),
        provisioner: v.provisioner.clone(),
    });
    let inbox = ep.client.new_inbox();
    let sent = ep
        .client
        .publish_with_reply(ep.delete_subject.to_string(), inbox, body)
        .await;
    let flushed = tokio::time::timeout(Duration::from_millis(500), ep.client.flush()).await;
    tracing::warn!(
        request_id,
        cleanup_request_id = %cleanup_id,
        provisioner = ep.provisioner,
        volume = %v.name,
        sent = sent.is_ok() && matches!(flushed, Ok(Ok(()))),
        "provisioning got no answer; sent a cleanup delete in case the volume was created late"
    );
}
