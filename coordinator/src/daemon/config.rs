//! The coordinator's configuration: a strict YAML file (`--config coordinator.yaml`),
//! overridden by flags and `FEDVOL_*` environment variables (see `fedvol-coordinator --help`).
//! Unknown keys are errors with a "did you mean" hint, like every fedvol file. The keys both
//! daemons take (`nats:`, `subjectPrefix`, `maxInFlight`, `maxBodyBytes`, `metricsListen`), the
//! file's reading and its errors are [`fedvol_daemon_config`]'s; the rest is the coordinator's
//! own. `holdTtlMs` is no longer read ([`HOLD_TTL_MS`]): a file that sets it loads, with a
//! warning.
//!
//! ```yaml
//! nats: {url: nats://127.0.0.1:4222}   # the same block as the agent's
//! subjectPrefix: fedvol.v1
//! deadlineMs: 2000        # how long a submit waits for clusters
//! commitAttempts: 3       # commit failures (not capacity races) before the decision fails
//! commitTimeoutMs: 10000  # how long one commit (or complete) may take on an agent
//! directory: directory.yaml
//! operators: [ops]        # NATS users who may drain and undrain clusters (default: none)
//! kv: {bucket: fedvol_decisions, history: 16, replicas: 1, maxConsumers: 256}
//! # kv.nats: the bucket's own NATS login (see `KvConfig::login`); url and TLS are `nats:`'s
//! #   nats: {user: coordinator-kv, passwordFile: coordinator-kv.password}
//! maxBodyBytes: 1048576   # largest request body served
//! reconcileEveryMs: 2000  # the reconciler's lease renewal and scan (0 = never reconcile here)
//! maxInFlight: 4096       # requests in progress at once; beyond, `overloaded`
//! maxInFlightPerUser: 64  # requests of one user in progress at once (long polls included); beyond, `overloaded`
//! readBytesPerSecondPerUser: 8388608  # decisions one user reads per second (`changes`, `list`; 0 = no bound)
//! decisionRetentionMs: 2592000000     # final decisions older than this are removed (30 days; 0 = kept)
//! maxDecisionsPerUser: 10000          # decisions one user stores when no quota applies (0 = no cap)
//! forgetClusterAfterMs: 600000  # a cluster not heard from for this long leaves the registry
//! metricsListen: 127.0.0.1:9464  # serve /metrics, /healthz, /readyz here (default: off)
//! quotas: [{project: genomics, storage: 10TiB}]  # see `daemon::policy`
//! priorityClasses: {high: 1000, normal: 0}
//! defaultPriorityClass: normal
//! queue: {maxQueued: 1000, maxWaitMs: 86400000}
//! choice:                 # the cluster choice for submits that do not say
//!   cost: true            # run the `cost` step: prefer the cheapest estimated cluster (default false)
//!   defaultHours: 1       # hours counted when no job declares a timeout (default 1, > 0)
//! ```

use std::path::{Path, PathBuf};

use fedvol_common::choice::{ChoiceOptions, check_hours};
use fedvol_daemon_config::{DaemonConfig, DaemonFile, Retired, relative_to};
use fedvol_formats::yaml::{Ctx, Diagnostics, MapReader};
use fedvol_proto::nats::NatsAuth;

/// Where decisions are stored: a JetStream key-value bucket (file storage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvConfig {
    /// Bucket name (default `fedvol_decisions`); its stream is `KV_<bucket>`.
    pub bucket: String,
    /// Revisions kept per decision (default 16, 1..=64, the server's limit).
    pub history: i64,
    /// Stream replicas (default 1; 3 or 5 on a clustered NATS).
    pub replicas: usize,
    /// Most consumers the bucket's stream takes (default 256): every watch or listing of the
    /// decisions is one, and a user with read access could otherwise create them without end
    ///. Applies when the coordinator creates the bucket.
    pub max_consumers: i32,
    /// The NATS login of the bucket's connection (`kv.nats:`, `--kv-nats-user`...): only the
    /// identity fields of a [`NatsAuth`] are set here (user, password or password file, creds,
    /// nkey, inbox prefix); the URL and TLS are always `nats:`'s ([`KvConfig::auth`]). `None`
    /// (the default): the decision bucket is reached over the coordinator's one connection.
    ///
    /// Why a second login: nats-server 2.9 keeps a reply-permission entry for every message
    /// with a reply subject it delivers to a client with `allow_responses`, and past 4,096
    /// entries walks them all on each delivery; every JetStream delivery to the bucket's
    /// watches carries an ack subject nobody answers. The identity that answers users needs
    /// `allow_responses`; the bucket's must not have it (deploy/nats/README.md, "Two
    /// identities for the coordinator").
    pub login: Option<NatsAuth>,
}

