//! fedvol-daemon-config: the base of both daemons' configurations (`fedvol-agent`'s and
//! `fedvol-coordinator`'s), so that they read, check and report alike:
//!
//! - [`load`]: the strict YAML file (`--config`): read with fedvol's file limits, every problem
//!   a positioned diagnostic (file, line, column, field), unknown keys errors with a "did you
//!   mean" hint, paths relative to the file's directory ([`relative_to`]); each daemon reads its
//!   own keys on top ([`DaemonFile`]).
//! - [`DaemonConfig`]: the keys both take (`nats:`, `subjectPrefix`, `maxInFlight`,
//!   `maxBodyBytes`, `metricsListen`) and their checks ([`DaemonConfig::check`]); [`DaemonArgs`]:
//!   the flags and environment variables that override them.
//! - [`Retired`]: keys a daemon no longer reads. The contract only grows (docs/design.md §3), so
//!   a file that still sets one loads, with a warning naming the key and its place
//!   ([`DaemonConfig::warnings`], logged at start by [`DaemonConfig::log_warnings`]).
//!
//! Above `formats` (YAML with positions, the `nats:` block), `proto` (the NATS flags) and `obs`
//! (the `metricsListen` address); below the agent and the coordinator, which never depend on
//! each other.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use fedvol_formats::files::read_text;
use fedvol_formats::nats::parse_nats;
use fedvol_formats::yaml::{Ctx, Diagnostics, Limits, MapReader, load_documents};
use fedvol_proto::nats::{NatsArgs, NatsAuth};

/// The request bodies a daemon may be configured to serve at most (`maxBodyBytes`), bytes:
/// 1 KiB to 64 MiB.
pub const BODY_BYTES: RangeInclusive<usize> = 1024..=64 * 1024 * 1024;

