//! The agent's configuration: a strict YAML file (`--config agent.yaml`), overridden by flags
//! and environment variables. Unknown keys are errors with a hint, like every fedvol file.

use std::path::{Path, PathBuf};

use fedvol_common::format::files::read_text;
use fedvol_common::yaml::{Ctx, Diagnostics, Limits, Node, join, load_documents};

/// How to reach NATS, and as whom. Credentials never come from the URL (async-nats ignores
/// them there): a URL with `user:pass@` is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatsAuth {
    /// Server URL(s), comma-separated (`nats://127.0.0.1:4222`).
    pub url: String,
    /// User name (with `password`).
    pub user: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// File holding an nkey seed (`SU...`).
    pub nkey_file: Option<PathBuf>,
    /// A `.creds` file (JWT + nkey seed).
    pub creds_file: Option<PathBuf>,
    /// CA certificate (PEM) to trust; enables TLS.
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    pub tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    pub tls_key: Option<PathBuf>,
    /// Prefix of this client's reply inboxes (default `_INBOX`). With `deploy/nats/secure.conf`
    /// each NATS user may subscribe only to `_INBOX_<user>.>`, so no client can read another's
    /// replies: set it to `_INBOX_<user>`.
    pub inbox_prefix: Option<String>,
}

/// True for a subject prefix a client may put its inboxes under: dot-separated tokens, none
/// empty, without wildcards (`*`, `>`) or whitespace.
pub fn is_inbox_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.split('.').all(|t| {
            !t.is_empty() && t != "*" && t != ">" && !t.chars().any(|c| c.is_whitespace() || c == '*' || c == '>')
        })
}

impl NatsAuth {
    /// The default: `nats://127.0.0.1:4222`, no credentials, no TLS.
    pub fn local() -> Self {
        NatsAuth {
            url: "nats://127.0.0.1:4222".into(),
            ..NatsAuth::default()
        }
    }

    /// What the settings must satisfy, whichever file or flag they came from: the URL carries no
    /// credentials (async-nats ignores them there), user and password come together, TLS
    /// certificate and key come together.
    ///
    /// Returns every problem as a sentence (empty when fine); passwords are never echoed.
    pub fn check(&self) -> Vec<String> {
        let mut out = Vec::new();
        for u in self.url.split(',') {
            let after_scheme = u.split_once("://").map_or(u, |(_, rest)| rest);
            if after_scheme.split('/').next().is_some_and(|host| host.contains('@')) {
                out.push(format!(
                    "NATS URL `{}` carries credentials, which async-nats ignores: give them with --nats-user/--nats-password, --nats-creds or --nats-nkey instead",
                    redact_url(u)
                ));
            }
        }
        if self.user.is_some() != self.password.is_some() {
            out.push("NATS user and password must be given together".to_string());
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            out.push("TLS client certificate and key must be given together".to_string());
        }
        if let Some(p) = &self.inbox_prefix
            && !is_inbox_prefix(p)
        {
            out.push(format!(
                "NATS inbox prefix `{p}` is not a subject prefix: use dot-separated tokens without `*`, `>` or spaces, e.g. _INBOX_alice"
            ));
        }
        out
    }
}

/// Reads a `nats:` block (`url`, `user`, `password`, `nkeyFile`, `credsFile`, `tlsCa`,
/// `tlsCert`, `tlsKey`, `inboxPrefix`; unknown keys are errors with a hint) at field path `field`. Relative
/// file paths are taken relative to `base` (the configuration file's directory). Missing keys
/// keep [`NatsAuth::local`]'s values.
///
/// Problems are recorded in `ctx`; the returned value is then partial and must not be used.
pub fn parse_nats(ctx: &mut Ctx, node: &Node, field: &str, base: &Path) -> NatsAuth {
    let mut out = NatsAuth::local();
    let rel = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { base.join(p) }
    };
    let Some(mut m) = ctx.map(node, field) else {
        return out;
    };
    if let Some(n) = m.take("url") {
        out.url = ctx.nonempty_string(n, &join(field, "url")).unwrap_or_default();
    }
    if let Some(n) = m.take("user") {
        out.user = ctx.string(n, &join(field, "user"));
    }
    if let Some(n) = m.take("password") {
        out.password = ctx.string(n, &join(field, "password"));
    }
    if let Some(n) = m.take("inboxPrefix") {
        out.inbox_prefix = ctx.nonempty_string(n, &join(field, "inboxPrefix"));
    }
    for (key, slot) in [
        ("nkeyFile", &mut out.nkey_file),
        ("credsFile", &mut out.creds_file),
        ("tlsCa", &mut out.tls_ca),
        ("tlsCert", &mut out.tls_cert),
        ("tlsKey", &mut out.tls_key),
    ] {
        if let Some(n) = m.take(key) {
            *slot = ctx.nonempty_string(n, &join(field, key)).map(rel);
        }
    }
    m.finish(ctx);
    out
}

