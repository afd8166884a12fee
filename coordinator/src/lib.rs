//! fedvol-coordinator: the `fedvol` CLI (offline planning and validation today; the
//! coordinator daemon's federation logic joins it in later issues) and decision rendering.

#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod render;
