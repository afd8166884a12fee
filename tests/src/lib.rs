//! End-to-end test support for fedvol: the harness every test in `tests/tests/` uses.
//!
//! - [`NatsServer`]: a real `nats-server` (Debian's `nats-server` package, or any on `PATH`)
//!   with JetStream, on a free loopback port, killed when dropped; [`nats::key_value`] opens a
//!   JetStream key-value bucket in a way nats-server 2.9 accepts.
//! - [`bin_path`] / [`Spawned`]: the workspace's own binaries (`fedvol-agent`, `fedvol`,
//!   `fedvol-example-provisioner`) run as real processes whose output goes to a log file.
//! - [`kit`]: the shipped `deploy/nats/` configurations in a temporary copy, and binaries
//!   logged in with their example users.
//! - [`fixtures`]: small builders for inventory and decision values.
//! - [`browser::Chromium`]: a headless Chromium (Debian's `chromium`) that dumps a page's DOM or
//!   saves a screenshot (the web view's test).
//! - [`LogCapture`]: the `tracing` output of in-process library code.
//! - [`wait_until`]: poll a condition with a timeout.
//! - [`http`]: plain GETs to loopback HTTP servers (the daemons' metrics and health);
//!   [`prometheus`]: a real Prometheus scraping them, queried through its API.
//! - [`load`]: requests as the CLI sends them, concurrent submitters that record every
//!   acknowledgement, a seeded random generator (fault tests and the soak).
//! - [`checker`]: compares acknowledged decisions with every agent's final state.
//! - [`burst`]: bursts of submits against scarce capacity (`fedvol-burst`, RELIABILITY.md).
//! - [`bench`]: the federated fan-out benchmark behind `fedvol-bench` (BENCHMARKS.md).
//!
//! Tests only ever talk to 127.0.0.1.

#![warn(missing_docs)]

pub mod bench;
pub mod bins;
pub mod browser;
pub mod burst;
pub mod checker;
pub mod cli;
pub mod faultkit;
pub mod federation;
pub mod fixtures;
pub mod http;
pub mod kit;
pub mod load;
pub mod logs;
pub mod nats;
pub mod process;
pub mod prometheus;
pub mod shipped;
pub mod slurm;

pub use bins::bin_path;
pub use logs::LogCapture;
pub use nats::NatsServer;
pub use process::Spawned;

use std::time::{Duration, Instant};

/// The wire body of `body`: as it serializes when it already carries a protocol version `v`
/// (a hand-written JSON body), else with `v` added ([`fedvol_proto::encode`]), as every fedvol
/// process sends it.
pub fn versioned_body(body: &impl serde::Serialize) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        v: Option<serde::de::IgnoredAny>,
    }
    let raw = serde_json::to_vec(body).unwrap_or_default();
    if serde_json::from_slice::<Peek>(&raw).is_ok_and(|p| p.v.is_some()) {
        raw
    } else {
        fedvol_proto::encode(body).to_vec()
    }
}

/// Polls `cond` every `every` until it holds (true) or `timeout` passed (false). Async, so the
/// test's NATS connections keep running while it waits.
pub async fn wait_until(timeout: Duration, every: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}
