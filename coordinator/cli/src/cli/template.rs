//! Catalog templates on the command line: the `--values` option that `check`, `plan` and
//! `submit` share, and reading a workflow that may be a template. The rendering itself is
//! [`fedvol_formats::render`] (which `fedvol render` prints).

use std::path::{Path, PathBuf};

use fedvol_common::model::Workflow;
use fedvol_formats::files::{Loaded, parse_rendered_workflow, read_text};
use fedvol_formats::load_workflow;
use fedvol_formats::render::render_file;
use fedvol_formats::template::find_template;

use super::print::{print_diagnostics, print_notices};

/// The `--values` option of `check`, `plan` and `submit`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ValuesArgs {
    /// A values file for a catalog template (a Go text/template Fuzzfile): its catalog
    /// `values.yaml` form or a plain `Name: value` mapping. Repeatable: later files override
    /// earlier keys. Applies to template files only.
    #[arg(long = "values", value_name = "FILE")]
    pub values: Vec<PathBuf>,
}

/// A workflow read from the command line, with the text it was parsed from.
#[derive(Debug)]
pub struct WorkflowInput {
    /// The workflow and its notices.
    pub loaded: Loaded<Workflow>,
    /// The bytes the workflow came from: the file, or the rendered text of a template (plans
    /// derive their default request id from them).
    pub source: Vec<u8>,
}

/// Reads the workflow at `path`. With `values`, a template is rendered first
/// ([`render_file`]) and its rendered text parsed; a file that is not a template is read as it
/// is (a notice says the values were not used). Without `values`, a template is refused naming
/// `--values`. Problems are printed; `None` when there were any.
pub fn load_workflow_input(path: &Path, values: &[PathBuf]) -> Option<WorkflowInput> {
    let text = match read_text(path) {
        Ok(t) => t,
        Err(d) => {
            print_diagnostics(&d);
            return None;
        }
    };
    if values.is_empty() || find_template(&text).is_none() {
        if !values.is_empty() {
            eprintln!(
                "notice: {}: not a template (no `{{{{ }}}}` action); --values not used",
                path.display()
            );
        }
        return match load_workflow(path) {
            Ok(l) => {
                print_notices(&l.notices);
                Some(WorkflowInput {
                    loaded: l,
                    source: text.into_bytes(),
                })
            }
            Err(d) => {
                print_diagnostics(&d);
                None
            }
        };
    }
    let rendered = match render_file(path, values) {
        Ok(r) => r,
        Err(e) => {
            print_diagnostics(&e.diagnostics());
            return None;
        }
    };
    match parse_rendered_workflow(path, &rendered.text) {
        Ok(l) => {
            print_notices(&l.notices);
            Some(WorkflowInput {
                loaded: l,
                source: rendered.text.into_bytes(),
            })
        }
        Err(d) => {
            print_diagnostics(&d);
            None
        }
    }
}
