//! `count`: how many stored decisions are in each state, in all and per chosen cluster
//! (`fedvol decisions count`), from the same listing `list` answers.

use fedvol_proto::Failure;
use fedvol_proto::coordinator::{CountReply, DecisionSummary};

use crate::daemon::Coordinator;

/// `count` of `user`: the stored decisions counted by state, in all and per chosen cluster.
/// Read as `list` reads them (the decision index once it has caught up with the bucket, else
/// the bucket); the answer is a few hundred bytes, so only those count against the user's read
/// budget, and it waits for that budget as `list` does.
///
/// Errors: as [`super::list::list`] (`store_unavailable`, `overloaded`).
pub async fn count(co: &Coordinator, user: &str) -> Result<CountReply, Failure> {
    super::list::wait_for_budget(co, user).await?;
    let listed = super::list::list_all(co).await?;
    let reply = count_of(&listed.decisions);
    co.reads.take(user, serde_json::to_vec(&reply).map_or(0, |v| v.len()));
    Ok(reply)
}

/// The counts of `decisions`: each one once in `states`, and once in its chosen cluster's row
/// or in `unplaced`.
pub fn count_of(decisions: &[DecisionSummary]) -> CountReply {
    let mut reply = CountReply::default();
    for d in decisions {
        let state = d.state.as_str().to_string();
        reply.total += 1;
        reply.dry_runs += u64::from(d.dry_run);
        *reply.states.entry(state.clone()).or_default() += 1;
        let row = match &d.chosen_cluster {
            Some(c) => reply.clusters.entry(c.clone()).or_default(),
            None => &mut reply.unplaced,
        };
        *row.entry(state).or_default() += 1;
    }
    reply
}
