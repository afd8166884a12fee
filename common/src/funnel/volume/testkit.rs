//! Test-only builders for inventories, workflows and requests, so every test states just what
//! it is about.

use std::collections::BTreeMap;

use indexmap::IndexMap;

use crate::decision::{StageTrace, VolumeDecision};
use crate::funnel::trace::Trace;
use crate::funnel::{ClusterState, PlanRequest};
use crate::model::*;
use crate::size::ByteSize;

pub fn gib(n: u128) -> ByteSize {
    ByteSize(n * 1024 * 1024 * 1024)
}

pub fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub fn modes(m: &[AccessMode]) -> AccessModes {
    AccessModes::of(m)
}

pub const RWO: AccessMode = AccessMode::ReadWriteOnce;
pub const ROX: AccessMode = AccessMode::ReadOnlyMany;
pub const RWX: AccessMode = AccessMode::ReadWriteMany;

pub fn hostpath() -> Driver {
    Driver::Hostpath {
        path: "/mnt/nvme".into(),
        local: true,
        sub_path: None,
    }
}

pub fn nfs() -> Driver {
    Driver::Nfs {
        target: "nfs-server:/export/standard".into(),
        mount: None,
        version: None,
        options: None,
        sub_path: None,
    }
}

pub fn efs(id: &str) -> Driver {
    Driver::Efs {
        file_system_id: id.into(),
        region: None,
        subnet_ids: Vec::new(),
        sub_path: None,
    }
}

pub fn external(name: &str, params: &[(&str, &str)]) -> Driver {
    Driver::External {
        provisioner: name.into(),
        parameters: ann(params),
    }
}

pub struct ProvBuilder(Provisioner);

pub fn prov(name: &str, driver: Driver) -> ProvBuilder {
    // Closed permissions: each test opens what it needs.
    ProvBuilder(Provisioner::new(name, driver).with_permissions(Permissions::default()))
}

/// A Kubernetes StorageClass: open permissions, both volume modes.
pub fn storage_class(name: &str, provisioner: &str) -> ProvBuilder {
    let mut b = ProvBuilder(
        Provisioner::new(name, external(provisioner, &[]))
            .with_volume_modes(vec![VolumeMode::Filesystem, VolumeMode::Block]),
    );
    b.0.from_storage_class = true;
    b
}

impl ProvBuilder {
    pub fn annotate(mut self, k: &str, v: &str) -> Self {
        self.0.annotations.insert(k.into(), v.into());
        self
    }
    pub fn status(mut self, s: ProvisionerStatus) -> Self {
        self.0.status = s;
        self
    }
    pub fn access(mut self, p: AccessPolicy) -> Self {
        self.0.permissions.access = p;
        self
    }
    pub fn create(mut self, p: AccessPolicy) -> Self {
        self.0.permissions.create = p;
        self
    }
    pub fn ephemeral(mut self, p: AccessPolicy) -> Self {
        self.0.permissions.ephemeral = p;
        self
    }
    pub fn access_all(self) -> Self {
        self.access(AccessPolicy::All)
    }
    pub fn create_all(self) -> Self {
        self.create(AccessPolicy::All)
    }
    pub fn ephemeral_all(self) -> Self {
        self.ephemeral(AccessPolicy::All)
    }
    pub fn default_class(mut self) -> Self {
        self.0.default = true;
        self
    }
    pub fn reclaim(mut self, r: ReclaimPolicy) -> Self {
        self.0.reclaim_policy = r;
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k.into(), v.into());
        self
    }
    pub fn max_size(mut self, s: ByteSize) -> Self {
        self.0.max_volume_size = Some(s);
        self
    }
    pub fn free(mut self, s: ByteSize) -> Self {
        self.0.free_bytes = Some(s);
        self
    }
    pub fn volume_modes(mut self, m: &[VolumeMode]) -> Self {
        self.0.volume_modes = m.to_vec();
        self
    }
    pub fn build(self) -> Provisioner {
        self.0
    }
}

impl From<ProvBuilder> for Provisioner {
    fn from(b: ProvBuilder) -> Self {
        b.0
    }
}

pub struct PvBuilder(PersistentVolume);

pub fn pv(name: &str, class: Option<&str>, capacity: ByteSize) -> PvBuilder {
    PvBuilder(PersistentVolume {
        name: name.into(),
        provisioner: class.map(str::to_string),
        capacity,
        access_modes: modes(&[RWO]),
        volume_mode: VolumeMode::Filesystem,
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        phase: VolumePhase::Available,
        claim_ref: None,
        reclaim_policy: ReclaimPolicy::Retain,
        being_deleted: false,
        node_affinity: None,
        origin: Origin::default(),
    })
}

impl PvBuilder {
    pub fn modes(mut self, m: &[AccessMode]) -> Self {
        self.0.access_modes = modes(m);
        self
    }
    pub fn block(mut self) -> Self {
        self.0.volume_mode = VolumeMode::Block;
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k.into(), v.into());
        self
    }
    pub fn phase(mut self, p: VolumePhase) -> Self {
        self.0.phase = p;
        self
    }
    pub fn claim_ref(mut self, namespace: &str, name: &str, uid: Option<&str>) -> Self {
        self.0.claim_ref = Some(ClaimRef {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.map(str::to_string),
        });
        self
    }
    pub fn deleting(mut self) -> Self {
        self.0.being_deleted = true;
        self
    }
}

impl From<PvBuilder> for PersistentVolume {
    fn from(b: PvBuilder) -> Self {
        b.0
    }
}

pub struct InvBuilder(Inventory);

pub fn inventory(cluster: &str) -> InvBuilder {
    InvBuilder(Inventory {
        cluster: cluster.into(),
        version: "v-test".into(),
        ..Default::default()
    })
}

