//! The federation commands: `submit`, `decisions {list,show,watch,replay}`, `why-not`,
//! `complete`, `clusters`. Each sends one request to the coordinators and prints the answer
//! (`-o table|json|yaml`). Exit codes (DESIGN §4): 0 done / a cluster was chosen, 2 nothing
//! fits, 1 bad input or no answer.

use std::path::PathBuf;

use comfy_table::Table;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use fedvol_proto::agent::ActionReply;
use fedvol_proto::coordinator::{self as api, CoordinatorEndpoint, DecisionRef, SubmitMsg, SubmitReply, WhyNotQuery};
use fedvol_proto::decisions::StoredDecision;
use fedvol_proto::{NoArgs, now_ms};

use super::net::{NetArgs, block_on};
use super::{EXIT_BAD_INPUT, EXIT_NO_FIT, EXIT_OK, OutputArgs};
use crate::client::{Client, ClientError};
use crate::render::{Output, table, yaml};

/// `fedvol submit`.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The workflow: a Fuzzfile (v1 or v4), a file of Kubernetes PersistentVolumeClaims, or a
    /// catalog template with `--values`.
    #[arg(value_name = "WORKFLOW")]
    pub workflow: PathBuf,
    /// Values files for a workflow that is a catalog template.
    #[command(flatten)]
    pub values: super::template::ValuesArgs,
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
    #[arg(long)]
    pub request_id: Option<String>,
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
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `fedvol decisions ...`.
#[derive(Debug, clap::Subcommand)]
pub enum DecisionsCmd {
    /// Stored decisions, newest first.
    List(OutputArgs),
    /// One decision: per-cluster table, then each cluster's failed stages with every reason.
    Show(IdArgs),
    /// Print the latest state of every decision, then every change as it happens (Ctrl-C to stop).
    Watch,
    /// Re-run a stored request with its seed and say whether the answer is identical.
    Replay(IdArgs),
}

/// A decision id and the output format.
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// The decision's request id.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `fedvol why-not`.
#[derive(Debug, clap::Args)]
pub struct WhyNotArgs {
    /// The decision's request id.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The cluster to ask.
    #[arg(long)]
    pub cluster: String,
    /// A zone of that cluster.
    #[arg(long)]
    pub zone: Option<String>,
    /// A host of that cluster.
    #[arg(long)]
    pub host: Option<String>,
    /// A provisioner of that cluster.
    #[arg(long)]
    pub provisioner: Option<String>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

fn print_doc<T: serde::Serialize>(o: Output, value: &T, table_text: impl FnOnce() -> String) -> bool {
    let text = match o {
        Output::Table => Ok(table_text()),
        Output::Json => serde_json::to_string_pretty(value).map(|s| s + "\n"),
        Output::Yaml => yaml::render(value),
    };
    match text {
        Ok(t) => {
            print!("{t}");
            true
        }
        Err(e) => {
            eprintln!("error: cannot render the answer: {e}");
            false
        }
    }
}

fn fail(e: &ClientError) -> u8 {
    eprintln!("error: {e}");
    EXIT_BAD_INPUT
}

/// Calls endpoint `E` and returns its reply; a failure the coordinator answered with is printed
/// as `error: <what>: <message> (<code>)`, and the exit code returned instead.
async fn ask<E: CoordinatorEndpoint>(client: &Client, req: &E::Request, what: &str) -> Result<E::Reply, u8> {
    match client.call::<E>(req).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(f)) => {
            eprintln!("error: {what}: {} ({})", f.error.message, f.error.code);
            Err(EXIT_BAD_INPUT)
        }
        Err(e) => Err(fail(&e)),
    }
}

/// A submit-shaped answer (submit, get, complete): a failure body reads as a reply with only an
/// error, so that it is printed like every other error of these commands.
fn as_submit_reply(r: Result<SubmitReply, fedvol_proto::Failure>) -> SubmitReply {
    r.unwrap_or_else(|f| SubmitReply::error(f.error))
}

fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header.to_vec());
    t
}