/// Everything the agent needs to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// The cluster inventory file (it may `include:` Kubernetes manifests).
    pub inventory: PathBuf,
    /// The cluster name; must match the inventory's `cluster` when both are given.
    pub cluster: Option<String>,
    /// NATS connection.
    pub nats: NatsAuth,
    /// Directory of the state file (`state.redb`).
    pub data_dir: PathBuf,
    /// Subject prefix (default `fedvol.v1`).
    pub subject_prefix: String,
    /// Heartbeat interval, ms (default 2000).
    pub heartbeat_ms: u64,
    /// Hold lease when a plan asks for none, ms (default 30000).
    pub hold_ttl_ms: u64,
    /// How often the inventory file is checked for changes, ms (default 2000; 0 = only SIGHUP).
    pub reload_poll_ms: u64,
    /// Development sandbox: re-root every local driver path under this directory (see
    /// `Drivers::with_storage_root`). Not for production.
    pub storage_root: Option<PathBuf>,
    /// Largest request body served, bytes (default
    /// [`fedvol_common::wire::DEFAULT_MAX_BODY_BYTES`], 1 MiB); larger ones get `bad_request`.
    pub max_body_bytes: usize,
}

impl AgentConfig {
    /// Defaults for everything but the inventory and data directory.
    pub fn new(inventory: PathBuf, data_dir: PathBuf) -> Self {
        AgentConfig {
            inventory,
            cluster: None,
            nats: NatsAuth::local(),
            data_dir,
            subject_prefix: fedvol_common::wire::DEFAULT_PREFIX.to_string(),
            heartbeat_ms: 2000,
            hold_ttl_ms: 30_000,
            reload_poll_ms: 2000,
            storage_root: None,
            max_body_bytes: fedvol_common::wire::DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// Reads a configuration file. Relative paths in it are relative to the file's directory.
    ///
    /// Errors: every problem in the file, with line, column and field.
    pub fn load(path: &Path) -> Result<AgentConfig, Diagnostics> {
        let label = path.display().to_string();
        let text = read_text(path)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let rel = |p: String| {
            let p = PathBuf::from(p);
            if p.is_absolute() { p } else { base.join(p) }
        };
        let mut ctx = Ctx::new(&label);
        let docs = load_documents(&text, Limits::default()).map_err(|e| {
            let mut c = Ctx::new(&label);
            c.error(e.span, "", format!("invalid YAML: {}", e.message));
            Diagnostics(c.into_diagnostics())
        })?;
        let Some(doc) = docs.first() else {
            ctx.error(
                Default::default(),
                "",
                "the configuration file is empty; expected at least `inventory:`",
            );
            return Err(Diagnostics(ctx.into_diagnostics()));
        };
        let mut cfg = AgentConfig::new(PathBuf::new(), PathBuf::from("."));
        let Some(mut r) = ctx.map(doc, "") else {
            return Err(Diagnostics(ctx.into_diagnostics()));
        };
        if let Some(n) = r.require(&mut ctx, "inventory")
            && let Some(s) = ctx.nonempty_string(n, "inventory")
        {
            cfg.inventory = rel(s);
        }
        if let Some(n) = r.take("cluster") {
            cfg.cluster = ctx.nonempty_string(n, "cluster");
        }
        if let Some(n) = r.take("dataDir")
            && let Some(s) = ctx.nonempty_string(n, "dataDir")
        {
            cfg.data_dir = rel(s);
        }
        if let Some(n) = r.take("storageRoot")
            && let Some(s) = ctx.nonempty_string(n, "storageRoot")
        {
            cfg.storage_root = Some(rel(s));
        }
        if let Some(n) = r.take("subjectPrefix")
            && let Some(s) = ctx.nonempty_string(n, "subjectPrefix")
        {
            cfg.subject_prefix = s;
        }
        for (key, slot) in [
            ("heartbeatMs", &mut cfg.heartbeat_ms),
            ("holdTtlMs", &mut cfg.hold_ttl_ms),
            ("reloadPollMs", &mut cfg.reload_poll_ms),
        ] {
            if let Some(n) = r.take(key)
                && let Some(v) = ctx.u64(n, key)
            {
                *slot = v;
            }
        }
        if let Some(n) = r.take("maxBodyBytes")
            && let Some(v) = ctx.int(n, "maxBodyBytes", 1024, 64 * 1024 * 1024)
        {
            cfg.max_body_bytes = v as usize;
        }
        if let Some(n) = r.take("nats") {
            cfg.nats = parse_nats(&mut ctx, n, "nats", &base);
        }
        r.finish(&mut ctx);
        ctx.finish(cfg)
    }

    /// Checks what the file and flags together must satisfy: the NATS URL carries no
    /// credentials, user and password come together, TLS cert and key come together.
    ///
    /// Errors: a list of problems, each a sentence.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut out = self.nats.check();
        if self.heartbeat_ms == 0 {
            out.push("heartbeatMs must be more than 0".to_string());
        }
        if let Some(c) = &self.cluster
            && !fedvol_common::limits::is_token(c)
        {
            out.push(format!(
                "cluster name `{c}` is not valid: use letters, digits, `-` and `_` (it is a NATS subject token)"
            ));
        }
        if !(1024..=64 * 1024 * 1024).contains(&self.max_body_bytes) {
            out.push("maxBodyBytes must be between 1024 and 67108864".to_string());
        }
        if out.is_empty() { Ok(()) } else { Err(out) }
    }
}

/// A URL with any `user:pass@` part replaced by `***@`, for messages and logs.
pub fn redact_url(u: &str) -> String {
    match u.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}"),
            None => u.to_string(),
        },
        None => u.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_with_all_fields_and_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(
            &p,
            "inventory: inv.yaml\ncluster: a\ndataDir: data\nheartbeatMs: 500\nnats:\n  url: nats://127.0.0.1:4222\n  credsFile: a.creds\n",
        )
        .unwrap();
        let c = AgentConfig::load(&p).unwrap();
        assert_eq!(c.inventory, dir.path().join("inv.yaml"));
        assert_eq!(c.data_dir, dir.path().join("data"));
        assert_eq!(c.heartbeat_ms, 500);
        assert_eq!(c.nats.creds_file, Some(dir.path().join("a.creds")));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn unknown_keys_and_url_credentials_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(&p, "inventory: i.yaml\nheartbeatMS: 5\n").unwrap();
        let e = AgentConfig::load(&p).unwrap_err();
        assert!(e.to_string().contains("did you mean `heartbeatMs`"), "{e}");
        let mut c = AgentConfig::new("i".into(), "d".into());
        c.nats.url = "nats://alice:s3cret@127.0.0.1:4222".into();
        let errs = c.validate().unwrap_err();
        assert!(errs[0].contains("carries credentials"));
        assert!(!errs[0].contains("s3cret"), "the password must not be echoed");
    }

    #[test]
    fn cluster_token_and_body_limit_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(
            &p,
            "inventory: i.yaml
maxBodyBytes: 2048
nats: {inboxPrefix: _INBOX_agent-a}
",
        )
        .unwrap();
        let c = AgentConfig::load(&p).unwrap();
        assert_eq!(c.max_body_bytes, 2048);
        assert_eq!(c.nats.inbox_prefix.as_deref(), Some("_INBOX_agent-a"));
        let mut c = AgentConfig::new("i".into(), "d".into());
        c.cluster = Some("a.b".into());
        c.max_body_bytes = 1;
        let errs = c.validate().unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("cluster name `a.b` is not valid"), "{errs:?}");
    }
}

