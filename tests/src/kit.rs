//! The shipped NATS configurations (`deploy/nats/`) in a temporary copy, pointed at loopback,
//! and workspace binaries logged in with the shipped example users.
//!
//! A [`Kit`] copies `deploy/nats/` so that `include` lines resolve, and rewrites, in the copy
//! only, listen addresses, URLs and JetStream stores; a rewrite whose pattern is gone fails the
//! test, so a changed config cannot silently go untested.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::bins::{bin_path, workspace_root};
use crate::{NatsServer, Spawned, wait_until};

/// A workflow with one 1 MiB scratch volume and one 8-core job: one slot of the
/// [`crate::federation::slots_inventory`] clusters.
pub const SLOT_WORKFLOW: &str = "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";

/// A copy of `deploy/nats/` in a temporary directory.
#[derive(Debug)]
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

/// The edits that point a shipped single-server file (`single.conf`, `secure.conf`) at
/// loopback: client port `port`, monitoring port `http_port`, JetStream under `store`.
pub fn loopback_edits(port: u16, http_port: u16, store: &str) -> Vec<(&'static str, String)> {
    vec![
        ("listen: 0.0.0.0:4222", format!("listen: 127.0.0.1:{port}")),
        ("http: 127.0.0.1:8222", format!("http: 127.0.0.1:{http_port}")),
        ("store_dir: \"/var/lib/nats\"", format!("store_dir: \"{store}\"")),
    ]
}

