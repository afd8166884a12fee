//! Bursts of submits against scarce capacity: a pipeline fanning out N jobs at once
//! onto a federation with S free slots over C clusters, and what the clients were told.
//!
//! Every cluster is a [`slots_inventory`] (each host fits exactly one job of the burst's
//! workflow: 8 cores), `slots / clusters` hosts each (the remainder on the first clusters).
//! N submits, each under its own request id, from `users` users, go out at once through
//! `connections` NATS connections to `coordinators` coordinators; each answer is recorded with
//! the moment it arrived. Then:
//!
//! - **committed**: answers `committed`; **refused**: answers `failed` (nothing fits);
//!   **errors**: anything else (no answer, an error reply).
//! - **refused while free**: refusals decided while the agents had committed fewer than S
//!   requests: capacity was free then and not promised to an acknowledged request (nothing
//!   completes during a burst). A refusal's time is when its coordinator stored it
//!   (`updated_ms`); a commit's is when its agent recorded it (the `Bound` event of its
//!   volume); both clocks are this machine's.
//! - **over-committed**: hosts whose use exceeds their capacity, and the checker's other
//!   findings ([`crate::checker`]), on every agent's final state.
//! - p50/p99 of the time from send to answer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fedvol_proto::coordinator::{self as api, SubmitReply};
use fedvol_proto::decisions::DecisionState;

use crate::NatsServer;
use crate::checker::Report;
use crate::faultkit::{agent_on, coordinator_on, final_check, named_inventories};
use crate::federation::{AgentProc, CoordinatorProc, slots_inventory};
use crate::load::{Acked, LoadResult, coordinator_op, small_workflow, submit_msg};
use crate::shipped::Shipped;

/// One burst.
#[derive(Debug, Clone)]
pub struct BurstSpec {
    /// Free slots in the federation (S).
    pub slots: usize,
    /// Clusters (C).
    pub clusters: usize,
    /// Concurrent submits (N).
    pub submits: usize,
    /// Users the submits come from.
    pub users: usize,
    /// Coordinators serving them.
    pub coordinators: usize,
    /// NATS connections the submits are spread over.
    pub connections: usize,
    /// How long a client waits for its answer.
    pub answer_wait: Duration,
    /// The shipped NATS configuration the federation runs under.
    pub nats: Shipped,
}

impl BurstSpec {
    /// S slots over C clusters, N submits, from 8 users over 8 connections, 2 coordinators.
    pub fn new(slots: usize, clusters: usize, submits: usize) -> Self {
        BurstSpec {
            slots,
            clusters,
            submits,
            users: 8,
            coordinators: 2,
            connections: 8,
            answer_wait: Duration::from_secs(120),
            nats: Shipped::Single,
        }
    }

    /// The same burst under the shipped configuration `nats`.
    pub fn under(mut self, nats: Shipped) -> Self {
        self.nats = nats;
        self
    }

    /// The same burst from `users` users over as many connections, to `coordinators`
    /// coordinators.
    pub fn from(mut self, users: usize, coordinators: usize) -> Self {
        self.users = users.max(1);
        self.connections = users.max(1);
        self.coordinators = coordinators.max(1);
        self
    }
}

/// The CLI user of burst connection `k`: `user<k mod users>` (added to the shipped
/// configuration as a copy of `alice`, see [`crate::shipped`]).
fn user_of(spec: &BurstSpec, k: usize) -> String {
    format!("user{}", k % spec.users.max(1))
}

/// What a burst came to (see the module docs).
#[derive(Debug, Clone)]
pub struct BurstReport {
    /// The burst.
    pub spec: BurstSpec,
    /// Answers `committed`.
    pub committed: usize,
    /// Answers `failed` (nothing fits).
    pub refused: usize,
    /// Refusals decided before S requests had taken their capacity (been admitted for a commit
    /// that then succeeded): refusals while capacity was free and promised to nobody.
    pub refused_while_free: usize,
    /// No answer, or an error reply, with the first few.
    pub errors: Vec<String>,
    /// Committed requests by cluster.
    pub by_cluster: BTreeMap<String, usize>,
    /// Commit attempts the committed decisions needed (1 = the first cluster tried), counted.
    pub attempts: BTreeMap<usize, usize>,
    /// p50 and p99 of send-to-answer, ms.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// The slowest answer, ms.
    pub max_ms: f64,
    /// The whole burst, from the first send to the last answer.
    pub elapsed: Duration,
    /// The checker on every agent's final state (over-commit, duplicates, orphans...).
    pub check: Report,
}

