//! The shipped NATS configurations as the test federations' default: every fedvol process a
//! test starts logs in with the identity a user would give it under `deploy/nats/single.conf`
//! or `deploy/nats/secure.conf`, and the server enforces the shipped permissions.
//!
//! A [`Shipped`] server is a copy of `deploy/nats/` ([`crate::kit::Kit`]) in which only the
//! listen address, the monitoring port and the JetStream store are rewritten, as an operator
//! would for their own host. Two additions are made for the harness, and nothing else changes:
//!
//! - **More clusters and users, the documented way.** A test may name any cluster (`c0`,
//!   `east`...) or CLI user (`user3`, `carol`...). The first time a process logs in as an
//!   identity the shipped files do not have, the harness adds it as `deploy/nats/README.md`
//!   tells an operator to: a cluster's agent and provisioner get a copy of the shipped
//!   `cluster-c` permissions with the name replaced, a CLI user a copy of `alice`'s, and the
//!   server reloads its configuration (`nats-server --signal reload`) before the process
//!   starts. Their example passwords are `example-<user>` in plain text (the shipped users keep
//!   their bcrypt hashes). The CLI users most tests use (`anonymous`, `u`, `root`) are written
//!   in before the first start, so that their first command does not reload a server whose
//!   federation is busy (a reload refuses the answers to requests in flight,
//!   [`preadded_cli_users`]).
//! - **One observer identity, `harness`, with every right.** The test's own clients
//!   ([`crate::NatsServer::client`]) use it to look at what the processes did (agent status,
//!   the decision bucket) and to play attackers and scripted peers. No fedvol process ever
//!   logs in as `harness`.
//!
//! [`login`] is applied to every command the harness starts ([`crate::Spawned::start`],
//! [`crate::cli::fedvol_as`]): a command with `--nats <url of a shipped server>` and no
//! `--nats-user` of its own gets the identity of its role in the environment
//! (`FEDVOL_NATS_USER`, `FEDVOL_NATS_PASSWORD`, and under `secure.conf`
//! `FEDVOL_NATS_INBOX_PREFIX=_INBOX_<user>`):
//!
//! | program | NATS user |
//! |---|---|
//! | `fedvol-coordinator` | `coordinator`, and `coordinator-kv` for its decision bucket (`FEDVOL_KV_NATS_*`) |
//! | `fedvol-agent` | `agent-<cluster>` (from `--cluster`, the inventory's `cluster:`, or the config file's) |
//! | `fedvol-example-provisioner` | `provisioner-<cluster>` |
//! | `fedvol` | the `-u` user (else `FEDVOL_USER`, else `anonymous`) |
//! | `fedvol-bench` (its helper processes) | the observer `harness` (a measuring tool) |
//!
//! A `fedvol` command also gets its user's state directory of that federation
//! (`FEDVOL_STATE_DIR`, [`crate::cli::state_dir`]) unless it sets `FEDVOL_STATE_DIR`,
//! `XDG_STATE_HOME` or `HOME` itself: one user's runs share it, as on a machine.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::kit::{Kit, inbox_prefix, password};

/// Which shipped configuration a server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shipped {
    /// `deploy/nats/single.conf` (users and permissions from `accounts.conf`).
    Single,
    /// `deploy/nats/secure.conf` (private reply inboxes `_INBOX_<user>`).
    Secure,
}

impl Shipped {
    /// The shipped file, relative to `deploy/nats/`.
    pub fn file(self) -> &'static str {
        match self {
            Shipped::Single => "single.conf",
            Shipped::Secure => "secure.conf",
        }
    }

    /// The file holding the account's `users: [` list.
    fn users_file(self) -> &'static str {
        match self {
            Shipped::Single => "accounts.conf",
            Shipped::Secure => "secure.conf",
        }
    }

    /// The file holding `ALICE_PERMISSIONS`, the template of a CLI user.
    fn federation_file(self) -> &'static str {
        match self {
            Shipped::Single => "permissions/federation.conf",
            Shipped::Secure => "permissions/secure-federation.conf",
        }
    }

    /// The file holding cluster-c's identities, the template of a cluster.
    fn cluster_file(self) -> &'static str {
        match self {
            Shipped::Single => "permissions/cluster-c.conf",
            Shipped::Secure => "permissions/secure-cluster-c.conf",
        }
    }
}

