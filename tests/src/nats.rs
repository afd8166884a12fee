//! A real `nats-server` per test: JetStream on, file storage in a temporary directory, bound to
//! 127.0.0.1 on a free port.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::Spawned;
use crate::shipped::{Logins, OBSERVER, Shipped};

/// How long a starting server may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A `nats-server` process owned by the test (killed on drop).
///
/// The binary is `$NATS_SERVER_BIN` when set, else `nats-server` from `PATH` (Debian's
/// `nats-server` package installs `/usr/sbin/nats-server`, which is also tried). It runs with
/// `-a 127.0.0.1 -p <port> -js -sd <tempdir>/store` (plus `-c <file>` for
/// [`NatsServer::start_with_config`]; command-line flags win over the file). The store directory
/// outlives [`NatsServer::restart`], so JetStream state survives restarts.
///
/// [`NatsServer::start_config_file`] instead runs a complete configuration file that sets its
/// own listen address, ports, JetStream store, cluster routes or leaf connections.
#[derive(Debug)]
pub struct NatsServer {
    proc: Option<Spawned>,
    port: u16,
    dir: tempfile::TempDir,
    config: Option<PathBuf>,
    /// The config file sets everything itself: run it with `-c` alone.
    complete_config: bool,
    /// A shipped configuration's logins ([`crate::shipped`]), when it runs one.
    logins: Option<std::sync::Arc<Logins>>,
}

/// Locates the `nats-server` binary, panicking with install instructions when there is none.
pub(crate) fn server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("NATS_SERVER_BIN") {
        return PathBuf::from(p);
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let fallback = ["/usr/sbin", "/usr/bin", "/usr/local/bin"].map(PathBuf::from);
    on_path
        .iter()
        .chain(fallback.iter())
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nats-server not found on PATH (nor in /usr/sbin, /usr/bin, /usr/local/bin): the end-to-end \
                 tests need a real NATS server. Install Debian's `nats-server` package \
                 (`sudo apt-get install nats-server`), or set NATS_SERVER_BIN to a nats-server 2.9+ binary."
            )
        })
}

