//! Reading a catalog form: `values:` entries with a `name` and one typed default.

use std::collections::BTreeMap;

use super::{Data, Declaration, Entry, FormKind, Setting, ValuesFile};
use crate::yaml::{Ctx, Diagnostics, Node, Span};

/// The value keys of an entry, in the order they are reported.
const VALUE_KEYS: [FormKind; 4] = [FormKind::String, FormKind::Uint, FormKind::Bool, FormKind::Secret];

/// Reads a form document (a mapping with a `values` list): every problem is collected.
pub(super) fn read_form(label: &str, doc: &Node) -> Result<ValuesFile, Diagnostics> {
    let mut ctx = Ctx::new(label);
    let mut entries = Vec::new();
    if let Some(mut top) = ctx.map(doc, "") {
        if let Some(list) = top.take("values")
            && let Some(items) = ctx.seq(list, "values")
        {
            let mut seen: BTreeMap<String, Span> = BTreeMap::new();
            for (i, item) in items.iter().enumerate() {
                let field = format!("values[{i}]");
                let Some(e) = read_entry(&mut ctx, label, item, &field) else {
                    continue;
                };
                if let Some(first) = seen.get(&e.name) {
                    ctx.error(
                        e.span,
                        &format!("{field}.name"),
                        format!("`{}` is set twice in this form (first at line {})", e.name, first.line),
                    );
                    continue;
                }
                seen.insert(e.name.clone(), e.span);
                entries.push(e);
            }
        }
        top.finish(&mut ctx);
    }
    ctx.finish(ValuesFile {
        label: label.to_string(),
        is_form: true,
        entries,
    })
}

/// One form entry; `None` (with errors recorded) when it is unusable.
fn read_entry(ctx: &mut Ctx, label: &str, item: &Node, field: &str) -> Option<Entry> {
    let mut m = ctx.map(item, field)?;
    let name_node = m.require(ctx, "name");
    let name = name_node.and_then(|n| ctx.nonempty_string(n, &m.path("name")));
    m.ignore(&["display_name", "display_category", "description"]);
    let mut found: Vec<(FormKind, &Node)> = Vec::new();
    for k in VALUE_KEYS {
        if let Some(n) = m.take(k.key()) {
            found.push((k, n));
        }
    }
    let options = match m.take("options_input") {
        Some(o) => read_options(ctx, o, &m.path("options_input")),
        None => Some(Vec::new()),
    };
    let span = m.span();
    m.finish(ctx);
    let (kind, node) = match found.as_slice() {
        [one] => *one,
        [] => {
            let keys: Vec<&str> = VALUE_KEYS.iter().map(|k| k.key()).collect();
            ctx.error(
                span,
                field,
                format!("a form entry needs a default: one of {}", keys.join(", ")),
            );
            return None;
        }
        [_, (second, n), ..] => {
            ctx.error(
                n.span,
                &format!("{field}.{}", second.key()),
                "a form entry has one default; this is a second `*_value`",
            );
            return None;
        }
    };
    let value_field = format!("{field}.{}", kind.key());
    let data = match kind {
        FormKind::String => ctx.string(node, &value_field).map(Data::String),
        FormKind::Uint => ctx
            .int(node, &value_field, 0, i64::MAX as i128)
            .map(|v| Data::Int(v as i64)),
        FormKind::Bool => ctx.bool(node, &value_field).map(Data::Bool),
        FormKind::Secret => read_secret(ctx, node, &value_field).map(Data::String),
    };
    let (name, data, options) = (name?, data?, options?);
    if !options.is_empty() && kind != FormKind::String {
        ctx.error(
            span,
            &format!("{field}.options_input"),
            format!(
                "options_input restricts a string_value; this entry has a {}",
                kind.key()
            ),
        );
        return None;
    }
    let name_span = name_node.map_or(span, |n| n.span);
    Some(Entry {
        name,
        span: name_span,
        setting: Setting::Form(
            data,
            Declaration {
                kind,
                options,
                file: label.to_string(),
                span: name_span,
            },
        ),
    })
}

/// `options_input: {options: [a, b]}`.
fn read_options(ctx: &mut Ctx, node: &Node, field: &str) -> Option<Vec<String>> {
    let mut m = ctx.map(node, field)?;
    let opts = match m.require(ctx, "options") {
        Some(o) => ctx.string_list(o, &format!("{field}.options")),
        None => None,
    };
    m.finish(ctx);
    opts
}

/// `secret_value: {reference: secret://...}`: the reference (may be empty: no secret given).
fn read_secret(ctx: &mut Ctx, node: &Node, field: &str) -> Option<String> {
    let mut m = ctx.map(node, field)?;
    let has = m.has("reference");
    let r = m.take("reference");
    let out = match r {
        Some(n) => ctx.string(n, &format!("{field}.reference")),
        // `reference:` with no value, like `reference: ""`, means no secret was given.
        None if has => Some(String::new()),
        None => {
            ctx.error(m.span(), field, "missing required field `reference`");
            None
        }
    };
    m.finish(ctx);
    out
}
