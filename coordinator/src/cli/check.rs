//! `fedvol check`: validate inventories and workflows without planning. Every problem in every
//! file is printed with file:line:column, field and a hint; exit 1 when any file is invalid.

use std::path::{Path, PathBuf};

use fedvol_common::format::files::read_text;
use fedvol_common::format::{FileKind, classify, load_inventory, load_workflow};

use super::{EXIT_BAD_INPUT, EXIT_OK, label, print_diagnostics, print_notices};

/// Arguments of `fedvol check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Files to check: cluster inventories, Fuzzfiles, Kubernetes storage manifests.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// Checks one file; prints its verdict line to stdout and problems to stderr; true when valid.
fn check_one(p: &Path) -> bool {
    let text = match read_text(p) {
        Ok(t) => t,
        Err(d) => {
            print_diagnostics(&d);
            return false;
        }
    };
    let kind = match classify(&label(p), &text) {
        Ok(k) => k,
        Err(d) => {
            print_diagnostics(&d);
            return false;
        }
    };
    match kind {
        FileKind::Inventory | FileKind::KubernetesInventory => match load_inventory(p) {
            Ok(l) => {
                print_notices(&l.notices);
                let inv = &l.value;
                let hosts: usize = inv.zones.iter().map(|z| z.hosts.len()).sum();
                println!(
                    "ok  {}: inventory of cluster {} ({} provisioners, {} volumes, {} projects, {} zones, {} hosts; version {})",
                    label(p),
                    inv.cluster,
                    inv.provisioners.len(),
                    inv.volumes.len(),
                    inv.projects.len(),
                    inv.zones.len(),
                    hosts,
                    inv.version
                );
                true
            }
            Err(d) => {
                print_diagnostics(&d);
                false
            }
        },
        FileKind::Workflow | FileKind::KubernetesClaims | FileKind::Template => match load_workflow(p) {
            Ok(l) => {
                print_notices(&l.notices);
                let wf = &l.value;
                println!(
                    "ok  {}: workflow {} ({} volumes, {} jobs)",
                    label(p),
                    wf.name,
                    wf.volumes.len(),
                    wf.jobs.len()
                );
                true
            }
            Err(d) => {
                print_diagnostics(&d);
                false
            }
        },
    }
}

/// Runs `fedvol check`; returns 0 when every file is valid, else 1.
pub fn run(a: &CheckArgs) -> u8 {
    let mut ok = true;
    for p in &a.files {
        ok &= check_one(p);
    }
    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
}
