//! Rendering catalog templates: Go `text/template` sources (CIQ's application catalog) made
//! into Fuzzfiles with their values, for `fedvol render` and `--values`.
//!
//! The engine is the `gotmpl` crate (a port of Go's `text/template`: trim markers `{{-`/`-}}`,
//! variables and assignment, `if`/`else if`/`else`, `range $i, $v :=`, `with`, pipelines and
//! Go's built-ins `printf`, `len`, `index`, `eq`, `not`, `and`, `or`...). fedvol adds the
//! sprig functions the catalog uses ([`funcs`]) and the values files ([`values`]). The rules:
//!
//! - **Data.** The merged values files are the template's dot: `.Cores` reads the value named
//!   `Cores` (see [`values`] for the two file shapes and the merge).
//! - **Unknown functions** are refused before anything runs: one error per call, naming the
//!   function and its file:line:col ([`RenderError::UnknownFunctions`]).
//! - **Unset values.** A name no values file sets reads as Go's `nil`, which is false in `if`
//!   and empty for `default` and `empty`, as in Go and sprig. Printing it, or giving it to a
//!   fedvol function that needs a value, is an error naming the action's file:line:col and the
//!   unset names read on that line ([`RenderError::Unset`], [`RenderError::Exec`]).
//! - **Positions.** Every error names the template file, line and column of the action that
//!   failed ([`trace`]); `fail "message"` gives [`RenderError::Failed`] with the template's
//!   own message.
//! - **Determinism.** `randInt` and `now` draw from a seed derived from the template's file
//!   name and the values ([`seed`]): the same inputs render the same text, so decisions taken
//!   on a rendered template replay.
//! - **Limits.** The rendered text is at most [`crate::files::max_file_bytes`]; `range`
//!   runs at most [`MAX_RANGE_ITERATIONS`] iterations in all.

pub mod check;
pub mod error;
pub mod funcs;
pub mod seed;
pub mod source;
pub mod trace;
pub mod values;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gotmpl::{MissingKey, TemplateError, Value};

pub use error::{RenderError, UnknownFunction};
pub use values::{Data, Values, ValuesFile, load_values, parse_values_str};

use crate::files::{max_file_bytes, read_text};
use crate::yaml::{Diagnostics, Span, closest};

/// The most `range` iterations one render runs (all loops together).
pub const MAX_RANGE_ITERATIONS: u64 = 1_000_000;

/// A rendered template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The rendered text (YAML, for a catalog template).
    pub text: String,
    /// The seed `randInt` and `now` drew from ([`seed::seed`]).
    pub seed: u64,
}

/// Renders the template `text` with `values`. `label` names the template in errors (the path as
/// the user gave it); its last path component is the file name the seed is derived from.
/// Errors: [`RenderError::Syntax`], [`RenderError::UnknownFunctions`], [`RenderError::Unset`],
/// [`RenderError::Failed`], [`RenderError::Exec`], [`RenderError::TooLarge`]; never a panic.
pub fn render(label: &str, text: &str, values: &Values) -> Result<Rendered, RenderError> {
    let file_name = Path::new(label)
        .file_name()
        .map_or_else(|| label.to_string(), |n| n.to_string_lossy().into_owned());
    let seed = seed::seed(&file_name, values);
    let rng = seed::Rng::new(seed);
    let tracker = trace::Tracker::default();
    let mut fmap = funcs::functions(&rng);
    fmap.insert(trace::MARK.to_string(), Arc::new(tracker.mark_fn()));
    source::check_blocks(text).map_err(|e| RenderError::Syntax {
        file: label.to_string(),
        span: e.span,
        message: e.message,
    })?;
    let mut tmpl = gotmpl::Template::new(label)
        .funcs(fmap)
        .missing_key(MissingKey::Invalid)
        .max_range_iters(MAX_RANGE_ITERATIONS)
        .parse(&source::neutralize_comments(text))
        .map_err(|e| syntax_error(label, text, e))?;

    // Check every tree (the file's body and its `define`s), then swap in instrumented copies.
    let names: Vec<String> = tmpl.templates().into_iter().map(str::to_string).collect();
    let mut reads = Vec::new();
    let mut unknown = Vec::new();
    let mut instrumented = Vec::new();
    for name in &names {
        let Some(tree) = tmpl.lookup(name) else { continue };
        let uses = check::uses(tree, name == label);
        for f in uses.functions {
            if !is_known(&f.name) {
                unknown.push((f.offset, f.name));
            }
        }
        reads.extend(uses.values);
        instrumented.push((name.clone(), trace::instrument(tree)));
    }
    if !unknown.is_empty() {
        unknown.sort();
        let known: Vec<&str> = funcs::NAMES.iter().chain(funcs::BUILTINS.iter()).copied().collect();
        return Err(RenderError::UnknownFunctions {
            file: label.to_string(),
            calls: unknown
                .into_iter()
                .map(|(offset, name)| UnknownFunction {
                    did_you_mean: closest(&name, known.iter().copied()).map(str::to_string),
                    span: source::span(text, offset),
                    name,
                })
                .collect(),
        });
    }
    let has_body = tmpl.lookup(label).is_some();
    for (name, tree) in instrumented {
        tmpl = tmpl.add_parse_tree(&name, tree);
    }

    let data = to_template_value(values);
    let mut out = Output::new(max_file_bytes());
    let result = if has_body {
        tmpl.execute_template_fmt(&mut out, label, &data)
    } else {
        // A body of only text and comments (no action): nothing to trace.
        tmpl.execute_fmt(&mut out, &data)
    };
    match result {
        Ok(()) => Ok(Rendered { text: out.buf, seed }),
        Err(e) => Err(run_error(label, text, values, &reads, &tracker, &out, e)),
    }
}