impl BurstReport {
    /// Hosts over their capacity plus every other inconsistency the checker found.
    pub fn over_committed(&self) -> usize {
        self.check.over_committed + self.check.double_booked + self.check.duplicated
    }
}

impl std::fmt::Display for BurstReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.spec;
        writeln!(
            f,
            "burst: S={} slots over C={} clusters, N={} submits from {} users, {} coordinators",
            s.slots, s.clusters, s.submits, s.users, s.coordinators
        )?;
        writeln!(
            f,
            "  committed {}   refused {}   refused-while-free {}   over-committed {}   errors {}",
            self.committed,
            self.refused,
            self.refused_while_free,
            self.over_committed(),
            self.errors.len()
        )?;
        writeln!(
            f,
            "  answer p50 {:.1} ms   p99 {:.1} ms   max {:.1} ms   burst {:.2} s",
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.elapsed.as_secs_f64()
        )?;
        writeln!(f, "  committed by cluster {:?}", self.by_cluster)?;
        writeln!(f, "  commit attempts per committed decision {:?}", self.attempts)?;
        for e in self.errors.iter().take(5) {
            writeln!(f, "  error: {e}")?;
        }
        write!(f, "  checker: {}", self.check)
    }
}

/// A running federation for bursts.
pub struct BurstFederation {
    /// The server.
    pub nats: NatsServer,
    /// The agents, `c0`, `c1`...
    pub agents: Vec<AgentProc>,
    /// The coordinators.
    pub coordinators: Vec<CoordinatorProc>,
    names: Vec<String>,
}

/// Starts nats-server, the coordinators and `spec.clusters` agents with `spec.slots` one-job
/// hosts in all.
pub async fn start(spec: &BurstSpec) -> BurstFederation {
    let nats = NatsServer::shipped(spec.nats);
    let mut agents = Vec::new();
    let mut names = Vec::new();
    for c in 0..spec.clusters {
        let hosts = spec.slots / spec.clusters + usize::from(c < spec.slots % spec.clusters);
        let name = format!("c{c}");
        let n = name.clone();
        agents.push(agent_on(&nats.url(), 300, &[], move |d| slots_inventory(&n, hosts, d, "all")).await);
        names.push(name);
    }
    let mut coordinators = Vec::new();
    for _ in 0..spec.coordinators {
        coordinators.push(coordinator_on(&nats.url(), &["--deadline-ms", "5000", "--discovery-ms", "500"]).await);
    }
    BurstFederation {
        nats,
        agents,
        coordinators,
        names,
    }
}

