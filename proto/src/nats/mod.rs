//! NATS connection settings and connecting, the same for every fedvol process: the agent, the
//! coordinator, the `fedvol` CLI and the example provisioner.
//!
//! - [`auth`]: [`NatsAuth`] (URL, user and password, nkey, creds, TLS, inbox prefix), its
//!   checks, and the `nats:` block of configuration files.
//! - [`args`]: [`NatsArgs`], the one set of command-line flags and environment variables,
//!   flattened into every binary.
//! - [`connect`]: connecting with unlimited reconnects, every connection event logged, and
//!   the server's asynchronous errors kept ([`ServerErrors`]).

pub mod args;
pub mod auth;
pub mod connect;

pub use args::NatsArgs;
pub use auth::{NatsAuth, is_inbox_prefix, parse_nats, redact_url};
pub use connect::{Backoff, ConnectError, ServerErrors, connect, connect_patiently, connect_watching};
