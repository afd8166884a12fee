//! The view of a what-if's report (`fedvol what-if`, docs/design.md §2.7): what was planned,
//! the counts (transitions, per cluster with the capacity the moving work needs, per quota
//! with another policy, per project),
//! then each changed decision with what it was and what it would be, volume by volume and job
//! by job. Within [`super::layout::width`].

use fedvol_common::model::Resources;
use fedvol_common::quota::{Amounts, Limits, Resource};
use fedvol_common::size::ByteSize;
use fedvol_common::whatif::{DecisionWhatIf, Outcome, Transition};
use fedvol_proto::coordinator::WhatIfReply;

use super::layout::{bordered, fill, para, table};

/// A size for a column: exact when short (`64GiB`), else in GiB with one decimal.
fn mem(b: ByteSize) -> String {
    let exact = b.to_string();
    if exact.len() <= 7 {
        exact
    } else {
        format!("{:.1}GiB", b.0 as f64 / (1u128 << 30) as f64)
    }
}

/// `cores / memory / instances`, then each device `name=n` on a line of its own.
fn amounts(r: &Resources) -> String {
    let mut s = format!("{} / {} / {}", r.cpu, mem(r.memory), r.instances);
    for (k, n) in &r.devices {
        s.push_str(&format!("\n{k}={n}"));
    }
    s
}

