//! Starting and running a coordinator: check the configuration, read the directory, connect,
//! open (creating if needed) the decision bucket, follow heartbeats, discover the agents that
//! are already up, then serve `<prefix>.coordinator.<op>.*` in queue group `coordinator`.
//!
//! Every request runs in its own task under a `request` span carrying the operation, the user
//! (the subject's last token) and the request id, so every log line names them. SIGHUP
//! re-reads the directory (a bad file is logged and the old one kept).

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_nats::Message;
use bytes::Bytes;
use futures::StreamExt;
use tracing::Instrument;

use fedvol_common::decision::Reason;
use fedvol_common::wire::{
    DecisionRef, Heartbeat, Subjects, SubmitMsg, SubmitReply, VERSION, WhyNotQuery, now_ms, ops,
};

use super::codec::{codes, decode, decode_optional, error_body, to_bytes};
use super::config::CoordinatorConfig;
use super::directory::Directory;
use super::registry::Registry;
use super::rpc::is_no_responders;
use super::store::DecisionStore;
use super::submit::{error_reply, submit};
use super::{Coordinator, ops as op_handlers};

/// The service name agents register under (service API discovery).
pub const AGENT_SERVICE: &str = "fedvol-agent";

/// Why the coordinator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is inconsistent.
    #[error("invalid configuration:\n  {}", .0.join("\n  "))]
    Config(Vec<String>),
    /// The directory file has errors.
    #[error("directory {path} is invalid:\n{diagnostics}")]
    Directory {
        /// The file.
        path: String,
        /// Every problem.
        diagnostics: fedvol_common::yaml::Diagnostics,
    },
    /// NATS could not be reached, or a subscription failed.
    #[error("{0}")]
    Nats(String),
    /// The decision bucket could not be created or opened (is JetStream enabled?).
    #[error("{0} (the coordinator needs JetStream: start nats-server with -js)")]
    Store(String),
}

fn load_directory(cfg: &CoordinatorConfig) -> Result<Option<Directory>, StartError> {
    match &cfg.directory {
        None => Ok(None),
        Some(p) => Directory::load(p).map(Some).map_err(|d| StartError::Directory {
            path: p.display().to_string(),
            diagnostics: d,
        }),
    }
}

/// Runs the coordinator until SIGINT or SIGTERM.
///
/// Errors: any [`StartError`] before serving begins, or a subscription that fails.
pub async fn run(cfg: CoordinatorConfig) -> Result<(), StartError> {
    cfg.validate().map_err(StartError::Config)?;
    let directory = load_directory(&cfg)?;
    match &directory {
        Some(d) => tracing::info!(users = d.len(), "directory loaded: groups come from it"),
        None => tracing::warn!(
            "no directory configured: DEV MODE, the groups clients claim are trusted; configure `directory:` in production"
        ),
    }
    let client = fedvol_agent::nats::connect("fedvol-coordinator", &cfg.nats)
        .await
        .map_err(|e| StartError::Nats(e.to_string()))?;
    let js = async_nats::jetstream::new(client.clone());
    let store = DecisionStore::open(&js, &cfg.kv)
        .await
        .map_err(|e| StartError::Store(e.to_string()))?;
    tracing::info!(bucket = %cfg.kv.bucket, history = cfg.kv.history, replicas = cfg.kv.replicas, "decision store open");
    let co = Arc::new(Coordinator {
        client: client.clone(),
        subjects: Subjects::new(&cfg.subject_prefix),
        cfg: cfg.clone(),
        store,
        registry: Mutex::new(Registry::new()),
        directory: RwLock::new(directory),
    });

    follow_heartbeats(&co).await?;
    discover(&co).await;

    let mut tasks = Vec::new();
    for op in [
        ops::SUBMIT,
        ops::COMPLETE,
        ops::WHY_NOT,
        ops::CLUSTERS,
        ops::LIST,
        ops::GET,
        ops::REPLAY,
    ] {
        let subject = co.subjects.coordinator_all(op);
        let mut sub = client
            .queue_subscribe(subject.clone(), Subjects::COORDINATOR_QUEUE.to_string())
            .await
            .map_err(|e| StartError::Nats(format!("cannot subscribe to {subject}: {e}")))?;
        let co = co.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                tokio::spawn(handle(co.clone(), op, m));
            }
        }));
    }
    client
        .flush()
        .await
        .map_err(|e| StartError::Nats(format!("cannot reach NATS: {e}")))?;
    tracing::info!(
        prefix = %cfg.subject_prefix,
        queue = Subjects::COORDINATOR_QUEUE,
        clusters = ?co.registry().names(),
        "coordinator ready"
    );
    reload_on_hup(&co, cfg);
    wait_for_stop().await;
    tracing::info!("stopping: in-flight requests are finished first");
    if let Err(e) = client.drain().await {
        tracing::warn!(error = %e, "drain failed");
    }
    for t in tasks {
        t.abort();
    }
    Ok(())
}

