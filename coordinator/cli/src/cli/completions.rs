//! `fedvol completions <shell>` and `fedvol man [--out DIR]`: shell completion scripts
//! (`clap_complete`) and man pages (`clap_mangen`), both generated from the same clap definition
//! the command line is parsed with, so they never disagree with it.

use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, EXIT_BAD_INPUT, EXIT_OK};

/// Long help of `fedvol completions`: where each shell looks for the script.
pub const COMPLETIONS_ABOUT: &str = "Print a shell completion script on stdout.

  bash:  fedvol completions bash > ~/.local/share/bash-completion/completions/fedvol
  zsh:   fedvol completions zsh > \"${fpath[1]}/_fedvol\"   (then restart zsh)
  fish:  fedvol completions fish > ~/.config/fish/completions/fedvol.fish

scripts/install writes the bash, zsh and fish scripts and the man pages for you.";

/// Arguments of `fedvol completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of `fedvol man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write `fedvol.1` and `fedvol-<subcommand>.1` into (created if missing);
    /// without it, `fedvol.1` is printed on stdout (`fedvol man | man -l -`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Arguments of the hidden `fedvol __complete`.
#[derive(Debug, clap::Args)]
pub struct NamesArgs {
    /// What to list.
    #[arg(value_enum)]
    pub what: Names,
    /// NATS connection and identity.
    #[command(flatten)]
    pub net: super::net::NetArgs,
}

/// What `fedvol __complete` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Names {
    /// The clusters the coordinators know.
    Clusters,
    /// The stored decisions' request ids, newest first.
    Ids,
}

/// Prints the names `a.what` asks for, one a line, asking the coordinators with a short
/// timeout (1 s unless `--timeout-ms` says less); prints nothing on any error. Exit 0.
pub fn names(a: &NamesArgs) -> u8 {
    use fedvol_proto::NoArgs;
    use fedvol_proto::coordinator as api;
    let mut net = a.net.clone();
    net.timeout_ms = net.timeout_ms.min(1000);
    super::net::block_on(async {
        let Ok(client) = net.connect().await else {
            return EXIT_OK;
        };
        let names: Vec<String> = match a.what {
            Names::Clusters => match client.call::<api::Clusters>(&NoArgs {}).await {
                Ok(Ok(r)) => r.clusters.into_iter().map(|c| c.name).collect(),
                _ => Vec::new(),
            },
            Names::Ids => match client.call::<api::List>(&NoArgs {}).await {
                Ok(Ok(r)) => r.decisions.into_iter().map(|d| d.request_id).collect(),
                _ => Vec::new(),
            },
        };
        for n in names {
            println!("{n}");
        }
        EXIT_OK
    })
}

/// Bash: cluster names after `--cluster`, `--why-not-cluster` and `clusters show`, request
/// ids after `why-not`, `complete`, `decisions show` and `decisions replay`, asked of the
/// federation (`fedvol __complete`); everything else from clap's script (`_fedvol`).
const BASH_NAMES: &str = r#"
# Cluster names and request ids, asked of the federation when completing.
_fedvol_names() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" what=""
    case "$prev" in
        --cluster|--why-not-cluster) what=clusters ;;
        why-not|complete) [[ "$cur" != -* ]] && what=ids ;;
        show|replay)
            [[ "${COMP_WORDS[1]}" == decisions && "$cur" != -* ]] && what=ids
            [[ "${COMP_WORDS[1]}" == clusters && "$prev" == show ]] && what=clusters ;;
    esac
    if [[ -n "$what" ]]; then
        COMPREPLY=($(compgen -W "$(fedvol __complete "$what" 2>/dev/null)" -- "$cur"))
        return 0
    fi
    _fedvol "$@"
}
complete -F _fedvol_names -o nosort -o bashdefault -o default fedvol
"#;

/// Prints the completion script of `a.shell`; exit 0. The bash script also completes cluster
/// names and request ids from the federation ([`BASH_NAMES`]); the others complete commands,
/// flags and fixed values only.
pub fn completions(a: &CompletionsArgs) -> u8 {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "fedvol", &mut std::io::stdout());
    if a.shell == Shell::Bash {
        print!("{BASH_NAMES}");
    }
    EXIT_OK
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

/// Writes the man pages (see [`ManArgs::out`]); exit 1 when a file cannot be written.
pub fn man(a: &ManArgs) -> u8 {
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
