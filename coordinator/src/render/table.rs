//! The human view of a decision: a per-cluster summary table, per-cluster volume and job
//! tables, each failed stage as a kube-scheduler-style line with every reason, and the
//! cross-cluster choice step by step.

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{ContentArrangement, Table};
use fedvol_common::decision::{Action, ClusterDecision, ClusterStatus, Decision, Mode};
use fedvol_common::explain::{failed_stages, stage_summary};

fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    // On a terminal the table fits its width; in a pipe or a file long messages wrap at 140
    // columns instead of making one very long line.
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        t.set_width(140);
    }
    t
}

fn status(s: ClusterStatus) -> &'static str {
    match s {
        ClusterStatus::Answered => "answered",
        ClusterStatus::TimedOut => "timed_out",
        ClusterStatus::Unreachable => "unreachable",
        ClusterStatus::Error => "error",
    }
}

fn mode(m: Mode) -> &'static str {
    match m {
        Mode::Named => "named",
        Mode::ByName => "by_name",
        Mode::Automatic => "automatic",
        Mode::Claim => "claim",
    }
}

fn action(a: Option<Action>) -> &'static str {
    match a {
        Some(Action::Bind) => "bind",
        Some(Action::Provision) => "provision",
        Some(Action::Existing) => "existing",
        None => "-",
    }
}

/// Every reason's message, joined by `; `.
fn messages(reasons: &[fedvol_common::decision::Reason]) -> String {
    reasons
        .iter()
        .map(|x| x.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

fn dash(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

/// One line per volume and job of a cluster, e.g. `scratch → fast-storage/pvc-1a2b (provision)`.
fn cluster_summary(c: &ClusterDecision) -> (String, String) {
    let vols = c
        .volumes
        .iter()
        .map(|(k, v)| match &v.error {
            Some(e) => format!("{k}: ✗ {}", e.code),
            None => format!(
                "{k} → {}/{} ({})",
                dash(v.provisioner.as_deref()),
                dash(v.volume.as_deref()),
                action(v.action)
            ),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let jobs = c
        .jobs
        .iter()
        .map(|(k, j)| match &j.error {
            Some(e) => format!("{k}: ✗ {}", e.code),
            None => format!("{k} → {}/{}", dash(j.zone.as_deref()), dash(j.host.as_deref())),
        })
        .collect::<Vec<_>>()
        .join("\n");
    (
        if vols.is_empty() { "-".into() } else { vols },
        if jobs.is_empty() { "-".into() } else { jobs },
    )
}

/// Renders the whole decision for a terminal.
pub fn render(d: &Decision) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "workflow: {}   request: {}   seed: {}\n",
        fedvol_common::limits::printable(&d.workflow),
        d.request_id,
        d.seed
    ));
    let commit_failed = d
        .choice
        .iter()
        .find(|s| s.rule == fedvol_common::choice::rules::COMMIT_FAILED);
    match (&d.chosen_cluster, commit_failed) {
        (Some(c), _) => out.push_str(&format!("chosen cluster: {c}\n\n")),
        (None, Some(step)) => {
            let tried: Vec<&str> = step.dropped.iter().map(|r| r.candidate.as_str()).collect();
            out.push_str(&format!(
                "chosen cluster: none (planning found a feasible cluster, but the commit failed on {}: see the commit attempts below)\n\n",
                tried.join(", ")
            ));
        }
        (None, None) => out.push_str("chosen cluster: none (no cluster can place this workflow)\n\n"),
    }

    let mut t = new_table(&[
        "CLUSTER",
        "STATUS",
        "FEASIBLE",
        "VOLUMES",
        "JOBS (zone/host)",
        "ELAPSED",
    ]);
    for (name, c) in &d.clusters {
        let (vols, jobs) = cluster_summary(c);
        let marker = if d.chosen_cluster.as_deref() == Some(name) {
            format!("{name} *")
        } else {
            name.clone()
        };
        t.add_row(vec![
            marker,
            status(c.status).to_string(),
            if c.feasible { "yes".into() } else { "no".into() },
            vols,
            jobs,
            format!("{:.2} ms", c.elapsed_ms),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');

    for (name, c) in &d.clusters {
        if c.volumes.is_empty() && c.jobs.is_empty() && c.error.is_none() {
            continue;
        }
        out.push_str(&format!("\ncluster {name}"));
        if let Some(v) = &c.inventory_version {
            out.push_str(&format!(" (inventory {v})"));
        }
        out.push('\n');
        if let Some(e) = &c.error {
            out.push_str(&format!("  error: {} ({})\n", e.message, e.code));
        }
        if !c.volumes.is_empty() {
            let mut vt = new_table(&["VOLUME", "MODE", "PROVISIONER", "VOLUME NAME", "ACTION", "ERROR"]);
            for (k, v) in &c.volumes {
                vt.add_row(vec![
                    k.clone(),
                    mode(v.mode).to_string(),
                    dash(v.provisioner.as_deref()),
                    dash(v.volume.as_deref()),
                    action(v.action).to_string(),
                    v.error
                        .as_ref()
                        .map(|e| e.message.clone())
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
            out.push_str(&vt.to_string());
            out.push('\n');
        }
        if !c.jobs.is_empty() {
            let mut jt = new_table(&["JOB", "ZONE", "HOST", "ERROR"]);
            for (k, j) in &c.jobs {
                let host = if j.hosts.len() > 1 {
                    j.hosts.join(",")
                } else {
                    dash(j.host.as_deref())
                };
                jt.add_row(vec![
                    k.clone(),
                    dash(j.zone.as_deref()),
                    host,
                    j.error
                        .as_ref()
                        .map(|e| e.message.clone())
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
            out.push_str(&jt.to_string());
            out.push('\n');
            let runs: Vec<(String, String)> = c
                .jobs
                .keys()
                .filter_map(|k| c.runner_args(k).map(|a| (k.clone(), a)))
                .collect();
            if !runs.is_empty() {
                let rm = c.resource_manager.as_deref().unwrap_or_default();
                out.push_str(&format!(
                    "  run with {rm} (fedvol submits no job; give the runner these arguments):\n"
                ));
                for (k, a) in runs {
                    out.push_str(&format!("    {k}: sbatch {a} ...\n"));
                }
            }
        }
        let failed = failed_stages(c);
        if !failed.is_empty() {
            out.push_str("  why not:\n");
            for st in failed {
                out.push_str(&format!("  - {} [{}]: {}\n", st.subject, st.stage, stage_summary(st)));
                for r in &st.rejected {
                    let reasons = messages(&r.reasons);
                    out.push_str(&format!("      {}: {}\n", r.candidate, reasons));
                }
                if st.omitted > 0 {
                    out.push_str(&format!(
                        "      ... and {} more (raise --trace-limit to list them)\n",
                        st.omitted
                    ));
                }
            }
        }
    }

    if !d.choice.is_empty() {
        out.push_str("\ncluster choice:\n");
        for step in &d.choice {
            out.push_str(&format!("  {}: kept [{}]", step.rule, step.kept.join(", ")));
            if step.dropped.is_empty() {
                out.push('\n');
            } else {
                out.push_str(", dropped:\n");
                for r in &step.dropped {
                    let reasons = messages(&r.reasons);
                    out.push_str(&format!("      {}: {}\n", r.candidate, reasons));
                }
            }
        }
    }
    out
}
