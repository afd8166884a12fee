//! One cluster's inventory: provisioners, existing volumes, projects, cloud zones and hosts.
//!
//! Built by `format::inventory` from fedvol's YAML/JSON and from Kubernetes `StorageClass` /
//! `PersistentVolume` documents. Order matters: provisioners keep inventory order because Fuzzball "Annotations and Selection"
//! selects the **first** passing provisioner.

use std::collections::BTreeMap;

use super::k8s::{AccessModes, ClaimRef, NodeAffinity, ReclaimPolicy, VolumeMode, VolumePhase};
use super::policy::Permissions;
use super::tags::Tag;
use crate::size::ByteSize;

/// Where a definition came from, for messages (`inventory.yaml:12`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// The file as given by the user.
    pub file: String,
    /// 1-based line of the definition.
    pub line: usize,
}

/// A whole cluster's inventory snapshot.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Inventory {
    /// The cluster's name (a NATS subject token: letters, digits, `-`, `_`).
    pub cluster: String,
    /// Provisioners in inventory order (fedvol definitions first, then StorageClasses in file order).
    pub provisioners: Vec<Provisioner>,
    /// Existing persistent volumes, in inventory order.
    pub volumes: Vec<std::sync::Arc<PersistentVolume>>,
    /// Projects with their zone assignments. Empty means: every zone belongs to every project,
    /// with the zone's own `priority` and no limits.
    pub projects: Vec<Project>,
    /// Cloud zones with their hosts.
    pub zones: Vec<Zone>,
    /// Content hash of the files the inventory was read from (hex, 16 chars).
    pub version: String,
}

impl Inventory {
    /// A copy without the volumes (`volumes` empty). Hosts are shared with `self` (one pointer
    /// each), so this is cheap: the agent uses it to build a new snapshot after each change.
    pub fn clone_without_volumes(&self) -> Inventory {
        Inventory {
            cluster: self.cluster.clone(),
            provisioners: self.provisioners.clone(),
            volumes: Vec::new(),
            projects: self.projects.clone(),
            zones: self.zones.clone(),
            version: self.version.clone(),
        }
    }
}

/// Lifecycle status of a provisioner (Fuzzball "Annotations and Selection" "Status check": only READY ones are selected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProvisionerStatus {
    /// Usable (the default).
    #[default]
    Ready,
    /// Turned off by an administrator.
    Disabled,
    /// Broken.
    Error,
    /// Being set up.
    Provisioning,
}

impl ProvisionerStatus {
    /// The spelling used in files and messages (`READY`...).
    pub fn as_str(self) -> &'static str {
        match self {
            ProvisionerStatus::Ready => "READY",
            ProvisionerStatus::Disabled => "DISABLED",
            ProvisionerStatus::Error => "ERROR",
            ProvisionerStatus::Provisioning => "PROVISIONING",
        }
    }
}

