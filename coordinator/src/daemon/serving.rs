//! Serving the coordinator's operations: each request admitted within `maxInFlight` and its
//! user's `maxInFlightPerUser` (or answered `overloaded` unread), handled in its own task
//! under a `request` span, dispatched to its operation ([`super::ops::dispatch`]), counted in
//! the request metrics, and answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use async_nats::Message;
use tracing::Instrument;

use fedvol_obs::Outcome;
use fedvol_proto::Failure;
use fedvol_proto::coordinator::CoordinatorOp;

use super::Coordinator;
use super::answer::NOT_RUN;

/// How many times `client` has connected (a reconnect changes it).
pub(crate) fn connects(client: &async_nats::Client) -> u64 {
    client.statistics().connects.load(Ordering::Relaxed)
}

/// The user of a request: its subject's last token.
pub(crate) fn user_of(m: &Message) -> String {
    m.subject.rsplit('.').next().unwrap_or_default().to_string()
}

/// What admitting a request holds while it is served: a place among `maxInFlight` and one
/// among its user's `maxInFlightPerUser`.
/// A request's admission: its permit, and its slot among its user's requests (none for a
/// `changes` long poll, which waits rather than works).
pub(crate) type Admitted = (tokio::sync::OwnedSemaphorePermit, Option<super::per_user::Slot>);

/// Admits a request of `user` within `maxInFlightPerUser` ([`super::per_user`]) and
/// `maxInFlight`; the refusal's message otherwise.
///
/// A `changes` long poll is admitted within [`super::MAX_WATCHERS`] instead: it holds no work
/// while it waits, and must not keep submits out.
pub(crate) fn admit(co: &Arc<Coordinator>, op: CoordinatorOp, user: &str) -> Result<Admitted, String> {
    if op == CoordinatorOp::Changes {
        return match co.watchers.clone().try_acquire_owned() {
            Ok(permit) => Ok((permit, None)),
            Err(_) => {
                let limit = super::MAX_WATCHERS;
                tracing::warn!(limit, "overloaded: watch refused");
                Err(format!(
                    "{limit} watches are waiting on this coordinator, its limit: ask again later"
                ))
            }
        };
    }
    let per_user = co.cfg.max_in_flight_per_user;
    let Some(slot) = co.per_user.admit(user, per_user) else {
        tracing::debug!(
            user,
            limit = per_user,
            "overloaded: a user's request refused (maxInFlightPerUser)"
        );
        return Err(super::per_user::refusal(user, per_user));
    };
    match co.admission.clone().try_acquire_owned() {
        Ok(permit) => Ok((permit, Some(slot))),
        Err(_) => {
            let limit = co.cfg.max_in_flight;
            tracing::warn!(limit, "overloaded: request refused");
            Err(format!(
                "{limit} requests are in progress, this coordinator's limit (maxInFlight): ask again later"
            ))
        }
    }
}

/// Answers request `m` of operation `op` with `overloaded` and `message`, reading nothing of
/// its body.
async fn refuse(co: &Coordinator, op: CoordinatorOp, m: Message, message: String) {
    let f = Failure::new(fedvol_proto::Code::Overloaded, message);
    let body = op.encode_failure(&f);
    if let Some(reply) = m.reply
        && let Err(e) = co.client.publish(reply, body).await
    {
        tracing::warn!(error = %e, "the answer could not be sent");
    }
}

/// Answers one request of operation `op` (in a `request` span naming the operation, the user
/// and, once known, the request id).
pub(crate) async fn handle(co: Arc<Coordinator>, op: CoordinatorOp, m: Message, admitted: Result<Admitted, String>) {
    let started = std::time::Instant::now();
    let connection = connects(&co.client);
    let user = user_of(&m);
    let span = tracing::info_span!("request", op = %op.name(), user = %fedvol_common::limits::printable(&user), request_id = tracing::field::Empty);
    async move {
        let _admitted = match admitted {
            Ok(a) => a,
            Err(message) => {
                co.metrics.request(op.name(), Outcome::Overloaded, started.elapsed());
                refuse(&co, op, m, message).await;
                return;
            }
        };
        // What the handler returned, if it ran; and whether a submit's reply carried an error.
        let ran = AtomicU8::new(NOT_RUN);
        let submit_failed = std::sync::atomic::AtomicBool::new(false);
        let (r, failed) = (&ran, &submit_failed);
        let body = super::ops::dispatch(&co, op, &user, &m.payload, r, failed).await;
        let outcome = match (ran.load(Ordering::Relaxed), &body) {
            (NOT_RUN, Some(_)) => Outcome::BadRequest,
            (NOT_RUN, None) => Outcome::Dropped,
            _ if submit_failed.load(Ordering::Relaxed) => Outcome::Error,
            (seen, _) => Outcome::ALL.get(usize::from(seen)).copied().unwrap_or(Outcome::Ok),
        };
        co.metrics.request(op.name(), outcome, started.elapsed());
        match (body, m.reply) {
            // A `changes` long poll that came on an earlier connection (the server restarted
            // or the link broke while it waited): under `allow_responses` the server lets a
            // reply go only to a request it delivered on this connection (NATS docs:
            // Authorization, allow_responses), so the answer would be refused, and the CLI
            // asks again after its own reconnect anyway. Other answers are still sent: without
            // reply permissions they reach a requester whose inbox came back with it.
            (Some(_), Some(_)) if op == CoordinatorOp::Changes && connects(&co.client) != connection => {
                tracing::debug!("answer dropped: the request came on an earlier NATS connection")
            }
            (Some(body), Some(reply)) => {
                if let Err(e) = co.client.publish(reply, body).await {
                    tracing::warn!(error = %e, "the answer could not be sent");
                }
            }
            (Some(_), None) => tracing::debug!("request without a reply subject: answered to nobody"),
            (None, _) => {}
        }
    }
    .instrument(span)
    .await
}
