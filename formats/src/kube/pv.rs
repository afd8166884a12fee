//! Kubernetes `PersistentVolume` (v1) → [`PersistentVolume`] (the Kubernetes volume provisioning design: existing volumes that
//! claims bind to before anything is provisioned).

use super::fields::{access_modes, exact_one_of, quantity, volume_mode};
use super::meta::read_meta;
use super::selector::node_affinity;
use super::{BETA_CLASS_ANNOTATION, check_api_version};
use crate::yaml::{Ctx, Diagnostic, Node};
use fedvol_common::model::{ClaimRef, Origin, PersistentVolume, ReclaimPolicy, VolumeMode, VolumePhase};

/// Every volume source a PersistentVolumeSpec may carry (Kubernetes `PersistentVolumeSource`).
/// fedvol does not look inside them; exactly one must be present.
pub const VOLUME_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// Decodes one `PersistentVolume` document, by Kubernetes' rules:
/// - class: annotation `volume.beta.kubernetes.io/storage-class` if present, else
///   `spec.storageClassName`; absent and `""` both mean no class (`provisioner: None`);
/// - `spec.capacity.storage` (required, a quantity; no other resource is allowed);
/// - `spec.accessModes` (required, at least one); `spec.volumeMode` (unset = Filesystem);
/// - `spec.persistentVolumeReclaimPolicy`: Retain (the default for a manually created PV),
///   Delete or Recycle;
/// - `status.phase`: when absent the volume is `Available`; a `spec.claimRef` then keeps it
///   pre-bound to that claim (phase Available, `claim_ref` set);
/// - `spec.claimRef` (every field optional, compared exactly: no namespace defaulting),
///   `metadata.deletionTimestamp` →
///   `being_deleted`, `spec.nodeAffinity.required.nodeSelectorTerms` → node affinity;
/// - exactly one volume source ([`VOLUME_SOURCES`]) must be present; its content is not read.
///
/// `notes` is unused today and kept for symmetry with the other decoders. Errors go to `ctx`;
/// `None` when the document has any.
pub fn decode_persistent_volume(ctx: &mut Ctx, doc: &Node, notes: &mut Vec<Diagnostic>) -> Option<PersistentVolume> {
    let _ = notes;
    let errs = ctx.error_count();
    let mut r = ctx.map(doc, "")?;
    check_api_version(ctx, &mut r, doc, "PersistentVolume", &["v1"]);
    let meta = read_meta(ctx, r.take("metadata"), doc.span, false);
    let mut pv = PersistentVolume {
        name: String::new(),
        provisioner: None,
        capacity: Default::default(),
        access_modes: Default::default(),
        volume_mode: VolumeMode::Filesystem,
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        phase: VolumePhase::Available,
        claim_ref: None,
        reclaim_policy: ReclaimPolicy::Retain,
        being_deleted: meta.being_deleted,
        node_affinity: None,
        origin: Origin {
            file: ctx.file().to_string(),
            line: doc.span.line,
        },
    };
    let mut spec_class: Option<String> = None;
    if let Some(spec) = r.require(ctx, "spec")
        && let Some(mut s) = ctx.map(spec, "spec")
    {
        if let Some(cap) = s.require(ctx, "capacity")
            && let Some(mut c) = ctx.map(cap, "spec.capacity")
        {
            if let Some(q) = c.require(ctx, "storage") {
                pv.capacity = quantity(ctx, q, "spec.capacity.storage").unwrap_or_default();
            }
            c.finish(ctx);
        }
        if let Some(n) = s.require(ctx, "accessModes") {
            pv.access_modes = access_modes(ctx, n, "spec.accessModes", false).unwrap_or_default();
        }
        if let Some(n) = s.take("volumeMode") {
            pv.volume_mode = volume_mode(ctx, n, "spec.volumeMode").unwrap_or_default();
        }
        if let Some(n) = s.take("persistentVolumeReclaimPolicy") {
            pv.reclaim_policy = match exact_one_of(
                ctx,
                n,
                "spec.persistentVolumeReclaimPolicy",
                &["Retain", "Delete", "Recycle"],
            ) {
                Some("Delete") => ReclaimPolicy::Delete,
                Some("Recycle") => ReclaimPolicy::Recycle,
                _ => ReclaimPolicy::Retain,
            };
        }
        if let Some(n) = s.take("storageClassName") {
            spec_class = ctx.string(n, "spec.storageClassName");
        }
        if let Some(n) = s.take("claimRef") {
            pv.claim_ref = claim_ref(ctx, n, "spec.claimRef", None);
        }
        if let Some(n) = s.take("nodeAffinity") {
            pv.node_affinity = node_affinity(ctx, n, "spec.nodeAffinity");
        }
        if let Some(n) = s.take("mountOptions") {
            ctx.string_list(n, "spec.mountOptions");
        }
        s.ignore(&["volumeAttributesClassName"]);
        let mut sources = Vec::new();
        for key in VOLUME_SOURCES {
            if let Some(n) = s.take(key)
                && ctx.map(n, &format!("spec.{key}")).is_some()
            {
                sources.push(*key);
            }
        }
        s.finish(ctx);
        if sources.is_empty() && ctx.error_count() == errs {
            ctx.error(
                spec.span,
                "spec",
                "a volume source is required (csi, nfs, hostPath, local, ...)",
            );
        } else if sources.len() > 1 {
            ctx.error(
                spec.span,
                "spec",
                format!("only one volume source may be given, found {}", sources.join(", ")),
            );
        }
    }
    if let Some(status) = r.take("status")
        && let Some(mut st) = ctx.map(status, "status")
    {
        if let Some(n) = st.take("phase") {
            pv.phase = match exact_one_of(
                ctx,
                n,
                "status.phase",
                &["Pending", "Available", "Bound", "Released", "Failed"],
            ) {
                Some("Pending") => VolumePhase::Pending,
                Some("Bound") => VolumePhase::Bound,
                Some("Released") => VolumePhase::Released,
                Some("Failed") => VolumePhase::Failed,
                _ => VolumePhase::Available,
            };
        }
        st.ignore(&["message", "reason", "lastPhaseTransitionTime"]);
        st.finish(ctx);
    }
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let class = match meta.annotations.get(BETA_CLASS_ANNOTATION) {
        Some(c) => Some(c.clone()),
        None => spec_class,
    };
    pv.provisioner = class.filter(|c| !c.is_empty());
    pv.name = meta.name?;
    Some(pv)
}

