//! Release: a hold freed (idempotent), and the attempt fenced so that it never commits.

use fedvol_proto::Code;
use fedvol_proto::agent::ActionReply;

use super::core::{Core, CoreError, refusal};
use super::store::Batch;

impl Core {
    /// Frees the hold of `request_id` and fences its attempts up to `attempt`: a later commit of
    /// one of them is refused (`released`), so "released" is a final answer to a coordinator
    /// settling a commit it got no answer to. Releasing an unknown or already released id
    /// succeeds (idempotent); a hold being committed (`commit_in_progress`), or a committed
    /// request (`committed`), is refused.
    ///
    /// Errors: the store write failed.
    pub fn release(&mut self, request_id: &str, attempt: u32, now_ms: u64) -> Result<ActionReply, CoreError> {
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
            self.apply(Batch {
                remove_holds: vec![request_id.to_string()],
                ..Batch::default()
            })?;
        }
        let fenced = self.released.entry(request_id.to_string()).or_insert((attempt, now_ms));
        *fenced = (fenced.0.max(attempt), now_ms);
        Ok(ActionReply::done(&self.cluster, request_id, Vec::new()))
    }
}