async fn wait_for_stop() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn reload_on_hup(co: &Arc<Coordinator>, cfg: CoordinatorConfig) {
    let co = co.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; the directory is read only at start-up");
            return;
        };
        while hup.recv().await.is_some() {
            match load_directory(&cfg) {
                Ok(d) => {
                    let users = d.as_ref().map_or(0, Directory::len);
                    *co.directory.write().unwrap_or_else(|p| p.into_inner()) = d;
                    tracing::info!(users, "SIGHUP: directory reloaded");
                }
                Err(e) => tracing::error!(error = %e, "SIGHUP: directory reload refused; the previous one stays"),
            }
        }
    });
}

/// Subscribes to every heartbeat and feeds the registry from a task that drains the
/// subscription at once (a full buffer would drop messages silently).
async fn follow_heartbeats(co: &Arc<Coordinator>) -> Result<(), StartError> {
    let subject = co.subjects.heartbeats();
    let mut sub = co
        .client
        .subscribe(subject.clone())
        .await
        .map_err(|e| StartError::Nats(format!("cannot subscribe to {subject}: {e}")))?;
    let co = co.clone();
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            match decode::<Heartbeat>(&m.payload, "heartbeat") {
                // The subject is what NATS permissions tie to the agent's credentials: a
                // heartbeat naming another cluster in its body is a spoof.
                Ok(hb) if m.subject.rsplit('.').next() != Some(hb.cluster.as_str()) => tracing::warn!(
                    subject = %m.subject,
                    claimed = %hb.cluster.chars().take(80).collect::<String>(),
                    "a heartbeat naming another cluster than its subject: ignored"
                ),
                Ok(hb) => co.registry().heartbeat(&hb, now_ms()),
                Err(e) => tracing::debug!(subject = %m.subject, error = %e, "unreadable heartbeat ignored"),
            }
        }
    });
    Ok(())
}

/// Asks the NATS service API for every running `fedvol-agent` (`$SRV.INFO.fedvol-agent`) and
/// registers each one's cluster (service metadata `cluster`), waiting at most `discoveryMs`.
pub async fn discover(co: &Arc<Coordinator>) {
    let subject = format!("$SRV.INFO.{AGENT_SERVICE}");
    let inbox = co.client.new_inbox();
    let Ok(mut sub) = co.client.subscribe(inbox.clone()).await else {
        return;
    };
    if co
        .client
        .publish_with_reply(subject, inbox, Bytes::new())
        .await
        .is_err()
    {
        return;
    }
    let end = tokio::time::Instant::now() + Duration::from_millis(co.cfg.discovery_ms);
    let mut found = 0;
    while let Ok(Some(m)) = tokio::time::timeout_at(end, sub.next()).await {
        if is_no_responders(&m) {
            break;
        }
        match serde_json::from_slice::<async_nats::service::Info>(&m.payload) {
            Ok(info) => match info.metadata.get("cluster") {
                Some(c) if !fedvol_common::limits::is_token(c) => {
                    tracing::warn!(id = %info.id, "an agent whose cluster name is not a subject token ignored")
                }
                Some(c) => {
                    co.registry().discovered(c, &info.id, now_ms());
                    found += 1;
                }
                None => tracing::debug!(id = %info.id, "an agent without cluster metadata ignored"),
            },
            Err(e) => tracing::debug!(error = %e, "unreadable service info ignored"),
        }
    }
    tracing::info!(agents = found, clusters = ?co.registry().names(), "discovery done");
}

#[derive(serde::Deserialize)]
struct NoArgs {}

/// The user of a request: its subject's last token.
fn user_of(m: &Message) -> String {
    m.subject.rsplit('.').next().unwrap_or_default().to_string()
}

fn bad(message: String) -> Reason {
    Reason::new(codes::BAD_REQUEST, message)
}

/// The error answer of operation `op`, in that operation's reply shape (so the CLI prints the
/// reason whatever it asked).
pub fn refusal(op: &str, reason: Reason) -> Bytes {
    match op {
        ops::SUBMIT | ops::COMPLETE | ops::GET => to_bytes(&SubmitReply {
            v: VERSION,
            stored: None,
            error: Some(reason),
        }),
        ops::REPLAY => to_bytes(&fedvol_common::wire::ReplayReply {
            v: VERSION,
            identical: false,
            differences: Vec::new(),
            replayed: None,
            error: Some(reason),
        }),
        ops::WHY_NOT => to_bytes(&fedvol_common::wire::WhyNotReply {
            v: VERSION,
            cluster: String::new(),
            blockers: Vec::new(),
            summary: reason.message.clone(),
            error: Some(reason),
        }),
        _ => error_body(reason),
    }
}

