//! `fedvol completions <shell>` and the hidden `fedvol __complete` it calls: shell completion
//! scripts (`clap_complete`) generated from the same clap definition the command line is
//! parsed with, so they never disagree with it, and the names (clusters, request ids) the bash
//! script asks the federation for.

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, Leading, Run};
use crate::cli::exit::EXIT_OK;

/// Long help of `fedvol completions`: where each shell looks for the script.
pub const COMPLETIONS_ABOUT: &str = "Print a shell completion script on stdout.

  bash:  fedvol completions bash > ~/.local/share/bash-completion/completions/fedvol
  zsh:   fedvol completions zsh > \"${fpath[1]}/_fedvol\"   (then restart zsh)
  fish:  fedvol completions fish > ~/.config/fish/completions/fedvol.fish

scripts/install writes the bash, zsh and fish scripts and the man pages for you.";

/// Arguments of `fedvol completions`.
#[derive(Debug, clap::Args)]
pub struct Completions {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of the hidden `fedvol __complete`.
#[derive(Debug, clap::Args)]
pub struct Names {
    /// What to list.
    #[arg(value_enum)]
    pub what: Listed,
    /// NATS connection and identity.
    #[command(flatten)]
    pub net: crate::cli::net::NetArgs,
}

/// What `fedvol __complete` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Listed {
    /// The clusters the coordinators know.
    Clusters,
    /// The stored decisions' request ids, newest first.
    Ids,
}

impl Run for Names {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    /// Prints the names `a.what` asks for, one a line, asking the coordinators with a short
    /// timeout (1 s unless `--timeout-ms` says less); prints nothing on any error. Exit 0.
    fn run(self) -> u8 {
        let a = &self;
        use fedvol_proto::NoArgs;
        use fedvol_proto::coordinator as api;
        let mut net = a.net.clone();
        net.timeout_ms = net.timeout_ms.min(1000);
        crate::cli::net::block_on(async {
            let Ok(client) = net.connect().await else {
                return EXIT_OK;
            };
            let names: Vec<String> = match a.what {
                Listed::Clusters => match client.call::<api::Clusters>(&NoArgs {}).await {
                    Ok(Ok(r)) => r.clusters.into_iter().map(|c| c.name).collect(),
                    _ => Vec::new(),
                },
                Listed::Ids => match client.call::<api::List>(&NoArgs {}).await {
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

impl Run for Completions {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Unused
    }

    /// Prints the completion script of `a.shell`; exit 0. The bash script also completes cluster
    /// names and request ids from the federation ([`BASH_NAMES`]); the others complete commands,
    /// flags and fixed values only.
    fn run(self) -> u8 {
        let a = &self;
        let mut cmd = Cli::command();
        clap_complete::generate(a.shell, &mut cmd, "fedvol", &mut std::io::stdout());
        if a.shell == Shell::Bash {
            print!("{BASH_NAMES}");
        }
        EXIT_OK
    }
}
