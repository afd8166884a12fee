//! What `/readyz` answers. A daemon is *starting* (with what it is doing: "connecting to NATS",
//! "standby: another replica serves this cluster"...) until it installs its check; from then on
//! each `/readyz` runs the check: ready, or not with a short reason.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;

/// A daemon's readiness check: `Ok(())` when it can serve, else a short reason (one line, for
/// `/readyz`'s 503 body and for the log of whoever probes it).
pub type ReadyCheck = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// How long one check may take before `/readyz` answers "not ready: the readiness check timed
/// out" (a bucket that does not answer is not reachable).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

enum State {
    Starting(String),
    Checking(ReadyCheck),
}

/// The readiness of one daemon, shared by the daemon (which moves it on) and the HTTP server
/// (which reads it). Cheap to clone: clones share the state.
#[derive(Clone)]
pub struct Readiness(Arc<RwLock<State>>);

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.0.read().unwrap_or_else(|p| p.into_inner()) {
            State::Starting(what) => write!(f, "Readiness::Starting({what:?})"),
            State::Checking(_) => write!(f, "Readiness::Checking"),
        }
    }
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness(Arc::new(RwLock::new(State::Starting("starting".to_string()))))
    }
}

impl Readiness {
    /// Not ready: the daemon is `what` (e.g. "connecting to NATS"). Replaces an installed check
    /// (a replica that steps down is starting again).
    pub fn starting(&self, what: impl Into<String>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = State::Starting(what.into());
    }

    /// From now on ready exactly when `check` says so.
    pub fn ready_when(&self, check: ReadyCheck) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = State::Checking(check);
    }

    /// Runs the check (at most [`CHECK_TIMEOUT`]).
    ///
    /// Errors: why the daemon is not ready: `starting: <what>`, the check's reason, or that the
    /// check timed out.
    pub async fn check(&self) -> Result<(), String> {
        self.check_within(CHECK_TIMEOUT).await
    }

    /// As [`Readiness::check`], the check given at most `limit`.
    ///
    /// Errors: as [`Readiness::check`].
    pub async fn check_within(&self, limit: Duration) -> Result<(), String> {
        let check = match &*self.0.read().unwrap_or_else(|p| p.into_inner()) {
            State::Starting(what) => return Err(format!("starting: {what}")),
            State::Checking(c) => c.clone(),
        };
        match tokio::time::timeout(limit, check()).await {
            Ok(r) => r,
            Err(_) => Err(format!("the readiness check took longer than {} ms", limit.as_millis())),
        }
    }
}

/// The NATS part of every daemon's check: `Ok` when `client` is connected, else why not.
///
/// Errors: "not connected to NATS (reconnecting)" or "not connected to NATS (connecting)".
pub fn nats_connected(client: &async_nats::Client) -> Result<(), String> {
    use async_nats::connection::State;
    match client.connection_state() {
        State::Connected => Ok(()),
        State::Disconnected => Err("not connected to NATS (reconnecting)".to_string()),
        State::Pending => Err("not connected to NATS (connecting)".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn starting_then_the_check_decides() {
        let r = Readiness::default();
        r.starting("connecting to NATS");
        assert_eq!(r.check().await, Err("starting: connecting to NATS".to_string()));
        let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = up.clone();
        r.ready_when(Arc::new(move || {
            let ok = seen.load(std::sync::atomic::Ordering::Relaxed);
            Box::pin(async move {
                if ok {
                    Ok(())
                } else {
                    Err("inventory not loaded".to_string())
                }
            })
        }));
        assert_eq!(r.check().await, Err("inventory not loaded".to_string()));
        up.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(r.check().await, Ok(()));
    }

    #[tokio::test]
    async fn a_check_that_hangs_is_not_ready() {
        let r = Readiness::default();
        r.ready_when(Arc::new(|| Box::pin(futures::future::pending())));
        let e = r.check_within(Duration::from_millis(20)).await.unwrap_err();
        assert!(e.contains("took longer than 20 ms"), "{e}");
    }
}
