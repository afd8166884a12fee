//! fedvol-agent: one per cluster. Serves the selection funnel over NATS for its cluster's
//! inventory, holds what a plan chose under a lease so concurrent requests cannot over-commit,
//! turns holds into durable allocations, runs the storage drivers, and keeps its state in a redb
//! file so that nothing acknowledged is lost on a crash.

#![warn(missing_docs)]

pub mod answers;
pub mod config;
pub mod drivers;
pub mod endpoints;
pub mod grant;
pub mod metrics;
pub mod restore_gate;
pub mod run;
pub mod scrape;
pub mod service;
pub mod shared;
pub mod slurm;
pub mod start;
pub mod state;
