//! Input paths as the offline commands take them: a file, or a directory standing for the files
//! in it (`fedvol check DIR`, `fedvol plan -i DIR`), as `fedvol dev --clusters DIR` reads one.

use std::path::{Path, PathBuf};

use fedvol_formats::{FileKind, classify};

/// The extensions of the files a directory stands for.
const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// The files directory `dir` stands for: its `*.yaml`, `*.yml` and `*.json` files, in name
/// order; subdirectories are not searched.
///
/// Errors: one line naming the directory, when it cannot be read or holds no such file.
pub fn files_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: cannot read the directory: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| EXTENSIONS.contains(&e))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!(
            "{}: no *.yaml, *.yml or *.json file in this directory (subdirectories are not searched)",
            dir.display()
        ));
    }
    Ok(files)
}

/// The paths `given`, each directory replaced by its files ([`files_in`]), for `fedvol check`.
///
/// Errors: one line per directory that stands for no file (the other paths are still given).
pub fn expand(given: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in given {
        if p.is_dir() {
            match files_in(p) {
                Ok(f) => files.extend(f),
                Err(e) => errors.push(e),
            }
        } else {
            files.push(p.clone());
        }
    }
    (files, errors)
}

/// The inventories `given` to `fedvol plan -i`, each directory replaced by its cluster
/// inventories: the files of [`files_in`] that are fedvol inventories (`cluster:`), as `fedvol
/// dev --clusters DIR` takes them. Every other file of a directory is skipped with a note on
/// stderr naming what it is; a file named by itself is kept whatever it is (its loading says
/// what is wrong).
///
/// Errors: one line per directory holding no inventory (the other paths are still given).
pub fn inventories(given: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in given {
        if !p.is_dir() {
            files.push(p.clone());
            continue;
        }
        let in_dir = match files_in(p) {
            Ok(f) => f,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let before = files.len();
        for f in in_dir {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            match classify(&super::print::label(&f), &text) {
                Ok(FileKind::Inventory) => files.push(f),
                Ok(kind) => eprintln!(
                    "note: {} is not a cluster inventory ({}): skipped",
                    super::print::label(&f),
                    what(kind)
                ),
                Err(_) => eprintln!(
                    "note: {} is not a cluster inventory (`fedvol check {}` says what it is): skipped",
                    super::print::label(&f),
                    super::print::label(&f)
                ),
            }
        }
        if files.len() == before {
            errors.push(format!(
                "{}: no cluster inventory (a file with `cluster:`) in this directory",
                p.display()
            ));
        }
    }
    (files, errors)
}

/// What a file of `kind` is, in words.
fn what(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Inventory => "an inventory",
        FileKind::KubernetesInventory => "Kubernetes storage classes or volumes; `-i FILE` plans it as a cluster",
        FileKind::Workflow | FileKind::KubernetesClaims => "a workflow",
        FileKind::Template => "a catalog template",
    }
}
