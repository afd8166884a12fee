//! Connecting to NATS with the configured identity: unlimited reconnects, every connection
//! event logged, credentials from options (never from the URL).

use std::sync::Arc;
use std::time::Duration;

use super::auth::{NatsAuth, redact_url};

/// Why the connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A credentials or key file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    File {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The server could not be reached or refused us.
    #[error("cannot connect to NATS at {url}: {message}")]
    Connect {
        /// The URL (credentials redacted).
        url: String,
        /// The client's error.
        message: String,
        /// Whether trying again may succeed: the server was not reached, was busy or timed out
        /// (a start storm, a server still starting). A refused identity, a TLS or address
        /// error is not retried: it needs the operator.
        retryable: bool,
    },
}

impl ConnectError {
    /// Whether trying again may succeed (see [`ConnectError::Connect`]).
    pub fn retryable(&self) -> bool {
        matches!(self, ConnectError::Connect { retryable: true, .. })
    }
}

/// How a daemon waits between attempts at its first connection, and between reconnects:
/// exponential backoff from `first`, doubling to at most `max`, each delay drawn uniformly
/// from its upper half ("equal jitter", AWS Architecture Blog, "Exponential Backoff And
/// Jitter"), so that a thousand agents started or cut off together do not come back in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay's upper bound.
    pub first: Duration,
    /// The largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    /// 100 ms doubling to 5 s.
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The delay before attempt `attempt` (1 = the first retry): in
    /// `[cap / 2, cap]` with `cap = min(max, first * 2^(attempt - 1))`.
    pub fn delay(&self, attempt: usize) -> Duration {
        let exp = u32::try_from(attempt.saturating_sub(1)).unwrap_or(u32::MAX).min(30);
        let cap = self.first.saturating_mul(1u32 << exp).min(self.max);
        let cap_ms = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX).max(1);
        Duration::from_millis(cap_ms / 2 + fastrand::u64(0..=cap_ms - cap_ms / 2))
    }
}