/// How a provisioner creates storage: the `driver` block of a Fuzzball provisioner definition
/// (Fuzzball's provisioner definition reference, "Driver"), every documented type and field with
/// Fuzzball's spelling in files, plus fedvol's `external` type (the Kubernetes volume provisioning design out-of-tree
/// provisioners) and nfs `mount`. Fields added here are optional on the wire (docs/design.md §5).
///
/// The agent acts on `nfs`, `hostpath`, `efs` and `external`; the other types plan (selection,
/// reachability, binding of their existing volumes) and are refused at commit when a new volume
/// would have to be created on them ([`Driver::acted_on`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Driver {
    /// An NFS export; volumes are directories below `target` (`server:/export/path`).
    Nfs {
        /// `server:/export` as in Fuzzball "Annotations and Selection" (`nfs-fast:/export/nvme`).
        target: String,
        /// Where the export is mounted on the agent's host, when it is (for real directory
        /// creation; a fedvol addition).
        mount: Option<String>,
        /// NFS protocol version, 3 or 4 (Fuzzball `version`; `None` = negotiate).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<u8>,
        /// Mount options, e.g. `hard,intr` (Fuzzball `options`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        options: Option<String>,
        /// Subdirectory of the export holding this provisioner's volumes (Fuzzball `subPath`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sub_path: Option<String>,
    },
    /// A directory on the host(s); `local: true` makes volumes node-local (they pin their host).
    Hostpath {
        /// Base directory.
        path: String,
        /// Node-local storage: a volume lives on one host and pins every job that mounts it.
        local: bool,
        /// Subdirectory of `path` holding this provisioner's volumes (Fuzzball `subPath`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sub_path: Option<String>,
    },
    /// An AWS EFS file system.
    Efs {
        /// The file system id, e.g. `fs-12345678` (Fuzzball `filesystemId`).
        file_system_id: String,
        /// AWS region, e.g. `us-west-2` (Fuzzball `region`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
        /// Subnets of the mount targets (Fuzzball `subnetIds`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        subnet_ids: Vec<String>,
        /// Directory inside the file system holding this provisioner's volumes (`subPath`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sub_path: Option<String>,
    },
    /// Volumes are Kubernetes PersistentVolumeClaims (Fuzzball `k8s_pvc`). Planned, not
    /// created by fedvol.
    K8sPvc {
        /// The claims' storage class (Fuzzball `storageClassName`).
        storage_class_name: Option<String>,
        /// The claims' namespace (Fuzzball `namespace`).
        namespace: Option<String>,
    },
    /// An Azure Files share (Fuzzball `azure_files`). Planned, not created by fedvol.
    AzureFiles {
        /// Storage account (Fuzzball `accountName`).
        account_name: Option<String>,
        /// File share (Fuzzball `shareName`).
        share_name: Option<String>,
        /// Azure region (Fuzzball `region`).
        region: Option<String>,
        /// Subdirectory holding this provisioner's volumes (`subPath`).
        sub_path: Option<String>,
    },
    /// An OCI File Storage file system (Fuzzball `oci_fss`). Planned, not created by fedvol.
    OciFss {
        /// OCI compartment (Fuzzball `compartmentId`).
        compartment_id: Option<String>,
        /// Availability domain (Fuzzball `availabilityDomain`).
        availability_domain: Option<String>,
        /// Mount target (Fuzzball `mountTargetId`).
        mount_target_id: Option<String>,
        /// Subdirectory holding this provisioner's volumes (`subPath`).
        sub_path: Option<String>,
    },
    /// An OCI File Storage with Lustre file system (Fuzzball `oci_lustre`). Planned, not
    /// created by fedvol.
    OciLustre {
        /// Capacity in GB (Fuzzball `lustreCapacityGbs`).
        lustre_capacity_gbs: Option<u64>,
        /// Performance tier (Fuzzball `lustrePerformanceTier`).
        lustre_performance_tier: Option<String>,
        /// OCI compartment (Fuzzball `compartmentId`).
        compartment_id: Option<String>,
        /// Availability domain (Fuzzball `availabilityDomain`).
        availability_domain: Option<String>,
    },
    /// A Google Cloud Filestore instance (Fuzzball `filestore`). Planned, not created by fedvol.
    Filestore {
        /// GCP region (Fuzzball `region`).
        region: Option<String>,
        /// Subdirectory holding this provisioner's volumes (`subPath`).
        sub_path: Option<String>,
    },
    /// An out-of-tree provisioner named `vendor/name` (the Kubernetes volume provisioning design), reached over NATS; Kubernetes
    /// StorageClasses map here with their `provisioner` and `parameters`.
    External {
        /// The provisioner's name, e.g. `ebs.csi.aws.com` or `example.com/nfs`.
        provisioner: String,
        /// Opaque parameters passed to the provisioner (never logged if they look secret).
        parameters: BTreeMap<String, String>,
    },
}

/// Every `driver.type` a file may name, in the spelling of files (Fuzzball's, plus `external`).
pub const DRIVER_TYPES: &[&str] = &[
    "nfs",
    "hostpath",
    "efs",
    "k8s_pvc",
    "azure_files",
    "oci_fss",
    "oci_lustre",
    "filestore",
    "external",
];

