//! Job, service and defaults `mounts` (schema §6). Real Fuzzfiles use three forms, and which
//! one applies is decided by the file's `version`:
//!
//! - v1: keyed by volume, `<volume>: {location: /abs/path}`;
//! - v4: keyed by path, `/abs/path: {volume: <volume>}`;
//! - v4 shorthand (not in the OpenAPI, used by catalog files): `/abs/path: <volume>`.
//!
//! A mount written in the other version's form is refused with a message saying which form the
//! file's version expects.

use std::collections::{BTreeMap, BTreeSet};

use super::shapes::{NameRef, abs_path, name_ref};
use crate::yaml::{Ctx, Key, Node, Value, join};

/// Which mount form the file's `version` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MountForm {
    /// `version: v1`: volume-keyed mounts with `location`.
    V1,
    /// `version: v4`: path-keyed mounts, mapping or scalar value.
    V4,
    /// The version is missing or invalid (already reported): each mount is read in whichever
    /// form it looks like, so that its other problems are still found.
    Unknown,
}

const V1_FORM: &str = "version v1 expects `<volume>: {location: <absolute path>}`";
const V4_FORM: &str = "version v4 expects `<absolute path>: {volume: <volume>}` or `<absolute path>: <volume>`";

/// One mount as written: the mapping key (volume name in v1, path in v4; inheritance from
/// `defaults` merges by this key), the volume it names and the path inside the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MountRef {
    /// The key of the `mounts` entry.
    pub key: String,
    /// The volume named, with its position (for dangling-reference errors).
    pub volume: NameRef,
    /// Absolute path inside the container.
    pub path: String,
    /// The entry's field path (`jobs.a.mounts./data`), for messages.
    pub field: String,
}

/// Reads a `mounts` mapping in the given form. Entries with problems are reported and left out.
/// Two entries mounting at the same path are an error.
pub(super) fn mounts(ctx: &mut Ctx, node: &Node, field: &str, form: MountForm) -> Vec<MountRef> {
    let Some(mut r) = ctx.map(node, field) else {
        return Vec::new();
    };
    let mut out: Vec<MountRef> = Vec::new();
    let mut keys: BTreeSet<&str> = BTreeSet::new();
    let mut paths: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in r.rest() {
        // A repeated key is reported by the map reader; only its first entry counts.
        if !keys.insert(&key.name) {
            continue;
        }
        let f = join(field, &key.name);
        let looks_v1 = value.get("location").is_some();
        let entry = match form {
            MountForm::V1 => v1_mount(ctx, key, value, &f),
            MountForm::V4 => v4_mount(ctx, key, value, &f),
            MountForm::Unknown if looks_v1 => v1_mount(ctx, key, value, &f),
            MountForm::Unknown => v4_mount(ctx, key, value, &f),
        };
        let Some(m) = entry else { continue };
        if let Some(prev) = paths.get(&m.path) {
            let msg = format!("path `{}` is already used by the mount of volume `{prev}`", m.path);
            ctx.error(key.span, &f, msg);
            continue;
        }
        paths.insert(m.path.clone(), m.volume.name.clone());
        out.push(m);
    }
    r.finish(ctx);
    out
}

/// `<volume>: {location: /path}`.
fn v1_mount(ctx: &mut Ctx, key: &Key, value: &Node, field: &str) -> Option<MountRef> {
    match &value.value {
        Value::Map(_) if value.get("location").is_none() && value.get("volume").is_some() => {
            ctx.error(
                key.span,
                field,
                format!("`<path>: {{volume: <volume>}}` is the v4 mount form; {V1_FORM}"),
            );
            None
        }
        Value::Map(_) => {
            let mut r = ctx.map(value, field)?;
            let path = r
                .require(ctx, "location")
                .and_then(|n| abs_path(ctx, n, &r.path("location")));
            r.finish(ctx);
            Some(MountRef {
                key: key.name.clone(),
                volume: NameRef {
                    name: key.name.clone(),
                    span: key.span,
                },
                path: path?,
                field: field.to_string(),
            })
        }
        _ => {
            let v4_note = if key.name.starts_with('/') {
                " (`<path>: <volume>` is the v4 form)"
            } else {
                ""
            };
            ctx.error(
                value.span,
                field,
                format!(
                    "expected a mapping with `location`, found {}{v4_note}; {V1_FORM}",
                    value.kind_name()
                ),
            );
            None
        }
    }
}

/// `/path: {volume: <volume>}` or `/path: <volume>`.
fn v4_mount(ctx: &mut Ctx, key: &Key, value: &Node, field: &str) -> Option<MountRef> {
    let volume = match &value.value {
        Value::Map(_) if value.get("location").is_some() && value.get("volume").is_none() => {
            ctx.error(
                key.span,
                field,
                format!("`<volume>: {{location: <path>}}` is the v1 mount form; {V4_FORM}"),
            );
            return None;
        }
        Value::Map(_) => {
            let mut r = ctx.map(value, field)?;
            let v = r
                .require(ctx, "volume")
                .and_then(|n| name_ref(ctx, n, &r.path("volume")));
            r.finish(ctx);
            v
        }
        Value::Scalar(..) if !value.is_null() => name_ref(ctx, value, field),
        _ => {
            ctx.error(
                value.span,
                field,
                format!(
                    "expected a volume name or a mapping with `volume`, found {}; {V4_FORM}",
                    value.kind_name()
                ),
            );
            None
        }
    };
    if !key.name.starts_with('/') {
        ctx.error(
            key.span,
            field,
            format!("mount key `{}` is not an absolute path; {V4_FORM}", key.name),
        );
        return None;
    }
    Some(MountRef {
        key: key.name.clone(),
        volume: volume?,
        path: key.name.clone(),
        field: field.to_string(),
    })
}
