//! Fuzzfile workflows (v1 and v4), strict (docs/design.md §3 "Workflow").
//!
//! Every field of `reference/fuzzfile-schema.md` is either used for placement or checked for
//! shape and knowingly dropped; any other key is an error with a "did you mean" hint, and every
//! problem in a file is reported at once, each with file, line, column and field path.
//!
//! Layout, one job per module:
//! - this module: the top level (`version`, `volumes`, `jobs`, `services`, `defaults`, `files`,
//!   `annotations`, `preemptible`, `completed`, and fedvol's additions `project`, `priority`, `clusters`)
//!   and the two entry points;
//! - [`volume`]: volume definitions and the v1 `volume://` reference translation;
//! - [`job`]: jobs and services; [`service`], [`network`]: their non-placement parts;
//! - [`resource`]: `resource` → per-node needs; [`mount`]: the three mount forms;
//! - [`defaults`]: what jobs and services inherit; [`resolve`]: cross-references,
//!   inheritance and access modes; [`shapes`]: small shared readers.
//!
//! Keys are kebab-case; the camelCase JSON spellings `byCore`, `decryptionSecret`,
//! `procsPerNode`, `exposeTcp` and `exposeUdp` are accepted as aliases (schema §0).

mod defaults;
mod job;
mod mount;
mod network;
mod resolve;
mod resource;
mod service;
mod shapes;
mod volume;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use self::mount::MountForm;
use self::resolve::{Header, VolumeDraft};
use self::shapes::{NameRef, name_list};
use super::template::find_template;
use crate::yaml::{Ctx, Diagnostics, Limits, MapReader, Node, Span, join, load_documents};
use fedvol_common::model::{JobKind, Workflow, WorkflowFormat};

/// Decodes one YAML document as a Fuzzfile named `name` (the workflow has no name field; the
/// caller passes e.g. the file's stem).
///
/// Every problem is recorded in `ctx`: a missing or unknown `version` (allowed: `v1`, `v4`),
/// unknown keys (with "did you mean"), wrong types, values out of range, mounts in the other
/// version's form, bad `volume://` references, and dangling names (a mount naming no volume;
/// `depends-on`, `requires` or `affinity` naming no job or service). Returns `None` when the
/// document is unusable (not a mapping, or no valid `version`); otherwise the workflow, which
/// is only meaningful when `ctx` holds no errors.
///
/// The result holds volume requests in file order (access modes: ReadWriteMany when a
/// multinode job or two or more jobs/services mount the volume, else ReadWriteOnce) and jobs
/// then services in file order, with `defaults` applied (see `resolve`).
pub fn decode_fuzzfile(ctx: &mut Ctx, name: &str, doc: &Node) -> Option<Workflow> {
    let mut r = ctx.map(doc, "")?;
    let format = match r.require(ctx, "version") {
        Some(n) => match ctx.one_of(n, "version", &["v1", "v4"]) {
            Some("v1") => Some(WorkflowFormat::FuzzfileV1),
            Some(_) => Some(WorkflowFormat::FuzzfileV4),
            None => None,
        },
        None => None,
    };
    let form = match format {
        Some(WorkflowFormat::FuzzfileV1) => MountForm::V1,
        Some(_) => MountForm::V4,
        None => MountForm::Unknown,
    };
    let mut volumes = Vec::new();
    if let Some(n) = r.take("volumes") {
        // Each volume is exported to a job as `FEDVOL_VOLUME_<KEY>` on a cluster that runs
        // jobs (`fedvol_common::run::volume_env`): two keys that give the same variable would
        // leave one volume without its variable.
        let mut vars: std::collections::BTreeMap<String, (String, usize)> = Default::default();
        for_each_entry(ctx, n, "volumes", |ctx, key, node, field| {
            let var = fedvol_common::run::volume_env(&key.name);
            match vars.get(&var) {
                Some((first, line)) => ctx.error(
                    key.span,
                    field,
                    format!(
                        "volumes `{first}` (line {line}) and `{}` both become the variable {var} of a job that mounts them: one of them would have no variable; rename one",
                        key.name
                    ),
                ),
                None => {
                    vars.insert(var, (key.name.clone(), key.span.line));
                }
            }
            if let Some(source) = volume::volume(ctx, node, field) {
                volumes.push(VolumeDraft { key, source });
            }
        });
    }
    let mut drafts = Vec::new();
    for (section, kind) in [("jobs", JobKind::Job), ("services", JobKind::Service)] {
        if let Some(n) = r.take(section) {
            for_each_entry(ctx, n, section, |ctx, key, node, field| {
                if let Some(d) = job::job(ctx, key, node, field, kind, form) {
                    drafts.push(d);
                }
            });
        }
    }
    let defaults = match r.take("defaults") {
        Some(n) => defaults::defaults(ctx, n, "defaults", form),
        None => defaults::Defaults::default(),
    };
    let header = header(ctx, &mut r);
    r.finish(ctx);
    let workflow = resolve::assemble(
        ctx,
        name,
        format.unwrap_or(WorkflowFormat::FuzzfileV4),
        header,
        volumes,
        drafts,
        &defaults,
    );
    format.map(|_| workflow)
}

