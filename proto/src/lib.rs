//! fedvol-proto: the NATS contract of docs/design.md §5, checked by the compiler at both ends.
//!
//! The parties' subjects, queue groups and JSON bodies are defined here and nowhere else (what
//! a daemon keeps in JetStream for itself, its own KV keys and streams, is its own). Everything
//! another process sees goes through it:
//!
//! - [`version`]: the protocol version carried in every body's `v`, [`encode`] (adds it) and
//!   [`decode`] (checks it, straight from the bytes, so byte sizes above 2^64 survive).
//! - [`code`]: [`Code`], the one enum of protocol error codes every sender and matcher uses,
//!   and [`ProtoError`] (code + message).
//! - [`failure`]: [`Failure`], the one error body every party answers with.
//! - [`endpoint`]: the [`Endpoint`] trait (an operation, its request and its reply type) and
//!   what a server reads of each body ([`RequestBody`], [`ReplyBody`]); each party's operations
//!   are one table (`operations!`), from which its op enum and endpoints follow.
//! - [`subjects`]: every subject and queue group, built from the operation enums.
//! - [`agent`], [`coordinator`], [`provisioner`]: each party's operations and bodies;
//!   [`decisions`]: the decision record kept in the JetStream bucket.
//! - [`serve`]: answering one request (body cap, decode, deadline drop, `max_payload` guard);
//!   [`rpc`]: calling one (fresh inbox, "no responders", typed reply).
//! - [`nats`]: connection settings ([`nats::NatsAuth`], the `nats:` block of config files,
//!   [`nats::NatsArgs`] flattened into every binary) and connecting.
//!
//! Wire rules (docs/design.md §5): subjects are versioned (`fedvol.v1.`), bodies are JSON objects with
//! `v`, fields are added and never renamed; a reply is either the operation's reply body or a
//! [`Failure`].

#![warn(missing_docs)]

pub mod agent;
pub mod batch;
mod checks;
pub mod code;
pub mod coordinator;
pub mod decisions;
pub mod endpoint;
pub mod failure;
pub mod listing;
pub mod nats;
mod operations;
pub mod provisioner;
pub mod rpc;
pub mod serve;
pub mod subjects;
pub mod version;

#[cfg(test)]
mod compat_tests;
#[cfg(test)]
mod fuzz_tests;

pub use code::{Code, ProtoError};
pub use endpoint::{Endpoint, NoArgs, ReplyBody, RequestBody};
pub use failure::Failure;
pub use subjects::{DEFAULT_PREFIX, Subjects, subject_token};
pub use version::{DEFAULT_MAX_BODY_BYTES, DecodeError, VERSION, decode, encode, encode_sized, now_ms};