impl KvConfig {
    /// The settings of the bucket's own connection: `main` (the `nats:` block, for URL and
    /// TLS) with its identity replaced by [`KvConfig::login`]'s; `None` when no login is set.
    pub fn auth(&self, main: &NatsAuth) -> Option<NatsAuth> {
        let l = self.login.as_ref()?;
        Some(NatsAuth {
            user: l.user.clone(),
            password: l.password.clone(),
            password_file: l.password_file.clone(),
            nkey_file: l.nkey_file.clone(),
            creds_file: l.creds_file.clone(),
            inbox_prefix: l.inbox_prefix.clone(),
            ..main.clone()
        })
    }
}

impl Default for KvConfig {
    fn default() -> Self {
        KvConfig {
            bucket: fedvol_proto::decisions::DEFAULT_BUCKET.into(),
            history: 16,
            replicas: 1,
            max_consumers: 256,
            login: None,
        }
    }
}

/// Everything the coordinator needs to run.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorConfig {
    /// What both daemons take: NATS connection (the agent's settings), subject prefix,
    /// `maxInFlight` (default 4096), `maxBodyBytes`, `metricsListen`.
    pub daemon: DaemonConfig,
    /// How long a submit waits for the clusters' plans, ms (default 2000). A submit may ask
    /// for another wait with `timeout_ms`, up to [`MAX_DEADLINE_MS`].
    pub deadline_ms: u64,
    /// Clusters tried in ranking order before a decision fails (default 3).
    pub commit_attempts: u32,
    /// How long one commit or complete may take on an agent (provisioning included), ms
    /// (default 10000).
    pub commit_timeout_ms: u64,
    /// The users-to-groups directory file; `None` = dev mode (clients' claimed groups are
    /// trusted, with a warning).
    pub directory: Option<PathBuf>,
    /// The users who may drain and undrain clusters (`operators:`, `--operator`): each the
    /// NATS user of their requests (the last token of `<prefix>.operator.<op>.<user>`, which
    /// the shipped permissions let only the `ops` identity publish). Empty (the default): nobody
    /// may, and a drain is answered `not_operator` saying how to name one. A second check
    /// behind the NATS permissions (`daemon::ops::drain`).
    pub operators: Vec<String>,
    /// The decision store.
    pub kv: KvConfig,
    /// How long start-up discovery (`$SRV.INFO.fedvol-agent`) waits for agents, ms (default 500).
    pub discovery_ms: u64,
    /// How often the reconciler renews its lease and looks for decisions left `planned` by a
    /// coordinator that died, ms (default 2000; 0 = this coordinator never reconciles). See
    /// `daemon::reconcile`.
    pub reconcile_every_ms: u64,
    /// Requests of one user in progress at once (default 64); beyond, that user's requests
    /// are answered `overloaded` (`daemon::per_user`).
    pub max_in_flight_per_user: usize,
    /// Bytes of decisions one user may read per second through `changes` and `list` (default
    /// 8 MiB; 0 = no bound): past it, that user's next answer waits (`daemon::per_user::ReadBudget`).
    pub read_bytes_per_second_per_user: u64,
    /// How long a final decision (completed, failed, or a kept dry run) is kept after its last
    /// change, ms (default 30 days; 0 = forever): the reconciler's holder removes older ones
    /// (`daemon::retention`).
    pub decision_retention_ms: u64,
    /// Decisions one user may have stored at once when no quota applies to the submit (default
    /// 10,000; 0 = no cap): beyond, a submit of a new request id is refused
    /// `too_many_decisions` (`daemon::retention`).
    pub max_decisions_per_user: usize,
    /// How long a cluster may go unheard (no heartbeat, no answer) before the registry forgets
    /// it, ms (default 600000, at least 1000): a cluster taken out of the federation (or a name
    /// someone invented) stops appearing in decisions and in `fedvol clusters`.
    pub forget_cluster_after_ms: u64,
    /// Rejected candidates listed per funnel stage in stored decisions, unless a submit asks
    /// for another number (default [`fedvol_common::funnel::trace::STORED_TRACE_LIMIT`]; 0 =
    /// all, which can make decisions of large clusters exceed NATS's `max_payload`).
    pub trace_limit: usize,
    /// Federation-wide policy: `quotas`, `priorityClasses`, `defaultPriorityClass`,
    /// `queue` (see [`super::policy`]).
    pub policy: super::policy::Policy,
    /// The cluster choice for submits that carry no wish of their own (`choice:`):
    /// `cost` runs the `cost` step, `default_hours` (`defaultHours`) is counted when no job
    /// declares a timeout, and fills a wish that gives none. Default: no `cost` step, 1 hour.
    pub choice: ChoiceOptions,
}

