//! `fedvol submit WORKFLOW`: every cluster plans the workflow, one commits; the decision is
//! printed. The request id is the one given, or a fresh one that a plain submit remembers until
//! it learns the outcome ([`crate::cli::resume`]), so that running the same command again never
//! books the workflow twice. `--wait` rides out a missing coordinator and passing errors,
//! `--wait-for-capacity` queues what does not fit now, `--follow` waits for the jobs' end.
//! Exit 0 placed (or queued), 2 nothing fits or refused by policy, 75 clusters did not answer,
//! 1 bad input or an error.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fedvol_proto::coordinator::{self as api, SubmitMsg, SubmitReply, request_id_for, unique_token};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, Endpoint};

use super::{Leading, Run};
use crate::cli::args::OutputArgs;
use crate::cli::ask::{as_submit_reply, get, with_client};
use crate::cli::choice::ChoiceArgs;
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_NO_FIT, EXIT_OK, EXIT_UNAVAILABLE};
use crate::cli::follow::follow_jobs;
use crate::cli::net::NetArgs;
use crate::cli::print::{fail, print_doc, show_stored};
use crate::cli::resume::Resume;
use crate::cli::template::{ValuesArgs, load_workflow_input};
use crate::client::{Client, ClientError};
use crate::render::Output;
use crate::render::layout::para;
use crate::render::stored::{stored_table, unavailable};