/// Why a request is refused before its body is read: a user token that is not a valid user
/// name (`bad_request`), or a body over `maxBodyBytes` (`bad_request`).
fn precheck(co: &Coordinator, op: &str, user: &str, payload: &[u8]) -> Option<Reason> {
    if let Err(e) = fedvol_common::limits::check_user(user) {
        return Some(bad(e));
    }
    if payload.len() > co.cfg.max_body_bytes {
        return Some(bad(fedvol_common::wire::body_too_large(
            &format!("{op} request"),
            payload.len(),
            co.cfg.max_body_bytes,
        )));
    }
    None
}

/// Answers one request of operation `op`.
async fn handle(co: Arc<Coordinator>, op: &'static str, m: Message) {
    let user = user_of(&m);
    let span = tracing::info_span!("request", op = %op, user = %user, request_id = tracing::field::Empty);
    async move {
        let body = match precheck(&co, op, &user, &m.payload) {
            Some(reason) => {
                tracing::warn!(error = %reason.message, bytes = m.payload.len(), "request refused unread");
                refusal(op, reason)
            }
            None => answer(&co, op, &user, &m.payload).await,
        };
        let limit = co.client.max_payload();
        let body = if body.len() > limit {
            tracing::warn!(bytes = body.len(), limit, "answer over the server's max_payload replaced by an error");
            refusal(
                op,
                Reason::new(
                    codes::REPLY_TOO_LARGE,
                    format!(
                        "the answer is {} bytes, more than the NATS server's max_payload of {limit} bytes; the decision is stored: read it with `fedvol decisions watch`, or raise max_payload",
                        body.len()
                    ),
                ),
            )
        } else {
            body
        };
        if let Some(reply) = m.reply {
            if let Err(e) = co.client.publish(reply, body).await {
                tracing::warn!(error = %e, "the answer could not be sent");
            }
        } else {
            tracing::debug!("request without a reply subject: answered to nobody");
        }
    }
    .instrument(span)
    .await
}

fn record_id(id: &str) {
    tracing::Span::current().record("request_id", tracing::field::display(id));
}

async fn answer(co: &Arc<Coordinator>, op: &str, user: &str, payload: &[u8]) -> Bytes {
    let refused = |e: &String| tracing::warn!(error = %e, "malformed request refused");
    match op {
        ops::SUBMIT => match decode::<SubmitMsg>(payload, "submit").and_then(|msg| {
            let problems = fedvol_common::limits::workflow_problems(&msg.workflow);
            if problems.is_empty() {
                Ok(msg)
            } else {
                Err(format!("submit: {}", fedvol_common::limits::join_problems(&problems)))
            }
        }) {
            Ok(msg) => {
                // submit records the request id (given or generated) itself.
                let reply = submit(co.clone(), user, msg).await;
                if let Some(e) = &reply.error {
                    tracing::warn!(code = %e.code, error = %e.message, "submit answered with an error");
                }
                to_bytes(&reply)
            }
            Err(e) => {
                refused(&e);
                to_bytes(&error_reply(codes::BAD_REQUEST, e))
            }
        },
        ops::COMPLETE | ops::GET | ops::REPLAY => match decode::<DecisionRef>(payload, op) {
            Ok(q) => {
                record_id(&q.request_id);
                match op {
                    ops::COMPLETE => to_bytes(&op_handlers::complete(co, &q, user).await),
                    ops::GET => to_bytes(&op_handlers::get(co, &q).await),
                    _ => to_bytes(&op_handlers::replay(co, &q).await),
                }
            }
            Err(e) => {
                refused(&e);
                refusal(op, bad(e))
            }
        },
        ops::WHY_NOT => match decode::<WhyNotQuery>(payload, op) {
            Ok(q) => {
                record_id(&q.request_id);
                to_bytes(&op_handlers::why_not(co, &q).await)
            }
            Err(e) => {
                refused(&e);
                refusal(op, bad(e))
            }
        },
        ops::CLUSTERS => match decode_optional::<NoArgs>(payload, op) {
            Ok(_) => to_bytes(&op_handlers::clusters(co)),
            Err(e) => {
                refused(&e);
                error_body(bad(e))
            }
        },
        ops::LIST => match decode_optional::<NoArgs>(payload, op) {
            Ok(_) => match op_handlers::list(co).await {
                Ok(r) => to_bytes(&r),
                Err(reason) => error_body(reason),
            },
            Err(e) => {
                refused(&e);
                error_body(bad(e))
            }
        },
        other => error_body(bad(format!("unknown operation `{other}`"))),
    }
}