impl Driver {
    /// The driver type as written in files (one of [`DRIVER_TYPES`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Driver::Nfs { .. } => "nfs",
            Driver::Hostpath { .. } => "hostpath",
            Driver::Efs { .. } => "efs",
            Driver::K8sPvc { .. } => "k8s_pvc",
            Driver::AzureFiles { .. } => "azure_files",
            Driver::OciFss { .. } => "oci_fss",
            Driver::OciLustre { .. } => "oci_lustre",
            Driver::Filestore { .. } => "filestore",
            Driver::External { .. } => "external",
        }
    }

    /// True for node-local storage (hostpath with `local: true`; the provisioner schema: "Only
    /// hostpath supports node-local volumes").
    pub fn is_node_local(&self) -> bool {
        matches!(self, Driver::Hostpath { local: true, .. })
    }

    /// True for a file system many hosts mount at once (nfs, shared hostpath, efs, Azure Files,
    /// OCI FSS and Lustre, Filestore): its volumes offer ReadWriteOnce, ReadOnlyMany and
    /// ReadWriteMany when an entry gives no access modes.
    pub fn is_shared_file_system(&self) -> bool {
        !matches!(
            self,
            Driver::Hostpath { local: true, .. } | Driver::K8sPvc { .. } | Driver::External { .. }
        )
    }

    /// True when fedvol's agent can create and delete volumes with this driver (nfs, hostpath,
    /// efs, external). Volumes of the other types are planned and bound, and a commit that would
    /// create one is refused with an error naming the driver type.
    pub fn acted_on(&self) -> bool {
        matches!(
            self,
            Driver::Nfs { .. } | Driver::Hostpath { .. } | Driver::Efs { .. } | Driver::External { .. }
        )
    }

    /// The `subPath` volumes live under, if the driver has one.
    pub fn sub_path(&self) -> Option<&str> {
        match self {
            Driver::Nfs { sub_path, .. }
            | Driver::Hostpath { sub_path, .. }
            | Driver::Efs { sub_path, .. }
            | Driver::AzureFiles { sub_path, .. }
            | Driver::OciFss { sub_path, .. }
            | Driver::Filestore { sub_path, .. } => sub_path.as_deref(),
            Driver::K8sPvc { .. } | Driver::OciLustre { .. } | Driver::External { .. } => None,
        }
    }
}

/// Where a provisioner's storage can be reached from (docs/design.md §3 `zones`/`segment`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Reachability {
    /// Zones that can reach the storage; empty = no zone restriction.
    pub zones: Vec<String>,
    /// A network segment; when set, only zones in the same segment reach the storage.
    pub segment: Option<String>,
}

impl Reachability {
    /// True when a zone named `zone` in `segment` can reach this storage.
    pub fn reaches(&self, zone: &str, segment: Option<&str>) -> bool {
        (self.zones.is_empty() || self.zones.iter().any(|z| z == zone))
            && (self.segment.is_none() || self.segment.as_deref() == segment)
    }
}

/// A storage provisioner (Fuzzball "Annotations and Selection") or Kubernetes StorageClass (the Kubernetes volume provisioning design); one storage class.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Provisioner {
    /// Name; also the storage class name volumes refer to.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// How storage is created.
    pub driver: Driver,
    /// Opaque key/value strings matched exactly by workflow volume annotations (Fuzzball "Annotations and Selection").
    pub annotations: BTreeMap<String, String>,
    /// Group policies; StorageClasses get [`Permissions::open`].
    pub permissions: Permissions,
    /// Only READY provisioners are selected.
    pub status: ProvisionerStatus,
    /// Default storage class for claims with no class (`storageclass.kubernetes.io/is-default-class`).
    pub default: bool,
    /// Reclaim policy given to volumes it provisions (default Delete).
    pub reclaim_policy: ReclaimPolicy,
    /// Which zones reach its storage.
    pub reachability: Reachability,
    /// Labels its provisioned volumes carry; a claim selector is satisfiable only by these
    /// (the Kubernetes volume provisioning design: a provisioner refuses selectors it does not understand).
    pub labels: BTreeMap<String, String>,
    /// Largest volume it can provision, if bounded (bytes).
    pub max_volume_size: Option<ByteSize>,
    /// Free bytes left in its backing store, if known (hostpath/nfs check free space).
    pub free_bytes: Option<ByteSize>,
    /// Volume modes it can provision (default: Filesystem only; StorageClasses: both).
    pub volume_modes: Vec<VolumeMode>,
    /// True when defined by a Kubernetes StorageClass.
    pub from_storage_class: bool,
    /// Where it was defined.
    pub origin: Origin,
    /// Billing rate for volume usage, per GB-hour, GB = 10^9 bytes (Fuzzball `costPerGbHour`).
    /// No funnel stage reads it; the cost estimate prices the volumes this
    /// provisioner would provision or bind with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_gb_hour: Option<f64>,
    /// Fuzzball created the backing infrastructure (API field `selfProvisioned`, set by its
    /// server; informational).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub self_provisioned: bool,
    /// NFS synchronisation mode (API field `nfsSyncMode`; informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs_sync_mode: Option<String>,
}