/// Where an outcome is: the cluster, or `refused (code)`.
/// A quota's limits: `cpu 64, storage 10 TiB` (only those it sets).
fn limits(l: &Limits) -> String {
    Resource::ALL
        .iter()
        .filter_map(|&r| l.get(r).map(|v| format!("{r} {}", r.show(v))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The use of the resources either of `limits` sets (every resource in use when neither does).
fn used(a: &Amounts, limits: [Option<&Limits>; 2]) -> String {
    let limited = |r: Resource| limits.iter().flatten().any(|l| l.get(r).is_some());
    let any = limits.iter().any(Option::is_some);
    let shown: Vec<String> = Resource::ALL
        .iter()
        .filter(|&&r| if any { limited(r) } else { a.get(r) > 0 })
        .map(|&r| format!("{r} {}", r.show(a.get(r))))
        .collect();
    if shown.is_empty() { "-".into() } else { shown.join(", ") }
}

fn place(o: &Outcome) -> String {
    match (&o.cluster, &o.refused) {
        (Some(c), _) => c.clone(),
        (None, Some(r)) => format!("refused ({})", r.code),
        (None, None) => "refused".to_string(),
    }
}

/// A transition with its clusters: `moves a → b`, `placed → refused`...
fn transition(t: Transition, from: Option<&str>, to: Option<&str>) -> String {
    let f = from.unwrap_or("refused");
    let g = to.unwrap_or("refused");
    match t {
        Transition::Stays => match from {
            Some(c) => format!("stays on {c}"),
            None => "stays refused".to_string(),
        },
        Transition::Moves => format!("moves {f} → {g}"),
        Transition::PlacedToRefused => format!("placed → refused ({f})"),
        Transition::RefusedToPlaced => format!("refused → placed ({g})"),
    }
}

/// The lines under a decision's row: per volume and job, what it was → what it would be (only
/// those that differ unless `all`), then why it would be refused.
fn detail(d: &DecisionWhatIf, all: bool) -> String {
    let mut out = String::new();
    let vol = |o: &Outcome, k: &str| o.volume_text(k);
    let job = |o: &Outcome, k: &str| o.job_text(k);
    let keys = |f: fn(&Outcome) -> Vec<String>| {
        let mut k = f(&d.was);
        for x in f(&d.would_be) {
            if !k.contains(&x) {
                k.push(x);
            }
        }
        k
    };
    for k in keys(|o| o.volumes.keys().cloned().collect()) {
        let (a, b) = (vol(&d.was, &k), vol(&d.would_be, &k));
        if all || a != b {
            out.push_str(&para("    ", "        ", &format!("volume {k}: {a} → {b}")));
        }
    }
    for k in keys(|o| o.jobs.keys().cloned().collect()) {
        let (a, b) = (job(&d.was, &k), job(&d.would_be, &k));
        if all || a != b {
            out.push_str(&para("    ", "        ", &format!("job {k}: {a} → {b}")));
        }
    }
    if let Some(r) = &d.would_be.refused {
        out.push_str(&para(
            "    ",
            "        ",
            &format!("would be refused: {} ({})", r.message, r.code),
        ));
    }
    if d.drift
        && let Some(t) = &d.today
    {
        out.push_str(&para(
            "    ",
            "        ",
            &format!("drift: today alone it would be {}", place(t)),
        ));
    }
    out
}

/// The report as tables: `wide` lists every decision (not only the changed ones) with every
/// volume and job.
pub fn what_if_table(r: &WhatIfReply, wide: bool) -> String {
    let rep = &r.report;
    let mut out = String::new();
    let changes = if r.changes.is_empty() {
        "none (today's federation alone: the baseline)".to_string()
    } else {
        r.changes.join(", ")
    };
    out.push_str(&para("what-if: ", "  ", &changes));
    let names: Vec<String> = r.clusters.iter().map(|c| c.name.clone()).collect();
    out.push_str(&para(
        "",
        "  ",
        &format!(
            "planned again: {} recorded decisions on {} ({} clusters) in {:.0} ms",
            rep.planned,
            if names.is_empty() {
                "no cluster".to_string()
            } else {
                names.join(", ")
            },
            names.len(),
            r.planning_ms
        ),
    ));
    for c in &r.clusters {
        if let Some(n) = &c.note {
            out.push_str(&para("note: ", "  ", &format!("{}: {n}", c.name)));
        }
    }
    if r.unreadable > 0 {
        out.push_str(&para(
            "note: ",
            "  ",
            &format!(
                "{} recorded decisions could not be read and were left out",
                r.unreadable
            ),
        ));
    }
    out.push_str(&para(
        "",
        "  ",
        &format!(
            "changed: {} of {} (drift, today alone: {}; by the changes: {}); placed otherwise on the same cluster: {}",
            rep.changed, rep.planned, rep.drift, rep.by_change, rep.placed_otherwise
        ),
    ));
    if rep.kept_on_tie > 0 {
        out.push_str(&para(
            "",
            "  ",
            &format!(
                "kept on a tie: {} stay on their cluster, which is as good for them as the one the load or the seeded draw would pick today",
                rep.kept_on_tie
            ),
        ));
    }
    if rep.planned == 0 {
        return out;
    }
    out.push('\n');
    let header = ["TRANSITION", "DECISIONS"];
    let rows = rep
        .transitions
        .iter()
        .map(|t| {
            vec![
                transition(t.transition, t.from.as_deref(), t.to.as_deref()),
                t.decisions.to_string(),
            ]
        })
        .collect();
    let mut t = bordered(&header);
    fill(&mut t, &header, rows);
    out.push_str(&format!("{t}\n\n"));

    let header = [
        "CLUSTER",
        "CHANGE",
        "WAS",
        "WOULD BE",
        "STAYS",
        "IN",
        "OUT",
        "→ REFUSED",
        "REFUSED →",
    ];
    let rows = rep
        .clusters
        .iter()
        .map(|(name, c)| {
            vec![
                name.clone(),
                c.change.clone().unwrap_or_else(|| "-".into()),
                c.was.to_string(),
                c.would_be.to_string(),
                c.stays.to_string(),
                c.moved_in.to_string(),
                c.moved_out.to_string(),
                c.to_refused.to_string(),
                c.from_refused.to_string(),
            ]
        })
        .collect();
    let mut t = bordered(&header);
    fill(&mut t, &header, rows);
    out.push_str(&format!("{t}\n\n"));

    let moving: Vec<_> = rep
        .clusters
        .iter()
        .filter(|(_, c)| c.moved_in + c.from_refused > 0 || c.moved_out + c.to_refused > 0)
        .collect();
    if !moving.is_empty() {
        out.push_str("capacity (cores / memory / instances, summed over powered-on hosts):\n");
        let header = [
            "CLUSTER",
            "WORK MOVING IN NEEDS",
            "FREE NOW",
            "FITS",
            "WORK LEAVING FREES",
        ];
        let rows = moving
            .iter()
            .map(|(name, c)| {
                let arriving = c.moved_in + c.from_refused > 0;
                vec![
                    (*name).clone(),
                    if arriving { amounts(&c.need) } else { "-".into() },
                    amounts(&c.free),
                    match (arriving, c.fits) {
                        (false, _) => "-".into(),
                        (true, true) => "yes".into(),
                        (true, false) => "NO".into(),
                    },
                    if c.moved_out + c.to_refused > 0 {
                        amounts(&c.freed)
                    } else {
                        "-".into()
                    },
                ]
            })
            .collect();
        let mut t = table(&header);
        fill(&mut t, &header, rows);
        out.push_str(&format!("{t}\n"));
        out.push_str(&para(
            "",
            "",
            "Each decision was planned alone on today's state: work moving to one cluster is not \
             stacked, so a cluster where it does not fit in all (NO) takes only part of it.",
        ));
        out.push('\n');
    }

    if !r.quotas.is_empty() {
        out.push_str(&para(
            "",
            "",
            &format!(
                "quotas: {} decisions get another verdict (the policy tried against today's; live use over every cluster)",
                rep.quota_changed
            ),
        ));
        let header = [
            "QUOTA",
            "IN USE",
            "LIMIT TODAY",
            "LIMIT TRIED",
            "REFUSES TODAY",
            "TRIED",
        ];
        let rows = r
            .quotas
            .iter()
            .map(|q| {
                let lim = |l: &Option<Limits>| l.as_ref().map_or_else(|| "-".to_string(), limits);
                vec![
                    format!("{} {}", q.scope.as_str(), q.name),
                    used(&q.used, [q.today.as_ref(), q.tried.as_ref()]),
                    lim(&q.today),
                    lim(&q.tried),
                    q.refused_today.to_string(),
                    q.refused.to_string(),
                ]
            })
            .collect();
        let mut t = bordered(&header);
        fill(&mut t, &header, rows);
        out.push_str(&format!(
            "{t}

"
        ));
    }

    let header = [
        "PROJECT",
        "PLANNED",
        "STAYS",
        "MOVES",
        "PLACED → REFUSED",
        "REFUSED → PLACED",
    ];
    let rows = rep
        .projects
        .iter()
        .map(|(name, p)| {
            vec![
                name.clone(),
                p.planned.to_string(),
                p.stays.to_string(),
                p.moves.to_string(),
                p.placed_to_refused.to_string(),
                p.refused_to_placed.to_string(),
            ]
        })
        .collect();
    let mut t = bordered(&header);
    fill(&mut t, &header, rows);
    out.push_str(&format!("{t}\n"));

    let shown: Vec<&DecisionWhatIf> = rep
        .decisions
        .iter()
        .filter(|d| wide || d.changed() || d.placed_otherwise() || d.drift)
        .collect();
    if !shown.is_empty() {
        out.push('\n');
        for d in &shown {
            let what = match d.transition {
                Transition::Stays if d.placed_otherwise() => {
                    format!("stays on {}, placed otherwise", place(&d.would_be))
                }
                t => transition(t, d.was.cluster.as_deref(), d.would_be.cluster.as_deref()),
            };
            let workflow = if d.request_id.starts_with(&d.workflow) {
                String::new()
            } else {
                format!("{}, ", d.workflow)
            };
            out.push_str(&para(
                "",
                "    ",
                &format!("{what}: {} ({workflow}{}, {})", d.request_id, d.user, d.state),
            ));
            out.push_str(&detail(d, wide));
        }
    }
    let unlisted = rep.decisions.len() - shown.len();
    if unlisted > 0 {
        out.push_str(&para(
            "",
            "",
            &format!("{unlisted} decisions stay as they were (not listed; -o wide lists every decision)"),
        ));
    }
    if let Some(cut) = &r.cut {
        out.push_str(&para(
            "note: ",
            "  ",
            &format!(
                "the answer lists {} of the {} decisions (changed first) to fit the NATS message size; every count above is over all of them (-o json holds the listed ones)",
                cut.listed, cut.planned
            ),
        ));
    }
    out
}
