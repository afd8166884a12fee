//! One start-up for both daemons' `main`: their hidden `--man` ([`Daemon::main_or_man`]), the
//! log subscriber, the tokio runtime, the run, and the exit code. Both daemons print a failure
//! as one line, `<program>: <error>`, and exit 1.

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

/// How a daemon's process is started.
#[derive(Debug, Clone, Copy)]
pub struct Daemon {
    /// The program name, prefixed to every line printed on failure (`fedvol-agent`).
    pub program: &'static str,
    /// Log as JSON lines instead of text.
    pub log_json: bool,
    /// How a text log line shows a field's value (`fedvol_common::limits::printable`): user
    /// input in a field never forges a line or drives a terminal. JSON lines escape by
    /// themselves.
    pub escape: fn(&str) -> String,
    /// Run by each runtime thread as it goes idle (the coordinator returns freed memory to the
    /// OS there), if any.
    pub on_thread_park: Option<fn()>,
}

impl Daemon {
    /// Installs the log subscriber (level from `RUST_LOG`, default `info`; to stderr; colour only
    /// on a terminal), builds `config`, and runs `run(config)` on a multi-thread runtime to its
    /// end.
    ///
    /// Returns success when `run` returns `Ok`; exit code 1 after printing
    /// `<program>: <error>` when the configuration, the runtime or the run fails.
    pub fn main<C, E, F>(self, config: impl FnOnce() -> Result<C, String>, run: impl FnOnce(C) -> F) -> ExitCode
    where
        E: Display,
        F: Future<Output = Result<(), E>>,
    {
        self.init_logs();
        let cfg = match config() {
            Ok(c) => c,
            Err(e) => return self.fail(&e),
        };
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.enable_all();
        if let Some(park) = self.on_thread_park {
            builder.on_thread_park(park);
        }
        let rt = match builder.build() {
            Ok(rt) => rt,
            Err(e) => return self.fail(&format!("cannot start the runtime: {e}")),
        };
        match rt.block_on(run(cfg)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => self.fail(&e.to_string()),
        }
    }

    /// A daemon's `main` once its command line `A` is parsed: with `man` (its hidden `--man`),
    /// prints `A`'s man page with `page`'s sections ([`crate::man::print`]) and runs nothing;
    /// otherwise [`Daemon::main`].
    pub fn main_or_man<A, C, E, F>(
        self,
        man: bool,
        page: &crate::man::Extra<'_>,
        config: impl FnOnce() -> Result<C, String>,
        run: impl FnOnce(C) -> F,
    ) -> ExitCode
    where
        A: clap::CommandFactory,
        E: Display,
        F: Future<Output = Result<(), E>>,
    {
        if man {
            return crate::man::print(self.program, A::command(), page);
        }
        self.main(config, run)
    }

    fn init_logs(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        if self.log_json {
            tracing_subscriber::fmt()
                .json()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .init();
        } else {
            // Colour only on a terminal: journald and log files get plain text.
            tracing_subscriber::fmt()
                .fmt_fields(crate::logs::escaped_fields(self.escape))
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .init();
        }
    }

    fn fail(&self, e: &str) -> ExitCode {
        eprintln!("{}: {e}", self.program);
        ExitCode::from(1)
    }
}

/// Waits for SIGTERM or SIGINT (Ctrl-C), what a supervisor or a user sends to stop a daemon.
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
