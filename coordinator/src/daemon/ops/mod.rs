//! The operations other than submit: complete, why_not, clusters, list, get, replay. Each
//! takes its decoded request and answers with its reply type or a [`Failure`] (codes of
//! [`fedvol_proto::Code`], or the agent's own), never a missing answer.
//!
//! One module per operation, as the agent has one per endpoint; each is an entry point above
//! [`crate::daemon::lifecycle`].

pub mod clusters;
pub mod complete;
pub mod get;
pub mod replay;
pub mod why_lost;
pub mod why_not;

pub use clusters::{cluster, clusters};
pub use complete::complete;
pub use get::get;
pub use replay::replay;
pub use why_not::why_not;