impl Provisioner {
    /// A READY provisioner `name` with `driver` and nothing else set: open permissions (as a
    /// Kubernetes StorageClass has), not the default class, reclaim policy Delete, reachable
    /// from every zone, no annotations or labels, no size bound or known free space,
    /// Filesystem volumes only, no cost, no origin. The `with_*` setters change one field each;
    /// the file readers set every field from the file instead.
    pub fn new(name: impl Into<String>, driver: Driver) -> Self {
        Provisioner {
            name: name.into(),
            description: None,
            driver,
            annotations: BTreeMap::new(),
            permissions: Permissions::open(),
            status: ProvisionerStatus::Ready,
            default: false,
            reclaim_policy: ReclaimPolicy::Delete,
            reachability: Reachability::default(),
            labels: BTreeMap::new(),
            max_volume_size: None,
            free_bytes: None,
            volume_modes: vec![VolumeMode::Filesystem],
            from_storage_class: false,
            origin: Origin::default(),
            cost_per_gb_hour: None,
            self_provisioned: false,
            nfs_sync_mode: None,
        }
    }

    /// The same provisioner with the annotation `key` = `value` added.
    pub fn with_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// The same provisioner with the group policies `permissions`.
    pub fn with_permissions(mut self, permissions: Permissions) -> Self {
        self.permissions = permissions;
        self
    }

    /// The same provisioner, the default class when `default` is true.
    pub fn with_default(mut self, default: bool) -> Self {
        self.default = default;
        self
    }

    /// The same provisioner provisioning the volume modes `modes`.
    pub fn with_volume_modes(mut self, modes: Vec<VolumeMode>) -> Self {
        self.volume_modes = modes;
        self
    }
}

/// An existing persistent volume known to the cluster.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PersistentVolume {
    /// Name, unique within its provisioner (storage class).
    pub name: String,
    /// Its provisioner / storage class; `None` = no class (Kubernetes unset or "").
    pub provisioner: Option<String>,
    /// Capacity in bytes.
    pub capacity: ByteSize,
    /// Access modes it supports.
    pub access_modes: AccessModes,
    /// Filesystem or Block.
    pub volume_mode: VolumeMode,
    /// Labels, matched by claim selectors.
    pub labels: BTreeMap<String, String>,
    /// Annotations (e.g. `pv.kubernetes.io/provisioned-by`).
    pub annotations: BTreeMap<String, String>,
    /// Lifecycle phase.
    pub phase: VolumePhase,
    /// The claim it is bound or pre-bound to.
    pub claim_ref: Option<ClaimRef>,
    /// What happens when it is released.
    pub reclaim_policy: ReclaimPolicy,
    /// `metadata.deletionTimestamp` is set: never bound.
    pub being_deleted: bool,
    /// Hosts it can be used from (node-local volumes).
    pub node_affinity: Option<NodeAffinity>,
    /// Where it was defined.
    pub origin: Origin,
}

