//! Release: a hold freed (idempotent).

use fedvol_proto::Code;
use fedvol_proto::agent::ActionReply;

use super::core::{Core, CoreError, refusal};
use super::store::Batch;

impl Core {
    /// Frees the hold of `request_id`. Releasing an unknown or already released id succeeds
    /// (idempotent); a hold being committed, or a committed request, is refused.
    ///
    /// Errors: the store write failed.
    pub fn release(&mut self, request_id: &str) -> Result<ActionReply, CoreError> {
        if self.in_flight.contains(request_id) {
            return Ok(refusal(
                &self.cluster,
                request_id,
                Code::CommitInProgress,
                "the hold is being committed",
            ));
        }
        if self.ledger.commits().contains_key(request_id) {
            return Ok(refusal(
                &self.cluster,
                request_id,
                Code::Committed,
                "the request is committed: use complete to end it",
            ));
        }
        if self.ledger.holds().contains_key(request_id) {
            self.store.write(&Batch {
                remove_holds: vec![request_id.to_string()],
                ..Batch::default()
            })?;
            self.ledger.remove_hold(request_id);
            self.rebuild();
        }
        Ok(ActionReply::done(&self.cluster, request_id, Vec::new()))
    }
}
