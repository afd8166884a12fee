//! fedvol-cli: the `fedvol` command line: offline planning and validation ([`cli`], decision
//! rendering in [`render`]), the federation commands through [`client`], the decision feed
//! ([`feed`]) and the read-only web view ([`ui`]), and the local federations of `fedvol dev` and
//! `fedvol demo` ([`devfed`], [`devslurm`], on the examples built in by [`examples`]), which run
//! the `fedvol-coordinator` and `fedvol-agent` binaries as processes.
//!
//! It shares no code with the coordinator daemon (package `fedvol-coordinator`): both speak
//! through the protocol crate, `fedvol-proto`.

#![warn(missing_docs)]

pub mod cli;
pub mod commands;
pub mod client;
pub mod devfed;
pub mod devslurm;
pub mod examples;
pub mod feed;
pub mod render;
pub mod ui;
