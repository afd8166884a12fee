//! Label selectors (claims), node selectors (persistent volume node affinity) and topology
//! selector terms (StorageClass `allowedTopologies`), validated by Kubernetes' rules.

use super::fields::{check_labels, exact_one_of, is_label_value, is_qualified_name};
use crate::yaml::{Ctx, Node};
use fedvol_common::model::{LabelRequirement, LabelSelector, NodeAffinity, SelectorOperator};

/// The label a host's name is matched under (and what node `matchFields` on `metadata.name`
/// means).
pub(crate) const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

fn operator(ctx: &mut Ctx, node: &Node, field: &str, allow_numeric: bool) -> Option<SelectorOperator> {
    let choices: &[&'static str] = if allow_numeric {
        &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    } else {
        &["In", "NotIn", "Exists", "DoesNotExist"]
    };
    Some(match exact_one_of(ctx, node, field, choices)? {
        "In" => SelectorOperator::In,
        "NotIn" => SelectorOperator::NotIn,
        "Exists" => SelectorOperator::Exists,
        "DoesNotExist" => SelectorOperator::DoesNotExist,
        "Gt" => SelectorOperator::Gt,
        _ => SelectorOperator::Lt,
    })
}

/// Reads one requirement `{key, operator, values}`. Rules: `In`/`NotIn` need at least one
/// value; `Exists`/`DoesNotExist` take none; `Gt`/`Lt` (node selectors only) take exactly one
/// integer. `fields_form` reads a node `matchFields` entry: its only key, `metadata.name`,
/// becomes [`HOSTNAME_LABEL`] and it takes exactly one value.
fn requirement(
    ctx: &mut Ctx,
    node: &Node,
    field: &str,
    allow_numeric: bool,
    fields_form: bool,
) -> Option<LabelRequirement> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let key = r.require(ctx, "key").and_then(|k| {
        let f = r.path("key");
        let s = ctx.nonempty_string(k, &f)?;
        if fields_form {
            if s != "metadata.name" {
                ctx.error(
                    k.span,
                    &f,
                    format!("`{s}` is not a supported field selector; only `metadata.name` is"),
                );
                return None;
            }
            return Some(HOSTNAME_LABEL.to_string());
        }
        if !is_qualified_name(&s) {
            ctx.error(
                k.span,
                &f,
                format!("`{s}` is not a valid label key; expected [prefix/]name"),
            );
            return None;
        }
        Some(s)
    });
    let op_node = r.require(ctx, "operator");
    let op = op_node.and_then(|n| operator(ctx, n, &r.path("operator"), allow_numeric && !fields_form));
    let values_node = r.take("values");
    let values = match values_node {
        Some(v) => ctx.string_list(v, &r.path("values")).unwrap_or_default(),
        None => Vec::new(),
    };
    let vf = r.path("values");
    r.finish(ctx);
    let (key, op) = (key?, op?);
    let at = values_node.map(|v| v.span).unwrap_or(node.span);
    match op {
        SelectorOperator::In | SelectorOperator::NotIn => {
            if values.is_empty() {
                ctx.error(at, &vf, "operator In/NotIn needs at least one value");
            } else if fields_form && values.len() != 1 {
                ctx.error(at, &vf, "a metadata.name field selector takes exactly one value");
            }
            for v in &values {
                if !fields_form && !is_label_value(v) {
                    ctx.error(at, &vf, format!("`{v}` is not a valid label value"));
                }
            }
        }
        SelectorOperator::Exists | SelectorOperator::DoesNotExist => {
            if !values.is_empty() {
                ctx.error(at, &vf, "operator Exists/DoesNotExist takes no values");
            }
        }
        SelectorOperator::Gt | SelectorOperator::Lt => {
            if values.len() != 1 || values[0].parse::<i64>().is_err() {
                ctx.error(at, &vf, "operator Gt/Lt takes exactly one integer value");
            }
        }
    }
    (ctx.error_count() == errs).then_some(LabelRequirement {
        key,
        operator: op,
        values,
    })
}

/// Reads a claim's `selector` (`matchLabels` and `matchExpressions`; operators In, NotIn,
/// Exists, DoesNotExist).
pub(crate) fn label_selector(ctx: &mut Ctx, node: &Node, field: &str) -> Option<LabelSelector> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let mut sel = LabelSelector::default();
    if let Some(n) = r.take("matchLabels") {
        let f = r.path("matchLabels");
        if let Some(m) = ctx.string_map(n, &f) {
            check_labels(ctx, n, &f, &m);
            sel.match_labels = m;
        }
    }
    if let Some(n) = r.take("matchExpressions") {
        let f = r.path("matchExpressions");
        for (i, item) in ctx.seq(n, &f).unwrap_or_default().iter().enumerate() {
            if let Some(req) = requirement(ctx, item, &format!("{f}[{i}]"), false, false) {
                sel.match_expressions.push(req);
            }
        }
    }
    r.finish(ctx);
    (ctx.error_count() == errs).then_some(sel)
}