fn ago(ms: u64) -> String {
    let d = now_ms().saturating_sub(ms);
    if d < 1_000 {
        format!("{d} ms ago")
    } else {
        format!("{:.1} s ago", d as f64 / 1000.0)
    }
}

/// The table view of a stored decision: state, attempts, then the decision itself.
pub fn stored_table(s: &StoredDecision) -> String {
    let mut out = format!("state: {:?}{}\n", s.state, if s.dry_run { " (dry run)" } else { "" }).to_lowercase();
    out.push_str(&table::render(&s.decision));
    if !s.attempts.is_empty() {
        out.push_str("\ncommit attempts:\n");
    }
    for a in &s.attempts {
        match &a.error {
            None => out.push_str(&format!("  commit on {}: ok\n", a.cluster)),
            Some(e) => out.push_str(&format!(
                "  commit on {}: failed: {} ({})\n",
                a.cluster, e.message, e.code
            )),
        }
    }
    if let Some(c) = &s.completion {
        out.push_str(&format!("completed: {}\n", outcome_line(c)));
    }
    out
}

fn outcome_line(r: &ActionReply) -> String {
    let vols: Vec<String> = r
        .volumes
        .iter()
        .map(|v| format!("{} {}", v.volume, v.outcome))
        .collect();
    if vols.is_empty() {
        "nothing to reclaim".into()
    } else {
        vols.join(", ")
    }
}

fn decision_exit(s: &StoredDecision) -> u8 {
    if s.decision.chosen_cluster.is_some() {
        EXIT_OK
    } else {
        EXIT_NO_FIT
    }
}

/// Error codes after which `fedvol submit --wait` asks again with the same request id: the
/// request may not have been decided yet, and asking again cannot book it twice.
const PASSING: [fedvol_proto::Code; 4] = [
    fedvol_proto::Code::Overloaded,
    fedvol_proto::Code::StoreUnavailable,
    fedvol_proto::Code::NatsError,
    fedvol_proto::Code::CommitOutcomeUnknown,
];

/// Runs `fedvol submit`.
///
/// The request id is the one given, or one made here ([`crate::client::request_id_for`]) and
/// printed on stderr before anything is sent (issue 20: a coordinator that dies mid-commit
/// leaves the decision under that id; a retry under a fresh id would book a second slot). With
/// `--wait`, every retry carries that id (see [`SubmitArgs::wait`]).
pub fn submit(net: &NetArgs, a: &SubmitArgs) -> u8 {
    let Some(input) = super::template::load_workflow_input(&a.workflow, &a.values.values) else {
        return EXIT_BAD_INPUT;
    };
    let workflow = input.loaded.value;
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        let msg = SubmitMsg {
            request_id: a.request_id.clone().unwrap_or_else(|| {
                crate::client::request_id_for(&workflow.name, &crate::client::unique_token(&client.nats))
            }),
            workflow,
            dry_run: a.dry_run,
            seed: a.seed,
            groups: a.groups.clone(),
            timeout_ms: 0,
            trace_limit: a.trace_limit,
            keep: a.keep,
        };
        // A request too large to send is refused below with one line; an id is worth printing
        // only for a request that leaves.
        let sendable = <api::Submit as fedvol_proto::Endpoint>::encode_request(&msg).len() <= client.nats.max_payload();
        if a.request_id.is_none() && sendable {
            let id = &msg.request_id;
            eprintln!(
                "request id: {id} (if this submit ends in an error, run it again with --request-id {id}: it is never booked twice)"
            );
        }
        let until = std::time::Instant::now() + std::time::Duration::from_millis(a.wait_ms);
        let reply: SubmitReply = loop {
            let waiting = a.wait && std::time::Instant::now() < until;
            match client.call::<api::Submit>(&msg).await {
                Ok(r) => {
                    let r = as_submit_reply(r);
                    match &r.error {
                        Some(e) if waiting && PASSING.iter().any(|c| e.is(c)) => {
                            eprintln!(
                                "note: {} ({}); asking again with request id {}",
                                e.message, e.code, msg.request_id
                            );
                            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        }
                        _ => break r,
                    }
                }
                Err(ClientError::NoCoordinator { .. }) if waiting => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(e @ ClientError::Timeout { .. }) if waiting => {
                    eprintln!("note: {e}; asking again with request id {}", msg.request_id);
                }
                Err(e) => return fail(&e),
            }
        };
        show_submit(&reply, a.output.output)
    })
}

