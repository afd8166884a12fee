//! The `provisioners:` section: a name-keyed map in seed 000's syntax (`description`, `driver`,
//! `annotations`, `access`/`create`/`ephemeral`) plus fedvol's `status`, `default`,
//! `reclaimPolicy`, `zones`/`segment` reachability, `labels`, `maxVolumeSize`, `freeSpace` and
//! `volumeModes`.

use std::collections::BTreeSet;

use super::common::{RESERVED_PROVISIONER_NAMES, check_object_name, positioned_list};
use crate::format::kube::fields::{check_secret_parameters, is_qualified_name, size};
use crate::model::{
    AccessPolicy, Driver, Origin, Permissions, Provisioner, ProvisionerStatus, Reachability, ReclaimPolicy, VolumeMode,
};
use crate::yaml::{Ctx, Key, Node, Span, join};

/// One provisioner definition with the positions reference checks need.
#[derive(Debug, Clone)]
pub(crate) struct ProvisionerDef {
    /// The decoded provisioner.
    pub provisioner: Provisioner,
    /// Zones named in its `zones:` reachability list, with positions.
    pub zone_refs: Vec<(String, Span)>,
}

/// Reads the `provisioners` map. Returns the definitions that decoded cleanly and every key
/// (so that references to a provisioner with errors are not reported a second time).
pub(crate) fn decode_provisioners(ctx: &mut Ctx, node: &Node, field: &str) -> (Vec<ProvisionerDef>, Vec<String>) {
    let mut defs = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let Some(mut r) = ctx.map(node, field) else {
        return (defs, keys);
    };
    for (key, value) in r.rest() {
        if keys.contains(&key.name) {
            continue; // reported as a duplicate key by `finish`
        }
        keys.push(key.name.clone());
        if let Some(d) = decode_provisioner(ctx, key, value, &join(field, &key.name)) {
            defs.push(d);
        }
    }
    r.finish(ctx);
    (defs, keys)
}

fn decode_provisioner(ctx: &mut Ctx, key: &Key, node: &Node, field: &str) -> Option<ProvisionerDef> {
    let errs = ctx.error_count();
    if check_object_name(ctx, key.span, field, "provisioner", &key.name)
        && RESERVED_PROVISIONER_NAMES.contains(&key.name.as_str())
    {
        ctx.error(
            key.span,
            field,
            format!(
                "`{}` is reserved: workflows write `use: {}` to ask for automatic selection",
                key.name, key.name
            ),
        );
    }
    let mut r = ctx.map(node, field)?;
    let description = r
        .take("description")
        .and_then(|n| ctx.string(n, &join(field, "description")));
    let driver = match r.require(ctx, "driver") {
        Some(n) => driver(ctx, n, &join(field, "driver")),
        None => None,
    };
    let annotations = r
        .take("annotations")
        .and_then(|n| ctx.string_map(n, &join(field, "annotations")))
        .unwrap_or_default();
    let mut permissions = Permissions::default();
    for (name, slot) in [
        ("access", &mut permissions.access),
        ("create", &mut permissions.create),
        ("ephemeral", &mut permissions.ephemeral),
    ] {
        if let Some(n) = r.take(name)
            && let Some(p) = policy(ctx, n, &join(field, name))
        {
            *slot = p;
        }
    }
    let status = match r.take("status") {
        Some(n) => match ctx.one_of(
            n,
            &join(field, "status"),
            &["READY", "DISABLED", "ERROR", "PROVISIONING"],
        ) {
            Some("DISABLED") => ProvisionerStatus::Disabled,
            Some("ERROR") => ProvisionerStatus::Error,
            Some("PROVISIONING") => ProvisionerStatus::Provisioning,
            _ => ProvisionerStatus::Ready,
        },
        None => ProvisionerStatus::Ready,
    };
    let default = r
        .take("default")
        .and_then(|n| ctx.bool(n, &join(field, "default")))
        .unwrap_or(false);
    let reclaim_policy = match r.take("reclaimPolicy") {
        Some(n) => reclaim_policy(ctx, n, &join(field, "reclaimPolicy")).unwrap_or_default(),
        None => ReclaimPolicy::Delete,
    };
    let zone_refs = r
        .take("zones")
        .map(|n| positioned_list(ctx, n, &join(field, "zones")))
        .unwrap_or_default();
    let segment = r
        .take("segment")
        .and_then(|n| ctx.nonempty_string(n, &join(field, "segment")));
    let labels = r
        .take("labels")
        .and_then(|n| ctx.string_map(n, &join(field, "labels")))
        .unwrap_or_default();
    let max_volume_size = r
        .take("maxVolumeSize")
        .and_then(|n| size(ctx, n, &join(field, "maxVolumeSize")));
    let free_bytes = r
        .take("freeSpace")
        .and_then(|n| size(ctx, n, &join(field, "freeSpace")));
    let volume_modes = match r.take("volumeModes") {
        Some(n) => volume_modes(ctx, n, &join(field, "volumeModes")).unwrap_or_default(),
        None => vec![VolumeMode::Filesystem],
    };
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let provisioner = Provisioner {
        name: key.name.clone(),
        description,
        driver: driver?,
        annotations,
        permissions,
        status,
        default,
        reclaim_policy,
        reachability: Reachability {
            zones: zone_refs.iter().map(|(z, _)| z.clone()).collect(),
            segment,
        },
        labels,
        max_volume_size,
        free_bytes,
        volume_modes,
        from_storage_class: false,
        origin: Origin {
            file: ctx.file().to_string(),
            line: key.span.line,
        },
    };
    Some(ProvisionerDef { provisioner, zone_refs })
}

