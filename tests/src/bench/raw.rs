//! The raw limit: the same scatter-gather as the coordinator's plan broadcast, through the same
//! nats-server, to N trivial responders.
//!
//! Responders (`fedvol-bench responders`, a hidden subcommand, started as separate processes
//! grouped exactly as the agents are) each have their own NATS connection and their own queue
//! group (`raw.<i>`, as agents use `agent.<cluster>`) on [`RAW_SUBJECT`], and answer every
//! request at once with a canned body as large as a real agent's answer (measured by
//! [`probe_answer_bytes`] on the running federation). The client sends the body of a real plan
//! broadcast ([`crate::bench::workflow::plan_body`]) with a fresh inbox per request, as the
//! coordinator's `fan_out` did in earlier releases (it now sends the same body to each cluster's own
//! subject, one publish and one reply subscription per cluster), and waits for all N answers.
//! What remains between this and
//! fedvol's throughput is fedvol's own work: the funnel, JSON, holds and redb writes, the
//! decision store, the cluster choice and, for `submit`, the commit round trip.

use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use fedvol_proto::Subjects;

use crate::Spawned;
use crate::bench::driver::{Failed, Outcome};
use crate::bench::procs::{Member, guarded, log_tail, product_log_level};

/// The subject the raw responders serve (outside fedvol's `fedvol.v1.` namespace).
pub const RAW_SUBJECT: &str = "fedvolbench.raw.plan";

/// How long the responders may take to answer all at once after starting.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A canned answer of exactly `bytes` bytes (at least a small JSON object): valid JSON shaped
/// like an agent's reply, padded.
pub fn canned_body(bytes: usize) -> Bytes {
    let head = "{\"v\":1,\"cluster\":\"raw\",\"pad\":\"";
    let tail = "\"}";
    let pad = bytes.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(head.len() + pad + tail.len());
    s.push_str(head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str(tail);
    Bytes::from(s)
}

/// What `fedvol-bench responders` runs.
#[derive(Debug, Clone)]
pub struct RespondersSpec {
    /// Index of the first responder (its queue group is `raw.<first>`).
    pub first: usize,
    /// Responders in this process.
    pub n: usize,
    /// NATS URL.
    pub nats: String,
    /// Size of every answer, bytes.
    pub body_bytes: usize,
}

/// Runs `spec.n` responders in this process, each with its own connection, until the process
/// is killed.
///
/// Errors: the runtime cannot start, a connection or subscription fails, or a responder stops.
pub fn serve_responders(spec: RespondersSpec) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("responders: cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let body = canned_body(spec.body_bytes);
        let mut set = tokio::task::JoinSet::new();
        for i in spec.first..spec.first + spec.n {
            let client = crate::bench::procs::connect(&spec.nats, &format!("fedvol-bench responder {i}")).await?;
            let mut sub = client
                .queue_subscribe(RAW_SUBJECT, format!("raw.{i}"))
                .await
                .map_err(|e| format!("responders: cannot subscribe: {e}"))?;
            client
                .flush()
                .await
                .map_err(|e| format!("responders: cannot reach NATS: {e}"))?;
            let body = body.clone();
            set.spawn(async move {
                while let Some(m) = sub.next().await {
                    if let Some(reply) = m.reply
                        && let Err(e) = client.publish(reply, body.clone()).await
                    {
                        eprintln!("responder {i}: cannot answer: {e}");
                    }
                }
                i
            });
        }
        match set.join_next().await {
            Some(Ok(i)) => Err(format!("responders: responder {i}'s subscription ended")),
            Some(Err(e)) => Err(format!("responders: a responder failed: {e}")),
            None => Err("responders: none to run (--n 0)".into()),
        }
    })
}

/// Sends `body` on [`RAW_SUBJECT`] with a fresh inbox and waits up to `wait` for `n` answers.
pub async fn scatter_gather(client: &async_nats::Client, body: Bytes, n: usize, wait: Duration) -> Outcome {
    let inbox = client.new_inbox();
    let mut sub = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| Failed::new("nats_error", e.to_string()))?;
    client
        .publish_with_reply(RAW_SUBJECT, inbox, body)
        .await
        .map_err(|e| Failed::new("nats_error", e.to_string()))?;
    let end = tokio::time::Instant::now() + wait;
    let mut got = 0;
    while got < n {
        match tokio::time::timeout_at(end, sub.next()).await {
            Ok(Some(m)) if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) => {
                return Err(Failed::new("no_responders", format!("nobody serves {RAW_SUBJECT}")));
            }
            Ok(Some(_)) => got += 1,
            Ok(None) => return Err(Failed::new("nats_error", "the reply subscription closed")),
            Err(_) => {
                let kind = if got == 0 { "timeout" } else { "partial" };
                return Err(Failed::new(
                    kind,
                    format!("{got} of {n} answers within {} ms", wait.as_millis()),
                ));
            }
        }
    }
    Ok(())
}

