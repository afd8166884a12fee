//! The `volumes:` section: a list of existing persistent volumes, each naming its provisioner
//! (a volume name is unique only within its provisioner).

use super::common::check_object_name;
use super::provisioners::reclaim_policy;
use crate::kube::claim_ref;
use crate::kube::fields::{access_modes, size};
use crate::yaml::{Ctx, Node, Span};
use fedvol_common::model::{AccessModes, Origin, PersistentVolume, ReclaimPolicy, VolumeMode, VolumePhase};

/// One volume entry with the positions and facts reference checks need.
#[derive(Debug, Clone)]
pub(crate) struct VolumeDef {
    /// The decoded volume (access modes filled in later when `modes_given` is false).
    pub volume: PersistentVolume,
    /// Position of the entry.
    pub span: Span,
    /// The `provisioner:` value and its position.
    pub provisioner: (String, Span),
    /// `host:` (pins the volume to one host) and its position.
    pub host: Option<(String, Span)>,
    /// Whether `accessModes` was written (else the driver's natural modes apply).
    pub modes_given: bool,
}

/// Reads the `volumes` list. Each entry: `name` and `provisioner` (required), `size` (default 0
/// bytes: an unknown size only satisfies requests without a size), `accessModes` (long or
/// short names), `volumeMode` (default Filesystem), `labels`, `annotations`, `phase` (default
/// Available), `claimRef` {namespace (default `default`), name, uid; each optional}, `reclaimPolicy` (default
/// Retain) and `host`.
pub(crate) fn decode_volumes(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<VolumeDef> {
    let mut out = Vec::new();
    if node.as_map().is_some() {
        ctx.error_hint(
            node.span,
            field,
            "expected a list, found a mapping",
            "volumes is a list, since a volume name is unique only within its provisioner: - {name: ..., provisioner: ...}",
        );
        return out;
    }
    for (i, item) in ctx.seq(node, field).unwrap_or_default().iter().enumerate() {
        if let Some(v) = decode_volume(ctx, item, &format!("{field}[{i}]")) {
            out.push(v);
        }
    }
    out
}

fn decode_volume(ctx: &mut Ctx, node: &Node, field: &str) -> Option<VolumeDef> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let name = r.require(ctx, "name").and_then(|n| {
        let f = r.path("name");
        let s = ctx.nonempty_string(n, &f)?;
        check_object_name(ctx, n.span, &f, "volume", &s).then_some(s)
    });
    let provisioner = r
        .require(ctx, "provisioner")
        .and_then(|n| ctx.nonempty_string(n, &r.path("provisioner")).map(|s| (s, n.span)));
    let capacity = r
        .take("size")
        .and_then(|n| size(ctx, n, &r.path("size")))
        .unwrap_or_default();
    let modes_node = r.take("accessModes");
    let modes = modes_node
        .and_then(|n| access_modes(ctx, n, &r.path("accessModes"), true))
        .unwrap_or_default();
    let volume_mode = match r.take("volumeMode") {
        Some(n) => match ctx.one_of(n, &r.path("volumeMode"), &["Filesystem", "Block"]) {
            Some("Block") => VolumeMode::Block,
            _ => VolumeMode::Filesystem,
        },
        None => VolumeMode::Filesystem,
    };
    let labels = r
        .take("labels")
        .and_then(|n| ctx.string_map(n, &r.path("labels")))
        .unwrap_or_default();
    let annotations = r
        .take("annotations")
        .and_then(|n| ctx.string_map(n, &r.path("annotations")))
        .unwrap_or_default();
    let phase = match r.take("phase") {
        Some(n) => match ctx.one_of(
            n,
            &r.path("phase"),
            &["Available", "Bound", "Released", "Failed", "Pending"],
        ) {
            Some("Bound") => VolumePhase::Bound,
            Some("Released") => VolumePhase::Released,
            Some("Failed") => VolumePhase::Failed,
            Some("Pending") => VolumePhase::Pending,
            _ => VolumePhase::Available,
        },
        None => VolumePhase::Available,
    };
    let claim = r
        .take("claimRef")
        .and_then(|n| claim_ref(ctx, n, &r.path("claimRef"), Some("default")));
    let reclaim = match r.take("reclaimPolicy") {
        Some(n) => reclaim_policy(ctx, n, &r.path("reclaimPolicy")).unwrap_or(ReclaimPolicy::Retain),
        None => ReclaimPolicy::Retain,
    };
    let host = r
        .take("host")
        .and_then(|n| ctx.nonempty_string(n, &r.path("host")).map(|s| (s, n.span)));
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let (name, provisioner) = (name?, provisioner?);
    let volume = PersistentVolume {
        name,
        provisioner: Some(provisioner.0.clone()),
        capacity,
        access_modes: if modes_node.is_some() {
            modes
        } else {
            AccessModes::default()
        },
        volume_mode,
        labels,
        annotations,
        phase,
        claim_ref: claim,
        reclaim_policy: reclaim,
        being_deleted: false,
        node_affinity: None,
        origin: Origin {
            file: ctx.file().to_string(),
            line: node.span.line,
        },
    };
    Some(VolumeDef {
        volume,
        span: node.span,
        provisioner,
        host,
        modes_given: modes_node.is_some(),
    })
}