/// The NATS user of the test's own observer clients (every right; see the module docs).
pub const OBSERVER: &str = "harness";

/// The line opening the account's user list in the users file.
const USERS_LIST: &str = "    users: [";

/// Identities the shipped files define.
const SHIPPED_USERS: [&str; 11] = [
    "coordinator",
    "coordinator-kv",
    "alice",
    "bob",
    "ops",
    "agent-cluster-a",
    "agent-cluster-b",
    "agent-cluster-c",
    "provisioner-cluster-a",
    "provisioner-cluster-b",
    "provisioner-cluster-c",
];

/// CLI users written into the configuration before the server first starts: the names the
/// harness's helpers and most tests use (`-u u`, `-u root`, no `-u` at all), and the
/// `user<k>` of concurrent submitters (`user0`..`user15`). Adding a user to
/// a running server means a reload, and a reload drops the reply permissions of every request
/// in flight (nats-server 2.9.10: `reloadAuthorization` in server/reload.go re-registers each
/// client, and `setPermissions` in server/client.go starts a new `replies` map), so an agent's
/// answer sent across it is refused as a `Publish Violation`. Users added up front never
/// reload a running federation.
fn preadded_cli_users() -> impl Iterator<Item = String> {
    ["anonymous", "u", "root"]
        .into_iter()
        .map(str::to_string)
        .chain((0..16).map(|k| format!("user{k}")))
}

/// The logins of one shipped server: its kit copy, and the identities added so far.
#[derive(Debug)]
pub struct Logins {
    /// Which configuration.
    pub kind: Shipped,
    kit: Kit,
    /// The users file before the harness's entries.
    users_base: String,
    /// The server's client port on 127.0.0.1.
    port: u16,
    state: Mutex<LoginState>,
}

#[derive(Debug, Default)]
struct LoginState {
    /// Identities added by the harness (beyond [`SHIPPED_USERS`] and [`OBSERVER`]).
    added_clusters: BTreeSet<String>,
    added_users: BTreeSet<String>,
    /// The running server's pid and log file, for reloads.
    pid: Option<u32>,
    log: Option<PathBuf>,
}

