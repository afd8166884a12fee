//! The `fedvol` command line: argument parsing and dispatch. Each subcommand lives in its own
//! module and returns an [`ExitCode`]-compatible status (docs/design.md §4: 0 when a cluster was chosen,
//! 2 when nothing fits, 1 on bad input; 64 when the command line itself is wrong; 75 when
//! clusters did not answer and nothing was placed: ask again).

pub mod args;
pub mod ask;
pub mod check;
pub mod choice;
pub mod completions;
pub mod context;
pub mod dev;
pub mod exit;
pub mod explain;
pub mod federation;
pub mod follow;
pub mod inputs;
pub mod net;
pub mod pending;
pub mod plan;
pub mod print;
pub mod resume;
pub mod template;
pub mod ui;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use exit::{EXIT_BAD_INPUT, EXIT_NO_FIT, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, usage_exit};

/// fedvol places workflow volumes across a federation of clusters.
#[derive(Debug, Parser)]
#[command(name = "fedvol", version, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// NATS options written before the subcommand (hidden; see [`net::LeadingNet`]).
    #[command(flatten)]
    pub leading: net::LeadingNet,
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
    /// Why a cluster lost a decision, or why it did not choose a zone, host or provisioner.
    WhyNot(federation::WhyNotArgs),
    /// End a committed workflow: its cluster frees capacity and reclaims volumes.
    Complete(args::IdArgs),
    /// Cancel a committed workflow's jobs on its cluster (Slurm's `scancel`), then complete it.
    Cancel(args::IdArgs),
    /// The clusters the coordinators know: alive, last seen, inventory version, load.
    Clusters(federation::ClustersArgs),
    /// Serve a read-only web view of the federation (decisions, funnels, clusters) until Ctrl-C.
    Ui(ui::UiArgs),
    /// Run a local federation (nats-server, coordinator, one agent per inventory) until Ctrl-C.
    Dev(dev::DevArgs),
    /// Run the local federation, submit every example workflow, show, complete, tear down.
    Demo(dev::DemoArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(long_about = completions::COMPLETIONS_ABOUT, visible_alias = "completion")]
    Completions(completions::CompletionsArgs),
    /// Write man pages (fedvol.1 and one per subcommand) to a directory, or fedvol.1 to stdout.
    Man(completions::ManArgs),
    /// Names for shell completion, one a line: the clusters or the request ids the coordinators
    /// know (the bash script of `fedvol completions` calls it; quiet and quick on any error).
    #[command(name = "__complete", hide = true)]
    CompleteNames(completions::NamesArgs),
}

impl Command {
    /// The NATS options of a federation command (`None` for the offline ones).
    pub fn net_mut(&mut self) -> Option<&mut net::NetArgs> {
        use federation::DecisionsCmd as D;
        match self {
            Command::Submit(a) => Some(&mut a.net),
            Command::Decisions(D::List(a)) => Some(&mut a.net),
            Command::Decisions(D::Show(a)) => Some(&mut a.net),
            Command::Decisions(D::Replay(a)) => Some(&mut a.net),
            Command::Decisions(D::Watch(a)) => Some(&mut a.net),
            Command::WhyNot(a) => Some(&mut a.net),
            Command::Complete(a) | Command::Cancel(a) => Some(&mut a.net),
            Command::Clusters(a) => Some(&mut a.net),
            Command::Ui(a) => Some(&mut a.net),
            Command::CompleteNames(a) => Some(&mut a.net),
            _ => None,
        }
    }
}

/// Parses the command line (`args`, the program name first) into a [`Cli`] with the options
/// written before the subcommand applied ([`net::LeadingNet`]).
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
    if let Some(net) = cli.command.net_mut() {
        leading.apply(net, leaf);
    } else if let Command::Plan(p) = &mut cli.command {
        if let Some(u) = leading.user()
            && !net::given_after(leaf, "user")
        {
            p.user = u.to_string();
        }
    } else if leading.any() {
        eprintln!("warning: the NATS options before the subcommand are not used by it");
    }
    Ok(cli)
}

/// Parses the command line and runs it; returns the process exit status.
pub fn run() -> u8 {
    let cli = match parse(std::env::args_os()) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return usage_exit(&e);
        }
    };
    match cli.command {
        Command::Plan(a) => plan::run(&a),
        Command::Check(a) => check::run(&a),
        Command::Render(a) => template::render(&a),
        Command::Submit(a) => federation::submit(&a),
        Command::Decisions(c) => federation::decisions(&c),
        Command::WhyNot(a) => federation::why_not(&a),
        Command::Complete(a) => federation::complete(&a, false),
        Command::Cancel(a) => federation::complete(&a, true),
        Command::Clusters(a) => federation::clusters(&a),
        Command::Dev(a) => dev::dev(&a),
        Command::Demo(a) => dev::demo(&a),
        Command::Completions(a) => completions::completions(&a),
        Command::Man(a) => completions::man(&a),
        Command::CompleteNames(a) => completions::names(&a),
        Command::Ui(a) => ui::run(&a),
    }
}

#[cfg(test)]
mod tests {
    /// Every command line of every subcommand (`fedvol <path> <its required arguments>`), with
    /// a value for each required argument.
    fn leaves() -> Vec<Vec<String>> {
        fn walk(cmd: &clap::Command, path: &[String], out: &mut Vec<Vec<String>>) {
            let mut line = path.to_vec();
            for a in cmd.get_arguments().filter(|a| a.is_required_set()) {
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
            let mut argv = vec!["fedvol", "-u", "lead", "--nats", "nats://lead:4222", "--timeout-ms", "7"];
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
            let plan_user = match &cli.command {
                super::Command::Plan(p) => Some(p.user.clone()),
                _ => None,
            };
            match (cli.command.net_mut(), plan_user) {
                (Some(n), _) => {
                    assert!(has_net, "{line:?} claims NATS options it does not offer");
                    assert_eq!(
                        (n.user.as_str(), n.nats.url.as_deref(), n.timeout_ms),
                        ("lead", Some("nats://lead:4222"), 7),
                        "{line:?}"
                    );
                }
                (None, Some(u)) => assert_eq!(u, "lead", "{line:?}"),
                (None, _) => assert!(!has_net, "{line:?} drops the NATS options given before it"),
            }
        }
    }
}
