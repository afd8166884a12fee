//! `fedvol check`: validate inventories and workflows without planning (files, or directories
//! of them). Every problem in every file is printed with file:line:column, field and a hint;
//! exit 1 when any file is invalid.
//! With `--values`, each template among the files is rendered and its rendered text checked.

use std::path::{Path, PathBuf};

use fedvol_common::model::{Inventory, Workflow};
use fedvol_formats::files::{parse_rendered_inventory, parse_rendered_workflow, read_text};
use fedvol_formats::render::render_file;
use fedvol_formats::{FileKind, classify, load_inventory, load_workflow};

use super::{Leading, Run};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::print::{label, print_diagnostics, print_notices};

/// Arguments of `fedvol check`.
#[derive(Debug, clap::Args)]
pub struct Check {
    /// Files to check: cluster inventories, Fuzzfiles, Kubernetes storage manifests; a
    /// directory checks each of its *.yaml, *.yml and *.json files (not its subdirectories).
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Values files for the catalog templates among the files.
    #[command(flatten)]
    pub values: crate::cli::template::ValuesArgs,
}

fn inventory_line(p: &Path, inv: &Inventory, suffix: &str) {
    use crate::render::words::count;
    let hosts: usize = inv.zones.iter().map(|z| z.hosts.len()).sum();
    println!(
        "ok  {}: inventory of cluster {} ({}, {}, {}, {}, {}; version {}){suffix}",
        label(p),
        inv.cluster,
        count(inv.provisioners.len(), "provisioner", "provisioners"),
        count(inv.volumes.len(), "volume", "volumes"),
        count(inv.projects.len(), "project", "projects"),
        count(inv.zones.len(), "zone", "zones"),
        count(hosts, "host", "hosts"),
        inv.version
    );
}

fn workflow_line(p: &Path, wf: &Workflow, suffix: &str) {
    use crate::render::words::count;
    println!(
        "ok  {}: workflow {} ({}, {}){suffix}",
        label(p),
        wf.name,
        count(wf.volumes.len(), "volume", "volumes"),
        count(wf.jobs.len(), "job", "jobs")
    );
}

/// Renders the template `p` with `values` and checks the rendered text as whatever it holds.
fn check_rendered(p: &Path, values: &[PathBuf]) -> bool {
    let rendered = match render_file(p, values) {
        Ok(r) => r,
        Err(e) => {
            print_diagnostics(&e.diagnostics());
            return false;
        }
    };
    let suffix = format!(
        ", rendered with {} values file{}",
        values.len(),
        if values.len() == 1 { "" } else { "s" }
    );
    let result = match classify(&fedvol_formats::files::rendered_label(p), &rendered.text) {
        Ok(FileKind::Inventory | FileKind::KubernetesInventory) => {
            parse_rendered_inventory(p, &rendered.text).map(|l| {
                print_notices(&l.notices);
                inventory_line(p, &l.value, &suffix);
            })
        }
        Ok(_) => parse_rendered_workflow(p, &rendered.text).map(|l| {
            print_notices(&l.notices);
            workflow_line(p, &l.value, &suffix);
        }),
        Err(d) => Err(d),
    };
    match result {
        Ok(()) => true,
        Err(d) => {
            print_diagnostics(&d);
            false
        }
    }
}

/// Checks one file; prints its verdict line to stdout and problems to stderr; true when valid.
/// `values` render the file first when it is a template.
fn check_one(p: &Path, values: &[PathBuf]) -> bool {
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
        FileKind::Template if !values.is_empty() => check_rendered(p, values),
        FileKind::Inventory | FileKind::KubernetesInventory => match load_inventory(p) {
            Ok(l) => {
                print_notices(&l.notices);
                inventory_line(p, &l.value, "");
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
                workflow_line(p, &l.value, "");
                true
            }
            Err(d) => {
                print_diagnostics(&d);
                false
            }
        },
    }
}

impl Run for Check {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Unused
    }

    /// Runs `fedvol check`; returns 0 when every file is valid, else 1. A directory stands for its
    /// files ([`crate::cli::inputs::files_in`]); one that holds none is an error.
    fn run(self) -> u8 {
        let a = &self;
        let (files, errors) = crate::cli::inputs::expand(&a.files);
        let mut ok = errors.is_empty();
        for e in &errors {
            eprintln!("error: {e}");
        }
        for p in &files {
            ok &= check_one(p, &a.values.values);
        }
        if ok { EXIT_OK } else { EXIT_BAD_INPUT }
    }
}