/// Broadcasts `plan` (a real plan body, not holding) on fedvol's plan subject and returns the
/// mean size of the `clusters` agents' answers, bytes.
///
/// Errors: fewer answers than clusters within `wait`, or NATS failed.
pub async fn probe_answer_bytes(
    client: &async_nats::Client,
    plan: Vec<u8>,
    clusters: usize,
    wait: Duration,
) -> Result<usize, String> {
    let inbox = client.new_inbox();
    let mut sub = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| format!("probe: cannot subscribe: {e}"))?;
    client
        .publish_with_reply(Subjects::default().plan(), inbox, plan.into())
        .await
        .map_err(|e| format!("probe: cannot publish: {e}"))?;
    let end = tokio::time::Instant::now() + wait;
    let mut sizes = Vec::new();
    while sizes.len() < clusters {
        match tokio::time::timeout_at(end, sub.next()).await {
            Ok(Some(m)) if m.status.is_none() => sizes.push(m.payload.len()),
            Ok(Some(m)) => return Err(format!("probe: NATS answered with status {:?}", m.status)),
            Ok(None) | Err(_) => {
                return Err(format!(
                    "probe: {} of {clusters} clusters answered a plan within {wait:?}",
                    sizes.len()
                ));
            }
        }
    }
    Ok(sizes.iter().sum::<usize>() / sizes.len().max(1))
}

/// Running responder processes.
pub struct Responders {
    /// The processes, each with its label.
    pub procs: Vec<(String, Spawned)>,
}

impl Responders {
    /// Starts one responder process per range of `groups` (responder indices), answering with
    /// `body_bytes` bytes, and waits until a scatter-gather gets every answer.
    ///
    /// Errors: a process cannot start, exits, or the responders do not all answer in time.
    pub async fn start(
        client: &async_nats::Client,
        url: &str,
        groups: &[Range<usize>],
        body_bytes: usize,
    ) -> Result<Responders, String> {
        let me = std::env::current_exe().map_err(|e| format!("cannot locate fedvol-bench itself: {e}"))?;
        let mut procs = Vec::new();
        for g in groups {
            let mut cmd = std::process::Command::new(&me);
            cmd.args(["responders", "--nats", url])
                .arg("--first")
                .arg(g.start.to_string())
                .arg("--n")
                .arg(g.len().to_string())
                .arg("--body-bytes")
                .arg(body_bytes.to_string())
                .env("RUST_LOG", product_log_level());
            let label = format!("responders {}-{}", g.start, g.end.saturating_sub(1));
            procs.push((label, guarded("starting the responders", || Spawned::start(cmd))?));
        }
        let mut r = Responders { procs };
        let n: usize = groups.iter().map(|g| g.len()).sum();
        let end = std::time::Instant::now() + READY_TIMEOUT;
        loop {
            for (label, p) in &mut r.procs {
                if let Some(status) = p.try_status() {
                    return Err(format!(
                        "{label} exited ({status}); its last lines:\n{}",
                        log_tail(p, 30)
                    ));
                }
            }
            if scatter_gather(client, canned_body(16), n, Duration::from_millis(1000))
                .await
                .is_ok()
            {
                return Ok(r);
            }
            if std::time::Instant::now() >= end {
                return Err(format!(
                    "the {n} raw responders did not all answer within {READY_TIMEOUT:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The responder processes as measured members.
    pub fn members(&self) -> Vec<Member> {
        self.procs
            .iter()
            .map(|(label, p)| Member {
                label: label.clone(),
                pid: p.pid(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_bodies_have_the_asked_size_and_are_json() {
        for n in [0, 10, 100, 4096] {
            let b = canned_body(n);
            assert!(b.len() == n || n < 40, "{n}: {}", b.len());
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["cluster"], "raw");
        }
    }
}
