//! `volumes.<name>` (schema §6) → [`FuzzballVolume`] in v4 terms (Fuzzball "Annotations and Selection": a volume is
//! resolved by a named provisioner (`use`), by an existing volume's `name`, or automatically
//! from `size`/`annotations`).
//!
//! Both versions accept every Volume field of the v4.2 schema: catalog files still write the v1
//! `reference:` under `version: v4`, so the reference form is not tied to `version` (only the
//! mount form is). A v1 reference is translated here:
//! `volume://<scope>/ephemeral` → `use: ephemeral`;
//! `volume://<scope>/persistent/<name>` → `use: persistent`, `name: <name>`.

use super::shapes::transfers;
use crate::yaml::{Ctx, Node};
use fedvol_common::model::FuzzballVolume;
use fedvol_common::size::ByteSize;

/// What a v1 reference should look like, for error messages.
const REFERENCE_FORMS: &str = "expected `volume://<scope>/<class>[/<name>]` with class `ephemeral` or `persistent`, e.g. `volume://user/persistent/data`";

/// Translates a v1 `volume://` reference to `(use, name)`. Errors name the expected forms.
pub(super) fn parse_reference(text: &str) -> Result<(String, Option<String>), String> {
    let parts: Option<Vec<&str>> = text.strip_prefix("volume://").map(|rest| rest.split('/').collect());
    match parts.as_deref() {
        Some([scope, "ephemeral"] | [scope, "ephemeral", _]) if !scope.is_empty() => {
            Ok(("ephemeral".to_string(), None))
        }
        Some([scope, "persistent"]) if !scope.is_empty() => Ok(("persistent".to_string(), None)),
        Some([scope, "persistent", name]) if !scope.is_empty() && !name.is_empty() => {
            Ok(("persistent".to_string(), Some((*name).to_string())))
        }
        _ => Err(format!("`{text}` is not a volume reference; {REFERENCE_FORMS}")),
    }
}

/// Reads one volume definition:
/// - `reference` (v1 form, see the module docs); with a reference, `use` is an error (two
///   ways of saying the same thing) and `name` is checked but ignored (v1 files copy the map
///   key there);
/// - `use` (provisioner name, `ephemeral` or `persistent`) and `name` (existing volume);
/// - `size` (Fuzzball size, bytes) and `annotations` (exact-match provisioner annotations);
/// - `ingress`/`egress` (file transfers, checked and dropped);
/// - deprecated `type` (was `EPHEMERAL`|`HOST`) and `path`: any string, ignored.
///
/// Returns `None` only when the node is not a mapping.
pub(super) fn volume(ctx: &mut Ctx, node: &Node, field: &str) -> Option<FuzzballVolume> {
    let mut r = ctx.map_shaped(
        node,
        field,
        "a volume: `{size: 10GB, annotations: {tier: fast}}`, `{use: <provisioner>}`, `{name: <existing volume>}` or `{reference: volume://...}`",
    )?;
    let mut v = FuzzballVolume::default();
    let reference = r.take("reference");
    let use_ = r.take("use");
    let name = r.take("name");
    if let Some(n) = reference {
        let f = r.path("reference");
        if let Some(text) = ctx.nonempty_string(n, &f) {
            match parse_reference(&text) {
                Ok((u, nm)) => {
                    v.use_ = Some(u);
                    v.name = nm;
                }
                Err(msg) => ctx.error(n.span, &f, msg),
            }
            v.reference = Some(text);
        }
        if let Some(u) = use_ {
            ctx.error(
                u.span,
                &r.path("use"),
                "`use` and `reference` both choose how the volume is provided; keep one (`reference` is the v1 way, `use` the v4 way)",
            );
        }
        if let Some(n) = name {
            ctx.string(n, &r.path("name"));
        }
    } else {
        v.use_ = use_.and_then(|n| ctx.nonempty_string(n, &r.path("use")));
        v.name = name.and_then(|n| ctx.nonempty_string(n, &r.path("name")));
    }
    if let Some(n) = r.take("size") {
        let f = r.path("size");
        if let Some(text) = ctx.string(n, &f) {
            match ByteSize::parse(&text) {
                Ok(b) => v.size = Some(b),
                Err(e) => ctx.error(n.span, &f, e.to_string()),
            }
        }
    }
    if let Some(n) = r.take("annotations") {
        v.annotations = ctx.string_map(n, &r.path("annotations")).unwrap_or_default();
    }
    for key in ["ingress", "egress"] {
        if let Some(n) = r.take(key) {
            transfers(ctx, n, &r.path(key));
        }
    }
    if let Some(n) = r.take("type") {
        // Deprecated (`EPHEMERAL` or `HOST` in old files): accepted as any string, ignored.
        ctx.string(n, &r.path("type"));
    }
    if let Some(n) = r.take("path") {
        ctx.string(n, &r.path("path"));
    }
    r.finish(ctx);
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_forms() {
        assert_eq!(
            parse_reference("volume://user/ephemeral"),
            Ok(("ephemeral".into(), None))
        );
        assert_eq!(
            parse_reference("volume://group/persistent/ollama-models"),
            Ok(("persistent".into(), Some("ollama-models".into())))
        );
        // The name is optional (Fuzzball's reference form `volume://<scope>/<class>[/<name>]`).
        assert_eq!(
            parse_reference("volume://user/persistent"),
            Ok(("persistent".into(), None))
        );
        assert_eq!(
            parse_reference("volume://account/persistent"),
            Ok(("persistent".into(), None))
        );
        assert_eq!(
            parse_reference("volume://user/ephemeral/scratch"),
            Ok(("ephemeral".into(), None))
        );
        for bad in [
            "volume://user/ephemeral/a/b",
            "volume://user/persistent/",
            "volume:///ephemeral",
            "volume://user/scratch",
            "volume://user/persistent/a/b",
            "vol://user/ephemeral",
            "user/ephemeral",
        ] {
            let e = parse_reference(bad).unwrap_err();
            assert!(e.contains("volume://<scope>/<class>[/<name>]"), "{bad}: {e}");
        }
    }
}
