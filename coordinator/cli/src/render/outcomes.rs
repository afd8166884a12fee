//! A large decision at a glance: past [`LISTED`] clusters the table view groups the clusters
//! by outcome instead of giving each its row (`-o wide` lists every cluster).
//!
//! An outcome is what a user asks first about a cluster: chosen; feasible but dropped by a
//! named step of the cluster choice; not feasible, with what failed; or no usable answer
//! (timed out, unreachable, error with its code).

use fedvol_common::decision::{ClusterDecision, ClusterStatus, Decision};
use indexmap::IndexMap;

use super::layout::{fill, table};
use super::words::status;

/// The most clusters the table view gives a row each; past it, the rows are the chosen
/// cluster and those whose whole answer is kept, followed by the clusters by outcome.
pub const LISTED: usize = 12;

/// The most cluster names written where a list of clusters is shortened.
pub const NAMES: usize = 3;

/// True when `d` has too many clusters for a row each and `all` was not asked.
pub fn grouped(d: &Decision, all: bool) -> bool {
    !all && d.clusters.len() > LISTED
}

/// `names` joined as "a, b and c", or, when shortened (`!all` and more than [`NAMES`]), "a, b,
/// c and 997 more".
pub fn names(names: &[&str], all: bool) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        many if !all && many.len() > NAMES => {
            format!("{} and {} more", many[..NAMES].join(", "), many.len() - NAMES)
        }
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The outcome of cluster `name` in `d` (module docs), e.g. `feasible, dropped by
/// least_loaded` or `not feasible: job train no_zone`.
pub fn outcome(d: &Decision, name: &str, c: &ClusterDecision) -> String {
    if d.chosen_cluster.as_deref() == Some(name) {
        return "chosen".into();
    }
    match c.status {
        ClusterStatus::Answered => {}
        ClusterStatus::Error => {
            return match &c.error {
                Some(e) => format!("error: {}", e.code),
                None => "error".into(),
            };
        }
        other => return status(other).to_string(),
    }
    if !c.feasible {
        let failed = what_failed(c);
        return if failed.is_empty() {
            "not feasible".into()
        } else {
            format!("not feasible: {}", failed.join(", "))
        };
    }
    match super::table::dropped_by(d, name) {
        Some((step, _)) => format!("feasible, dropped by {}", step.rule),
        None => "feasible".into(),
    }
}

/// What failed in a cluster's answer, by code: `volume <v> <code>` and `job <j> <code>`, in
/// workflow order (each explained under "why not").
pub fn what_failed(c: &ClusterDecision) -> Vec<String> {
    let volumes = c
        .volumes
        .iter()
        .filter_map(|(k, v)| v.error.as_ref().map(|e| format!("volume {k} {}", e.code)));
    let jobs = c
        .jobs
        .iter()
        .filter_map(|(k, j)| j.error.as_ref().map(|e| format!("job {k} {}", e.code)));
    volumes.chain(jobs).collect()
}

/// The clusters of `d` by outcome, as a table (OUTCOME, CLUSTERS, the first names), most
/// clusters first, with a line saying how to list them all.
pub fn render(d: &Decision) -> String {
    let mut by: IndexMap<String, Vec<&str>> = IndexMap::new();
    for (name, c) in &d.clusters {
        by.entry(outcome(d, name, c)).or_default().push(name.as_str());
    }
    let mut groups: Vec<(String, Vec<&str>)> = by.into_iter().collect();
    // The chosen cluster first, then the largest groups; ties keep their first appearance.
    groups.sort_by_key(|(o, n)| (o != "chosen", std::cmp::Reverse(n.len())));
    let header = ["OUTCOME", "CLUSTERS", "WHICH"];
    let mut t = table(&header);
    let rows = groups
        .iter()
        .map(|(o, n)| vec![o.clone(), n.len().to_string(), names(n, false)])
        .collect();
    fill(&mut t, &header, rows);
    format!(
        "\n{} clusters by outcome (-o wide gives each its row):\n{t}\n",
        d.clusters.len()
    )
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
        };
        fedvol_common::summary::summarize_unlisted(&req, &mut d, fedvol_common::summary::LISTED_CLUSTERS);
        d
    }

    /// A 1,000-cluster decision reads at a glance: rows for the chosen cluster and the whole
    /// answers, the clusters by outcome, shortened lists; `-o wide` still gives each its row.
    #[test]
    fn a_thousand_clusters_are_shown_by_outcome() {
        let d = thousand();
        let text = super::super::table::render_labelled(&d, "refused: ", false);
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
        let wide = super::super::table::render_labelled(&d, "refused: ", true);
        assert!(wide.lines().filter(|l| l.contains(" c0")).count() >= 1000);
        assert!(!wide.contains("by outcome"));
    }

    #[test]
    fn names_are_shortened_unless_all_are_asked() {
        let n = ["a", "b", "c", "d", "e"];
        assert_eq!(names(&n, false), "a, b, c and 2 more");
        assert_eq!(names(&n, true), "a, b, c, d and e");
        assert_eq!(names(&n[..3], false), "a, b and c");
        assert_eq!(names(&n[..1], false), "a");
    }
}
