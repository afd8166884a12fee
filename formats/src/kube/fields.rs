//! Typed readers for Kubernetes field values, by Kubernetes' own validation rules: exact-case
//! enums, resource quantities, access modes, volume modes and object/label names.

use crate::yaml::{Ctx, Node, closest};
use fedvol_common::model::{AccessMode, AccessModes, VolumeMode};
use fedvol_common::size::ByteSize;

/// Reads one of `choices`, compared case-sensitively as the Kubernetes API does (`Retain`, not
/// `retain`); a near miss gets a "did you mean" hint.
pub(crate) fn exact_one_of(ctx: &mut Ctx, node: &Node, field: &str, choices: &[&'static str]) -> Option<&'static str> {
    let s = ctx.string(node, field)?;
    if let Some(c) = choices.iter().find(|c| **c == s) {
        return Some(c);
    }
    let msg = format!("expected one of {}, found `{s}`", choices.join(", "));
    match closest(&s, choices.iter().copied()) {
        Some(c) => ctx.error_hint(node.span, field, msg, format!("did you mean `{c}`?")),
        None => ctx.error(node.span, field, msg),
    }
    None
}

/// Reads a Kubernetes resource quantity (`5Gi`, `100G`, `1e9`, plain bytes) as exact bytes.
/// Fuzzball-style units ending in `B` (`10GB`) are not Kubernetes quantities and are refused
/// with a hint naming the Kubernetes spelling.
pub(crate) fn quantity(ctx: &mut Ctx, node: &Node, field: &str) -> Option<ByteSize> {
    let s = ctx.string(node, field)?;
    let t = s.trim();
    if let Some(stripped) = t.strip_suffix(['B', 'b']) {
        let hint = if let Some(base) = stripped.strip_suffix(['i', 'I']) {
            format!("Kubernetes writes binary units without the B, e.g. `{base}i`")
        } else {
            format!("Kubernetes writes decimal units without the B, e.g. `{stripped}`, or binary ones as Ki, Mi, Gi")
        };
        ctx.error_hint(node.span, field, format!("`{s}` is not a Kubernetes quantity"), hint);
        return None;
    }
    match ByteSize::parse(t) {
        Ok(b) => Some(b),
        Err(e) => {
            ctx.error(node.span, field, e.to_string());
            None
        }
    }
}

/// Reads a size in fedvol files: Fuzzball sizes (`10GB`, `1TiB`) or Kubernetes quantities.
pub(crate) fn size(ctx: &mut Ctx, node: &Node, field: &str) -> Option<ByteSize> {
    let s = ctx.string(node, field)?;
    match ByteSize::parse(&s) {
        Ok(b) => Some(b),
        Err(e) => {
            ctx.error(node.span, field, e.to_string());
            None
        }
    }
}

/// Reads a list of access modes. `short` also admits `RWO`/`ROX`/`RWX`/`RWOP` (fedvol files);
/// Kubernetes documents use the long names only. Kubernetes rules: at least one mode, and
/// `ReadWriteOncePod` cannot be combined with another mode.
pub(crate) fn access_modes(ctx: &mut Ctx, node: &Node, field: &str, short: bool) -> Option<AccessModes> {
    let items = ctx.seq(node, field)?;
    let mut modes = Vec::new();
    let mut ok = true;
    let names: Vec<&'static str> = AccessMode::ALL.iter().map(|(_, l, _)| *l).collect();
    for (i, item) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let Some(s) = ctx.string(item, &f) else {
            ok = false;
            continue;
        };
        let found = AccessMode::ALL
            .iter()
            .find(|(_, long, sh)| *long == s || (short && *sh == s))
            .map(|(m, ..)| *m);
        match found {
            Some(m) => modes.push(m),
            None => {
                ok = false;
                let expected = if short {
                    "ReadWriteOnce (RWO), ReadOnlyMany (ROX), ReadWriteMany (RWX) or ReadWriteOncePod (RWOP)"
                } else {
                    "ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod"
                };
                let msg = format!("unknown access mode `{s}`; expected {expected}");
                match closest(&s, names.iter().copied()) {
                    Some(c) => ctx.error_hint(item.span, &f, msg, format!("did you mean `{c}`?")),
                    None => ctx.error(item.span, &f, msg),
                }
            }
        }
    }
    if !ok {
        return None;
    }
    let set = AccessModes::of(&modes);
    if set.is_empty() {
        ctx.error(node.span, field, "at least one access mode is required");
        return None;
    }
    if set.contains(AccessMode::ReadWriteOncePod) && set.len() > 1 {
        ctx.error(
            node.span,
            field,
            "ReadWriteOncePod cannot be combined with other access modes",
        );
        return None;
    }
    Some(set)
}

/// Reads `Filesystem` or `Block` (exact case, as Kubernetes).
pub(crate) fn volume_mode(ctx: &mut Ctx, node: &Node, field: &str) -> Option<VolumeMode> {
    match exact_one_of(ctx, node, field, &["Filesystem", "Block"])? {
        "Block" => Some(VolumeMode::Block),
        _ => Some(VolumeMode::Filesystem),
    }
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// A DNS-1123 label: at most 63 lowercase letters, digits and `-`, starting and ending with a
/// letter or digit (Kubernetes namespaces).
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| is_alnum(c) || c == '-')
        && s.starts_with(is_alnum)
        && s.ends_with(is_alnum)
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated labels of lowercase letters,
/// digits and `-` (Kubernetes object names such as StorageClass, PV and PVC names).
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars().all(|c| is_alnum(c) || c == '-' || c == '.')
        && s.starts_with(is_alnum)
        && s.ends_with(is_alnum)
}

