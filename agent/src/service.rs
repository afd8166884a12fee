//! The agent's NATS service: one queue group per cluster (`agent.<cluster>`, so replicas share
//! the load and each cluster answers a broadcast once), registered with the NATS service API as
//! `fedvol-agent` with the cluster in its metadata, serving every [`AgentOp`] (one module each
//! in [`crate::endpoints`]).
//!
//! Around each handler, [`fedvol_proto::serve::answer`] refuses bodies over `maxBodyBytes`
//! and malformed ones (`bad_request`, nothing changes), drops requests past their deadline,
//! and replaces an answer over the server's `max_payload` with `reply_too_large`. State changes
//! go through one lock ([`Core`]) and reach the disk before the reply ([`crate::shared::durable`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;

use fedvol_obs::Outcome;
use fedvol_proto::agent::{self as ops, AgentOp};
use fedvol_proto::serve::{Server, answer};
use fedvol_proto::subjects::AGENT_SERVICE;
use fedvol_proto::{Endpoint, Failure, Subjects};

use crate::endpoints;
use crate::shared::Shared;

/// The handler of a request did not run (see `add`).
const NOT_RUN: u8 = u8::MAX;

/// An endpoint's handler: the decoded, checked, in-time request in; `None` (drop), the reply, or
/// a failure out.
pub type Handler<E> =
    fn(Arc<Shared>, <E as Endpoint>::Request) -> BoxFuture<'static, Option<Result<<E as Endpoint>::Reply, Failure>>>;

/// Whether a reply says its action did not take effect (counted as outcome `refused`).
pub type Refused<E> = fn(&<E as Endpoint>::Reply) -> bool;

/// The replies of endpoints with no action to refuse: never.
fn never<R>(_: &R) -> bool {
    false
}

/// An action's reply (`commit`, `release`, `complete`) with `ok: false`.
fn not_ok(r: &ops::ActionReply) -> bool {
    !r.ok
}

