//! `fedvol ui`: a read-only web view of the federation, served over HTTP by the CLI with the
//! user's own NATS connection. Nothing in it changes anything: it only reads.
//!
//! - `/decisions` (and `/`): the decisions list with filters, from the decisions bucket's
//!   watch ([`index`]), live through `/events` ([`events`]).
//! - `/decisions/<id>`: one decision from the coordinators' `get` operation (as
//!   `fedvol decisions show`), with the funnel as a picture.
//! - `/clusters`: the coordinators' `clusters` operation (as `fedvol clusters`).
//!
//! It shows every decision in the bucket, whoever submitted it, as the bucket and
//! `fedvol decisions` do: whoever can reach the page sees what the credentials it runs with
//! can read. It listens on loopback unless told otherwise.

pub mod events;
pub mod index;
pub mod pages;

#[cfg(test)]
mod tests;

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
    /// The decisions bucket could not be watched.
    #[error(transparent)]
    Feed(#[from] crate::feed::FeedError),
    /// The HTTP server failed.
    #[error("the web server stopped: {0}")]
    Serve(std::io::Error),
}

#[derive(Clone)]
struct App {
    client: Arc<Client>,
    index: Arc<Index>,
    viewer: Arc<Viewer>,
}

/// Starts the web view: opens the decisions bucket's watch (an error when it cannot be read),
/// binds `listen`, calls `ready` with the bound address (port 0 picks a free one), and serves
/// until the process ends.
///
/// Errors: [`UiError`].
pub async fn serve(
    client: Client,
    bucket: &str,
    listen: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), UiError> {
    let feed = DecisionFeed::open(&client.nats, bucket).await?;
    let index = Arc::new(Index::new());
    tokio::spawn(index::follow(
        index.clone(),
        client.nats.clone(),
        bucket.to_string(),
        feed,
    ));
    let viewer = Arc::new(Viewer {
        user: client.user.clone(),
        bucket: bucket.to_string(),
    });
    let app = App {
        client: Arc::new(client),
        index,
        viewer,
    };
    let router = Router::new()
        .route("/", get(list_page))
        .route("/decisions", get(list_page))
        .route("/decisions/{id}", get(decision_page))
        .route("/clusters", get(clusters_page))
        .route("/events", get(events))
        .fallback(not_found)
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| UiError::Bind { addr: listen, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| UiError::Bind { addr: listen, source })?;
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

async fn decision_page(State(app): State<App>, Path(id): Path<String>) -> Response {
    let title = format!("Decision {id}");
    let reply = app
        .client
        .call::<api::Get>(&api::DecisionRef { request_id: id.clone() })
        .await;
    let (status, body) = match reply {
        Ok(Ok(api::SubmitReply { stored: Some(s), error })) => {
            let problem = error.map(|e| format!("{} ({})", e.message, e.code));
            (StatusCode::OK, pages::decision::body(&id, &s, problem.as_deref()))
        }
        Ok(Ok(api::SubmitReply {
            stored: None,
            error: Some(e),
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
