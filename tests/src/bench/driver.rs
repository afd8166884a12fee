//! The closed-loop driver: exactly `in_flight` requests outstanding, a warm-up, then a
//! measured window.
//!
//! `in_flight` tokio tasks share a few async-nats clients (one per [`REQUESTS_PER_CLIENT`]
//! requests in flight, at most [`MAX_CLIENTS`]); each task sends a request, waits for its
//! outcome, and sends the next one at once, so the number outstanding never changes. Every
//! request uses its own fresh reply inbox ([`crate::load::call_raw`] for fedvol, the same
//! pattern in [`crate::bench::raw`]).
//!
//! Warm-up lasts `warmup` and, beyond it, until every task has had one answer (at most
//! `warmup_cap` in all), so that a slow configuration (64 clusters, 64 in flight: seconds per
//! request) is measured in its steady state rather than while the first wave is still queued.
//! The window starts then and lasts `window`.
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
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
    /// Warm-up before the window (requests run, nothing recorded), at least.
    pub warmup: Duration,
    /// Warm-up at most, waiting for every task's first answer.
    pub warmup_cap: Duration,
    /// The measured window.
    pub window: Duration,
}

/// What a closed loop measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Successful requests whose outcome came within the window.
    pub ok: u64,
    /// The warm-up's actual length, s.
    pub warmup_s: f64,
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

/// One request's outcome as a task saw it.
struct Event {
    /// When its outcome came.
    done: Instant,
    /// Send to outcome, µs.
    us: u64,
    /// Why it failed, if it did.
    failed: Option<Failed>,
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
    let in_flight = spec.in_flight.max(1);
    let request = Arc::new(request);
    let seq = Arc::new(AtomicU64::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..in_flight {
        let client = clients[i % clients.len()].clone();
        let (request, seq, answered, stop) = (request.clone(), seq.clone(), answered.clone(), stop.clone());
        tasks.spawn(async move {
            let mut events = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let outcome = request(client.clone(), n).await;
                let done = Instant::now();
                if events.is_empty() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                events.push(Event {
                    done,
                    us: (done - sent).as_micros().max(1) as u64,
                    failed: outcome.err(),
                });
            }
            events
        });
    }
    tokio::time::sleep(spec.warmup).await;
    let cap = started + spec.warmup.max(spec.warmup_cap);
    while answered.load(Ordering::Relaxed) < in_flight && Instant::now() < cap {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t0 = Instant::now();
    let before = cpu_sample(members);
    tokio::time::sleep(spec.window).await;
    let t1 = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let after = cpu_sample(members);
    let mut m = Measured {
        ok: 0,
        warmup_s: (t0 - started).as_secs_f64(),
        window_s: (t1 - t0).as_secs_f64(),
        latency_us: histogram()?,
        errors: BTreeMap::new(),
        error_examples: BTreeMap::new(),
        warmup_errors: 0,
        late: 0,
        cpu_ms: after.iter().zip(&before).map(|(a, b)| a.saturating_sub(*b)).collect(),
    };
    while let Some(joined) = tasks.join_next().await {
        let events = joined.map_err(|e| format!("a driver task failed: {e}"))?;
        for e in events {
            if let Some(f) = &e.failed
                && !m.error_examples.contains_key(&f.kind)
            {
                m.error_examples.insert(f.kind.clone(), f.detail.clone());
            }
            if e.done < t0 {
                m.warmup_errors += u64::from(e.failed.is_some());
            } else if e.done >= t1 {
                m.late += 1;
            } else if let Some(f) = e.failed {
                *m.errors.entry(f.kind).or_default() += 1;
            } else {
                m.ok += 1;
                // The histogram grows as needed; saturating only if it ever cannot.
                if m.latency_us.record(e.us).is_err() {
                    m.latency_us.saturating_record(e.us);
                }
            }
        }
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
        fedvol_proto::now_ms(),
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
                warmup_cap: Duration::from_secs(5),
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
        assert!(m.warmup_s >= 0.05 && m.window_s >= 0.3, "{m:?}");
        assert_eq!(m.cpu_ms.len(), 1);
        assert!(m.throughput() > 0.0);
    }

    #[tokio::test]
    async fn the_window_opens_once_every_task_has_had_an_answer() {
        let server = crate::NatsServer::start();
        let client = server.client().await;
        let m = closed_loop(
            &[client],
            LoopSpec {
                in_flight: 3,
                warmup: Duration::from_millis(10),
                warmup_cap: Duration::from_secs(5),
                window: Duration::from_millis(200),
            },
            &[],
            |_c, n| async move {
                // The first wave is slow (as when 64 requests queue behind each other).
                let ms = if n < 3 { 400 } else { 2 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(())
            },
        )
        .await
        .unwrap();
        assert!(m.warmup_s >= 0.4, "{m:?}");
        assert!(m.ok > 50, "{m:?}");
        assert!(
            m.quantile_ms(0.99) < 100.0,
            "the slow first wave is not measured: {m:?}"
        );
    }
}
