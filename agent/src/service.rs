//! The agent's NATS service: one queue group per cluster (`agent.<cluster>`, so replicas share
//! the load and each cluster answers a broadcast once), registered with the NATS service API as
//! `fedvol-agent` with the cluster in its metadata, serving every [`AgentOp`] (one module each
//! in [`crate::endpoints`]).
//!
//! Around each handler, [`fedvol_proto::serve::answer`] refuses bodies over `maxBodyBytes`
//! and malformed ones (`bad_request`, nothing changes), drops requests past their deadline,
//! and replaces an answer over the server's `max_payload` with `reply_too_large`. State changes
//! go through one lock ([`crate::state::Core`]) and reach the disk before the reply ([`crate::shared::durable`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;

use fedvol_obs::Outcome;
use fedvol_proto::agent::{self as ops, AgentOp};
use fedvol_proto::serve::{Server, answer};
use fedvol_proto::subjects::AGENT_SERVICE;
use fedvol_proto::{Endpoint, Failure, Subjects};

use crate::endpoints;
use crate::metrics::{BROADCAST_PLAN, endpoint_name};
use crate::shared::Shared;

/// The handler of a request did not run (see `Endpoints::add`).
const NOT_RUN: u8 = u8::MAX;

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

/// Where endpoints are registered: the agent's service, its client and its shared state.
struct Endpoints<'a> {
    service: &'a async_nats::service::Service,
    client: &'a async_nats::Client,
    shared: &'a Arc<Shared>,
}

impl Endpoints<'_> {
    /// Registers endpoint `E` as `name` on `subject` and serves it from a task, each request in
    /// a task of its own (a slow commit never holds up a plan), `handler` answering it. A reply
    /// `refused` judges refused is counted with outcome `refused`, not `ok`.
    ///
    /// Errors: the endpoint could not be registered.
    async fn add<E, F, Fut>(
        &self,
        (name, subject): (&'static str, String),
        handler: F,
        refused: Refused<E>,
    ) -> Result<tokio::task::JoinHandle<()>, async_nats::Error>
    where
        E: Endpoint,
        F: Fn(Arc<Shared>, E::Request) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = Option<Result<E::Reply, Failure>>> + Send + 'static,
    {
        let mut endpoint = self.service.endpoint_builder().name(name).add(subject.clone()).await?;
        tracing::info!(endpoint = name, subject = %subject, queue = %Subjects::agent_queue(&self.shared.cluster), "serving");
        let (shared, client) = (self.shared.clone(), self.client.clone());
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
}

/// Registers the service and serves until the client closes. Returns when every endpoint
/// stream ends.
///
/// Every [`AgentOp`] is registered through one `match` without a catch-all arm, so an
/// operation added to the table without a handler here does not compile.
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
    let at = |op: AgentOp| (endpoint_name(op), subjects.cluster(&cluster, op));
    let e = Endpoints {
        service: &service,
        client: &client,
        shared: &shared,
    };
    // The broadcast plan of earlier releases' coordinators (this release never sends it).
    let broadcast = e.add::<ops::Plan, _, _>((BROADCAST_PLAN, subjects.plan()), endpoints::plan::handle, never);
    let mut tasks = vec![broadcast.await?];
    for op in AgentOp::ALL {
        let task = match op {
            AgentOp::Plan => e.add::<ops::Plan, _, _>(at(op), endpoints::plan::handle, never).await?,
            AgentOp::Commit => {
                e.add::<ops::Commit, _, _>(at(op), endpoints::commit::handle, not_ok)
                    .await?
            }
            AgentOp::Release => {
                e.add::<ops::Release, _, _>(at(op), endpoints::release::handle, not_ok)
                    .await?
            }
            AgentOp::Complete => {
                e.add::<ops::Complete, _, _>(at(op), endpoints::complete::handle, not_ok)
                    .await?
            }
            AgentOp::WhyNot => {
                e.add::<ops::WhyNot, _, _>(at(op), endpoints::why_not::handle, never)
                    .await?
            }
            AgentOp::Status => {
                e.add::<ops::Status, _, _>(at(op), endpoints::status::handle, never)
                    .await?
            }
            AgentOp::Inventory => {
                e.add::<ops::Inventory, _, _>(at(op), endpoints::inventory::handle, never)
                    .await?
            }
            AgentOp::Restored => {
                e.add::<ops::Restored, _, _>(at(op), endpoints::restored::handle, never)
                    .await?
            }
            AgentOp::Jobs => e.add::<ops::Jobs, _, _>(at(op), endpoints::jobs::handle, never).await?,
            AgentOp::Answer => {
                e.add::<ops::Answer, _, _>(at(op), endpoints::answer::handle, never)
                    .await?
            }
        };
        tasks.push(task);
    }
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
