//! The restore gate: an agent started on a fresh state admits no new commit until the
//! coordinators restored the commits they stored for its cluster.
//!
//! An agent whose state file was lost and is started with `--init` knows none of the commits
//! the decision bucket says its cluster holds. The coordinators' reconciler commits them again
//! ([`fedvol_proto::agent::Restored`], `coordinator/src/daemon/restore.rs`), but a new request
//! committed on the "empty" cluster before that would take their capacity, and an
//! acknowledged commit would be revoked (`no_longer_fits` at its restore). So, the rule:
//!
//! - a state file created by `--init` is marked `pending_restore` in its identity (durably: an
//!   agent killed before its restore waits again when it comes back);
//! - while the mark stands the agent answers plans and new commits with `restoring` (a
//!   retryable refusal that changes nothing); commits marked `restore` (the coordinators'
//!   restore) and requests it already holds are served; status, release, complete, why_not
//!   and inventory are served as usual;
//! - its heartbeats say `restoring` (one goes out as soon as its endpoints are served, and
//!   one as soon as the gate opens, besides the regular ones); the reconciler, which restores
//!   at once on such a heartbeat, once it has restored the cluster's commits onto the
//!   heartbeat's state generation, sends `restored` for that generation, and the mark is
//!   cleared (durably);
//! - with no coordinator around to restore (none answers within `restoreWaitMs`), the agent
//!   logs an error saying so and admits new commits; the mark stays, so a coordinator that
//!   comes later still restores and clears it.
//!
//! This follows Kubernetes' PV controller, which rebuilds its view from the API server before
//! it binds anything new (Kubernetes: PV controller, `initializeCaches` before `Run`'s sync
//! loops), so a claim never binds a volume whose claimRef names another claim.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether new commits wait for the coordinators' restore (module docs).
#[derive(Debug, Default)]
pub struct RestoreGate {
    /// The state generation a restore must name.
    generation: String,
    /// True while new commits are refused.
    closed: AtomicBool,
    /// True while the identity's `pending_restore` mark stands (heartbeats say `restoring`).
    pending: AtomicBool,
    /// Wakes the heartbeat loop so that the coordinators hear at once what changed: the
    /// endpoints a restore needs are served ([`RestoreGate::serving`]), or the gate opened.
    heartbeat_now: tokio::sync::Notify,
}

impl RestoreGate {
    /// An open gate: the agent admits every commit (a state it kept, or replicated state).
    pub fn open() -> Self {
        RestoreGate::default()
    }

    /// A gate for state generation `generation`, closed when `pending` (the state file was
    /// created by `--init` and no restore has been confirmed for it).
    pub fn new(generation: &str, pending: bool) -> Self {
        RestoreGate {
            generation: generation.to_string(),
            closed: AtomicBool::new(pending),
            pending: AtomicBool::new(pending),
            heartbeat_now: tokio::sync::Notify::new(),
        }
    }

    /// True while new commits are refused with `restoring`.
    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// True until a coordinator confirmed the restore of this generation (what heartbeats say).
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// The state generation a restore must name.
    pub fn generation(&self) -> &str {
        &self.generation
    }

    /// A coordinator confirmed the restore of `generation`: returns true when it is this
    /// agent's generation (the gate opens and the mark is to be cleared).
    pub fn restored(&self, generation: &str) -> bool {
        if generation != self.generation || self.generation.is_empty() {
            return false;
        }
        self.pending.store(false, Ordering::Release);
        self.closed.store(false, Ordering::Release);
        self.heartbeat_now.notify_one();
        true
    }

    /// The agent serves its endpoints now: while it waits for its restore, a heartbeat goes
    /// out at once, so that the coordinators restore it without waiting for the next one (the
    /// first heartbeat leaves before the endpoints the restore calls are subscribed).
    pub fn serving(&self) {
        if self.pending() {
            self.heartbeat_now.notify_one();
        }
    }

    /// Resolves when a heartbeat should go out before its interval ([`RestoreGate::serving`],
    /// [`RestoreGate::restored`]).
    pub async fn heartbeat_due(&self) {
        self.heartbeat_now.notified().await;
    }

    /// The bounded wait ran out with no restore confirmed: admit new commits, keep the mark.
    /// Returns true when the gate was closed until now.
    pub fn give_up_waiting(&self) -> bool {
        self.closed.swap(false, Ordering::AcqRel)
    }

    /// The message of a `restoring` refusal on `cluster`.
    pub fn refusal(cluster: &str) -> String {
        format!(
            "cluster {cluster}'s agent started on a fresh state and waits for the coordinators to restore the commits they stored for it; it admits no new commit until then: ask again shortly"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_agents_own_generation_opens_the_gate() {
        let g = RestoreGate::new("g1", true);
        assert!(g.closed() && g.pending());
        assert!(!g.restored("g0"), "a restore of another generation");
        assert!(g.closed());
        assert!(g.restored("g1"));
        assert!(!g.closed() && !g.pending());
    }

    #[test]
    fn giving_up_opens_the_gate_but_keeps_the_mark() {
        let g = RestoreGate::new("g1", true);
        assert!(g.give_up_waiting());
        assert!(!g.closed() && g.pending());
        assert!(!g.give_up_waiting());
        assert!(g.restored("g1"));
        assert!(!RestoreGate::open().closed());
    }
}