/// Reads a persistent volume's `nodeAffinity` (`required.nodeSelectorTerms`, each with
/// `matchExpressions` and `matchFields`; terms ORed, requirements ANDed). A `matchFields`
/// requirement on `metadata.name` becomes one on `kubernetes.io/hostname` (a node's name is
/// its host name). A term with no requirement is refused: Kubernetes lets it match no node,
/// which is never what an inventory means.
pub(crate) fn node_affinity(ctx: &mut Ctx, node: &Node, field: &str) -> Option<NodeAffinity> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let mut affinity = NodeAffinity::default();
    match r.take("required") {
        Some(req) => {
            let rf = r.path("required");
            if let Some(mut rr) = ctx.map(req, &rf) {
                let tf = rr.path("nodeSelectorTerms");
                if let Some(terms) = rr.require(ctx, "nodeSelectorTerms") {
                    affinity.terms = node_selector_terms(ctx, terms, &tf);
                }
                rr.finish(ctx);
            }
        }
        None => ctx.error(
            node.span,
            field,
            "missing required field `required` (with `nodeSelectorTerms`)",
        ),
    }
    r.finish(ctx);
    (ctx.error_count() == errs).then_some(affinity)
}

/// Reads `nodeSelectorTerms`: at least one term, each non-empty.
fn node_selector_terms(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<Vec<LabelRequirement>> {
    let items = ctx.seq(node, field).unwrap_or_default();
    if items.is_empty() {
        ctx.error(node.span, field, "at least one node selector term is required");
    }
    let mut terms = Vec::new();
    for (i, term) in items.iter().enumerate() {
        if let Some(t) = node_selector_term(ctx, term, &format!("{field}[{i}]")) {
            terms.push(t);
        }
    }
    terms
}

/// Reads one node selector term: `matchExpressions` (label requirements, Gt/Lt allowed) and
/// `matchFields` (`metadata.name` only), ANDed.
fn node_selector_term(ctx: &mut Ctx, node: &Node, field: &str) -> Option<Vec<LabelRequirement>> {
    let errs = ctx.error_count();
    let mut t = ctx.map(node, field)?;
    let mut reqs = Vec::new();
    for (key, fields_form) in [("matchExpressions", false), ("matchFields", true)] {
        if let Some(list) = t.take(key) {
            let lf = t.path(key);
            for (j, item) in ctx.seq(list, &lf).unwrap_or_default().iter().enumerate() {
                if let Some(q) = requirement(ctx, item, &format!("{lf}[{j}]"), true, fields_form) {
                    reqs.push(q);
                }
            }
        }
    }
    t.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    if reqs.is_empty() {
        ctx.error(
            node.span,
            field,
            "an empty node selector term matches no host; give it matchExpressions",
        );
        return None;
    }
    Some(reqs)
}

/// One `allowedTopologies` requirement: a label key and the values it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopologyRequirement {
    /// Topology label key, e.g. `topology.kubernetes.io/zone`.
    pub key: String,
    /// Allowed values.
    pub values: Vec<String>,
    /// Where the requirement stands.
    pub span: crate::yaml::Span,
}

/// Reads StorageClass `allowedTopologies`: a list of terms, each with `matchLabelExpressions`
/// (`{key, values}`, values required). Returned flattened; the caller decides what each key
/// means.
pub(crate) fn allowed_topologies(ctx: &mut Ctx, node: &Node, field: &str) -> Option<Vec<TopologyRequirement>> {
    let errs = ctx.error_count();
    let mut out = Vec::new();
    for (i, term) in ctx.seq(node, field).unwrap_or_default().iter().enumerate() {
        let f = format!("{field}[{i}]");
        let Some(mut t) = ctx.map(term, &f) else {
            continue;
        };
        let ef = t.path("matchLabelExpressions");
        if let Some(list) = t.require(ctx, "matchLabelExpressions") {
            for (j, item) in ctx.seq(list, &ef).unwrap_or_default().iter().enumerate() {
                let xf = format!("{ef}[{j}]");
                let Some(mut x) = ctx.map(item, &xf) else {
                    continue;
                };
                let key = x
                    .require(ctx, "key")
                    .and_then(|k| ctx.nonempty_string(k, &format!("{xf}.key")));
                let values = x
                    .require(ctx, "values")
                    .and_then(|v| ctx.string_list(v, &format!("{xf}.values")));
                if let Some(v) = &values
                    && v.is_empty()
                {
                    ctx.error(item.span, &format!("{xf}.values"), "at least one value is required");
                }
                x.finish(ctx);
                if let (Some(key), Some(values)) = (key, values) {
                    out.push(TopologyRequirement {
                        key,
                        values,
                        span: item.span,
                    });
                }
            }
        }
        t.finish(ctx);
    }
    (ctx.error_count() == errs).then_some(out)
}