fn show_submit(reply: &SubmitReply, o: Output) -> u8 {
    match show_stored(reply, o, "submit") {
        Ok(s) => decision_exit(s),
        Err(code) => code,
    }
}

/// Prints the stored decision of `reply` (or its error, prefixed with `what`); returns the
/// decision, or the exit code when there is none, it could not be printed, or the answer
/// carries an error besides the decision (a complete the cluster refused or did not answer,
/// a commit in doubt, a decision that could not be stored): the decision is printed, then the
/// error, and the exit code is 1.
fn show_stored<'r>(reply: &'r SubmitReply, o: Output, what: &str) -> Result<&'r StoredDecision, u8> {
    match (&reply.stored, &reply.error) {
        (Some(s), error) => {
            if !print_doc(o, s, || stored_table(s)) {
                return Err(EXIT_BAD_INPUT);
            }
            match error {
                Some(e) => {
                    eprintln!("error: {what}: {} ({})", e.message, e.code);
                    Err(EXIT_BAD_INPUT)
                }
                None => Ok(s),
            }
        }
        (None, Some(e)) => {
            eprintln!("error: {what}: {} ({})", e.message, e.code);
            Err(EXIT_BAD_INPUT)
        }
        (None, None) => {
            eprintln!("error: {what}: the coordinator answered with neither a decision nor an error");
            Err(EXIT_BAD_INPUT)
        }
    }
}

async fn get(client: &Client, id: &str) -> Result<SubmitReply, ClientError> {
    client
        .call::<api::Get>(&DecisionRef {
            request_id: id.to_string(),
        })
        .await
        .map(as_submit_reply)
}

/// Runs `fedvol decisions ...`.
pub fn decisions(net: &NetArgs, cmd: &DecisionsCmd) -> u8 {
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        match cmd {
            DecisionsCmd::List(o) => match ask::<api::List>(&client, &NoArgs {}, "decisions list").await {
                Ok(r) => {
                    let ok = print_doc(o.output, &r, || {
                        let mut t = new_table(&["REQUEST", "WORKFLOW", "STATE", "CLUSTER", "UPDATED"]);
                        for d in &r.decisions {
                            t.add_row(vec![
                                d.request_id.clone(),
                                fedvol_common::limits::printable(&d.workflow),
                                format!("{:?}", d.state).to_lowercase(),
                                d.chosen_cluster.clone().unwrap_or_else(|| "-".into()),
                                ago(d.updated_ms),
                            ]);
                        }
                        format!("{t}\n")
                    });
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            },
            DecisionsCmd::Show(a) => match get(&client, &a.id).await {
                Ok(r) => {
                    show_stored(&r, a.output.output, &format!("decision {}", a.id)).map_or_else(|c| c, |_| EXIT_OK)
                }
                Err(e) => fail(&e),
            },
            DecisionsCmd::Replay(a) => {
                let q = DecisionRef {
                    request_id: a.id.clone(),
                };
                match ask::<api::Replay>(&client, &q, &format!("replay of {}", a.id)).await {
                    Ok(r) => {
                        let ok = print_doc(a.output.output, &r, || {
                            let mut s = if r.identical {
                                format!("replay of {}: identical\n", a.id)
                            } else {
                                format!("replay of {}: different\n", a.id)
                            };
                            for d in &r.differences {
                                s.push_str(&format!("  - {d}\n"));
                            }
                            s
                        });
                        if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                    }
                    Err(code) => code,
                }
            }
            DecisionsCmd::Watch => watch(&client).await,
        }
    })
}