/// Runs one burst on a fresh federation and checks the agents' final state.
pub async fn run(spec: &BurstSpec) -> BurstReport {
    let fed = start(spec).await;
    // Each connection logs in as the user whose requests it sends, as `fedvol -u` would.
    let mut clients = Vec::new();
    for k in 0..spec.connections.max(1) {
        clients.push((user_of(spec, k), fed.nats.client_as(&user_of(spec, k)).await));
    }
    // Every coordinator must see every cluster before the burst (a decision made without a
    // cluster would be a refusal that has nothing to do with capacity).
    wait_for_clusters(&clients[0].1, &clients[0].0, &fed.names).await;

    let wf = small_workflow("burst", 8);
    let started = Instant::now();
    let tasks: Vec<_> = (0..spec.submits)
        .map(|i| {
            let (user, client) = clients[i % clients.len()].clone();
            let mut msg = submit_msg(&format!("burst-{i}"), &wf, false);
            msg.timeout_ms = 5000;
            let wait = spec.answer_wait;
            tokio::spawn(async move {
                let sent = Instant::now();
                let r = coordinator_op::<api::Submit>(&client, &user, &msg, wait).await;
                (msg.request_id, sent.elapsed(), Instant::now(), r)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        match t.await {
            Ok(a) => answers.push(a),
            Err(e) => answers.push((
                "?".into(),
                Duration::ZERO,
                Instant::now(),
                Err(crate::load::CallError::Nats(e.to_string())),
            )),
        }
    }
    let elapsed = started.elapsed();
    // The checker reads every agent's state: the harness's observer does that.
    let observer = fed.nats.client().await;
    report(spec, &fed, &observer, answers, elapsed).await
}

/// Waits (60 s at most) until a `clusters` answer lists every name alive.
async fn wait_for_clusters(client: &async_nats::Client, user: &str, names: &[String]) {
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        if let Ok(r) =
            coordinator_op::<api::Clusters>(client, user, &fedvol_proto::NoArgs {}, Duration::from_secs(5)).await
            && names.iter().all(|n| {
                r.clusters
                    .iter()
                    .any(|c| &c.name == n && crate::faultkit::heard_and_restored(c))
            })
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

type Answer = (String, Duration, Instant, Result<SubmitReply, crate::load::CallError>);

async fn report(
    spec: &BurstSpec,
    fed: &BurstFederation,
    client: &async_nats::Client,
    mut answers: Vec<Answer>,
    elapsed: Duration,
) -> BurstReport {
    answers.sort_by_key(|a| a.2);
    let mut committed = 0;
    let mut refused_at: Vec<u64> = Vec::new();
    let mut errors = Vec::new();
    let mut by_cluster = BTreeMap::new();
    let mut attempts = BTreeMap::new();
    let mut acked = BTreeMap::new();
    let mut latencies: Vec<f64> = Vec::new();
    for (id, took, _, r) in &answers {
        latencies.push(took.as_secs_f64() * 1000.0);
        match r {
            Ok(SubmitReply {
                stored: Some(s),
                error: None,
                ..
            }) if s.state == DecisionState::Committed => {
                committed += 1;
                let c = s.decision.chosen_cluster.clone().unwrap_or_default();
                *by_cluster.entry(c.clone()).or_insert(0) += 1;
                *attempts.entry(s.attempts.len()).or_insert(0) += 1;
                acked.insert(
                    id.clone(),
                    Acked {
                        cluster: c,
                        completed: false,
                    },
                );
            }
            Ok(SubmitReply {
                stored: Some(s),
                error: None,
                ..
            }) if s.state == DecisionState::Failed => {
                refused_at.push(s.updated_ms);
            }
            Ok(r) => errors.push(format!("{id}: {:?}", r.error)),
            Err(e) => errors.push(format!("{id}: {e}")),
        }
    }
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if latencies.is_empty() {
            0.0
        } else {
            latencies[((latencies.len() - 1) as f64 * p).round() as usize]
        }
    };
    let load = LoadResult {
        attempts: Vec::new(),
        ids: answers.iter().map(|a| a.0.clone()).collect(),
        acked,
        started: Instant::now(),
        elapsed,
    };
    let names: Vec<&str> = fed.names.iter().map(String::as_str).collect();
    let check = final_check(
        client,
        &named_inventories(&names, &fed.agents),
        &load,
        Duration::from_secs(5),
    )
    .await;
    // When each committed request took its capacity on its agent: its volume's `Provisioning`
    // event, stamped when the commit was admitted (the capacity is promised from then on; a
    // refusal after that moment found it taken, and a commit that then failed would show as
    // fewer than S committed instead).
    let mut committed_at: Vec<u64> = Vec::new();
    for n in &fed.names {
        if let Ok(st) = crate::checker::fetch_status(client, n).await {
            for v in &st.volumes {
                if let Some(e) = v.events.iter().find(|e| e.reason == "Provisioning") {
                    committed_at.push(e.at_ms);
                }
            }
        }
    }
    committed_at.sort_unstable();
    let full_at = committed_at
        .get(spec.slots.saturating_sub(1))
        .copied()
        .unwrap_or(u64::MAX);
    let refused = refused_at.len();
    let refused_while_free = refused_at.iter().filter(|t| **t < full_at).count();
    BurstReport {
        spec: spec.clone(),
        committed,
        refused,
        refused_while_free,
        errors,
        by_cluster,
        attempts,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        max_ms: latencies.last().copied().unwrap_or(0.0),
        elapsed,
        check,
    }
}
