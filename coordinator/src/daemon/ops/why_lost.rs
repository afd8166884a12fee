//! `why_not` with only a cluster named: why that cluster lost the decision, read from the
//! stored record alone: what it could not place (each volume or job with its error, and the
//! stages that rejected every candidate), or, when it could place everything, the cluster-choice
//! step that dropped it (`drained` for a cluster an operator drained; Nomad's `AllocMetric`
//! explains a lost node the same way: the constraint that filtered it, or the rank it lost on).

use fedvol_common::decision::{ClusterStatus, Decision};
use fedvol_common::funnel::why_not::{Blocker, RecordedExplanation, choice_blocker};

/// Why `cluster` (one of `d`'s clusters) was not chosen, as the record says: `blockers` are the
/// rejections of every stage that ended with no candidate left, `cluster_choice` the step
/// that dropped it, `summary` one line leading with the reason. Pure.
pub fn cluster_record(d: &Decision, cluster: &str) -> RecordedExplanation {
    let Some(c) = d.clusters.get(cluster) else {
        return RecordedExplanation::absent(cluster);
    };
    let cluster_choice = choice_blocker(d, cluster);
    // The stages that emptied a subject's candidates: where the funnel said no.
    let mut blockers = Vec::new();
    let mut unlisted = Vec::new();
    for t in fedvol_common::explain::failed_stages(c) {
        blockers.extend(t.rejected.iter().map(|r| Blocker::listed(t, r)));
        if t.omitted > 0 {
            unlisted.push(format!("{} for {}", t.stage, t.subject));
        }
    }
    let mut failed: Vec<String> = Vec::new();
    match c.status {
        ClusterStatus::Answered => {}
        ClusterStatus::TimedOut => failed.push("it did not answer by the deadline".into()),
        ClusterStatus::Unreachable => failed.push("it was unreachable (known dead, or no responders)".into()),
        ClusterStatus::Error => failed.push("it answered with an error".into()),
    }
    if let Some(e) = &c.error {
        failed.push(e.message.clone());
    }
    for (k, v) in &c.volumes {
        if let Some(e) = &v.error {
            failed.push(format!("volume {k}: {}", e.message));
        }
    }
    for (k, j) in &c.jobs {
        if let Some(e) = &j.error {
            failed.push(format!("job {k}: {}", e.message));
        }
    }
    let summary = if d.chosen_cluster.as_deref() == Some(cluster) {
        format!("cluster {cluster} was chosen")
    } else if !failed.is_empty() || !c.feasible {
        let what = if failed.is_empty() {
            "not every volume resolved and every job placed".to_string()
        } else {
            failed.join("; ")
        };
        // A drained cluster that cannot place it anyway says both.
        let drained = d
            .drained
            .get(cluster)
            .map(|dr| format!("; it was also {}", dr.describe()))
            .unwrap_or_default();
        format!("cluster {cluster} cannot take the workflow: {what}{drained}")
    } else if let Some(b) = &cluster_choice {
        let why: Vec<&str> = b.reasons.iter().map(|r| r.message.as_str()).collect();
        format!(
            "cluster {cluster} could take the whole workflow; it lost the cluster choice at {} ({})",
            b.stage.trim_start_matches("cluster."),
            why.join("; ")
        )
    } else {
        format!("cluster {cluster} could take the whole workflow; the record says nothing against it")
    };
    RecordedExplanation {
        inventory_version: c.inventory_version.clone(),
        blockers,
        chosen_for: Vec::new(),
        unlisted_stages: unlisted,
        cluster_choice,
        summary,
    }
}
