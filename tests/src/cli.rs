//! The `fedvol` CLI as a user runs it against a test federation.

use std::process::{Command, Output};

use crate::{NatsServer, bin_path};

/// Runs `fedvol --nats <nats> -u <user> <args>` and waits for it: `FEDVOL_OUTPUT` and
/// `FEDVOL_USER` unset (so the defaults are the CLI's own), output fitted to 100 columns.
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
