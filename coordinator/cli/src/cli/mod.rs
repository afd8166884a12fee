//! What the `fedvol` commands (`crate::commands`) share, each in its own small module: exit
//! statuses ([`exit`]), argument groups ([`args`], [`net`] for NATS and identity, [`choice`],
//! [`template`] for `--values`), printing ([`print`]), asking the coordinators ([`ask`]),
//! following a workflow's jobs ([`follow`]), a plain submit's memory of itself ([`resume`] over
//! [`pending`]), the `fedvol dev` context file ([`context`]), input files ([`inputs`]) and
//! `plan`'s explanations ([`explain`]). Nothing here is a command, and nothing here knows one.

pub mod args;
pub mod ask;
pub mod choice;
pub mod context;
pub mod exit;
pub mod explain;
pub mod follow;
pub mod inputs;
pub mod net;
pub mod pending;
pub mod print;
pub mod resume;
pub mod template;
