//! fedvol-common, the core crate: the model, the selection funnel, the cluster choice and the
//! decision document, shared by the agent, the coordinator and the `fedvol` CLI. No I/O and no
//! file parsing: the readers of the files users write are in `fedvol-formats`, which produces
//! this crate's model values.

#![warn(missing_docs)]

pub mod choice;
pub mod cost;
pub mod decision;
pub mod dense;
pub mod drain;
pub mod explain;
pub mod funnel;
pub mod limits;
pub mod model;
pub mod nats_auth;
pub mod offline;
pub mod policy;
pub mod quota;
pub mod request;
pub mod rule;
pub mod run;
pub mod secrets;
pub mod size;
pub mod suggest;
pub mod summary;
pub mod synth;
pub mod unplaced;
pub mod whatif;
