//! The federation commands: `submit`, `decisions {list,show,watch,replay}`, `why-not`,
//! `complete`, `clusters`. Each sends one request to the coordinators and prints the answer
//! (`-o table|json|yaml`). Exit codes (docs/design.md §4): 0 done / a cluster was chosen, 2 nothing
//! fits, 1 bad input or no answer.


use comfy_table::Table;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use fedvol_common::funnel::why_not::Target;
use fedvol_proto::coordinator::{self as api, DecisionRef, SubmitReply, WhyNotQuery};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, NoArgs, now_ms};

use super::args::{IdArgs, OutputArgs};
use super::ask::{as_submit_reply, ask, get, get_whole, resolve_id};
use super::exit::{EXIT_BAD_INPUT, EXIT_OK};
use super::follow::follow_jobs;
use super::net::{NetArgs, block_on};
use super::print::{fail, print_doc, show_stored};
use crate::client::Client;
use crate::render::Output;
use crate::render::stored::{completed_text, job_line};
use crate::render::words::state as state_name;

/// `fedvol decisions ...`.
#[derive(Debug, clap::Subcommand)]
pub enum DecisionsCmd {
    /// Stored decisions, newest first.
    List(ListArgs),
    /// One decision: per-cluster table, then each cluster's failed stages with every reason.
    Show(ShowArgs),
    /// Print the latest state of every decision, then every change as it happens (Ctrl-C to stop).
    Watch(WatchArgs),
    /// Re-run a stored request with its seed and say whether the answer is identical.
    Replay(IdArgs),
}

/// `fedvol decisions list`: filters combine (all must hold).
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only decisions made for this user.
    #[arg(long = "for-user", value_name = "USER")]
    pub for_user: Option<String>,
    /// Only workflows whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub workflow: Option<String>,
    /// Only decisions in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateFilter>,
    /// Only decisions whose chosen cluster is this one (`none` for none chosen).
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// Only decisions changed within this long: `90s`, `15m`, `2h`, `7d`.
    #[arg(long, value_name = "AGE", value_parser = parse_age_ms)]
    pub since: Option<u64>,
    /// Order: newest change first (`updated`), or by `workflow`, `state` or `cluster`.
    #[arg(long, value_enum, default_value_t = SortBy::Updated)]
    pub sort: SortBy,
    /// At most this many lines (after filtering and sorting; 0 = all).
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
    /// Output format (`-o wide`: ids and names in full).
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// The states `fedvol decisions list --state` filters on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StateFilter {
    /// Being planned or committed.
    Planned,
    /// Committed on its cluster.
    Committed,
    /// Ended by `fedvol complete`.
    Completed,
    /// Failed: nothing fits, refused by policy, clusters unavailable, the commit failed or a
    /// job failed (the STATE column says which).
    Failed,
    /// Waiting for capacity (`--wait-for-capacity`), placed by priority then age.
    Queued,
    /// Ended by `fedvol cancel` (its jobs cancelled, then its volumes reclaimed).
    Cancelled,
    /// Kept dry runs (any state).
    DryRun,
}

/// Orders of `fedvol decisions list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortBy {
    /// Newest change first.
    Updated,
    /// By workflow name, then newest first.
    Workflow,
    /// By state, then newest first.
    State,
    /// By chosen cluster, then newest first.
    Cluster,
    /// Queued decisions first, in the order they will be placed (priority, highest first, then
    /// oldest queued first); then the others, newest first.
    Queue,
}

/// Parses an age such as `90s`, `15m`, `2h`, `7d` (humantime's duration syntax) into ms.
///
/// Errors: anything else, in words.
pub fn parse_age_ms(s: &str) -> Result<u64, String> {
    humantime::parse_duration(s.trim())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .map_err(|e| format!("`{s}` is not an age ({e}): expected e.g. 90s, 15m, 2h, 7d"))
}

impl StateFilter {
    /// The stored state this filter keeps; `None` for `dry-run`, which is not a state.
    fn state(self) -> Option<fedvol_proto::decisions::DecisionState> {
        use fedvol_proto::decisions::DecisionState as S;
        match self {
            StateFilter::Planned => Some(S::Planned),
            StateFilter::Committed => Some(S::Committed),
            StateFilter::Completed => Some(S::Completed),
            StateFilter::Failed => Some(S::Failed),
            StateFilter::Queued => Some(S::Queued),
            StateFilter::Cancelled => Some(S::Cancelled),
            StateFilter::DryRun => None,
        }
    }
}

