//! Volume resolution (seeds 000 and 001). PLACEHOLDER: being written.
use indexmap::IndexMap;
use crate::decision::{StageTrace, VolumeDecision};
use crate::model::Inventory;
use super::{ClusterState, PlanRequest};

/// Resolves every volume of the workflow, in workflow order.
pub fn resolve_volumes(_inv: &Inventory, _state: &ClusterState, _req: &PlanRequest, _trace: &mut Vec<StageTrace>) -> IndexMap<String, VolumeDecision> {
    todo!()
}