/// `readBytesPerSecondPerUser`'s default: 8 MiB per second.
pub const DEFAULT_READ_BYTES_PER_SECOND: u64 = 8 * 1024 * 1024;

/// `decisionRetentionMs`'s default: 30 days.
pub const DEFAULT_DECISION_RETENTION_MS: u64 = 30 * 24 * 3600 * 1000;

/// `maxDecisionsPerUser`'s default.
pub const DEFAULT_MAX_DECISIONS_PER_USER: usize = 10_000;

/// The longest wait a submit may ask for, ms.
pub const MAX_DEADLINE_MS: u64 = 120_000;

/// `holdTtlMs`, no longer read: plans hold nothing (a commit is admitted on the agent, at
/// commit), so the coordinator asks agents for no hold lease. A file that sets it, or
/// `--hold-ttl-ms`, still loads, with this warning (docs/design.md §3).
pub const HOLD_TTL_MS: Retired = Retired {
    key: "holdTtlMs",
    why: "no longer read: the coordinator asks agents for no holds (a commit is admitted on the agent), so it is ignored; remove it",
};

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            daemon: DaemonConfig::new(4096),
            deadline_ms: 2000,
            commit_attempts: 3,
            commit_timeout_ms: 10_000,
            directory: None,
            operators: Vec::new(),
            kv: KvConfig::default(),
            discovery_ms: 500,
            reconcile_every_ms: 2000,
            max_in_flight_per_user: 64,
            read_bytes_per_second_per_user: DEFAULT_READ_BYTES_PER_SECOND,
            decision_retention_ms: DEFAULT_DECISION_RETENTION_MS,
            max_decisions_per_user: DEFAULT_MAX_DECISIONS_PER_USER,
            forget_cluster_after_ms: 600_000,
            trace_limit: fedvol_common::funnel::trace::STORED_TRACE_LIMIT,
            policy: super::policy::Policy::default(),
            choice: ChoiceOptions::default(),
        }
    }
}

impl CoordinatorConfig {
    /// The choice options a submit's request carries: the submit's `wish` when it has one (its
    /// default hours, if not given, from `choice.defaultHours`), else the configured `choice`
    /// when it sets anything; `None` when neither does (the request then looks as it did
    /// in earlier releases).
    pub fn choice_for(&self, wish: Option<ChoiceOptions>) -> Option<ChoiceOptions> {
        match wish {
            Some(w) => Some(ChoiceOptions {
                cost: w.cost,
                default_hours: w.default_hours.or(self.choice.default_hours),
            }),
            None => (self.choice != ChoiceOptions::default()).then_some(self.choice),
        }
    }

