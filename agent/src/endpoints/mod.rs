//! One module per agent endpoint ([`fedvol_proto::agent::AgentOp`]), each a `handle` that
//! takes the decoded request (the serve layer has checked its size, shape, limits and
//! deadline) and returns the reply or a [`fedvol_proto::Failure`]. Answers that acknowledge
//! state wait for the disk ([`crate::shared::durable`]).

pub mod answer;
pub mod commit;
pub mod complete;
pub mod inventory;
pub mod jobs;
pub mod plan;
pub mod release;
pub mod restored;
pub mod status;
pub mod why_not;