/// As [`connect`], retrying the first connection with [`Backoff`] while the error is
/// [retryable](ConnectError::retryable), each failure logged as a warning with the attempt and
/// the delay: how the daemons connect, so that agents started all at once (or before their
/// server) come up instead of exiting. `on_retry` is called with each failure (e.g. to show it
/// in `/readyz`).
///
/// Errors: the first error that is not retryable (a refused identity, a bad address, an
/// unreadable credentials file).
pub async fn connect_patiently(
    name: &str,
    auth: &NatsAuth,
    backoff: Backoff,
    mut on_retry: impl FnMut(&ConnectError),
) -> Result<async_nats::Client, ConnectError> {
    let mut attempt = 0usize;
    loop {
        match connect_with(name, auth, backoff).await {
            Ok((c, _)) => return Ok(c),
            Err(e) if e.retryable() => {
                attempt += 1;
                let wait = backoff.delay(attempt);
                tracing::warn!(attempt, retry_in_ms = wait.as_millis() as u64, error = %e, "cannot connect to NATS yet; retrying");
                on_retry(&e);
                tokio::time::sleep(wait).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The errors the server sent on a connection (`-ERR`), e.g. `Permissions Violation for
/// Subscription to "_INBOX.x"`: what a refused publish or subscription leaves behind, since
/// NATS reports those asynchronously (`publish` still returns `Ok`). Keeps the last one and
/// lets a caller wait for the next ([`ServerErrors::watch`]). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ServerErrors(Arc<tokio::sync::watch::Sender<Option<String>>>);

impl Default for ServerErrors {
    fn default() -> Self {
        ServerErrors(Arc::new(tokio::sync::watch::Sender::new(None)))
    }
}

impl ServerErrors {
    /// The last error the server sent, if any.
    pub fn last(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// A receiver whose `changed()` resolves at the next error the server sends (errors sent
    /// before this call are marked seen).
    pub fn watch(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.0.subscribe()
    }

    fn record(&self, e: String) {
        self.0.send_replace(Some(e));
    }
}

/// Connects as `name` (shown in the server's connection list) with `auth`.
///
/// Reconnects forever once connected; the first connection is retried for a while by the
/// client, then fails with [`ConnectError::Connect`]. Errors the server sends later (refused
/// publishes and subscriptions) are logged as warnings.
pub async fn connect(name: &str, auth: &NatsAuth) -> Result<async_nats::Client, ConnectError> {
    connect_watching(name, auth).await.map(|(c, _)| c)
}

/// As [`connect`], also returning the [`ServerErrors`] of the connection, so that a caller
/// whose request got no answer can say why (e.g. a permissions violation).
pub async fn connect_watching(name: &str, auth: &NatsAuth) -> Result<(async_nats::Client, ServerErrors), ConnectError> {
    connect_with(name, auth, Backoff::default()).await
}

/// Connects as [`connect_watching`] does, reconnecting with `backoff`'s delays.
async fn connect_with(
    name: &str,
    auth: &NatsAuth,
    backoff: Backoff,
) -> Result<(async_nats::Client, ServerErrors), ConnectError> {
    let errors = ServerErrors::default();
    let seen = errors.clone();
    let mut opts = async_nats::ConnectOptions::new()
        .name(name)
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(5))
        // Reconnects spread out as first connections are (`Backoff`): after a server restart
        // every client reconnects, and in step they would storm it.
        .reconnect_delay_callback(move |attempts| match attempts {
            0 | 1 => Duration::ZERO,
            n => backoff.delay(n - 1),
        })
        .event_callback(move |event| {
            let seen = seen.clone();
            async move {
                match event {
                    async_nats::Event::ServerError(e) => {
                        tracing::warn!(event = "server_error", error = %e, "the NATS server reported an error");
                        seen.record(e.to_string());
                    }
                    async_nats::Event::Connected => tracing::info!(event = "connected", "NATS connection up"),
                    async_nats::Event::Disconnected => {
                        tracing::warn!(event = "disconnected", "NATS connection lost; reconnecting")
                    }
                    async_nats::Event::SlowConsumer(sid) => {
                        tracing::warn!(
                            event = "slow_consumer",
                            subscription = sid,
                            "NATS dropped messages for a slow subscription"
                        )
                    }
                    other => tracing::info!(event = %other, "NATS event"),
                }
            }
        });
    let password = super::auth::password(auth).map_err(|source| ConnectError::File {
        what: "password file",
        path: auth
            .password_file
            .as_ref()
            .map(|f| f.display().to_string())
            .unwrap_or_default(),
        source,
    })?;
    if let (Some(u), Some(p)) = (&auth.user, password) {
        opts = opts.user_and_password(u.clone(), p);
    }
    if let Some(f) = &auth.nkey_file {
        let seed = std::fs::read_to_string(f).map_err(|source| ConnectError::File {
            what: "nkey seed file",
            path: f.display().to_string(),
            source,
        })?;
        opts = opts.nkey(seed.trim().to_string());
    }
    if let Some(f) = &auth.creds_file {
        opts = opts.credentials_file(f).await.map_err(|source| ConnectError::File {
            what: "credentials file",
            path: f.display().to_string(),
            source,
        })?;
    }
    if let Some(p) = &auth.inbox_prefix {
        opts = opts.custom_inbox_prefix(p);
    }
    if let Some(ca) = &auth.tls_ca {
        opts = opts.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let (Some(c), Some(k)) = (&auth.tls_cert, &auth.tls_key) {
        opts = opts.add_client_certificate(c.clone(), k.clone()).require_tls(true);
    }
    let urls: Vec<String> = auth
        .url
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let addrs: Vec<async_nats::ServerAddr> = urls
        .iter()
        .map(|u| {
            u.parse::<async_nats::ServerAddr>().map_err(|e| ConnectError::Connect {
                url: redact_url(u),
                message: e.to_string(),
                retryable: false,
            })
        })
        .collect::<Result<_, _>>()?;
    let client = opts.connect(addrs.as_slice()).await.map_err(|e| {
        use async_nats::ConnectErrorKind as K;
        ConnectError::Connect {
            url: redact_url(&auth.url),
            message: e.to_string(),
            retryable: matches!(e.kind(), K::TimedOut | K::Io | K::Dns | K::MaxReconnects),
        }
    })?;
    Ok((client, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_each_delay_is_in_the_upper_half() {
        let b = Backoff::default();
        for (attempt, cap_ms) in [(1, 100), (2, 200), (3, 400), (6, 3_200), (7, 5_000), (40, 5_000)] {
            for _ in 0..200 {
                let d = b.delay(attempt).as_millis() as u64;
                assert!((cap_ms / 2..=cap_ms).contains(&d), "attempt {attempt}: {d} ms");
            }
        }
        // Jittered: a thousand agents do not all wait the same.
        let seen: std::collections::BTreeSet<u128> = (0..100).map(|_| b.delay(5).as_millis()).collect();
        assert!(seen.len() > 10, "{seen:?}");
    }
}
