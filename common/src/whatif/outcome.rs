//! What a decision was or would be, in the terms a what-if compares (docs/design.md §2.7): the
//! cluster, per volume its provisioner and volume, per job its zone and hosts; or refused,
//! with a reason code. And how two outcomes differ ([`Transition`]).

use indexmap::IndexMap;

use crate::decision::{Action, ClusterDecision, Reason};
use crate::unplaced::{Unplaced, why_unplaced};

/// Reason codes a what-if gives to a decision no cluster would take (beside the codes a
/// stored record gives: `quota_exceeded`, `queued`, `nothing_fits`...).
pub mod codes {
    /// Every cluster answered and none can place it now (`fedvol plan` exits 2).
    pub const NOTHING_FITS: &str = "nothing_fits";
    /// Every cluster answered and none can ever place it as it is ([`crate::unplaced`]).
    pub const UNRESOLVABLE: &str = "unresolvable";
    /// No cluster is left to plan on (every one removed or drained, or none answered).
    pub const NO_CLUSTER: &str = "no_cluster";
    /// Only drained clusters can place it (an operator's drain, or the what-if's `--drain`):
    /// the choice's `drained` rule dropped them, as a coordinator refuses such a submit.
    pub const CLUSTERS_DRAINED: &str = "clusters_drained";
    /// A queued decision (it waited for capacity when it was recorded).
    pub const QUEUED: &str = "queued";
}

/// The provisioner and volume a volume request got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VolumePick {
    /// Provisioner (storage class); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioner: Option<String>,
    /// The persistent volume's name; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// `bind`, `provision` or `existing`; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
}

/// The zone and hosts a job got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobPick {
    /// Zone; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Hosts (one for a single-host job).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// Where a decision's work went, or why it went nowhere.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// The cluster; absent when refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Per volume key (workflow order), on `cluster`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub volumes: IndexMap<String, VolumePick>,
    /// Per job (workflow order), on `cluster`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub jobs: IndexMap<String, JobPick>,
    /// Why no cluster takes it, when none does: a stable code and a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Reason>,
}

impl Outcome {
    /// Placed on `cluster` as its answer `slot` says.
    pub fn placed(cluster: &str, slot: &ClusterDecision) -> Outcome {
        Outcome {
            cluster: Some(cluster.to_string()),
            volumes: slot
                .volumes
                .iter()
                .map(|(k, v)| {
                    let pick = VolumePick {
                        provisioner: v.provisioner.clone(),
                        volume: v.volume.clone(),
                        action: v.action,
                    };
                    (k.clone(), pick)
                })
                .collect(),
            jobs: slot
                .jobs
                .iter()
                .map(|(k, j)| {
                    let hosts = if j.hosts.is_empty() {
                        j.host.iter().cloned().collect()
                    } else {
                        j.hosts.clone()
                    };
                    (
                        k.clone(),
                        JobPick {
                            zone: j.zone.clone(),
                            hosts,
                        },
                    )
                })
                .collect(),
            refused: None,
        }
    }

    /// Refused with `code` and `message`.
    pub fn refused(code: &str, message: impl Into<String>) -> Outcome {
        Outcome {
            refused: Some(Reason::new(code, message)),
            ..Outcome::default()
        }
    }

    /// Refused because no cluster of `clusters` (the plan's slots, in the order asked) was
    /// chosen: `no_cluster` when there is none, `unresolvable` when each fails for good
    /// ([`why_unplaced`]), else `nothing_fits`; the sentence names each cluster with the first
    /// volume or job it could not place (its error code), as `fedvol plan`'s decision does.
    pub fn unplaced(clusters: &IndexMap<String, ClusterDecision>) -> Outcome {
        if clusters.is_empty() {
            return Outcome::refused(codes::NO_CLUSTER, "no cluster is left to plan on");
        }
        let code = match why_unplaced(clusters) {
            Unplaced::Unresolvable(_) => codes::UNRESOLVABLE,
            Unplaced::Unanswered(_) | Unplaced::NothingFits => codes::NOTHING_FITS,
        };
        let per: Vec<String> = clusters
            .iter()
            .map(|(name, c)| format!("{name}: {}", first_error(c)))
            .collect();
        Outcome::refused(code, format!("no cluster can place it: {}", per.join("; ")))
    }

    /// [`Outcome::unplaced`], unless clusters that can place it were drained (`drains`, by
    /// cluster): then `clusters_drained`, as a coordinator refuses it
    /// ([`crate::unplaced::drained_fits`]), naming each with its drain (an operator's, from
    /// `in_force`, or `drained by this what-if`), and each other cluster with the first volume
    /// or job it could not place.
    pub fn unplaced_drained(
        clusters: &IndexMap<String, ClusterDecision>,
        drains: &crate::drain::Drains,
        in_force: &crate::drain::Drains,
    ) -> Outcome {
        let fits = crate::unplaced::drained_fits(clusters, drains);
        if fits.is_empty() {
            return Outcome::unplaced(clusters);
        }
        let named: Vec<String> = fits
            .iter()
            .map(|(name, _)| match in_force.get(*name) {
                Some(d) => format!("{name} ({})", d.describe()),
                None => format!("{name} (drained by this what-if)"),
            })
            .collect();
        let elsewhere: Vec<String> = clusters
            .iter()
            .filter(|(name, _)| !drains.contains_key(*name))
            .map(|(name, c)| format!("{name}: {}", first_error(c)))
            .collect();
        let mut message = format!("it fits only on drained clusters: {}", named.join(", "));
        if !elsewhere.is_empty() {
            message.push_str(&format!("; elsewhere: {}", elsewhere.join("; ")));
        }
        Outcome::refused(codes::CLUSTERS_DRAINED, message)
    }

