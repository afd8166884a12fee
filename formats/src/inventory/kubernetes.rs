//! The documents of an inventory file: the fedvol document (main file only) and Kubernetes
//! StorageClass / PersistentVolume documents; other kinds are skipped with a notice.

use super::doc::{FedvolDoc, decode_fedvol_doc};
use crate::kube::{DocKind, decode_persistent_volume, decode_storage_class, expand_lists, kind_of, skipped_notice};
use crate::yaml::{Ctx, Diagnostic, Node};
use fedvol_common::model::{PersistentVolume, Provisioner};

/// Kubernetes storage objects gathered from every file of one inventory, in document order.
#[derive(Debug, Clone, Default)]
pub(crate) struct KubeItems {
    /// StorageClasses that decoded.
    pub classes: Vec<Provisioner>,
    /// `metadata.name` of every StorageClass document, decoded or not.
    pub class_names: Vec<String>,
    /// PersistentVolumes that decoded.
    pub volumes: Vec<PersistentVolume>,
    /// How many PersistentVolumeClaims were skipped.
    pub claims: usize,
}

/// Whether a file is the inventory itself or one it includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The inventory file: may hold one fedvol document.
    Main,
    /// A file named by `include:`: Kubernetes manifests only.
    Include,
}

/// Reads every document of one file into `items`; returns the fedvol document when the main
/// file has one. Errors: a second fedvol document, a fedvol document in an included file, a
/// document that is not a mapping, and every error of the documents themselves.
pub(crate) fn read_documents(
    ctx: &mut Ctx,
    docs: &[Node],
    role: Role,
    notes: &mut Vec<Diagnostic>,
    items: &mut KubeItems,
) -> Option<FedvolDoc> {
    let mut fedvol: Option<FedvolDoc> = None;
    for doc in expand_lists(ctx, docs) {
        match kind_of(doc) {
            Some((api, kind)) => match DocKind::of(&kind) {
                DocKind::StorageClass => {
                    if let Some(name) = doc
                        .get("metadata")
                        .and_then(|m| m.get("name"))
                        .and_then(Node::as_scalar)
                    {
                        items.class_names.push(name.to_string());
                    }
                    if let Some(p) = decode_storage_class(ctx, doc, notes) {
                        items.classes.push(p);
                    }
                }
                DocKind::PersistentVolume => {
                    if let Some(v) = decode_persistent_volume(ctx, doc, notes) {
                        items.volumes.push(v);
                    }
                }
                DocKind::PersistentVolumeClaim => {
                    items.claims += 1;
                    notes.push(skipped_notice(ctx.file(), doc, &api, &kind, "a claim is a workflow, not part of a cluster inventory; load the file as a workflow to plan it"));
                }
                DocKind::List | DocKind::Other => {
                    notes.push(skipped_notice(
                        ctx.file(),
                        doc,
                        &api,
                        &kind,
                        "fedvol reads only StorageClass and PersistentVolume documents in an inventory",
                    ));
                }
            },
            None if doc.as_map().is_none() => {
                ctx.error(
                    doc.span,
                    "",
                    format!(
                        "expected a mapping (an inventory or a Kubernetes object), found {}",
                        doc.kind_name()
                    ),
                );
            }
            None if role == Role::Include => {
                ctx.error(
                    doc.span,
                    "kind",
                    "an included file holds Kubernetes manifests only; this document has no `kind`",
                );
            }
            None if fedvol.is_some() => {
                ctx.error(doc.span, "", "a second inventory document; a file holds one fedvol inventory (Kubernetes documents may accompany it)");
            }
            None => fedvol = Some(decode_fedvol_doc(ctx, doc)),
        }
    }
    fedvol
}
