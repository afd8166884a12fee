//! fedvol-coordinator: the coordinator daemon `fedvol-coordinator` ([`daemon`]). The `fedvol`
//! CLI is its own package, `fedvol-cli` (`coordinator/cli`); the two share code only through
//! `fedvol-proto`.

#![warn(missing_docs)]

pub mod daemon;
