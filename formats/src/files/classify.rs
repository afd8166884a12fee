//! Telling file kinds apart by their documents (docs/design.md §3): a fedvol inventory, a Fuzzfile,
//! Kubernetes storage objects, or an unrendered template.

use crate::docs::load_error;
use crate::inventory::INVENTORY_KEYS;
use crate::kube::{DocKind, expand_lists, kind_of, notice};
use crate::template::find_template;
use crate::yaml::{Ctx, Diagnostics, Limits, Node, Span, load_documents};

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A fedvol cluster inventory (a document with `cluster:`, `provisioners:` or `zones:`).
    Inventory,
    /// A Fuzzfile (a document with `version:`).
    Workflow,
    /// Only Kubernetes StorageClass / PersistentVolume documents (and skipped other kinds).
    KubernetesInventory,
    /// Kubernetes PersistentVolumeClaims (possibly beside StorageClasses / PVs).
    KubernetesClaims,
    /// An unrendered Go template (`{{ ... }}`).
    Template,
}

/// Keys that mark a fedvol inventory document.
const INVENTORY_MARKERS: [&str; 3] = ["cluster", "provisioners", "zones"];

/// Classifies a file's text (`label` names it in errors). Precedence when documents differ:
/// a template action anywhere → `Template`; else a fedvol inventory document → `Inventory`;
/// a document with `version` → `Workflow`; any PersistentVolumeClaim → `KubernetesClaims`; any
/// StorageClass or PersistentVolume → `KubernetesInventory`.
///
/// Errors: a YAML error (when the text is not a template), an empty file, and a file with none
/// of the above (e.g. only Deployments, or a document with neither `kind`, `version` nor
/// `cluster`).
pub fn classify(label: &str, text: &str) -> Result<FileKind, Diagnostics> {
    let docs = match load_documents(text, Limits::default()) {
        Ok(d) => d,
        Err(e) => {
            if find_template(text).is_some() {
                return Ok(FileKind::Template);
            }
            return Err(load_error(label, &e));
        }
    };
    if find_template(text).is_some() {
        return Ok(FileKind::Template);
    }
    classify_docs(label, &docs)
}

/// Classifies the rendered text of a template: [`classify`] without the template check (a
/// rendered text may hold a literal `{{`), so the result is never [`FileKind::Template`].
pub fn classify_rendered(label: &str, text: &str) -> Result<FileKind, Diagnostics> {
    let docs = load_documents(text, Limits::default()).map_err(|e| load_error(label, &e))?;
    classify_docs(label, &docs)
}

fn classify_docs(label: &str, docs: &[Node]) -> Result<FileKind, Diagnostics> {
    let mut scratch = Ctx::new(label);
    let (mut inventory, mut workflow, mut claims, mut storage) = (false, false, false, false);
    let mut others: Vec<String> = Vec::new();
    let mut unknown: Option<Span> = None;
    for doc in expand_lists(&mut scratch, docs) {
        match kind_of(doc) {
            Some((_, kind)) => match DocKind::of(&kind) {
                DocKind::PersistentVolumeClaim => claims = true,
                DocKind::StorageClass | DocKind::PersistentVolume => storage = true,
                DocKind::List | DocKind::Other => {
                    if !others.contains(&kind) {
                        others.push(kind);
                    }
                }
            },
            None => {
                if INVENTORY_MARKERS.iter().any(|k| doc.get(k).is_some()) {
                    inventory = true;
                } else if doc.get("version").is_some() {
                    workflow = true;
                } else if unknown.is_none() {
                    unknown = Some(doc.span);
                }
            }
        }
    }
    if inventory {
        return Ok(FileKind::Inventory);
    }
    if workflow {
        return Ok(FileKind::Workflow);
    }
    if claims {
        return Ok(FileKind::KubernetesClaims);
    }
    if storage {
        return Ok(FileKind::KubernetesInventory);
    }
    let mut d = match unknown {
        Some(span) => notice(
            label,
            span,
            "",
            "cannot tell what this document is: it has no `kind` (Kubernetes), `version` (Fuzzfile) or `cluster` (inventory)",
        ),
        None if others.is_empty() => notice(label, Span { line: 1, col: 1 }, "", "the file holds no document"),
        None => notice(
            label,
            Span { line: 1, col: 1 },
            "",
            format!(
                "the file holds no fedvol inventory, Fuzzfile or Kubernetes storage object (only {})",
                others.join(", ")
            ),
        ),
    };
    if unknown.is_some() {
        d.hint = Some(format!(
            "an inventory starts with `cluster:` (keys: {}); a Fuzzfile with `version: v1` or `version: v4`",
            INVENTORY_KEYS.join(", ")
        ));
    }
    Err(Diagnostics(vec![d]))
}