    /// Volume request `k`'s pick as `provisioner/volume` (`-` for a part not known), `-` when
    /// the outcome has none.
    pub fn volume_text(&self, k: &str) -> String {
        self.volumes.get(k).map_or("-".to_string(), |v| {
            format!(
                "{}/{}",
                v.provisioner.as_deref().unwrap_or("-"),
                v.volume.as_deref().unwrap_or("-")
            )
        })
    }

    /// Job `k`'s pick as `zone/host,host` (`-` for no zone), `-` when the outcome has none.
    pub fn job_text(&self, k: &str) -> String {
        self.jobs.get(k).map_or("-".to_string(), |j| {
            format!("{}/{}", j.zone.as_deref().unwrap_or("-"), j.hosts.join(","))
        })
    }

    /// The cluster-level view of the outcome: the cluster, or `None` when refused.
    pub fn where_(&self) -> Option<&str> {
        self.cluster.as_deref()
    }

    /// The same cluster but another provisioner, volume, zone or host for some volume or job.
    pub fn placed_otherwise(&self, other: &Outcome) -> bool {
        self.cluster.is_some()
            && self.cluster == other.cluster
            && (self.volumes != other.volumes || self.jobs != other.jobs)
    }
}

/// The first thing `c` could not place, as `volume v: code` or `job j: code` (or the cluster's
/// own error, or `not feasible`).
fn first_error(c: &ClusterDecision) -> String {
    if let Some(e) = &c.error {
        return e.code.clone();
    }
    let volumes = c
        .volumes
        .iter()
        .filter_map(|(k, v)| v.error.as_ref().map(|e| format!("volume {k}: {}", e.code)));
    let jobs = c
        .jobs
        .iter()
        .filter_map(|(k, j)| j.error.as_ref().map(|e| format!("job {k}: {}", e.code)));
    volumes.chain(jobs).next().unwrap_or_else(|| "not feasible".to_string())
}

/// How a decision's outcome changes between two runs, at the level of clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// The same cluster, or refused both times.
    Stays,
    /// Another cluster.
    Moves,
    /// Placed before, refused now.
    PlacedToRefused,
    /// Refused before, placed now.
    RefusedToPlaced,
}

impl Transition {
    /// From `was` to `now`.
    pub fn of(was: &Outcome, now: &Outcome) -> Transition {
        match (was.where_(), now.where_()) {
            (Some(a), Some(b)) if a == b => Transition::Stays,
            (Some(_), Some(_)) => Transition::Moves,
            (Some(_), None) => Transition::PlacedToRefused,
            (None, Some(_)) => Transition::RefusedToPlaced,
            (None, None) => Transition::Stays,
        }
    }

    /// The wire name (`stays`, `moves`, `placed_to_refused`, `refused_to_placed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Stays => "stays",
            Transition::Moves => "moves",
            Transition::PlacedToRefused => "placed_to_refused",
            Transition::RefusedToPlaced => "refused_to_placed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{ClusterStatus, JobDecision};

    #[test]
    fn transitions_are_read_at_the_level_of_clusters() {
        let a = Outcome {
            cluster: Some("a".into()),
            ..Outcome::default()
        };
        let b = Outcome {
            cluster: Some("b".into()),
            ..Outcome::default()
        };
        let no = Outcome::refused(codes::NOTHING_FITS, "x");
        assert_eq!(Transition::of(&a, &a), Transition::Stays);
        assert_eq!(Transition::of(&a, &b), Transition::Moves);
        assert_eq!(Transition::of(&a, &no), Transition::PlacedToRefused);
        assert_eq!(Transition::of(&no, &b), Transition::RefusedToPlaced);
        assert_eq!(Transition::of(&no, &no), Transition::Stays);
    }

    #[test]
    fn an_unplaced_plan_names_each_clusters_first_failure() {
        assert_eq!(
            Outcome::unplaced(&IndexMap::new()).refused.unwrap().code,
            codes::NO_CLUSTER
        );
        let mut c = ClusterDecision::without_answer(ClusterStatus::Answered, 0.0, None);
        c.jobs.insert(
            "train".into(),
            JobDecision {
                error: Some(Reason::new("no_zone", "x")),
                ..Default::default()
            },
        );
        let d = ClusterDecision::without_answer(ClusterStatus::Answered, 0.0, Some(Reason::new("drained", "x")));
        let slots = IndexMap::from([("a".to_string(), c), ("b".to_string(), d)]);
        let r = Outcome::unplaced(&slots).refused.unwrap();
        assert_eq!(r.code, codes::NOTHING_FITS);
        assert_eq!(r.message, "no cluster can place it: a: job train: no_zone; b: drained");
    }
}
