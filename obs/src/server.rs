//! The HTTP server of a daemon's metrics and health (axum), on the address of `metricsListen`
//! / `--metrics-listen` (off unless configured):
//!
//! - `GET /metrics`: 200, every metric as OpenMetrics text ([`crate::registry::CONTENT_TYPE`]);
//! - `GET /healthz`: 200 `ok` while the process serves HTTP at all;
//! - `GET /readyz`: 200 `ready` when the daemon's [`Readiness`] check passes, else 503
//!   `not ready: <reason>` (one line).
//!
//! Anything else is 404. The server only reads: nothing it serves changes the daemon.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::ready::Readiness;
use crate::registry::{CONTENT_TYPE, Registry};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound (in use, not local, not permitted).
    #[error("cannot listen for metrics on {addr}: {source}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Reads a listen address for the metrics server (`metricsListen`, `--metrics-listen`):
/// `IP:PORT`, e.g. `127.0.0.1:9464`; port 0 takes a free port (the bound address is logged).
///
/// Errors: a sentence saying what was expected, quoting the text (at most 80 characters).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse::<SocketAddr>().map_err(|_| {
        format!(
            "`{}` is not a listen address; expected IP:PORT such as 127.0.0.1:9464 (loopback only) or 0.0.0.0:9464 (every interface)",
            text.chars().take(80).collect::<String>()
        )
    })
}

#[derive(Clone)]
struct Served {
    registry: Arc<Registry>,
    ready: Readiness,
}

async fn metrics(State(s): State<Served>) -> Response {
    match s.registry.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "the metrics could not be encoded");
            (StatusCode::INTERNAL_SERVER_ERROR, "the metrics could not be encoded\n").into_response()
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<Served>) -> Response {
    match s.ready.check().await {
        Ok(()) => "ready\n".into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")).into_response(),
    }
}

/// The routes, for [`serve`] and tests.
fn router(registry: Arc<Registry>, ready: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(Served { registry, ready })
}

/// Binds `addr` and serves `/metrics` (from `registry`), `/healthz` and `/readyz` (from
/// `ready`) on a task of the current runtime until the process ends. Logs and returns the bound
/// address (the real port when `addr` asked for port 0).
///
/// Errors: [`ServeError::Bind`]; later errors of the server are logged.
pub async fn serve(addr: SocketAddr, registry: Arc<Registry>, ready: Readiness) -> Result<SocketAddr, ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let app = router(registry, ready);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics server stopped");
        }
    });
    tracing::info!(addr = %bound, "metrics listening: /metrics, /healthz, /readyz");
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_lowercase(), body.to_string())
    }

    #[tokio::test]
    async fn metrics_health_and_readiness_over_http() {
        let registry = Arc::new(Registry::new("coordinator", "1.2.3"));
        let ready = Readiness::default();
        ready.starting("connecting to NATS");
        let addr = serve("127.0.0.1:0".parse().unwrap(), registry, ready.clone())
            .await
            .unwrap();
        assert_ne!(addr.port(), 0);

        let (status, head, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(head.contains("content-type: application/openmetrics-text"), "{head}");
        assert!(
            body.contains("fedvol_build_info{daemon=\"coordinator\",version=\"1.2.3\"} 1"),
            "{body}"
        );

        assert_eq!(get(addr, "/healthz").await.0, 200);
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (503, "not ready: starting: connecting to NATS\n")
        );
        ready.ready_when(Arc::new(|| Box::pin(async { Ok(()) })));
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!((status, body.as_str()), (200, "ready\n"));
        assert_eq!(get(addr, "/nothing").await.0, 404);
    }

    #[tokio::test]
    async fn a_taken_address_is_an_error_naming_it() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let e = serve(addr, Arc::new(Registry::new("agent", "0")), Readiness::default())
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("cannot listen for metrics on {addr}: ")),
            "{e}"
        );
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen("127.0.0.1:9464").unwrap().port(), 9464);
        assert!(parse_listen("[::1]:0").is_ok());
        let e = parse_listen("localhost").unwrap_err();
        assert!(
            e.contains("`localhost` is not a listen address; expected IP:PORT"),
            "{e}"
        );
    }
}
