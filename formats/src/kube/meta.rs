//! `metadata` (Kubernetes ObjectMeta): every standard field is accepted; fedvol uses the name,
//! namespace, uid, labels, annotations and whether a deletion is pending.

use std::collections::BTreeMap;

use super::fields::{check_labels, is_dns_label, is_dns_subdomain, is_qualified_name};
use crate::yaml::{Ctx, Node, Span};

/// The ObjectMeta fields fedvol reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct Meta {
    /// `metadata.name` (validated as a DNS subdomain), if present and valid.
    pub name: Option<String>,
    /// `metadata.namespace`, if present.
    pub namespace: Option<String>,
    /// `metadata.uid`, if present.
    pub uid: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set.
    pub being_deleted: bool,
}

/// Every ObjectMeta field the Kubernetes API defines (read-only ones included, so that objects
/// exported with `kubectl get -o yaml` are accepted).
const KNOWN_UNUSED: &[&str] = &[
    "generateName",
    "selfLink",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Reads `metadata` of a document starting at `doc_span`. `metadata.name` is required (fedvol
/// needs a fixed name; `generateName` alone is refused). `namespaced` says whether the kind is
/// namespaced (PVC) or cluster-scoped (StorageClass, PV), for validating `namespace`.
pub(crate) fn read_meta(ctx: &mut Ctx, node: Option<&Node>, doc_span: Span, namespaced: bool) -> Meta {
    let mut meta = Meta::default();
    let Some(node) = node else {
        ctx.error(doc_span, "metadata", "missing required field `metadata` (with `name`)");
        return meta;
    };
    let Some(mut r) = ctx.map(node, "metadata") else {
        return meta;
    };
    match r.take("name") {
        Some(n) => {
            if let Some(name) = ctx.nonempty_string(n, "metadata.name") {
                if is_dns_subdomain(&name) {
                    meta.name = Some(name);
                } else {
                    ctx.error(n.span, "metadata.name", format!("`{name}` is not a valid Kubernetes name; expected lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit"));
                }
            }
        }
        None => {
            let msg = if r.has("generateName") {
                "missing required field `name`: fedvol needs a fixed name, `generateName` alone is not enough"
            } else {
                "missing required field `name`"
            };
            ctx.error(node.span, "metadata", msg);
        }
    }
    if let Some(n) = r.take("namespace")
        && let Some(ns) = ctx.string(n, "metadata.namespace")
    {
        if !is_dns_label(&ns) {
            ctx.error(
                n.span,
                "metadata.namespace",
                format!("`{ns}` is not a valid namespace name"),
            );
        } else if namespaced {
            meta.namespace = Some(ns);
        }
    }
    if let Some(n) = r.take("uid") {
        meta.uid = ctx.string(n, "metadata.uid");
    }
    if let Some(n) = r.take("labels")
        && let Some(l) = ctx.string_map(n, "metadata.labels")
    {
        check_labels(ctx, n, "metadata.labels", &l);
        meta.labels = l;
    }
    if let Some(n) = r.take("annotations")
        && let Some(a) = ctx.string_map(n, "metadata.annotations")
    {
        for k in a.keys() {
            if !is_qualified_name(k) {
                ctx.error(
                    n.span,
                    "metadata.annotations",
                    format!("`{k}` is not a valid annotation key; expected [prefix/]name"),
                );
            }
        }
        meta.annotations = a;
    }
    if let Some(n) = r.take("deletionTimestamp") {
        meta.being_deleted = ctx.string(n, "metadata.deletionTimestamp").is_some();
    }
    r.ignore(KNOWN_UNUSED);
    r.finish(ctx);
    meta
}
