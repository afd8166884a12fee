//! fedvol-common: the model, strict file formats, the selection funnel and the decision
//! document shared by the agent, the coordinator and the `fedvol` CLI. No I/O beyond reading
//! the files it is asked to parse.

#![warn(missing_docs)]

pub mod choice;
pub mod cost;
pub mod decision;
pub mod explain;
pub mod format;
pub mod funnel;
pub mod limits;
pub mod model;
pub mod offline;
pub mod quota;
pub mod request;
pub mod secrets;
pub mod size;
pub mod synth;
pub mod yaml;
