//! The decision page (`/decisions/<id>`): what was decided, the per-cluster table (answer
//! status, feasibility, chosen provisioner/volume and zone/host, and why the cluster was not
//! chosen), the funnel of every cluster as a picture ([`super::funnel`]), the cluster choice
//! rule by rule, the commit attempts and the jobs Slurm runs for it.

use fedvol_common::decision::Decision;
use fedvol_proto::decisions::StoredDecision;
use maud::{Markup, html};

use super::{Kind, badge, funnel, state_badge, when};
use crate::render::outcomes::dropped_by;
use crate::render::table::{job_lines, messages, volume_lines};

/// Why cluster `name` of `d` was not chosen: the choice step that dropped it and its reasons,
/// else its error, else nothing (it was chosen, or the choice never ran).
fn why_lost(d: &Decision, name: &str) -> Markup {
    let c = d.clusters.get(name);
    html! {
        @if d.chosen_cluster.as_deref() == Some(name) {
            (badge("chosen", Kind::Ok))
        } @else if let Some((step, r)) = dropped_by(d, name) {
            span.mono { (step.rule) } ": " (reasons(&r.reasons))
        } @else if let Some(e) = c.and_then(|c| c.error.as_ref()) {
            (e.message) " (" (e.code) ")"
        } @else {
            span.muted { "-" }
        }
    }
}

/// Reasons longer than this many characters are shown as their codes, the text on demand.
const SHORT: usize = 120;

/// The distinct reason codes of `reasons`, in order, joined by `, `.
fn codes(reasons: &[fedvol_common::decision::Reason]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for r in reasons {
        if !seen.contains(&r.code.as_str()) {
            seen.push(&r.code);
        }
    }
    seen.join(", ")
}

/// Every reason's message; when they are long, their codes with the messages on demand.
fn reasons(reasons: &[fedvol_common::decision::Reason]) -> Markup {
    let text = messages(reasons);
    html! {
        @if text.chars().count() <= SHORT {
            (text)
        } @else {
            (codes(reasons))
            details.why { summary { "why" } (text) }
        }
    }
}

fn lines(v: Vec<String>) -> Markup {
    html! {
        @if v.is_empty() { span.muted { "-" } }
        @else { ul.plain { @for l in v { li.mono { (l) } } } }
    }
}

fn clusters_table(d: &Decision) -> Markup {
    html! {
        table #clusters {
            thead { tr {
                th { "Cluster" } th { "Answer" } th { "Feasible" }
                th { "Volumes (provisioner/volume)" } th { "Jobs (zone/host)" }
                th.num { "Load" } th.num { "Elapsed" } th { "Why not chosen" }
            } }
            tbody {
                @for (name, c) in &d.clusters {
                    tr data-cluster=(name) {
                        td { strong { (name) } }
                        td { (funnel::status_badge(c.status)) }
                        td { @if c.feasible { "yes" } @else { "no" } }
                        td { (lines(volume_lines(c, d.chosen_cluster.as_deref() == Some(name.as_str())))) }
                        td { (lines(job_lines(c))) }
                        td.num { (format!("{:.2}", c.load)) }
                        td.num { (format!("{:.1} ms", c.elapsed_ms)) }
                        td { (why_lost(d, name)) }
                    }
                }
            }
        }
    }
}

