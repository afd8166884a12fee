//! Comparing a replayed decision with the stored one (docs/design.md §2: same inventory snapshot,
//! state, request and seed give the same answer). Only what a cluster decided counts: each
//! volume's mode, provisioner, volume, action and error code; each job's zone, host(s) and
//! error code; feasibility. Measured times never do. A cluster whose inventory version moved
//! on is noted, since its answer may then differ for good reason.

use fedvol_common::decision::{ClusterDecision, ClusterStatus, JobDecision, VolumeDecision};

/// One cluster's comparison.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterDiff {
    /// Differences in volumes, jobs or feasibility (each a sentence starting with the cluster).
    pub differences: Vec<String>,
    /// Notes that do not make the answers differ (inventory version changed).
    pub notes: Vec<String>,
}

fn code(e: &Option<fedvol_common::decision::Reason>) -> String {
    e.as_ref().map_or("none".to_string(), |r| r.code.clone())
}

fn text(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "none".to_string())
}

/// A unit enum's wire name (`provision`, `by_name`), or `none`.
fn name<T: serde::Serialize>(v: &Option<T>) -> String {
    match v {
        Some(x) => serde_json::to_string(x)
            .unwrap_or_default()
            .trim_matches('"')
            .to_string(),
        None => "none".to_string(),
    }
}

fn volume_fields(v: &VolumeDecision) -> Vec<(&'static str, String)> {
    vec![
        ("mode", name(&Some(v.mode))),
        ("provisioner", text(&v.provisioner)),
        ("volume", text(&v.volume)),
        ("action", name(&v.action)),
        ("error", code(&v.error)),
    ]
}

fn job_fields(j: &JobDecision) -> Vec<(&'static str, String)> {
    vec![
        ("zone", text(&j.zone)),
        ("host", text(&j.host)),
        ("hosts", j.hosts.join(",")),
        ("error", code(&j.error)),
    ]
}

fn compare_fields(
    out: &mut Vec<String>,
    cluster: &str,
    kind: &str,
    key: &str,
    was: Vec<(&'static str, String)>,
    now: Vec<(&'static str, String)>,
) {
    for ((field, a), (_, b)) in was.into_iter().zip(now) {
        if a != b {
            out.push(format!("{cluster}: {kind} `{key}`: {field} was {a}, now {b}"));
        }
    }
}

/// Compares one cluster's stored answer with its replayed one.
pub fn compare_cluster(cluster: &str, stored: &ClusterDecision, replayed: &ClusterDecision) -> ClusterDiff {
    let mut d = ClusterDiff::default();
    if replayed.status != ClusterStatus::Answered {
        let why = replayed
            .error
            .as_ref()
            .map(|e| format!(": {}", e.message))
            .unwrap_or_default();
        d.differences.push(format!(
            "{cluster}: did not answer the replay ({}{why})",
            name(&Some(replayed.status))
        ));
        return d;
    }
    if let (Some(a), Some(b)) = (&stored.inventory_version, &replayed.inventory_version)
        && a != b
    {
        d.notes.push(format!(
            "{cluster}: inventory version changed since the decision ({a} → {b})"
        ));
    }
    if stored.feasible != replayed.feasible {
        d.differences.push(format!(
            "{cluster}: feasible was {}, now {}",
            stored.feasible, replayed.feasible
        ));
    }
    for (k, v) in &stored.volumes {
        match replayed.volumes.get(k) {
            Some(r) => compare_fields(
                &mut d.differences,
                cluster,
                "volume",
                k,
                volume_fields(v),
                volume_fields(r),
            ),
            None => d
                .differences
                .push(format!("{cluster}: volume `{k}` is missing from the replay")),
        }
    }
    for k in replayed.volumes.keys().filter(|k| !stored.volumes.contains_key(*k)) {
        d.differences
            .push(format!("{cluster}: volume `{k}` appears only in the replay"));
    }
    for (k, j) in &stored.jobs {
        match replayed.jobs.get(k) {
            Some(r) => compare_fields(&mut d.differences, cluster, "job", k, job_fields(j), job_fields(r)),
            None => d
                .differences
                .push(format!("{cluster}: job `{k}` is missing from the replay")),
        }
    }
    for k in replayed.jobs.keys().filter(|k| !stored.jobs.contains_key(*k)) {
        d.differences
            .push(format!("{cluster}: job `{k}` appears only in the replay"));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::decision::{Action, Mode, Reason};

    fn answer(provisioner: &str, host: &str, version: &str) -> ClusterDecision {
        let mut c = ClusterDecision::without_answer(ClusterStatus::Answered, 3.0, None);
        c.feasible = true;
        c.inventory_version = Some(version.into());
        c.volumes.insert(
            "scratch".into(),
            VolumeDecision {
                mode: Mode::Automatic,
                provisioner: Some(provisioner.into()),
                volume: Some("v-1".into()),
                action: Some(Action::Provision),
                error: None,
                passed: Some(1),
                new_volume: None,
            },
        );
        c.jobs.insert(
            "train".into(),
            JobDecision {
                zone: Some("z1".into()),
                host: Some(host.into()),
                ..Default::default()
            },
        );
        c
    }

    #[test]
    fn same_answer_with_other_timing_is_identical() {
        let a = answer("fast", "h1", "v1");
        let mut b = a.clone();
        b.elapsed_ms = 99.0;
        assert_eq!(compare_cluster("c", &a, &b), ClusterDiff::default());
    }

    #[test]
    fn every_difference_is_named_and_version_changes_noted() {
        let a = answer("fast", "h1", "v1");
        let mut b = answer("slow", "h2", "v2");
        b.jobs.insert("extra".into(), JobDecision::default());
        let d = compare_cluster("c", &a, &b);
        assert_eq!(
            d.differences,
            [
                "c: volume `scratch`: provisioner was fast, now slow",
                "c: job `train`: host was h1, now h2",
                "c: job `extra` appears only in the replay",
            ]
        );
        assert_eq!(d.notes, ["c: inventory version changed since the decision (v1 → v2)"]);
    }

    #[test]
    fn no_answer_is_a_difference() {
        let a = answer("fast", "h1", "v1");
        let b = ClusterDecision::without_answer(
            ClusterStatus::TimedOut,
            800.0,
            Some(Reason::new("timed_out", "no answer within 800 ms")),
        );
        let d = compare_cluster("c", &a, &b);
        assert_eq!(
            d.differences,
            ["c: did not answer the replay (timed_out: no answer within 800 ms)"]
        );
    }
}
