//! The `fedvol` CLI as a user runs it against a test federation.

use std::process::{Command, Output};

use crate::{NatsServer, bin_path};

/// A directory of its own for one `fedvol` run's state (its unfinished submits,
/// `coordinator/cli/src/cli/pending.rs`), under the system's temporary directory: a plain submit in
/// one test is never resumed by another test's. Tests of resuming set `FEDVOL_STATE_DIR`
/// themselves.
pub fn isolated_state_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir()
        .join(format!("fedvol-tests-cli-state-{}", std::process::id()))
        .join(n.to_string())
}

/// Runs `fedvol --nats <nats> -u <user> <args>` and waits for it: `FEDVOL_OUTPUT` and
/// `FEDVOL_USER` unset (so the defaults are the CLI's own), output fitted to 100 columns, its
/// state in [`isolated_state_dir`].
///
/// Panics (test failure) when the binary cannot be started.
pub fn fedvol_as(nats: &NatsServer, user: &str, args: &[&str]) -> Output {
    let url = nats.url();
    let mut all = vec!["--nats", url.as_str(), "-u", user];
    all.extend_from_slice(args);
    let mut cmd = Command::new(bin_path("fedvol"));
    cmd.args(&all)
        .env_remove("FEDVOL_OUTPUT")
        .env_remove("FEDVOL_USER")
        .env("FEDVOL_STATE_DIR", isolated_state_dir())
        .env("COLUMNS", "100");
    crate::shipped::login(&mut cmd);
    cmd.output().expect("fedvol runs")
}

/// The exit code, stdout and stderr of a finished command, for assertion messages.
pub fn shown(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