fn registry() -> &'static Mutex<HashMap<u16, Arc<Logins>>> {
    static R: OnceLock<Mutex<HashMap<u16, Arc<Logins>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Logins {
    /// A fresh copy of `deploy/nats/` for a `kind` server listening on 127.0.0.1:`port`
    /// (monitoring on `http_port`, JetStream under `store`); returns the logins and the config
    /// file to run.
    ///
    /// Panics (test failure) when the shipped files no longer have what the harness rewrites.
    pub fn prepare(kind: Shipped, port: u16, http_port: u16, store: &Path) -> (Arc<Logins>, PathBuf) {
        let kit = Kit::copy();
        let conf = kit.rewrite(
            kind.file(),
            &crate::kit::loopback_edits(port, http_port, &store.display().to_string()),
        );
        // The generated identities: definitions in their own file, included before the
        // account; user entries written into the account's list ([`Logins::write_generated`]).
        kit.rewrite(
            kind.users_file(),
            &[(
                "accounts {",
                "include ./permissions/harness-generated.conf\n\naccounts {".to_string(),
            )],
        );
        let users_base = std::fs::read_to_string(kit.path(kind.users_file())).expect("the users file copy");
        assert!(
            users_base.contains(USERS_LIST),
            "deploy/nats/{} no longer contains {USERS_LIST:?}: update tests/src/shipped.rs",
            kind.users_file()
        );
        let state = LoginState {
            added_users: preadded_cli_users().collect(),
            ..LoginState::default()
        };
        let logins = Arc::new(Logins {
            kind,
            kit,
            users_base,
            port,
            state: Mutex::new(state),
        });
        logins.write_generated(&lock(&logins.state));
        lock(registry()).insert(port, logins.clone());
        (logins, conf)
    }

    /// Records the running server's pid and log (after each start).
    pub fn started(&self, pid: u32, log: PathBuf) {
        let mut s = lock(&self.state);
        s.pid = Some(pid);
        s.log = Some(log);
    }

    /// Makes sure `user` can log in: adds it (and reloads the server) when it is neither
    /// shipped nor added yet. `agent-<c>` and `provisioner-<c>` add cluster `c`; any other name
    /// a CLI user.
    ///
    /// Panics (test failure) when the server does not confirm the reload within 10 s, or a
    /// new user still cannot log in 10 s after it (probed with `can_log_in`).
    pub fn ensure(&self, user: &str) {
        self.ensure_all(&[user]);
    }

    /// As [`Logins::ensure`] for every user of `users`, with one reload at most.
    pub fn ensure_all<S: AsRef<str>>(&self, users: &[S]) {
        let mut s = lock(&self.state);
        let mut new_users = Vec::new();
        for user in users.iter().map(AsRef::as_ref) {
            if user == OBSERVER || SHIPPED_USERS.contains(&user) {
                continue;
            }
            let cluster = user
                .strip_prefix("agent-")
                .or_else(|| user.strip_prefix("provisioner-"))
                .map(str::to_string);
            let new = match cluster {
                Some(c) => s.added_clusters.insert(c),
                None => s.added_users.insert(user.to_string()),
            };
            if new {
                new_users.push(user.to_string());
            }
        }
        if new_users.is_empty() {
            return;
        }
        self.write_generated(&s);
        let (Some(pid), Some(log)) = (s.pid, s.log.clone()) else {
            return;
        };
        reload(pid, &log);
        // The log's "Reloaded" line once came before a new agent could log in (CI, the slurm
        // tests: `authorization violation` right after the reload): wait until each new user
        // does.
        for user in &new_users {
            let end = Instant::now() + Duration::from_secs(10);
            while !can_log_in(self.port, user) {
                assert!(Instant::now() < end, "{user} still cannot log in 10 s after the reload");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Rewrites the generated definitions and user entries for everything added so far.
    fn write_generated(&self, s: &LoginState) {
        let read = |rel: &str| std::fs::read_to_string(self.kit.path(rel)).expect("a shipped NATS file");
        let mut defs = String::from("# Identities the test harness added (tests/src/shipped.rs).\n");
        let mut users = format!(
            "{USERS_LIST}\n      {{ user: {OBSERVER}, password: \"{}\" }}\n",
            password(OBSERVER)
        );
        let cluster_template = read(self.kind.cluster_file());
        for c in &s.added_clusters {
            let upper = var_name(c);
            for line in cluster_template.lines() {
                if line.starts_with('#') {
                    continue;
                }
                if line.starts_with("AGENT_CLUSTER_C_PASS") {
                    defs.push_str(&format!(
                        "AGENT_{upper}_PASS = \"{}\"\n",
                        password(&format!("agent-{c}"))
                    ));
                } else if line.starts_with("PROVISIONER_CLUSTER_C_PASS") {
                    defs.push_str(&format!(
                        "PROVISIONER_{upper}_PASS = \"{}\"\n",
                        password(&format!("provisioner-{c}"))
                    ));
                } else {
                    defs.push_str(&line.replace("CLUSTER_C", &upper).replace("cluster-c", c));
                    defs.push('\n');
                }
            }
            users.push_str(&format!(
                "{{ user: agent-{c}, password: $AGENT_{upper}_PASS, permissions: $AGENT_{upper}_PERMISSIONS }}\n\
                 {{ user: provisioner-{c}, password: $PROVISIONER_{upper}_PASS, permissions: $PROVISIONER_{upper}_PERMISSIONS }}\n"
            ));
        }
        let federation = read(self.kind.federation_file());
        let alice = block(&federation, "ALICE_PERMISSIONS = {").expect("ALICE_PERMISSIONS in the shipped files");
        for u in &s.added_users {
            let upper = var_name(u);
            defs.push_str(&alice.replace("ALICE", &upper).replace("alice", u));
            defs.push('\n');
            users.push_str(&format!(
                "{{ user: \"{u}\", password: \"{}\", permissions: ${upper}_PERMISSIONS }}\n",
                password(u)
            ));
        }
        std::fs::write(self.kit.path("permissions/harness-generated.conf"), defs)
            .expect("writing generated identities");
        std::fs::write(
            self.kit.path(self.kind.users_file()),
            self.users_base.replacen(USERS_LIST, &users, 1),
        )
        .expect("writing generated users");
    }
}

/// `cluster-x.1` -> `CLUSTER_X_1`: a configuration variable name part.
fn var_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The text from the line starting with `head` to the first line that is a lone `}`.
fn block(text: &str, head: &str) -> Option<String> {
    let start = text.find(head)?;
    let rest = &text[start..];
    let end = rest.find("\n}")? + 2;
    Some(rest[..end].to_string())
}

/// True when `user` (with its harness password) logs in to the server on 127.0.0.1:`port`:
/// the client protocol by hand (NATS docs, "Client Protocol": the server's `INFO`, then
/// `CONNECT` with `user`/`pass` and `PING`, answered `PONG`, or `-ERR 'Authorization
/// Violation'` when the login is refused), so it needs no runtime.
fn can_log_in(port: u16, user: &str) -> bool {
    use std::io::{BufRead, BufReader, Write};
    let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return false,
    });
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || !line.starts_with("INFO") {
        return false;
    }
    let connect = serde_json::json!({
        "verbose": false,
        "pedantic": false,
        "user": user,
        "pass": password(user),
        "protocol": 1,
        "name": "fedvol-tests login probe",
    });
    let mut w = &stream;
    if w.write_all(format!("CONNECT {connect}\r\nPING\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line.starts_with("PONG") => return true,
            Ok(_) if line.starts_with("-ERR") => return false,
            Ok(_) => continue,
        }
    }
}

/// Asks the server `pid` to reload its configuration and waits until its log confirms it (or
/// names an error).
fn reload(pid: u32, log: &Path) {
    let count = |t: &str| t.matches("Reloaded server configuration").count();
    let before = count(&std::fs::read_to_string(log).unwrap_or_default());
    let out = Command::new(crate::nats::server_binary())
        .arg("--signal")
        .arg(format!("reload={pid}"))
        .output()
        .expect("nats-server --signal reload runs");
    assert!(out.status.success(), "nats-server --signal reload failed: {out:?}");
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if count(&text) > before {
            return;
        }
        assert!(
            !text.contains("Failed to reload"),
            "nats-server refused the harness's added identities:\n{text}"
        );
        assert!(Instant::now() < end, "nats-server did not reload within 10 s:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The logins of the shipped server at `url` (its first address), if it is one.
pub fn logins_for(url: &str) -> Option<Arc<Logins>> {
    let first = url.split(',').next()?;
    let port: u16 = first.rsplit(':').next()?.trim_end_matches('/').parse().ok()?;
    lock(registry()).get(&port).cloned()
}

/// Gives `cmd` the NATS identity of its role when it talks to a shipped server (module docs).
/// Leaves it alone when it names its own `--nats-user` or `FEDVOL_NATS_USER`, or does not
/// talk to a shipped server.
pub fn login(cmd: &mut Command) {
    let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let envs: Vec<(std::ffi::OsString, Option<String>)> = cmd
        .get_envs()
        .map(|(n, v)| (n.to_os_string(), v.map(|v| v.to_string_lossy().into_owned())))
        .collect();
    let env = |k: &str| -> Option<String> {
        envs.iter()
            .find(|(n, _)| n.as_os_str() == OsStr::new(k))
            .and_then(|(_, v)| v.clone())
    };
    let flag = |name: &str| -> Option<String> {
        args.iter().enumerate().find_map(|(i, a)| {
            if a == name {
                args.get(i + 1).cloned()
            } else {
                a.strip_prefix(&format!("{name}=")).map(str::to_string)
            }
        })
    };
    let program = Path::new(cmd.get_program())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One user's `fedvol` runs against one federation share one state directory, as on a
    // machine ([`crate::cli`]), unless the command chooses its own.
    let state_dir = (program == "fedvol"
        && ["FEDVOL_STATE_DIR", "XDG_STATE_HOME", "HOME"]
            .iter()
            .all(|k| env(k).is_none()))
    .then(|| {
        let who = flag("--nats-user")
            .or_else(|| env("FEDVOL_NATS_USER"))
            .or_else(|| flag("-u"))
            .or_else(|| flag("--user"))
            .or_else(|| env("FEDVOL_USER"))
            .or_else(|| std::env::var("FEDVOL_USER").ok())
            .unwrap_or_else(|| "anonymous".to_string());
        let url = flag("--nats").or_else(|| env("FEDVOL_NATS_URL"));
        crate::cli::state_dir(url.as_deref(), &who)
    });
    if let Some(dir) = state_dir {
        cmd.env("FEDVOL_STATE_DIR", dir);
    }
    if flag("--nats-user").is_some() || env("FEDVOL_NATS_USER").is_some() || env("FEDVOL_NATS_CREDS").is_some() {
        return;
    }
    let Some(url) = flag("--nats").or_else(|| env("FEDVOL_NATS_URL")) else {
        return;
    };
    let Some(logins) = logins_for(&url) else {
        return;
    };
    let user = match program.as_str() {
        // The benchmark's own helpers (drivers, raw responders) are measuring tools: the
        // observer. Its in-process agents log in as their clusters (`--shipped-logins`).
        "fedvol-bench" => OBSERVER.to_string(),
        "fedvol-coordinator" => "coordinator".to_string(),
        "fedvol-agent" => match agent_cluster(&flag) {
            Some(c) => format!("agent-{c}"),
            None => return,
        },
        "fedvol-example-provisioner" => match flag("--cluster") {
            Some(c) => format!("provisioner-{c}"),
            None => return,
        },
        "fedvol" => flag("-u")
            .or_else(|| flag("--user"))
            .or_else(|| env("FEDVOL_USER"))
            .or_else(|| std::env::var("FEDVOL_USER").ok())
            .unwrap_or_else(|| "anonymous".to_string()),
        _ => return,
    };
    logins.ensure(&user);
    cmd.env("FEDVOL_NATS_USER", &user)
        .env("FEDVOL_NATS_PASSWORD", password(&user));
    if logins.kind == Shipped::Secure {
        cmd.env("FEDVOL_NATS_INBOX_PREFIX", inbox_prefix(&user));
    }
    if program == "fedvol-coordinator" {
        kv_login(cmd, logins.kind == Shipped::Secure);
    }
}

/// The decision bucket's login of a coordinator under the shipped files, as
/// `deploy/config/coordinator.yaml` sets it (`kv.nats`): `coordinator-kv`, with its private
/// inbox when `private_inbox`. Left alone when the command names its own.
pub fn kv_login(cmd: &mut Command, private_inbox: bool) {
    const USER: &str = "coordinator-kv";
    if cmd.get_envs().any(|(n, _)| n == OsStr::new("FEDVOL_KV_NATS_USER"))
        || cmd.get_args().any(|a| a == OsStr::new("--kv-nats-user"))
    {
        return;
    }
    cmd.env("FEDVOL_KV_NATS_USER", USER)
        .env("FEDVOL_KV_NATS_PASSWORD", password(USER));
    if private_inbox {
        cmd.env("FEDVOL_KV_NATS_INBOX_PREFIX", inbox_prefix(USER));
    }
}

/// The cluster an agent command serves: `--cluster`, else the inventory's top-level
/// `cluster:`, else the config file's (or its inventory's).
fn agent_cluster(flag: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(c) = flag("--cluster") {
        return Some(c);
    }
    if let Some(inv) = flag("--inventory") {
        return top_level(Path::new(&inv), "cluster");
    }
    let config = flag("--config").or_else(|| flag("-c"))?;
    let config = PathBuf::from(config);
    top_level(&config, "cluster").or_else(|| {
        let inv = top_level(&config, "inventory")?;
        let inv = config
            .parent()
            .map(|d| d.join(&inv))
            .unwrap_or_else(|| PathBuf::from(&inv));
        top_level(&inv, "cluster")
    })
}

/// The value of top-level key `key` in the YAML file `path` (plain scalar, quotes removed).
pub fn top_level(path: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix(':')?;
        let v = v.split(" #").next().unwrap_or(v).trim().trim_matches(['"', '\'']);
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// `cmd.logged_in()`: [`login`] as a builder step, for commands a test runs to completion
/// (`.logged_in().output()`); call it after the arguments are set.
pub trait LoggedIn {
    /// Applies [`login`] and returns the command.
    fn logged_in(&mut self) -> &mut Self;
}

impl LoggedIn for Command {
    fn logged_in(&mut self) -> &mut Self {
        login(self);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nats::NatsServer;

    /// The probe `ensure_all` waits on: refused before the harness adds a cluster's agent,
    /// accepted after, for a shipped user at once.
    #[test]
    fn the_login_probe_sees_a_user_only_once_added() {
        let nats = NatsServer::shipped(Shipped::Single);
        let port: u16 = nats.url().rsplit(':').next().unwrap().parse().unwrap();
        assert!(can_log_in(port, "coordinator"));
        assert!(!can_log_in(port, "agent-probe-x"), "not added yet");
        nats.ensure_user("agent-probe-x");
        assert!(can_log_in(port, "agent-probe-x"));
    }
}
