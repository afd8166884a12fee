//! `fedvol ui`: a read-only web view of the federation, served over HTTP by the CLI with the
//! user's own NATS connection. Nothing in it changes anything: it only reads.
//!
//! - `/decisions` (and `/`): the decisions list with filters, from the coordinators'
//!   `changes` operation ([`index`], [`crate::feed`]), live through `/events` ([`events`]).
//! - `/decisions/<id>`: one decision from the coordinators' `get` operation (as
//!   `fedvol decisions show`), with the funnel as a picture.
//! - `/clusters`: the coordinators' `clusters` operation (as `fedvol clusters`).
//! - `/what-if`: the coordinators' `what_if` operation (as `fedvol what-if`) for the clusters
//!   the form drains or removes; without one, the baseline.
//!
//! It shows every decision in the bucket, whoever submitted it, as the bucket and
//! `fedvol decisions` do: whoever can reach the page sees what the credentials it runs with
//! can read. It listens on loopback unless told otherwise.

pub mod events;
pub mod index;
pub mod pages;

#[cfg(test)]
pub(crate) mod tests;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use fedvol_proto::NoArgs;
use fedvol_proto::coordinator as api;
use maud::Markup;

use crate::client::Client;
use crate::feed::DecisionFeed;
use index::{Filter, Index};
use pages::{Nav, Viewer};

/// Why the web view could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's error.
        source: std::io::Error,
    },
    /// The decisions could not be read from the coordinators.
    #[error(transparent)]
    Feed(#[from] crate::feed::FeedError),
    /// The HTTP server failed.
    #[error("the web server stopped: {0}")]
    Serve(std::io::Error),
}

/// The `Host` names the view answers to besides its own address (`--allowed-host`).
#[derive(Debug, Clone, Default)]
pub struct HostCheck {
    /// Every accepted `Host` header value, lowercased: `name:port` (and `name` alone when the
    /// port is 80).
    accepted: Vec<String>,
}

impl HostCheck {
    /// What the view bound to `bound` answers to: its own address (`127.0.0.1:8080`,
    /// `[::1]:8080`), `localhost` when it is on loopback, and each of `names` (host names the
    /// user passed with `--allowed-host`, with or without a port; without one, the bound port).
    pub fn new(bound: SocketAddr, names: &[String]) -> HostCheck {
        let port = bound.port();
        let mut bare: Vec<String> = vec![match bound.ip() {
            std::net::IpAddr::V4(ip) => ip.to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        }];
        if bound.ip().is_loopback() {
            bare.push("localhost".into());
        }
        let mut accepted = Vec::new();
        for n in names {
            let n = n.trim().to_ascii_lowercase();
            if n.rsplit_once(':')
                .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && !n.ends_with(']')
            {
                accepted.push(n);
            } else {
                bare.push(n);
            }
        }
        for b in bare {
            if port == 80 {
                accepted.push(b.clone());
            }
            accepted.push(format!("{b}:{port}"));
        }
        HostCheck { accepted }
    }

    /// True when a request whose `Host` header is `host` may be answered.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        self.accepted.contains(&host)
    }

    /// The accepted values, for the refusal's text.
    fn first(&self) -> &str {
        self.accepted
            .iter()
            .find(|a| a.contains(':'))
            .map_or("", String::as_str)
    }
}

/// The Content-Security-Policy of every answer (MDN Content-Security-Policy; OWASP HTTP
/// Headers Cheat Sheet): everything from this origin only (the pages, `/live.js`, `/events`),
/// no plugins, no framing, no `<base>` change; styles also inline (the page's style sheet and
/// the funnel's bar widths are `style` elements and attributes, escaped like all text).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Refuses a request whose `Host` is not one the view answers to (a DNS-rebinding page's
/// requests carry the attacker's name: OWASP, "DNS rebinding"; RFC 9110 §15.5.20 421
/// Misdirected Request), and adds the security headers to every answer.
async fn guard(
    State(check): State<Arc<HostCheck>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_string()));
    let mut response = match host {
        Some(h) if check.allows(&h) => next.run(request).await,
        other => {
            let shown =
                fedvol_common::limits::printable(&other.unwrap_or_default().chars().take(100).collect::<String>());
            tracing::warn!(host = %shown, "a request for another host refused (DNS rebinding?)");
            (
                StatusCode::MISDIRECTED_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!(
                    "421 Misdirected Request: this view answers to http://{}/ only, not to Host `{shown}`; start it with --allowed-host NAME to be reached under another name\n",
                    check.first()
                ),
            )
                .into_response()
        }
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

async fn live_js() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        pages::list::SCRIPT,
    )
        .into_response()
}