/// Reads the remaining top-level fields: `files` (map of name → content), `annotations`,
/// `preemptible`, `completed` ({`status`}), and fedvol's `project`, `priority` and `clusters`.
fn header(ctx: &mut Ctx, r: &mut MapReader<'_>) -> Header {
    let mut h = Header::default();
    if let Some(n) = r.take("files") {
        ctx.string_map(n, "files");
    }
    if let Some(n) = r.take("annotations") {
        h.annotations = ctx.string_map(n, "annotations").unwrap_or_default();
    }
    if let Some(n) = r.take("preemptible") {
        ctx.bool(n, "preemptible");
    }
    if let Some(n) = r.take("completed")
        && let Some(mut c) = ctx.map(n, "completed")
    {
        if let Some(s) = c.take("status") {
            ctx.string(s, &c.path("status"));
        }
        c.finish(ctx);
    }
    if let Some(n) = r.take("project") {
        h.project = ctx.nonempty_string(n, "project");
    }
    if let Some(n) = r.take("priority") {
        h.priority = ctx.nonempty_string(n, "priority");
    }
    if let Some(n) = r.take("clusters") {
        let mut seen = BTreeSet::new();
        for c in name_list(ctx, n, "clusters") {
            if !seen.insert(c.name.clone()) {
                ctx.error(c.span, "clusters", format!("cluster `{}` is listed twice", c.name));
            } else {
                h.clusters.push(c.name);
            }
        }
    }
    h
}

/// Calls `f` for each entry of a name-keyed mapping (`volumes`, `jobs`, `services`) in file
/// order, with the key, the value and the entry's field path. A repeated key is reported (by
/// the map reader) and only its first entry is used.
fn for_each_entry(ctx: &mut Ctx, node: &Node, field: &str, mut f: impl FnMut(&mut Ctx, NameRef, &Node, &str)) {
    let shape = format!("a mapping of names to their definitions, `{field}: {{<name>: {{...}}}}`");
    let Some(mut r) = ctx.map_shaped(node, field, &shape) else {
        return;
    };
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (key, value) in r.rest() {
        if !seen.insert(&key.name) {
            continue;
        }
        f(
            ctx,
            NameRef {
                name: key.name.clone(),
                span: key.span,
            },
            value,
            &join(field, &key.name),
        );
    }
    r.finish(ctx);
}

/// Parses a Fuzzfile's text. `label` is the file name used in messages; `name` becomes the
/// workflow's name.
///
/// Errors, all as [`Diagnostics`] with line and column:
/// - an unrendered Go template (`{{ }}`, see [`find_template`]): one diagnostic at the first
///   action, saying the file must be rendered with its values first; nothing else is checked;
/// - invalid YAML, or not exactly one YAML document;
/// - everything [`decode_fuzzfile`] reports.
pub fn parse_fuzzfile(label: &str, name: &str, text: &str) -> Result<Workflow, Diagnostics> {
    if let Some(span) = find_template(text) {
        return Err(Diagnostics(vec![super::template::unrendered_template(label, span)]));
    }
    parse_rendered_fuzzfile(label, name, text)
}

/// Parses the rendered text of a catalog template as a Fuzzfile: [`parse_fuzzfile`] without
/// the template check, since a rendered text may hold a literal `{{` on purpose (a template
/// writes one with ``{{ `{{` }}``, e.g. for a Python f-string in a script). Errors: as
/// [`parse_fuzzfile`], less the unrendered template.
pub fn parse_rendered_fuzzfile(label: &str, name: &str, text: &str) -> Result<Workflow, Diagnostics> {
    let mut ctx = Ctx::new(label);
    let docs = match load_documents(text, Limits::default()) {
        Ok(docs) => docs,
        Err(e) => {
            ctx.error(e.span, "", format!("not valid YAML: {}", e.message));
            return Err(Diagnostics(ctx.into_diagnostics()));
        }
    };
    let Some(doc) = docs.first() else {
        ctx.error(
            Span { line: 1, col: 1 },
            "",
            "the file is empty; expected a Fuzzfile starting with `version:`",
        );
        return Err(Diagnostics(ctx.into_diagnostics()));
    };
    if let Some(extra) = docs.get(1) {
        ctx.error(
            extra.span,
            "",
            format!(
                "a Fuzzfile is one YAML document; this file has {} (separated by `---`)",
                docs.len()
            ),
        );
    }
    match decode_fuzzfile(&mut ctx, name, doc) {
        Some(wf) => ctx.finish(wf),
        None => {
            if ctx.is_ok() {
                ctx.error(doc.span, "", "not a usable Fuzzfile");
            }
            Err(Diagnostics(ctx.into_diagnostics()))
        }
    }
}
