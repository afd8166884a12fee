//! How a fedvol process reaches NATS and as whom ([`NatsAuth`]): the settings, whichever file or
//! flag they came from, and the checks they must pass. Plain values: the `nats:` block of the
//! daemons' configuration files is read by `fedvol_formats::nats`, the flags by
//! `fedvol_proto::nats::NatsArgs`, and connecting (reading a password file included) is
//! `fedvol_proto::nats`.

use std::path::PathBuf;

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

    #[test]
    fn inbox_prefixes_are_subject_prefixes_without_wildcards() {
        for ok in ["_INBOX_alice", "_I.agent-a"] {
            assert!(is_inbox_prefix(ok), "{ok}");
        }
        for bad in ["", "_INBOX.", ".x", "a..b", "a b", "_INBOX.>", "a*"] {
            assert!(!is_inbox_prefix(bad), "{bad}");
        }
    }
}