impl Kit {
    /// The copy of `rel` (`single.conf` or `secure.conf`) started on free loopback ports with a
    /// fresh JetStream store ([`loopback_edits`]), as it is otherwise.
    ///
    /// Panics (test failure) when the server does not come up.
    pub fn loopback_server(&self, rel: &str) -> NatsServer {
        use crate::nats::free_port;
        let port = free_port();
        let store = self.store(rel.trim_end_matches(".conf"));
        let conf = self.rewrite(rel, &loopback_edits(port, free_port(), &store));
        NatsServer::start_config_file(&conf, port)
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
/// inherited (the CLI's state goes to `user`'s [`crate::cli::state_dir`] of that federation). With
/// `private_inbox`, replies come under `_INBOX_<user>` (`--nats-inbox-prefix`), as
/// `deploy/nats/secure.conf` requires.
pub fn command(name: &str, urls: &str, user: &str, private_inbox: bool) -> Command {
    let mut cmd = Command::new(bin_path(name));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env("FEDVOL_NATS_PASSWORD", password(user))
        .env("FEDVOL_STATE_DIR", crate::cli::state_dir(Some(urls), user))
        .args(["--nats", urls, "--nats-user", user]);
    if private_inbox {
        cmd.args(["--nats-inbox-prefix", &inbox_prefix(user)]);
    }
    if name == "fedvol-coordinator" && user == "coordinator" {
        crate::shipped::kv_login(&mut cmd, private_inbox);
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

/// A command's exit code, stdout and stderr, for failure messages.
pub fn output_text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `fedvol -u <user> <args>` logged in as NATS user `login` (with `login`'s private inbox when
/// `private_inbox`), `FEDVOL_OUTPUT` unset.
///
/// Panics (test failure) when the binary cannot run.
pub fn fedvol_as(urls: &str, login: &str, user: &str, private_inbox: bool, args: &[&str]) -> Output {
    command("fedvol", urls, login, private_inbox)
        .args(["-u", user])
        .args(args)
        .env_remove("FEDVOL_OUTPUT")
        .output()
        .expect("fedvol runs")
}

/// A coordinator logged in as `coordinator` (private inbox when `private_inbox`) with the
/// shipped user directory, a 3 s deadline, `extra` arguments and `env`; returned once ready.
pub async fn coordinator_as(urls: &str, private_inbox: bool, extra: &[&str], env: &[(&str, &str)]) -> Spawned {
    let directory = workspace_root().join("deploy/config/directory.yaml");
    let mut cmd = command("fedvol-coordinator", urls, "coordinator", private_inbox);
    cmd.args(["--deadline-ms", "3000", "--discovery-ms", "300", "--directory"])
        .arg(directory)
        .args(extra)
        .env("RUST_LOG", "debug,async_nats=info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut p = Spawned::start(cmd);
    p.wait_for_log("coordinator ready", Duration::from_secs(30)).await;
    p
}

/// An agent of `cluster` logged in as `agent-<cluster>` (private inbox when `private_inbox`),
/// serving `inventory` (written to `<dir>/inventory.yaml`) with its state in `<dir>/data` and
/// `env`, started with `--init` and the restore gate as shipped (a coordinator's reconciler
/// restores the new cluster on its first heartbeat); returned once its endpoints are ready.
pub async fn agent_as(
    urls: &str,
    cluster: &str,
    private_inbox: bool,
    dir: &Path,
    inventory: &str,
    env: &[(&str, &str)],
) -> Spawned {
    let inv = dir.join("inventory.yaml");
    std::fs::create_dir_all(dir).expect("the agent's directory");
    std::fs::write(&inv, inventory).expect("the agent's inventory");
    let mut cmd = command("fedvol-agent", urls, &format!("agent-{cluster}"), private_inbox);
    cmd.arg("--inventory")
        .arg(&inv)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--heartbeat-ms", "300", "--init"])
        .env("RUST_LOG", "debug,async_nats=info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut p = Spawned::start(cmd);
    p.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    p
}

/// Waits (20 s at most) until `fedvol clusters`, as alice, lists every cluster of `names` as
/// alive and restored (not `restoring`: a fresh agent admits new work once the coordinators
/// restored it).
///
/// Panics (test failure) naming the clusters when they never are.
pub async fn wait_clusters_as(urls: &str, private_inbox: bool, names: &[&str]) {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let o = fedvol_as(urls, "alice", "alice", private_inbox, &["clusters", "-o", "json"]);
        if o.status.success()
            && let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&o.stdout)
            && names.iter().all(|n| crate::cli::listed_ready(&doc, n))
        {
            return;
        }
        assert!(
            Instant::now() < end,
            "clusters {names:?} never all alive: {}",
            output_text(&o)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// True when nothing arrives on `sub` within `wait`.
pub async fn silent(sub: &mut async_nats::Subscriber, wait: Duration) -> bool {
    tokio::time::timeout(wait, sub.next()).await.is_err()
}

/// Waits (5 s at most) until the server's log has a line containing every part of `parts`.
pub async fn server_logged(server: &NatsServer, parts: &[&str]) -> bool {
    wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
        server.log().lines().any(|l| parts.iter().all(|p| l.contains(p)))
    })
    .await
}

/// A federation on the shipped leaf topology: a hub server with the coordinator, and two leaf
/// servers (`leaf-a`, `leaf-b` variants of the shipped configs) each with one cluster's agent
/// (`cluster-a`, `cluster-b`: two 8-core hosts whose scratch provisioner group `physics` may
/// use). Everything stops when it is dropped.
pub struct LeafFederation {
    /// The hub server.
    pub hub: NatsServer,
    /// The leaf servers, `a` then `b`.
    pub leaves: Vec<NatsServer>,
    /// The coordinator (on the hub).
    pub coordinator: Spawned,
    /// The agents of cluster-a (on leaf a) and cluster-b (on leaf b).
    pub agents: Vec<Spawned>,
    /// The agents' files.
    pub dir: tempfile::TempDir,
}

impl Kit {
    /// Starts [`LeafFederation`] from the copies of `hub` (e.g. `leaf/hub.conf`) and of
    /// `leaf_prefix` + `a.conf` / `b.conf` (e.g. `leaf/leaf-`), pointed at loopback; `leaf_a`
    /// adds edits to leaf a's config. With `private_inbox`, every process replies under its
    /// user's private inbox (the secure variants). Returns once both leaves are linked and the
    /// coordinator sees both clusters alive.
    ///
    /// Panics (test failure) when a server, a link or a process does not come up.
    pub async fn leaf_federation(
        &self,
        hub: &str,
        leaf_prefix: &str,
        private_inbox: bool,
        leaf_a: Vec<(&str, String)>,
    ) -> LeafFederation {
        use crate::nats::free_port;
        let (hub_port, leaf_port) = (free_port(), free_port());
        let hub_conf = self.rewrite(
            hub,
            &[
                ("listen: 0.0.0.0:4222", format!("listen: 127.0.0.1:{hub_port}")),
                ("listen: 0.0.0.0:7422", format!("listen: 127.0.0.1:{leaf_port}")),
                ("http: 127.0.0.1:8222", format!("http: 127.0.0.1:{}", free_port())),
                (
                    "store_dir: \"/var/lib/nats\"",
                    format!("store_dir: \"{}\"", self.store("hub")),
                ),
            ],
        );
        let hub_server = NatsServer::start_config_file(&hub_conf, hub_port);
        let mut leaves = Vec::new();
        let mut leaf_a = Some(leaf_a);
        for c in ["a", "b"] {
            let port = free_port();
            let mut edits = vec![
                ("listen: 0.0.0.0:4222", format!("listen: 127.0.0.1:{port}")),
                ("http: 127.0.0.1:8222", format!("http: 127.0.0.1:{}", free_port())),
                ("@hub.example.org:7422", format!("@127.0.0.1:{leaf_port}")),
            ];
            if c == "a" {
                edits.extend(leaf_a.take().unwrap_or_default());
            }
            let conf = self.rewrite(&format!("{leaf_prefix}{c}.conf"), &edits);
            leaves.push(NatsServer::start_config_file(&conf, port));
        }
        let linked = wait_until(Duration::from_secs(15), Duration::from_millis(50), || {
            hub_server.log().matches("Leafnode connection created").count() >= 2
        })
        .await;
        assert!(linked, "both leaf servers log in to the hub:\n{}", hub_server.log());
        let hub_url = hub_server.url();
        let coordinator = coordinator_as(&hub_url, private_inbox, &[], &[]).await;
        let dir = tempfile::tempdir().expect("a temporary directory for the agents");
        let mut agents = Vec::new();
        for (c, leaf) in ["a", "b"].iter().zip(&leaves) {
            let d = dir.path().join(c);
            let cluster = format!("cluster-{c}");
            let inventory = crate::federation::slots_inventory(&cluster, 2, &d, "[physics]");
            agents.push(agent_as(&leaf.url(), &cluster, private_inbox, &d, &inventory, &[]).await);
        }
        wait_clusters_as(&hub_url, private_inbox, &["cluster-a", "cluster-b"]).await;
        LeafFederation {
            hub: hub_server,
            leaves,
            coordinator,
            agents,
            dir,
        }
    }
}
