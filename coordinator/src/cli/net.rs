//! Options every federation command shares: how to reach NATS and as whom, and a runtime to
//! run the async client on.

use std::path::PathBuf;
use std::time::Duration;

use fedvol_agent::config::NatsAuth;

use crate::client::{Client, ClientError};

/// NATS connection and identity options of the federation commands.
#[derive(Debug, Clone, clap::Args)]
pub struct NetArgs {
    /// NATS server URL(s), comma-separated. Credentials go in the flags below, never here.
    #[arg(
        long = "nats",
        env = "FEDVOL_NATS_URL",
        default_value = "nats://127.0.0.1:4222",
        global = true
    )]
    pub url: String,
    /// NATS user (with the password).
    #[arg(long, env = "FEDVOL_NATS_USER", global = true)]
    pub nats_user: Option<String>,
    /// NATS password (prefer the environment variable).
    #[arg(long, env = "FEDVOL_NATS_PASSWORD", hide_env_values = true, global = true)]
    pub nats_password: Option<String>,
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
    /// Prefix of your reply inboxes: `_INBOX_<your NATS user>` with deploy/nats/secure.conf,
    /// where nobody may read another user's replies.
    #[arg(long, env = "FEDVOL_NATS_INBOX_PREFIX", global = true)]
    pub nats_inbox_prefix: Option<String>,
    /// Your user name: the identity token of your requests (with auth on, NATS permissions
    /// tie it to your credentials).
    #[arg(short = 'u', long, env = "FEDVOL_USER", default_value = "anonymous", global = true)]
    pub user: String,
    /// Subject prefix.
    #[arg(long, env = "FEDVOL_SUBJECT_PREFIX", default_value = fedvol_common::wire::DEFAULT_PREFIX, global = true)]
    pub subject_prefix: String,
    /// How long to wait for a coordinator's answer, ms.
    #[arg(long, default_value_t = 15_000, global = true)]
    pub timeout_ms: u64,
}

impl NetArgs {
    /// The NATS options these flags describe.
    pub fn auth(&self) -> NatsAuth {
        NatsAuth {
            url: self.url.clone(),
            user: self.nats_user.clone(),
            password: self.nats_password.clone(),
            nkey_file: self.nats_nkey.clone(),
            creds_file: self.nats_creds.clone(),
            tls_ca: self.tls_ca.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            inbox_prefix: self.nats_inbox_prefix.clone(),
        }
    }

    /// Connects, refusing a URL that carries credentials and a user name that is not a subject
    /// token (letters, digits, `-`, `_`).
    pub async fn connect(&self) -> Result<Client, ClientError> {
        fedvol_common::limits::check_user(&self.user).map_err(ClientError::Invalid)?;
        let auth = self.auth();
        let mut check = fedvol_agent::config::AgentConfig::new(PathBuf::new(), PathBuf::new());
        check.nats = auth.clone();
        if let Err(problems) = check.validate() {
            return Err(ClientError::Connect(problems.join("; ")));
        }
        Client::connect(
            &auth,
            &self.subject_prefix,
            &self.user,
            Duration::from_millis(self.timeout_ms),
        )
        .await
    }
}

/// Runs `f` on a fresh single-threaded runtime; a runtime that cannot start is an error line.
pub fn block_on<F: std::future::Future<Output = u8>>(f: F) -> u8 {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(f),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            super::EXIT_BAD_INPUT
        }
    }
}