/// The summaries `a` selects, in its order, at most `a.limit` of them.
pub fn select(a: &ListArgs, all: Vec<api::DecisionSummary>, now: u64) -> Vec<api::DecisionSummary> {
    let mut v: Vec<api::DecisionSummary> = all
        .into_iter()
        .filter(|d| a.for_user.as_deref().is_none_or(|u| d.user == u))
        .filter(|d| a.workflow.as_deref().is_none_or(|w| d.workflow.contains(w)))
        .filter(|d| match a.state {
            None => true,
            Some(f) => f.state().map_or(d.dry_run, |s| d.state == s),
        })
        .filter(|d| match a.cluster.as_deref() {
            None => true,
            Some("none") => d.chosen_cluster.is_none(),
            Some(c) => d.chosen_cluster.as_deref() == Some(c),
        })
        .filter(|d| a.since.is_none_or(|s| now.saturating_sub(d.updated_ms) <= s))
        .collect();
    let newest = |x: &api::DecisionSummary, y: &api::DecisionSummary| {
        y.updated_ms
            .cmp(&x.updated_ms)
            .then_with(|| x.request_id.cmp(&y.request_id))
    };
    match a.sort {
        SortBy::Updated => v.sort_by(newest),
        SortBy::Workflow => v.sort_by(|x, y| x.workflow.cmp(&y.workflow).then_with(|| newest(x, y))),
        SortBy::State => v.sort_by(|x, y| state_name(x.state).cmp(state_name(y.state)).then_with(|| newest(x, y))),
        SortBy::Cluster => v.sort_by(|x, y| x.chosen_cluster.cmp(&y.chosen_cluster).then_with(|| newest(x, y))),
        SortBy::Queue => v.sort_by(|x, y| {
            let queued = |d: &api::DecisionSummary| d.state != DecisionState::Queued;
            queued(x)
                .cmp(&queued(y))
                .then_with(|| y.priority.cmp(&x.priority))
                .then_with(|| x.queued_ms.cmp(&y.queued_ms))
                .then_with(|| newest(x, y))
        }),
    }
    if a.limit > 0 {
        v.truncate(a.limit);
    }
    v
}

/// The table of `decisions list`: REQUEST, WORKFLOW, USER, STATE, CLUSTER, UPDATED, fitting the
/// terminal's width ([`crate::render::layout::width`]; 100 columns in a pipe). Request ids are
/// shown whole while the table fits; else as their shortest start no other id of `known` (every
/// stored id) shares ([`crate::render::ids`]), which every command taking an id accepts, with a
/// line under the table saying so; names (workflow, user, cluster) are cut with `…` only when
/// even that does not fit. `wide` shows everything whole, however wide.
pub fn list_table(v: &[api::DecisionSummary], wide: bool, now: u64, known: &[&str]) -> String {
    use crate::render::layout::{truncate, width};
    use crate::render::words::ago;
    let header = ["REQUEST", "WORKFLOW", "USER", "STATE", "CLUSTER", "UPDATED"];
    let ids: Vec<&str> = v.iter().map(|d| d.request_id.as_str()).collect();
    let short = crate::render::ids::unique_prefixes(&ids, known);
    // Ids cut to `id_room` characters, never shorter than their unique start.
    let render = |id_room: Option<usize>, cut_names: bool| {
        let cut = |s: &str, n: usize| if cut_names { truncate(s, n) } else { s.to_string() };
        let mut t = new_table(&header);
        for (i, d) in v.iter().enumerate() {
            let state = match (&d.priority_class, d.state) {
                _ if d.dry_run => format!("{} (dry run)", state_name(d.state)),
                (Some(c), DecisionState::Queued) => format!("queued ({c})"),
                _ => crate::render::words::state_with(d.state, d.failure),
            };
            t.add_row(vec![
                match id_room {
                    None => ids[i].to_string(),
                    Some(n) if short[i].chars().count() >= n => short[i].to_string(),
                    Some(n) => ids[i].chars().take(n).collect(),
                },
                cut(&fedvol_common::limits::printable(&d.workflow), 16),
                cut(if d.user.is_empty() { "-" } else { &d.user }, 10),
                state,
                cut(d.chosen_cluster.as_deref().unwrap_or("-"), 12),
                ago(d.updated_ms, now),
            ]);
        }
        format!("{t}\n")
    };
    let fits = |s: &str| s.lines().all(|l| l.chars().count() <= width());
    let full = render(None, false);
    if wide || fits(&full) {
        return full;
    }
    // The unique starts, widened to use the room the table leaves.
    let longest_short = short.iter().map(|p| p.chars().count()).max().unwrap_or(0);
    let table_width = |t: &str| t.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let shortened = render(Some(longest_short), false);
    let room = width().saturating_sub(table_width(&shortened));
    let text = if fits(&shortened) {
        render(Some(longest_short + room), false)
    } else {
        render(Some(longest_short), true)
    };
    let note = "request ids cut to a unique start: every command takes it (-o wide: whole ids)";
    format!("{text}{}\n", truncate(note, width()))
}

