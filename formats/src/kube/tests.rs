//! Kubernetes document decoding: semantics and strictness.

use super::*;
use crate::yaml::{Diagnostics, Limits, load_documents};
use fedvol_common::model::{
    AccessMode, AccessModes, ClaimClass, Driver, PersistentVolume, Provisioner, ReclaimPolicy, SelectorOperator,
    VolumeMode, VolumePhase,
};

fn one<T>(
    text: &str,
    f: fn(&mut Ctx, &Node, &mut Vec<Diagnostic>) -> Option<T>,
) -> (Result<T, Diagnostics>, Vec<Diagnostic>) {
    let docs = load_documents(text, Limits::default()).unwrap();
    let mut ctx = Ctx::new("t.yaml");
    let mut notes = Vec::new();
    let v = f(&mut ctx, &docs[0], &mut notes);
    let r = match v {
        Some(v) => ctx.finish(v),
        None => Err(Diagnostics(ctx.into_diagnostics())),
    };
    (r, notes)
}

fn sc(text: &str) -> Result<Provisioner, Diagnostics> {
    one(text, decode_storage_class).0
}
fn pv(text: &str) -> Result<PersistentVolume, Diagnostics> {
    one(text, decode_persistent_volume).0
}
fn claim(text: &str) -> Result<fedvol_common::model::Claim, Diagnostics> {
    one(text, decode_claim).0
}

const SC: &str = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: fast\n";

#[test]
fn storage_class_defaults_and_driver() {
    let p = sc(&format!(
        "{SC}provisioner: example.com/nfs\nparameters:\n  server: nfs-1\n  iops: \"50\"\n"
    ))
    .unwrap();
    assert_eq!(p.name, "fast");
    let Driver::External {
        provisioner,
        parameters,
    } = &p.driver
    else {
        panic!()
    };
    assert_eq!(provisioner, "example.com/nfs");
    assert_eq!(parameters.get("iops").map(String::as_str), Some("50"));
    assert_eq!(p.reclaim_policy, ReclaimPolicy::Delete);
    assert!(!p.default);
    assert!(p.from_storage_class);
    assert_eq!(p.volume_modes, vec![VolumeMode::Filesystem, VolumeMode::Block]);
    assert!(p.permissions.allows(fedvol_common::model::Operation::Create, "u", &[]));
    assert_eq!(p.origin.line, 1);
    assert!(p.reachability.zones.is_empty());
}

#[test]
fn default_class_annotation_must_be_exactly_true() {
    let with = |k: &str, v: &str| {
        sc(&format!(
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: a\n  annotations:\n    {k}: \"{v}\"\nprovisioner: x.io/y\n"
        ))
        .unwrap()
        .default
    };
    assert!(with(DEFAULT_CLASS_ANNOTATION, "true"));
    assert!(with(BETA_DEFAULT_CLASS_ANNOTATION, "true"));
    assert!(!with(DEFAULT_CLASS_ANNOTATION, "false"));
    assert!(!with(DEFAULT_CLASS_ANNOTATION, "True"));
    assert!(!with("example.com/is-default-class", "true"));
}

#[test]
fn storage_class_rules() {
    let retain = sc(&format!("{SC}provisioner: a.io/b\nreclaimPolicy: Retain\n")).unwrap();
    assert_eq!(retain.reclaim_policy, ReclaimPolicy::Retain);
    // Recycle is not allowed on a StorageClass; the wrong case gets a hint
    let e = sc(&format!("{SC}provisioner: a.io/b\nreclaimPolicy: Recycle\n")).unwrap_err();
    assert!(e.0[0].message.contains("Delete, Retain"), "{e}");
    let e = sc(&format!("{SC}provisioner: a.io/b\nreclaimPolicy: retain\n")).unwrap_err();
    assert_eq!(e.0[0].hint.as_deref(), Some("did you mean `Retain`?"));
    let e = sc(&format!("{SC}provisioner: a.io/b\nvolumeBindingMode: Later\n")).unwrap_err();
    assert_eq!(e.0[0].field, "volumeBindingMode");
    let e = sc(SC).unwrap_err();
    assert!(e.0[0].message.contains("missing required field `provisioner`"));
    let e = sc(&format!("{SC}provisioner: not a name\n")).unwrap_err();
    assert!(e.0[0].message.contains("not a valid provisioner name"));
    let e = sc("apiVersion: v1\nkind: StorageClass\nmetadata: {name: a}\nprovisioner: a.io/b\n").unwrap_err();
    assert!(e.0[0].message.contains("storage.k8s.io/v1"), "{e}");
    assert!(
        sc("apiVersion: storage.k8s.io/v1beta1\nkind: StorageClass\nmetadata: {name: a}\nprovisioner: a.io/b\n")
            .is_ok()
    );
}

