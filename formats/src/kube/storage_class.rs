//! Kubernetes `StorageClass` (storage.k8s.io/v1 and v1beta1) → [`Provisioner`] (the Kubernetes volume provisioning design:
//! a storage class names an out-of-tree provisioner and its opaque parameters).

use std::collections::BTreeMap;

use super::fields::{check_secret_parameters, exact_one_of, is_qualified_name};
use super::meta::read_meta;
use super::selector::allowed_topologies;
use super::{check_api_version, notice};
use crate::yaml::{Ctx, Diagnostic, Node};
use fedvol_common::model::{
    Driver, Origin, Permissions, Provisioner, ProvisionerStatus, Reachability, ReclaimPolicy, VolumeMode,
};

/// The annotation marking the default storage class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The beta spelling of [`DEFAULT_CLASS_ANNOTATION`], still honoured.
pub const BETA_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// Topology label keys that name a cloud zone (current and legacy spelling).
pub const ZONE_TOPOLOGY_KEYS: [&str; 2] = ["topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"];

/// Decodes one `StorageClass` document into a provisioner, by Kubernetes' rules:
/// - `provisioner` (required, a qualified name such as `ebs.csi.aws.com` or
///   `kubernetes.io/gce-pd`) and `parameters` become `Driver::External`;
/// - `reclaimPolicy` `Delete` (default) or `Retain`;
/// - default class when annotation `storageclass.kubernetes.io/is-default-class` (or its beta
///   spelling) is exactly `"true"`;
/// - `allowedTopologies` on `topology.kubernetes.io/zone` (or the legacy failure-domain key)
///   become the zones that reach the storage; requirements on other keys are not enforced by
///   fedvol and produce a notice in `notes`;
/// - `volumeBindingMode`, `allowVolumeExpansion` and `mountOptions` are validated and accepted.
///
/// The provisioner gets open permissions (a StorageClass has no group policy), status READY,
/// both volume modes and `from_storage_class: true`; its annotations are the object's
/// annotations (matched by workflow volume annotations, Fuzzball "Annotations and Selection"). Errors go to `ctx`; `None`
/// when the document has any.
pub fn decode_storage_class(ctx: &mut Ctx, doc: &Node, notes: &mut Vec<Diagnostic>) -> Option<Provisioner> {
    let errs = ctx.error_count();
    let mut r = ctx.map(doc, "")?;
    check_api_version(
        ctx,
        &mut r,
        doc,
        "StorageClass",
        &["storage.k8s.io/v1", "storage.k8s.io/v1beta1"],
    );
    let meta = read_meta(ctx, r.take("metadata"), doc.span, false);
    let driver_name = r.require(ctx, "provisioner").and_then(|n| {
        let s = ctx.nonempty_string(n, "provisioner")?;
        if !is_qualified_name(&s.to_ascii_lowercase()) {
            ctx.error(n.span, "provisioner", format!("`{s}` is not a valid provisioner name; expected vendor/name (example.com/nfs) or a CSI driver name (ebs.csi.aws.com)"));
            return None;
        }
        Some(s)
    });
    let parameters = r
        .take("parameters")
        .and_then(|n| {
            check_secret_parameters(ctx, n, "parameters");
            ctx.string_map(n, "parameters")
        })
        .unwrap_or_default();
    let reclaim_policy = match r.take("reclaimPolicy") {
        Some(n) => match exact_one_of(ctx, n, "reclaimPolicy", &["Delete", "Retain"]) {
            Some("Retain") => ReclaimPolicy::Retain,
            _ => ReclaimPolicy::Delete,
        },
        None => ReclaimPolicy::Delete,
    };
    if let Some(n) = r.take("mountOptions") {
        ctx.string_list(n, "mountOptions");
    }
    if let Some(n) = r.take("allowVolumeExpansion") {
        ctx.bool(n, "allowVolumeExpansion");
    }
    if let Some(n) = r.take("volumeBindingMode") {
        exact_one_of(ctx, n, "volumeBindingMode", &["Immediate", "WaitForFirstConsumer"]);
    }
    let mut zones: Vec<String> = Vec::new();
    if let Some(n) = r.take("allowedTopologies") {
        for req in allowed_topologies(ctx, n, "allowedTopologies").unwrap_or_default() {
            if ZONE_TOPOLOGY_KEYS.contains(&req.key.as_str()) {
                for v in req.values {
                    if !zones.contains(&v) {
                        zones.push(v);
                    }
                }
            } else {
                notes.push(notice(
                    ctx.file(),
                    req.span,
                    "allowedTopologies",
                    format!(
                        "topology key `{}` ({}) is not enforced by fedvol; only cloud zones ({}) restrict where this class's storage is reachable",
                        req.key,
                        req.values.join(", "),
                        ZONE_TOPOLOGY_KEYS[0]
                    ),
                ));
            }
        }
    }
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let is_default = [DEFAULT_CLASS_ANNOTATION, BETA_DEFAULT_CLASS_ANNOTATION]
        .iter()
        .any(|k| meta.annotations.get(*k).is_some_and(|v| v == "true"));
    Some(Provisioner {
        name: meta.name?,
        description: None,
        driver: Driver::External {
            provisioner: driver_name?,
            parameters,
        },
        annotations: meta.annotations,
        permissions: Permissions::open(),
        status: ProvisionerStatus::Ready,
        default: is_default,
        reclaim_policy,
        reachability: Reachability { zones, segment: None },
        labels: BTreeMap::new(),
        max_volume_size: None,
        free_bytes: None,
        volume_modes: vec![VolumeMode::Filesystem, VolumeMode::Block],
        from_storage_class: true,
        origin: Origin {
            file: ctx.file().to_string(),
            line: doc.span.line,
        },
        cost_per_gb_hour: None,
        self_provisioned: false,
        nfs_sync_mode: None,
    })
}