#[cfg(test)]
mod nats_block {
    use super::*;

    fn parse(text: &str) -> Result<NatsAuth, Diagnostics> {
        let docs = load_documents(text, Limits::default()).unwrap();
        let mut ctx = Ctx::new("c.yaml");
        let auth = parse_nats(&mut ctx, &docs[0], "nats", Path::new("/etc/fedvol"));
        ctx.finish(auth)
    }

    #[test]
    fn the_block_reads_alone_with_paths_relative_to_the_base() {
        let a = parse("url: nats://n:4222\nuser: u\npassword: p\ntlsCa: ca.pem\ninboxPrefix: _INBOX_u\n").unwrap();
        assert_eq!(a.url, "nats://n:4222");
        assert_eq!(a.inbox_prefix.as_deref(), Some("_INBOX_u"));
        assert_eq!(a.tls_ca, Some(PathBuf::from("/etc/fedvol/ca.pem")));
        assert!(a.check().is_empty());
        let d = parse("{}").unwrap();
        assert_eq!(d, NatsAuth::local());
    }

    #[test]
    fn unknown_keys_and_half_pairs_are_reported() {
        let e = parse("url: nats://n\ncredFile: x\n").unwrap_err();
        assert!(e.to_string().contains("nats.credFile"), "{e}");
        assert!(e.to_string().contains("did you mean `credsFile`"), "{e}");
        let a = parse("user: u\ntlsCert: c.pem\ninboxPrefix: \"_INBOX.*\"\n").unwrap();
        let problems = a.check();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[2].contains("inbox prefix `_INBOX.*`"), "{problems:?}");
        for ok in ["_INBOX_alice", "_I.agent-a"] {
            assert!(is_inbox_prefix(ok), "{ok}");
        }
        for bad in ["", "_INBOX.", ".x", "a..b", "a b", "_INBOX.>", "a*"] {
            assert!(!is_inbox_prefix(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod shipped {
    use super::*;

    /// The example configuration shipped in deploy/config is valid.
    #[test]
    fn deploy_config_agent_yaml_loads() {
        let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/config/agent.yaml"));
        let c = AgentConfig::load(p).unwrap();
        assert_eq!(c.cluster.as_deref(), Some("cluster-a"));
        assert!(c.inventory.ends_with("examples/clusters/cluster-a.yaml"));
        assert!(c.validate().is_ok());
    }
}
