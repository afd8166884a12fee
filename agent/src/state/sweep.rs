//! The sweep: lapsed holds removed, completed commits pruned after their retention.

use super::core::{COMPLETED_RETENTION_MS, PRUNE_EVERY_MS};
use super::core::{Core, CoreError};
use super::store::Batch;

impl Core {
    /// Removes holds whose lease lapsed (not those being committed), and prunes commits
    /// completed more than [`COMPLETED_RETENTION_MS`] ago with the records of the volumes their
    /// completion deleted (volumes left Released or Failed stay: they are still there). Returns
    /// the ids of the lapsed holds.
    ///
    /// Errors: the store write failed (nothing is removed).
    pub fn sweep(&mut self, now_ms: u64) -> Result<Vec<String>, CoreError> {
        let expired = self.ledger.expired(now_ms, &self.in_flight);
        let cutoff = now_ms.saturating_sub(COMPLETED_RETENTION_MS);
        self.released.retain(|_, (_, at)| *at > cutoff);
        // Looking for prunable commits reads every commit: at most once per PRUNE_EVERY_MS,
        // not at every plan (with thousands of live commits that dominated a plan's cost).
        let prune_now = now_ms.saturating_sub(self.pruned_ms) >= PRUNE_EVERY_MS;
        if prune_now {
            self.pruned_ms = now_ms;
        }
        let pruned: Vec<String> = if !prune_now {
            Vec::new()
        } else {
            self.ledger
                .commits()
                .values()
                .filter(|c| c.completion.is_some() && c.completed_ms <= cutoff)
                .map(|c| c.request_id.clone())
                .collect()
        };
        let mut gone_volumes = Vec::new();
        for id in &pruned {
            if let Some(c) = self.ledger.commits().get(id) {
                for cv in &c.volumes {
                    if self.ledger.volume(&cv.id).is_some_and(|mv| mv.deleted) {
                        gone_volumes.push(super::store::volume_key(&cv.id));
                    }
                }
            }
        }
        if expired.is_empty() && pruned.is_empty() {
            return Ok(expired);
        }
        let (commits, volumes) = (pruned.len(), gone_volumes.len());
        self.apply(Batch {
            remove_holds: expired.clone(),
            remove_commits: pruned,
            remove_volumes: gone_volumes,
            ..Batch::default()
        })?;
        if commits > 0 {
            tracing::info!(commits, volumes, "completed commits pruned");
        }
        Ok(expired)
    }
}
