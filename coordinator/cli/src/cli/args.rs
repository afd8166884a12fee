//! Argument groups several commands flatten into theirs: the output format, and a decision's
//! id with the output format and the NATS options.

use super::net::NetArgs;
use crate::render::Output;

/// Options shared by commands that print a document.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table, env = "FEDVOL_OUTPUT")]
    pub output: Output,
}

/// A decision id and the output format.
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// The decision's request id, or a unique start of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}
