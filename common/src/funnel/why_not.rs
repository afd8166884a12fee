//! Why not: for a request and a named zone, host or provisioner, every funnel stage that
//! rejected it, with every rule it broke and a hint where the fix is a number the user can act
//! on. Pure: the agent answers `why_not` with it, and offline `fedvol plan --why-not` runs it
//! on the inventory files.

use crate::decision::{Reason, StageTrace, codes};
use crate::funnel::{ClusterState, PlanRequest, plan_cluster};
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
    let mut full = req.clone();
    full.trace_limit = 0;
    let d = plan_cluster(inv, state, &full);
    let blockers: Vec<Blocker> = d
        .trace
        .iter()
        .flat_map(|t: &StageTrace| {
            t.rejected
                .iter()
                .filter(|r| target.names(&r.candidate, &t.stage))
                .map(move |r| Blocker {
                    stage: t.stage.clone(),
                    subject: t.subject.clone(),
                    candidate: r.candidate.clone(),
                    reasons: r.reasons.clone(),
                    hint: r.reasons.iter().find_map(|x| hint(inv, &x.code, &r.candidate)),
                })
        })
        .collect();
    let named = target.describe();
    let summary = match blockers.first() {
        None => format!("{named}: not rejected by any stage of cluster {cluster} for this request"),
        Some(b) => format!(
            "{named}: blocked at {} for {} ({}){}",
            b.stage,
            b.subject,
            b.reasons
                .iter()
                .map(|r| r.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            if blockers.len() > 1 {
                format!(", and at {} more stage(s)", blockers.len() - 1)
            } else {
                String::new()
            }
        ),
    };
    Explanation { blockers, summary }
}
