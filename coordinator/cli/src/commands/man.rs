//! `fedvol man [--out DIR]`: man pages (`clap_mangen`, through `fedvol_obs::man`) generated
//! from the same clap definition the command line is parsed with, so they never disagree with
//! it: `fedvol.1` with the ENVIRONMENT, EXIT STATUS and EXAMPLES sections, and one page per
//! subcommand.

use std::path::PathBuf;

use clap::CommandFactory;

use super::{Cli, Leading, Run};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};

/// Arguments of `fedvol man`.
#[derive(Debug, clap::Args)]
pub struct Man {
    /// Directory to write `fedvol.1` and `fedvol-<subcommand>.1` into (created if missing);
    /// without it, `fedvol.1` is printed on stdout (`fedvol man | man -l -`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The ENVIRONMENT section of `fedvol.1`.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "FEDVOL_NATS_URL",
        "The NATS server(s), as --nats; before the context file of fedvol dev.",
    ),
    (
        "FEDVOL_NATS_USER, FEDVOL_NATS_PASSWORD",
        "The NATS login and its password (never in the URL); with a password and no user, -u is the login.",
    ),
    (
        "FEDVOL_NATS_CREDS, FEDVOL_NATS_NKEY",
        "A NATS credentials file or nkey seed file instead of a password.",
    ),
    (
        "FEDVOL_TLS_CA, FEDVOL_TLS_CERT, FEDVOL_TLS_KEY",
        "TLS: the CA to trust, and a client certificate and key for mutual TLS.",
    ),
    (
        "FEDVOL_NATS_INBOX_PREFIX",
        "The reply inbox prefix (default _INBOX_<NATS user> for the shipped secure configurations).",
    ),
    ("FEDVOL_USER", "The user requests are made for (-u)."),
    ("FEDVOL_SUBJECT_PREFIX", "The subject prefix (default fedvol.v1)."),
    (
        "FEDVOL_OUTPUT",
        "The default output format (-o): table, wide, json, yaml.",
    ),
    (
        "FEDVOL_CONTEXT",
        "The context file fedvol dev writes and later commands read (default $XDG_RUNTIME_DIR/fedvol/dev.env, else ~/.config/fedvol/dev.env); each run also keeps dev.env.<pid> beside it.",
    ),
    (
        "FEDVOL_STATE_DIR",
        "Where the CLI remembers submits whose outcome it did not learn (default $XDG_STATE_HOME/fedvol, else ~/.local/state/fedvol).",
    ),
    ("FEDVOL_UI_LISTEN", "The address fedvol ui serves on (--listen)."),
    (
        "COLUMNS",
        "The width the human views fit (default: the terminal's, else 100).",
    ),
];

/// The EXIT STATUS section of every `fedvol` page.
const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "Done; for plan and submit, a cluster was chosen (or the submit was queued).",
    ),
    (
        "1",
        "Bad input (a file that cannot be read or is invalid), or an error: no NATS, no coordinator, no answer, a refused request; fedvol dev: a process it started exited.",
    ),
    (
        "2",
        "The input is valid but no cluster can place the workflow, or the coordinators' policy refused it (quota_exceeded, queue_full, queue_timeout); the decision is still printed.",
    ),
    (
        "64",
        "The command line is wrong: an unknown subcommand or flag, a missing or bad argument (sysexits EX_USAGE).",
    ),
    (
        "75",
        "submit: not placed because clusters did not answer and none that answered can place the workflow (clusters_unavailable); nothing was booked; submit again (sysexits EX_TEMPFAIL).",
    ),
];

/// The EXAMPLES section of `fedvol.1`.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "fedvol dev",
        "A local federation (nats-server, a coordinator, the example clusters) until Ctrl-C; it prints the example workflows' paths.",
    ),
    (
        "fedvol submit -u alice -g researchers wf.yaml",
        "Every cluster plans the workflow, one commits; the decision is printed.",
    ),
    (
        "fedvol decisions list",
        "Stored decisions, newest first; ids are shown whole, or by a unique start.",
    ),
    (
        "fedvol why-not scratch-fast-Ij --cluster cluster-a",
        "Why cluster-a lost that decision (an id's unique start is enough).",
    ),
    (
        "fedvol plan -i a.yaml -i b.yaml wf.yaml",
        "The same decision offline, without NATS.",
    ),
    (
        "fedvol check inventory.yaml wf.yaml",
        "Every problem of the files, with file:line:column.",
    ),
];

/// Every page `fedvol man --out` writes: `(file name, page)`; `fedvol.1` with the
/// ENVIRONMENT, EXIT STATUS and EXAMPLES sections, each subcommand's page with EXIT STATUS.
///
/// Errors: only those of writing to memory.
pub fn pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, out)?;
        }
        let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string();
        let extra = if name == "fedvol" {
            fedvol_obs::man::Extra {
                environment: ENVIRONMENT,
                exit_status: EXIT_STATUS,
                examples: EXAMPLES,
            }
        } else {
            fedvol_obs::man::Extra {
                exit_status: EXIT_STATUS,
                ..Default::default()
            }
        };
        out.push((format!("{name}.1"), fedvol_obs::man::render(cmd.clone(), &extra)?));
        Ok(())
    }
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let mut out = Vec::new();
    walk(&root, &mut out)?;
    Ok(out)
}

impl Run for Man {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Unused
    }

    /// Writes the man pages (see [`Man::out`]); exit 1 when a file cannot be written.
    fn run(self) -> u8 {
        let a = &self;
        let result = pages().and_then(|pages| match &a.out {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                for (name, page) in &pages {
                    std::fs::write(dir.join(name), page)?;
                }
                eprintln!("man pages written to {}", dir.display());
                Ok(())
            }
            None => {
                use std::io::Write;
                let top = pages
                    .iter()
                    .find(|(n, _)| n == "fedvol.1")
                    .map(|(_, p)| p.as_slice())
                    .unwrap_or_default();
                std::io::stdout().write_all(top)
            }
        });
        match result {
            Ok(()) => EXIT_OK,
            Err(e) => {
                let place = a.out.as_ref().map_or("stdout".to_string(), |d| d.display().to_string());
                eprintln!("error: cannot write the man pages to {place}: {e}");
                EXIT_BAD_INPUT
            }
        }
    }
}