/// `fedvol decisions watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Output format: lines cut to fit 100 columns (`table`), in full (`wide`), or one JSON
    /// object per change (`json`; `yaml` prints the same as JSON lines).
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// `fedvol decisions show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The decision's request id, or a unique start of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Show this cluster's whole answer (every listed rejection) when the decision stores it as
    /// a summary: asked of the cluster's agent, which keeps it 10 minutes after the plan.
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// `fedvol why-not`.
#[derive(Debug, clap::Args)]
pub struct WhyNotArgs {
    /// The decision's request id, or a unique start of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The cluster to ask. Alone, it explains why that cluster lost: what it could not place,
    /// or the cluster-choice step that dropped it.
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
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header.to_vec());
    t
}

fn ago(ms: u64) -> String {
    crate::render::words::ago(ms, now_ms())
}

/// What `decisions show --cluster C` says besides the decision: an error (exit 64, usage) when
/// `C` took no part in it, a note on stderr when its answer is still a summary (its agent keeps
/// the whole answer no longer).
fn whole_note(s: &StoredDecision, id: &str, cluster: &str) -> Result<(), u8> {
    match s.decision.clusters.get(cluster) {
        None => {
            let names: Vec<&str> = s.decision.clusters.keys().map(String::as_str).collect();
            eprintln!(
                "error: cluster `{}` took no part in decision {id} (its clusters: {})",
                fedvol_common::limits::printable(cluster),
                crate::render::outcomes::names(&names, false)
            );
            Err(super::exit::EXIT_USAGE)
        }
        Some(c) if c.summarized => {
            eprintln!(
                "note: cluster {cluster}'s answer is shown as its summary: its agent keeps no whole answer for {id} any more (it keeps them 10 minutes after the plan, and none across a restart); `fedvol why-not {id} --cluster {cluster} --host H` asks the cluster again"
            );
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

/// Runs `fedvol decisions ...`.
pub fn decisions(cmd: &DecisionsCmd) -> u8 {
    let net = match cmd {
        DecisionsCmd::List(a) => &a.net,
        DecisionsCmd::Show(a) => &a.net,
        DecisionsCmd::Replay(a) => &a.net,
        DecisionsCmd::Watch(a) => &a.net,
    };
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        match cmd {
            DecisionsCmd::List(la) => match ask::<api::List>(&client, &NoArgs {}, "decisions list").await {
                Ok(r) => {
                    let now = now_ms();
                    let all_ids: Vec<String> = r.decisions.iter().map(|d| d.request_id.clone()).collect();
                    let r = api::ListReply {
                        decisions: select(la, r.decisions, now),
                    };
                    let wide = la.output.output == Output::Wide;
                    let ok = print_doc(la.output.output, &r, || {
                        if r.decisions.is_empty() {
                            "no decisions match\n".to_string()
                        } else {
                            let known: Vec<&str> = all_ids.iter().map(String::as_str).collect();
                            list_table(&r.decisions, wide, now, &known)
                        }
                    });
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            },
            DecisionsCmd::Show(a) => {
                let id = match resolve_id(&client, &a.id).await {
                    Ok(id) => id,
                    Err(code) => return code,
                };
                match get_whole(&client, &id, a.cluster.as_deref()).await {
                    Ok(r) => {
                        if let (Some(c), Some(s)) = (&a.cluster, &r.stored)
                            && let Err(code) = whole_note(s, &id, c)
                        {
                            return code;
                        }
                        show_stored(&r, a.output.output, &format!("decision {id}")).map_or_else(|c| c, |_| EXIT_OK)
                    }
                    Err(e) => fail(&e),
                }
            }
            DecisionsCmd::Replay(a) => {
                let id = match resolve_id(&client, &a.id).await {
                    Ok(id) => id,
                    Err(code) => return code,
                };
                let q = DecisionRef {
                    request_id: id.clone(),
                    cancel: false,
                    whole: None,
                };
                match ask::<api::Replay>(&client, &q, &format!("replay of {id}")).await {
                    Ok(r) => {
                        let ok = print_doc(a.output.output, &r, || {
                            let mut s = if r.identical {
                                format!("replay of {id}: identical\n")
                            } else {
                                format!("replay of {id}: different\n")
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
            DecisionsCmd::Watch(w) => watch(&client, w.output.output).await,
        }
    })
}

async fn watch(client: &Client, o: Output) -> u8 {
    use crate::feed::{DecisionFeed, FeedEvent};
    // The latest revision of every decision first, then every change as it happens, asked of
    // the coordinators (`changes`). The first answer must come; later failures (a coordinator
    // or NATS restarting) are said once and asked again.
    // A coordinator too busy to take the watch (`overloaded`) is ridden out: asked again after
    // a growing pause, saying so.
    let mut feed = DecisionFeed::new();
    let mut backoff = crate::feed::Backoff::new();
    loop {
        match feed.fill(client).await {
            Ok(()) => break,
            Err(e) if e.is_overloaded() => {
                let pause = backoff.next_pause();
                eprint!("{}", busy(&e, pause));
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        }
    }
    backoff.reset();
    let mut failing = false;
    // The state each decision was last seen in, to say what changed.
    let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let words = |s: &api::DecisionSummary| crate::render::words::state_with(s.state, s.failure);
    let table_view = matches!(o, Output::Table | Output::Wide);
    let mut page = WatchPage::default();
    loop {
        let event = feed.next(client).await;
        if event.is_ok() {
            failing = false;
            backoff.reset();
        }
        match event {
            Ok(FeedEvent::Put {
                key, summary, clusters, ..
            }) => {
                let at = crate::render::words::utc(summary.updated_ms);
                let state = words(&summary);
                let change = match seen.insert(key.clone(), state.clone()) {
                    None => "new".to_string(),
                    Some(before) if before == state => "updated".to_string(),
                    Some(before) => format!("{before} → {state}"),
                };
                let workflow = fedvol_common::limits::printable(&summary.workflow);
                let cluster = fedvol_common::limits::printable(summary.chosen_cluster.as_deref().unwrap_or("none"));
                let cluster = cluster.as_str();
                let dry = if summary.dry_run { " (dry run)" } else { "" };
                let why = watch_reason(&summary, &clusters);
                match o {
                    Output::Json | Output::Yaml => println!(
                        "{}",
                        serde_json::json!({
                            "time": at, "request_id": key, "workflow": workflow, "state": summary.state.as_str(),
                            "failure": summary.failure, "dry_run": summary.dry_run,
                            "chosen_cluster": summary.chosen_cluster,
                            "change": change, "jobs": summary.jobs, "reason": why,
                        })
                    ),
                    Output::Wide => println!("{at}  {key}  {workflow}  {state}{dry}  cluster {cluster}  ({change})"),
                    // Aligned columns: the time of day (the date on a line of its own when it
                    // changes), what changed, the cluster, then the request id, whole.
                    Output::Table => {
                        let what = match change.as_str() {
                            "new" | "updated" => format!("{change} {state}"),
                            _ => change.clone(),
                        };
                        let line = WatchLine {
                            time: at.split_once('T').map_or(at.as_str(), |(_, t)| t.trim_end_matches('Z')),
                            what: &what,
                            cluster,
                            id: &key,
                            workflow: &workflow,
                            dry_run: summary.dry_run,
                        };
                        print!("{}", page.heading(&at));
                        println!("{}", line.render(crate::render::layout::width()));
                    }
                }
                if table_view && let Some(why) = &why {
                    print!(
                        "{}",
                        crate::render::layout::para(
                            "          why: ",
                            "               ",
                            &fedvol_common::limits::printable(why)
                        )
                    );
                }
                // The jobs a cluster runs for it: each with its Slurm id, state, exit code and
                // times, indented under the decision's line.
                if table_view {
                    for j in &summary.jobs {
                        print!(
                            "{}",
                            crate::render::layout::para("          ", "            ", &job_line(j))
                        );
                    }
                }
            }
            Ok(FeedEvent::Unreadable { key, error, .. }) => println!("{key}  (unreadable value: {error})"),
            Ok(FeedEvent::Removed { key, .. }) => {
                let at = crate::render::words::utc(now_ms());
                match o {
                    Output::Table => {
                        let time = at.split_once('T').map_or(at.as_str(), |(_, t)| t.trim_end_matches('Z'));
                        print!("{}", page.heading(&at));
                        println!("{time}  {:<WATCH_WHAT$}  {:<WATCH_CLUSTER$}  {key}", "removed", "-");
                    }
                    _ => println!("{at}  {key}  removed"),
                }
                seen.remove(&key);
            }
            Err(e) if e.is_overloaded() => {
                let pause = backoff.next_pause();
                eprint!("{}", busy(&e, pause));
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                if !failing {
                    eprintln!("note: {e}; asking again every second");
                    failing = true;
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}

/// What a watch refused `overloaded` tells its user on stderr: the coordinator's reason
/// (without the failure's framing) and when it asks again, wrapped to the terminal's width.
fn busy(e: &crate::feed::FeedError, pause: std::time::Duration) -> String {
    let why = match e {
        crate::feed::FeedError::Refused { message, .. } => format!("the coordinator is busy ({message})"),
        other => other.to_string(),
    };
    crate::render::layout::para(
        "note: ",
        "  ",
        &format!("{why}; asking again in {:.1}s", pause.as_secs_f64()),
    )
}

/// Why a decision shown by `decisions watch` failed or waits: its summary's `reason` (failed
/// jobs, a refusal, a failed commit), else, for a failed decision no cluster took, what its
/// clusters answered; `None` for any other.
fn watch_reason(s: &api::DecisionSummary, clusters: &api::ClusterCounts) -> Option<String> {
    if let Some(r) = &s.reason {
        return Some(r.clone());
    }
    if s.state != DecisionState::Failed || s.chosen_cluster.is_some() {
        return None;
    }
    let silent = clusters.asked.saturating_sub(clusters.answered);
    let mut text = format!(
        "no cluster can place it: {} of {} answered, {} could place it",
        clusters.answered, clusters.asked, clusters.feasible
    );
    if silent > 0 {
        text.push_str(&format!(
            "; {silent} did not answer (`fedvol decisions show ID` says which)"
        ));
    }
    Some(text)
}

/// Width of `decisions watch`'s CHANGE column (`committed → completed` and its like).
const WATCH_WHAT: usize = 22;

/// Width of `decisions watch`'s CLUSTER column; a longer name is cut with `…` (`-o wide` has it
/// whole).
const WATCH_CLUSTER: usize = 12;

/// The lines `decisions watch` prints above its rows: the column names once, then the date
/// (UTC) whenever it differs from the row before's.
#[derive(Default)]
struct WatchPage {
    started: bool,
    date: String,
}

impl WatchPage {
    /// What comes before a row stamped `at` (RFC 3339, UTC): nothing, or the header and/or the
    /// date line.
    fn heading(&mut self, at: &str) -> String {
        let mut out = String::new();
        if !self.started {
            self.started = true;
            out.push_str(&format!(
                "{:<8}  {:<WATCH_WHAT$}  {:<WATCH_CLUSTER$}  REQUEST ID\n",
                "TIME", "CHANGE", "CLUSTER"
            ));
        }
        let date = at.split_once('T').map_or("", |(d, _)| d);
        if date != self.date {
            self.date = date.to_string();
            out.push_str(&format!("{date} (UTC)\n"));
        }
        out
    }
}

/// One row of `fedvol decisions watch` (table view).
struct WatchLine<'a> {
    /// The time of day, `HH:MM:SS` (UTC).
    time: &'a str,
    what: &'a str,
    cluster: &'a str,
    id: &'a str,
    workflow: &'a str,
    dry_run: bool,
}

impl WatchLine<'_> {
    /// The row: time, what changed and cluster in columns of fixed width (cut with `…`), then
    /// the request id whole (ids stay copyable and unambiguous whatever is stored later), then
    /// `(dry run)` and, when the id does not start with it, the workflow's name, cut to fit
    /// `width` (left out where not even 8 characters of it fit).
    fn render(&self, width: usize) -> String {
        use crate::render::layout::truncate;
        let mut line = format!(
            "{:<8}  {:<WATCH_WHAT$}  {:<WATCH_CLUSTER$}  {}",
            self.time,
            truncate(self.what, WATCH_WHAT),
            truncate(self.cluster, WATCH_CLUSTER),
            self.id
        );
        if self.dry_run {
            line.push_str("  (dry run)");
        }
        // Request ids made by fedvol start with the workflow's name; a chosen one may not.
        let stem = fedvol_proto::coordinator::request_id_for(self.workflow, "");
        if !self.id.starts_with(stem.trim_end_matches('-')) || stem.is_empty() {
            // Only where it fits (at least 8 characters of it, or all of a shorter name): the
            // id is never pushed past the width for it (`-o wide` has every name).
            let room = width.saturating_sub(line.chars().count() + "  workflow ".len());
            if room >= self.workflow.chars().count().min(8) {
                line.push_str(&format!("  workflow {}", truncate(self.workflow, room)));
            }
        }
        line
    }
}

#[cfg(test)]
mod watch_tests {
    use super::{WatchLine, WatchPage};

    /// Rows of `decisions watch` line up whatever their ids and names, and every id is shown
    /// whole: a start that is unique now may be shared by a later id.
    #[test]
    fn watch_rows_are_aligned_and_keep_every_id_whole() {
        let row = |what: &'static str, cluster: &'static str, id: &'static str, workflow: &'static str| WatchLine {
            time: "23:00:00",
            what,
            cluster,
            id,
            workflow,
            dry_run: false,
        };
        let rows = [
            row(
                "new committed",
                "cluster-a",
                "gpu-soft-constraints-vsmvA1b2c3d4e5f6g7h8",
                "gpu-soft-constraints",
            ),
            row(
                "committed → completed",
                "cluster-b",
                "mpi-spread-ppQ8KANJ8stpBDwKaaaaa",
                "mpi-spread",
            ),
            row("new failed", "none", "x-1", "train"),
            row(
                "new committed",
                "a-cluster-with-a-long-name",
                "scratch-fast-Q",
                "scratch-fast",
            ),
        ];
        let lines: Vec<String> = rows.iter().map(|r| r.render(100)).collect();
        let at = |l: &str, id: &str| l.find(id).map(|i| l[..i].chars().count());
        let col = at(&lines[0], rows[0].id).unwrap();
        for (l, r) in lines.iter().zip(&rows) {
            assert_eq!(
                at(l, r.id),
                Some(col),
                "the id column is aligned:\n{}",
                lines.join("\n")
            );
            assert!(l.chars().count() <= 100, "{l}");
        }
        assert!(
            lines[1].contains("committed → completed") && lines[1].contains(" cluster-b "),
            "{}",
            lines[1]
        );
        assert!(lines[3].contains("a-cluster-w…"), "{}", lines[3]);
        // An id that does not name its workflow is followed by the workflow's name, where it fits.
        assert!(lines[2].ends_with("x-1  workflow train"), "{}", lines[2]);
        let long = row(
            "new committed",
            "big",
            "a-rather-long-request-id-for-the-prefix-test-0001",
            "wf",
        )
        .render(100);
        assert!(long.ends_with("-0001"), "{long}");
        assert!(!lines[0].contains("workflow gpu"), "{}", lines[0]);
        let mut page = WatchPage::default();
        let first = page.heading("2026-11-25T23:00:00Z");
        assert!(
            first.starts_with("TIME      CHANGE") && first.ends_with("2026-11-25 (UTC)\n"),
            "{first}"
        );
        assert_eq!(page.heading("2026-11-25T23:59:59Z"), "");
        assert_eq!(page.heading("2026-11-26T00:00:01Z"), "2026-11-26 (UTC)\n");
        let header = first.lines().next().unwrap();
        assert_eq!(header.find("REQUEST ID"), Some(col), "{header}\n{}", lines[0]);
    }
}

/// Runs `fedvol why-not`.
pub fn why_not(a: &WhyNotArgs) -> u8 {
    let net = &a.net;
    let mut q = WhyNotQuery {
        request_id: a.id.clone(),
        cluster: a.cluster.clone(),
        target: Target {
            zone: a.zone.clone(),
            host: a.host.clone(),
            provisioner: a.provisioner.clone(),
        },
    };
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        match resolve_id(&client, &a.id).await {
            Ok(id) => q.request_id = id,
            Err(code) => return code,
        }
        match ask::<api::WhyNot>(&client, &q, &format!("why-not {}", q.request_id)).await {
            Ok(r) => {
                let ok = print_doc(a.output.output, &r, || crate::render::why_not::render_reply(&r));
                if ok { EXIT_OK } else { EXIT_BAD_INPUT }
            }
            Err(code) => code,
        }
    })
}

/// Runs `fedvol complete` (`cancel` false) or `fedvol cancel` (true: the workflow's batch jobs
/// are cancelled on its cluster first, then it is completed).
pub fn complete(a: &IdArgs, cancel: bool) -> u8 {
    let net = &a.net;
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        let id = match resolve_id(&client, &a.id).await {
            Ok(id) => id,
            Err(code) => return code,
        };
        let msg = DecisionRef {
            request_id: id.clone(),
            cancel,
            whole: None,
        };
        let answer = client.call::<api::Complete>(&msg).await.map(as_submit_reply);
        let not_owner = matches!(&answer, Ok(SubmitReply { error: Some(e), .. }) if e.code == Code::NotOwner);
        let hint = if not_owner {
            owner_hint(&client, &id, if cancel { "cancel" } else { "complete" }).await
        } else {
            String::new()
        };
        // Completed (or found failed): no plain submit is to resume it.
        if let Ok(r) = &answer
            && r.stored.as_ref().is_some_and(|s| {
                matches!(
                    s.state,
                    DecisionState::Completed | DecisionState::Failed | DecisionState::Cancelled
                )
            })
            && let Err(e) = super::pending::forget_request(&id)
        {
            eprintln!("note: {e}");
        }
        let table_view = matches!(a.output.output, Output::Table | Output::Wide);
        match answer {
            // Cancelled, but Slurm still ends the jobs (COMPLETING): the volumes are reclaimed
            // once they ended; follow the decision to its end.
            Ok(SubmitReply {
                error: Some(e),
                stored: Some(s),
                ..
            }) if cancel && table_view && e.code == fedvol_proto::Code::JobsRunning => {
                eprint!(
                    "{}",
                    crate::render::layout::para("note: ", "  ", &fedvol_common::limits::printable(&e.message))
                );
                follow_jobs(&client, &id, s, true).await
            }
            // Refused (a failed or queued decision, one already completed elsewhere...): the
            // error, briefly; `decisions show` has the decision.
            Ok(SubmitReply {
                error: Some(e), stored, ..
            }) if table_view => {
                let state = stored
                    .as_ref()
                    .map(|s| format!(" (the decision is {})", crate::render::words::state(s.state)))
                    .unwrap_or_default();
                eprint!(
                    "{}",
                    crate::render::layout::para(
                        "error: ",
                        "  ",
                        &format!(
                            "complete {id}: {} ({}){state}; fedvol decisions show {id} prints it",
                            fedvol_common::limits::printable(&e.message),
                            e.code
                        )
                    )
                );
                eprint!("{hint}");
                EXIT_BAD_INPUT
            }
            // The table view says what completing did; `decisions show` has the decision.
            Ok(r) if table_view && r.error.is_none() => match &r.stored {
                Some(s) => {
                    print!("{}", completed_text(&id, s));
                    EXIT_OK
                }
                None => show_stored(&r, a.output.output, &format!("complete {id}")).map_or_else(|c| c, |_| EXIT_OK),
            },
            Ok(r) => {
                let code = show_stored(&r, a.output.output, &format!("complete {id}")).map_or_else(|c| c, |_| EXIT_OK);
                eprint!("{hint}");
                code
            }
            Err(e) => fail(&e),
        }
    })
}

/// The line after a `not_owner` refusal of `fedvol <verb> ID`: the command that runs as the
/// decision's owner (`hint: run it as its owner: fedvol complete -u alice ID`), the owner read
/// from the decision (anyone may read one); a generic `-u OWNER` when it cannot be.
async fn owner_hint(client: &Client, id: &str, verb: &str) -> String {
    let owner = match get(client, id).await {
        Ok(SubmitReply { stored: Some(s), .. }) if !s.request.user.is_empty() => Some(s.request.user),
        _ => None,
    };
    // The command stays on one line to be copied (the refusal above names the owner).
    let text = match owner {
        Some(u) => format!(
            "run it as its owner: fedvol {verb} -u {} {id}",
            fedvol_common::limits::printable(&u)
        ),
        None => format!("run it as the user who submitted it: fedvol {verb} -u OWNER {id}"),
    };
    crate::render::layout::para("hint: ", "  ", &text)
}

/// `fedvol clusters [show C]`.
#[derive(Debug, clap::Args)]
pub struct ClustersArgs {
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Without a subcommand: every cluster in one table.
    #[command(subcommand)]
    pub cmd: Option<ClustersCmd>,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// `fedvol clusters` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClustersCmd {
    /// One cluster in detail: state, provisioners with status and access policies, zones with
    /// priority, placement policy and free capacity, inventory version.
    Show(ClusterShowArgs),
}

/// `fedvol clusters show C`.
#[derive(Debug, clap::Args)]
pub struct ClusterShowArgs {
    /// The cluster.
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `fedvol clusters`.
pub fn clusters(a: &ClustersArgs) -> u8 {
    let (net, o) = (&a.net, &a.output);
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        if let Some(ClustersCmd::Show(s)) = &a.cmd {
            let q = api::ClusterRef {
                cluster: s.cluster.clone(),
            };
            return match ask::<api::Cluster>(&client, &q, &format!("cluster {}", s.cluster)).await {
                Ok(r) => {
                    let ok = print_doc(s.output.output, &r, || crate::render::cluster::render(&r, now_ms()));
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            };
        }
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
                            match (c.alive, c.restoring) {
                                (true, true) => "restoring".into(),
                                (true, false) => "yes".into(),
                                (false, _) => "no".into(),
                            },
                            if c.suspect { "yes".into() } else { "no".into() },
                            ago(c.last_seen_ms),
                            c.inventory_version.clone(),
                            format!("{:.2}", c.load),
                            c.holds.to_string(),
                            c.instances.len().to_string(),
                        ]);
                    }
                    let mut text = format!("{t}\n");
                    for c in r.clusters.iter().filter(|c| c.alive && c.restoring) {
                        text.push_str(&format!(
                            "{} is restoring: its agent started on a fresh state and admits no new work until the coordinators restored the commits they stored for it (a submit waits for it within its deadline)\n",
                            c.name
                        ));
                    }
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

impl crate::commands::Run for DecisionsCmd {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(match self {
            DecisionsCmd::List(a) => &mut a.net,
            DecisionsCmd::Show(a) => &mut a.net,
            DecisionsCmd::Replay(a) => &mut a.net,
            DecisionsCmd::Watch(a) => &mut a.net,
        })
    }

    fn run(self) -> u8 {
        decisions(&self)
    }
}

impl crate::commands::Run for WhyNotArgs {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        why_not(&self)
    }
}

/// `fedvol complete`.
#[derive(Debug, clap::Args)]
pub struct Complete {
    /// The decision.
    #[command(flatten)]
    pub id: IdArgs,
}

impl crate::commands::Run for Complete {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.id.net)
    }

    fn run(self) -> u8 {
        complete(&self.id, false)
    }
}

/// `fedvol cancel`.
#[derive(Debug, clap::Args)]
pub struct Cancel {
    /// The decision.
    #[command(flatten)]
    pub id: IdArgs,
}

impl crate::commands::Run for Cancel {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.id.net)
    }

    fn run(self) -> u8 {
        complete(&self.id, true)
    }
}

impl crate::commands::Run for ClustersArgs {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        clusters(&self)
    }
}
