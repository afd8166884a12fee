//! A workflow as the funnel sees it: volume requests and the jobs that mount them.
//!
//! Built by `format::workflow` from a Fuzzfile (v1 or v4, every field of the schema parsed or
//! knowingly ignored) or from a Kubernetes PersistentVolumeClaim (a one-volume workflow).
//! v1 `reference: volume://...` volumes are translated to v4 meaning here, so the funnel only
//! knows v4: `volume://<scope>/ephemeral` → `use: ephemeral`; `volume://<scope>/persistent/<n>`
//! → `use: persistent`, `name: <n>`.

use std::collections::BTreeMap;

use super::k8s::{AccessModes, LabelSelector, VolumeMode};
use super::tags::Constraint;
use crate::size::ByteSize;

/// Which format the workflow was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowFormat {
    /// Fuzzfile `version: v1` (reference-based volumes).
    FuzzfileV1,
    /// Fuzzfile `version: v4` (provisioner-based volumes).
    FuzzfileV4,
    /// A Kubernetes PersistentVolumeClaim document.
    KubernetesClaim,
}

/// A whole workflow.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Workflow {
    /// Name: the file's stem for Fuzzfiles, the claim's name for a PVC.
    pub name: String,
    /// Source format.
    pub format: WorkflowFormat,
    /// Volume requests in file order.
    pub volumes: Vec<VolumeRequest>,
    /// Jobs and services in file order (jobs first, then services).
    pub jobs: Vec<Job>,
    /// fedvol addition: the project whose zones jobs may use (default: `default`).
    pub project: Option<String>,
    /// fedvol addition: preferred clusters, most preferred first.
    pub clusters: Vec<String>,
    /// Workflow-level annotations (kept, not used for volume selection).
    pub annotations: BTreeMap<String, String>,
    /// fedvol addition: the workflow's priority class, a name the coordinator's
    /// `priorityClasses` maps to a number (like a Kubernetes PriorityClass); `None` = the
    /// coordinator's default class. `fedvol submit --priority` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
}

impl Workflow {
    /// The workflow without its source positions (every `line` set to 0): what it asks for,
    /// whatever the layout of the file it came from. Two files that differ only in comments,
    /// blank lines or key order within a mapping give equal values.
    pub fn without_positions(&self) -> Workflow {
        let mut w = self.clone();
        for v in &mut w.volumes {
            v.line = 0;
        }
        for j in &mut w.jobs {
            j.line = 0;
        }
        w
    }

    /// How long the workflow runs by its declared timeouts, milliseconds: the longest chain of
    /// jobs through `depends_on` of the sum of their `timeout_ms` (a job without one counts 0;
    /// jobs without dependencies start at once, so the longest chain is the workflow's length).
    /// `None` when no job declares a timeout. Dependencies on names that are not jobs of this
    /// workflow, and cycles (which the parser refuses), count 0. Saturates at `u64::MAX`.
    pub fn declared_duration_ms(&self) -> Option<u64> {
        if self.jobs.iter().all(|j| j.timeout_ms.is_none()) {
            return None;
        }
        let index: BTreeMap<&str, usize> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.name.as_str(), i))
            .collect();
        // Longest chain ending at each job, computed on demand (memo), with a guard against
        // cycles: a job being computed counts 0 when reached again.
        let mut memo: Vec<Option<u64>> = vec![None; self.jobs.len()];
        let mut on_path = vec![false; self.jobs.len()];
        let mut longest = 0u64;
        for start in 0..self.jobs.len() {
            longest = longest.max(self.chain_ms(start, &index, &mut memo, &mut on_path));
        }
        Some(longest)
    }

    /// The longest chain ending with job `i` (its own timeout included); iterative so that a
    /// long chain of dependencies cannot overflow the stack.
    fn chain_ms(&self, i: usize, index: &BTreeMap<&str, usize>, memo: &mut [Option<u64>], on_path: &mut [bool]) -> u64 {
        // Explicit stack of (job, next dependency to look at).
        let mut stack: Vec<(usize, usize)> = vec![(i, 0)];
        on_path[i] = true;
        while let Some(top) = stack.last_mut() {
            let job = top.0;
            if memo[job].is_some() {
                on_path[job] = false;
                stack.pop();
                continue;
            }
            let deps = &self.jobs[job].depends_on;
            if let Some(dep) = deps.get(top.1) {
                top.1 += 1;
                if let Some(&d) = index.get(dep.as_str())
                    && memo[d].is_none()
                    && !on_path[d]
                {
                    on_path[d] = true;
                    stack.push((d, 0));
                }
                continue;
            }
            let before = deps
                .iter()
                .filter_map(|dep| index.get(dep.as_str()))
                .filter_map(|&d| memo[d])
                .max()
                .unwrap_or(0);
            memo[job] = Some(before.saturating_add(self.jobs[job].timeout_ms.unwrap_or(0)));
            on_path[job] = false;
            stack.pop();
        }
        memo[i].unwrap_or(0)
    }
}