impl InvBuilder {
    pub fn provisioner(mut self, p: impl Into<Provisioner>) -> Self {
        self.0.provisioners.push(p.into());
        self
    }
    pub fn volume(mut self, v: impl Into<PersistentVolume>) -> Self {
        self.0.volumes.push(std::sync::Arc::new(v.into()));
        self
    }
    pub fn build(self) -> Inventory {
        self.0
    }
}

/// A Fuzzball volume's fields as a test writes them.
#[derive(Default, Clone)]
pub struct FbSpec<'a> {
    pub use_: Option<&'a str>,
    pub name: Option<&'a str>,
    pub size: Option<ByteSize>,
    pub annotations: BTreeMap<String, String>,
    pub modes: Option<AccessModes>,
}

pub fn fb_volume(key: &str, s: FbSpec<'_>) -> VolumeRequest {
    VolumeRequest {
        key: key.into(),
        source: VolumeSource::Fuzzball(FuzzballVolume {
            use_: s.use_.map(str::to_string),
            name: s.name.map(str::to_string),
            size: s.size,
            annotations: s.annotations,
            reference: None,
        }),
        access_modes: s.modes.unwrap_or(modes(&[RWO])),
        line: 1,
    }
}

pub struct ClaimBuilder(Claim);

pub fn claim(name: &str) -> ClaimBuilder {
    ClaimBuilder(Claim {
        namespace: "default".into(),
        name: name.into(),
        uid: None,
        class: ClaimClass::Unset,
        access_modes: modes(&[RWO]),
        volume_mode: VolumeMode::Filesystem,
        request: gib(1),
        selector: None,
        volume_name: None,
        data_source: None,
    })
}

impl ClaimBuilder {
    pub fn class_named(mut self, c: &str) -> Self {
        self.0.class = ClaimClass::Named(c.into());
        self
    }
    pub fn class_empty(mut self) -> Self {
        self.0.class = ClaimClass::Empty;
        self
    }
    pub fn size(mut self, s: ByteSize) -> Self {
        self.0.request = s;
        self
    }
    pub fn modes(mut self, m: &[AccessMode]) -> Self {
        self.0.access_modes = modes(m);
        self
    }
    pub fn block(mut self) -> Self {
        self.0.volume_mode = VolumeMode::Block;
        self
    }
    pub fn selector(mut self, s: LabelSelector) -> Self {
        self.0.selector = Some(s);
        self
    }
    pub fn volume_name(mut self, n: &str) -> Self {
        self.0.volume_name = Some(n.into());
        self
    }
    pub fn uid(mut self, u: &str) -> Self {
        self.0.uid = Some(u.into());
        self
    }
    pub fn build(self) -> Claim {
        self.0
    }
}

pub fn claim_volume(key: &str, c: ClaimBuilder) -> VolumeRequest {
    let c = c.build();
    VolumeRequest {
        key: key.into(),
        access_modes: c.access_modes,
        source: VolumeSource::Claim(c),
        line: 1,
    }
}

pub fn workflow(volumes: Vec<VolumeRequest>) -> Workflow {
    Workflow {
        priority: None,
        name: "wf".into(),
        format: WorkflowFormat::FuzzfileV4,
        volumes,
        jobs: Vec::new(),
        project: None,
        clusters: Vec::new(),
        annotations: BTreeMap::new(),
    }
}

pub fn request(wf: Workflow, groups: &[&str]) -> PlanRequest {
    PlanRequest::new("req-1", wf, "alice")
        .with_groups(groups.iter().copied())
        .with_seed(7)
        .with_trace_limit(0)
}

/// Resolves one volume request alone for a user in `groups`.
pub fn resolve_one(inv: &Inventory, v: VolumeRequest, groups: &[&str]) -> (VolumeDecision, Vec<StageTrace>) {
    resolve_with(inv, &ClusterState::default(), v, groups)
}

pub fn resolve_with(
    inv: &Inventory,
    state: &ClusterState,
    v: VolumeRequest,
    groups: &[&str],
) -> (VolumeDecision, Vec<StageTrace>) {
    let key = v.key.clone();
    let (mut out, trace) = resolve_all(inv, state, &request(workflow(vec![v]), groups));
    (out.swap_remove(&key).expect("one decision per volume"), trace)
}

pub fn resolve_all(
    inv: &Inventory,
    state: &ClusterState,
    req: &PlanRequest,
) -> (IndexMap<String, VolumeDecision>, Vec<StageTrace>) {
    let mut trace = Trace::default();
    let out = super::resolve_volumes(inv, state, req, &mut trace);
    (out, trace.into_stages())
}

/// The one trace record of `stage` (panics when absent or repeated: tests want exactly one).
pub fn stage<'t>(trace: &'t [StageTrace], name: &str) -> &'t StageTrace {
    let found: Vec<&StageTrace> = trace.iter().filter(|t| t.stage == name).collect();
    assert_eq!(found.len(), 1, "stage {name} in {trace:#?}");
    found[0]
}

/// The codes recorded for `candidate` in `stage`.
pub fn rejected_codes(trace: &[StageTrace], name: &str, candidate: &str) -> Vec<String> {
    stage(trace, name)
        .rejected
        .iter()
        .filter(|r| r.candidate == candidate)
        .flat_map(|r| r.reasons.iter().map(|x| x.code.clone()))
        .collect()
}

pub fn selector(labels: &[(&str, &str)], exprs: Vec<LabelRequirement>) -> LabelSelector {
    LabelSelector {
        match_labels: ann(labels),
        match_expressions: exprs,
    }
}

pub fn req(key: &str, op: SelectorOperator, values: &[&str]) -> LabelRequirement {
    LabelRequirement {
        key: key.into(),
        operator: op,
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}
