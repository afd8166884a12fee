//! Catalog templates on the command line: `fedvol render`, and the `--values` option that
//! `check`, `plan` and `submit` share. The rendering itself is
//! [`fedvol_formats::render`]; this module reads the arguments, prints the result and
//! the diagnostics.

use std::path::{Path, PathBuf};

use fedvol_common::model::Workflow;
use fedvol_formats::files::{Loaded, parse_rendered_workflow, read_text};
use fedvol_formats::load_workflow;
use fedvol_formats::render::render_file;
use fedvol_formats::template::find_template;

use super::exit::{EXIT_BAD_INPUT, EXIT_OK};
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

/// Help shown by `fedvol render --help`: the rules of rendering.
pub const RENDER_ABOUT: &str = "\
Render a catalog template with its values files and print the YAML.

The template is Go text/template (trim markers, variables, if/else, range, with, pipelines,
and Go's built-ins: and, call, eq, ge, gt, html, index, js, le, len, lt, ne, not, or, print,
printf, println, slice, urlquery). fedvol adds these sprig functions, as sprig defines them:
add, append, b64enc, base, default, dict, empty, fail, hasPrefix, int, join, list, lower,
max, mul, now, randInt, replace, splitList, sub, substr, toJson, toString, trim, trimAll,
trimPrefix, trimSuffix, unixEpoch. Any other function is an error naming its file:line:col.

Values: a catalog form (`values:` entries with name and string_value, uint_value,
bool_value or secret_value) or a plain `Name: value` mapping; `.Name` reads the value.
Several --values merge in order, later keys overriding earlier ones. A value no file sets is
false in `if` and empty for `default`; printing it is an error naming file and line.

randInt and now are deterministic: they draw from a seed derived from the template's file
name and the values, so the same inputs always render the same text (now is not the clock).";

/// Arguments of `fedvol render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The template (a catalog `template.yaml`).
    #[arg(value_name = "TEMPLATE")]
    pub template: PathBuf,
    /// A values file (repeatable; later files override earlier keys).
    #[arg(long = "values", value_name = "FILE", required = true)]
    pub values: Vec<PathBuf>,
}

/// Runs `fedvol render`: the rendered text on stdout (exit 0), or every problem on stderr
/// (exit 1).
pub fn render(a: &RenderArgs) -> u8 {
    match render_file(&a.template, &a.values) {
        Ok(r) => {
            print!("{}", r.text);
            EXIT_OK
        }
        Err(e) => {
            print_diagnostics(&e.diagnostics());
            EXIT_BAD_INPUT
        }
    }
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
