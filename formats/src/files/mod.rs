//! Reading files (docs/design.md §3): classifying what a file holds, loading cluster inventories (with
//! their `include:`s) and workflows (Fuzzfiles or Kubernetes PersistentVolumeClaims), with the
//! notices (skipped documents and the like) that loading produced.

mod claims;
mod classify;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use crate::docs::Loaded;
pub use claims::claims_workflow;
pub use classify::{FileKind, classify, classify_rendered};

use crate::docs::template_error;
use crate::fuzzfile::{parse_fuzzfile, parse_rendered_fuzzfile};
use crate::inventory::{IncludedFile, parse_inventory_with};
use crate::kube::notice;
use crate::yaml::{Diagnostics, Limits, Span};
use fedvol_common::model::{Inventory, Workflow};

/// The largest file fedvol reads, in bytes ([`Limits::max_bytes`], 64 MiB).
pub fn max_file_bytes() -> usize {
    Limits::default().max_bytes
}

fn file_error(label: &str, message: String) -> Diagnostics {
    Diagnostics(vec![notice(label, Span { line: 1, col: 1 }, "", message)])
}

/// Reads a text file, refusing files over [`max_file_bytes`] and non-UTF-8 content. Errors name
/// the file and the operating system's error.
pub fn read_text(path: &Path) -> Result<String, Diagnostics> {
    let label = path.display().to_string();
    read_text_msg(path).map_err(|m| file_error(&label, m))
}

fn read_text_msg(path: &Path) -> Result<String, String> {
    let limit = max_file_bytes();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read file: {e}"))?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read file: {e}"))?;
    if bytes.len() > limit {
        return Err(format!("file is larger than the limit of {} MiB", limit >> 20));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "file is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn stem_of(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // `x.fz.yaml` → `x`; `inventory.yaml` → `inventory`.
    let base = name.split('.').next().unwrap_or("");
    if base.is_empty() { name } else { base.to_string() }
}

/// Loads one cluster's inventory from `path` (a fedvol inventory, optionally with Kubernetes
/// documents, or a file of Kubernetes StorageClasses / PersistentVolumes whose cluster is
/// named after the file stem), resolving `include:` paths relative to the file's directory.
/// Errors: unreadable or oversized files, templates, YAML errors, and every format or reference
/// error (see [`parse_inventory`]).
pub fn load_inventory(path: &Path) -> Result<Loaded<Inventory>, Diagnostics> {
    let text = read_text(path)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse_inventory_at(&path.display().to_string(), &stem_of(path), &text, Some(&base), None)
}

/// [`load_inventory`] for an agent whose zones and hosts come from a live source named
/// `source` (e.g. `Slurm`): the file gives provisioners, volumes and projects; a `zones:`
/// section is an error naming the source, and zone and host references are not checked (see
/// [`crate::inventory::parse_inventory_with`]).
pub fn load_inventory_without_zones(path: &Path, source: &str) -> Result<Loaded<Inventory>, Diagnostics> {
    let text = read_text(path)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse_inventory_at(
        &path.display().to_string(),
        &stem_of(path),
        &text,
        Some(&base),
        Some(source),
    )
}

/// Parses an inventory from text; `label` names it in messages (and its stem names the
/// cluster when the text has no `cluster:`); `base_dir` resolves `include:` paths (with `None`,
/// an `include:` is an error).
pub fn parse_inventory_str(label: &str, text: &str, base_dir: Option<&Path>) -> Result<Loaded<Inventory>, Diagnostics> {
    parse_inventory_at(label, &stem_of(Path::new(label)), text, base_dir, None)
}

fn parse_inventory_at(
    label: &str,
    stem: &str,
    text: &str,
    base_dir: Option<&Path>,
    zones_from: Option<&str>,
) -> Result<Loaded<Inventory>, Diagnostics> {
    let kind = classify(label, text)?;
    match kind {
        FileKind::Workflow => {
            return Err(file_error(
                label,
                "this is a workflow (Fuzzfile), not a cluster inventory".into(),
            ));
        }
        FileKind::Template => {
            return Err(template_error(
                label,
                crate::template::find_template(text).unwrap_or(Span { line: 1, col: 1 }),
            ));
        }
        FileKind::Inventory | FileKind::KubernetesInventory | FileKind::KubernetesClaims => {}
    }
    let mut read_include = |p: &str| -> Result<IncludedFile, String> {
        let Some(base) = base_dir else {
            return Err("includes need the inventory's location; load the inventory from a file".into());
        };
        let full: PathBuf = base.join(p);
        let text = read_text_msg(&full)?;
        Ok(IncludedFile {
            label: full.display().to_string(),
            text,
        })
    };
    let loaded = parse_inventory_with(label, text, stem, &mut read_include, zones_from)?;
    check_limits(label, fedvol_common::limits::inventory_problems(&loaded.value))?;
    Ok(loaded)
}