/// Reads the template at `template` and the values files at `values` (merged in order) and
/// renders it ([`render`], labelled with the path as given). Errors: unreadable files and
/// invalid values files as [`RenderError::Input`] (every problem of every file), then
/// [`render`]'s errors.
pub fn render_file(template: &Path, values: &[PathBuf]) -> Result<Rendered, RenderError> {
    let text = read_text(template).map_err(RenderError::Input)?;
    let merged = merge_values_files(values)?;
    render(&template.display().to_string(), &text, &merged)
}

/// Loads and merges values files in order ([`load_values`], [`Values::merge`]). Every problem
/// of every file is reported, as [`RenderError::Input`].
pub fn merge_values_files(values: &[PathBuf]) -> Result<Values, RenderError> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for p in values {
        match load_values(p) {
            Ok(f) => files.push(f),
            Err(d) => problems.extend(d.0),
        }
    }
    if !problems.is_empty() {
        return Err(RenderError::Input(Diagnostics(problems)));
    }
    Values::merge(&files).map_err(RenderError::Input)
}

/// True for a function a template may call: Go's built-ins and fedvol's [`funcs::NAMES`].
pub fn is_known(name: &str) -> bool {
    funcs::NAMES.contains(&name) || funcs::BUILTINS.contains(&name)
}

/// The line and column (in characters) of byte `offset` in `text`, moved back to the `{{` that
/// opens the action there when the offset points inside one on the same line.
fn span_at(text: &str, offset: usize) -> Span {
    let offset = offset.min(text.len());
    let line_start = text.get(..offset).and_then(|t| t.rfind('\n')).map_or(0, |i| i + 1);
    let end = (offset + 2).min(text.len());
    let at = text
        .get(line_start..end)
        .and_then(|t| t.rfind("{{"))
        .map_or(offset, |i| line_start + i);
    source::span(text, at)
}

fn syntax_error(label: &str, text: &str, e: TemplateError) -> RenderError {
    match e {
        TemplateError::Parse { line, col, message, .. } | TemplateError::Lex { line, col, message, .. } => {
            RenderError::Syntax {
                file: label.to_string(),
                span: Span { line, col },
                message,
            }
        }
        other => RenderError::Syntax {
            file: label.to_string(),
            span: span_at(text, 0),
            message: other.to_string(),
        },
    }
}

/// Turns an execution error into a positioned [`RenderError`].
fn run_error(
    label: &str,
    text: &str,
    values: &Values,
    reads: &[check::Use],
    tracker: &trace::Tracker,
    out: &Output,
    e: TemplateError,
) -> RenderError {
    let file = label.to_string();
    if out.too_large {
        return RenderError::TooLarge { file, limit: out.limit };
    }
    let span = span_at(text, tracker.offset());
    let mut unset: Vec<String> = reads
        .iter()
        .filter(|r| values.get(&r.name).is_none() && span_at(text, r.offset).line == span.line)
        .map(|r| r.name.clone())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    unset.retain(|n| seen.insert(n.clone()));
    if out.no_value {
        return RenderError::Unset {
            file,
            span,
            names: unset,
            values_files: values.files().to_vec(),
        };
    }
    let message = match e {
        TemplateError::Exec(m) => match m.strip_prefix(funcs::logic::FAIL_PREFIX) {
            Some(msg) => {
                return RenderError::Failed {
                    file,
                    span,
                    message: msg.to_string(),
                };
            }
            None => m,
        },
        TemplateError::RangeIterLimit => {
            format!("the template runs more than {MAX_RANGE_ITERATIONS} `range` iterations")
        }
        other => other.to_string(),
    };
    let message = match unset.as_slice() {
        [] => message,
        names => format!(
            "{message} (`.{}` {} set by no values file)",
            names.join("`, `."),
            if names.len() == 1 { "is" } else { "are" }
        ),
    };
    RenderError::Exec { file, span, message }
}

/// The template's dot: the values as a map.
fn to_template_value(values: &Values) -> Value {
    let map: BTreeMap<Arc<str>, Value> = values
        .iter()
        .map(|(k, v)| (Arc::from(k), data_value(&v.data)))
        .collect();
    Value::Map(Arc::new(map))
}

fn data_value(d: &Data) -> Value {
    match d {
        Data::Null => Value::Nil,
        Data::Bool(b) => Value::Bool(*b),
        Data::Int(i) => Value::Int(*i),
        Data::Float(f) => Value::Float(*f),
        Data::String(s) => Value::String(s.as_str().into()),
        Data::List(items) => Value::List(items.iter().map(data_value).collect()),
        Data::Map(m) => Value::Map(Arc::new(
            m.iter().map(|(k, v)| (Arc::from(k.as_str()), data_value(v))).collect(),
        )),
    }
}

/// The rendered text, capped at `limit` bytes; spots Go's `<no value>` (a nil printed).
struct Output {
    buf: String,
    limit: usize,
    no_value: bool,
    too_large: bool,
}

impl Output {
    fn new(limit: usize) -> Self {
        Output {
            buf: String::new(),
            limit,
            no_value: false,
            too_large: false,
        }
    }
}

impl fmt::Write for Output {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // gotmpl prints a nil action value with exactly this one write. (Template text that is
        // exactly `<no value>` between two actions would be taken for one: no catalog template
        // has such text, and the error would name the line.)
        if s == "<no value>" {
            self.no_value = true;
            return Err(fmt::Error);
        }
        if self.buf.len() + s.len() > self.limit {
            self.too_large = true;
            return Err(fmt::Error);
        }
        self.buf.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
