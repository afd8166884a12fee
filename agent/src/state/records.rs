//! The records the agent keeps durably (in redb, as JSON values): holds, commits, the volumes
//! fedvol created or bound, and completions. Each record carries the exact reply given for its
//! request, so a repeated request id gets the same answer (idempotency, docs/design.md §5).

use fedvol_common::decision::{HostAllocation, NewVolume};
use fedvol_common::funnel::VolumeId;
use fedvol_common::model::PersistentVolume;
use fedvol_proto::agent::{ActionReply, VolumeEvent};

use super::reply::{HeldReply, ReplyText};

/// A reservation: what a plan chose, held under a lease until commit, release or expiry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hold {
    /// The request (idempotency key).
    pub request_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Lapse time, ms since the epoch.
    pub expires_ms: u64,
    /// The reply the plan gave (returned again for a repeated request id), decoded for the
    /// ledger and encoded once ([`super::reply`]).
    pub reply: HeldReply,
    /// A commit of this hold has started (drivers may have created assets).
    #[serde(default)]
    pub committing: bool,
    /// When that commit began (admission at commit: when its capacity was taken), ms since the
    /// epoch; 0 when not committing (or written by an earlier release). Stamps the new volumes'
    /// `Provisioning` event.
    #[serde(default)]
    pub committing_since_ms: u64,
    /// The Kubernetes claims of the request by volume key (a bound volume's claimRef names them).
    #[serde(default)]
    pub claims: std::collections::BTreeMap<String, fedvol_common::model::ClaimRef>,
    /// The request's (federation) user, whose mapped account runs its jobs: an interrupted
    /// commit's jobs are cancelled as that account. Empty in holds of earlier releases.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
}

impl Hold {
    /// Capacity the hold takes on hosts.
    pub fn allocations(&self) -> &[HostAllocation] {
        &self.reply.decision.allocations
    }

    /// Existing volumes the hold will bind.
    pub fn bound_volumes(&self) -> Vec<VolumeId> {
        self.reply
            .decision
            .volumes
            .values()
            .filter(|v| v.action == Some(fedvol_common::decision::Action::Bind))
            .filter_map(|v| {
                v.volume.clone().map(|name| VolumeId {
                    provisioner: v.provisioner.clone(),
                    name,
                })
            })
            .collect()
    }

    /// New volumes the hold will provision, with their workflow volume keys.
    pub fn new_volumes(&self) -> Vec<(String, NewVolume)> {
        self.reply
            .decision
            .volumes
            .iter()
            .filter_map(|(k, v)| v.new_volume.clone().map(|n| (k.clone(), n)))
            .collect()
    }
}

/// How a committed request holds a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// An existing Available volume was bound to the request (the Kubernetes volume provisioning design).
    Bound,
    /// A new volume was provisioned for the request.
    Provisioned,
    /// A named persistent volume is used as it is (Fuzzball "Annotations and Selection").
    Existing,
}

/// One volume of a committed request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommittedVolume {
    /// The workflow's volume key.
    pub key: String,
    /// The volume.
    pub id: VolumeId,
    /// How it is held.
    pub holding: Holding,
}

/// A committed request: durable allocations and volumes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Commit {
    /// The request.
    pub request_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Host capacity it holds (until completion).
    pub allocations: Vec<HostAllocation>,
    /// Its volumes.
    pub volumes: Vec<CommittedVolume>,
    /// The reply the commit gave.
    pub reply: ActionReply,
    /// The plan reply the hold had (so a repeated reserving plan after commit answers the same),
    /// kept as its text, the hold's own ([`super::reply`]).
    pub plan_reply: ReplyText,
    /// The reply of `complete`, once the workflow ended.
    #[serde(default)]
    pub completion: Option<ActionReply>,
    /// When the completion was recorded, ms since the epoch (0 in records written before this
    /// field existed). A completed commit is kept for [`super::core::COMPLETED_RETENTION_MS`]
    /// after it, then pruned.
    #[serde(default)]
    pub completed_ms: u64,
    /// The batch jobs the commit submitted to the cluster's resource manager (Slurm), with the
    /// states last seen; empty when the cluster runs no jobs. While a job runs or has ended,
    /// its capacity is Slurm's to count: its allocations are no longer in `allocations`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<fedvol_proto::batch::BatchJob>,
}

/// A volume fedvol created or bound, with its current record and events.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ManagedVolume {
    /// The volume record as it now stands (phase, claimRef...).
    pub pv: std::sync::Arc<PersistentVolume>,
    /// Where its asset is (driver source), for volumes fedvol provisioned.
    #[serde(default)]
    pub source: Option<String>,
    /// True when fedvol provisioned it (false: an inventory volume fedvol bound).
    pub provisioned: bool,
    /// The asset was deleted and the record is gone from the cluster's view.
    #[serde(default)]
    pub deleted: bool,
    /// Lifecycle events, oldest first (the Kubernetes volume provisioning design vocabulary).
    pub events: Vec<VolumeEvent>,
}

impl ManagedVolume {
    /// The volume's identity.
    pub fn id(&self) -> VolumeId {
        VolumeId {
            provisioner: self.pv.provisioner.clone(),
            name: self.pv.name.clone(),
        }
    }
}
