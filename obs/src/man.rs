//! Man pages of fedvol's three programs, from their clap definitions (`clap_mangen`), with the
//! sections a reader of `man` looks for that clap does not know: ENVIRONMENT, EXIT STATUS and
//! EXAMPLES (the order of man-pages(7)'s "Sections within a manual page").

use std::io::Write;

/// The sections [`render`] adds after the options and subcommands: `(term, text)` pairs,
/// each rendered as a tagged paragraph (`.TP`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra<'a> {
    /// Environment variables and what each sets.
    pub environment: &'a [(&'a str, &'a str)],
    /// Exit statuses and what each means.
    pub exit_status: &'a [(&'a str, &'a str)],
    /// Command lines and what each does.
    pub examples: &'a [(&'a str, &'a str)],
}

/// Both daemons' ENVIRONMENT entry for their options' variables.
pub const DAEMON_VARIABLES: (&str, &str) = (
    "FEDVOL_*",
    "Each option's variable, as its [env: ...] says; flags win over variables, which win over the configuration file.",
);

/// Both daemons' ENVIRONMENT entry for the NATS password given in the environment.
pub const DAEMON_NATS_PASSWORD: (&str, &str) = (
    "FEDVOL_NATS_PASSWORD",
    "The NATS user's password (never in the URL); prefer FEDVOL_NATS_PASSWORD_FILE or nats.passwordFile.",
);

/// Both daemons' EXIT STATUS entry for a stop asked for.
pub const DAEMON_STOPPED: (&str, &str) = ("0", "Stopped (SIGTERM or SIGINT).");

/// `text` as roff body text: backslashes escaped, hyphens as `\-` (so they can be searched
/// for and copied), and a line that would start with `.` or `'` guarded by `\&`.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn section(out: &mut Vec<u8>, title: &str, items: &[(&str, &str)], bold_terms: bool) -> std::io::Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    writeln!(out, ".SH \"{title}\"")?;
    for (term, text) in items {
        let term = roff_text(term);
        if bold_terms {
            writeln!(out, ".TP\n\\fB{term}\\fR\n{}", roff_text(text))?;
        } else {
            writeln!(out, ".TP\n{term}\n{}", roff_text(text))?;
        }
    }
    Ok(())
}

/// The man page of `cmd` (section 1): clap_mangen's title, NAME, SYNOPSIS, DESCRIPTION,
/// OPTIONS and SUBCOMMANDS, then `extra`'s ENVIRONMENT, EXIT STATUS and EXAMPLES, then VERSION.
///
/// Errors: only those of writing to memory (none in practice).
pub fn render(cmd: clap::Command, extra: &Extra<'_>) -> std::io::Result<Vec<u8>> {
    let mut cmd = cmd;
    cmd.build();
    let has_args = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let versioned = cmd.get_version().is_some();
    let man = clap_mangen::Man::new(cmd);
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if has_args {
        man.render_options_section(&mut out)?;
    }
    if has_subcommands {
        man.render_subcommands_section(&mut out)?;
    }
    section(&mut out, "ENVIRONMENT", extra.environment, true)?;
    section(&mut out, "EXIT STATUS", extra.exit_status, true)?;
    section(&mut out, "EXAMPLES", extra.examples, true)?;
    if versioned {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// Prints `cmd`'s man page ([`render`]) on stdout, as a daemon's `--man` does: success, or
/// exit code 1 after `<program>: cannot print the man page: <error>` on stderr.
pub fn print(program: &str, cmd: clap::Command, extra: &Extra<'_>) -> std::process::ExitCode {
    use std::io::Write;
    match render(cmd, extra).and_then(|page| std::io::stdout().write_all(&page)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: cannot print the man page: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extra_sections_follow_the_options() {
        let cmd = clap::Command::new("demo").version("1.0").about("A demo.").arg(
            clap::Arg::new("verbose")
                .long("verbose")
                .action(clap::ArgAction::SetTrue),
        );
        let extra = Extra {
            environment: &[("DEMO_URL", "the server's URL")],
            exit_status: &[("0", "done"), ("64", "usage error")],
            examples: &[("demo --verbose", "talks a lot")],
        };
        let page = String::from_utf8(render(cmd, &extra).unwrap()).unwrap();
        let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} in {page}"));
        assert!(at(".SH OPTIONS") < at(".SH \"ENVIRONMENT\""));
        assert!(at(".SH \"ENVIRONMENT\"") < at(".SH \"EXIT STATUS\""));
        assert!(at(".SH \"EXIT STATUS\"") < at(".SH \"EXAMPLES\""));
        assert!(page.contains("demo \\-\\-verbose"), "{page}");
        assert_eq!(roff_text(".x\n'y\na\\b"), "\\&.x\n\\&'y\na\\eb");
    }
}