#[test]
fn unknown_storage_class_field_has_hint_and_position() {
    let e = sc(&format!(
        "{SC}provisioner: a.io/b\nreclaimPolicey: Delete\nallowVolumeExpansion: yes\n"
    ))
    .unwrap_err();
    assert_eq!(e.0.len(), 2, "{e}");
    let unknown = e.0.iter().find(|d| d.field == "reclaimPolicey").unwrap();
    assert_eq!((unknown.line, unknown.col), (6, 1));
    assert_eq!(unknown.hint.as_deref(), Some("did you mean `reclaimPolicy`?"));
    assert!(e.0.iter().any(|d| d.field == "allowVolumeExpansion"));
}

#[test]
fn allowed_topologies_zones_and_notice_for_other_keys() {
    let text = format!(
        "{SC}provisioner: a.io/b\nallowedTopologies:\n- matchLabelExpressions:\n  - key: topology.kubernetes.io/zone\n    values: [us-east-2c, us-east-2a]\n- matchLabelExpressions:\n  - key: failure-domain.beta.kubernetes.io/zone\n    values: [us-east-2b, us-east-2a]\n  - key: kubernetes.io/hostname\n    values: [node-1]\n"
    );
    let (p, notes) = one(&text, decode_storage_class);
    assert_eq!(
        p.unwrap().reachability.zones,
        vec!["us-east-2c", "us-east-2a", "us-east-2b"]
    );
    assert_eq!(notes.len(), 1);
    assert!(notes[0].message.contains("kubernetes.io/hostname"));
    assert_eq!(notes[0].line, 13);
    let e = sc(&format!(
        "{SC}provisioner: a.io/b\nallowedTopologies:\n- matchLabelExpressions:\n  - key: k\n    values: []\n"
    ))
    .unwrap_err();
    assert!(e.0[0].message.contains("at least one value"));
}

const PV: &str = "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv1\n";

#[test]
fn persistent_volume_defaults() {
    let v = pv(&format!(
        "{PV}spec:\n  capacity: {{storage: 5Gi}}\n  accessModes: [ReadWriteOnce, ReadOnlyMany]\n  nfs: {{server: s, path: /}}\n"
    ))
    .unwrap();
    assert_eq!(v.name, "pv1");
    assert_eq!(v.capacity.0, 5 << 30);
    assert_eq!(
        v.access_modes,
        AccessModes::of(&[AccessMode::ReadWriteOnce, AccessMode::ReadOnlyMany])
    );
    assert_eq!(v.volume_mode, VolumeMode::Filesystem);
    assert_eq!(
        v.reclaim_policy,
        ReclaimPolicy::Retain,
        "a manually created PV defaults to Retain"
    );
    assert_eq!(v.phase, VolumePhase::Available);
    assert_eq!(v.provisioner, None);
    assert!(v.claim_ref.is_none());
    assert!(!v.being_deleted);
}

#[test]
fn persistent_volume_class_nil_empty_and_beta_annotation() {
    let body = "spec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  hostPath: {path: /x}\n";
    let named = pv(&format!("{PV}{body}  storageClassName: manual\n")).unwrap();
    assert_eq!(named.provisioner.as_deref(), Some("manual"));
    let empty = pv(&format!("{PV}{body}  storageClassName: \"\"\n")).unwrap();
    assert_eq!(empty.provisioner, None);
    let null = pv(&format!("{PV}{body}  storageClassName:\n")).unwrap();
    assert_eq!(null.provisioner, None);
    let beta = pv(&format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv1\n  annotations:\n    volume.beta.kubernetes.io/storage-class: gold\n{body}  storageClassName: manual\n"
    ))
    .unwrap();
    assert_eq!(
        beta.provisioner.as_deref(),
        Some("gold"),
        "the beta annotation wins, as in Kubernetes"
    );
}