    /// Reads a configuration file ([`fedvol_daemon_config::load`]). Relative paths in it
    /// (directory, credentials, TLS files) are relative to the file's directory. Every key is
    /// optional; an empty file gives the defaults.
    ///
    /// Errors: every problem in the file, with line, column and field.
    pub fn load(path: &Path) -> Result<CoordinatorConfig, Diagnostics> {
        fedvol_daemon_config::load(path, CoordinatorConfig::default())
    }

    /// Checks what the file and flags together must satisfy (what both daemons check,
    /// [`DaemonConfig::check`]: NATS settings, `maxBodyBytes`; positive durations, a bucket name
    /// NATS accepts, history and replicas in range, a subject prefix).
    ///
    /// Errors: every problem, each a sentence.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut out = self.daemon.check();
        for (name, v) in [
            ("deadlineMs", self.deadline_ms),
            ("commitTimeoutMs", self.commit_timeout_ms),
        ] {
            if v == 0 {
                out.push(format!("{name} must be more than 0"));
            }
        }
        if self.deadline_ms > MAX_DEADLINE_MS {
            out.push(format!("deadlineMs must be at most {MAX_DEADLINE_MS}"));
        }
        if self.forget_cluster_after_ms < 1000 {
            out.push("forgetClusterAfterMs must be at least 1000".to_string());
        }
        if self.commit_attempts == 0 {
            out.push("commitAttempts must be at least 1".to_string());
        }
        for o in &self.operators {
            if let Err(e) = fedvol_common::limits::check_user(o) {
                out.push(format!("operators: {e}"));
            }
        }
        let b = &self.kv.bucket;
        if b.is_empty() || !b.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            out.push(format!(
                "kv.bucket `{b}` is not a valid bucket name: use letters, digits, `-` and `_`"
            ));
        }
        if !(1..=64).contains(&self.kv.history) {
            out.push("kv.history must be from 1 to 64".to_string());
        }
        if !(1..=5).contains(&self.kv.replicas) {
            out.push("kv.replicas must be from 1 to 5".to_string());
        }
        if let Some(auth) = self.kv.auth(&self.daemon.nats) {
            if auth.user.is_none() && auth.creds_file.is_none() && auth.nkey_file.is_none() {
                out.push(
                    "kv.nats names no identity: give its user (with a password or password file), credsFile or nkeyFile"
                        .to_string(),
                );
            }
            out.extend(auth.check().into_iter().map(|e| format!("kv.nats: {e}")));
        }
        let prefix = &self.daemon.subject_prefix;
        if prefix.trim_matches('.').is_empty() || prefix.contains(['*', '>', ' ']) {
            out.push(format!(
                "subjectPrefix `{prefix}` is not a subject prefix such as fedvol.v1"
            ));
        }
        if out.is_empty() { Ok(()) } else { Err(out) }
    }
}

impl DaemonFile for CoordinatorConfig {
    const EMPTY: Option<&'static str> = None;
    const RETIRED: &'static [Retired] = &[HOLD_TTL_MS];

    fn daemon(&mut self) -> &mut DaemonConfig {
        &mut self.daemon
    }

