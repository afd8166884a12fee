//! fedvol-coordinator: the `fedvol` CLI (offline planning and validation, and the federation
//! commands through [`client`]), the coordinator daemon `fedvol-coordinator` ([`daemon`]), and
//! decision rendering.

#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod daemon;
pub mod devfed;
pub mod devslurm;
pub mod feed;
pub mod render;
pub mod ui;
