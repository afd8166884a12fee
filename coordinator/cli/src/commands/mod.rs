//! The `fedvol` commands, one module each, each command one type implementing [`Run`]: where
//! the NATS options written before the subcommand go ([`Run::leading`]) and what it does
//! ([`Run::run`]). [`Command`] lists them, one line each, through `commands!`, which writes
//! the dispatch: adding a command is one file and one line there, and a command that does not
//! say where its leading options go does not compile.
//!
//! Every command returns its exit status ([`crate::cli::exit`]: 0 done / a cluster was chosen,
//! 2 nothing fits, 1 bad input or an error, 64 a wrong command line, 75 clusters did not
//! answer). What commands share (NATS options, asking the coordinators, printing) is in
//! [`crate::cli`].

pub mod check;
pub mod clusters;
pub mod complete;
pub mod completions;
pub mod decisions;
pub mod dev;
pub mod man;
pub mod plan;
pub mod render;
pub mod submit;
pub mod ui;
pub mod what_if;
pub mod why_not;

use clap::{CommandFactory, FromArgMatches, Parser};

use crate::cli::exit::usage_exit;
use crate::cli::net::{LeadingNet, NetArgs, given_after};

/// Where a command takes the options written before the subcommand (`fedvol -u alice submit
/// wf.yaml`, [`LeadingNet`]).
pub enum Leading<'a> {
    /// Into its NATS connection and identity (a federation command).
    Net(&'a mut NetArgs),
    /// Only the user, into this field (`plan`: access policies name users and groups).
    User(&'a mut String),
    /// Nowhere (an offline command): given ones are warned about.
    Unused,
}

/// One `fedvol` command (a subcommand's arguments, parsed).
pub trait Run {
    /// Where the options written before the subcommand go. No default: every command says.
    fn leading(&mut self) -> Leading<'_>;
    /// Runs the command; returns the process exit status.
    fn run(self) -> u8;
}

/// Declares an enum of commands (`Variant(Type),` lines with their clap attributes and docs)
/// and its [`Run`] impl: each method one exhaustive match over the variants, so the enum is
/// the only list to keep.
macro_rules! commands {
    (
        $(#[$enum_meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$meta:meta])* $variant:ident($ty:ty), )*
        }
    ) => {
        $(#[$enum_meta])*
        $vis enum $name {
            $( $(#[$meta])* $variant($ty), )*
        }

        impl $crate::commands::Run for $name {
            fn leading(&mut self) -> $crate::commands::Leading<'_> {
                match self {
                    $( $name::$variant(c) => $crate::commands::Run::leading(c), )*
                }
            }

            fn run(self) -> u8 {
                match self {
                    $( $name::$variant(c) => $crate::commands::Run::run(c), )*
                }
            }
        }
    };
}
pub(crate) use commands;

/// fedvol places workflow volumes across a federation of clusters.
#[derive(Debug, Parser)]
#[command(name = "fedvol", version, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// NATS options written before the subcommand (hidden; see [`LeadingNet`]).
    #[command(flatten)]
    pub leading: LeadingNet,
}

commands! {
    /// `fedvol` subcommands.
    #[derive(Debug, clap::Subcommand)]
    pub enum Command {
        /// Plan a workflow offline against cluster inventories and print the decision document.
        Plan(plan::Plan),
        /// Validate inventories and workflows; print every problem with file:line:column.
        Check(check::Check),
        /// Render a catalog template with its values files and print the YAML.
        #[command(long_about = render::RENDER_ABOUT)]
        Render(render::Render),
        /// Submit a workflow to the federation: every cluster plans, one commits.
        Submit(submit::Submit),
        /// Read the stored decisions, one command for each view (`fedvol decisions --help`).
        #[command(subcommand)]
        Decisions(decisions::Decisions),
        /// Why a cluster lost a decision, or why it did not choose a zone, host or provisioner.
        WhyNot(why_not::WhyNot),
        /// End a committed workflow: its cluster frees capacity and reclaims volumes.
        Complete(complete::Complete),
        /// Cancel a committed workflow's jobs on its cluster (Slurm's `scancel`), then complete it.
        Cancel(complete::Cancel),
        /// Plan the recorded decisions again with a cluster drained, removed, added or with
        /// another inventory, and say what would move; holds and commits nothing.
        WhatIf(what_if::WhatIf),
        /// The clusters the coordinators know: alive, last seen, inventory version, load, drained;
        /// operators drain and undrain them.
        Clusters(clusters::Clusters),
        /// Serve a read-only web view of the federation (decisions, funnels, clusters) until Ctrl-C.
        Ui(ui::Ui),
        /// Run a local federation (nats-server, coordinator, one agent per inventory) until Ctrl-C.
        Dev(dev::Dev),
        /// Run the local federation, submit every example workflow, show, complete, tear down.
        Demo(dev::Demo),
        /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
        #[command(long_about = completions::COMPLETIONS_ABOUT, visible_alias = "completion")]
        Completions(completions::Completions),
        /// Write man pages (fedvol.1 and one per subcommand) to a directory, or fedvol.1 to stdout.
        Man(man::Man),
        /// Names for shell completion, one a line: the clusters or the request ids the coordinators
        /// know (the bash script of `fedvol completions` calls it; quiet and quick on any error).
        #[command(name = "__complete", hide = true)]
        CompleteNames(completions::Names),
    }
}

/// Parses the command line (`args`, the program name first) into a [`Cli`] with the options
/// written before the subcommand applied where the command takes them ([`Run::leading`]; an
/// option also given after the subcommand keeps that value).
///
/// Errors: clap's, for help and version too (print them with [`clap::Error::print`]).
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = Cli::command().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    let mut leaf = &matches;
    while let Some((_, m)) = leaf.subcommand() {
        leaf = m;
    }
    let leading = cli.leading.clone();
    match cli.command.leading() {
        Leading::Net(net) => leading.apply(net, leaf),
        Leading::User(user) => {
            if let Some(u) = leading.user()
                && !given_after(leaf, "user")
            {
                *user = u.to_string();
            }
        }
        Leading::Unused if leading.any() => {
            eprintln!("warning: the NATS options before the subcommand are not used by it");
        }
        Leading::Unused => {}
    }
    Ok(cli)
}

/// Parses the command line and runs it; returns the process exit status.
pub fn run() -> u8 {
    match parse(std::env::args_os()) {
        Ok(cli) => cli.command.run(),
        Err(e) => {
            let _ = e.print();
            usage_exit(&e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Run;

    /// Every command line of every subcommand (`fedvol <path> <its required arguments>`), with
    /// a value for each required argument.
    fn leaves() -> Vec<Vec<String>> {
        fn walk(cmd: &clap::Command, path: &[String], out: &mut Vec<Vec<String>>) {
            let mut line = path.to_vec();
            // `clusters drain --reason` is required unless `--what-if` (clap shows no getter
            // for that): given as if required.
            let conditional = |a: &clap::Arg| a.get_long() == Some("reason") && cmd.get_name() == "drain";
            for a in cmd.get_arguments().filter(|a| a.is_required_set() || conditional(a)) {
                let value = a
                    .get_possible_values()
                    .first()
                    .map_or("x".to_string(), |v| v.get_name().to_string());
                match a.get_long() {
                    Some(long) if !a.is_positional() => line.extend([format!("--{long}"), value]),
                    _ => line.push(value),
                }
            }
            if !cmd.is_subcommand_required_set() {
                out.push(line);
            }
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                let mut p = path.to_vec();
                p.push(sub.get_name().to_string());
                walk(sub, &p, out);
            }
        }
        let mut root = <super::Cli as clap::CommandFactory>::command();
        root.build();
        let mut out = Vec::new();
        for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, &[sub.get_name().to_string()], &mut out);
        }
        out
    }

    /// NATS options written before the subcommand reach every command that has them (a
    /// command that forgot to hand them over would silently drop `fedvol -u alice <command>`),
    /// the user reaches `plan`, and no other command claims them.
    #[test]
    fn options_before_the_subcommand_reach_every_command_that_has_them() {
        let all = leaves();
        assert!(all.len() > 15, "{all:?}");
        for line in all {
            let mut argv = vec![
                "fedvol",
                "-u",
                "lead",
                "--nats",
                "nats://lead:4222",
                "--timeout-ms",
                "7",
            ];
            argv.extend(line.iter().map(String::as_str));
            let mut cli = super::parse(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let has_net = {
                let mut c = <super::Cli as clap::CommandFactory>::command();
                c.build();
                let mut leaf = &c;
                for name in &line {
                    match leaf.find_subcommand(name) {
                        Some(s) => leaf = s,
                        None => break,
                    }
                }
                leaf.get_arguments().any(|a| a.get_long() == Some("nats"))
            };
            match cli.command.leading() {
                super::Leading::Net(n) => {
                    assert!(has_net, "{line:?} claims NATS options it does not offer");
                    assert_eq!(
                        (n.user.as_str(), n.nats.url.as_deref(), n.timeout_ms),
                        ("lead", Some("nats://lead:4222"), 7),
                        "{line:?}"
                    );
                }
                super::Leading::User(u) => {
                    assert!(!has_net, "{line:?} drops the NATS options given before it");
                    assert_eq!(u, "lead", "{line:?}");
                }
                super::Leading::Unused => assert!(!has_net, "{line:?} drops the NATS options given before it"),
            }
        }
    }
}
