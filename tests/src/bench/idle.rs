//! The federation at rest: what heartbeats cost when nothing is asked (the scale work's "the
//! coordinator's registry and heartbeat handling stay cheap at 1,000 clusters").
//!
//! Over a window with no request, the heartbeats seen on `<prefix>.heartbeat.>` (counted by a
//! subscription of the benchmark's own) and each process's CPU time, as ms of CPU per second.

use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::bench::procs::{Member, cpu_sample};

/// One idle window's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IdleResult {
    /// The window, ms.
    pub window_ms: u64,
    /// Heartbeats seen per second.
    pub heartbeats_per_s: f64,
    /// CPU ms per second of the coordinator.
    pub coordinator_cpu_ms_per_s: f64,
    /// CPU ms per second of nats-server.
    pub nats_cpu_ms_per_s: f64,
    /// CPU ms per second of every agent process together.
    pub agents_cpu_ms_per_s: f64,
}

/// Measures `window` of rest: heartbeats through `client` and the CPU of `members`.
///
/// Errors: the subscription could not be made.
pub async fn measure(client: &async_nats::Client, members: &[Member], window: Duration) -> Result<IdleResult, String> {
    let mut sub = client
        .subscribe(format!("{}.heartbeat.>", fedvol_proto::Subjects::default().prefix()))
        .await
        .map_err(|e| format!("cannot subscribe to the heartbeats: {e}"))?;
    client.flush().await.map_err(|e| e.to_string())?;
    let before = cpu_sample(members);
    let t0 = Instant::now();
    let end = tokio::time::Instant::now() + window;
    let mut beats = 0u64;
    while let Ok(Some(_)) = tokio::time::timeout_at(end, sub.next()).await {
        beats += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    let after = cpu_sample(members);
    let per_s = |prefix: &str| {
        members
            .iter()
            .zip(before.iter().zip(&after))
            .filter(|(m, _)| m.label.starts_with(prefix))
            .map(|(_, (b, a))| a.saturating_sub(*b) as f64)
            .sum::<f64>()
            / secs
    };
    Ok(IdleResult {
        window_ms: (secs * 1000.0) as u64,
        heartbeats_per_s: beats as f64 / secs,
        coordinator_cpu_ms_per_s: per_s("coordinator"),
        nats_cpu_ms_per_s: per_s("nats-server"),
        agents_cpu_ms_per_s: per_s("agent"),
    })
}

/// The idle lines of a result, e.g. `idle (5000 ms, no request): 500 heartbeats/s` and, indented,
/// `CPU ms per second: coordinator 12.0, nats-server 8.1, agents 30.2`.
pub fn render(r: &IdleResult) -> String {
    format!(
        "idle ({} ms, no request): {:.0} heartbeats/s\n  CPU ms per second: coordinator {:.1}, nats-server {:.1}, agents {:.1}\n",
        r.window_ms, r.heartbeats_per_s, r.coordinator_cpu_ms_per_s, r.nats_cpu_ms_per_s, r.agents_cpu_ms_per_s
    )
}
