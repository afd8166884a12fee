//! fedvol's domain model: what an inventory and a workflow mean once parsed.

pub mod inventory;
pub mod k8s;
pub mod policy;
pub mod tags;
pub mod workflow;

pub use inventory::*;
pub use k8s::*;
pub use policy::*;
pub use tags::*;
pub use workflow::*;
