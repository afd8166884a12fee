//! Kubernetes storage documents, read by Kubernetes' own rules (the Kubernetes volume provisioning design):
//! `StorageClass` → [`Provisioner`](fedvol_common::model::Provisioner),
//! `PersistentVolume` → [`PersistentVolume`](fedvol_common::model::PersistentVolume),
//! `PersistentVolumeClaim` → [`Claim`](fedvol_common::model::Claim).
//!
//! Known fields at known levels are checked strictly (unknown keys are errors with a "did you
//! mean" hint); `metadata` accepts every standard ObjectMeta field; volume sources and other
//! opaque parts are accepted without being read. Other kinds (Namespace, Deployment, Pod...) are
//! recognised by [`kind_of`] so callers can skip them with a [`notice`].

mod claim;
pub(crate) mod fields;
mod meta;
mod pv;
mod selector;
mod storage_class;

pub use claim::decode_claim;
pub use pv::{VOLUME_SOURCES, decode_persistent_volume};
pub use storage_class::{
    BETA_DEFAULT_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATION, ZONE_TOPOLOGY_KEYS, decode_storage_class,
};

pub(crate) use pv::claim_ref;
pub(crate) use selector::HOSTNAME_LABEL;

use crate::yaml::{Ctx, Diagnostic, MapReader, Node, Span};

/// The beta annotation that names a volume's or claim's storage class; when present it wins
/// over `spec.storageClassName`, as in Kubernetes.
pub const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The `(apiVersion, kind)` of a document, when it is a mapping with a string `kind`
/// (`apiVersion` is `""` when missing). `None` for anything else (fedvol and Fuzzfile documents
/// have no `kind`).
pub fn kind_of(doc: &Node) -> Option<(String, String)> {
    let kind = doc.get("kind")?.as_scalar()?.to_string();
    let api = doc
        .get("apiVersion")
        .and_then(Node::as_scalar)
        .unwrap_or("")
        .to_string();
    Some((api, kind))
}

/// What fedvol does with a Kubernetes document of a given kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// `StorageClass`: a provisioner.
    StorageClass,
    /// `PersistentVolume`: an existing volume.
    PersistentVolume,
    /// `PersistentVolumeClaim`: a claim (a one-volume workflow).
    PersistentVolumeClaim,
    /// `List` (`v1`): its `items` are documents in their own right.
    List,
    /// Anything else: skipped with a notice.
    Other,
}

impl DocKind {
    /// Classifies a `kind` value (exact case, as Kubernetes).
    pub fn of(kind: &str) -> DocKind {
        match kind {
            "StorageClass" => DocKind::StorageClass,
            "PersistentVolume" => DocKind::PersistentVolume,
            "PersistentVolumeClaim" => DocKind::PersistentVolumeClaim,
            "List" => DocKind::List,
            _ => DocKind::Other,
        }
    }
}

/// Builds a notice (an informational [`Diagnostic`], not an error) for `file` at `span`.
pub fn notice(file: &str, span: Span, field: &str, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: span.line,
        col: span.col,
        field: field.to_string(),
        message: message.into(),
        hint: None,
    }
}

/// The notice for a document of a kind fedvol does not read here: names the kind, the object's
/// name when it has one, and why it is skipped.
pub fn skipped_notice(file: &str, doc: &Node, api_version: &str, kind: &str, why: &str) -> Diagnostic {
    let name = doc
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Node::as_scalar);
    let what = match name {
        Some(n) => format!("{kind} `{n}`"),
        None => kind.to_string(),
    };
    let api = if api_version.is_empty() {
        String::new()
    } else {
        format!(" ({api_version})")
    };
    notice(file, doc.span, "kind", format!("skipped {what}{api}: {why}"))
}

/// Flattens the documents of a file: `kind: List` documents (`kubectl get -o yaml` output) are
/// replaced by their `items`, others are kept, in order. Null documents are dropped. A List
/// whose `items` is not a list is an error in `ctx`.
pub fn expand_lists<'n>(ctx: &mut Ctx, docs: &'n [Node]) -> Vec<&'n Node> {
    let mut out = Vec::new();
    for doc in docs {
        push_expanded(ctx, doc, &mut out, 0);
    }
    out
}

fn push_expanded<'n>(ctx: &mut Ctx, doc: &'n Node, out: &mut Vec<&'n Node>, depth: usize) {
    if doc.is_null() {
        return;
    }
    let is_list = kind_of(doc).is_some_and(|(api, kind)| DocKind::of(&kind) == DocKind::List && api == "v1");
    if !is_list || depth > 4 {
        out.push(doc);
        return;
    }
    let Some(mut r) = ctx.map(doc, "") else {
        return;
    };
    r.ignore(&["apiVersion", "kind", "metadata"]);
    let items = r.take("items");
    r.finish(ctx);
    if let Some(items) = items {
        for item in ctx.seq(items, "items").unwrap_or_default() {
            push_expanded(ctx, item, out, depth + 1);
        }
    }
}

/// Declares `apiVersion` and `kind` known and checks that `apiVersion` is one of `allowed` for
/// `kind` (e.g. a PersistentVolume must be `v1`).
pub(crate) fn check_api_version(ctx: &mut Ctx, r: &mut MapReader<'_>, doc: &Node, kind: &str, allowed: &[&str]) {
    r.take("kind");
    match r.take("apiVersion") {
        Some(n) => {
            if let Some(v) = ctx.string(n, "apiVersion")
                && !allowed.contains(&v.as_str())
            {
                ctx.error(
                    n.span,
                    "apiVersion",
                    format!("a {kind} has apiVersion {}, found `{v}`", allowed.join(" or ")),
                );
            }
        }
        None => ctx.error(
            doc.span,
            "apiVersion",
            format!("missing required field `apiVersion` ({})", allowed.join(" or ")),
        ),
    }
}

#[cfg(test)]
mod tests;
