//! NATS connection settings and connecting, the same for every fedvol process: the agent, the
//! coordinator, the `fedvol` CLI and the example provisioner.
//!
//! - [`auth`]: [`NatsAuth`] (URL, user and password, nkey, creds, TLS, inbox prefix) and its
//!   checks (plain values of `fedvol_common::nats_auth`; the `nats:` block of configuration
//!   files is read by `fedvol_formats::nats`), and reading a password file.
//! - [`args`]: [`NatsArgs`], the one set of command-line flags and environment variables,
//!   flattened into every binary.
//! - [`connect`]: connecting with unlimited reconnects, every connection event logged, and
//!   the server's asynchronous errors kept ([`ServerErrors`]).

pub mod args;
pub mod auth;
pub mod connect;

pub use args::NatsArgs;
pub use auth::{NatsAuth, is_inbox_prefix, redact_url};
pub use connect::{Backoff, ConnectError, ServerErrors, connect, connect_patiently, connect_watching};
