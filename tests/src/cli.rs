//! The `fedvol` CLI as a user runs it against a test federation.
//!
//! **One state directory per user and federation.** The CLI keeps state between runs (its
//! unfinished submits, `coordinator/cli/src/cli/pending.rs`) in `$FEDVOL_STATE_DIR`. On a
//! machine every run of one user shares that directory, so the harness gives every `fedvol`
//! run of one user against one test federation the same one ([`state_dir`]): two runs of a test
//! (in sequence or at once) see each other's state as they would on a machine, and no test
//! sees another's. [`crate::shipped::login`] sets it on every `fedvol` command the harness
//! starts that does not choose its own (`FEDVOL_STATE_DIR`, `XDG_STATE_HOME` or `HOME` set on
//! the command).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use crate::{NatsServer, bin_path};

/// Client port → the directory under which that test server's CLI users keep their state.
fn federations() -> &'static Mutex<HashMap<u16, PathBuf>> {
    static F: OnceLock<Mutex<HashMap<u16, PathBuf>>> = OnceLock::new();
    F.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Records that the test server listening on `port` keeps its CLI users' state under `dir`
/// (called by [`NatsServer`] when it starts; a later server on the same port replaces it).
pub(crate) fn register_federation(port: u16, dir: &Path) {
    federations()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(port, dir.to_path_buf());
}

/// The state directory of CLI user `user` against the federation at `url` (its first address;
/// `None`: offline commands): `<server's directory>/cli-state/<user>` for a server the harness
/// started, else a directory of this test process's own keyed by the URL's port and the user.
/// The same for every run of that user against that federation.
pub fn state_dir(url: Option<&str>, user: &str) -> PathBuf {
    let port = url
        .and_then(|u| u.split(',').next())
        .and_then(|first| first.rsplit(':').next())
        .and_then(|p| p.trim_end_matches('/').parse::<u16>().ok());
    let user: String = user
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let known = port.and_then(|p| federations().lock().unwrap_or_else(|e| e.into_inner()).get(&p).cloned());
    match (known, port) {
        (Some(dir), _) => dir.join(user),
        (None, Some(p)) => own_dir().join(format!("port-{p}")).join(user),
        (None, None) => own_dir().join("offline").join(user),
    }
}

fn own_dir() -> PathBuf {
    std::env::temp_dir().join(format!("fedvol-tests-cli-state-{}", std::process::id()))
}

/// Runs `fedvol --nats <nats> -u <user> <args>` and waits for it: `FEDVOL_OUTPUT` and
/// `FEDVOL_USER` unset (so the defaults are the CLI's own), output fitted to 100 columns, its
/// state in `user`'s [`state_dir`] of this federation.
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

/// True when `listing` (the JSON of `fedvol clusters -o json`) lists cluster `name` heard by
/// heartbeat (a replica listed), alive and not `restoring`: ready for work.
pub fn listed_ready(listing: &serde_json::Value, name: &str) -> bool {
    listing["clusters"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| {
            c["name"] == name
                && c["alive"] == true
                && c["restoring"] != true
                && c["instances"].as_array().is_some_and(|i| !i.is_empty())
        })
    })
}

/// Waits (20 s at most) until `fedvol clusters -o json`, run as `user`, lists every cluster of
/// `names` ready ([`listed_ready`]), as a user waits for `fedvol clusters` before sending work:
/// a fresh agent started with the restore gate as shipped answers `restoring` until a
/// coordinator's reconciler restored it, on its first heartbeat (docs/design.md §6), so a
/// cluster that is merely listed may still refuse a commit.
///
/// Panics (test failure) with the last listing when they never all are.
pub async fn wait_ready_as(nats: &NatsServer, user: &str, names: &[&str]) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let o = fedvol_as(nats, user, &["clusters", "-o", "json"]);
        if o.status.success()
            && let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&o.stdout)
            && names.iter().all(|n| listed_ready(&doc, n))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "clusters {names:?} never all alive and restored:\n{}",
            shown(&o)
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