/// Registers endpoint `E` as `name` on `subject` and serves it from a task, each request in a
/// task of its own (a slow commit never holds up a plan). A reply `refused` judges refused is
/// counted with outcome `refused`, not `ok`.
///
/// Errors: the endpoint could not be registered.
async fn add<E: Endpoint>(
    service: &async_nats::service::Service,
    client: &async_nats::Client,
    shared: &Arc<Shared>,
    (name, subject): (&'static str, String),
    handler: Handler<E>,
    refused: Refused<E>,
) -> Result<tokio::task::JoinHandle<()>, async_nats::Error> {
    let mut endpoint = service.endpoint_builder().name(name).add(subject.clone()).await?;
    tracing::info!(endpoint = name, subject = %subject, queue = %Subjects::agent_queue(&shared.cluster), "serving");
    let (shared, client) = (shared.clone(), client.clone());
    Ok(tokio::spawn(async move {
        while let Some(request) = endpoint.next().await {
            let (shared, client) = (shared.clone(), client.clone());
            let permit = shared.admission.clone().try_acquire_owned();
            tokio::spawn(async move {
                let server = Server {
                    speaker: "agent",
                    cluster: Some(&shared.cluster),
                    max_body_bytes: shared.max_body_bytes,
                    max_payload: client.max_payload(),
                    too_large_hint: "raise max_payload in the NATS server's configuration",
                };
                let started = std::time::Instant::now();
                let Ok(_permit) = permit else {
                    shared.metrics.request(name, Outcome::Overloaded, started.elapsed());
                    tracing::warn!(
                        endpoint = name,
                        limit = shared.max_in_flight,
                        "overloaded: request refused"
                    );
                    let body = fedvol_proto::serve::overloaded::<E>(&server, shared.max_in_flight);
                    if let Err(e) = request.respond(Ok(body)).await {
                        tracing::warn!(error = %e, endpoint = name, "reply could not be sent");
                    }
                    return;
                };
                let payload = request.message.payload.clone();
                // What the handler returned, if it ran (the serve layer refuses or drops some
                // requests before it): read after the answer, for the request's outcome.
                let ran = std::sync::atomic::AtomicU8::new(NOT_RUN);
                let body = answer::<E, _, _>(&server, &payload, |req| {
                    let work = handler(shared.clone(), req);
                    let ran = &ran;
                    async move {
                        let result = work.await;
                        let seen = match &result {
                            Some(Ok(reply)) if refused(reply) => Outcome::Refused,
                            _ => Outcome::of_answer(&result),
                        };
                        ran.store(seen as u8, std::sync::atomic::Ordering::Relaxed);
                        result
                    }
                })
                .await;
                let outcome = match (ran.load(std::sync::atomic::Ordering::Relaxed), &body) {
                    (NOT_RUN, Some(_)) => Outcome::BadRequest,
                    (NOT_RUN, None) => Outcome::Dropped,
                    (seen, _) => Outcome::ALL.get(usize::from(seen)).copied().unwrap_or(Outcome::Ok),
                };
                shared.metrics.request(name, outcome, started.elapsed());
                if let Some(body) = body
                    && let Err(e) = request.respond(Ok(body)).await
                {
                    tracing::warn!(error = %e, endpoint = name, "reply could not be sent");
                }
            });
        }
    }))
}

/// Registers the service and serves until the client closes. Returns when every endpoint
/// stream ends.
///
/// Errors: the service or an endpoint could not be registered.
pub async fn serve(
    client: async_nats::Client,
    subjects: &Subjects,
    shared: Arc<Shared>,
) -> Result<(), async_nats::Error> {
    use async_nats::service::ServiceExt;
    shared
        .max_payload
        .store(client.max_payload(), std::sync::atomic::Ordering::Relaxed);
    let cluster = shared.cluster.clone();
    let service = client
        .service_builder()
        .description(format!("fedvol agent of cluster {cluster}"))
        .metadata(HashMap::from([("cluster".to_string(), cluster.clone())]))
        .queue_group(Subjects::agent_queue(&cluster))
        .start(AGENT_SERVICE, env!("CARGO_PKG_VERSION"))
        .await?;
    let on = |op: AgentOp| subjects.cluster(&cluster, op);
    let (s, c, sh) = (&service, &client, &shared);
    let tasks = vec![
        add::<ops::Plan>(
            s,
            c,
            sh,
            ("plan", subjects.plan()),
            |s, r| Box::pin(endpoints::plan::handle(s, r)),
            never,
        )
        .await?,
        add::<ops::Plan>(
            s,
            c,
            sh,
            ("cluster_plan", on(AgentOp::Plan)),
            |s, r| Box::pin(endpoints::plan::handle(s, r)),
            never,
        )
        .await?,
        add::<ops::Commit>(
            s,
            c,
            sh,
            ("commit", on(AgentOp::Commit)),
            |s, r| Box::pin(endpoints::commit::handle(s, r)),
            not_ok,
        )
        .await?,
        add::<ops::Release>(
            s,
            c,
            sh,
            ("release", on(AgentOp::Release)),
            |s, r| Box::pin(endpoints::release::handle(s, r)),
            not_ok,
        )
        .await?,
        add::<ops::Complete>(
            s,
            c,
            sh,
            ("complete", on(AgentOp::Complete)),
            |s, r| Box::pin(endpoints::complete::handle(s, r)),
            not_ok,
        )
        .await?,
        add::<ops::WhyNot>(
            s,
            c,
            sh,
            ("why_not", on(AgentOp::WhyNot)),
            |s, r| Box::pin(endpoints::why_not::handle(s, r)),
            never,
        )
        .await?,
        add::<ops::Status>(
            s,
            c,
            sh,
            ("status", on(AgentOp::Status)),
            |s, r| Box::pin(endpoints::status::handle(s, r)),
            never,
        )
        .await?,
        add::<ops::Inventory>(
            s,
            c,
            sh,
            ("inventory", on(AgentOp::Inventory)),
            |s, r| Box::pin(endpoints::inventory::handle(s, r)),
            never,
        )
        .await?,
        add::<ops::Restored>(
            s,
            c,
            sh,
            ("restored", on(AgentOp::Restored)),
            |s, r| Box::pin(endpoints::restored::handle(s, r)),
            never,
        )
        .await?,
        add::<ops::Jobs>(
            s,
            c,
            sh,
            ("jobs", on(AgentOp::Jobs)),
            |s, r| Box::pin(endpoints::jobs::handle(s, r)),
            never,
        )
        .await?,
        add::<ops::Answer>(
            s,
            c,
            sh,
            ("answer", on(AgentOp::Answer)),
            |s, r| Box::pin(endpoints::answer::handle(s, r)),
            never,
        )
        .await?,
    ];
    // Make sure the server has every subscription before anyone is told we are ready.
    client.flush().await?;
    shared.readiness.ready_when(ready_check(client.clone()));
    tracing::info!(cluster = %cluster, "endpoints ready");
    shared.restore.serving();
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

/// The agent's readiness once it serves: connected to NATS. (Its inventory is loaded before it
/// serves, and a refused reload keeps the previous one, so it always has one.)
fn ready_check(client: async_nats::Client) -> fedvol_obs::ready::ReadyCheck {
    Arc::new(move || {
        let up = fedvol_obs::ready::nats_connected(&client);
        Box::pin(async move { up })
    })
}