#[test]
fn persistent_volume_claim_ref_phase_deletion_and_affinity() {
    let v = pv(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv1\n  deletionTimestamp: \"2024-01-01T00:00:00Z\"\n  finalizers: [kubernetes.io/pv-protection]\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Delete\n  volumeMode: Block\n  claimRef: {name: data, uid: u-1, kind: PersistentVolumeClaim}\n  local: {path: /mnt/disk}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - {key: topology.kubernetes.io/zone, operator: In, values: [z1]}\n      - matchFields:\n        - {key: metadata.name, operator: In, values: [node-7]}\nstatus:\n  phase: Released\n",
    )
    .unwrap();
    assert!(v.being_deleted);
    assert_eq!(v.reclaim_policy, ReclaimPolicy::Delete);
    assert_eq!(v.volume_mode, VolumeMode::Block);
    assert_eq!(v.phase, VolumePhase::Released);
    let cr = v.claim_ref.unwrap();
    assert_eq!(
        (cr.namespace.as_str(), cr.name.as_str(), cr.uid.as_deref()),
        ("", "data", Some("u-1")),
        "the namespace is kept as written (absent = empty), never defaulted"
    );
    let na = v.node_affinity.unwrap();
    assert_eq!(na.terms.len(), 2);
    assert_eq!(na.terms[1][0].key, HOSTNAME_LABEL);
    let host = |name: &str, zone: &str| {
        [
            (HOSTNAME_LABEL.to_string(), name.to_string()),
            ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
        ]
        .into()
    };
    assert!(na.matches(&host("node-1", "z1")));
    assert!(na.matches(&host("node-7", "z9")));
    assert!(!na.matches(&host("node-1", "z9")));
}

#[test]
fn pre_bound_volume_without_phase_stays_available() {
    let v = pv(&format!(
        "{PV}spec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  claimRef: {{namespace: ml, name: data}}\n  csi: {{driver: d, volumeHandle: h}}\n"
    ))
    .unwrap();
    assert_eq!(v.phase, VolumePhase::Available);
    assert_eq!(v.claim_ref.unwrap().namespace, "ml");
}

/// Kubernetes' validation never checks a claimRef's fields (`pkg/apis/core/validation/
/// validation.go`, `ValidatePersistentVolumeSpec`): every field is optional and may be empty.
#[test]
fn claim_ref_fields_are_all_optional_and_may_be_empty() {
    let base =
        "spec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  csi: {driver: d, volumeHandle: h}\n";
    for (claim_ref, want) in [
        ("{}", ("", "", None)),
        ("{uid: 7d0c}", ("", "", Some("7d0c"))),
        ("{name: \"\", namespace: \"\", uid: \"\"}", ("", "", None)),
        ("{name: data, uid: \"\"}", ("", "data", None)),
        (
            "{kind: \"\", apiVersion: v1, name: data, namespace: ml}",
            ("ml", "data", None),
        ),
    ] {
        let v = pv(&format!("{PV}{base}  claimRef: {claim_ref}\n")).unwrap_or_else(|e| panic!("{claim_ref}: {e}"));
        let cr = v.claim_ref.unwrap();
        assert_eq!(
            (cr.namespace.as_str(), cr.name.as_str(), cr.uid.as_deref()),
            want,
            "{claim_ref}"
        );
    }
    let e = pv(&format!("{PV}{base}  claimRef: {{kind: Pod, name: p}}\n")).unwrap_err();
    assert!(e.0[0].message.contains("refers to a PersistentVolumeClaim"), "{e}");
}

