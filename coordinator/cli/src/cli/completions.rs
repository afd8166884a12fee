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

/// Prints the completion script of `a.shell`; exit 0.
pub fn completions(a: &CompletionsArgs) -> u8 {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "fedvol", &mut std::io::stdout());
    EXIT_OK
}

/// Writes the man pages (see [`ManArgs::out`]); exit 1 when a file cannot be written.
pub fn man(a: &ManArgs) -> u8 {
    let cmd = Cli::command();
    let result = match &a.out {
        Some(dir) => std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(cmd, dir))
            .map(|()| eprintln!("man pages written to {}", dir.display())),
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout()),
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            let place = a.out.as_ref().map_or("stdout".to_string(), |d| d.display().to_string());
            eprintln!("error: cannot write the man pages to {place}: {e}");
            EXIT_BAD_INPUT
        }
    }
}
