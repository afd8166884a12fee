//! The closed-loop driver: exactly `in_flight` requests outstanding, a warm-up, then a
//! measured window.
//!
//! `in_flight` tokio tasks share a few async-nats clients (one per [`REQUESTS_PER_CLIENT`]
//! requests in flight, at most [`MAX_CLIENTS`]); each task sends a request, waits for its
//! outcome, and sends the next one at once, so the number outstanding never changes. Every
//! request uses its own fresh reply inbox ([`crate::load::call_raw`] for fedvol, the same
//! pattern in [`crate::bench::raw`]).
//!
//! What counts: a request belongs to the window when its outcome arrives inside it. Successful
//! ones are counted and their latency (send to outcome, µs) recorded in an HDR histogram (3
//! significant digits); failures are counted by kind (an error reply, `timeout`,
//! `no_responders`, a partial fan-out...), never dropped. Requests still outstanding when the
//! window closes are awaited (so the next measurement starts on an idle federation) and
//! reported as `late`, not counted. Throughput = successes in the window / window length.
//! CPU time of every measured process is sampled at the window's start and end.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::bench::procs::{Member, cpu_sample};

/// Requests in flight per NATS client.
pub const REQUESTS_PER_CLIENT: usize = 16;

/// NATS clients per driver at most.
pub const MAX_CLIENTS: usize = 4;

/// Why one request failed: a short kind to count by, and a detail (the first of each kind is
/// kept as an example).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// `timeout`, `error:<code>`, `cluster_timed_out`, ...
    pub kind: String,
    /// The error message, or what was expected and not seen (may be empty).
    pub detail: String,
}

impl Failed {
    /// A failure of `kind` with `detail`.
    pub fn new(kind: impl Into<String>, detail: impl Into<String>) -> Failed {
        Failed {
            kind: kind.into(),
            detail: detail.into(),
        }
    }
}

/// The outcome of one request.
pub type Outcome = Result<(), Failed>;

/// How to drive.
#[derive(Debug, Clone, Copy)]
pub struct LoopSpec {
    /// Requests outstanding at all times.
    pub in_flight: usize,
    /// Warm-up before the window (requests run, nothing recorded).
    pub warmup: Duration,
    /// The measured window.
    pub window: Duration,
}

/// What a closed loop measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Successful requests whose outcome came within the window.
    pub ok: u64,
    /// The window's length, s.
    pub window_s: f64,
    /// Latency of the successful requests of the window, µs.
    pub latency_us: Histogram<u64>,
    /// Failed requests of the window, by kind.
    pub errors: BTreeMap<String, u64>,
    /// The detail of the first failure of each kind (window or warm-up).
    pub error_examples: BTreeMap<String, String>,
    /// Failed requests during the warm-up.
    pub warmup_errors: u64,
    /// Requests outstanding when the window closed (awaited, not counted).
    pub late: u64,
    /// CPU time each measured process used during the window, ms (same order as the members).
    pub cpu_ms: Vec<u64>,
}

impl Measured {
    /// Successful requests per second in the window.
    pub fn throughput(&self) -> f64 {
        if self.window_s > 0.0 {
            self.ok as f64 / self.window_s
        } else {
            0.0
        }
    }

    /// The latency at quantile `q` (0..=1), ms (0 without successes).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.latency_us.is_empty() {
            0.0
        } else {
            self.latency_us.value_at_quantile(q) as f64 / 1000.0
        }
    }

    /// The largest latency, ms.
    pub fn max_ms(&self) -> f64 {
        self.latency_us.max() as f64 / 1000.0
    }

    /// The mean latency, ms.
    pub fn mean_ms(&self) -> f64 {
        self.latency_us.mean() / 1000.0
    }

    /// Failed requests in the window.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// What one task saw.
struct TaskTally {
    ok: u64,
    latency_us: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    examples: BTreeMap<String, String>,
    warmup_errors: u64,
    late: u64,
}

/// An empty latency histogram: 3 significant digits, growing to whatever range it records.
fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new(3).map_err(|e| format!("cannot create a latency histogram: {e}"))
}

/// How many clients a driver of `in_flight` uses.
pub fn client_count(in_flight: usize) -> usize {
    in_flight.div_ceil(REQUESTS_PER_CLIENT).clamp(1, MAX_CLIENTS)
}