/// Per-project limits inside one zone (Cloud Assembly's provisioning funnel "Filter by capacity").
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProjectLimits {
    /// Most instances (job nodes) the project may run in the zone.
    pub instances: Option<u64>,
    /// Most memory, bytes.
    pub memory: Option<ByteSize>,
    /// Most CPU cores.
    pub cpu: Option<u64>,
    /// Most storage, bytes.
    pub storage: Option<ByteSize>,
}

/// What a project already uses in one zone (same units as [`ProjectLimits`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProjectUsage {
    /// Instances running.
    pub instances: u64,
    /// Memory in use, bytes.
    pub memory: ByteSize,
    /// CPU cores in use.
    pub cpu: u64,
    /// Storage in use, bytes.
    pub storage: ByteSize,
}

/// One zone assigned to a project.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ZoneAssignment {
    /// The zone's name (must exist in the inventory).
    pub zone: String,
    /// Lower number = preferred (Cloud Assembly's provisioning funnel "select the one with highest priority").
    pub priority: i64,
    /// Limits for this project in this zone.
    pub limits: ProjectLimits,
    /// Current usage by this project in this zone.
    pub usage: ProjectUsage,
}

/// A project and the zones it may use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Project {
    /// Project name (workflows name it in `project:`).
    pub name: String,
    /// Zones in assignment order.
    pub zones: Vec<ZoneAssignment>,
}

/// Host selection strategy of a zone (Cloud Assembly's provisioning funnel step 3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PlacementPolicy {
    /// Seeded random among fitting hosts.
    #[default]
    Default,
    /// The most loaded host that fits.
    Binpack,
    /// The least used host.
    Spread,
    /// The host with the most free memory.
    SpreadMemory,
}

/// A flavor (instance size) a zone offers; with flavors defined, a job must fit one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Flavor {
    /// Flavor name, e.g. `large`.
    pub name: String,
    /// CPU cores.
    pub cpu: u64,
    /// Memory, bytes.
    pub memory: ByteSize,
}

/// A cloud zone: capability tags, policy, profiles and hosts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Zone {
    /// Zone name.
    pub name: String,
    /// Capability tags (united with each host's tags for hard constraints).
    pub tags: Vec<Tag>,
    /// Host selection strategy.
    pub placement_policy: PlacementPolicy,
    /// Priority used when no project assignment gives one (lower = preferred).
    pub priority: i64,
    /// Network segment, for storage reachability.
    pub segment: Option<String>,
    /// Image profile: allowed image URI prefixes (`docker://nvcr.io/`); empty = any image.
    pub images: Vec<String>,
    /// Flavor profile; empty = no flavor restriction.
    pub flavors: Vec<Flavor>,
    /// Storage profile: provisioners explicitly reachable from this zone in addition to their
    /// own reachability; empty = rely on the provisioners' reachability only.
    pub storage: Vec<String>,
    /// Hosts in inventory order.
    pub hosts: Vec<std::sync::Arc<Host>>,
    /// fedvol addition `hostCostPerHour`: what one host of this zone costs for one hour, in the
    /// currency of the provisioners' `costPerGbHour` (a finite number >= 0). Read only by the
    /// cost estimate; `None` = the zone's hosts are not priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cost_per_hour: Option<f64>,
    /// Where it was defined.
    pub origin: Origin,
}

/// Power state of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PowerState {
    /// Running (the default).
    #[default]
    On,
    /// Powered off.
    Off,
}

/// Amounts of compute: total capacity or allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Resources {
    /// CPU cores.
    pub cpu: u64,
    /// Memory, bytes.
    pub memory: ByteSize,
    /// Instances (job nodes).
    pub instances: u64,
    /// Devices by name, e.g. `nvidia.com/gpu: 8`.
    pub devices: BTreeMap<String, u64>,
}

/// A host (compute node) in a zone.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Host {
    /// Host name, unique in the cluster.
    pub name: String,
    /// Power state; only ON hosts are used.
    pub power: PowerState,
    /// Capability tags.
    pub tags: Vec<Tag>,
    /// Total capacity.
    pub capacity: Resources,
    /// Already allocated (from the file; the agent adds its own allocations on top).
    pub allocated: Resources,
    /// Networks the host is attached to.
    pub networks: Vec<String>,
}