/// One volume the workflow needs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VolumeRequest {
    /// The volume's key in the workflow (what mounts refer to).
    pub key: String,
    /// What is asked for.
    pub source: VolumeSource,
    /// Access modes the request needs (Fuzzfile volumes: RWO, or RWX when a multinode job or
    /// several jobs that may run on different hosts mount it).
    pub access_modes: AccessModes,
    /// 1-based line of the definition.
    pub line: usize,
}

/// The two request shapes. Externally tagged in JSON (`{"fuzzball": {...}}`): an internally
/// tagged enum would pass through serde's buffering, which cannot carry `u128` sizes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VolumeSource {
    /// A Fuzzfile volume (Fuzzball "Annotations and Selection" resolution).
    Fuzzball(FuzzballVolume),
    /// A Kubernetes claim (the Kubernetes volume provisioning design binding and provisioning).
    Claim(Claim),
}

/// A Fuzzfile volume in v4 terms.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct FuzzballVolume {
    /// `use:`: a provisioner name, `ephemeral` or `persistent`.
    pub use_: Option<String>,
    /// `name:`: an existing (or to-be-created persistent) volume's name.
    pub name: Option<String>,
    /// `size:`, bytes. Not a selection criterion (Fuzzball "Annotations and Selection"); used for binding and provisioning.
    pub size: Option<ByteSize>,
    /// `annotations:` requested of the provisioner (exact match, Fuzzball "Annotations and Selection").
    pub annotations: BTreeMap<String, String>,
    /// The original v1 `reference:` text, if any.
    pub reference: Option<String>,
}

/// The storage class a claim asks for (Kubernetes distinguishes unset from "").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimClass {
    /// `storageClassName` absent: the default class applies if one is marked default, else
    /// it behaves like `Empty`.
    Unset,
    /// `storageClassName: ""`: only volumes with no class; no dynamic provisioning.
    Empty,
    /// A named class.
    Named(String),
}

/// A persistent volume claim (the Kubernetes volume provisioning design).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Claim {
    /// Namespace (`default` when absent).
    pub namespace: String,
    /// Claim name.
    pub name: String,
    /// Claim uid, if the document has one.
    pub uid: Option<String>,
    /// Requested class.
    pub class: ClaimClass,
    /// Requested access modes.
    pub access_modes: AccessModes,
    /// Requested volume mode (unset = Filesystem).
    pub volume_mode: VolumeMode,
    /// `resources.requests.storage`, bytes.
    pub request: ByteSize,
    /// Label selector, if any.
    pub selector: Option<LabelSelector>,
    /// `spec.volumeName`: the only volume this claim may bind.
    pub volume_name: Option<String>,
    /// `dataSource`/`dataSourceRef` as `Kind/name`, passed to the provisioner.
    pub data_source: Option<String>,
}

/// Job or service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// A batch job.
    Job,
    /// A long-running service.
    Service,
}

/// A mount of a workflow volume into a job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mount {
    /// The volume's key in the workflow.
    pub volume: String,
    /// Absolute path inside the container.
    pub path: String,
}

/// fedvol addition: same-host and different-host rules between jobs of one workflow (Cloud Assembly's provisioning funnel
/// steps 3.3 and 3.4).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Affinity {
    /// Jobs this job must share a host with.
    pub with: Vec<String>,
    /// Jobs this job must not share a host with.
    pub apart_from: Vec<String>,
}

/// What one node of a job needs.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct JobResources {
    /// CPU cores per node (default 1).
    pub cpu: u64,
    /// Memory per node, bytes (after `by-core` multiplication).
    pub memory: ByteSize,
    /// Devices per node, e.g. `nvidia.com/gpu: 1`.
    pub devices: BTreeMap<String, u64>,
    /// The job wants its nodes to itself.
    pub exclusive: bool,
    /// Fuzzfile `resource.annotations`: hard requirements on host tags (key = value).
    pub annotations: BTreeMap<String, String>,
}

/// A job or service that may need placement.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Job {
    /// The job's key in the workflow.
    pub name: String,
    /// Job or service.
    pub kind: JobKind,
    /// Image URI (`docker://...`, `oras://...`).
    pub image: Option<String>,
    /// Mounts, including those inherited from `defaults`.
    pub mounts: Vec<Mount>,
    /// Per-node resources.
    pub resources: JobResources,
    /// Number of hosts (multinode `nodes`, default 1).
    pub nodes: u64,
    /// Jobs this one waits for (`depends-on` names, else `requires`).
    pub depends_on: Vec<String>,
    /// fedvol addition: hard/soft tag constraints.
    pub constraints: Vec<Constraint>,
    /// fedvol addition: affinity rules.
    pub affinity: Affinity,
    /// fedvol addition: networks every host of the job must be attached to.
    pub networks: Vec<String>,
    /// Fuzzfile `policy.timeout.execute`, milliseconds (a Go duration's nanoseconds rounded up
    /// to whole ms): how long the job may run. Read only by the cost estimate, never
    /// by placement. Absent on the wire when `None`, so earlier releases read the workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// 1-based line of the definition.
    pub line: usize,
}
