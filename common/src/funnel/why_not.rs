//! Why not: for a request and a named zone, host or provisioner, every funnel stage that
//! rejected it, with every rule it broke and a hint where the fix is a number the user can act
//! on. Pure: the agent answers `why_not` with it, and offline `fedvol plan --why-not` runs it
//! on the inventory files.

use crate::decision::{Decision, Reason, StageTrace, codes};
use crate::funnel::{ClusterState, PlanRequest};
use crate::model::Inventory;
use crate::size::ByteSize;

/// What to explain: a zone, a host and/or a provisioner (at least one should be set; with none,
/// nothing is named and nothing is found).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    /// A zone name.
    #[serde(default)]
    pub zone: Option<String>,
    /// A host name.
    #[serde(default)]
    pub host: Option<String>,
    /// A provisioner (storage class) name.
    #[serde(default)]
    pub provisioner: Option<String>,
}

impl Target {
    /// True when nothing is named.
    pub fn is_empty(&self) -> bool {
        self.zone.is_none() && self.host.is_none() && self.provisioner.is_none()
    }

    /// "zone z, host h, provisioner p": what was named, in words.
    pub fn describe(&self) -> String {
        [
            self.zone.as_ref().map(|z| format!("zone {z}")),
            self.host.as_ref().map(|h| format!("host {h}")),
            self.provisioner.as_ref().map(|p| format!("provisioner {p}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
    }

    /// True when the stage candidate `cand` of `stage` is what was named: a zone (zone stages
    /// name zones, host stages name `zone/host`), a host, or a provisioner (provisioner and
    /// volume-search stages name provisioners).
    pub fn names(&self, cand: &str, stage: &str) -> bool {
        let kind = stage.split('.').next().unwrap_or("");
        let (cz, ch) = cand.split_once('/').map_or((cand, None), |(z, h)| (z, Some(h)));
        let zone_hit = self
            .zone
            .as_deref()
            .is_some_and(|z| cz == z && (kind == "zone" || kind == "host"));
        let host_hit = self.host.as_deref().is_some_and(|h| kind == "host" && ch == Some(h));
        let prov_hit = self
            .provisioner
            .as_deref()
            .is_some_and(|p| cand == p && (kind == "provisioner" || kind == "volume"));
        zone_hit || host_hit || prov_hit
    }
}

/// One stage that blocked a candidate, with every rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Blocker {
    /// Stage name.
    pub stage: String,
    /// The volume or job the stage ran for.
    pub subject: String,
    /// The candidate as the stage names it (`zone/host` for hosts).
    pub candidate: String,
    /// Every reason.
    pub reasons: Vec<Reason>,
    /// A hint where one exists ("fits if size <= 800GiB").
    #[serde(default)]
    pub hint: Option<String>,
}

impl Blocker {
    /// The blocker a stage record's listed rejection `r` makes, without a hint.
    pub fn listed(t: &StageTrace, r: &crate::decision::Rejection) -> Blocker {
        Blocker {
            stage: t.stage.clone(),
            subject: t.subject.clone(),
            candidate: r.candidate.clone(),
            reasons: r.reasons.clone(),
            hint: None,
        }
    }
}

/// The explanation: every blocker, in funnel order, and a one-line summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// Every stage that rejected the named candidate(s); empty when it passed every stage.
    pub blockers: Vec<Blocker>,
    /// A one-line summary naming the cluster.
    pub summary: String,
}

/// A hint for a reason, where the fix is a number the user can act on.
fn hint(inv: &Inventory, code: &str, cand: &str) -> Option<String> {
    match code {
        codes::CAPACITY => inv
            .volumes
            .iter()
            .find(|v| v.name == cand)
            .map(|v| format!("fits if size <= {}", ByteSize(v.capacity.0))),
        codes::NOT_READY => Some(format!("fits once provisioner `{cand}` is READY")),
        codes::POWERED_OFF => Some("fits once the host is powered on".into()),
        _ => None,
    }
}

/// Re-plans `req` on `inv` and `state` with every rejection listed (no trace limit) and
/// reports each stage that rejected `target` in cluster `cluster`.
pub fn why_not(
    cluster: &str,
    inv: &Inventory,
    state: &ClusterState,
    req: &PlanRequest,
    target: &Target,
) -> Explanation {
    why_not_as(cluster, inv, state, req, target, None)
}

/// [`why_not`] on a cluster that runs jobs as their users, with the agent's verdict on the
/// request's user (see [`crate::funnel::plan_prepared_as`]).
pub fn why_not_as(
    cluster: &str,
    inv: &Inventory,
    state: &ClusterState,
    req: &PlanRequest,
    target: &Target,
    run_as: Option<&crate::funnel::RunAs>,
) -> Explanation {
    let mut full = req.clone();
    full.trace_limit = 0;
    let d = crate::funnel::plan_prepared_as(inv, &crate::funnel::Prepared::for_one_plan(inv), state, &full, run_as);
    let blockers: Vec<Blocker> = d
        .trace
        .iter()
        .flat_map(|t: &StageTrace| {
            t.rejected
                .iter()
                .filter(|r| target.names(&r.candidate, &t.stage))
                .map(move |r| Blocker {
                    hint: r.reasons.iter().find_map(|x| hint(inv, &x.code, &r.candidate)),
                    ..Blocker::listed(t, r)
                })
        })
        .collect();
    let summary = summarize(&target.describe(), cluster, &blockers);
    Explanation { blockers, summary }
}

/// The one-line summary of `blockers` for `named` in `cluster`: the first blocking stage with
/// its reasons, then the other stages by name ("and at N more stages" lists them).
fn summarize(named: &str, cluster: &str, blockers: &[Blocker]) -> String {
    match blockers.first() {
        None => format!("{named}: not rejected by any stage of cluster {cluster} for this request"),
        Some(b) => {
            let more: Vec<String> = blockers[1..]
                .iter()
                .map(|x| format!("{} for {}", x.stage, x.subject))
                .collect();
            format!(
                "{named}: blocked at {} for {} ({}){}",
                b.stage,
                b.subject,
                b.reasons
                    .iter()
                    .map(|r| r.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
                if more.is_empty() {
                    String::new()
                } else {
                    format!(", and at {} more stage(s): {}", more.len(), more.join(", "))
                }
            )
        }
    }
}

/// The names of `target` that `inv` does not have (a zone, a host or a provisioner), in words:
/// a name nobody has is an error to report, not a candidate "not rejected".
pub fn unknown_names(inv: &Inventory, target: &Target) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(z) = &target.zone
        && !inv.zones.iter().any(|x| &x.name == z)
    {
        out.push(format!("zone `{z}`"));
    }
    if let Some(h) = &target.host
        && !inv.zones.iter().any(|z| z.hosts.iter().any(|x| &x.name == h))
    {
        out.push(format!("host `{h}`"));
    }
    if let Some(p) = &target.provisioner
        && !inv.provisioners.iter().any(|x| &x.name == p)
    {
        out.push(format!("provisioner `{p}`"));
    }
    out
}

/// Why a candidate lost, read from a stored decision instead of re-planned: what
/// the cluster's stored trace says of it, whether it was chosen, and how the cluster itself
/// fared in the cross-cluster choice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordedExplanation {
    /// The inventory version the cluster planned on, as stored.
    #[serde(default)]
    pub inventory_version: Option<String>,
    /// Every stored stage rejection of the candidate, in funnel order (no hints: the record
    /// keeps reasons only).
    #[serde(default)]
    pub blockers: Vec<Blocker>,
    /// What the candidate was chosen for (`volume scratch`, `job train`).
    #[serde(default)]
    pub chosen_for: Vec<String>,
    /// Stages whose stored listing was cut (`--trace-limit`) without naming the candidate: the
    /// record cannot say whether they rejected it.
    #[serde(default)]
    pub unlisted_stages: Vec<String>,
    /// The cross-cluster choice step that dropped the cluster, as a blocker (stage
    /// `cluster.<rule>`, candidate the cluster), when it was not chosen.
    #[serde(default)]
    pub cluster_choice: Option<Blocker>,
    /// A one-line summary.
    pub summary: String,
}