/// What both daemons' configurations hold alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfig {
    /// NATS connection (`nats:`; the same block and flags for both daemons).
    pub nats: NatsAuth,
    /// Subject prefix (`subjectPrefix`, default [`fedvol_proto::DEFAULT_PREFIX`]).
    pub subject_prefix: String,
    /// Requests in progress at once (`maxInFlight`, 1 to 1,000,000); beyond, requests are
    /// answered `overloaded`. Its default is each daemon's own.
    pub max_in_flight: usize,
    /// Largest request body served, bytes (`maxBodyBytes`, within [`BODY_BYTES`]; default
    /// [`fedvol_proto::DEFAULT_MAX_BODY_BYTES`], 1 MiB); larger ones get `bad_request`.
    pub max_body_bytes: usize,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` (`metricsListen`, `IP:PORT`); `None`
    /// (the default): no metrics server.
    pub metrics_listen: Option<SocketAddr>,
    /// Settings given that are no longer read, each a sentence naming the key (or flag) and
    /// where it was set ([`Retired`]); the daemon logs them as it starts.
    pub warnings: Vec<String>,
}

impl DaemonConfig {
    /// The defaults, with `max_in_flight` requests in progress at once.
    pub fn new(max_in_flight: usize) -> Self {
        DaemonConfig {
            nats: NatsAuth::local(),
            subject_prefix: fedvol_proto::DEFAULT_PREFIX.to_string(),
            max_in_flight,
            max_body_bytes: fedvol_proto::DEFAULT_MAX_BODY_BYTES,
            metrics_listen: None,
            warnings: Vec::new(),
        }
    }

    /// Reads the keys both daemons take from the file's top-level mapping `map`; relative paths
    /// (in `nats:`) are taken relative to `dir`.
    fn read(&mut self, ctx: &mut Ctx, map: &mut MapReader<'_>, dir: &Path) {
        if let Some(n) = map.take("nats") {
            self.nats = parse_nats(ctx, n, "nats", dir);
        }
        if let Some(n) = map.take("subjectPrefix")
            && let Some(s) = ctx.nonempty_string(n, "subjectPrefix")
        {
            self.subject_prefix = s;
        }
        if let Some(n) = map.take("maxInFlight")
            && let Some(v) = ctx.int(n, "maxInFlight", 1, 1_000_000)
        {
            self.max_in_flight = v as usize;
        }
        let (low, high) = (*BODY_BYTES.start() as i128, *BODY_BYTES.end() as i128);
        if let Some(n) = map.take("maxBodyBytes")
            && let Some(v) = ctx.int(n, "maxBodyBytes", low, high)
        {
            self.max_body_bytes = v as usize;
        }
        if let Some(n) = map.take("metricsListen")
            && let Some(s) = ctx.nonempty_string(n, "metricsListen")
        {
            match fedvol_obs::parse_listen(&s) {
                Ok(addr) => self.metrics_listen = Some(addr),
                Err(e) => ctx.error(n.span, "metricsListen", e),
            }
        }
    }

    /// What the file and flags together must satisfy for both daemons: the NATS settings'
    /// checks ([`NatsAuth::check`]: no credentials in the URL, user and password together, TLS
    /// certificate and key together) and `maxBodyBytes` within [`BODY_BYTES`] (a flag may set
    /// any number).
    ///
    /// Returns every problem as a sentence (empty when fine); passwords are never echoed.
    pub fn check(&self) -> Vec<String> {
        let mut out = self.nats.check();
        if !BODY_BYTES.contains(&self.max_body_bytes) {
            out.push(format!(
                "maxBodyBytes must be between {} and {}",
                BODY_BYTES.start(),
                BODY_BYTES.end()
            ));
        }
        out
    }

    /// Logs each of [`DaemonConfig::warnings`] (at `warn`), as a daemon starts.
    pub fn log_warnings(&self) {
        for w in &self.warnings {
            tracing::warn!("{w}");
        }
    }
}

/// A key a daemon's file no longer reads. It is still accepted (the contract only grows) and
/// ignored, with a warning naming the key and where it was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retired {
    /// The key, as spelled in the file (`holdTtlMs`).
    pub key: &'static str,
    /// Why it is no longer read, and what to do: a sentence that ends the warning.
    pub why: &'static str,
}

impl Retired {
    /// The warning for the key set at `line`:`col` of `file`.
    fn in_file(&self, file: &str, line: usize, col: usize) -> String {
        format!("{file}:{line}:{col}: {}: {}", self.key, self.why)
    }

    /// The warning for the same setting given as flag `flag` (or its environment variable).
    pub fn as_flag(&self, flag: &str) -> String {
        format!("{flag} (`{}`): {}", self.key, self.why)
    }
}

/// A daemon's configuration as read from its file on top of [`DaemonConfig`] ([`load`]).
pub trait DaemonFile {
    /// What an empty file means: `None`, the defaults; `Some(sentence)`, an error saying what
    /// the file must hold at least.
    const EMPTY: Option<&'static str>;
    /// Keys this daemon no longer reads (accepted with a warning).
    const RETIRED: &'static [Retired];
    /// The part every daemon has.
    fn daemon(&mut self) -> &mut DaemonConfig;
    /// Reads this daemon's own keys from the file's top-level mapping `map`, recording every
    /// problem in `ctx`; relative paths are relative to `dir` ([`relative_to`]).
    fn read(&mut self, ctx: &mut Ctx, map: &mut MapReader<'_>, dir: &Path);
}

/// Reads the daemon configuration file at `path` over `defaults`: the keys every daemon takes
/// ([`DaemonConfig`]), then the daemon's own ([`DaemonFile::read`]), then its retired keys,
/// which are recorded as warnings in [`DaemonConfig::warnings`]. An empty file gives the
/// defaults, or the error [`DaemonFile::EMPTY`] says.
///
/// Errors: every problem in the file (unreadable, too large, invalid YAML, not a mapping,
/// unknown keys with a "did you mean" hint, bad values), with line, column and field.
pub fn load<T: DaemonFile>(path: &Path, defaults: T) -> Result<T, Diagnostics> {
    let label = path.display().to_string();
    let text = read_text(path)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut ctx = Ctx::new(&label);
    let docs = match load_documents(&text, Limits::default()) {
        Ok(docs) => docs,
        Err(e) => {
            ctx.error(e.span, "", format!("invalid YAML: {}", e.message));
            return Err(Diagnostics(ctx.into_diagnostics()));
        }
    };
    let Some(doc) = docs.first() else {
        return match T::EMPTY {
            None => Ok(defaults),
            Some(expected) => {
                ctx.error(Default::default(), "", expected);
                Err(Diagnostics(ctx.into_diagnostics()))
            }
        };
    };
    let Some(mut map) = ctx.map(doc, "") else {
        return Err(Diagnostics(ctx.into_diagnostics()));
    };
    let mut cfg = defaults;
    cfg.daemon().read(&mut ctx, &mut map, &dir);
    cfg.read(&mut ctx, &mut map, &dir);
    for retired in T::RETIRED {
        if let Some(n) = map.take(retired.key) {
            let w = retired.in_file(&label, n.span.line, n.span.col);
            cfg.daemon().warnings.push(w);
        }
    }
    map.finish(&mut ctx);
    ctx.finish(cfg)
}

/// A path given in a configuration file: as it is when absolute, else relative to `dir` (the
/// file's directory).
pub fn relative_to(dir: &Path, path: String) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() { p } else { dir.join(p) }
}

/// The flags and environment variables of [`DaemonConfig`]'s settings, flattened into both
/// daemons' command lines (`#[command(flatten)]`); each overrides the file's key.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct DaemonArgs {
    /// NATS connection (URL, auth, TLS, inbox prefix).
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Largest request body served, bytes (default 1048576).
    #[arg(long, env = "FEDVOL_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Requests in progress at once; beyond, requests are answered `overloaded`.
    #[arg(long, env = "FEDVOL_MAX_IN_FLIGHT")]
    pub max_in_flight: Option<usize>,
    /// Subject prefix.
    #[arg(long, env = "FEDVOL_SUBJECT_PREFIX")]
    pub subject_prefix: Option<String>,
    /// Serve /metrics (Prometheus), /healthz and /readyz on this address, IP:PORT (e.g.
    /// 127.0.0.1:9464; port 0 takes a free one, logged). Off unless given here or as
    /// `metricsListen`.
    #[arg(long, env = "FEDVOL_METRICS_LISTEN", value_parser = fedvol_obs::parse_listen)]
    pub metrics_listen: Option<SocketAddr>,
}

