//! The `zones:` section (Cloud Assembly's provisioning funnel): cloud zones with capability tags, placement policy,
//! priority, network segment, image/flavor/storage profiles, hosts, and fedvol's
//! `hostCostPerHour` (the price of one host-hour, for the cost estimate).

use std::collections::BTreeMap;

use super::common::{check_object_name, cost, opt_u64, positioned_list, tags};
use crate::kube::fields::size;
use crate::yaml::{Ctx, Node, Span, join};
use fedvol_common::model::{Flavor, Host, Origin, PlacementPolicy, PowerState, Resources, Zone};

/// One zone with the positions reference checks need.
#[derive(Debug, Clone)]
pub(crate) struct ZoneDef {
    /// The decoded zone.
    pub zone: Zone,
    /// Its `storage:` profile entries (provisioner names) with positions.
    pub storage_refs: Vec<(String, Span)>,
    /// Position of each host's `name`, in host order.
    pub host_spans: Vec<Span>,
}

/// Reads the `zones` map. Returns the zones that decoded and every key (for reference checks
/// that should not repeat a zone's own errors).
pub(crate) fn decode_zones(ctx: &mut Ctx, node: &Node, field: &str) -> (Vec<ZoneDef>, Vec<String>) {
    let mut out = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let Some(mut r) = ctx.map(node, field) else {
        return (out, keys);
    };
    for (key, value) in r.rest() {
        if keys.contains(&key.name) {
            continue; // duplicate key, reported by `finish`
        }
        keys.push(key.name.clone());
        let zf = join(field, &key.name);
        check_object_name(ctx, key.span, &zf, "zone", &key.name);
        if let Some(z) = decode_zone(ctx, &key.name, key.span, value, &zf) {
            out.push(z);
        }
    }
    r.finish(ctx);
    (out, keys)
}

fn decode_zone(ctx: &mut Ctx, name: &str, key_span: Span, node: &Node, field: &str) -> Option<ZoneDef> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let zone_tags = r
        .take("tags")
        .map(|n| tags(ctx, n, &join(field, "tags")))
        .unwrap_or_default();
    let placement_policy = match r.take("placementPolicy") {
        Some(n) => match ctx.one_of(
            n,
            &join(field, "placementPolicy"),
            &["DEFAULT", "BINPACK", "SPREAD", "SPREAD_MEMORY"],
        ) {
            Some("BINPACK") => PlacementPolicy::Binpack,
            Some("SPREAD") => PlacementPolicy::Spread,
            Some("SPREAD_MEMORY") => PlacementPolicy::SpreadMemory,
            _ => PlacementPolicy::Default,
        },
        None => PlacementPolicy::Default,
    };
    let priority = r
        .take("priority")
        .and_then(|n| ctx.int(n, &join(field, "priority"), i64::MIN as i128, i64::MAX as i128))
        .unwrap_or(0) as i64;
    let segment = r
        .take("segment")
        .and_then(|n| ctx.nonempty_string(n, &join(field, "segment")));
    let images = r
        .take("images")
        .and_then(|n| ctx.string_list(n, &join(field, "images")))
        .unwrap_or_default();
    let mut flavors = Vec::new();
    if let Some(n) = r.take("flavors") {
        let ff = join(field, "flavors");
        for (i, item) in ctx.seq(n, &ff).unwrap_or_default().iter().enumerate() {
            if let Some(f) = flavor(ctx, item, &format!("{ff}[{i}]")) {
                flavors.push(f);
            }
        }
    }
    let host_cost_per_hour = r
        .take("hostCostPerHour")
        .and_then(|n| cost(ctx, n, &join(field, "hostCostPerHour"), "a price per host-hour"));
    let storage_refs = r
        .take("storage")
        .map(|n| positioned_list(ctx, n, &join(field, "storage")))
        .unwrap_or_default();
    let mut hosts = Vec::new();
    let mut host_spans = Vec::new();
    if let Some(n) = r.take("hosts") {
        let hf = join(field, "hosts");
        for (i, item) in ctx.seq(n, &hf).unwrap_or_default().iter().enumerate() {
            if let Some((h, span)) = host(ctx, item, &format!("{hf}[{i}]")) {
                hosts.push(h);
                host_spans.push(span);
            }
        }
    }
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let zone = Zone {
        name: name.to_string(),
        tags: zone_tags,
        placement_policy,
        priority,
        segment,
        images,
        flavors,
        storage: storage_refs.iter().map(|(s, _)| s.clone()).collect(),
        hosts: hosts.into_iter().map(std::sync::Arc::new).collect(),
        host_cost_per_hour,
        origin: Origin {
            file: ctx.file().to_string(),
            line: key_span.line,
        },
    };
    Some(ZoneDef {
        zone,
        storage_refs,
        host_spans,
    })
}

