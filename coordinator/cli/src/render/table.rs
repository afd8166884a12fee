//! The human view of a decision, fitting the terminal (100 columns in a pipe): a per-cluster
//! summary table (with an estimated-cost column when a cluster has a cost estimate),
//! per-cluster volume and job tables, then "why not": every error and failed
//! stage with every reason, each said once with the clusters it applies to, and the
//! cross-cluster choice step by step. Past [`super::outcomes::LISTED`] clusters, unless every
//! cluster is asked for (`-o wide`), the rows and details are those of the chosen cluster and
//! the whole answers, the clusters are counted by outcome, and lists of clusters are shortened.

use fedvol_common::cost::money;
use fedvol_common::decision::{ClusterDecision, ClusterStatus, Decision, Rejection};
use fedvol_common::explain::{failed_stages, stage_summary};
use indexmap::IndexMap;

use super::layout::{fill, para, table};
use super::words::{mode, planned_action, status};

/// Every reason's message, joined by `; `.
pub fn messages(reasons: &[fedvol_common::decision::Reason]) -> String {
    reasons
        .iter()
        .map(|x| x.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

fn dash(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

/// One line per volume of a cluster: `scratch → fast-storage/pvc-1a2b (provision)` (`would
/// provision` unless `chosen`: nothing was done there), or `scratch: ✗ <code>` when it has none
/// (the web view's per-cluster table).
pub fn volume_lines(c: &ClusterDecision, chosen: bool) -> Vec<String> {
    c.volumes
        .iter()
        .map(|(k, v)| match &v.error {
            Some(e) => format!("{k}: ✗ {}", e.code),
            None => format!(
                "{k} → {}/{} ({})",
                dash(v.provisioner.as_deref()),
                dash(v.volume.as_deref()),
                planned_action(v.action, chosen)
            ),
        })
        .collect()
}

/// One line per job of a cluster: `train → z1/h0`, or `train: ✗ <code>`.
pub fn job_lines(c: &ClusterDecision) -> Vec<String> {
    c.jobs
        .iter()
        .map(|(k, j)| match &j.error {
            Some(e) => format!("{k}: ✗ {}", e.code),
            None => format!("{k} → {}/{}", dash(j.zone.as_deref()), dash(j.host.as_deref())),
        })
        .collect()
}

/// One line per volume and job of a cluster, e.g. `scratch → fast-storage (provision)` (`would
/// provision` unless `chosen`; the volume's name is in the cluster's volume table).
fn cluster_summary(c: &ClusterDecision, chosen: bool) -> (String, String) {
    let vols = c
        .volumes
        .iter()
        .map(|(k, v)| match &v.error {
            Some(e) => format!("{k} ✗ {}", e.code),
            None => format!(
                "{k} → {} ({})",
                dash(v.provisioner.as_deref()),
                planned_action(v.action, chosen)
            ),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let jobs = c
        .jobs
        .iter()
        .map(|(k, j)| match &j.error {
            Some(e) => format!("{k} ✗ {}", e.code),
            None => format!("{k} → {}/{}", dash(j.zone.as_deref()), dash(j.host.as_deref())),
        })
        .collect::<Vec<_>>()
        .join("\n");
    (
        if vols.is_empty() { "-".into() } else { vols },
        if jobs.is_empty() { "-".into() } else { jobs },
    )
}

/// A job error that only says its volumes could not be resolved (they are explained above it).
const VOLUME_UNRESOLVED: &str = "volume_unresolved";

/// The "why not" of one cluster as blocks of text (an error, or a failed stage with its
/// rejected candidates), so that identical blocks of several clusters are said once.
fn why_not_blocks(c: &ClusterDecision) -> Vec<String> {
    let mut blocks = Vec::new();
    if let Some(e) = &c.error {
        blocks.push(para("  ✗ ", "      ", &format!("{} ({})", e.message, e.code)));
    }
    for (k, v) in &c.volumes {
        if let Some(e) = &v.error {
            blocks.push(para(
                "  ✗ ",
                "      ",
                &format!("volume {k}: {}: {}", e.code, e.message),
            ));
        }
    }
    for (k, j) in &c.jobs {
        if let Some(e) = &j.error {
            let text = if e.code == VOLUME_UNRESOLVED {
                format!("job {k}: {}: a volume it mounts could not be resolved", e.code)
            } else {
                format!("job {k}: {}: {}", e.code, e.message)
            };
            blocks.push(para("  ✗ ", "      ", &text));
        }
    }
    for st in failed_stages(c) {
        let mut b = para(
            "  - ",
            "      ",
            &format!("{} [{}]: {}", st.subject, st.stage, stage_summary(st)),
        );
        for r in &st.rejected {
            b.push_str(&para(
                "      ",
                "          ",
                &format!("{}: {}", r.candidate, messages(&r.reasons)),
            ));
        }
        if st.omitted > 0 && c.summarized {
            b.push_str(&para(
                "      ",
                "          ",
                &format!(
                    "{} rejected, not named: this answer is stored as a summary (`fedvol why-not` names them, asking the cluster)",
                    st.omitted
                ),
            ));
        } else if st.omitted > 0 {
            b.push_str(&format!(
                "      ... and {} more (raise --trace-limit to list them)\n",
                st.omitted
            ));
        }
        blocks.push(b);
    }
    blocks
}

/// Every cluster's "why not", each block once: blocks are grouped by the set of clusters they
/// apply to, in the order they first appear. Unless `all`, at most
/// [`super::outcomes::LISTED`] groups, with shortened cluster lists.
fn why_not_section(d: &Decision, all: bool) -> String {
    let mut by_block: IndexMap<String, Vec<&str>> = IndexMap::new();
    for (name, c) in &d.clusters {
        for b in why_not_blocks(c) {
            by_block.entry(b).or_default().push(name.as_str());
        }
    }
    let mut by_clusters: IndexMap<Vec<&str>, Vec<&str>> = IndexMap::new();
    for (b, clusters) in &by_block {
        by_clusters.entry(clusters.clone()).or_default().push(b.as_str());
    }
    let mut out = String::new();
    let groups = by_clusters.len();
    let shown = if all {
        groups
    } else {
        groups.min(super::outcomes::LISTED)
    };
    for (clusters, blocks) in by_clusters.into_iter().take(shown) {
        out.push_str(&format!("\nwhy not, on {}:\n", super::outcomes::names(&clusters, all)));
        for b in blocks {
            out.push_str(b);
        }
    }
    if shown < groups {
        out.push_str(&para(
            "\n",
            "  ",
            &format!(
                "why not, on the other clusters: {} more explanations (-o wide gives them all; `fedvol why-not {} --cluster C` one cluster's)",
                groups - shown,
                d.request_id
            ),
        ));
    }
    out
}

/// The reasons a cluster was dropped at a choice step; for `feasible`, the codes of what failed
/// (each explained under "why not").
fn dropped_text(d: &Decision, rule: &str, r: &Rejection) -> String {
    if rule == fedvol_common::choice::rules::FEASIBLE
        && let Some(c) = d.clusters.get(&r.candidate)
        && c.status == ClusterStatus::Answered
        && c.error.is_none()
    {
        let failed = super::outcomes::what_failed(c);
        if !failed.is_empty() {
            return format!("{}: not feasible: {} (why not: above)", r.candidate, failed.join(", "));
        }
    }
    format!("{}: {}", r.candidate, messages(&r.reasons))
}

/// Renders the whole decision for a terminal, fitting [`super::layout::width`] columns.
pub fn render(d: &Decision) -> String {
    render_labelled(d, "refused: ", false)
}

/// [`render`], with the coordinator's refusal introduced by `label` (`waiting: ` for a queued
/// decision, whose refusal is why it waits); `all`: every cluster in full, however many.
pub fn render_labelled(d: &Decision, label: &str, all: bool) -> String {
    render_stored(d, label, false, all)
}

/// [`render_labelled`] of a stored decision; `submitted`: its cluster's agent submitted the
/// jobs itself (Slurm with `slurm.jobs`), so no runner arguments are printed.
pub fn render_stored(d: &Decision, label: &str, submitted: bool, all: bool) -> String {
    let mut out = String::new();
    out.push_str(&para(
        "",
        "  ",
        &format!(
            "workflow: {}   request: {}   seed: {}",
            fedvol_common::limits::printable(&d.workflow),
            d.request_id,
            d.seed
        ),
    ));
    let commit_failed = d
        .choice
        .iter()
        .find(|s| s.rule == fedvol_common::choice::rules::COMMIT_FAILED);
    match (&d.chosen_cluster, commit_failed) {
        (Some(c), _) => out.push_str(&format!("chosen cluster: {c}\n\n")),
        (None, Some(step)) => {
            // The reason first: what the cluster said when it refused the commit.
            out.push_str("chosen cluster: none: the commit failed\n");
            for r in &step.dropped {
                out.push_str(&para(
                    "  ",
                    "    ",
                    &format!("on {}: {}", r.candidate, messages(&r.reasons)),
                ));
            }
            out.push_str("  (the plan was feasible; no volume was created: see the commit attempts below)\n\n");
        }
        (None, None) if d.refused.is_some() => out.push_str("chosen cluster: none\n\n"),
        (None, None) => out.push_str("chosen cluster: none (no cluster can place this workflow)\n\n"),
    }
    out.push_str(&super::policy::render(d, label));
    if d.clusters.is_empty() && d.refused.is_some() {
        return out;
    }

    // The estimated cost gets a column when any cluster has one.
    let costed = d.clusters.values().any(|c| c.cost.is_some());
    let mut header = vec!["CLUSTER", "STATUS", "FIT", "VOLUMES", "JOBS (zone/host)"];
    if costed {
        header.push("EST. COST");
    }
    header.push("ELAPSED");
    let mut t = table(&header);
    let grouped = super::outcomes::grouped(d, all);
    let rows = d
        .clusters
        .iter()
        .filter(|(name, c)| !grouped || shown_alone(d, name, c))
        .map(|(name, c)| {
            let (vols, jobs) = cluster_summary(c, d.chosen_cluster.as_deref() == Some(name));
            let marker = if d.chosen_cluster.as_deref() == Some(name) {
                format!("{name} *")
            } else {
                name.clone()
            };
            let mut row = vec![
                marker,
                status(c.status).to_string(),
                if c.feasible { "yes".into() } else { "no".into() },
                vols,
                jobs,
            ];
            if costed {
                row.push(c.cost.as_ref().map_or("-".into(), |e| money(e.total)));
            }
            row.push(format!("{:.2} ms", c.elapsed_ms));
            row
        })
        .collect();
    fill(&mut t, &header, rows);
    out.push_str(&t.to_string());
    out.push('\n');
    if grouped {
        out.push_str(&super::outcomes::render(d));
    }
    let summarized = d.clusters.values().filter(|c| c.summarized).count();
    if summarized > 0 {
        out.push_str(&para(
            "",
            "  ",
            &format!(
                "{summarized} of {} clusters' answers are stored as summaries: only the chosen cluster and the runners-up a failed commit would try keep their listings of rejected candidates.",
                d.clusters.len()
            ),
        ));
    }

    // Details for the chosen cluster and for clusters where something failed; a feasible
    // cluster that was not chosen is said in full by the summary table above.
    for (name, c) in &d.clusters {
        let chosen = d.chosen_cluster.as_deref() == Some(name.as_str());
        let failed = c.volumes.values().any(|v| v.error.is_some()) || c.jobs.values().any(|j| j.error.is_some());
        if (c.volumes.is_empty() && c.jobs.is_empty()) || !(chosen || failed) || (grouped && !shown_alone(d, name, c)) {
            continue;
        }
        out.push_str(&format!("\ncluster {name}"));
        if let Some(v) = &c.inventory_version {
            out.push_str(&format!(" (inventory {v})"));
        }
        out.push('\n');
        if let Some(e) = &c.cost {
            out.push_str(&para(
                "  ",
                "      ",
                &format!("estimated cost {}: {}", money(e.total), e.breakdown()),
            ));
        }
        if !c.volumes.is_empty() {
            let header = ["VOLUME", "MODE", "PROVISIONER", "VOLUME NAME", "ACTION"];
            let mut vt = table(&header);
            let rows = c
                .volumes
                .iter()
                .map(|(k, v)| {
                    vec![
                        k.clone(),
                        mode(v.mode).to_string(),
                        dash(v.provisioner.as_deref()),
                        dash(v.volume.as_deref()),
                        match &v.error {
                            Some(e) => format!("✗ {}", e.code),
                            None => planned_action(v.action, chosen),
                        },
                    ]
                })
                .collect();
            fill(&mut vt, &header, rows);
            out.push_str(&vt.to_string());
            out.push('\n');
        }
        if !c.jobs.is_empty() {
            let header = ["JOB", "ZONE", "HOST"];
            let mut jt = table(&header);
            let rows = c
                .jobs
                .iter()
                .map(|(k, j)| {
                    let host = match &j.error {
                        Some(e) => format!("✗ {}", e.code),
                        None if j.hosts.len() > 1 => j.hosts.join(" "),
                        None => dash(j.host.as_deref()),
                    };
                    vec![k.clone(), dash(j.zone.as_deref()), host]
                })
                .collect();
            fill(&mut jt, &header, rows);
            out.push_str(&jt.to_string());
            out.push('\n');
            let runs: Vec<(String, String)> = c
                .jobs
                .keys()
                .filter_map(|k| c.runner_args(k).map(|a| (k.clone(), a)))
                .collect();
            if !runs.is_empty() && !submitted {
                let rm = c.resource_manager.as_deref().unwrap_or_default();
                out.push_str(&format!(
                    "  run with {rm} (its agent submits no job; give the runner these arguments):\n"
                ));
                for (k, a) in runs {
                    out.push_str(&format!("    {k}: sbatch {a} ...\n"));
                }
            }
        }
    }

    out.push_str(&why_not_section(d, all || !grouped));

    if !d.choice.is_empty() {
        out.push_str("\ncluster choice:\n");
        for step in &d.choice {
            let kept: Vec<&str> = step.kept.iter().map(String::as_str).collect();
            let kept = format!(
                "{}: kept [{}]",
                step.rule,
                if grouped {
                    super::outcomes::names(&kept, false)
                } else {
                    kept.join(", ")
                }
            );
            if step.dropped.is_empty() {
                out.push_str(&para("  ", "      ", &kept));
                continue;
            }
            out.push_str(&para("  ", "      ", &format!("{kept}, dropped:")));
            let shown = if grouped {
                super::outcomes::NAMES
            } else {
                step.dropped.len()
            };
            for r in step.dropped.iter().take(shown) {
                out.push_str(&para("      ", "          ", &dropped_text(d, &step.rule, r)));
            }
            if step.dropped.len() > shown {
                out.push_str(&format!(
                    "      ... and {} more (-o wide lists them)\n",
                    step.dropped.len() - shown
                ));
            }
        }
    }
    out
}

/// True when cluster `name` keeps its own row and details in a grouped view: the chosen
/// cluster, and the others whose whole answer is stored.
fn shown_alone(d: &Decision, name: &str, c: &ClusterDecision) -> bool {
    d.chosen_cluster.as_deref() == Some(name) || !c.summarized
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::choice::choose_cluster;
    use fedvol_common::decision::Reason;
    use fedvol_common::funnel::{ClusterState, PlanRequest, plan_cluster};
    use fedvol_common::synth::{SynthSizes, cluster, workflow};

    /// A decision of 1,000 clusters of 50 hosts as a coordinator stores it: 40 of them could
    /// not place a job, 3 timed out, the others feasible with their own loads; summarized.
    fn thousand() -> Decision {
        let req = PlanRequest::new("r-1000", workflow(2, 1), "u")
            .with_seed(7)
            .with_trace_limit(fedvol_common::funnel::trace::STORED_TRACE_LIMIT);
        let sizes = SynthSizes {
            hosts: 50,
            provisioners: 4,
            volumes: 10,
        };
        let answer = plan_cluster(&cluster("c", sizes), &ClusterState::default(), &req);
        let clusters = (0..1000)
            .map(|i| {
                let mut a = answer.clone();
                a.load = (i % 97) as f64 / 100.0;
                if i % 25 == 1 {
                    a.feasible = false;
                    if let Some(j) = a.jobs.get_mut("job-1") {
                        j.error = Some(Reason::new("no_zone", "no zone can place job-1"));
                    }
                }
                if i % 333 == 2 {
                    a = ClusterDecision::without_answer(ClusterStatus::TimedOut, 2000.0, None);
                }
                (format!("c{i:04}"), a)
            })
            .collect();
        let (chosen, choice) = choose_cluster(&req, &clusters, req.seed);
        let mut d = Decision {
            request_id: "r-1000".into(),
            workflow: "w".into(),
            seed: 7,
            chosen_cluster: chosen,
            clusters,
            choice,
            quota: vec![],
            refused: None,
            drained: Default::default(),
        };
        fedvol_common::summary::summarize_unlisted(&req, &mut d, fedvol_common::summary::LISTED_CLUSTERS);
        d
    }

    /// A 1,000-cluster decision reads at a glance: rows for the chosen cluster and the whole
    /// answers, the clusters by outcome, shortened lists; `-o wide` still gives each its row.
    #[test]
    fn a_thousand_clusters_are_shown_by_outcome() {
        let d = thousand();
        let text = render_labelled(&d, "refused: ", false);
        println!("{text}");
        assert!(
            text.contains("1000 clusters by outcome (-o wide gives each its row)"),
            "{text}"
        );
        assert!(text.contains("not feasible: job job-1 no_zone"), "{text}");
        assert!(text.contains("feasible, dropped by least_loaded"), "{text}");
        assert!(text.contains("timed_out    "), "{text}");
        assert!(text.lines().count() < 80, "{} lines", text.lines().count());
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let wide = render_labelled(&d, "refused: ", true);
        assert!(wide.lines().filter(|l| l.contains(" c0")).count() >= 1000);
        assert!(!wide.contains("by outcome"));
    }
}