/// `fedvol submit`.
#[derive(Debug, clap::Args)]
pub struct Submit {
    /// The workflow: a Fuzzfile (v1 or v4), a file of Kubernetes PersistentVolumeClaims, or a
    /// catalog template with `--values`.
    #[arg(value_name = "WORKFLOW")]
    pub workflow: PathBuf,
    /// Values files for a workflow that is a catalog template.
    #[command(flatten)]
    pub values: ValuesArgs,
    /// Plan only: nothing is held or committed, and nothing is stored unless `--keep`.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: store the decision, so that `fedvol decisions show`, `why-not` and
    /// `replay` find it under its request id.
    #[arg(long, requires = "dry_run")]
    pub keep: bool,
    /// Keep asking, with the same request id, while no coordinator answers (none is running,
    /// or the one asked stopped before answering) or the answer is a passing error
    /// (`overloaded`, `store_unavailable`, `nats_error`, `commit_outcome_unknown`), for up to
    /// `--wait-ms`, instead of failing at once. A retry never books the workflow twice.
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` keeps asking, ms.
    #[arg(long, default_value_t = 300_000)]
    pub wait_ms: u64,
    /// Request id (idempotency key: the same id returns the same decision, and never books the
    /// workflow twice). Without it, the CLI makes one (`<workflow>-<unique>`), prints it on
    /// stderr before sending, and uses it for every retry; to run the submit again by hand
    /// after an error, pass that id here.
    ///
    /// Without it, a submit whose outcome the CLI did not learn (no answer, the coordinator
    /// stopped, the commit in doubt, Ctrl-C) is remembered, and the next plain submit of the
    /// same workflow (same groups, seed and choice options) by the same user resumes it under
    /// its request id instead of booking again (it says so on stderr); see `--new`.
    #[arg(long)]
    pub request_id: Option<String>,
    /// Submit afresh under a new request id, even when an earlier submit of the same workflow
    /// did not learn its outcome (which is then left as it is: `fedvol decisions show` it).
    #[arg(long, conflicts_with = "request_id")]
    pub new: bool,
    /// Seed for every random choice (default: derived from the request id).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A group you claim (repeatable). Only a coordinator without a user directory (dev mode)
    /// uses it; with a directory your groups come from there.
    #[arg(short = 'g', long = "group")]
    pub groups: Vec<String>,
    /// Rejected candidates listed per funnel stage in the stored decision (0 = all; default:
    /// the coordinator's, 5). Counts per reason are always exact.
    #[arg(long)]
    pub trace_limit: Option<usize>,
    /// Priority class (one of the coordinator's `priorityClasses`; overrides the workflow's
    /// `priority:`). Among queued decisions, a higher priority is placed first; committed work
    /// is never preempted.
    #[arg(long, value_name = "CLASS")]
    pub priority: Option<String>,
    /// When nothing fits now, or a quota is exceeded, queue the decision (state `queued`) and
    /// place it when a completion frees room, by priority then age, instead of failing. With
    /// `--wait`, wait (up to `--wait-ms`) until it is placed.
    #[arg(long, conflicts_with = "dry_run")]
    pub wait_for_capacity: bool,
    /// On a cluster that runs the workflow's jobs (Slurm with `slurm.jobs`): wait until every
    /// job ended, printing each job's state changes on stderr; exit 0 when the workflow
    /// completed, 1 when it failed.
    #[arg(long, conflicts_with = "dry_run")]
    pub follow: bool,
    /// Cluster-choice options (`--prefer-cost`, `--cost-hours`).
    #[command(flatten)]
    pub choice: ChoiceArgs,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// Error codes after which `fedvol submit --wait` asks again with the same request id: the
/// request may not have been decided yet, and asking again cannot book it twice.
const PASSING: [Code; 4] = [
    Code::Overloaded,
    Code::StoreUnavailable,
    Code::NatsError,
    Code::CommitOutcomeUnknown,
];

impl Submit {
    /// The request of this command line for `workflow`; its id is empty when none was given.
    fn message(&self, workflow: fedvol_common::model::Workflow) -> SubmitMsg {
        SubmitMsg {
            priority: self.priority.clone(),
            wait_for_capacity: self.wait_for_capacity,
            request_id: self.request_id.clone().unwrap_or_default(),
            workflow,
            dry_run: self.dry_run,
            seed: self.seed,
            groups: self.groups.clone(),
            timeout_ms: 0,
            trace_limit: self.trace_limit,
            keep: self.keep,
            choice: self.choice.options(),
        }
    }
}

impl Run for Submit {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    /// Runs `fedvol submit`.
    ///
    /// The request id is the one given, or one made here
    /// ([`fedvol_proto::coordinator::request_id_for`]) and printed on stderr when the outcome
    /// is not learnt (a coordinator that dies mid-commit leaves the decision under that id; a
    /// retry under a fresh id would book a second slot). With `--wait`, every retry carries that
    /// id (see [`Submit::wait`]).
    fn run(self) -> u8 {
        let Some(input) = load_workflow_input(&self.workflow, &self.values.values) else {
            return EXIT_BAD_INPUT;
        };
        let msg = self.message(input.loaded.value);
        with_client(&self.net, async |client| submit(&self, client, msg).await)
    }
}

/// Sends `msg` as `a` says and prints the answer; the exit status.
async fn submit(a: &Submit, client: &Client, mut msg: SubmitMsg) -> u8 {
    // A plain real submit resumes the same request left unfinished by an earlier run that has
    // ended (a sibling still running is never resumed), else gets a fresh id, remembered and
    // locked until its outcome is learnt. A real submit under an id given by hand settles an
    // unfinished one under that id too.
    let mut resume = Resume::new(&a.net.user, &a.net.subject_prefix, &msg);
    if msg.request_id.is_empty() {
        msg.request_id = request_id_for(&msg.workflow.name, &unique_token(&client.nats));
    }
    // A request too large to send is refused below with one line; an id is worth printing
    // (and remembering) only for a request that leaves.
    let sendable = <api::Submit as Endpoint>::encode_request(&msg).len() <= client.nats.max_payload();
    resume.begin(&mut msg, a.request_id.is_none(), sendable, !a.new);
    // Said only when the outcome is not known (no answer, a passing error, a commit still
    // going): a decided submit prints its id in the decision, a dry run books nothing.
    let unknown_outcome = |id: &str| {
        if a.request_id.is_none() && sendable && !a.dry_run {
            eprint!(
                "{}",
                para(
                    "",
                    "  ",
                    &format!(
                        "request id: {id} (its outcome is unknown: run the same submit again, which resumes it, or pass --request-id {id}; it is never booked twice)"
                    )
                )
            );
        }
    };
    let until = Instant::now() + Duration::from_millis(a.wait_ms);
    let reply = match ask_until_answered(client, &msg, a.wait, until).await {
        Ok(r) => r,
        Err(e) => {
            let code = fail(&e);
            // Not received at all (nobody listening, refused by the server, never sent):
            // nothing was booked, so nothing is unknown.
            let not_received = matches!(
                e,
                ClientError::NoCoordinator { .. }
                    | ClientError::Refused { .. }
                    | ClientError::TooLarge { .. }
                    | ClientError::Invalid(_)
                    | ClientError::Connect(_)
            );
            if not_received {
                resume.not_received();
            } else {
                unknown_outcome(&msg.request_id);
            }
            return code;
        }
    };
    if let Some(s) = &reply.stored {
        note_ignored_groups(&a.groups, &s.request.groups);
    }
    // The outcome is learnt unless the answer is a passing error or the decision is still
    // being committed: then the next plain submit resumes it.
    let unfinished = reply.error.as_ref().is_some_and(|e| PASSING.iter().any(|c| e.is(c)))
        || reply
            .stored
            .as_ref()
            .is_some_and(|s| s.state == DecisionState::Planned && !s.dry_run);
    if unfinished {
        unknown_outcome(&msg.request_id);
    } else {
        resume.learnt(&msg.request_id);
    }
    let reply = match &reply.stored {
        Some(s) if s.state == DecisionState::Queued && a.wait => {
            eprintln!(
                "queued: waiting for room (--wait: up to {} s more; Ctrl-C stops, and the decision stays queued)",
                until.saturating_duration_since(Instant::now()).as_secs()
            );
            wait_while_queued(client, &msg.request_id, until).await.unwrap_or(reply)
        }
        _ => reply,
    };
    let code = show_submit(&reply, a.output.output, a.wait);
    match &reply.stored {
        Some(s) if a.follow && code == EXIT_OK && s.state == DecisionState::Committed => {
            follow_jobs(client, &msg.request_id, s.clone(), false).await
        }
        _ => code,
    }
}

/// Sends `msg` until it is answered. With `wait`, until `until`, a missing coordinator, a
/// timeout, a passing error ([`PASSING`]) and `clusters_unavailable` are asked again with the
/// same request id, each said on stderr. The answer, or the error that ended the asking.
async fn ask_until_answered(
    client: &Client,
    msg: &SubmitMsg,
    wait: bool,
    until: Instant,
) -> Result<SubmitReply, ClientError> {
    // `--wait` says once what it waits for; each passing error has its own note.
    let mut said_waiting = false;
    loop {
        let waiting = wait && Instant::now() < until;
        match client.call::<api::Submit>(msg).await {
            Ok(r) => {
                let r = as_submit_reply(r);
                match &r.error {
                    Some(e) if waiting && PASSING.iter().any(|c| e.is(c)) => {
                        eprintln!(
                            "note: {} ({}); asking again with request id {}",
                            e.message, e.code, msg.request_id
                        );
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    // Clusters did not answer: nothing was booked, and the coordinator plans
                    // the request afresh under the same id.
                    Some(e) if waiting && e.is(&Code::ClustersUnavailable) => {
                        eprintln!(
                            "note: not placed yet: {} ({}); asking again with request id {}",
                            e.message, e.code, msg.request_id
                        );
                        tokio::time::sleep(Duration::from_millis(1000)).await;
                    }
                    _ => return Ok(r),
                }
            }
            Err(ClientError::NoCoordinator { subject, .. }) if waiting => {
                if !said_waiting {
                    said_waiting = true;
                    eprintln!(
                        "waiting for a coordinator to answer on {subject} (--wait: up to {} s more; Ctrl-C stops)",
                        until.saturating_duration_since(Instant::now()).as_secs()
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e @ ClientError::Timeout { .. }) if waiting => {
                eprintln!("note: {e}; asking again with request id {}", msg.request_id);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Asks for decision `id` every half second until it is placed or has failed (neither
/// `queued` nor `planned`: a queued decision being placed is `planned` for a moment) or `until`
/// passes; the last answer read (`None` when none could be read).
async fn wait_while_queued(client: &Client, id: &str, until: Instant) -> Option<SubmitReply> {
    let mut last = None;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Ok(r) = get(client, id).await {
            let queued = r
                .stored
                .as_ref()
                .is_none_or(|s| matches!(s.state, DecisionState::Queued | DecisionState::Planned));
            last = Some(r);
            if !queued {
                break;
            }
        }
    }
    last
}

/// With a user directory, the coordinator takes the user's groups from it and ignores the
/// claimed ones (`-g`): say so when they differ, so that nobody believes a `-g`
/// was used.
fn note_ignored_groups(claimed: &[String], used: &[String]) {
    if claimed.is_empty() {
        return;
    }
    let c: std::collections::BTreeSet<&str> = claimed.iter().map(String::as_str).collect();
    let u: std::collections::BTreeSet<&str> = used.iter().map(String::as_str).collect();
    if c != u {
        let used: Vec<&str> = u.into_iter().collect();
        eprintln!(
            "note: -g was ignored: the coordinator takes your groups from its user directory ([{}])",
            used.join(", ")
        );
    }
}

fn show_submit(reply: &SubmitReply, o: Output, wait: bool) -> u8 {
    // A refusal by the coordinator's policy is an answer, not a failure to get one: exit 2
    // (not placed), like a workflow nothing fits; so is a workflow no cluster can ever place.
    let refused = reply.error.as_ref().is_some_and(|e| {
        [
            Code::QuotaExceeded,
            Code::QueueFull,
            Code::QueueTimeout,
            Code::Unresolvable,
            Code::ClustersDrained,
        ]
        .contains(&e.code)
    });
    // Clusters did not answer: the decision says why (`not placed now:`), then what to do;
    // exit 75, retryable.
    if let Some(s) = reply.stored.as_ref().filter(|s| unavailable(s)) {
        if !print_doc(o, s, || stored_table(s, o == Output::Wide)) {
            return EXIT_BAD_INPUT;
        }
        if s.state == DecisionState::Queued {
            return show_submit_queued();
        }
        unavailable_hint(wait);
        return EXIT_UNAVAILABLE;
    }
    match show_stored(reply, o, "submit") {
        Ok(s) if s.state == DecisionState::Queued => show_submit_queued(),
        Ok(s) => decision_exit(s),
        Err(_) if refused && reply.stored.is_some() => EXIT_NO_FIT,
        Err(code) => code,
    }
}

/// What a queued submit says on stderr; exit 0.
fn show_submit_queued() -> u8 {
    eprintln!("queued: no room now; placed when room frees, by priority then age (`fedvol decisions watch` shows it)");
    EXIT_OK
}

fn decision_exit(s: &StoredDecision) -> u8 {
    if s.decision.chosen_cluster.is_some() {
        EXIT_OK
    } else if unavailable(s) {
        EXIT_UNAVAILABLE
    } else {
        EXIT_NO_FIT
    }
}

/// What to do after a `clusters_unavailable` answer, on stderr.
fn unavailable_hint(wait: bool) {
    eprint!(
        "{}",
        para(
            "note: ",
            "  ",
            if wait {
                "nothing was booked; the clusters did not answer within --wait-ms: run the same submit again later, or add --wait-for-capacity to queue it until they answer"
            } else {
                "nothing was booked and this is not \"nothing fits\": run the same submit again (it is planned afresh), add --wait to ask again until the clusters answer, or --wait-for-capacity to queue it"
            }
        )
    );
}
