//! `fedvol decisions list`: the stored decisions, newest first, filtered (user, workflow,
//! state, cluster, age) and sorted; the table shows request ids whole while it fits, else by
//! their shortest unique start.

use fedvol_proto::coordinator::{self as api};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::{NoArgs, now_ms};

use crate::cli::args::OutputArgs;
use crate::cli::ask::{ask, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::net::NetArgs;
use crate::cli::print::print_doc;
use crate::commands::{Leading, Run};
use crate::render::Output;
use crate::render::layout::{bordered, truncate, width};
use crate::render::words::{ago, listed_state, state as state_name};

/// `fedvol decisions list`: filters combine (all must hold).
#[derive(Debug, clap::Args)]
pub struct List {
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
pub fn select(a: &List, all: Vec<api::DecisionSummary>, now: u64) -> Vec<api::DecisionSummary> {
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
    let header = ["REQUEST", "WORKFLOW", "USER", "STATE", "CLUSTER", "UPDATED"];
    let ids: Vec<&str> = v.iter().map(|d| d.request_id.as_str()).collect();
    let short = crate::render::ids::unique_prefixes(&ids, known);
    // Ids cut to `id_room` characters, never shorter than their unique start.
    let render = |id_room: Option<usize>, cut_names: bool| {
        let cut = |s: &str, n: usize| if cut_names { truncate(s, n) } else { s.to_string() };
        let mut t = bordered(&header);
        for (i, d) in v.iter().enumerate() {
            let state = match (&d.priority_class, d.state) {
                _ if d.dry_run => format!("{} (dry run)", state_name(d.state)),
                (Some(c), DecisionState::Queued) => format!("queued ({c})"),
                _ => listed_state(d),
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

impl Run for List {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        let la = &self;
        with_client(&self.net, async |client| {
            match ask::<api::List>(client, &NoArgs {}, "decisions list").await {
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
            }
        })
    }
}
