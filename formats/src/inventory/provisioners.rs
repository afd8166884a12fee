//! The `provisioners:` section: a name-keyed map in Fuzzball "Annotations and Selection"'s syntax (`description`, `driver`,
//! `annotations`, `access`/`create`/`ephemeral`, `costPerGbHour`, every driver type of
//! Fuzzball's provisioner definition reference) plus fedvol's `status`, `default`,
//! `reclaimPolicy`, `zones`/`segment` reachability, `labels`, `maxVolumeSize`, `freeSpace` and
//! `volumeModes`.

use std::collections::BTreeSet;

use super::common::{RESERVED_PROVISIONER_NAMES, check_object_name, cost, positioned_list};
use crate::kube::fields::{check_secret_parameters, is_qualified_name, size};
use crate::yaml::{Ctx, Key, Node, Span, join};
use fedvol_common::model::{
    AccessPolicy, DRIVER_TYPES, Driver, Origin, Permissions, Provisioner, ProvisionerStatus, Reachability,
    ReclaimPolicy, VolumeMode,
};

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
    let mut extras = DriverExtras::default();
    let driver = match r.require(ctx, "driver") {
        Some(n) => driver(ctx, n, &join(field, "driver"), &mut extras),
        None => None,
    };
    let cost_per_gb_hour = r
        .take("costPerGbHour")
        .and_then(|n| cost(ctx, n, &join(field, "costPerGbHour"), "a price per GB-hour"));
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
        cost_per_gb_hour,
        self_provisioned: extras.self_provisioned,
        nfs_sync_mode: extras.nfs_sync_mode,
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

/// Reads an access policy: `all`, a list of group names (an empty list means nobody), or
/// Fuzzball's API form `{all: bool, groups: {names: [...]}, users: {names: [...]}}` (users
/// additive with groups, both ignored when `all` is true; the provisioner schema, "Top level").
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
    if node.as_map().is_some() {
        return api_policy(ctx, node, field);
    }
    let groups = ctx.string_list(node, field)?;
    Some(groups_policy(groups, Vec::new()))
}

/// The API form of a policy.
fn api_policy(ctx: &mut Ctx, node: &Node, field: &str) -> Option<AccessPolicy> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let all = r
        .take("all")
        .and_then(|n| ctx.bool(n, &join(field, "all")))
        .unwrap_or(false);
    let names = |ctx: &mut Ctx, r: &mut crate::yaml::MapReader, key: &'static str| -> Vec<String> {
        let Some(n) = r.take(key) else {
            return Vec::new();
        };
        let f = join(field, key);
        let Some(mut m) = ctx.map(n, &f) else {
            return Vec::new();
        };
        let list = m
            .take("names")
            .and_then(|l| ctx.string_list(l, &join(&f, "names")))
            .unwrap_or_default();
        m.finish(ctx);
        list
    };
    let groups = names(ctx, &mut r, "groups");
    let users = names(ctx, &mut r, "users");
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    Some(if all {
        AccessPolicy::All
    } else {
        groups_policy(groups, users)
    })
}

