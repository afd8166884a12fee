//! Load for fault tests and the soak: requests over NATS the way the CLI sends them (one fresh
//! reply inbox per request, dropped when done, so a request that times out leaves nothing
//! behind), a small seeded random generator, and concurrent submitters that record every
//! attempt and every acknowledgement a client received.
//!
//! A submitter sends `submit` for a fresh request id, and, when the answer is missing (no
//! coordinator answered in time, nobody listening, NATS down) or an error that may pass
//! (`store_unavailable`, `nats_error`, `commit_outcome_unknown`), sends the **same** request id again until it gets an
//! answer or `retry_for` passed: what a careful client does, and what lets a coordinator take
//! over a decision another one abandoned. Every `committed` answer is an acknowledgement the
//! checker ([`crate::checker`]) must find again in the final state. A `complete` its cluster did
//! not answer (`timed_out`, `unreachable`) is sent again the same way, also while the load stops.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use serde::de::DeserializeOwned;

use fedvol_common::model::Workflow;
use fedvol_formats::parse_workflow_str;
use fedvol_proto::coordinator::{self as api, CoordinatorEndpoint, DecisionRef, SubmitMsg, SubmitReply};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::{Endpoint, Subjects};

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// NATS answered "no responders": nobody subscribes to the subject.
    NoResponders(String),
    /// No answer within the wait (ms).
    TimedOut(String, u128),
    /// The client failed (disconnected, publish refused...).
    Nats(String),
    /// An answer came but is not the expected JSON.
    BadAnswer(String),
    /// The server answered with a failure (code: message).
    Refused(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NoResponders(s) => write!(f, "no responders on {s}"),
            CallError::TimedOut(s, ms) => write!(f, "no answer on {s} within {ms} ms"),
            CallError::Nats(m) => write!(f, "NATS error: {m}"),
            CallError::BadAnswer(m) => write!(f, "unreadable answer: {m}"),
            CallError::Refused(m) => write!(f, "refused: {m}"),
        }
    }
}

/// Sends `body` on `subject` with a fresh inbox and waits up to `wait` for the first answer.
///
/// Errors: [`CallError`] (never a panic, whatever the server does).
pub async fn call_raw(
    client: &async_nats::Client,
    subject: &str,
    body: Vec<u8>,
    wait: Duration,
) -> Result<Bytes, CallError> {
    let inbox = client.new_inbox();
    let mut sub = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| CallError::Nats(e.to_string()))?;
    client
        .publish_with_reply(subject.to_string(), inbox, body.into())
        .await
        .map_err(|e| CallError::Nats(e.to_string()))?;
    match tokio::time::timeout(wait, sub.next()).await {
        Ok(Some(m)) if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) => {
            Err(CallError::NoResponders(subject.to_string()))
        }
        Ok(Some(m)) => Ok(m.payload),
        Ok(None) => Err(CallError::Nats("the reply subscription closed".into())),
        Err(_) => Err(CallError::TimedOut(subject.to_string(), wait.as_millis())),
    }
}

/// [`call_raw`], decoding the answer (a versioned body) as `T`.
///
/// Errors: [`CallError`]; an answer that is not a `T` is [`CallError::BadAnswer`].
pub async fn call<T: DeserializeOwned>(
    client: &async_nats::Client,
    subject: &str,
    body: Vec<u8>,
    wait: Duration,
) -> Result<T, CallError> {
    let bytes = call_raw(client, subject, body, wait).await?;
    fedvol_proto::decode(&bytes, "answer", "client")
        .map_err(|e| CallError::BadAnswer(format!("{e}: {}", String::from_utf8_lossy(&bytes))))
}

/// The answer of endpoint `E` to `bytes`: its reply, a failure as [`CallError::Refused`], or
/// [`CallError::BadAnswer`].
fn reply_of<E: Endpoint>(bytes: &[u8]) -> Result<E::Reply, CallError> {
    match E::decode_reply(bytes, "client") {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(f)) => Err(CallError::Refused(format!("{}: {}", f.error.code, f.error.message))),
        Err(e) => Err(CallError::BadAnswer(format!("{e}: {}", String::from_utf8_lossy(bytes)))),
    }
}