impl RecordedExplanation {
    /// The answer for a cluster that took no part in the decision.
    pub fn absent(cluster: &str) -> RecordedExplanation {
        RecordedExplanation {
            inventory_version: None,
            blockers: Vec::new(),
            chosen_for: Vec::new(),
            unlisted_stages: Vec::new(),
            cluster_choice: None,
            summary: format!("cluster {cluster} took no part in this decision"),
        }
    }
}

/// The cross-cluster choice step of `d` that dropped `cluster`, as a blocker (stage
/// `cluster.<rule>`, subject the workflow, candidate the cluster); `None` when no step did.
pub fn choice_blocker(d: &Decision, cluster: &str) -> Option<Blocker> {
    d.choice.iter().find_map(|step| {
        step.dropped.iter().find(|r| r.candidate == cluster).map(|r| Blocker {
            stage: format!("cluster.{}", step.rule),
            subject: d.workflow.clone(),
            candidate: cluster.to_string(),
            reasons: r.reasons.clone(),
            hint: None,
        })
    })
}

/// Reads, from the stored decision `d`, why `target` was not chosen in `cluster` (see
/// [`RecordedExplanation`]). Pure; `cluster` must be one of `d`'s clusters (else the answer
/// says the decision has no such cluster).
pub fn from_record(d: &Decision, cluster: &str, target: &Target) -> RecordedExplanation {
    let named = target.describe();
    let Some(c) = d.clusters.get(cluster) else {
        return RecordedExplanation::absent(cluster);
    };
    let mut blockers = Vec::new();
    let mut unlisted = Vec::new();
    for t in &c.trace {
        let mut found = false;
        for r in t.rejected.iter().filter(|r| target.names(&r.candidate, &t.stage)) {
            found = true;
            blockers.push(Blocker::listed(t, r));
        }
        if !found && t.omitted > 0 && stage_kind_matches(target, &t.stage) {
            unlisted.push(format!("{} for {}", t.stage, t.subject));
        }
    }
    let mut chosen_for = Vec::new();
    for (k, v) in &c.volumes {
        if v.error.is_none() && target.provisioner.is_some() && v.provisioner == target.provisioner {
            chosen_for.push(format!("volume {k}"));
        }
    }
    for (k, j) in &c.jobs {
        if j.error.is_some() {
            continue;
        }
        let zone_hit = target.zone.is_some() && j.zone == target.zone;
        let host_hit = target
            .host
            .as_ref()
            .is_some_and(|h| j.host.as_ref() == Some(h) || j.hosts.contains(h));
        if zone_hit || host_hit {
            chosen_for.push(format!("job {k}"));
        }
    }
    let cluster_choice = choice_blocker(d, cluster);
    let mut summary = if blockers.is_empty() {
        if c.summarized && chosen_for.is_empty() {
            format!(
                "{named}: cluster {cluster}'s answer is stored as a summary (it was neither chosen nor a runner-up), which counts rejections per stage without naming candidates; its agent re-plans to name them (why-not on the live cluster)"
            )
        } else if chosen_for.is_empty() {
            format!("{named}: no stored stage of cluster {cluster} rejects it")
        } else {
            format!("{named}: chosen in cluster {cluster} for {}", chosen_for.join(", "))
        }
    } else {
        summarize(&named, cluster, &blockers)
    };
    if let Some(b) = &cluster_choice {
        let why: Vec<&str> = b.reasons.iter().map(|r| r.message.as_str()).collect();
        summary.push_str(&format!(
            "; cluster {cluster} itself lost the cluster choice at {} ({})",
            b.stage.trim_start_matches("cluster."),
            why.join("; ")
        ));
    }
    RecordedExplanation {
        inventory_version: c.inventory_version.clone(),
        blockers,
        chosen_for,
        unlisted_stages: unlisted,
        cluster_choice,
        summary,
    }
}

/// True when `stage` is a kind of stage that could name `target` (zone and host stages for a
/// zone, host stages for a host, provisioner and volume stages for a provisioner).
fn stage_kind_matches(target: &Target, stage: &str) -> bool {
    let kind = stage.split('.').next().unwrap_or("");
    (target.zone.is_some() && (kind == "zone" || kind == "host"))
        || (target.host.is_some() && kind == "host")
        || (target.provisioner.is_some() && (kind == "provisioner" || kind == "volume"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn further_blocking_stages_are_named() {
        let b = |stage: &str| Blocker {
            stage: stage.into(),
            subject: "j".into(),
            candidate: "z/h".into(),
            reasons: vec![Reason::new("x", "why")],
            hint: None,
        };
        let s = summarize("host h", "c", &[b("host.power"), b("host.capacity"), b("host.network")]);
        assert!(
            s.ends_with("and at 2 more stage(s): host.capacity for j, host.network for j"),
            "{s}"
        );
    }
}