async fn watch(client: &Client) -> u8 {
    use futures::StreamExt;
    let js = async_nats::jetstream::new(client.nats.clone());
    let kv = match js.get_key_value("fedvol_decisions").await {
        Ok(kv) => kv,
        Err(e) => {
            eprintln!("error: cannot open the decision store (JetStream KV `fedvol_decisions`): {e}");
            return EXIT_BAD_INPUT;
        }
    };
    // The latest revision of every decision first, then every change as it happens.
    let mut w = match kv.watch_with_history(">").await {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cannot watch the decision store: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    while let Some(entry) = w.next().await {
        match entry {
            Ok(e) => match fedvol_proto::decode::<StoredDecision>(&e.value, "stored decision", "client") {
                Ok(s) => println!(
                    "{}  {:<10} {}  {}  -> {}",
                    e.revision,
                    format!("{:?}", s.state).to_lowercase(),
                    e.key,
                    fedvol_common::limits::printable(&s.decision.workflow),
                    s.decision.chosen_cluster.as_deref().unwrap_or("none")
                ),
                Err(err) => println!("{}  {}  (unreadable value: {err})", e.revision, e.key),
            },
            Err(err) => {
                eprintln!("error: watch ended: {err}");
                return EXIT_BAD_INPUT;
            }
        }
    }
    EXIT_OK
}

/// Runs `fedvol why-not`.
pub fn why_not(net: &NetArgs, a: &WhyNotArgs) -> u8 {
    let q = WhyNotQuery {
        request_id: a.id.clone(),
        cluster: a.cluster.clone(),
        zone: a.zone.clone(),
        host: a.host.clone(),
        provisioner: a.provisioner.clone(),
    };
    if q.zone.is_none() && q.host.is_none() && q.provisioner.is_none() {
        eprintln!("error: name what to explain: --zone, --host and/or --provisioner");
        return EXIT_BAD_INPUT;
    }
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        match ask::<api::WhyNot>(&client, &q, &format!("why-not {}", a.id)).await {
            Ok(r) => {
                let ok = print_doc(a.output.output, &r, || {
                    crate::render::why_not::render(&r.summary, &r.blockers)
                });
                if ok { EXIT_OK } else { EXIT_BAD_INPUT }
            }
            Err(code) => code,
        }
    })
}

/// Runs `fedvol complete`.
pub fn complete(net: &NetArgs, a: &IdArgs) -> u8 {
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        let msg = DecisionRef {
            request_id: a.id.clone(),
        };
        match client.call::<api::Complete>(&msg).await.map(as_submit_reply) {
            Ok(r) => show_stored(&r, a.output.output, &format!("complete {}", a.id)).map_or_else(|c| c, |_| EXIT_OK),
            Err(e) => fail(&e),
        }
    })
}

/// Runs `fedvol clusters`.
pub fn clusters(net: &NetArgs, o: &OutputArgs) -> u8 {
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        match ask::<api::Clusters>(&client, &NoArgs {}, "clusters").await {
            Ok(r) => {
                let ok = print_doc(o.output, &r, || {
                    let mut t = new_table(&[
                        "CLUSTER",
                        "ALIVE",
                        "SUSPECT",
                        "LAST SEEN",
                        "INVENTORY",
                        "LOAD",
                        "HOLDS",
                        "REPLICAS",
                    ]);
                    for c in &r.clusters {
                        t.add_row(vec![
                            c.name.clone(),
                            if c.alive { "yes".into() } else { "no".into() },
                            if c.suspect { "yes".into() } else { "no".into() },
                            ago(c.last_seen_ms),
                            c.inventory_version.clone(),
                            format!("{:.2}", c.load),
                            c.holds.to_string(),
                            c.instances.len().to_string(),
                        ]);
                    }
                    let mut text = format!("{t}\n");
                    for c in &r.clusters {
                        if let Some(why) = &c.degraded {
                            let why: String = why.chars().map(|ch| if ch.is_control() { '?' } else { ch }).collect();
                            text.push_str(&format!("{} is degraded: {why}\n", c.name));
                        }
                    }
                    text
                });
                if ok { EXIT_OK } else { EXIT_BAD_INPUT }
            }
            Err(code) => code,
        }
    })
}
