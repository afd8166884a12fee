//! fedvol-cli: the `fedvol` command line. Each command is one type in [`commands`] (offline
//! planning and validation, the federation commands, the web view, `fedvol dev` and `demo`),
//! over what they share in [`cli`] (NATS options, asking the coordinators through [`client`],
//! printing), decision rendering in [`render`], the decision feed ([`feed`]) and the read-only
//! web view ([`ui`]); the local federations of `fedvol dev` and `fedvol demo` ([`devfed`],
//! [`devslurm`], on the examples built in by [`examples`]) run the `fedvol-coordinator` and
//! `fedvol-agent` binaries as processes.
//!
//! It shares no code with the coordinator daemon (package `fedvol-coordinator`): both speak
//! through the protocol crate, `fedvol-proto`.

#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod commands;
pub mod devfed;
pub mod devslurm;
pub mod examples;
pub mod feed;
pub mod render;
pub mod ui;
