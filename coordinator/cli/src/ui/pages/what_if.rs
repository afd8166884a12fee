//! The what-if page (`/what-if`): the coordinators' `what_if` operation (as `fedvol what-if`
//! prints it, docs/design.md §2.7) for the clusters drained or removed that the form names:
//! the counts, per cluster with the capacity the moving work needs, per project, and each
//! changed decision with what it was and what it would be. Without a change it is the
//! baseline. Inventory changes need files: `fedvol what-if --inventory`, `--add-cluster`.

use fedvol_common::whatif::{DecisionWhatIf, Outcome, Transition};
use fedvol_proto::coordinator::WhatIfReply;
use maud::{Markup, html};

use super::{Kind, badge};

/// The page's form: clusters to drain and to remove, comma-separated, and how far back.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct Form {
    /// Clusters to drain, comma-separated.
    #[serde(default)]
    pub drain: Option<String>,
    /// Clusters to remove, comma-separated.
    #[serde(default)]
    pub remove: Option<String>,
    /// How far back (`7d`, `2h`...); empty: 7 days.
    #[serde(default)]
    pub since: Option<String>,
}

impl Form {
    /// The names of a comma-separated field, trimmed, empty ones left out.
    pub fn names(field: &Option<String>) -> Vec<String> {
        field
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

fn place(o: &Outcome) -> String {
    match (&o.cluster, &o.refused) {
        (Some(c), _) => c.clone(),
        (None, Some(r)) => format!("refused ({})", r.code),
        (None, None) => "refused".into(),
    }
}

fn transition_badge(d: &DecisionWhatIf) -> Markup {
    match d.transition {
        Transition::Stays if d.placed_otherwise() => badge("placed otherwise", Kind::Warn),
        Transition::Stays => badge("stays", Kind::Ok),
        Transition::Moves => badge("moves", Kind::Warn),
        Transition::PlacedToRefused => badge("placed → refused", Kind::Bad),
        Transition::RefusedToPlaced => badge("refused → placed", Kind::Ok),
    }
}

/// What a volume or job was and would be, one line each.
fn picks(d: &DecisionWhatIf) -> Markup {
    let vol = |o: &Outcome, k: &str| o.volume_text(k);
    let job = |o: &Outcome, k: &str| o.job_text(k);
    let mut volumes: Vec<&String> = d.was.volumes.keys().collect();
    volumes.extend(d.would_be.volumes.keys().filter(|k| !d.was.volumes.contains_key(*k)));
    let mut jobs: Vec<&String> = d.was.jobs.keys().collect();
    jobs.extend(d.would_be.jobs.keys().filter(|k| !d.was.jobs.contains_key(*k)));
    html! {
        @for k in volumes {
            div.mono { "volume " (k) ": " (vol(&d.was, k)) " → " (vol(&d.would_be, k)) }
        }
        @for k in jobs {
            div.mono { "job " (k) ": " (job(&d.was, k)) " → " (job(&d.would_be, k)) }
        }
        @if let Some(r) = &d.would_be.refused {
            div.muted { "would be refused: " (r.message) " (" (r.code) ")" }
        }
    }
}

fn amounts(r: &fedvol_common::model::Resources) -> String {
    let mut s = format!("{} cores, {}, {} instances", r.cpu, r.memory, r.instances);
    for (k, n) in &r.devices {
        s.push_str(&format!(", {k}={n}"));
    }
    s
}

/// The page's body: the form, then the report (or the error the coordinators answered).
pub fn body(form: &Form, answer: Result<&WhatIfReply, &str>) -> Markup {
    html! {
        h1 { "What if" }
        form.filters method="get" action="/what-if" {
            label { "Drain clusters" input type="text" name="drain" value=(form.drain.as_deref().unwrap_or("")) placeholder="cluster-a, cluster-b"; }
            label { "Remove clusters" input type="text" name="remove" value=(form.remove.as_deref().unwrap_or("")) placeholder="none"; }
            label { "Changed within" input type="text" name="since" value=(form.since.as_deref().unwrap_or("")) placeholder="7d"; }
            button type="submit" { "Plan again" }
        }
        p.note {
            "The recorded decisions planned again on the federation as it stands, with the changes above; nothing is held or committed. "
            "No change is the baseline: what today's state alone would change. Another inventory: "
            code { "fedvol what-if --inventory CLUSTER=FILE" } "."
        }
        @match answer {
            Err(e) => { p.alert { (e) } }
            Ok(r) => { (report(r)) }
        }
    }
}

fn report(r: &WhatIfReply) -> Markup {
    let rep = &r.report;
    let changed: Vec<&DecisionWhatIf> = rep
        .decisions
        .iter()
        .filter(|d| d.changed() || d.placed_otherwise() || d.drift)
        .collect();
    html! {
        p #what-if-summary {
            strong { "Changes: " } (if r.changes.is_empty() { "none (baseline)".to_string() } else { r.changes.join(", ") }) ". "
            strong { "Changed: " } (rep.changed) " of " (rep.planned)
            " (drift, today alone: " (rep.drift) "; by the changes: " (rep.by_change) "; kept on a tie: " (rep.kept_on_tie) ")."
        }
        @for c in &r.clusters {
            @if let Some(n) = &c.note { p.muted { (c.name) ": " (n) } }
        }
        table #what-if-clusters {
            thead { tr {
                th { "Cluster" } th { "Change" } th.num { "Was" } th.num { "Would be" } th.num { "Stays" }
                th.num { "In" } th.num { "Out" } th.num { "→ refused" } th.num { "Refused →" }
                th { "Moving in needs" } th { "Free now" } th { "Fits" }
            } }
            tbody {
                @for (name, c) in &rep.clusters {
                    tr data-cluster=(name) {
                        td.nowrap { strong { (name) } }
                        td { (c.change.as_deref().unwrap_or("-")) }
                        td.num { (c.was) } td.num { (c.would_be) } td.num { (c.stays) }
                        td.num { (c.moved_in) } td.num { (c.moved_out) }
                        td.num { (c.to_refused) } td.num { (c.from_refused) }
                        td.mono { @if c.moved_in + c.from_refused > 0 { (amounts(&c.need)) } @else { "-" } }
                        td.mono { (amounts(&c.free)) }
                        td {
                            @if c.moved_in + c.from_refused == 0 { "-" }
                            @else if c.fits { (badge("yes", Kind::Ok)) }
                            @else { (badge("no", Kind::Bad)) }
                        }
                    }
                }
            }
        }
        table #what-if-projects {
            thead { tr {
                th { "Project" } th.num { "Planned" } th.num { "Stays" } th.num { "Moves" }
                th.num { "Placed → refused" } th.num { "Refused → placed" }
            } }
            tbody {
                @for (name, p) in &rep.projects {
                    tr { td { (name) } td.num { (p.planned) } td.num { (p.stays) } td.num { (p.moves) }
                         td.num { (p.placed_to_refused) } td.num { (p.refused_to_placed) } }
                }
            }
        }
        @if changed.is_empty() {
            p.muted { "Every decision stays as it was." }
        } @else {
            table #what-if-decisions {
                thead { tr { th { "Decision" } th { "State" } th { "Was" } th { "Would be" } th { "" } th { "Volumes and jobs" } } }
                tbody {
                    @for d in changed {
                        tr data-id=(d.request_id) {
                            td.mono { a href=(format!("/decisions/{}", d.request_id)) { (d.request_id) } }
                            td { (d.state) }
                            td.nowrap { (place(&d.was)) }
                            td { (place(&d.would_be)) }
                            td { (transition_badge(d)) }
                            td { (picks(d)) }
                        }
                    }
                }
            }
        }
        @if let Some(cut) = &r.cut {
            p.note { "The answer lists " (cut.listed) " of the " (cut.planned) " decisions (changed first) to fit one NATS message; the counts are over all of them." }
        }
    }
}
