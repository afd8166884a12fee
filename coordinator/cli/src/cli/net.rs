//! Options every federation command shares: how to reach NATS and as whom, and a runtime to
//! run the async client on.

use std::path::PathBuf;
use std::time::Duration;

use clap::parser::{ArgMatches, ValueSource};
use fedvol_proto::nats::NatsArgs;

use crate::client::{Client, ClientError};

/// NATS connection and identity options of the federation commands (listed in `--help` under
/// their own heading, after the command's own options).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "NATS connection and identity")]
pub struct NetArgs {
    /// NATS connection (URL, auth, TLS, inbox prefix).
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Your user name: the identity token of your requests (with auth on, NATS permissions
    /// tie it to your credentials). It is also the NATS login user when a password is given
    /// without --nats-user; the reply inbox prefix is then `_INBOX_<NATS login>` unless
    /// --nats-inbox-prefix says otherwise.
    #[arg(short = 'u', long, env = "FEDVOL_USER", default_value = ANONYMOUS, global = true)]
    pub user: String,
    /// Subject prefix.
    #[arg(long, env = "FEDVOL_SUBJECT_PREFIX", default_value = fedvol_proto::DEFAULT_PREFIX, global = true)]
    pub subject_prefix: String,
    /// How long to wait for a coordinator's answer, ms.
    #[arg(long, default_value_t = 15_000, global = true)]
    pub timeout_ms: u64,
}

impl NetArgs {
    /// Connects, refusing a URL that carries credentials, half-given pairs (user without
    /// password, certificate without key), a bad inbox prefix, and a user name that is not a
    /// subject token (letters, digits, `-`, `_`).
    ///
    /// Errors: [`ClientError::Invalid`] or [`ClientError::Connect`], one line each.
    pub async fn connect(&self) -> Result<Client, ClientError> {
        fedvol_common::limits::check_user(&self.user).map_err(|e| ClientError::Invalid(e.to_string()))?;
        let auth = self.auth();
        let problems = auth.check();
        if !problems.is_empty() {
            return Err(ClientError::Connect(problems.join("; ")));
        }
        let from_context = self.nats.url.is_none().then(super::context::current).flatten();
        let mut auth = auth;
        if let Some(c) = &from_context {
            auth.url = c.url.clone();
        }
        Client::connect(
            &auth,
            &self.subject_prefix,
            &self.user,
            Duration::from_millis(self.timeout_ms),
        )
        .await
        .map_err(|e| match e {
            ClientError::Connect(m) => ClientError::Connect(match &from_context {
                Some(c) => format!(
                    "{m} (the URL came from {}, written by `fedvol dev`: is it still running?)",
                    c.path.display()
                ),
                None if self.nats.url.is_none() => format!(
                    "{m}\n  start a local federation with `fedvol dev` (later commands find it by themselves), \
                     or point at a NATS server with --nats URL or FEDVOL_NATS_URL"
                ),
                None => m,
            }),
            other => other,
        })
    }

    /// The connection settings: the flags, then what follows from the user (identity in one
    /// flag), so that `fedvol -u alice` with a password in `FEDVOL_NATS_PASSWORD` is
    /// enough with deploy/nats/secure.conf:
    /// - the NATS login user is `--nats-user`, else, when a password is given, the `-u` user;
    /// - the reply inbox prefix is `--nats-inbox-prefix`, else `_INBOX_<NATS login>` when there
    ///   is a login (`--nats-user`, or the `-u` user other than `anonymous`): the private inbox
    ///   secure.conf allows, and single.conf too; else NATS's `_INBOX`.
    pub fn auth(&self) -> fedvol_proto::nats::NatsAuth {
        let mut auth = self.nats.auth();
        let named = self.user != ANONYMOUS;
        if auth.user.is_none() && auth.password.is_some() && named {
            auth.user = Some(self.user.clone());
        }
        // The private inbox is the NATS login's (`--nats-user`, else the `-u` user).
        if auth.inbox_prefix.is_none() && (named || auth.user.is_some()) {
            let login = auth.user.clone().unwrap_or_else(|| self.user.clone());
            auth.inbox_prefix = Some(format!("_INBOX_{login}"));
        }
        auth
    }
}

/// The user of requests made without `-u`.
pub const ANONYMOUS: &str = "anonymous";

/// NATS and identity options written before the subcommand (`fedvol -u alice submit wf.yaml`,
/// the form of earlier releases and of `git -C`): accepted, hidden from help, and applied to
/// the subcommand's [`NetArgs`] unless the same option is also given after the subcommand (which
/// wins). Each beats the environment, as a flag does.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct LeadingNet {
    #[arg(long = "nats", id = "lead_url", hide = true)]
    url: Option<String>,
    #[arg(long = "nats-user", id = "lead_nats_user", hide = true)]
    nats_user: Option<String>,
    #[arg(long = "nats-password", id = "lead_nats_password", hide = true)]
    nats_password: Option<String>,
    #[arg(long = "nats-creds", id = "lead_nats_creds", hide = true)]
    nats_creds: Option<PathBuf>,
    #[arg(long = "nats-nkey", id = "lead_nats_nkey", hide = true)]
    nats_nkey: Option<PathBuf>,
    #[arg(long = "tls-ca", id = "lead_tls_ca", hide = true)]
    tls_ca: Option<PathBuf>,
    #[arg(long = "tls-cert", id = "lead_tls_cert", hide = true)]
    tls_cert: Option<PathBuf>,
    #[arg(long = "tls-key", id = "lead_tls_key", hide = true)]
    tls_key: Option<PathBuf>,
    #[arg(long = "nats-inbox-prefix", id = "lead_nats_inbox_prefix", hide = true)]
    nats_inbox_prefix: Option<String>,
    #[arg(short = 'u', long = "user", id = "lead_user", hide = true)]
    user: Option<String>,
    #[arg(long = "subject-prefix", id = "lead_subject_prefix", hide = true)]
    subject_prefix: Option<String>,
    #[arg(long = "timeout-ms", id = "lead_timeout_ms", hide = true)]
    timeout_ms: Option<u64>,
}