/// Coordinator endpoint `E` as `user` with `body`.
///
/// Errors: [`CallError`] (a failure the coordinator answered with is [`CallError::Refused`];
/// submit-shaped replies carry theirs in their `error`).
pub async fn coordinator_op<E: CoordinatorEndpoint>(
    client: &async_nats::Client,
    user: &str,
    body: &E::Request,
    wait: Duration,
) -> Result<E::Reply, CallError> {
    let subject = Subjects::default().coordinator(E::OP, user);
    let bytes = call_raw(client, &subject, E::encode_request(body).to_vec(), wait).await?;
    reply_of::<E>(&bytes)
}

/// A submit message for group `physics` (which the test inventories let use their scratch
/// provisioner), waiting the coordinator's default deadline. A dry run asks to be kept
///, since the load tests read every decision back from the bucket.
pub fn submit_msg(id: &str, workflow: &Workflow, dry_run: bool) -> SubmitMsg {
    SubmitMsg {
        priority: None,
        wait_for_capacity: false,
        request_id: id.to_string(),
        workflow: workflow.clone(),
        dry_run,
        seed: None,
        groups: vec!["physics".into()],
        timeout_ms: 0,
        trace_limit: None,
        keep: dry_run,
        choice: None,
    }
}

/// `complete` of `id` as `user`.
///
/// Errors: [`CallError`].
pub async fn complete(
    client: &async_nats::Client,
    user: &str,
    id: &str,
    wait: Duration,
) -> Result<SubmitReply, CallError> {
    let body = DecisionRef {
        request_id: id.to_string(),
        cancel: false,
        whole: None,
    };
    coordinator_op::<api::Complete>(client, user, &body, wait).await
}

/// A workflow with one 1 MiB scratch volume (a directory the hostpath driver creates) and one
/// job of `cores` cores and 1 GiB.
pub fn small_workflow(name: &str, cores: u64) -> Workflow {
    let text = format!(
        "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {{uri: docker://a}}\n    mounts: {{/s: scratch}}\n    resource: {{cpu: {{cores: {cores}}}, memory: {{size: 1GiB}}}}\n"
    );
    parse_workflow_str("wf.yaml", name, &text)
        .map(|l| l.value)
        .unwrap_or_else(|d| panic!("the load workflow is invalid: {d}"))
}

/// Cluster `name`: a hostpath provisioner `scratch` under `<dir>/scratch` for group
/// `physics`, and `hosts` hosts of `cpu` cores, `cpu` × 4 GiB and `cpu` instances in zone
/// `z1` (so `cpu` one-core jobs fit on each).
pub fn roomy_inventory(name: &str, hosts: usize, cpu: u64, dir: &std::path::Path) -> String {
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).expect("the scratch directory");
    let mut t = format!(
        "cluster: {name}\nprovisioners:\n  scratch:\n    driver: {{type: hostpath, path: '{}'}}\n    ephemeral: [physics]\n    create: [physics]\nzones:\n  z1:\n    hosts:\n",
        scratch.display()
    );
    for i in 0..hosts {
        t.push_str(&format!(
            "      - {{name: h{i}, capacity: {{cpu: {cpu}, memory: {}GiB, instances: {cpu}}}}}\n",
            cpu * 4
        ));
    }
    t
}

