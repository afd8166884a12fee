//! A file of Kubernetes PersistentVolumeClaims as a workflow (docs/design.md §3): one volume request per
//! claim, no jobs.

use std::collections::BTreeMap;

use crate::docs::{Loaded, load_docs};
use crate::kube::{DocKind, decode_claim, expand_lists, kind_of, notice, skipped_notice};
use crate::yaml::{Ctx, Diagnostics, Span};
use fedvol_common::model::{VolumeRequest, VolumeSource, Workflow, WorkflowFormat};

/// Builds a workflow from the PersistentVolumeClaims in `text` (read from `label`).
///
/// Each claim becomes a [`VolumeRequest`] keyed by the claim's name with the claim's access
/// modes (the Kubernetes volume provisioning design binding and provisioning then apply). The workflow is named after the claim
/// when there is exactly one, else `fallback_name` (the file stem). StorageClass and
/// PersistentVolume documents beside the claims, and every other kind, are skipped with a
/// notice. Errors: a claim's own errors, two claims with the same name, a document without
/// `kind`, and a file with no claim at all.
pub fn claims_workflow(label: &str, fallback_name: &str, text: &str) -> Result<Loaded<Workflow>, Diagnostics> {
    let docs = load_docs(label, text)?;
    let mut ctx = Ctx::new(label);
    let mut notes = Vec::new();
    let mut volumes: Vec<VolumeRequest> = Vec::new();
    let mut lines: BTreeMap<String, usize> = BTreeMap::new();
    for doc in expand_lists(&mut ctx, &docs) {
        let Some((api, kind)) = kind_of(doc) else {
            ctx.error(
                doc.span,
                "kind",
                "a workflow of claims holds Kubernetes documents only; this document has no `kind`",
            );
            continue;
        };
        match DocKind::of(&kind) {
            DocKind::PersistentVolumeClaim => {
                let Some(claim) = decode_claim(&mut ctx, doc, &mut notes) else {
                    continue;
                };
                if let Some(first) = lines.get(&claim.name) {
                    ctx.error(doc.span, "metadata.name", format!("a claim named `{}` is already defined at line {first}; claim names are the workflow's volume keys", claim.name));
                    continue;
                }
                lines.insert(claim.name.clone(), doc.span.line);
                volumes.push(VolumeRequest {
                    key: claim.name.clone(),
                    access_modes: claim.access_modes,
                    source: VolumeSource::Claim(claim),
                    line: doc.span.line,
                });
            }
            DocKind::StorageClass | DocKind::PersistentVolume => {
                notes.push(skipped_notice(
                    ctx.file(),
                    doc,
                    &api,
                    &kind,
                    "storage classes and volumes belong to a cluster inventory, not to a workflow",
                ));
            }
            DocKind::List | DocKind::Other => {
                notes.push(skipped_notice(
                    ctx.file(),
                    doc,
                    &api,
                    &kind,
                    "a workflow of claims uses only PersistentVolumeClaim documents",
                ));
            }
        }
    }
    if volumes.is_empty() && ctx.is_ok() {
        let mut diags = ctx.into_diagnostics();
        diags.push(notice(
            label,
            Span { line: 1, col: 1 },
            "",
            "no PersistentVolumeClaim in this file, so it is not a workflow",
        ));
        return Err(Diagnostics(diags));
    }
    let name = match volumes.as_slice() {
        [only] => only.key.clone(),
        _ => fallback_name.to_string(),
    };
    let workflow = Workflow {
        priority: None,
        name,
        format: WorkflowFormat::KubernetesClaim,
        volumes,
        jobs: Vec::new(),
        project: None,
        clusters: Vec::new(),
        annotations: BTreeMap::new(),
    };
    ctx.finish(Loaded {
        value: workflow,
        notices: notes,
    })
}
