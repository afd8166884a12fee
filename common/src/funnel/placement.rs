//! Job placement (seed 002). PLACEHOLDER: being written.
use indexmap::IndexMap;
use crate::decision::{HostAllocation, JobDecision, StageTrace, VolumeDecision};
use crate::model::Inventory;
use super::PlanRequest;

/// The outcome of placing every job that mounts volumes.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Per placed job, in workflow order.
    pub jobs: IndexMap<String, JobDecision>,
    /// Capacity held on hosts.
    pub allocations: Vec<HostAllocation>,
    /// Soft constraints met, summed over jobs.
    pub soft_matched: u32,
}

/// Places every job that mounts volumes.
pub fn place_jobs(_inv: &Inventory, _req: &PlanRequest, _volumes: &IndexMap<String, VolumeDecision>, _trace: &mut Vec<StageTrace>) -> Placement {
    todo!()
}