/// A small deterministic random generator (splitmix64): fault schedules are reproducible from
/// the seed a test prints.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator seeded from the environment variable `var` when set (a number), else from
    /// the clock; returns the seed too, for the test to print.
    pub fn from_env(var: &str) -> (Rng, u64) {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        (Rng::new(seed), seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// True with probability `p` (0..=1).
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A duration uniform in `lo_ms..=hi_ms` milliseconds.
    pub fn ms(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(lo_ms + self.below(hi_ms.saturating_sub(lo_ms) + 1))
    }
}

/// A number from the environment variable `var`, or `default`.
pub fn env_number(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// What one request attempt got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Submit answered: committed on this cluster.
    Committed(String),
    /// Submit answered: nothing fits (or every commit failed).
    Failed,
    /// Submit answered: a dry run's plan.
    Planned,
    /// Submit answered: queued to wait for capacity.
    Queued,
    /// Complete answered: completed.
    Completed,
    /// Answered with an error (its code).
    Error(String),
    /// No answer within the wait.
    NoAnswer,
    /// Nobody listens (NATS "no responders").
    NoResponders,
    /// The client itself failed (disconnected, ...), or the answer was unreadable.
    ClientError(String),
}

impl Outcome {
    /// True when a coordinator answered (with a decision or an error).
    pub fn answered(&self) -> bool {
        !matches!(
            self,
            Outcome::NoAnswer | Outcome::NoResponders | Outcome::ClientError(_)
        )
    }

    /// A short label for counting.
    pub fn label(&self) -> String {
        match self {
            Outcome::Committed(_) => "committed".into(),
            Outcome::Failed => "failed".into(),
            Outcome::Planned => "planned".into(),
            Outcome::Queued => "queued".into(),
            Outcome::Completed => "completed".into(),
            Outcome::Error(code) => format!("error:{code}"),
            Outcome::NoAnswer => "no_answer".into(),
            Outcome::NoResponders => "no_responders".into(),
            Outcome::ClientError(_) => "client_error".into(),
        }
    }
}

/// One request attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The request id.
    pub id: String,
    /// `submit` or `complete`.
    pub op: &'static str,
    /// When it was sent.
    pub sent: Instant,
    /// How long until its outcome.
    pub took: Duration,
    /// What it got.
    pub outcome: Outcome,
}

impl Attempt {
    /// When its outcome came.
    pub fn ended(&self) -> Instant {
        self.sent + self.took
    }
}

/// An acknowledgement a client received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acked {
    /// The cluster the decision committed on.
    pub cluster: String,
    /// The client was also told the workflow completed.
    pub completed: bool,
}

/// What the submitters do.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Concurrent submitters.
    pub submitters: usize,
    /// Request ids are `<id_prefix>-<submitter>-<n>`.
    pub id_prefix: String,
    /// Submitter `s` is user `<user_prefix><s>`.
    pub user_prefix: String,
    /// The workflow every submit sends.
    pub workflow: Workflow,
    /// Every n-th submit of a submitter is a dry run (0: none).
    pub dry_run_every: u64,
    /// Every n-th committed submit is completed right after (0: none).
    pub complete_every: u64,
    /// How long one attempt waits for its answer.
    pub answer_wait: Duration,
    /// How long a request id is retried while unanswered (zero: never retried).
    pub retry_for: Duration,
    /// Pause between a submitter's requests.
    pub pause: Duration,
    /// Requests per submitter at most.
    pub max_per_submitter: u64,
}

impl LoadSpec {
    /// A spec with `submitters` submitters of `workflow`, 5 s per attempt, retries for 60 s,
    /// 20 ms pauses, no dry runs or completes, no request limit.
    pub fn new(submitters: usize, id_prefix: &str, workflow: Workflow) -> LoadSpec {
        LoadSpec {
            submitters,
            id_prefix: id_prefix.to_string(),
            user_prefix: "user".into(),
            workflow,
            dry_run_every: 0,
            complete_every: 0,
            answer_wait: Duration::from_secs(5),
            retry_for: Duration::from_secs(60),
            pause: Duration::from_millis(20),
            max_per_submitter: u64::MAX,
        }
    }
}