/// Runs `request(client, n)` (`n` counts the requests from 0) in a closed loop of
/// `spec.in_flight` over `clients`, sampling the CPU time of `members` at the window's edges.
///
/// Errors: no client, or a histogram cannot be created or merged.
pub async fn closed_loop<F, Fut>(
    clients: &[async_nats::Client],
    spec: LoopSpec,
    members: &[Member],
    request: F,
) -> Result<Measured, String>
where
    F: Fn(async_nats::Client, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    if clients.is_empty() {
        return Err("the driver needs at least one NATS client".into());
    }
    let request = Arc::new(request);
    let seq = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now() + spec.warmup;
    let t1 = t0 + spec.window;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..spec.in_flight.max(1) {
        let client = clients[i % clients.len()].clone();
        let (request, seq) = (request.clone(), seq.clone());
        let mut tally = TaskTally {
            ok: 0,
            latency_us: histogram()?,
            errors: BTreeMap::new(),
            examples: BTreeMap::new(),
            warmup_errors: 0,
            late: 0,
        };
        tasks.spawn(async move {
            loop {
                let sent = Instant::now();
                if sent >= t1 {
                    break;
                }
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let outcome = request(client.clone(), n).await;
                let done = Instant::now();
                if let Err(f) = &outcome
                    && !tally.examples.contains_key(&f.kind)
                {
                    tally.examples.insert(f.kind.clone(), f.detail.clone());
                }
                if done < t0 {
                    tally.warmup_errors += u64::from(outcome.is_err());
                    continue;
                }
                if done >= t1 {
                    tally.late += 1;
                    break;
                }
                match outcome {
                    Ok(()) => {
                        tally.ok += 1;
                        let us = (done - sent).as_micros().max(1) as u64;
                        // The histogram grows as needed; saturating only if it ever cannot.
                        if tally.latency_us.record(us).is_err() {
                            tally.latency_us.saturating_record(us);
                        }
                    }
                    Err(f) => *tally.errors.entry(f.kind).or_default() += 1,
                }
            }
            tally
        });
    }
    tokio::time::sleep_until(t0.into()).await;
    let before = cpu_sample(members);
    tokio::time::sleep_until(t1.into()).await;
    let after = cpu_sample(members);
    let mut m = Measured {
        ok: 0,
        window_s: spec.window.as_secs_f64(),
        latency_us: histogram()?,
        errors: BTreeMap::new(),
        error_examples: BTreeMap::new(),
        warmup_errors: 0,
        late: 0,
        cpu_ms: after.iter().zip(&before).map(|(a, b)| a.saturating_sub(*b)).collect(),
    };
    while let Some(joined) = tasks.join_next().await {
        let t = joined.map_err(|e| format!("a driver task failed: {e}"))?;
        m.ok += t.ok;
        m.latency_us
            .add(&t.latency_us)
            .map_err(|e| format!("cannot merge latency histograms: {e}"))?;
        for (k, v) in t.errors {
            *m.errors.entry(k).or_default() += v;
        }
        for (k, v) in t.examples {
            m.error_examples.entry(k).or_insert(v);
        }
        m.warmup_errors += t.warmup_errors;
        m.late += t.late;
    }
    Ok(m)
}

/// A unique prefix for the request ids of one measurement (`b<ms since the epoch>-<n>`), so
/// that no run ever meets a decision stored by an earlier one (the coordinator is idempotent
/// by request id).
pub fn id_prefix(mode: &str) -> String {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    format!(
        "b{}-{}-{mode}",
        fedvol_common::wire::now_ms(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_loop_keeps_its_requests_in_flight_and_counts_failures() {
        let server = crate::NatsServer::start();
        let client = server.client().await;
        let in_flight = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicU64::new(0));
        let (f, p) = (in_flight.clone(), peak.clone());
        let m = closed_loop(
            &[client],
            LoopSpec {
                in_flight: 4,
                warmup: Duration::from_millis(50),
                window: Duration::from_millis(300),
            },
            &[crate::bench::procs::this_process()],
            move |_c, n| {
                let (f, p) = (f.clone(), p.clone());
                async move {
                    let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    f.fetch_sub(1, Ordering::SeqCst);
                    if n % 5 == 0 {
                        Err(Failed::new("odd", "n % 5 == 0"))
                    } else {
                        Ok(())
                    }
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(peak.load(Ordering::SeqCst), 4);
        assert!(m.ok > 20, "{m:?}");
        assert!(m.errors["odd"] > 0);
        assert_eq!(m.error_examples["odd"], "n % 5 == 0");
        assert!(m.quantile_ms(0.5) >= 5.0 && m.max_ms() < 300.0, "{m:?}");
        assert!(m.late <= 4);
        assert_eq!(m.cpu_ms.len(), 1);
        assert!(m.throughput() > 0.0);
    }
}