impl DaemonArgs {
    /// Overrides `cfg` with every flag that was given.
    pub fn apply(self, cfg: &mut DaemonConfig) {
        self.nats.apply(&mut cfg.nats);
        if let Some(v) = self.max_body_bytes {
            cfg.max_body_bytes = v;
        }
        if let Some(v) = self.max_in_flight {
            cfg.max_in_flight = v;
        }
        if let Some(v) = self.subject_prefix {
            cfg.subject_prefix = v;
        }
        if self.metrics_listen.is_some() {
            cfg.metrics_listen = self.metrics_listen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon with one key of its own (`name`), one retired key, and a required first key.
    #[derive(Debug)]
    struct Demo {
        daemon: DaemonConfig,
        name: Option<String>,
        dir: Option<PathBuf>,
    }

    impl DaemonFile for Demo {
        const EMPTY: Option<&'static str> = Some("the file is empty; expected at least `name:`");
        const RETIRED: &'static [Retired] = &[Retired {
            key: "oldMs",
            why: "no longer read; it is ignored",
        }];
        fn daemon(&mut self) -> &mut DaemonConfig {
            &mut self.daemon
        }
        fn read(&mut self, ctx: &mut Ctx, map: &mut MapReader<'_>, dir: &Path) {
            if let Some(n) = map.take("name") {
                self.name = ctx.nonempty_string(n, "name");
            }
            if let Some(n) = map.take("dir")
                && let Some(s) = ctx.nonempty_string(n, "dir")
            {
                self.dir = Some(relative_to(dir, s));
            }
        }
    }

