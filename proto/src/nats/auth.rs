//! How to reach NATS and as whom ([`NatsAuth`]), whichever file or flag it came from, and the
//! `nats:` block of the agent's and coordinator's configuration files ([`parse_nats`]).

use std::path::{Path, PathBuf};

use fedvol_formats::yaml::{Ctx, Node, join};

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
    /// A file holding the password (its first line), read at connection: how a daemon is
    /// given its password without it being in its environment or configuration (systemd's
    /// `LoadCredential=`, a file readable by the daemon's account alone).
    pub password_file: Option<PathBuf>,
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
        if self.user.is_some() != (self.password.is_some() || self.password_file.is_some()) {
            out.push("NATS user and password (or password file) must be given together".to_string());
        }
        if self.password.is_some() && self.password_file.is_some() {
            out.push("give the NATS password or a password file, not both".to_string());
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

/// Reads a `nats:` block (`url`, `user`, `password`, `passwordFile`, `nkeyFile`, `credsFile`, `tlsCa`,
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
        ("passwordFile", &mut out.password_file),
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

/// The password of `auth`: the one given, else the first line of its password file (trailing
/// whitespace removed).
///
/// Errors: the password file cannot be read, or is empty.
pub fn password(auth: &NatsAuth) -> Result<Option<String>, std::io::Error> {
    if auth.password.is_some() {
        return Ok(auth.password.clone());
    }
    let Some(f) = &auth.password_file else { return Ok(None) };
    let text = std::fs::read_to_string(f)?;
    let first = text.lines().next().unwrap_or_default().trim_end().to_string();
    if first.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is empty",
        ));
    }
    Ok(Some(first))
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
    fn urls_lose_their_credentials_in_messages() {
        assert_eq!(redact_url("nats://alice:s3cret@h:4222"), "nats://***@h:4222");
        assert_eq!(redact_url("nats://h:4222"), "nats://h:4222");
        let a = NatsAuth {
            url: "nats://alice:s3cret@h:4222".into(),
            ..NatsAuth::local()
        };
        let problems = a.check().join(" ");
        assert!(
            problems.contains("carries credentials") && !problems.contains("s3cret"),
            "{problems}"
        );
    }

    /// A daemon's password from a file of its own (the systemd unit's credential): read from
    /// the file's first line; a user with neither password nor file, or with both, refused.
    #[test]
    fn the_password_comes_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "s3cret\n").unwrap();
        let a = NatsAuth {
            user: Some("agent-c".into()),
            password_file: Some(f.clone()),
            ..NatsAuth::local()
        };
        assert!(a.check().is_empty(), "{:?}", a.check());
        assert_eq!(password(&a).unwrap().as_deref(), Some("s3cret"));
        let both = NatsAuth {
            password: Some("x".into()),
            ..a.clone()
        };
        assert!(both.check().join(" ").contains("not both"));
        let neither = NatsAuth {
            password_file: None,
            ..a.clone()
        };
        assert!(neither.check().join(" ").contains("must be given together"));
        std::fs::write(&f, "").unwrap();
        assert!(password(&a).is_err(), "an empty file is no password");
    }

    mod nats_block {
        use super::*;
        use fedvol_formats::yaml::{Diagnostics, Limits, load_documents};

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
}