/// Loads a workflow from `path`: a Fuzzfile (named after the file stem) or a file of
/// PersistentVolumeClaims (see [`claims_workflow`]). Errors: unreadable or oversized files,
/// templates, YAML errors, inventories, and every format error.
pub fn load_workflow(path: &Path) -> Result<Loaded<Workflow>, Diagnostics> {
    let text = read_text(path)?;
    parse_workflow_str(&path.display().to_string(), &stem_of(path), &text)
}

/// How a template's rendered text is named in messages: `PATH (rendered)`.
pub fn rendered_label(path: &Path) -> String {
    format!("{} (rendered)", path.display())
}

/// The note on the first diagnostic of a rendered text: its line numbers are the rendered
/// text's, not the template's.
fn note_rendered(mut d: Diagnostics, path: &Path) -> Diagnostics {
    if let Some(first) = d.0.first_mut() {
        let note = format!(
            "line numbers refer to the rendered text; `fedvol render {} --values ...` prints it",
            path.display()
        );
        first.hint = Some(match first.hint.take() {
            Some(h) => format!("{h}; {note}"),
            None => note,
        });
    }
    d
}

/// Parses `rendered`, the rendered text of the template at `path`, as a workflow named after
/// the template's file (as [`load_workflow`] would name it). A Fuzzfile is parsed by
/// [`parse_rendered_fuzzfile`] (a literal `{{` in it is data, not a template); other kinds as
/// [`parse_workflow_str`] would. Every diagnostic names the file [`rendered_label`]; their
/// lines are lines of the rendered text, which the first one says.
pub fn parse_rendered_workflow(path: &Path, rendered: &str) -> Result<Loaded<Workflow>, Diagnostics> {
    let label = rendered_label(path);
    let name = stem_of(path);
    let parsed = match classify_rendered(&label, rendered) {
        Ok(FileKind::Workflow) => parse_rendered_fuzzfile(&label, &name, rendered)
            .map(|w| Loaded {
                value: w,
                notices: Vec::new(),
            })
            .and_then(|l| {
                check_limits(&label, fedvol_common::limits::workflow_problems(&l.value))?;
                Ok(l)
            }),
        Ok(_) => parse_workflow_str(&label, &name, rendered),
        Err(d) => Err(d),
    };
    parsed.map_err(|d| note_rendered(d, path))
}

/// Parses `rendered`, the rendered text of the template at `path`, as a cluster inventory
/// (includes resolve from the template's directory); diagnostics as in
/// [`parse_rendered_workflow`].
pub fn parse_rendered_inventory(path: &Path, rendered: &str) -> Result<Loaded<Inventory>, Diagnostics> {
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse_inventory_at(&rendered_label(path), &stem_of(path), rendered, Some(&base), None)
        .map_err(|d| note_rendered(d, path))
}

/// Parses a workflow from text; `name` names a Fuzzfile (which has no name field) and a file of
/// several claims. A Fuzzfile goes to [`parse_fuzzfile`]; claims to [`claims_workflow`].
///
/// A workflow that parses but breaks a limit of [`fedvol_common::limits::workflow_problems`] (more than
/// 1000 volumes or jobs, over-long names or annotations) is an error at the offending item.
pub fn parse_workflow_str(label: &str, name: &str, text: &str) -> Result<Loaded<Workflow>, Diagnostics> {
    let loaded = parse_workflow_unchecked(label, name, text)?;
    check_limits(label, fedvol_common::limits::workflow_problems(&loaded.value))?;
    Ok(loaded)
}

/// The problems of [`fedvol_common::limits`] as positioned diagnostics of `label` (line 1 when the
/// model keeps no position).
fn check_limits(label: &str, problems: Vec<fedvol_common::limits::Problem>) -> Result<(), Diagnostics> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(Diagnostics(
        problems
            .into_iter()
            .map(|p| {
                let span = Span {
                    line: p.line.max(1),
                    col: 1,
                };
                let file = if p.file.is_empty() { label } else { p.file.as_str() };
                notice(file, span, &p.field, p.message)
            })
            .collect(),
    ))
}

fn parse_workflow_unchecked(label: &str, name: &str, text: &str) -> Result<Loaded<Workflow>, Diagnostics> {
    match classify(label, text)? {
        FileKind::Workflow => parse_fuzzfile(label, name, text).map(|w| Loaded { value: w, notices: Vec::new() }),
        FileKind::KubernetesClaims => claims_workflow(label, name, text),
        FileKind::Template => Err(template_error(label, crate::template::find_template(text).unwrap_or(Span { line: 1, col: 1 }))),
        FileKind::Inventory => Err(file_error(label, "this is a cluster inventory, not a workflow".into())),
        FileKind::KubernetesInventory => Err(file_error(
            label,
            "this file holds StorageClasses / PersistentVolumes but no PersistentVolumeClaim: it is a cluster inventory, not a workflow".into(),
        )),
    }
}

#[cfg(test)]
mod tests;
