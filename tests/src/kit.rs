//! The shipped NATS configurations (`deploy/nats/`) in a temporary copy, pointed at loopback,
//! and workspace binaries logged in with the shipped example users.
//!
//! A [`Kit`] copies `deploy/nats/` so that `include` lines resolve, and rewrites, in the copy
//! only, listen addresses, URLs and JetStream stores; a rewrite whose pattern is gone fails the
//! test, so a changed config cannot silently go untested.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bins::{bin_path, workspace_root};

/// A copy of `deploy/nats/` in a temporary directory.
pub struct Kit {
    dir: tempfile::TempDir,
}

/// `deploy/nats/` of the workspace.
pub fn shipped() -> PathBuf {
    workspace_root().join("deploy/nats")
}

/// The example password of NATS user `user` (see deploy/nats/permissions/): `example-<user>`.
pub fn password(user: &str) -> String {
    format!("example-{user}")
}

/// The private inbox prefix of NATS user `user` in the secure configurations: `_INBOX_<user>`.
pub fn inbox_prefix(user: &str) -> String {
    format!("_INBOX_{user}")
}

impl Kit {
    /// Copies `deploy/nats/` into a fresh temporary directory.
    pub fn copy() -> Kit {
        let dir = tempfile::tempdir().expect("a temporary directory for the NATS kit");
        copy_tree(&shipped(), &dir.path().join("nats"));
        Kit { dir }
    }

    /// The copy of `deploy/nats/<rel>`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join("nats").join(rel)
    }

    /// A fresh directory for a server's JetStream store.
    pub fn store(&self, name: &str) -> String {
        let p = self.dir.path().join("store").join(name);
        std::fs::create_dir_all(&p).expect("a JetStream store directory");
        p.display().to_string()
    }

    /// Replaces, in the copy of `rel`, each `from` (which must occur) with `to`; returns the
    /// copy's path.
    ///
    /// Panics (test failure) naming the pattern when the shipped file no longer contains it.
    pub fn rewrite(&self, rel: &str, edits: &[(&str, String)]) -> PathBuf {
        let p = self.path(rel);
        let mut text = std::fs::read_to_string(&p).expect("a shipped NATS config");
        for (from, to) in edits {
            assert!(
                text.contains(from),
                "deploy/nats/{rel} no longer contains {from:?}: update the rewrite in this test"
            );
            text = text.replace(from, to);
        }
        std::fs::write(&p, text).expect("writing the NATS config copy");
        p
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a directory of the kit copy");
    for e in std::fs::read_dir(from).expect("deploy/nats is readable") {
        let e = e.expect("a directory entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("a file type").is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).expect("copying a NATS config");
        }
    }
}

/// A command for workspace binary `name` logged in to NATS at `urls` as `user` (password from
/// `FEDVOL_NATS_PASSWORD`, as an operator would run it), with no other `FEDVOL_*` setting
/// inherited. With `private_inbox`, replies come under `_INBOX_<user>` (`--nats-inbox-prefix`),
/// as `deploy/nats/secure.conf` requires.
pub fn command(name: &str, urls: &str, user: &str, private_inbox: bool) -> Command {
    let mut cmd = Command::new(bin_path(name));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env("FEDVOL_NATS_PASSWORD", password(user))
        .args(["--nats", urls, "--nats-user", user]);
    if private_inbox {
        cmd.args(["--nats-inbox-prefix", &inbox_prefix(user)]);
    }
    cmd
}

/// A plain NATS client logged in as `user`, with replies under `inbox` (e.g. `_INBOX_alice`).
///
/// Panics (test failure) when the login fails.
pub async fn client(url: &str, user: &str, inbox: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(user.into(), password(user))
        .name(format!("kit-test {user}"))
        .custom_inbox_prefix(inbox)
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("{user} cannot log in to {url}: {e}"))
}
