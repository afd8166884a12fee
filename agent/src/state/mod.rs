//! The agent's state: durable records ([`records`]) in a redb file or a replicated JetStream
//! stream ([`store`], [`replicated`]), their
//! in-memory form and the effective inventory ([`ledger`], the merged volume list kept change by
//! change in [`merged`]), and the operations that change them,
//! one module per concern on [`Core`]: [`hold`] (plan and hold), [`commit`] (with the plans
//! [`kept`] for it), [`release`],
//! [`complete`], [`batch`] (the batch jobs a commit submitted), [`sweep`] (lapsed holds,
//! pruning) and [`status`].

pub mod backend;
pub mod batch;
pub mod commit;
pub mod complete;
pub mod core;
pub mod hold;
pub mod kept;
pub mod ledger;
pub mod merged;
pub mod records;
pub mod release;
pub mod replicated;
pub mod reply;
pub mod status;
pub mod store;
pub mod sweep;

pub use core::{Core, CoreError};

#[cfg(test)]
mod tests;
