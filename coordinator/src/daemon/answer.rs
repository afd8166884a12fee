//! Answering one request of one endpoint: the user token checked, the body decoded and
//! bounded ([`fedvol_proto::serve::answer`]), the handler's outcome noted for the request
//! metrics, and the request id recorded in the request's span. Below every operation's entry
//! point ([`super::ops::dispatch`]) and the serving loop ([`super::serving`]).

use std::sync::atomic::{AtomicU8, Ordering};

use bytes::Bytes;

use fedvol_obs::Outcome;
use fedvol_proto::serve::{Server, answer};
use fedvol_proto::{Endpoint, Failure};

use super::Coordinator;

/// The handler of a request did not run (see [`serve`]).
pub(crate) const NOT_RUN: u8 = u8::MAX;

/// Records the request id (user input: escaped, see [`fedvol_common::limits::printable`]) in the
/// current request span.
pub(crate) fn record_id(id: &str) {
    let shown = fedvol_common::limits::printable(&id.chars().take(256).collect::<String>());
    tracing::Span::current().record("request_id", tracing::field::display(shown));
}

/// Answers one request of endpoint `E` ([`fedvol_proto::serve::answer`]), after refusing a
/// user token that is not a valid user name (`bad_request`, the body unread). When the
/// handler runs, `ran` is set to the [`Outcome`] (as `u8`) of what it returned.
pub(crate) async fn serve<E, F, Fut>(
    co: &Coordinator,
    user: &str,
    payload: &[u8],
    ran: &AtomicU8,
    handler: F,
) -> Option<Bytes>
where
    E: Endpoint,
    F: FnOnce(E::Request) -> Fut,
    Fut: std::future::Future<Output = Option<Result<E::Reply, Failure>>>,
{
    if let Err(e) = fedvol_common::limits::check_user(user) {
        tracing::warn!(error = %e, "request refused unread");
        return Some(E::encode_failure(&Failure::bad_request(e.to_string())));
    }
    let server = Server {
        speaker: "coordinator",
        cluster: None,
        max_body_bytes: co.cfg.daemon.max_body_bytes,
        max_payload: co.client.max_payload(),
        too_large_hint: "the decision is stored: read it with `fedvol decisions watch`, or raise max_payload",
    };
    answer::<E, _, _>(&server, payload, |req| {
        let work = handler(req);
        async move {
            let result = work.await;
            let seen = Outcome::of_answer(&result);
            ran.store(seen as u8, Ordering::Relaxed);
            result
        }
    })
    .await
}
