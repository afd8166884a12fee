//! The `fedvol` command line: argument parsing and dispatch. Each subcommand lives in its own
//! module and returns an [`ExitCode`]-compatible status (DESIGN §4: 0 when a cluster was chosen,
//! 2 when nothing fits, 1 on bad input).

pub mod check;
pub mod dev;
pub mod explain;
pub mod federation;
pub mod net;
pub mod plan;
pub mod template;
pub mod ui;

use clap::{Parser, Subcommand};
use fedvol_common::yaml::Diagnostics;

use crate::render::Output;

/// Exit status: a cluster was chosen / the files are valid.
pub const EXIT_OK: u8 = 0;
/// Exit status: bad input (unreadable or invalid files, bad flags).
pub const EXIT_BAD_INPUT: u8 = 1;
/// Exit status: the input is valid but no cluster can place the workflow.
pub const EXIT_NO_FIT: u8 = 2;

/// fedvol places workflow volumes across a federation of clusters.
#[derive(Debug, Parser)]
#[command(name = "fedvol", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// NATS connection and identity (federation commands).
    #[command(flatten)]
    pub net: net::NetArgs,
}

/// `fedvol` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan a workflow offline against cluster inventories and print the decision document.
    Plan(plan::PlanArgs),
    /// Validate inventories and workflows; print every problem with file:line:column.
    Check(check::CheckArgs),
    /// Render a catalog template with its values files and print the YAML.
    #[command(long_about = template::RENDER_ABOUT)]
    Render(template::RenderArgs),
    /// Submit a workflow to the federation: every cluster plans, one commits.
    Submit(federation::SubmitArgs),
    /// Stored decisions: list, show, watch, replay.
    #[command(subcommand)]
    Decisions(federation::DecisionsCmd),
    /// Ask a cluster why it did not choose a zone, host or provisioner for a decision.
    WhyNot(federation::WhyNotArgs),
    /// End a committed workflow: its cluster frees capacity and reclaims volumes.
    Complete(federation::IdArgs),
    /// The clusters the coordinators know: alive, last seen, inventory version, load.
    Clusters(OutputArgs),
    /// Serve a read-only web view of the federation (decisions, funnels, clusters) until Ctrl-C.
    Ui(ui::UiArgs),
    /// Run a local federation (nats-server, coordinator, one agent per inventory) until Ctrl-C.
    Dev(dev::DevArgs),
    /// Run the local federation, submit every example workflow, show, complete, tear down.
    Demo(dev::DemoArgs),
}

/// Options shared by commands that print a document.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table, env = "FEDVOL_OUTPUT")]
    pub output: Output,
}

/// Prints every diagnostic to stderr, one per line, prefixed with `error: `.
pub fn print_diagnostics(d: &Diagnostics) {
    for x in &d.0 {
        eprintln!("error: {x}");
    }
}

/// Prints notices (skipped documents and the like) to stderr, prefixed with `notice: `.
pub fn print_notices(n: &[fedvol_common::yaml::Diagnostic]) {
    for x in n {
        eprintln!("notice: {x}");
    }
}

/// A file argument as the user wrote it, for messages.
pub fn label(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// Parses the command line and runs it; returns the process exit status.
pub fn run() -> u8 {
    let cli = Cli::parse();
    match cli.command {
        Command::Plan(a) => plan::run(&a, &cli.net.user),
        Command::Check(a) => check::run(&a),
        Command::Render(a) => template::render(&a),
        Command::Submit(a) => federation::submit(&cli.net, &a),
        Command::Decisions(c) => federation::decisions(&cli.net, &c),
        Command::WhyNot(a) => federation::why_not(&cli.net, &a),
        Command::Complete(a) => federation::complete(&cli.net, &a),
        Command::Clusters(o) => federation::clusters(&cli.net, &o),
        Command::Ui(a) => ui::run(&cli.net, &a),
        Command::Dev(a) => dev::dev(&a),
        Command::Demo(a) => dev::demo(&a),
    }
}
