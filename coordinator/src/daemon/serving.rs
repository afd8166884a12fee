//! Serving the coordinator's operations: each request admitted within its user's
//! `maxInFlightPerUser` and `maxInFlight` (a `changes` long poll: the fair watch pool instead of
//! `maxInFlight`), or answered `overloaded` unread, handled in its own task
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
    user_of_subject(&m.subject)
}

fn user_of_subject(subject: &str) -> String {
    subject.rsplit('.').next().unwrap_or_default().to_string()
}

/// What admitting a request holds while it is served: a place among `maxInFlight` (none for a
/// `changes` long poll, which waits rather than works: it takes a place in the watch pool
/// instead), one among its user's `maxInFlightPerUser` (every request, long polls included).
pub(crate) struct Admitted {
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    _slot: super::per_user::Slot,
    /// A long poll's place in the watch pool ([`super::watchers`]).
    pub(crate) watch: Option<super::watchers::Watch>,
}

/// Writes a warning of `what` about `user`, at most once per [`super::LOG_EVERY`] per kind and
/// user, with how many were kept quiet since the last one written
/// ([`fedvol_obs::throttle`]); the others are counted and summed up by
/// [`spawn_quiet_summaries`].
pub(crate) fn warn_throttled(co: &Coordinator, what: &'static str, user: &str, detail: &str) {
    if let Some(quiet) = co.log_throttle.note(&(what, user.to_string())) {
        tracing::warn!(user = %fedvol_common::limits::printable(user), quiet, detail, "{what}");
    }
}

/// Every [`super::LOG_EVERY`], one line per kind and user whose warnings were kept quiet, with
/// their number.
pub(crate) fn spawn_quiet_summaries(co: Arc<Coordinator>) {
    tokio::spawn(async move {
        let every = co.log_throttle.interval();
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            for ((what, user), quiet) in co.log_throttle.take_quiet() {
                tracing::warn!(
                    user = %fedvol_common::limits::printable(&user),
                    quiet,
                    interval_s = every.as_secs(),
                    "{what} (repeated; {quiet} more in the last interval)"
                );
            }
        }
    });
}

/// Admits a request of `user` within its `maxInFlightPerUser` ([`super::per_user`]), then
/// within `maxInFlight`, or, for a `changes` long poll, within the watch pool (fair among
/// users: [`super::watchers`]); the refusal's message otherwise. Refusals are logged once per
/// interval per user ([`warn_throttled`]).
pub(crate) fn admit(co: &Arc<Coordinator>, op: CoordinatorOp, user: &str) -> Result<Admitted, String> {
    let per_user = co.cfg.max_in_flight_per_user;
    let Some(slot) = co.per_user.admit(user, per_user) else {
        let message = super::per_user::refusal(user, per_user);
        warn_throttled(
            co,
            "overloaded: a user's request refused (maxInFlightPerUser)",
            user,
            &message,
        );
        return Err(message);
    };
    if op == CoordinatorOp::Changes {
        return match co.watchers.admit(user) {
            Some(watch) => Ok(Admitted {
                _permit: None,
                _slot: slot,
                watch: Some(watch),
            }),
            None => {
                let limit = super::MAX_WATCHERS;
                let message = format!(
                    "{limit} watches are waiting on this coordinator, its limit, and user {} holds as many of them as anyone: ask again later",
                    fedvol_common::limits::printable(user)
                );
                warn_throttled(co, "overloaded: watch refused", user, &message);
                Err(message)
            }
        };
    }
    match co.admission.clone().try_acquire_owned() {
        Ok(permit) => Ok(Admitted {
            _permit: Some(permit),
            _slot: slot,
            watch: None,
        }),
        Err(_) => {
            let limit = co.cfg.daemon.max_in_flight;
            let message =
                format!("{limit} requests are in progress, this coordinator's limit (maxInFlight): ask again later");
            warn_throttled(co, "overloaded: request refused (maxInFlight)", user, &message);
            Err(message)
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
        warn_throttled(
            co,
            "the answer could not be sent",
            &user_of_subject(&m.subject),
            &e.to_string(),
        );
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
        let admitted = match admitted {
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
        let watch = admitted.watch.as_ref();
        let body = super::ops::dispatch(&co, op, &user, &m.payload, r, failed, watch).await;
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
                    warn_throttled(&co, "the answer could not be sent", &user, &e.to_string());
                }
            }
            (Some(_), None) => tracing::debug!("request without a reply subject: answered to nobody"),
            (None, _) => {}
        }
    }
    .instrument(span)
    .await
}
