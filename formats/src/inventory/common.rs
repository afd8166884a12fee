//! Small readers shared by the inventory sections: names, positioned string lists, tags.

use crate::yaml::{Ctx, Node, Span};
use fedvol_common::model::Tag;

/// A price (`costPerGbHour`, `hostCostPerHour`): a finite number >= 0 (a rate, not a size, so a
/// float is exact enough). Anything else is an error at the value's position saying it expected
/// `what` (e.g. "a price per GB-hour").
pub fn cost(ctx: &mut Ctx, n: &Node, f: &str, what: &str) -> Option<f64> {
    match n.as_scalar().and_then(|s| s.trim().parse::<f64>().ok()) {
        Some(v) if v.is_finite() && v >= 0.0 => Some(v),
        _ => {
            ctx.error(
                n.span,
                f,
                format!(
                    "expected a number >= 0 ({what}), found {}",
                    crate::yaml::decode::describe(n)
                ),
            );
            None
        }
    }
}

/// Names that `use:` gives a meaning of its own (Fuzzball "Annotations and Selection"): no provisioner may take them.
pub(crate) const RESERVED_PROVISIONER_NAMES: [&str; 2] = ["ephemeral", "persistent"];

/// True for a fedvol object name: 1 to 253 letters, digits, `-`, `_`, `.`, starting with a
/// letter or digit (so it is safe as a file name, a storage class name and in messages).
pub(crate) fn is_object_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// True for a NATS subject token as fedvol uses them: letters, digits, `-`, `_`.
pub fn is_subject_token(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// Checks an object name at `span`; reports and returns false when it is not one.
pub(crate) fn check_object_name(ctx: &mut Ctx, span: Span, field: &str, what: &str, name: &str) -> bool {
    if is_object_name(name) {
        return true;
    }
    ctx.error(span, field, format!("`{name}` is not a valid {what} name; use letters, digits, `-`, `_` and `.`, starting with a letter or digit"));
    false
}

/// Reads a list of strings keeping each item's position (for reference checks).
pub(crate) fn positioned_list(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    for (i, item) in ctx.seq(node, field).unwrap_or_default().iter().enumerate() {
        if let Some(s) = ctx.nonempty_string(item, &format!("{field}[{i}]")) {
            out.push((s, item.span));
        }
    }
    out
}

/// Reads a list of capability tags (`key` or `key:value`, Cloud Assembly's provisioning funnel).
pub(crate) fn tags(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<Tag> {
    let mut out = Vec::new();
    for (i, item) in ctx.seq(node, field).unwrap_or_default().iter().enumerate() {
        let f = format!("{field}[{i}]");
        if let Some(s) = ctx.string(item, &f) {
            match Tag::parse(&s) {
                Ok(t) => out.push(t),
                Err(e) => ctx.error(item.span, &f, e.to_string()),
            }
        }
    }
    out
}

/// Reads an optional whole number >= 0.
pub(crate) fn opt_u64(ctx: &mut Ctx, node: Option<&Node>, field: &str) -> Option<u64> {
    node.and_then(|n| ctx.u64(n, field))
}