    fn demo() -> Demo {
        Demo {
            daemon: DaemonConfig::new(7),
            name: None,
            dir: None,
        }
    }

    fn load_text(text: &str) -> Result<Demo, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("demo.yaml");
        std::fs::write(&p, text).unwrap();
        load(&p, demo()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_common_keys_and_the_daemons_own() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("demo.yaml");
        std::fs::write(
            &p,
            "name: x\ndir: data\nnats: {url: 'nats://n:4222', credsFile: c.creds}\nsubjectPrefix: p.v1\nmaxInFlight: 9\nmaxBodyBytes: 2048\nmetricsListen: 127.0.0.1:9464\n",
        )
        .unwrap();
        let d = load(&p, demo()).unwrap();
        assert_eq!((d.name.as_deref(), d.dir), (Some("x"), Some(dir.path().join("data"))));
        let c = &d.daemon;
        assert_eq!(c.nats.url, "nats://n:4222");
        assert_eq!(c.nats.creds_file, Some(dir.path().join("c.creds")));
        assert_eq!(
            (c.subject_prefix.as_str(), c.max_in_flight, c.max_body_bytes),
            ("p.v1", 9, 2048)
        );
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert!(c.warnings.is_empty() && c.check().is_empty());
        let defaults = load_text("name: x\n").unwrap().daemon;
        assert_eq!(defaults, DaemonConfig::new(7));
    }

    #[test]
    fn every_problem_is_positioned_and_unknown_keys_get_a_hint() {
        let e =
            load_text("name: x\nmaxInFlight: 0\nmaxBodyBytes: 10\nmetricsListen: ':1'\nnats: {pasword: y}\nnmae: z\n")
                .unwrap_err();
        for want in [
            "demo.yaml:2:",
            "maxInFlight",
            "demo.yaml:3:",
            "maxBodyBytes",
            "demo.yaml:4:",
            "is not a listen address",
            "nats.pasword",
            "did you mean `name`",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
        assert!(load_text("name: [").unwrap_err().contains("invalid YAML"));
        assert!(load_text("- a\n").unwrap_err().contains("demo.yaml:1:1"));
    }

    #[test]
    fn an_empty_file_is_what_the_daemon_says() {
        let e = load_text("").unwrap_err();
        assert!(e.contains("expected at least `name:`"), "{e}");
    }

    #[test]
    fn a_retired_key_loads_with_a_warning_naming_it_and_its_place() {
        let d = load_text("name: x\noldMs: 5\n").unwrap();
        assert_eq!(d.name.as_deref(), Some("x"));
        assert_eq!(d.daemon.warnings.len(), 1);
        let w = &d.daemon.warnings[0];
        assert!(
            w.ends_with("demo.yaml:2:8: oldMs: no longer read; it is ignored"),
            "{w}"
        );
        let flag = <Demo as DaemonFile>::RETIRED[0].as_flag("--old-ms");
        assert_eq!(flag, "--old-ms (`oldMs`): no longer read; it is ignored");
    }

    #[test]
    fn checks_and_flags() {
        let mut c = DaemonConfig::new(7);
        c.nats.url = "nats://u:secret@h:4222".into();
        c.max_body_bytes = 1;
        let errs = c.check();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs.iter().all(|e| !e.contains("secret")));
        assert_eq!(errs[1], "maxBodyBytes must be between 1024 and 67108864");
        let args = DaemonArgs {
            max_in_flight: Some(3),
            subject_prefix: Some("q.v1".into()),
            ..DaemonArgs::default()
        };
        let mut c = DaemonConfig::new(7);
        args.apply(&mut c);
        assert_eq!((c.max_in_flight, c.subject_prefix.as_str()), (3, "q.v1"));
        assert_eq!(
            c.max_body_bytes,
            fedvol_proto::DEFAULT_MAX_BODY_BYTES,
            "not given: kept"
        );
    }
}
