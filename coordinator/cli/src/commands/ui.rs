//! `fedvol ui`: serves the read-only web view of the federation ([`crate::ui`]) with the
//! NATS connection and identity of the other federation commands, until Ctrl-C.

use std::net::SocketAddr;

use super::{Leading, Run};
use crate::cli::exit::EXIT_BAD_INPUT;
use crate::cli::net::NetArgs;

/// `fedvol ui`.
#[derive(Debug, clap::Args)]
pub struct Ui {
    /// Address to serve on. The view has no login of its own and shows every decision the
    /// NATS credentials can read: keep it on loopback unless whoever can reach it may see
    /// them (port 0 picks a free port; the address is printed on stderr).
    #[arg(long, default_value = "127.0.0.1:8080", env = "FEDVOL_UI_LISTEN")]
    pub listen: SocketAddr,
    /// Another name the view may be reached under (`Host` header), e.g. a reverse proxy's
    /// `view.example.org` or `view.example.org:443`; repeatable. Requests under any other name
    /// than the listen address (and `localhost` on loopback) are refused with 421, so a
    /// DNS-rebinding page cannot read the view.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// Earlier releases' `--bucket`: a label on the pages that nothing read (the view reads
    /// decisions through the coordinators, whatever their bucket). Accepted, hidden, ignored
    /// with a warning.
    #[arg(long, hide = true, value_name = "BUCKET")]
    pub bucket: Option<String>,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

impl Ui {
    /// What this command line is warned about before serving: an address other than loopback
    /// (anyone who reaches it sees every decision), and `--bucket`, which is ignored.
    fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.listen.ip().is_loopback() {
            out.push(format!(
                "serving on {}, not loopback: anyone who can reach it sees every decision these NATS credentials can read (it answers only under this address and the --allowed-host names{})",
                self.listen,
                if self.allowed_hosts.is_empty() {
                    ": pass --allowed-host NAME for each name it is reached under"
                } else {
                    ""
                }
            ));
        }
        if let Some(b) = &self.bucket {
            out.push(format!(
                "--bucket {b} is ignored: the view reads the decisions through the coordinators, whatever their bucket (drop the option)"
            ));
        }
        out
    }
}

impl Run for Ui {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    /// Runs `fedvol ui`: exit 1 when NATS, the coordinators or the address cannot be used; serves
    /// until interrupted otherwise (exit 0).
    fn run(self) -> u8 {
        let a = &self;
        let net = &a.net;
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let _ = tracing_subscriber::fmt()
            .fmt_fields(fedvol_obs::logs::escaped_fields(fedvol_common::limits::printable))
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init();
        for w in a.warnings() {
            eprintln!("warning: {w}");
        }
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return EXIT_BAD_INPUT;
            }
        };
        rt.block_on(async {
            let client = match net.connect().await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return EXIT_BAD_INPUT;
                }
            };
            let served = crate::ui::serve(client, a.listen, &a.allowed_hosts, |addr| {
                eprintln!("fedvol ui: serving the read-only view on http://{addr}/ (Ctrl-C to stop)");
            });
            tokio::select! {
                r = served => match r {
                    Ok(()) => crate::cli::exit::EXIT_OK,
                    Err(e) => {
                        eprintln!("error: {e}");
                        EXIT_BAD_INPUT
                    }
                },
                _ = tokio::signal::ctrl_c() => crate::cli::exit::EXIT_OK,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `--bucket` was a label on the pages and read by nothing: a command line that still gives
    /// it runs, with a warning saying it is ignored, and help no longer offers it.
    #[test]
    fn the_bucket_flag_is_accepted_with_a_warning_and_no_longer_offered() {
        let cli = crate::commands::parse(["fedvol", "ui", "--bucket", "other"]).expect("still accepted");
        let crate::commands::Command::Ui(ui) = cli.command else {
            panic!("not ui: {:?}", cli.command)
        };
        let warnings = ui.warnings();
        assert!(
            warnings.iter().any(|w| w.contains("--bucket") && w.contains("ignored")),
            "{warnings:?}"
        );
        let plain = crate::commands::parse(["fedvol", "ui"]).expect("parses");
        let crate::commands::Command::Ui(plain) = plain.command else {
            panic!("not ui")
        };
        assert!(plain.warnings().is_empty(), "{:?}", plain.warnings());
        let mut root = crate::commands::Cli::command();
        let help = root
            .find_subcommand_mut("ui")
            .expect("ui")
            .render_long_help()
            .to_string();
        assert!(!help.contains("--bucket"), "{help}");
    }
}