/// Reads `Delete`, `Retain` or `Recycle` (any case).
pub(crate) fn reclaim_policy(ctx: &mut Ctx, node: &Node, field: &str) -> Option<ReclaimPolicy> {
    Some(match ctx.one_of(node, field, &["Delete", "Retain", "Recycle"])? {
        "Retain" => ReclaimPolicy::Retain,
        "Recycle" => ReclaimPolicy::Recycle,
        _ => ReclaimPolicy::Delete,
    })
}

/// Reads an access policy: `all`, or a list of group names (an empty list means nobody).
fn policy(ctx: &mut Ctx, node: &Node, field: &str) -> Option<AccessPolicy> {
    if let Some(s) = node.as_scalar() {
        if s.eq_ignore_ascii_case("all") {
            return Some(AccessPolicy::All);
        }
        ctx.error_hint(
            node.span,
            field,
            format!("expected `all` or a list of groups, found `{s}`"),
            format!("for a single group write `[{s}]`"),
        );
        return None;
    }
    let groups = ctx.string_list(node, field)?;
    let set: BTreeSet<String> = groups.into_iter().filter(|g| !g.trim().is_empty()).collect();
    Some(if set.is_empty() {
        AccessPolicy::Deny
    } else {
        AccessPolicy::Groups(set)
    })
}

fn volume_modes(ctx: &mut Ctx, node: &Node, field: &str) -> Option<Vec<VolumeMode>> {
    let items = ctx.seq(node, field)?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let mode = match ctx.one_of(item, &format!("{field}[{i}]"), &["Filesystem", "Block"])? {
            "Block" => VolumeMode::Block,
            _ => VolumeMode::Filesystem,
        };
        if out.contains(&mode) {
            ctx.error(item.span, &format!("{field}[{i}]"), "volume mode listed twice");
            return None;
        }
        out.push(mode);
    }
    if out.is_empty() {
        ctx.error(
            node.span,
            field,
            "at least one volume mode is required (Filesystem, Block)",
        );
        return None;
    }
    Some(out)
}

/// Reads a `driver` mapping: `type` nfs (`target` `server:/path`, optional `mount`), hostpath
/// (`path`, `local`), efs (`fileSystemId`) or external (`provisioner` `vendor/name`,
/// `parameters`). Keys of other driver types are unknown keys.
fn driver(ctx: &mut Ctx, node: &Node, field: &str) -> Option<Driver> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let ty = r
        .require(ctx, "type")
        .and_then(|n| ctx.one_of(n, &join(field, "type"), &["nfs", "hostpath", "efs", "external"]));
    let Some(ty) = ty else {
        // Without a known type the other keys cannot be judged; only the type is reported.
        return None;
    };
    let driver = match ty {
        "nfs" => {
            let target = r.require(ctx, "target").and_then(|n| {
                let f = join(field, "target");
                let s = ctx.nonempty_string(n, &f)?;
                match s.split_once(':') {
                    Some((server, path))
                        if !server.is_empty() && !server.contains(char::is_whitespace) && path.starts_with('/') =>
                    {
                        Some(s)
                    }
                    _ => {
                        ctx.error_hint(
                            n.span,
                            &f,
                            format!("`{s}` is not an NFS export"),
                            "expected server:/path, e.g. nfs-fast:/export/nvme",
                        );
                        None
                    }
                }
            });
            let mount = r
                .take("mount")
                .and_then(|n| absolute_path(ctx, n, &join(field, "mount")));
            target.map(|target| Driver::Nfs { target, mount })
        }
        "hostpath" => {
            let path = r
                .require(ctx, "path")
                .and_then(|n| absolute_path(ctx, n, &join(field, "path")));
            let local = r
                .take("local")
                .and_then(|n| ctx.bool(n, &join(field, "local")))
                .unwrap_or(false);
            path.map(|path| Driver::Hostpath { path, local })
        }
        "efs" => {
            let id = r.require(ctx, "fileSystemId").and_then(|n| {
                let f = join(field, "fileSystemId");
                let s = ctx.nonempty_string(n, &f)?;
                let hex = s.strip_prefix("fs-").unwrap_or("");
                if hex.len() >= 8 && hex.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()) {
                    Some(s)
                } else {
                    ctx.error_hint(
                        n.span,
                        &f,
                        format!("`{s}` is not an EFS file system id"),
                        "expected fs- followed by hex digits, e.g. fs-12345678",
                    );
                    None
                }
            });
            id.map(|file_system_id| Driver::Efs { file_system_id })
        }
        _ => {
            let prov = r.require(ctx, "provisioner").and_then(|n| {
                let f = join(field, "provisioner");
                let s = ctx.nonempty_string(n, &f)?;
                if is_qualified_name(&s.to_ascii_lowercase()) {
                    Some(s)
                } else {
                    ctx.error_hint(
                        n.span,
                        &f,
                        format!("`{s}` is not a provisioner name"),
                        "expected vendor/name such as example.com/nfs, or a CSI driver name such as ebs.csi.aws.com",
                    );
                    None
                }
            });
            let parameters = r
                .take("parameters")
                .and_then(|n| {
                    check_secret_parameters(ctx, n, &join(field, "parameters"));
                    ctx.string_map(n, &join(field, "parameters"))
                })
                .unwrap_or_default();
            prov.map(|provisioner| Driver::External {
                provisioner,
                parameters,
            })
        }
    };
    r.finish(ctx);
    if ctx.error_count() > errs { None } else { driver }
}

fn absolute_path(ctx: &mut Ctx, node: &Node, field: &str) -> Option<String> {
    let s = ctx.nonempty_string(node, field)?;
    if !s.starts_with('/') {
        ctx.error(node.span, field, format!("`{s}` is not an absolute path"));
        return None;
    }
    Some(s)
}