    /// The coordinator's own keys: durations and bounds, `choice:`, `directory`, `operators`,
    /// `kv:`, and the policy's (`quotas`, `priorityClasses`, `defaultPriorityClass`, `queue:`).
    fn read(&mut self, ctx: &mut Ctx, r: &mut MapReader<'_>, base: &Path) {
        for (key, slot) in [
            ("deadlineMs", &mut self.deadline_ms),
            ("commitTimeoutMs", &mut self.commit_timeout_ms),
            ("discoveryMs", &mut self.discovery_ms),
            ("reconcileEveryMs", &mut self.reconcile_every_ms),
            ("forgetClusterAfterMs", &mut self.forget_cluster_after_ms),
            ("readBytesPerSecondPerUser", &mut self.read_bytes_per_second_per_user),
            ("decisionRetentionMs", &mut self.decision_retention_ms),
        ] {
            if let Some(n) = r.take(key)
                && let Some(v) = ctx.u64(n, key)
            {
                *slot = v;
            }
        }
        if let Some(n) = r.take("maxInFlightPerUser")
            && let Some(v) = ctx.int(n, "maxInFlightPerUser", 1, 1_000_000)
        {
            self.max_in_flight_per_user = v as usize;
        }
        if let Some(n) = r.take("maxDecisionsPerUser")
            && let Some(v) = ctx.int(n, "maxDecisionsPerUser", 0, 100_000_000)
        {
            self.max_decisions_per_user = v as usize;
        }
        if let Some(n) = r.take("commitAttempts")
            && let Some(v) = ctx.int(n, "commitAttempts", 1, 100)
        {
            self.commit_attempts = v as u32;
        }
        if let Some(n) = r.take("traceLimit")
            && let Some(v) = ctx.int(n, "traceLimit", 0, 100_000)
        {
            self.trace_limit = v as usize;
        }
        if let Some(n) = r.take("choice")
            && let Some(mut m) = ctx.map(n, "choice")
        {
            if let Some(n) = m.take("cost")
                && let Some(b) = ctx.bool(n, "choice.cost")
            {
                self.choice.cost = b;
            }
            if let Some(n) = m.take("defaultHours") {
                let parsed = n.as_scalar().and_then(|s| s.trim().parse::<f64>().ok());
                match parsed.map(|h| check_hours(h).map(|()| h)) {
                    Some(Ok(h)) => self.choice.default_hours = Some(h),
                    Some(Err(e)) => ctx.error(n.span, "choice.defaultHours", e),
                    None => ctx.error(
                        n.span,
                        "choice.defaultHours",
                        format!(
                            "expected a number of hours > 0, found {}",
                            fedvol_formats::yaml::decode::describe(n)
                        ),
                    ),
                }
            }
            m.finish(ctx);
        }
        if let Some(n) = r.take("directory")
            && let Some(s) = ctx.nonempty_string(n, "directory")
        {
            self.directory = Some(relative_to(base, s));
        }
        if let Some(n) = r.take("operators")
            && let Some(users) = ctx.string_list(n, "operators")
        {
            for (i, u) in users.iter().enumerate() {
                if let Err(e) = fedvol_common::limits::check_user(u) {
                    ctx.error(n.span, &format!("operators[{i}]"), e.to_string());
                }
            }
            self.operators = users;
        }
        if let Some(n) = r.take("kv")
            && let Some(mut m) = ctx.map(n, "kv")
        {
            if let Some(n) = m.take("bucket")
                && let Some(s) = ctx.nonempty_string(n, "kv.bucket")
            {
                self.kv.bucket = s;
            }
            if let Some(n) = m.take("history")
                && let Some(v) = ctx.int(n, "kv.history", 1, 64)
            {
                self.kv.history = v as i64;
            }
            if let Some(n) = m.take("replicas")
                && let Some(v) = ctx.int(n, "kv.replicas", 1, 5)
            {
                self.kv.replicas = v as usize;
            }
            if let Some(n) = m.take("maxConsumers")
                && let Some(v) = ctx.int(n, "kv.maxConsumers", 1, 100_000)
            {
                self.kv.max_consumers = v as i32;
            }
            if let Some(n) = m.take("nats") {
                self.kv.login = read_kv_login(ctx, n, base);
            }
            m.finish(ctx);
        }
        fedvol_formats::policy::read_policy(&mut self.policy, ctx, r);
    }
}