fn is_name_part(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| ok(c) || matches!(c, '-' | '_' | '.'))
        && s.starts_with(ok)
        && s.ends_with(ok)
}

/// A Kubernetes qualified name: `[prefix/]name`, prefix a DNS subdomain, name at most 63
/// letters, digits, `-`, `_`, `.` starting and ending alphanumeric. Label and annotation keys,
/// and provisioner names (`example.com/nfs`, `ebs.csi.aws.com`), follow it.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_name_part(name),
        None => is_name_part(s),
    }
}

/// A label value: empty, or at most 63 letters, digits, `-`, `_`, `.` starting and ending
/// alphanumeric.
pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name_part(s)
}

/// Checks every key and value of a label map by Kubernetes' rules, reporting each bad one at
/// the map's position.
pub(crate) fn check_labels(
    ctx: &mut Ctx,
    node: &Node,
    field: &str,
    labels: &std::collections::BTreeMap<String, String>,
) {
    for (k, v) in labels {
        if !is_qualified_name(k) {
            ctx.error(
                node.span,
                field,
                format!("`{k}` is not a valid label key; expected [prefix/]name with letters, digits, `-`, `_`, `.`"),
            );
        }
        if !is_label_value(v) {
            ctx.error(
                node.span,
                field,
                format!("label `{k}` has invalid value `{v}`; expected at most 63 letters, digits, `-`, `_`, `.`"),
            );
        }
    }
}

/// Checks the driver (storage class) parameters of the mapping `node` at `field`: a parameter
/// whose key looks like a credential must hold a secret reference (`file:/path` or `env:NAME`,
/// see [`fedvol_common::secrets`]), never the secret. Each inline one is an error at its value's
/// position naming the key; the value is never repeated.
pub(crate) fn check_secret_parameters(ctx: &mut Ctx, node: &Node, field: &str) {
    let crate::yaml::Value::Map(entries) = &node.value else {
        return;
    };
    for (k, v) in entries {
        let crate::yaml::Value::Scalar(text, _) = &v.value else {
            continue;
        };
        if let Err(e) = fedvol_common::secrets::check_parameter(&k.name, text) {
            ctx.error_hint(
                v.span,
                &crate::yaml::join(field, &k.name),
                e.to_string(),
                "put the secret in a file readable by the provisioner (file:/etc/...) or in its environment (env:NAME)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        assert!(is_dns_subdomain("csi-rbd-sc"));
        assert!(is_dns_subdomain("a.b-c"));
        assert!(!is_dns_subdomain("Fast"));
        assert!(!is_dns_subdomain("-x"));
        assert!(is_qualified_name("ebs.csi.aws.com"));
        assert!(is_qualified_name("kubernetes.io/gce-pd"));
        assert!(is_qualified_name("k8s-sigs.io/nfs-subdir-external-provisioner"));
        assert!(!is_qualified_name("a/b/c"));
        assert!(!is_qualified_name("/x"));
        assert!(!is_qualified_name("has space"));
        assert!(is_label_value(""));
        assert!(!is_label_value("a b"));
        assert!(is_dns_label("default"));
        assert!(!is_dns_label("a.b"));
    }
}
