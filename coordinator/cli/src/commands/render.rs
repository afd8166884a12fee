//! `fedvol render TEMPLATE --values FILE...`: a catalog template rendered with its values files
//! ([`fedvol_formats::render`]) and printed as YAML, or every problem with file and line.

use std::path::PathBuf;

use fedvol_formats::render::render_file;

use super::{Leading, Run};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::print::print_diagnostics;

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
pub struct Render {
    /// The template (a catalog `template.yaml`).
    #[arg(value_name = "TEMPLATE")]
    pub template: PathBuf,
    /// A values file (repeatable; later files override earlier keys).
    #[arg(long = "values", value_name = "FILE", required = true)]
    pub values: Vec<PathBuf>,
}

impl Run for Render {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Unused
    }

    /// Runs `fedvol render`: the rendered text on stdout (exit 0), or every problem on stderr
    /// (exit 1).
    fn run(self) -> u8 {
        let a = &self;
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
}