/// Reads a claimRef. Kubernetes' validation never checks a claimRef's fields
/// (`pkg/apis/core/validation/validation.go`, `ValidatePersistentVolumeSpec`), so every field is
/// optional and may be empty: `claimRef: {}` and a claimRef with only `uid` are accepted (they
/// reserve the volume for a claim no request names, see `funnel::volume::bind`). An empty `uid`
/// means "no uid". The namespace is kept as written; `default_namespace` fills it in when absent
/// (fedvol's own volume syntax passes `default`; a Kubernetes PersistentVolume passes `None`, as
/// Kubernetes compares it exactly). `kind`, when given, must be `PersistentVolumeClaim`;
/// `apiVersion`, `resourceVersion` and `fieldPath` are read and ignored.
pub(crate) fn claim_ref(ctx: &mut Ctx, node: &Node, field: &str, default_namespace: Option<&str>) -> Option<ClaimRef> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let name = r
        .take("name")
        .and_then(|n| ctx.string(n, &format!("{field}.name")))
        .unwrap_or_default();
    let namespace = r
        .take("namespace")
        .and_then(|n| ctx.string(n, &format!("{field}.namespace")))
        .or_else(|| default_namespace.map(str::to_string))
        .unwrap_or_default();
    let uid = r
        .take("uid")
        .and_then(|n| ctx.string(n, &format!("{field}.uid")))
        .filter(|u| !u.is_empty());
    if let Some(n) = r.take("kind")
        && let Some(k) = ctx.string(n, &format!("{field}.kind"))
        && k != "PersistentVolumeClaim"
        && !k.is_empty()
    {
        ctx.error(
            n.span,
            &format!("{field}.kind"),
            format!("a claimRef refers to a PersistentVolumeClaim, found `{k}`"),
        );
    }
    r.ignore(&["apiVersion", "resourceVersion", "fieldPath"]);
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    Some(ClaimRef { namespace, name, uid })
}