fn choice(d: &Decision) -> Markup {
    html! {
        @if d.choice.is_empty() {
            p.muted { "No cluster choice was made." }
        } @else {
            ol.steps #choice {
                @for step in &d.choice {
                    li data-rule=(step.rule) {
                        strong.mono { (step.rule) } " kept "
                        @if step.kept.is_empty() { span.muted { "none" } }
                        @for (i, k) in step.kept.iter().enumerate() {
                            @if i > 0 { ", " }
                            (badge(k, Kind::Info))
                        }
                        @if !step.dropped.is_empty() {
                            ul {
                                @for r in &step.dropped {
                                    li { "dropped " strong { (r.candidate) } ": " (reasons(&r.reasons)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn attempts(s: &StoredDecision) -> Markup {
    html! {
        @if !s.attempts.is_empty() {
            h2 { "Commit attempts" }
            table {
                thead { tr { th { "Cluster" } th.num { "Attempt" } th { "Outcome" } th { "Volumes" } } }
                tbody {
                    @for a in &s.attempts {
                        tr {
                            td { (fedvol_common::limits::printable(&a.cluster)) }
                            td.num { (a.attempt) }
                            td {
                                @if a.pending { (badge("in doubt", Kind::Warn)) " sent, outcome not recorded" }
                                @else if a.ok { (badge("committed", Kind::Ok)) }
                                @else { (badge("failed", Kind::Bad)) }
                                @if let Some(e) = &a.error { " " (e.message) " (" (e.code) ")" }
                            }
                            td.mono {
                                @for v in &a.volumes { div { (v.volume) " " (v.outcome) } }
                            }
                        }
                    }
                }
            }
        }
        @if !s.jobs().is_empty() {
            h2 { "Jobs" }
            p.note { "Run by Slurm on the chosen cluster; states as its agent last read them." }
            table #jobs {
                thead { tr { th { "Job" } th { "Slurm job" } th { "State" } th.num { "Exit code" } th { "Started (UTC)" } th { "Ended (UTC)" } th { "Reason" } th { "Runs as" } th { "Output" } } }
                tbody {
                    @for j in s.jobs() {
                        tr {
                            td { (fedvol_common::limits::printable(&j.job)) }
                            td.mono { (j.id) }
                            td {
                                @match j.state {
                                    fedvol_proto::batch::JobState::Completed => (badge("completed", Kind::Ok)),
                                    fedvol_proto::batch::JobState::Pending | fedvol_proto::batch::JobState::Running => (badge(j.state.as_str(), Kind::Warn)),
                                    _ => (badge(j.state.as_str(), Kind::Bad)),
                                }
                            }
                            td.num { @if let Some(c) = j.exit_code { (c) } }
                            td { @if let Some(t) = j.started_ms { (crate::render::words::utc(t)) } }
                            td { @if let Some(t) = j.ended_ms { (crate::render::words::utc(t)) } }
                            td { @if let Some(r) = &j.reason { (fedvol_common::limits::printable(r)) } }
                            td { @if let Some(u) = &j.user { (fedvol_common::limits::printable(u)) } }
                            td.mono { @if let Some(o) = &j.output { (fedvol_common::limits::printable(o)) } }
                        }
                    }
                }
            }
        }
        @if let Some(c) = &s.completion {
            p { "Completed: "
                @if c.volumes.is_empty() { "nothing to reclaim" }
                @for v in &c.volumes { span.mono { (v.volume) " " (v.outcome) } " " }
            }
        }
    }
}

/// Every quota that applies to the request: use before it, its request, the limit.
fn quotas(d: &Decision) -> Markup {
    html! {
        table #quotas {
            thead { tr { th { "Quota" } th { "Resource" } th.num { "Used" } th.num { "Requested" } th.num { "Limit" } th { "Verdict" } } }
            tbody {
                @for c in &d.quota {
                    tr {
                        td { (c.scope.as_str()) " " (c.name) }
                        td { (c.resource.as_str()) }
                        td.num { (c.resource.show(c.used)) }
                        td.num { (c.resource.show(c.requested)) }
                        td.num { (c.resource.show(c.limit)) }
                        td { @if c.exceeded { (badge("exceeded", Kind::Bad)) } @else { (badge("ok", Kind::Ok)) } }
                    }
                }
            }
        }
    }
}

/// The decision page's body for the decision stored under `key`; `problem` is an error the
/// coordinator returned besides it (e.g. a commit in doubt).
pub fn body(key: &str, s: &StoredDecision, problem: Option<&str>) -> Markup {
    body_with(key, s, problem, None)
}

/// [`body`], after the cluster `whole` was asked for its whole answer (`?whole=`).
pub fn body_with(key: &str, s: &StoredDecision, problem: Option<&str>, whole: Option<&str>) -> Markup {
    let d = &s.decision;
    let commit_failed = d
        .choice
        .iter()
        .find(|st| st.rule == fedvol_common::choice::rules::COMMIT_FAILED);
    html! {
        p { a href="/decisions" { "← Decisions" } }
        h1 { "Decision " span.mono { (key) } }
        @if let Some(p) = problem { p.alert { (p) } }
        dl.facts {
            dt { "Workflow" } dd #workflow { strong { (fedvol_common::limits::printable(&d.workflow)) } }
            dt { "State" } dd {
                (state_badge(s.state))
                @if let Some(f) = s.failure() { " " (super::failure_badge(f)) }
                @if s.dry_run { " " (badge("dry run", Kind::Info)) }
            }
            dt { "Chosen cluster" } dd #chosen {
                @match &d.chosen_cluster {
                    Some(c) => strong { (c) },
                    None if d.refused.is_some() => span { "none" },
                    None if commit_failed.is_some() => span { "none (a cluster was feasible, but its commit failed; no volume was created)" },
                    None => span { "none (no cluster can place this workflow)" },
                }
            }
            // Why it failed, in full, where the eye lands first (not behind a toggle).
            @if let (None, Some(step)) = (&d.chosen_cluster, commit_failed) {
                dt { "Failed because" }
                dd #failed-because {
                    @for r in &step.dropped {
                        div { "commit on " strong { (r.candidate) } ": " (messages(&r.reasons)) }
                    }
                }
            }
            @if let Some(f) = &s.run_failure {
                dt { "Failed because" }
                dd #run-failure { (badge("failed", Kind::Bad)) " " (fedvol_common::limits::printable(f)) }
            }
            @if let Some(c) = &s.completing {
                dt { "Completing" }
                dd #completing {
                    (badge("unanswered", Kind::Warn)) " "
                    (if c.cancel { "cancel" } else { "complete" }) " asked " (crate::render::words::utc(c.since_ms)) "; "
                    (fedvol_common::limits::printable(d.chosen_cluster.as_deref().unwrap_or("its cluster")))
                    " has not answered it yet, the coordinators keep sending it"
                }
            }
            @if let Some(r) = &d.refused {
                dt {
                    @if s.state == fedvol_proto::decisions::DecisionState::Queued { "Waiting" }
                    @else if r.code == fedvol_proto::Code::ClustersUnavailable.as_str() { "Not placed now" }
                    @else if r.code == fedvol_proto::Code::ClustersDrained.as_str() { "Not placed: drained" }
                    @else { "Refused" }
                }
                dd #refused { (r.message) " " span.mono { "(" (r.code) ")" } }
            }
            @if let Some(c) = &s.priority_class {
                dt { "Priority" } dd { (c) " (" (s.priority) ")" }
            }
            dt { "User" } dd { (s.request.user) }
            dt { "Groups" } dd { @if s.request.groups.is_empty() { span.muted { "-" } } @else { (s.request.groups.join(", ")) } }
            dt { "Seed" } dd.mono { (d.seed) }
            dt { "Updated (UTC)" } dd { (when(s.updated_ms)) }
            dt { "Trace limit" } dd { @if s.request.trace_limit == 0 { "all" } @else { (s.request.trace_limit) " per stage" } }
        }
        @if !d.quota.is_empty() {
            h2 { "Quotas" }
            (quotas(d))
        }
        h2 { "Clusters" }
        (clusters_table(d))
        h2 { "Funnel" }
        p.note.legend {
            "Each bar is one stage for one volume or job: its length is the candidates the stage considered (relative to the widest stage of that cluster),"
            span style="background:var(--ok)" {} "passed"
            span style="background:#e6a4a2" {} "rejected"
            ". Open “rejected” for every candidate's reasons."
        }
        div.cards #funnel {
            @for (name, c) in &d.clusters {
                (funnel::cluster(name, c, d.chosen_cluster.as_deref() == Some(name), whole == Some(name.as_str())))
            }
        }
        h2 { "Cluster choice" }
        (choice(d))
        (attempts(s))
    }
}