/// A loopback port nobody listens on right now, below the kernel's ephemeral range and not
/// handed out before by this process: the port is probed (bound on 127.0.0.1 and closed) and
/// used later by another process, so one the kernel could hand to any outgoing connection
/// meanwhile (the ephemeral range, where `bind(0)` picks) could be taken before the server
/// binds it. CI once saw a three-node cluster's monitor port so taken ("address already in
/// use"). Falls back to `bind(0)` when no port below the range is free (or the range starts
/// too low to leave room).
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    /// The lowest port tried; below are the well-known and many services' ports.
    const LOWEST: u16 = 10_000;
    static GIVEN: OnceLock<Mutex<(HashSet<u16>, u32)>> = OnceLock::new();
    // The ports below the ephemeral range, read once per process.
    static SPAN: OnceLock<u32> = OnceLock::new();
    let span = *SPAN.get_or_init(|| {
        let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|t| t.split_whitespace().next().and_then(|n| n.parse::<u16>().ok()))
            .unwrap_or(32_768);
        u32::from(ephemeral_low.saturating_sub(LOWEST))
    });
    if span >= 1_000 {
        let given = GIVEN.get_or_init(|| {
            // Each test process starts at its own place in the span (its id and the time).
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            Mutex::new((
                HashSet::new(),
                std::process::id().wrapping_mul(7_919).wrapping_add(nanos),
            ))
        });
        let mut g = given.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..span {
            g.1 = g.1.wrapping_add(1);
            let port = LOWEST + (g.1 % span) as u16;
            if !g.0.contains(&port) && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                g.0.insert(port);
                return port;
            }
        }
    }
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl NatsServer {
    /// Starts a server as users run it: `deploy/nats/single.conf` with its users and
    /// permissions, on a free loopback port with a fresh JetStream store ([`crate::shipped`]).
    /// Every fedvol process the harness starts against it logs in as its role's user; the
    /// test's own [`NatsServer::client`]s log in as the observer `harness`.
    ///
    /// Panics (test failure) when `nats-server` is missing or does not come up within 10 s,
    /// with its output.
    pub fn start() -> NatsServer {
        Self::shipped(Shipped::Single)
    }

    /// As [`NatsServer::start`], under the shipped configuration `kind`.
    pub fn shipped(kind: Shipped) -> NatsServer {
        Self::shipped_with(kind, "")
    }

    /// As [`NatsServer::shipped`], with `extra` lines (e.g. `max_payload: 8MB`) appended to
    /// the shipped file.
    pub fn shipped_with(kind: Shipped, extra: &str) -> NatsServer {
        let mut last = String::new();
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("a temporary directory for nats-server");
            let port = free_port();
            let (logins, config) = Logins::prepare(kind, port, free_port(), &dir.path().join("store"));
            if !extra.is_empty() {
                let mut text = std::fs::read_to_string(&config).expect("the shipped config copy");
                text.push_str(&format!("\n# Added by the test harness:\n{extra}\n"));
                std::fs::write(&config, text).expect("writing the shipped config copy");
            }
            let mut server = NatsServer {
                proc: None,
                port,
                dir,
                config: Some(config),
                complete_config: true,
                logins: Some(logins),
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) if e.contains("address already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("nats-server could not find a free port: {last}")
    }

    /// A server WITHOUT users or permissions (anyone may publish and subscribe anything), on
    /// a free loopback port. Only for tests that say why the shipped configuration cannot
    /// serve them (e.g. a wire-format test that plays every role on one connection).
    pub fn open() -> NatsServer {
        Self::launch(None)
    }

    /// The shipped configuration this server runs, if any.
    pub fn shipped_kind(&self) -> Option<Shipped> {
        self.logins.as_ref().map(|l| l.kind)
    }

    /// Makes sure NATS user `user` exists on a shipped server (adds a cluster's agent and
    /// provisioner for `agent-<c>`/`provisioner-<c>`, else a CLI user; see
    /// [`crate::shipped`]). No-op on other servers.
    pub fn ensure_user(&self, user: &str) {
        self.ensure_users(&[user]);
    }

    /// As [`NatsServer::ensure_user`] for many users, with one reload at most.
    pub fn ensure_users<S: AsRef<str>>(&self, users: &[S]) {
        if let Some(l) = &self.logins {
            l.ensure_all(users);
        }
    }

    /// A client logged in as `user` (added first when needed), with its private inbox under
    /// `secure.conf`; on a server without users, an anonymous client.
    ///
    /// Panics (test failure) when the login fails.
    pub async fn client_as(&self, user: &str) -> async_nats::Client {
        let Some(l) = &self.logins else {
            return self.client().await;
        };
        l.ensure(user);
        let mut o = async_nats::ConnectOptions::with_user_and_password(user.into(), crate::kit::password(user))
            .name(format!("fedvol-tests {user}"));
        if l.kind == Shipped::Secure {
            o = o.custom_inbox_prefix(crate::kit::inbox_prefix(user));
        }
        o.connect(self.url())
            .await
            .unwrap_or_else(|e| panic!("{user} cannot log in to the test nats-server at {}: {e}", self.url()))
    }

    /// As [`NatsServer::start`], with `config` (nats-server configuration syntax: accounts,
    /// authorization, limits...) written to a file and passed with `-c`. Listen address, port,
    /// JetStream and its store directory are still set by the harness.
    pub fn start_with_config(config: &str) -> NatsServer {
        Self::launch(Some(config))
    }

    fn launch(config: Option<&str>) -> NatsServer {
        let dir = tempfile::tempdir().expect("a temporary directory for nats-server");
        let config = config.map(|text| {
            let path = dir.path().join("nats-server.conf");
            std::fs::write(&path, text).expect("writing the nats-server config");
            path
        });
        let mut server = NatsServer {
            proc: None,
            port: 0,
            dir,
            config,
            complete_config: false,
            logins: None,
        };
        let mut last = String::new();
        // Another process may take the free port between probing and binding: try a few.
        for _ in 0..5 {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => return server,
                Err(e) if e.contains("address already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("nats-server could not find a free port: {last}")
    }

    /// Starts `nats-server -c <config>` with no other flag: the file sets its own listen
    /// address and ports, JetStream and its store directory, cluster routes, leaf connections
    /// and users. `port` is the client port the file listens on at 127.0.0.1 (used to wait
    /// until the server is ready and for [`NatsServer::url`]). The file is used where it is,
    /// so `include` lines resolve next to it; [`NatsServer::restart`] reuses it, and
    /// [`NatsServer::store_dir`] is not where such a server keeps JetStream data.
    ///
    /// Panics (test failure) when `nats-server` is missing, exits or does not serve `port`
    /// within 10 s, with its output.
    pub fn start_config_file(config: &Path, port: u16) -> NatsServer {
        let mut server = NatsServer {
            proc: None,
            port,
            dir: tempfile::tempdir().expect("a temporary directory for nats-server"),
            config: Some(config.to_path_buf()),
            complete_config: true,
            logins: None,
        };
        if let Err(e) = server.spawn() {
            panic!("{e}");
        }
        server
    }

    /// Spawns the server on `self.port` and waits until it sends its INFO greeting.
    fn spawn(&mut self) -> Result<(), String> {
        let store = self.dir.path().join("store");
        let mut cmd = Command::new(server_binary());
        if let Some(c) = &self.config {
            cmd.arg("-c").arg(c);
        }
        if !self.complete_config {
            cmd.args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
                .arg(&store);
        }
        let mut proc = Spawned::start(cmd);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let end = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = proc.try_status() {
                return Err(format!(
                    "nats-server exited ({status}) while starting on port {}; its output:\n{}",
                    self.port,
                    proc.log()
                ));
            }
            if greets(&addr) {
                crate::cli::register_federation(self.port, &self.dir.path().join("cli-state"));
                if let Some(l) = &self.logins {
                    l.started(proc.pid(), proc.log_path().to_path_buf());
                }
                self.proc = Some(proc);
                return Ok(());
            }
            if Instant::now() >= end {
                proc.kill();
                return Err(format!(
                    "nats-server did not accept connections on {addr} within {READY_TIMEOUT:?}; its output:\n{}",
                    proc.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port (stays the same across [`NatsServer::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The JetStream store directory.
    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// The config file given to [`NatsServer::start_with_config`] or
    /// [`NatsServer::start_config_file`].
    pub fn config_path(&self) -> Option<&Path> {
        self.config.as_deref()
    }

    /// The running server's output so far (empty when stopped).
    pub fn log(&self) -> String {
        self.proc.as_ref().map(Spawned::log).unwrap_or_default()
    }

    /// The lines of the running server's log that report a refused publish or subscription
    /// (`Permissions Violation`, `Publish Violation`, `Subscription Violation`).
    pub fn violations(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("Violation"))
            .map(str::to_string)
            .collect()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(Spawned::pid)
    }

    /// True while the server process runs.
    pub fn is_running(&mut self) -> bool {
        self.proc.as_mut().is_some_and(|p| p.try_status().is_none())
    }

    /// A client connected to this server (async-nats defaults: reconnects without limit, so it
    /// survives [`NatsServer::restart`]). Panics when the connection fails.
    ///
    /// On a shipped server it logs in as the observer `harness` ([`crate::shipped`]), which
    /// may do anything: the test's eyes and its scripted peers, never a fedvol process.
    pub async fn client(&self) -> async_nats::Client {
        let o = match &self.logins {
            Some(_) => {
                async_nats::ConnectOptions::with_user_and_password(OBSERVER.into(), crate::kit::password(OBSERVER))
            }
            None => async_nats::ConnectOptions::new(),
        };
        o.name("fedvol-tests")
            .connect(self.url())
            .await
            .unwrap_or_else(|e| panic!("cannot connect to the test nats-server at {}: {e}", self.url()))
    }

    /// Stops the server gracefully (SIGTERM, SIGKILL after 5 s). No-op when stopped.
    pub fn stop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.terminate(Duration::from_secs(5));
        }
    }

    /// Kills the server with SIGKILL (a crash). No-op when stopped.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    /// Stops the server (if running) and starts it again on the same port with the same store
    /// and config. Panics when it does not come back (e.g. the port was taken meanwhile).
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!("nats-server did not restart: {e}");
        }
    }
}

/// Checks `config` with `nats-server -t -c <config>` (parse and validate, includes resolved
/// next to the file; nothing is started). Returns the server's message on success.
///
/// Errors: the server's output when it reports the file invalid, or why it could not run.
pub fn check_config(config: &Path) -> Result<String, String> {
    let out = Command::new(server_binary())
        .arg("-t")
        .arg("-c")
        .arg(config)
        .output()
        .map_err(|e| format!("cannot run nats-server -t: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() { Ok(text) } else { Err(text) }
}

/// Creates (or opens) the JetStream key-value bucket `bucket` keeping `history` values per key,
/// file storage, in a way that works on nats-server 2.9.
///
/// async-nats 0.51's `create_key_value` first reads the account info and fails on 2.9 servers
/// (their answer lacks `reserved_memory`/`reserved_storage`, which that client requires: "data
/// did not match any variant of untagged enum Response"). This creates the bucket's backing
/// stream `KV_<bucket>` with the settings `create_key_value` would use, then opens it with
/// `get_key_value`, which only reads stream info.
///
/// Errors: the stream cannot be created (e.g. it exists with other settings) or opened.
pub async fn key_value(
    js: &async_nats::jetstream::Context,
    bucket: &str,
    history: i64,
) -> Result<async_nats::jetstream::kv::Store, async_nats::Error> {
    use async_nats::jetstream::stream::{Config, DiscardPolicy, StorageType};
    js.get_or_create_stream(Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: history.max(1),
        storage: StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: DiscardPolicy::New,
        num_replicas: 1,
        ..Default::default()
    })
    .await?;
    Ok(js.get_key_value(bucket).await?)
}

/// True when something on `addr` accepts a connection and greets with `INFO` (a NATS server
/// ready for clients).
fn greets(addr: &SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).is_ok() && &buf == b"INFO"
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::connection::State;
    use async_nats::jetstream;
    use bytes::Bytes;

    #[test]
    fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|t| t.split_whitespace().next().and_then(|n| n.parse().ok()))
            .unwrap_or(32_768);
        let ports: Vec<u16> = (0..200).map(|_| free_port()).collect();
        let distinct: std::collections::HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice: {ports:?}");
        if low >= 11_000 {
            assert!(
                ports.iter().all(|p| (10_000..low).contains(p)),
                "{ports:?} (ephemeral from {low})"
            );
        }
        // Each is free: a listener takes it.
        for p in &ports[..20] {
            TcpListener::bind((Ipv4Addr::LOCALHOST, *p)).unwrap_or_else(|e| panic!("port {p}: {e}"));
        }
    }

    #[tokio::test]
    async fn jetstream_state_and_port_survive_a_restart() {
        let mut s = NatsServer::start();
        let port = s.port();
        assert_eq!(s.url(), format!("nats://127.0.0.1:{port}"));
        let first = s.client().await;
        let kv = key_value(&jetstream::new(first.clone()), "harness", 1).await.unwrap();
        kv.put("k", Bytes::from_static(b"v1")).await.unwrap();

        s.restart();
        assert_eq!(s.port(), port);
        assert!(s.is_running());
        let kv = key_value(&jetstream::new(s.client().await), "harness", 1)
            .await
            .unwrap();
        assert_eq!(kv.get("k").await.unwrap(), Some(Bytes::from_static(b"v1")));
        // The first client reconnects by itself.
        let back = crate::wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
            first.connection_state() == State::Connected
        })
        .await;
        assert!(back, "the first client did not reconnect");

        s.stop();
        assert!(!s.is_running());
        assert!(!greets(&SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
    }

    #[tokio::test]
    async fn a_complete_config_file_sets_its_own_port_and_store() {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let store = dir.path().join("js");
        let conf = dir.path().join("server.conf");
        std::fs::write(
            &conf,
            format!(
                "listen: 127.0.0.1:{port}\nmax_payload: 2048\njetstream {{ store_dir: \"{}\" }}\n",
                store.display()
            ),
        )
        .unwrap();
        assert!(check_config(&conf).is_ok());
        let mut s = NatsServer::start_config_file(&conf, port);
        assert_eq!(s.url(), format!("nats://127.0.0.1:{port}"));
        let c = s.client().await;
        assert_eq!(
            c.server_info().max_payload,
            2048,
            "the file's settings, no harness flags"
        );
        let kv = key_value(&jetstream::new(c), "own", 1).await.unwrap();
        kv.put("k", Bytes::from_static(b"v")).await.unwrap();
        assert!(
            store.join("jetstream").is_dir(),
            "JetStream uses the file's store directory"
        );
        s.restart();
        let kv = key_value(&jetstream::new(s.client().await), "own", 1).await.unwrap();
        assert_eq!(kv.get("k").await.unwrap(), Some(Bytes::from_static(b"v")));
    }

    #[test]
    fn check_config_reports_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("bad.conf");
        std::fs::write(&conf, "listen: 127.0.0.1:4222\nno_such_option: 1\n").unwrap();
        let e = check_config(&conf).unwrap_err();
        assert!(e.contains("no_such_option"), "{e}");
    }

    #[tokio::test]
    async fn a_config_file_is_applied() {
        let s = NatsServer::start_with_config("max_payload: 4096\n");
        assert!(s.config_path().is_some_and(|p| p.is_file()));
        let c = s.client().await;
        assert_eq!(c.server_info().max_payload, 4096);
        assert!(
            s.store_dir().is_dir(),
            "JetStream is on with its store in the temporary directory"
        );
    }
}
