//! The agent's state: durable records ([`records`]) in a redb file ([`store`]), their
//! in-memory form and the effective inventory ([`ledger`]), and the operations that change them
//! ([`core`]).

pub mod core;
pub mod ledger;
pub mod records;
pub mod store;

pub use core::{Core, CoreError};

#[cfg(test)]
mod tests;