#[derive(Clone)]
struct App {
    client: Arc<Client>,
    index: Arc<Index>,
    viewer: Arc<Viewer>,
}

/// Starts the web view: asks the coordinators for the decisions (an error when they cannot be
/// read),
/// binds `listen`, calls `ready` with the bound address (port 0 picks a free one), and serves
/// until the process ends. It answers only requests whose `Host` is its own address,
/// `localhost` on loopback, or one of `allowed_hosts` ([`HostCheck`]); every answer carries
/// [`CONTENT_SECURITY_POLICY`], `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff` and
/// `Referrer-Policy: no-referrer`.
///
/// Errors: [`UiError`].
pub async fn serve(
    client: Client,
    listen: SocketAddr,
    allowed_hosts: &[String],
    ready: impl FnOnce(SocketAddr),
) -> Result<(), UiError> {
    let client = Arc::new(client);
    let mut feed = DecisionFeed::new();
    // What is stored now, without waiting for a change (an empty store answers at once). A
    // coordinator too busy to answer (`overloaded`) is asked again after a growing pause.
    let mut backoff = crate::feed::Backoff::new();
    loop {
        match feed.fill_waiting(&client, 0).await {
            Ok(()) => break,
            Err(e) if e.is_overloaded() => {
                let pause = backoff.next_pause();
                tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "the coordinator is busy; asking again");
                tokio::time::sleep(pause).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let index = Arc::new(Index::new());
    tokio::spawn(index::follow(index.clone(), client.clone(), feed));
    let viewer = Arc::new(Viewer {
        user: client.user.clone(),
    });
    let app = App { client, index, viewer };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| UiError::Bind { addr: listen, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| UiError::Bind { addr: listen, source })?;
    let check = Arc::new(HostCheck::new(bound, allowed_hosts));
    let router = Router::new()
        .route("/", get(list_page))
        .route("/decisions", get(list_page))
        .route("/decisions/{id}", get(decision_page))
        .route("/clusters", get(clusters_page))
        .route("/what-if", get(what_if_page))
        .route("/events", get(events))
        .route("/live.js", get(live_js))
        .fallback(not_found)
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(check, guard));
    ready(bound);
    axum::serve(listener, router).await.map_err(UiError::Serve)
}

/// A whole HTML page's text. Names stored before they were checked may hold bidirectional
/// controls or invisible characters (Unicode TR #36 §2.1): the page shows them escaped, as the
/// CLI's tables do.
fn html(title: &str, nav: Nav, viewer: &Viewer, body: Markup) -> String {
    fedvol_common::limits::printable_lines(&pages::page(title, nav, viewer, body).into_string())
}

/// A whole HTML page with `status`; pages are never cached (they show live state).
fn respond(status: StatusCode, title: &str, nav: Nav, viewer: &Viewer, body: Markup) -> Response {
    let mut r = (status, Html(html(title, nav, viewer, body))).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn list_page(State(app): State<App>, Query(filter): Query<Filter>) -> Response {
    // The revision is read before the rows, so a change racing the render is sent again by
    // the live updates rather than lost.
    let since = app.index.last_revision();
    let (rows, total) = app.index.rows(&filter);
    let body = pages::list::body(
        &filter,
        &rows,
        total,
        since,
        &app.index.choices(),
        app.index.broken().as_deref(),
    );
    respond(StatusCode::OK, "Decisions", Nav::Decisions, &app.viewer, body)
}

/// The decision page's query: `whole`, a cluster to ask for its whole answer.
#[derive(Debug, Default, serde::Deserialize)]
struct WholeQuery {
    #[serde(default)]
    whole: Option<String>,
}

async fn decision_page(State(app): State<App>, Path(id): Path<String>, Query(q): Query<WholeQuery>) -> Response {
    let title = format!("Decision {id}");
    let whole = q.whole.filter(|c| !c.is_empty());
    let reply = app
        .client
        .call::<api::Get>(&api::DecisionRef {
            request_id: id.clone(),
            cancel: false,
            whole: whole.clone(),
        })
        .await;
    let (status, body) = match reply {
        Ok(Ok(api::SubmitReply {
            stored: Some(s), error, ..
        })) => {
            let problem = error.map(|e| format!("{} ({})", e.message, e.code));
            (
                StatusCode::OK,
                pages::decision::body_with(&id, &s, problem.as_deref(), whole.as_deref()),
            )
        }
        Ok(Ok(api::SubmitReply {
            stored: None,
            error: Some(e),
            ..
        }))
        | Ok(Err(fedvol_proto::Failure { error: e, .. })) => {
            let status = if e.is(&fedvol_proto::Code::NotFound) {
                StatusCode::NOT_FOUND
            } else if e.is(&fedvol_proto::Code::BadRequest) {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::BAD_GATEWAY
            };
            (
                status,
                pages::error_body(&title, &format!("{} ({})", e.message, e.code)),
            )
        }
        Ok(Ok(api::SubmitReply {
            stored: None,
            error: None,
            ..
        })) => (
            StatusCode::BAD_GATEWAY,
            pages::error_body(&title, "the coordinator answered with neither a decision nor an error"),
        ),
        Err(e) => (StatusCode::BAD_GATEWAY, pages::error_body(&title, &e.to_string())),
    };
    respond(status, &title, Nav::Decisions, &app.viewer, body)
}

async fn clusters_page(State(app): State<App>) -> Response {
    let (status, body) = match app.client.call::<api::Clusters>(&NoArgs {}).await {
        Ok(Ok(r)) => (StatusCode::OK, pages::clusters::body(&r)),
        Ok(Err(f)) => (
            StatusCode::BAD_GATEWAY,
            pages::error_body("Clusters", &format!("{} ({})", f.error.message, f.error.code)),
        ),
        Err(e) => (StatusCode::BAD_GATEWAY, pages::error_body("Clusters", &e.to_string())),
    };
    respond(status, "Clusters", Nav::Clusters, &app.viewer, body)
}

async fn what_if_page(State(app): State<App>, Query(form): Query<pages::what_if::Form>) -> Response {
    let since = match form.since.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => crate::commands::decisions::list::parse_age_ms(s).map(Some),
    };
    let since = match since {
        Ok(s) => s,
        Err(e) => {
            let body = pages::what_if::body(&form, Err(&e));
            return respond(StatusCode::BAD_REQUEST, "What if", Nav::WhatIf, &app.viewer, body);
        }
    };
    let q = api::WhatIfQuery {
        deadline_ms: fedvol_proto::now_ms() + app.client.timeout.as_millis() as u64,
        since_ms: since,
        user: None,
        project: None,
        workflow: None,
        states: Vec::new(),
        changes: api::WhatIfChanges {
            drain: pages::what_if::Form::names(&form.drain),
            remove: pages::what_if::Form::names(&form.remove),
            ..api::WhatIfChanges::default()
        },
    };
    let (status, body) = match app.client.call::<api::WhatIf>(&q).await {
        Ok(Ok(r)) => (StatusCode::OK, pages::what_if::body(&form, Ok(&r))),
        Ok(Err(f)) => {
            let status = if f.error.is(&fedvol_proto::Code::BadRequest) {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::BAD_GATEWAY
            };
            let e = format!("{} ({})", f.error.message, f.error.code);
            (status, pages::what_if::body(&form, Err(&e)))
        }
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            pages::what_if::body(&form, Err(&e.to_string())),
        ),
    };
    respond(status, "What if", Nav::WhatIf, &app.viewer, body)
}

/// The revision a browser already has: a reconnecting browser's `Last-Event-ID`, else the
/// page's `since`.
#[derive(Debug, Default, serde::Deserialize)]
struct Since {
    #[serde(default)]
    since: Option<u64>,
}

async fn events(
    State(app): State<App>,
    Query(filter): Query<Filter>,
    Query(since): Query<Since>,
    headers: HeaderMap,
) -> Response {
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let since = resumed.or(since.since).unwrap_or_else(|| app.index.last_revision());
    tracing::debug!(since, "live updates: a browser connected");
    events::stream(app.index.clone(), filter, since).into_response()
}

async fn not_found(State(app): State<App>) -> Response {
    respond(
        StatusCode::NOT_FOUND,
        "Not found",
        Nav::Decisions,
        &app.viewer,
        pages::error_body("Not found", "There is no such page in this read-only view."),
    )
}