#[test]
fn persistent_volume_rules() {
    let base = "spec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n";
    let e = pv(&format!("{PV}{base}")).unwrap_err();
    assert!(e.0[0].message.contains("a volume source is required"), "{e}");
    let e = pv(&format!(
        "{PV}{base}  nfs: {{server: s, path: /}}\n  hostPath: {{path: /x}}\n"
    ))
    .unwrap_err();
    assert!(e.0[0].message.contains("only one volume source"), "{e}");
    let e = pv(&format!("{PV}{base}  hostpath: {{path: /x}}\n")).unwrap_err();
    assert_eq!(e.0.len(), 1, "a misspelt source is reported once: {e}");
    let d = &e.0[0];
    assert_eq!(d.field, "spec.hostpath");
    assert_eq!(d.hint.as_deref(), Some("did you mean `hostPath`?"));
    assert_eq!((d.line, d.col), (8, 3));
    let e = pv(&format!(
        "{PV}spec:\n  capacity: {{storage: 10GB}}\n  accessModes: [ReadWriteOnce]\n  nfs: {{server: s, path: /}}\n"
    ))
    .unwrap_err();
    assert!(e.0[0].message.contains("not a Kubernetes quantity"));
    assert!(e.0[0].hint.as_deref().unwrap().contains("10G"));
    let e = pv(&format!("{PV}spec:\n  capacity: {{storage: 1Gi, cpu: 2}}\n  accessModes: [ReadWriteOnce]\n  nfs: {{server: s, path: /}}\n")).unwrap_err();
    assert_eq!(e.0[0].field, "spec.capacity.cpu");
    let e = pv(&format!("{PV}spec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOncePod, ReadOnlyMany]\n  nfs: {{server: s, path: /}}\n")).unwrap_err();
    assert!(e.0[0].message.contains("ReadWriteOncePod cannot be combined"));
    let e = pv(&format!(
        "{PV}spec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [RWO]\n  nfs: {{server: s, path: /}}\n"
    ))
    .unwrap_err();
    assert!(e.0[0].message.contains("unknown access mode `RWO`"));
    let e = pv(&format!("{PV}{base}  nfs: {{server: s, path: /}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - {{}}\n")).unwrap_err();
    assert!(e.0[0].message.contains("empty node selector term"), "{e}");
    let e = pv(&format!("{PV}{base}  nfs: {{server: s, path: /}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: cores, operator: Gt, values: [a]}}]\n")).unwrap_err();
    assert!(e.0[0].message.contains("Gt/Lt"), "{e}");
    let e = pv("apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: Bad_Name\nspec: {}\n").unwrap_err();
    assert!(e.0.iter().any(|d| d.field == "metadata.name"), "{e}");
}

const PVC: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n";

#[test]
fn claim_class_unset_empty_named_and_beta() {
    let body = "spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 8Gi}}\n";
    assert_eq!(claim(&format!("{PVC}{body}")).unwrap().class, ClaimClass::Unset);
    assert_eq!(
        claim(&format!("{PVC}{body}  storageClassName: \"\"\n")).unwrap().class,
        ClaimClass::Empty
    );
    assert_eq!(
        claim(&format!("{PVC}{body}  storageClassName: gold\n")).unwrap().class,
        ClaimClass::Named("gold".into())
    );
    let beta = |v: &str| {
        claim(&format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  annotations:\n    volume.beta.kubernetes.io/storage-class: \"{v}\"\n{body}  storageClassName: gold\n"
        ))
        .unwrap()
        .class
    };
    assert_eq!(beta("silver"), ClaimClass::Named("silver".into()));
    assert_eq!(beta(""), ClaimClass::Empty);
}

#[test]
fn claim_fields() {
    let c = claim(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: ml\n  uid: abc\nspec:\n  accessModes: [ReadWriteMany]\n  volumeMode: Block\n  volumeName: pv-9\n  volumeAttributesClassName: silver\n  resources:\n    requests: {storage: 1500M}\n    limits: {storage: 2G}\n  selector:\n    matchLabels: {tier: gold}\n    matchExpressions:\n    - {key: region, operator: NotIn, values: [east]}\n    - {key: ssd, operator: Exists}\n  dataSource: {kind: PersistentVolumeClaim, name: old}\n  dataSourceRef: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: snap-1}\nstatus:\n  phase: Pending\n",
    )
    .unwrap();
    assert_eq!((c.namespace.as_str(), c.uid.as_deref()), ("ml", Some("abc")));
    assert_eq!(c.access_modes, AccessModes::of(&[AccessMode::ReadWriteMany]));
    assert_eq!(c.volume_mode, VolumeMode::Block);
    assert_eq!(c.request.0, 1_500_000_000);
    assert_eq!(c.volume_name.as_deref(), Some("pv-9"));
    assert_eq!(c.data_source.as_deref(), Some("VolumeSnapshot/snap-1"));
    let sel = c.selector.unwrap();
    assert_eq!(sel.match_labels.get("tier").map(String::as_str), Some("gold"));
    assert_eq!(sel.match_expressions[0].operator, SelectorOperator::NotIn);
    assert_eq!(sel.match_expressions[1].operator, SelectorOperator::Exists);
}

