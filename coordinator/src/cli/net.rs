//! Options every federation command shares: how to reach NATS and as whom, and a runtime to
//! run the async client on.

use std::time::Duration;

use fedvol_proto::nats::NatsArgs;

use crate::client::{Client, ClientError};

/// NATS connection and identity options of the federation commands.
#[derive(Debug, Clone, clap::Args)]
pub struct NetArgs {
    /// NATS connection (URL, auth, TLS, inbox prefix).
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Your user name: the identity token of your requests (with auth on, NATS permissions
    /// tie it to your credentials).
    #[arg(short = 'u', long, env = "FEDVOL_USER", default_value = "anonymous", global = true)]
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
        let auth = self.nats.auth();
        let problems = auth.check();
        if !problems.is_empty() {
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
