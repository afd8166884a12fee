//! [`NatsArgs`]: the NATS flags and environment variables every fedvol binary takes
//! (`#[command(flatten)]`). Each flag overrides the same setting of a configuration file's
//! `nats:` block; without a file the defaults of [`NatsAuth::local`] apply.

use std::path::PathBuf;

use super::auth::NatsAuth;

/// NATS connection flags (URL, auth, TLS, inbox prefix). Credentials never go in the URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct NatsArgs {
    /// NATS server URL(s), comma-separated [default: nats://127.0.0.1:4222]. Credentials go in
    /// the flags below, never here.
    #[arg(long = "nats", env = "FEDVOL_NATS_URL", value_name = "URL", global = true)]
    pub url: Option<String>,
    /// NATS user (with the password).
    #[arg(long, env = "FEDVOL_NATS_USER", global = true)]
    pub nats_user: Option<String>,
    /// NATS password. For a daemon prefer --nats-password-file: a password in the
    /// environment is inherited by every process the daemon starts.
    #[arg(long, env = "FEDVOL_NATS_PASSWORD", hide_env_values = true, global = true)]
    pub nats_password: Option<String>,
    /// File holding the NATS password (its first line), readable by this account alone.
    #[arg(long, env = "FEDVOL_NATS_PASSWORD_FILE", global = true)]
    pub nats_password_file: Option<PathBuf>,
    /// NATS credentials file.
    #[arg(long, env = "FEDVOL_NATS_CREDS", global = true)]
    pub nats_creds: Option<PathBuf>,
    /// File holding an nkey seed.
    #[arg(long, env = "FEDVOL_NATS_NKEY", global = true)]
    pub nats_nkey: Option<PathBuf>,
    /// CA certificate for TLS.
    #[arg(long, env = "FEDVOL_TLS_CA", global = true)]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate for mutual TLS.
    #[arg(long, env = "FEDVOL_TLS_CERT", global = true)]
    pub tls_cert: Option<PathBuf>,
    /// Client key for mutual TLS.
    #[arg(long, env = "FEDVOL_TLS_KEY", global = true)]
    pub tls_key: Option<PathBuf>,
    /// Prefix of reply inboxes: `_INBOX_<NATS user>` with deploy/nats/secure.conf, where nobody
    /// may read another user's replies.
    #[arg(long, env = "FEDVOL_NATS_INBOX_PREFIX", global = true)]
    pub nats_inbox_prefix: Option<String>,
}

impl NatsArgs {
    /// Overrides `auth` with every flag that was given.
    pub fn apply(&self, auth: &mut NatsAuth) {
        if let Some(u) = &self.url {
            auth.url = u.clone();
        }
        set_if_given(&mut auth.user, &self.nats_user);
        set_if_given(&mut auth.password, &self.nats_password);
        set_if_given(&mut auth.password_file, &self.nats_password_file);
        // A password given here replaces a password file of the configuration, and the other
        // way round.
        if self.nats_password.is_some() {
            auth.password_file = None;
        } else if self.nats_password_file.is_some() {
            auth.password = None;
        }
        set_if_given(&mut auth.creds_file, &self.nats_creds);
        set_if_given(&mut auth.nkey_file, &self.nats_nkey);
        set_if_given(&mut auth.tls_ca, &self.tls_ca);
        set_if_given(&mut auth.tls_cert, &self.tls_cert);
        set_if_given(&mut auth.tls_key, &self.tls_key);
        set_if_given(&mut auth.inbox_prefix, &self.nats_inbox_prefix);
    }

    /// The settings these flags give on top of [`NatsAuth::local`].
    pub fn auth(&self) -> NatsAuth {
        let mut a = NatsAuth::local();
        self.apply(&mut a);
        a
    }
}

/// Replaces `slot` with `value` when a value was given.
fn set_if_given<T: Clone>(slot: &mut Option<T>, value: &Option<T>) {
    if value.is_some() {
        slot.clone_from(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        nats: NatsArgs,
    }

    #[test]
    fn flags_override_only_what_they_name() {
        let cli = Cli::try_parse_from(["x", "--nats", "nats://n:1", "--nats-inbox-prefix", "_INBOX_a"]).unwrap();
        let mut from_file = NatsAuth {
            creds_file: Some("/etc/a.creds".into()),
            ..NatsAuth::local()
        };
        cli.nats.apply(&mut from_file);
        assert_eq!(from_file.url, "nats://n:1");
        assert_eq!(from_file.inbox_prefix.as_deref(), Some("_INBOX_a"));
        assert_eq!(from_file.creds_file, Some(PathBuf::from("/etc/a.creds")), "kept");
        let none = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(none.nats.auth(), NatsAuth::local());
    }
}