/// `kv.nats:`: the identity keys of a `nats:` block (`user`, `password`, `passwordFile`,
/// `credsFile`, `nkeyFile`, `inboxPrefix`; files relative to `base`). Any other key, `url` and
/// the TLS files included, is an unknown-key error: the bucket's connection goes where
/// `nats:` goes.
fn read_kv_login(ctx: &mut Ctx, node: &fedvol_formats::yaml::Node, base: &Path) -> Option<NatsAuth> {
    let mut m = ctx.map(node, "kv.nats")?;
    let mut out = NatsAuth {
        url: String::new(),
        ..NatsAuth::local()
    };
    for (key, slot) in [
        ("user", &mut out.user),
        ("password", &mut out.password),
        ("inboxPrefix", &mut out.inbox_prefix),
    ] {
        if let Some(n) = m.take(key) {
            *slot = ctx.nonempty_string(n, &format!("kv.nats.{key}"));
        }
    }
    for (key, slot) in [
        ("passwordFile", &mut out.password_file),
        ("credsFile", &mut out.creds_file),
        ("nkeyFile", &mut out.nkey_file),
    ] {
        if let Some(n) = m.take(key) {
            *slot = ctx
                .nonempty_string(n, &format!("kv.nats.{key}"))
                .map(|p| relative_to(base, p));
        }
    }
    m.finish(ctx);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("coordinator.yaml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn every_field_with_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "nats: {url: 'nats://n:4222', credsFile: c.creds}\nsubjectPrefix: x.v1\ndeadlineMs: 800\ncommitAttempts: 2\ncommitTimeoutMs: 3000\ndiscoveryMs: 100\ndirectory: dir.yaml\nkv: {bucket: decisions, history: 4, replicas: 3}\n",
        );
        let c = CoordinatorConfig::load(&p).unwrap();
        assert_eq!(c.daemon.nats.url, "nats://n:4222");
        assert_eq!(c.daemon.nats.creds_file, Some(dir.path().join("c.creds")));
        assert_eq!(c.daemon.subject_prefix, "x.v1");
        assert_eq!(
            (c.deadline_ms, c.commit_attempts, c.commit_timeout_ms, c.discovery_ms),
            (800, 2, 3000, 100)
        );
        assert_eq!(c.directory, Some(dir.path().join("dir.yaml")));
        assert_eq!(
            c.kv,
            KvConfig {
                bucket: "decisions".into(),
                history: 4,
                replicas: 3,
                max_consumers: 256,
                login: None,
            }
        );
        assert!(c.validate().is_ok());
    }

    /// `kv.nats`: the bucket's own login takes the identity keys only (files relative to the
    /// configuration), goes where `nats:` goes, and must name an identity.
    #[test]
    fn the_buckets_login_is_an_identity_on_the_same_server() {
        let dir = tempfile::tempdir().unwrap();
        let c = CoordinatorConfig::load(&write(
            dir.path(),
            "nats: {url: 'nats://n:4222', user: coordinator, password: p, tlsCa: ca.pem, inboxPrefix: _INBOX_coordinator}\nkv: {nats: {user: coordinator-kv, passwordFile: kv.pw, inboxPrefix: _INBOX_coordinator-kv}}\n",
        ))
        .unwrap();
        assert!(c.validate().is_ok(), "{:?}", c.validate());
        let kv = c.kv.auth(&c.daemon.nats).expect("a login of its own");
        assert_eq!(kv.url, "nats://n:4222");
        assert_eq!(kv.tls_ca, Some(dir.path().join("ca.pem")));
        assert_eq!(kv.user.as_deref(), Some("coordinator-kv"));
        assert_eq!(kv.password, None, "not the coordinator's password");
        assert_eq!(kv.password_file, Some(dir.path().join("kv.pw")));
        assert_eq!(kv.inbox_prefix.as_deref(), Some("_INBOX_coordinator-kv"));
        assert_eq!(
            CoordinatorConfig::default().kv.auth(&c.daemon.nats),
            None,
            "one connection by default"
        );

        let e = CoordinatorConfig::load(&write(
            dir.path(),
            "kv:\n  nats: {user: k, password: p, url: 'nats://x:1'}\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("coordinator.yaml:2:") && e.contains("kv.nats.url"), "{e}");
        let c = CoordinatorConfig::load(&write(dir.path(), "kv: {nats: {passwordFile: kv.pw}}\n")).unwrap();
        let e = c.validate().unwrap_err().join("\n");
        assert!(e.contains("kv.nats names no identity"), "{e}");
    }

    #[test]
    fn metrics_listen_is_an_address() {
        let dir = tempfile::tempdir().unwrap();
        let c = CoordinatorConfig::load(&write(dir.path(), "metricsListen: '[::1]:9465'\n")).unwrap();
        assert_eq!(c.daemon.metrics_listen, Some("[::1]:9465".parse().unwrap()));
        assert_eq!(
            CoordinatorConfig::default().daemon.metrics_listen,
            None,
            "off by default"
        );
        let e = CoordinatorConfig::load(&write(dir.path(), "deadlineMs: 5\nmetricsListen: ':9464'\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("coordinator.yaml:2:"), "{e}");
        assert!(e.contains("`:9464` is not a listen address; expected IP:PORT"), "{e}");
    }

    #[test]
    fn read_budget_retention_and_the_per_user_cap() {
        let dir = tempfile::tempdir().unwrap();
        let d = CoordinatorConfig::default();
        assert_eq!(
            (
                d.read_bytes_per_second_per_user,
                d.decision_retention_ms,
                d.max_decisions_per_user
            ),
            (8 * 1024 * 1024, 30 * 24 * 3600 * 1000, 10_000)
        );
        let c = CoordinatorConfig::load(&write(
            dir.path(),
            "readBytesPerSecondPerUser: 65536\ndecisionRetentionMs: 3000\nmaxDecisionsPerUser: 5\n",
        ))
        .unwrap();
        assert_eq!(
            (
                c.read_bytes_per_second_per_user,
                c.decision_retention_ms,
                c.max_decisions_per_user
            ),
            (65536, 3000, 5)
        );
        let e = CoordinatorConfig::load(&write(dir.path(), "maxDecisionsPerUser: -1\ndecisionRetentionMS: 1\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("maxDecisionsPerUser"), "{e}");
        assert!(e.contains("did you mean `decisionRetentionMs`"), "{e}");
    }

    #[test]
    fn defaults_for_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = CoordinatorConfig::load(&write(dir.path(), "")).unwrap();
        assert_eq!(c, CoordinatorConfig::default());
        assert_eq!(c.deadline_ms, 2000);
        assert_eq!(c.kv.bucket, "fedvol_decisions");
        assert_eq!(c.kv.history, 16);
    }

    /// `holdTtlMs` was documented as a coordinator setting but read by nothing; the contract
    /// only grows, so a file that still sets it loads, and says the key is ignored.
    #[test]
    fn hold_ttl_ms_loads_with_a_warning_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let c = CoordinatorConfig::load(&write(dir.path(), "deadlineMs: 900\nholdTtlMs: 30000\n")).unwrap();
        assert_eq!(c.deadline_ms, 900);
        assert_eq!(c.daemon.warnings.len(), 1, "{:?}", c.daemon.warnings);
        let w = &c.daemon.warnings[0];
        assert!(w.contains("coordinator.yaml:2:12: holdTtlMs: no longer read"), "{w}");
        assert!(w.contains("ignored"), "{w}");
        let mut without = c.clone();
        without.daemon.warnings.clear();
        assert_eq!(
            without,
            CoordinatorConfig::load(&write(dir.path(), "deadlineMs: 900\n")).unwrap(),
            "it changes nothing else"
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_all_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "deadlineMS: 5\nkv: {bucket: b, histroy: 3}\ncommitAttempts: 0\nnats: {url: x, pasword: y}\n",
        );
        let e = CoordinatorConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("did you mean `deadlineMs`"), "{e}");
        assert!(e.contains("kv.histroy") && e.contains("did you mean `history`"), "{e}");
        assert!(e.contains("commitAttempts"), "{e}");
        assert!(e.contains("nats.pasword"), "{e}");
        assert!(e.contains(":1:1: "), "positions are given: {e}");
    }

    #[test]
    fn validation_refuses_bad_combinations() {
        let mut c = CoordinatorConfig::default();
        c.daemon.nats.url = "nats://u:secret@h:4222".into();
        c.deadline_ms = 0;
        c.kv.bucket = "a.b".into();
        c.daemon.subject_prefix = "fedvol.>".into();
        let e = c.validate().unwrap_err();
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e.iter().all(|m| !m.contains("secret")));
    }

    #[test]
    fn inbox_prefix_and_body_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "nats: {inboxPrefix: _INBOX_coordinator}
maxBodyBytes: 65536
",
        );
        let c = CoordinatorConfig::load(&p).unwrap();
        assert_eq!(c.daemon.nats.inbox_prefix.as_deref(), Some("_INBOX_coordinator"));
        assert_eq!(c.daemon.max_body_bytes, 65536);
        assert!(c.validate().is_ok());
        let e = CoordinatorConfig::load(&write(
            dir.path(),
            "maxBodyBytes: 10
",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("maxBodyBytes"), "{e}");
        let mut c = CoordinatorConfig::default();
        c.daemon.nats.inbox_prefix = Some("_INBOX.>".into());
        c.daemon.max_body_bytes = 0;
        assert_eq!(c.validate().unwrap_err().len(), 2);
    }

    #[test]
    fn trace_limit_of_stored_decisions() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(CoordinatorConfig::default().trace_limit, 5);
        let c = CoordinatorConfig::load(&write(dir.path(), "traceLimit: 0\n")).unwrap();
        assert_eq!(c.trace_limit, 0, "0 = every rejected candidate");
        let e = CoordinatorConfig::load(&write(dir.path(), "traceLimit: many\n")).unwrap_err();
        assert!(e.to_string().contains("traceLimit"), "{e}");
        let e = CoordinatorConfig::load(&write(dir.path(), "traceLimit: -1\n")).unwrap_err();
        assert!(e.to_string().contains(":1:"), "{e}");
    }
}

