//! `fedvol plan --why-not-zone/--why-not-host/--why-not-provisioner`: the offline explanation
//! of any candidate, per cluster, by the same funnel logic an agent's `why_not` runs
//! ([`fedvol_common::funnel::why_not`]), on the inventory files.

use fedvol_common::funnel::why_not::{Blocker, Target, unknown_names, why_not};
use fedvol_common::funnel::{ClusterState, PlanRequest};
use fedvol_common::model::Inventory;

/// What to explain in `fedvol plan`.
#[derive(Debug, Clone, Default, clap::Args)]
#[group(skip)]
#[command(group(
    clap::ArgGroup::new("why_not_target")
        .multiple(true)
        .args(["zone", "host", "provisioner"])
))]
pub struct ExplainArgs {
    /// Explain why this zone was not chosen (in every cluster, or the one --why-not-cluster
    /// names).
    #[arg(long = "why-not-zone", value_name = "ZONE")]
    pub zone: Option<String>,
    /// Explain why this host was not chosen.
    #[arg(long = "why-not-host", value_name = "HOST")]
    pub host: Option<String>,
    /// Explain why this provisioner (storage class) was not chosen.
    #[arg(long = "why-not-provisioner", value_name = "PROVISIONER")]
    pub provisioner: Option<String>,
    /// Explain in this cluster only (default: every cluster given); needs one of the three
    /// above.
    #[arg(long = "why-not-cluster", value_name = "CLUSTER", requires = "why_not_target")]
    pub cluster: Option<String>,
}

/// One cluster's explanation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Explained {
    /// The cluster.
    pub cluster: String,
    /// A one-line summary.
    pub summary: String,
    /// Every stage that rejected the named candidate(s).
    pub blockers: Vec<Blocker>,
}

impl ExplainArgs {
    /// The named candidate(s); `None` when nothing is to be explained.
    pub fn target(&self) -> Option<Target> {
        let t = Target {
            zone: self.zone.clone(),
            host: self.host.clone(),
            provisioner: self.provisioner.clone(),
        };
        (!t.is_empty()).then_some(t)
    }

    /// Explains the target in each cluster of `inventories` (or the named one).
    ///
    /// Errors: a `--why-not-cluster` that is none of the inventories' clusters (the sentence
    /// names the known ones); a zone, host or provisioner no asked cluster has. A cluster
    /// without the name says so instead of "not rejected".
    pub fn explain(&self, inventories: &[Inventory], req: &PlanRequest) -> Result<Vec<Explained>, String> {
        let Some(target) = self.target() else {
            return Ok(Vec::new());
        };
        if let Some(c) = &self.cluster
            && !inventories.iter().any(|i| &i.cluster == c)
        {
            let known: Vec<&str> = inventories.iter().map(|i| i.cluster.as_str()).collect();
            return Err(format!(
                "--why-not-cluster `{c}` is not one of the inventories' clusters ({})",
                known.join(", ")
            ));
        }
        let state = ClusterState::default();
        let asked: Vec<&Inventory> = inventories
            .iter()
            .filter(|i| self.cluster.as_ref().is_none_or(|c| c == &i.cluster))
            .collect();
        // A name no asked cluster has is an error, not "not rejected".
        if asked.iter().all(|inv| !unknown_names(inv, &target).is_empty()) {
            let first = asked.first().map(|inv| unknown_names(inv, &target)).unwrap_or_default();
            return Err(format!(
                "no inventory given has {} (clusters: {})",
                first.join(", no "),
                asked.iter().map(|i| i.cluster.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(asked
            .into_iter()
            .map(|inv| {
                let unknown = unknown_names(inv, &target);
                if !unknown.is_empty() {
                    return Explained {
                        cluster: inv.cluster.clone(),
                        summary: format!("cluster {} has no {}", inv.cluster, unknown.join(", no ")),
                        blockers: Vec::new(),
                    };
                }
                let e = why_not(&inv.cluster, inv, &state, req, &target);
                Explained {
                    cluster: inv.cluster.clone(),
                    summary: e.summary,
                    blockers: e.blockers,
                }
            })
            .collect())
    }
}

/// The table view of the explanations: each cluster's, one after the other.
pub fn render(explained: &[Explained]) -> String {
    let mut s = String::new();
    for e in explained {
        s.push_str(&format!("\nwhy not, in cluster {}:\n", e.cluster));
        s.push_str(&crate::render::why_not::render(&e.summary, &e.blockers));
    }
    s
}