#[derive(Default)]
struct State {
    attempts: Mutex<Vec<Attempt>>,
    acked: Mutex<BTreeMap<String, Acked>>,
    ids: Mutex<BTreeSet<String>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Running submitters.
pub struct Load {
    stop: Arc<AtomicBool>,
    state: Arc<State>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    started: Instant,
}

/// Everything the submitters saw.
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// Every attempt, in completion order.
    pub attempts: Vec<Attempt>,
    /// Every acknowledgement, by request id.
    pub acked: BTreeMap<String, Acked>,
    /// Every request id sent.
    pub ids: BTreeSet<String>,
    /// When the load started.
    pub started: Instant,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Error codes of answers worth asking again with the same request id (`clusters_unavailable`:
/// clusters did not answer and nothing was booked; the coordinator plans the same id afresh).
pub const RETRYABLE: [&str; 5] = [
    "store_unavailable",
    "nats_error",
    "commit_outcome_unknown",
    "overloaded",
    "clusters_unavailable",
];

/// Error codes of a `complete` that say its cluster did not answer (the agent was down or
/// killed midway): with [`RETRYABLE`], the careful client asks again.
pub const CLUSTER_UNANSWERED: [&str; 2] = ["timed_out", "unreachable"];

fn outcome_of(r: &Result<SubmitReply, CallError>) -> Outcome {
    match r {
        Ok(reply) => match (&reply.error, &reply.stored) {
            (Some(e), _) => Outcome::Error(e.code.to_string()),
            (None, Some(s)) => match s.state {
                DecisionState::Committed => Outcome::Committed(s.decision.chosen_cluster.clone().unwrap_or_default()),
                DecisionState::Failed => Outcome::Failed,
                DecisionState::Planned => Outcome::Planned,
                DecisionState::Queued => Outcome::Queued,
                DecisionState::Completed | DecisionState::Cancelled => Outcome::Completed,
            },
            (None, None) => Outcome::ClientError("an answer with neither decision nor error".into()),
        },
        Err(CallError::TimedOut(..)) => Outcome::NoAnswer,
        Err(CallError::NoResponders(_)) => Outcome::NoResponders,
        Err(e) => Outcome::ClientError(e.to_string()),
    }
}

fn retry_worthy(o: &Outcome) -> bool {
    match o {
        Outcome::Error(code) => RETRYABLE.contains(&code.as_str()),
        other => !other.answered(),
    }
}

impl Load {
    /// Starts `spec.submitters` submitters, submitter `s` on `clients[s % clients.len()]`.
    pub fn start(clients: &[async_nats::Client], spec: LoadSpec) -> Load {
        assert!(!clients.is_empty(), "the load needs at least one client");
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(State::default());
        let spec = Arc::new(spec);
        let tasks = (0..spec.submitters)
            .map(|s| {
                let client = clients[s % clients.len()].clone();
                let (stop, state, spec) = (stop.clone(), state.clone(), spec.clone());
                tokio::spawn(async move { submitter(s, client, spec, stop, state).await })
            })
            .collect();
        Load {
            stop,
            state,
            tasks,
            started: Instant::now(),
        }
    }

    /// When the load started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Attempts so far whose outcome satisfies `pred`.
    pub fn count(&self, pred: impl Fn(&Attempt) -> bool) -> usize {
        locked(&self.state.attempts).iter().filter(|a| pred(a)).count()
    }

    /// Attempts so far (a copy).
    pub fn attempts(&self) -> Vec<Attempt> {
        locked(&self.state.attempts).clone()
    }

    /// Waits until at least `n` more submits have been answered with a decision than when
    /// called, or `timeout` passed. Returns whether they were.
    pub async fn wait_answers(&self, n: usize, timeout: Duration) -> bool {
        let decided = |a: &Attempt| {
            a.op == "submit" && matches!(a.outcome, Outcome::Committed(_) | Outcome::Failed | Outcome::Planned)
        };
        let base = self.count(decided);
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self.count(decided) >= base + n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Stops the submitters: each finishes (and retries) its current request first.
    pub async fn stop(self) -> LoadResult {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks {
            let _ = t.await;
        }
        LoadResult {
            attempts: locked(&self.state.attempts).clone(),
            acked: locked(&self.state.acked).clone(),
            ids: locked(&self.state.ids).clone(),
            started: self.started,
            elapsed: self.started.elapsed(),
        }
    }
}

async fn attempt_submit(
    client: &async_nats::Client,
    user: &str,
    msg: &SubmitMsg,
    wait: Duration,
    state: &State,
) -> Outcome {
    let sent = Instant::now();
    let r: Result<SubmitReply, CallError> = coordinator_op::<api::Submit>(client, user, msg, wait).await;
    let outcome = outcome_of(&r);
    locked(&state.attempts).push(Attempt {
        id: msg.request_id.clone(),
        op: "submit",
        sent,
        took: sent.elapsed(),
        outcome: outcome.clone(),
    });
    outcome
}

async fn submitter(
    s: usize,
    client: async_nats::Client,
    spec: Arc<LoadSpec>,
    stop: Arc<AtomicBool>,
    state: Arc<State>,
) {
    let user = format!("{}{s}", spec.user_prefix);
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) && n < spec.max_per_submitter {
        n += 1;
        let id = format!("{}-{s}-{n}", spec.id_prefix);
        locked(&state.ids).insert(id.clone());
        let dry = spec.dry_run_every > 0 && n.is_multiple_of(spec.dry_run_every);
        let msg = submit_msg(&id, &spec.workflow, dry);
        let first = Instant::now();
        let outcome = loop {
            let o = attempt_submit(&client, &user, &msg, spec.answer_wait, &state).await;
            if !retry_worthy(&o) || first.elapsed() >= spec.retry_for {
                break o;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        if let Outcome::Committed(cluster) = &outcome {
            locked(&state.acked).insert(
                id.clone(),
                Acked {
                    cluster: cluster.clone(),
                    completed: false,
                },
            );
            if spec.complete_every > 0 && n.is_multiple_of(spec.complete_every) {
                let first = Instant::now();
                loop {
                    let sent = Instant::now();
                    let r = complete(&client, &user, &id, spec.answer_wait).await;
                    let o = outcome_of(&r);
                    locked(&state.attempts).push(Attempt {
                        id: id.clone(),
                        op: "complete",
                        sent,
                        took: sent.elapsed(),
                        outcome: o.clone(),
                    });
                    if o == Outcome::Completed {
                        if let Some(a) = locked(&state.acked).get_mut(&id) {
                            a.completed = true;
                        }
                        break;
                    }
                    // An agent that is down answers nothing: the coordinator says so
                    // (timed_out, unreachable); ask again while the retry window lasts, also
                    // once the load stops: the agent may have completed it and lost only its
                    // answer (killed right after), and the store says `committed` until a
                    // complete is answered. A careful client asks until it is told what
                    // became of it (the coordinator's own answer says the agent answers a
                    // repeated complete with its first answer); other refusals end the
                    // asking when the load stops.
                    let unanswered_by_cluster = !o.answered()
                        || matches!(&o, Outcome::Error(code)
                            if CLUSTER_UNANSWERED.contains(&code.as_str()) || RETRYABLE.contains(&code.as_str()));
                    if first.elapsed() >= spec.retry_for || stop.load(Ordering::SeqCst) && !unanswered_by_cluster {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        tokio::time::sleep(spec.pause).await;
    }
}

impl LoadResult {
    /// Submit attempts per outcome label.
    pub fn outcomes(&self, op: &str) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for a in self.attempts.iter().filter(|a| a.op == op) {
            *out.entry(a.outcome.label()).or_insert(0) += 1;
        }
        out
    }

    /// Submits answered with a decision per second among those answered in `[from, to)`.
    pub fn rate(&self, from: Instant, to: Instant) -> f64 {
        let secs = to.saturating_duration_since(from).as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        let n = self
            .attempts
            .iter()
            .filter(|a| {
                a.op == "submit" && matches!(a.outcome, Outcome::Committed(_) | Outcome::Failed | Outcome::Planned)
            })
            .filter(|a| a.ended() >= from && a.ended() < to)
            .count();
        n as f64 / secs
    }

    /// The first attempt answered with a decision after `t`.
    pub fn first_decision_after(&self, t: Instant) -> Option<Instant> {
        self.attempts
            .iter()
            .filter(|a| {
                a.op == "submit" && matches!(a.outcome, Outcome::Committed(_) | Outcome::Failed | Outcome::Planned)
            })
            .map(Attempt::ended)
            .filter(|e| *e > t)
            .min()
    }

    /// Request ids that never got a decision (every attempt unanswered or an error).
    pub fn unanswered(&self) -> Vec<String> {
        let decided: BTreeSet<&str> = self
            .attempts
            .iter()
            .filter(|a| {
                a.op == "submit" && matches!(a.outcome, Outcome::Committed(_) | Outcome::Failed | Outcome::Planned)
            })
            .map(|a| a.id.as_str())
            .collect();
        self.ids
            .iter()
            .filter(|id| !decided.contains(id.as_str()))
            .cloned()
            .collect()
    }

    /// One line: requests, outcomes, rate.
    pub fn summary(&self) -> String {
        let submits = self.outcomes("submit");
        let completes = self.outcomes("complete");
        format!(
            "{} request ids in {:.1} s ({:.1} decisions/s); submit attempts {submits:?}; complete attempts {completes:?}; acknowledged commits {}",
            self.ids.len(),
            self.elapsed.as_secs_f64(),
            self.rate(self.started, self.started + self.elapsed),
            self.acked.len()
        )
    }
}