#[cfg(test)]
mod choice_tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("coordinator.yaml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn choice_block_is_strict_and_fills_wishes() {
        let dir = tempfile::tempdir().unwrap();
        let c = CoordinatorConfig::load(&write(dir.path(), "choice: {cost: true, defaultHours: 2.5}\n")).unwrap();
        assert_eq!(
            c.choice,
            ChoiceOptions {
                cost: true,
                default_hours: Some(2.5)
            }
        );
        assert_eq!(c.choice_for(None), Some(c.choice), "the default applies without a wish");
        let wish = ChoiceOptions {
            cost: false,
            default_hours: None,
        };
        assert_eq!(
            c.choice_for(Some(wish)),
            Some(ChoiceOptions {
                cost: false,
                default_hours: Some(2.5)
            }),
            "a wish replaces the default, its missing hours come from the configuration"
        );
        assert_eq!(
            CoordinatorConfig::default().choice_for(None),
            None,
            "unchanged requests"
        );
        for (text, want) in [
            ("choice: {cost: yes please}\n", "choice.cost"),
            (
                "choice: {defaultHours: 0}\n",
                "choice.defaultHours: default hours must be a number > 0",
            ),
            (
                "choice: {defaultHours: soon}\n",
                "choice.defaultHours: expected a number of hours > 0",
            ),
            ("choice: {costs: true}\n", "did you mean `cost`"),
            ("operators: [ops, a.b]\n", "operators[1]: user name `a.b` is not valid"),
            ("operators: ops\n", "operators"),
        ] {
            let e = CoordinatorConfig::load(&write(dir.path(), text))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want) && e.contains("coordinator.yaml:1:"), "{text}: {e}");
        }
    }
}

#[cfg(test)]
mod shipped {
    use super::*;
    use crate::daemon::directory::Directory;

    /// The example configuration and directory shipped in deploy/config are valid and agree.
    #[test]
    fn deploy_config_coordinator_and_directory_load() {
        let p = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/config/coordinator.yaml"
        ));
        let c = CoordinatorConfig::load(p).unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(c.kv, KvConfig::default());
        assert_eq!((c.deadline_ms, c.commit_attempts), (2000, 3));
        assert!(c.daemon.warnings.is_empty(), "{:?}", c.daemon.warnings);
        assert_eq!(c.trace_limit, 5);
        assert_eq!(c.policy.priority_classes.len(), 3);
        assert_eq!(c.policy.default_priority_class.as_deref(), Some("normal"));
        assert!(c.policy.quotas.is_empty(), "the example's quotas are commented out");
        assert_eq!(c.operators, ["ops"], "the operator of deploy/nats");
        let dir = c.directory.expect("the example names its directory");
        assert!(dir.ends_with("directory.yaml"));
        let d = Directory::load(&dir).unwrap();
        assert_eq!(d.groups("alice"), ["physics", "researchers"]);
        assert!(d.groups("nobody").is_empty());
    }
}
