//! Planning without a network (`fedvol plan`): run every given cluster's funnel locally, then
//! the coordinator's cross-cluster choice, and assemble the decision document (docs/design.md §4).

use std::time::Instant;

use indexmap::IndexMap;

use crate::choice::choose_cluster;
use crate::decision::Decision;
use crate::funnel::{ClusterState, PlanRequest, Prepared, plan_prepared};
use crate::model::Inventory;

/// Plans `req` against each inventory (one per cluster, in the order given; each cluster with an
/// empty [`ClusterState`]) and chooses a cluster. Each inventory is prepared for planning once
/// ([`Prepared::new`]); `elapsed_ms` of each slot is the funnel's wall time on it, in
/// milliseconds (as an agent's, which keeps its inventory prepared). Cluster names must be
/// unique (the caller checks).
pub fn plan_locally(inventories: &[Inventory], req: &PlanRequest) -> Decision {
    let state = ClusterState::default();
    let mut clusters = IndexMap::new();
    for inv in inventories {
        let prepared = Prepared::new(inv);
        let start = Instant::now();
        let mut d = plan_prepared(inv, &prepared, &state, req);
        d.elapsed_ms = start.elapsed().as_secs_f64() * 1000.0;
        clusters.insert(inv.cluster.clone(), d);
    }
    let (chosen, choice) = choose_cluster(req, &clusters, req.seed);
    Decision {
        quota: Vec::new(),
        refused: None,
        drained: Default::default(),
        request_id: req.request_id.clone(),
        workflow: req.workflow.name.clone(),
        seed: req.seed,
        chosen_cluster: chosen,
        clusters,
        choice,
    }
}
