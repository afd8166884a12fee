//! fedvol-coordinator: the coordinator daemon `fedvol-coordinator` ([`daemon`]). The `fedvol`
//! CLI is its own package, `fedvol-cli` (`coordinator/cli`); neither depends on the other: they
//! share the contract (`fedvol-proto`) and the crates below it (`fedvol-common`,
//! `fedvol-formats`, `fedvol-obs`).

#![warn(missing_docs)]

pub mod daemon;