#[test]
fn claim_rules() {
    let e = claim(&format!(
        "{PVC}spec:\n  accessModes: [ReadWriteOnce]\n  resources: {{limits: {{storage: 1Gi}}}}\n"
    ))
    .unwrap_err();
    assert!(e.0[0].message.contains("requests"), "{e}");
    let e = claim(&format!(
        "{PVC}spec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{}}}}\n"
    ))
    .unwrap_err();
    assert!(e.0[0].message.contains("`storage`"), "{e}");
    let e = claim(&format!("{PVC}spec:\n  resources: {{requests: {{storage: 1Gi}}}}\n")).unwrap_err();
    assert!(e.0[0].message.contains("accessModes"), "{e}");
    let sel = |expr: &str| {
        claim(&format!(
            "{PVC}spec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n  selector:\n    matchExpressions:\n    - {expr}\n"
        ))
    };
    assert!(sel("{key: a, operator: In, values: [x]}").is_ok());
    let e = sel("{key: a, operator: In}").unwrap_err();
    assert!(e.0[0].message.contains("needs at least one value"), "{e}");
    let e = sel("{key: a, operator: NotIn, values: []}").unwrap_err();
    assert!(e.0[0].message.contains("needs at least one value"), "{e}");
    let e = sel("{key: a, operator: Exists, values: [x]}").unwrap_err();
    assert!(e.0[0].message.contains("takes no values"), "{e}");
    let e = sel("{key: a, operator: DoesNotExist, values: [x]}").unwrap_err();
    assert!(e.0[0].message.contains("takes no values"), "{e}");
    let e = sel("{key: a, operator: Gt, values: [\"1\"]}").unwrap_err();
    assert!(
        e.0[0]
            .message
            .contains("expected one of In, NotIn, Exists, DoesNotExist"),
        "{e}"
    );
    let e = sel("{key: a, operator: in, values: [x]}").unwrap_err();
    assert_eq!(e.0[0].hint.as_deref(), Some("did you mean `In`?"));
    let e = claim(&format!("{PVC}spec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n  storageClass: gold\n")).unwrap_err();
    assert_eq!(e.0[0].hint.as_deref(), Some("did you mean `storageClassName`?"));
}

#[test]
fn metadata_accepts_object_meta_and_rejects_typos() {
    let ok = claim(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  labels: {app: x}\n  resourceVersion: \"12\"\n  creationTimestamp: null\n  generation: 3\n  ownerReferences: []\n  managedFields: []\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
    );
    assert!(ok.is_ok(), "{ok:?}");
    let e = claim("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  lables: {app: x}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n").unwrap_err();
    assert_eq!(e.0[0].hint.as_deref(), Some("did you mean `labels`?"));
    assert_eq!((e.0[0].line, e.0[0].col), (5, 3));
    let e = claim("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  generateName: data-\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n").unwrap_err();
    assert!(e.0[0].message.contains("generateName"), "{e}");
}

#[test]
fn kind_of_and_lists() {
    let docs = load_documents(
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: b}, provisioner: x.io/y}\n---\ncluster: c\n",
        Limits::default(),
    )
    .unwrap();
    let mut ctx = Ctx::new("t");
    let flat = expand_lists(&mut ctx, &docs);
    assert!(ctx.is_ok());
    let kinds: Vec<Option<(String, String)>> = flat.iter().map(|d| kind_of(d)).collect();
    assert_eq!(kinds[0], Some(("v1".into(), "ConfigMap".into())));
    assert_eq!(kinds[1], Some(("storage.k8s.io/v1".into(), "StorageClass".into())));
    assert_eq!(kinds[2], None);
    assert_eq!(DocKind::of("PersistentVolumeClaim"), DocKind::PersistentVolumeClaim);
    assert_eq!(DocKind::of("persistentvolume"), DocKind::Other);
}