/// `Deny` when both lists are empty (blank names ignored), `Groups` without users, else
/// `Members`.
fn groups_policy(groups: Vec<String>, users: Vec<String>) -> AccessPolicy {
    let clean = |v: Vec<String>| -> BTreeSet<String> { v.into_iter().filter(|g| !g.trim().is_empty()).collect() };
    let (groups, users) = (clean(groups), clean(users));
    match (groups.is_empty(), users.is_empty()) {
        (true, true) => AccessPolicy::Deny,
        (_, true) => AccessPolicy::Groups(groups),
        _ => AccessPolicy::Members { groups, users },
    }
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

/// Reads a `driver` mapping as a Fuzzball provisioner definition spells it
/// (Fuzzball's provisioner definition reference, "Driver"): `type` and that type's fields —
/// nfs (`target` `server:/path`, `version` 3|4, `options`, `subPath`, plus fedvol's `mount`),
/// hostpath (`path`, `local`, `subPath`), efs (`filesystemId`, also accepted as fedvol's earlier
/// `fileSystemId`; `region`, `subnetIds`, `subPath`), `k8s_pvc` (`storageClassName`,
/// `namespace`), `azure_files` (`accountName`, `shareName`, `region`, `subPath`), `oci_fss`
/// (`compartmentId`, `availabilityDomain`, `mountTargetId`, `subPath`), `oci_lustre`
/// (`lustreCapacityGbs`, `lustrePerformanceTier`, `compartmentId`, `availabilityDomain`),
/// `filestore` (`region`, `subPath`) — or fedvol's `external` (`provisioner` `vendor/name`,
/// `parameters`). The API fields `nfsSyncMode` and `selfProvisioned` are read by the caller.
/// Keys of another driver type are unknown keys, reported with the type's own fields.
fn driver(ctx: &mut Ctx, node: &Node, field: &str, extras: &mut DriverExtras) -> Option<Driver> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let ty = r
        .require(ctx, "type")
        .and_then(|n| ctx.one_of(n, &join(field, "type"), DRIVER_TYPES));
    let Some(ty) = ty else {
        // Without a known type the other keys cannot be judged; only the type is reported.
        return None;
    };
    extras.nfs_sync_mode = r
        .take("nfsSyncMode")
        .and_then(|n| ctx.nonempty_string(n, &join(field, "nfsSyncMode")));
    extras.self_provisioned = r
        .take("selfProvisioned")
        .and_then(|n| ctx.bool(n, &join(field, "selfProvisioned")))
        .unwrap_or(false);
    let text = |ctx: &mut Ctx, r: &mut crate::yaml::MapReader, key: &'static str| {
        r.take(key).and_then(|n| ctx.nonempty_string(n, &join(field, key)))
    };
    let sub = |ctx: &mut Ctx, r: &mut crate::yaml::MapReader| {
        r.take("subPath")
            .and_then(|n| sub_path(ctx, n, &join(field, "subPath")))
    };
    let driver = match ty {
        "nfs" => {
            let target = r
                .require(ctx, "target")
                .and_then(|n| nfs_target(ctx, n, &join(field, "target")));
            let mount = r
                .take("mount")
                .and_then(|n| absolute_path(ctx, n, &join(field, "mount")));
            let version = r
                .take("version")
                .and_then(|n| nfs_version(ctx, n, &join(field, "version")));
            let options = text(ctx, &mut r, "options");
            let sub_path = sub(ctx, &mut r);
            target.map(|target| Driver::Nfs {
                target,
                mount,
                version,
                options,
                sub_path,
            })
        }
        "hostpath" => {
            let path = r
                .require(ctx, "path")
                .and_then(|n| absolute_path(ctx, n, &join(field, "path")));
            let local = r
                .take("local")
                .and_then(|n| ctx.bool(n, &join(field, "local")))
                .unwrap_or(false);
            let sub_path = sub(ctx, &mut r);
            path.map(|path| Driver::Hostpath { path, local, sub_path })
        }
        "efs" => {
            // Fuzzball spells it `filesystemId`; fedvol's earlier releases `fileSystemId`.
            let fuzzball = r.take("filesystemId");
            let earlier = r.take("fileSystemId");
            let id_node = match (fuzzball, earlier) {
                (Some(_), Some(b)) => {
                    ctx.error(
                        b.span,
                        &join(field, "fileSystemId"),
                        "the file system id is given twice (`filesystemId` and `fileSystemId`): keep `filesystemId`",
                    );
                    None
                }
                (Some(n), None) | (None, Some(n)) => Some(n),
                (None, None) => {
                    ctx.error(r.span(), field, "missing required field `filesystemId`");
                    None
                }
            };
            let id = id_node.and_then(|n| efs_id(ctx, n, &join(field, "filesystemId")));
            let region = text(ctx, &mut r, "region");
            let subnet_ids = r
                .take("subnetIds")
                .and_then(|n| ctx.string_list(n, &join(field, "subnetIds")))
                .unwrap_or_default();
            let sub_path = sub(ctx, &mut r);
            id.map(|file_system_id| Driver::Efs {
                file_system_id,
                region,
                subnet_ids,
                sub_path,
            })
        }
        "k8s_pvc" => Some(Driver::K8sPvc {
            storage_class_name: text(ctx, &mut r, "storageClassName"),
            namespace: text(ctx, &mut r, "namespace"),
        }),
        "azure_files" => Some(Driver::AzureFiles {
            account_name: text(ctx, &mut r, "accountName"),
            share_name: text(ctx, &mut r, "shareName"),
            region: text(ctx, &mut r, "region"),
            sub_path: sub(ctx, &mut r),
        }),
        "oci_fss" => Some(Driver::OciFss {
            compartment_id: text(ctx, &mut r, "compartmentId"),
            availability_domain: text(ctx, &mut r, "availabilityDomain"),
            mount_target_id: text(ctx, &mut r, "mountTargetId"),
            sub_path: sub(ctx, &mut r),
        }),
        "oci_lustre" => Some(Driver::OciLustre {
            lustre_capacity_gbs: r
                .take("lustreCapacityGbs")
                .and_then(|n| ctx.u64(n, &join(field, "lustreCapacityGbs"))),
            lustre_performance_tier: text(ctx, &mut r, "lustrePerformanceTier"),
            compartment_id: text(ctx, &mut r, "compartmentId"),
            availability_domain: text(ctx, &mut r, "availabilityDomain"),
        }),
        "filestore" => Some(Driver::Filestore {
            region: text(ctx, &mut r, "region"),
            sub_path: sub(ctx, &mut r),
        }),
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

/// The driver-level API fields Fuzzball keeps beside the type's own (`nfsSyncMode`,
/// `selfProvisioned`), carried onto the [`Provisioner`].
#[derive(Debug, Default)]
struct DriverExtras {
    nfs_sync_mode: Option<String>,
    self_provisioned: bool,
}

/// An NFS `target`: `server:/path`.
fn nfs_target(ctx: &mut Ctx, n: &Node, f: &str) -> Option<String> {
    let s = ctx.nonempty_string(n, f)?;
    // `user:password@server:/path`: refused without repeating it (the error is not an echo).
    if fedvol_common::secrets::embedded_secret(&s).is_some() {
        ctx.error_hint(
            n.span,
            f,
            "the NFS export holds credentials (a password in its user-info, `user:password@server`; the value is not shown); expected server:/path",
            "NFS authenticates the client host (sec=sys) or by Kerberos (sec=krb5 in `options`), never by a password in the target",
        );
        return None;
    }
    match s.split_once(':') {
        Some((server, path))
            if !server.is_empty() && !server.contains(char::is_whitespace) && path.starts_with('/') =>
        {
            Some(s)
        }
        _ => {
            ctx.error_hint(
                n.span,
                f,
                format!("`{s}` is not an NFS export"),
                "expected server:/path, e.g. nfs-fast:/export/nvme",
            );
            None
        }
    }
}

/// An NFS `version`: 3 or 4, as a number or a string (the provisioner schema: "3 or 4;
/// omitted = negotiate").
fn nfs_version(ctx: &mut Ctx, n: &Node, f: &str) -> Option<u8> {
    match n.as_scalar().map(str::trim) {
        Some("3") => Some(3),
        Some("4") => Some(4),
        _ => {
            ctx.error_hint(
                n.span,
                f,
                format!(
                    "expected NFS version 3 or 4, found {}",
                    crate::yaml::decode::describe(n)
                ),
                "omit `version` to let the client negotiate",
            );
            None
        }
    }
}

/// An EFS file system id: `fs-` and at least 8 lower-case hex digits.
fn efs_id(ctx: &mut Ctx, n: &Node, f: &str) -> Option<String> {
    let s = ctx.nonempty_string(n, f)?;
    let hex = s.strip_prefix("fs-").unwrap_or("");
    if hex.len() >= 8 && hex.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()) {
        Some(s)
    } else {
        ctx.error_hint(
            n.span,
            f,
            format!("`{s}` is not an EFS file system id"),
            "expected fs- followed by hex digits, e.g. fs-12345678",
        );
        None
    }
}

/// A `subPath`: a relative directory below the driver's base (a leading `/` is taken as
/// relative to the base, as the provisioner schema's "confines a provisioner's volumes to a
/// subdirectory" reads), without `..` or empty components, normalised to `a/b`.
fn sub_path(ctx: &mut Ctx, n: &Node, f: &str) -> Option<String> {
    let s = ctx.nonempty_string(n, f)?;
    let parts: Vec<&str> = s.trim_matches('/').split('/').collect();
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        ctx.error_hint(
            n.span,
            f,
            format!("`{s}` is not a subdirectory"),
            "expected a relative path such as team-a/volumes, without `..`",
        );
        return None;
    }
    Some(parts.join("/"))
}

fn absolute_path(ctx: &mut Ctx, node: &Node, field: &str) -> Option<String> {
    let s = ctx.nonempty_string(node, field)?;
    if !s.starts_with('/') {
        ctx.error(node.span, field, format!("`{s}` is not an absolute path"));
        return None;
    }
    Some(s)
}
