//! The agent's operations (one agent service per cluster, queue group `agent.<cluster>`, subject
//! `<prefix>.cluster.<c>.<op>`; plan also on the broadcast `<prefix>.plan` of earlier releases)
//! and their bodies, one module per family of operations, plus the heartbeat an agent
//! publishes: the table below is the whole list ([`AgentOp`] shows it with its bodies).
//!
//! Every request that changes or reads state carries the request id (the idempotency key: the
//! same id gives the same answer and never a second reservation) and an absolute deadline in ms
//! since the epoch, after which it is dropped rather than answered late.

mod action;
mod heartbeat;
mod plan;
mod status;
mod why_not;

pub use action::{ActionMsg, ActionReply, VolumeOutcome};
pub use heartbeat::{Heartbeat, RestoredMsg, RestoredReply};
pub use plan::{AnswerMsg, HoldInfo, PlanMsg, PlanReply};
pub use status::{
    HoldSummary, INVENTORY_ENVELOPE_BYTES, InventoryCut, InventoryReply, ManagedVolumeInfo, SourceStatus, StatusReply,
    VolumeEvent,
};
pub use why_not::{WhyNotMsg, WhyNotReply};

use crate::endpoint::{NoArgs, decode_unread};
use crate::operations::operations;

operations! {
    /// The agent's operations: the `<op>` token of `<prefix>.cluster.<c>.<op>` and the name of
    /// each service endpoint.
    pub enum AgentOp, served as AgentEndpoint {
        /// Run the funnel; with `reserve`, hold what it chose.
        Plan = "plan": PlanMsg => PlanReply;
        /// Turn a hold into allocations, provisioning new volumes.
        Commit = "commit": ActionMsg => ActionReply;
        /// Free a hold.
        Release = "release": ActionMsg => ActionReply;
        /// End a committed request: free its allocations, apply reclaim policies.
        Complete = "complete": ActionMsg => ActionReply;
        /// Explain why a zone, host or provisioner was not chosen.
        WhyNot = "why_not": WhyNotMsg => WhyNotReply;
        /// Holds, commits, managed volumes, capacity in use (the body is not read).
        Status = "status": NoArgs => StatusReply, decode_request = decode_unread;
        /// The effective inventory and the status (the body is not read).
        Inventory = "inventory": NoArgs => InventoryReply, decode_request = decode_unread;
        /// A coordinator says the commits it stored for the cluster were restored onto the agent's
        /// current state generation: an agent started on a fresh state admits new commits again.
        Restored = "restored": RestoredMsg => RestoredReply;
        /// The batch jobs a committed request runs on the cluster's resource manager, their states,
        /// and whether the agent completed the request once they all ended (`ActionReply::jobs`).
        Jobs = "jobs": ActionMsg => ActionReply;
        /// The whole answer to a plan the agent answered with its summary ([`PlanMsg::summary`]),
        /// while the agent keeps it.
        Answer = "answer": AnswerMsg => PlanReply;
    }
}