fn flavor(ctx: &mut Ctx, node: &Node, field: &str) -> Option<Flavor> {
    let mut r = ctx.map(node, field)?;
    let name = r
        .require(ctx, "name")
        .and_then(|n| ctx.nonempty_string(n, &r.path("name")));
    let cpu = r.require(ctx, "cpu").and_then(|n| ctx.u64(n, &r.path("cpu")));
    let memory = r.require(ctx, "memory").and_then(|n| size(ctx, n, &r.path("memory")));
    r.finish(ctx);
    Some(Flavor {
        name: name?,
        cpu: cpu?,
        memory: memory?,
    })
}

/// Reads a host: `name` (required), `power` ON/OFF (default ON), `tags`, `capacity` (required:
/// `cpu` and `memory` required, `instances` defaulting to the cpu count, `devices`),
/// `allocated` (same fields, all default 0) and `networks`.
fn host(ctx: &mut Ctx, node: &Node, field: &str) -> Option<(Host, Span)> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let name = r.require(ctx, "name").and_then(|n| {
        let f = r.path("name");
        let s = ctx.nonempty_string(n, &f)?;
        check_object_name(ctx, n.span, &f, "host", &s).then_some((s, n.span))
    });
    let power = match r.take("power") {
        Some(n) => match ctx.one_of(n, &r.path("power"), &["ON", "OFF"]) {
            Some("OFF") => PowerState::Off,
            _ => PowerState::On,
        },
        None => PowerState::On,
    };
    let host_tags = r
        .take("tags")
        .map(|n| tags(ctx, n, &r.path("tags")))
        .unwrap_or_default();
    let capacity = r
        .require(ctx, "capacity")
        .and_then(|n| resources(ctx, n, &r.path("capacity"), true));
    let allocated = match r.take("allocated") {
        Some(n) => resources(ctx, n, &r.path("allocated"), false),
        None => Some(Resources::default()),
    };
    let networks = r
        .take("networks")
        .and_then(|n| ctx.string_list(n, &r.path("networks")))
        .unwrap_or_default();
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let (name, span) = name?;
    Some((
        Host {
            name,
            power,
            tags: host_tags,
            capacity: capacity?,
            allocated: allocated?,
            networks,
        },
        span,
    ))
}

fn resources(ctx: &mut Ctx, node: &Node, field: &str, is_capacity: bool) -> Option<Resources> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let (cpu, memory) = if is_capacity {
        (
            r.require(ctx, "cpu").and_then(|n| ctx.u64(n, &r.path("cpu"))),
            r.require(ctx, "memory").and_then(|n| size(ctx, n, &r.path("memory"))),
        )
    } else {
        (
            opt_u64(ctx, r.take("cpu"), &r.path("cpu")).or(Some(0)),
            Some(
                r.take("memory")
                    .and_then(|n| size(ctx, n, &r.path("memory")))
                    .unwrap_or_default(),
            ),
        )
    };
    let instances = opt_u64(ctx, r.take("instances"), &r.path("instances"));
    let mut devices = BTreeMap::new();
    if let Some(n) = r.take("devices") {
        let df = r.path("devices");
        if let Some(mut d) = ctx.map(n, &df) {
            for (k, v) in d.rest() {
                if let Some(count) = ctx.u64(v, &join(&df, &k.name)) {
                    devices.insert(k.name.clone(), count);
                }
            }
            d.finish(ctx);
        }
    }
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let cpu = cpu?;
    let instances = instances.unwrap_or(if is_capacity { cpu } else { 0 });
    Some(Resources {
        cpu,
        memory: memory?,
        instances,
        devices,
    })
}
