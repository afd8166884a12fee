//! Kubernetes `PersistentVolumeClaim` (v1) → [`Claim`] (the Kubernetes volume provisioning design: a claim binds an existing
//! volume of its class or is provisioned by its class's provisioner).

use super::fields::{access_modes, quantity, volume_mode};
use super::meta::read_meta;
use super::selector::label_selector;
use super::{BETA_CLASS_ANNOTATION, check_api_version};
use crate::yaml::{Ctx, Diagnostic, Node};
use fedvol_common::model::{AccessModes, Claim, ClaimClass, VolumeMode};
use fedvol_common::size::ByteSize;

/// Decodes one `PersistentVolumeClaim` document, by Kubernetes' rules:
/// - class: annotation `volume.beta.kubernetes.io/storage-class` if present, else
///   `spec.storageClassName`; absent → [`ClaimClass::Unset`] (the default class applies),
///   `""` → [`ClaimClass::Empty`] (only volumes without a class, no provisioning), else
///   [`ClaimClass::Named`];
/// - `spec.accessModes` (required), `spec.volumeMode` (unset = Filesystem);
/// - `spec.resources.requests.storage` (required quantity) and `limits.storage`;
/// - `spec.selector` (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist: In/NotIn need
///   values, Exists/DoesNotExist take none);
/// - `spec.volumeName`; `spec.dataSourceRef` (preferred) or `spec.dataSource` → `Kind/name`;
/// - `metadata.namespace` defaults to `default`; `metadata.uid` is kept;
/// - `spec.volumeAttributesClassName` and `status` are accepted and not used.
///
/// `notes` is unused today and kept for symmetry with the other decoders. Errors go to `ctx`;
/// `None` when the document has any.
pub fn decode_claim(ctx: &mut Ctx, doc: &Node, notes: &mut Vec<Diagnostic>) -> Option<Claim> {
    let _ = notes;
    let errs = ctx.error_count();
    let mut r = ctx.map(doc, "")?;
    check_api_version(ctx, &mut r, doc, "PersistentVolumeClaim", &["v1"]);
    let meta = read_meta(ctx, r.take("metadata"), doc.span, true);
    let mut class = ClaimClass::Unset;
    let mut modes = AccessModes::default();
    let mut mode = VolumeMode::Filesystem;
    let mut request = ByteSize::default();
    let mut selector = None;
    let mut volume_name = None;
    let mut data_source = None;
    if let Some(spec) = r.require(ctx, "spec")
        && let Some(mut s) = ctx.map(spec, "spec")
    {
        if let Some(n) = s.require(ctx, "accessModes") {
            modes = access_modes(ctx, n, "spec.accessModes", false).unwrap_or_default();
        }
        if let Some(n) = s.take("volumeMode") {
            mode = volume_mode(ctx, n, "spec.volumeMode").unwrap_or_default();
        }
        if let Some(n) = s.require(ctx, "resources") {
            request = resources(ctx, n, "spec.resources").unwrap_or_default();
        }
        if let Some(n) = s.take("selector") {
            selector = label_selector(ctx, n, "spec.selector");
        }
        if let Some(n) = s.take("volumeName") {
            volume_name = ctx.nonempty_string(n, "spec.volumeName");
        }
        // A quoted `""` is a value (Empty); a bare `storageClassName:` is null (Unset).
        if let Some(n) = s.take("storageClassName")
            && let Some(c) = ctx.string(n, "spec.storageClassName")
        {
            class = if c.is_empty() {
                ClaimClass::Empty
            } else {
                ClaimClass::Named(c)
            };
        }
        let plain = s
            .take("dataSource")
            .and_then(|n| typed_ref(ctx, n, "spec.dataSource", false));
        let full = s
            .take("dataSourceRef")
            .and_then(|n| typed_ref(ctx, n, "spec.dataSourceRef", true));
        data_source = full.or(plain);
        s.ignore(&["volumeAttributesClassName"]);
        s.finish(ctx);
    }
    r.ignore(&["status"]);
    r.finish(ctx);
    if let Some(c) = meta.annotations.get(BETA_CLASS_ANNOTATION) {
        class = if c.is_empty() {
            ClaimClass::Empty
        } else {
            ClaimClass::Named(c.clone())
        };
    }
    if ctx.error_count() > errs {
        return None;
    }
    Some(Claim {
        namespace: meta.namespace.unwrap_or_else(|| "default".to_string()),
        name: meta.name?,
        uid: meta.uid,
        class,
        access_modes: modes,
        volume_mode: mode,
        request,
        selector,
        volume_name,
        data_source,
    })
}

/// Reads `resources`: `requests.storage` (required) and `limits.storage`; returns the request.
fn resources(ctx: &mut Ctx, node: &Node, field: &str) -> Option<ByteSize> {
    let mut r = ctx.map(node, field)?;
    let mut request = None;
    match r.take("requests") {
        Some(req) => {
            let f = r.path("requests");
            if let Some(mut q) = ctx.map(req, &f) {
                if let Some(n) = q.require(ctx, "storage") {
                    request = quantity(ctx, n, &format!("{f}.storage"));
                }
                q.finish(ctx);
            }
        }
        None => ctx.error(node.span, field, "missing required field `requests` (with `storage`)"),
    }
    if let Some(lim) = r.take("limits") {
        let f = r.path("limits");
        if let Some(mut q) = ctx.map(lim, &f) {
            if let Some(n) = q.take("storage") {
                quantity(ctx, n, &format!("{f}.storage"));
            }
            q.finish(ctx);
        }
    }
    r.finish(ctx);
    request
}

/// Reads a TypedLocalObjectReference (`apiGroup`, `kind`, `name`) or, with `namespaced`, a
/// TypedObjectReference (also `namespace`), as `Kind/name`.
fn typed_ref(ctx: &mut Ctx, node: &Node, field: &str, namespaced: bool) -> Option<String> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let kind = r
        .require(ctx, "kind")
        .and_then(|n| ctx.nonempty_string(n, &format!("{field}.kind")));
    let name = r
        .require(ctx, "name")
        .and_then(|n| ctx.nonempty_string(n, &format!("{field}.name")));
    if let Some(n) = r.take("apiGroup") {
        ctx.string(n, &format!("{field}.apiGroup"));
    }
    if namespaced && let Some(n) = r.take("namespace") {
        ctx.string(n, &format!("{field}.namespace"));
    }
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    Some(format!("{}/{}", kind?, name?))
}