impl LeadingNet {
    /// Whether any option was written before the subcommand.
    pub fn any(&self) -> bool {
        self.url.is_some()
            || self.nats_user.is_some()
            || self.nats_password.is_some()
            || self.nats_creds.is_some()
            || self.nats_nkey.is_some()
            || self.tls_ca.is_some()
            || self.tls_cert.is_some()
            || self.tls_key.is_some()
            || self.nats_inbox_prefix.is_some()
            || self.user.is_some()
            || self.subject_prefix.is_some()
            || self.timeout_ms.is_some()
    }

    /// The user written before the subcommand, if any.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// Applies these options to `net`, the subcommand's, whose matches are `leaf` (the deepest
    /// subcommand's, where global options land): an option given after the subcommand keeps
    /// its value, anything else (unset, from the environment, a default) is replaced.
    pub fn apply(&self, net: &mut NetArgs, leaf: &ArgMatches) {
        fn put<T: Clone>(slot: &mut T, lead: Option<&T>, id: &str, leaf: &ArgMatches) {
            if let Some(v) = lead
                && !given_after(leaf, id)
            {
                *slot = v.clone();
            }
        }
        fn put_opt<T: Clone>(slot: &mut Option<T>, lead: &Option<T>, id: &str, leaf: &ArgMatches) {
            if lead.is_some() && !given_after(leaf, id) {
                slot.clone_from(lead);
            }
        }
        let n = &mut net.nats;
        put_opt(&mut n.url, &self.url, "url", leaf);
        put_opt(&mut n.nats_user, &self.nats_user, "nats_user", leaf);
        put_opt(&mut n.nats_password, &self.nats_password, "nats_password", leaf);
        put_opt(&mut n.nats_creds, &self.nats_creds, "nats_creds", leaf);
        put_opt(&mut n.nats_nkey, &self.nats_nkey, "nats_nkey", leaf);
        put_opt(&mut n.tls_ca, &self.tls_ca, "tls_ca", leaf);
        put_opt(&mut n.tls_cert, &self.tls_cert, "tls_cert", leaf);
        put_opt(&mut n.tls_key, &self.tls_key, "tls_key", leaf);
        put_opt(
            &mut n.nats_inbox_prefix,
            &self.nats_inbox_prefix,
            "nats_inbox_prefix",
            leaf,
        );
        put(&mut net.user, self.user.as_ref(), "user", leaf);
        put(
            &mut net.subject_prefix,
            self.subject_prefix.as_ref(),
            "subject_prefix",
            leaf,
        );
        put(&mut net.timeout_ms, self.timeout_ms.as_ref(), "timeout_ms", leaf);
    }
}

/// Whether option `id` was written on the command line of the command `leaf` matched.
pub fn given_after(leaf: &ArgMatches, id: &str) -> bool {
    matches!(leaf.try_get_raw(id), Ok(Some(_))) && leaf.value_source(id) == Some(ValueSource::CommandLine)
}

/// Runs `f` on a fresh single-threaded runtime; a runtime that cannot start is an error line.
pub fn block_on<F: std::future::Future<Output = u8>>(f: F) -> u8 {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(f),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            super::exit::EXIT_BAD_INPUT
        }
    }
}
