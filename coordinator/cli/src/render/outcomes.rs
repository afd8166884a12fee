//! A large decision at a glance: past [`LISTED`] clusters the table view groups the clusters
//! by outcome instead of giving each its row (`-o wide` lists every cluster).
//!
//! An outcome is what a user asks first about a cluster: chosen; feasible but dropped by a
//! named step of the cluster choice; not feasible, with what failed; or no usable answer
//! (timed out, unreachable, error with its code).

use fedvol_common::decision::{ChoiceStep, ClusterDecision, ClusterStatus, Decision, Rejection};
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
    match dropped_by(d, name) {
        Some((step, _)) => format!("feasible, dropped by {}", step.rule),
        None => "feasible".into(),
    }
}

/// The first step of the cluster choice that dropped `cluster`, with its rejection (the
/// reasons it lost), or `None` when no step dropped it (it was chosen, or never a candidate).
pub fn dropped_by<'d>(d: &'d Decision, cluster: &str) -> Option<(&'d ChoiceStep, &'d Rejection)> {
    d.choice
        .iter()
        .find_map(|s| s.dropped.iter().find(|r| r.candidate == cluster).map(|r| (s, r)))
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

    #[test]
    fn names_are_shortened_unless_all_are_asked() {
        let n = ["a", "b", "c", "d", "e"];
        assert_eq!(names(&n, false), "a, b, c and 2 more");
        assert_eq!(names(&n, true), "a, b, c, d and e");
        assert_eq!(names(&n[..3], false), "a, b and c");
        assert_eq!(names(&n[..1], false), "a");
    }
}
