//! `resource` (schema §4; the same shape in jobs, services and `defaults`) → [`JobResources`],
//! what one node of a job needs for host placement (Cloud Assembly's provisioning funnel: free capacity, devices,
//! exclusive hosts, hard requirements on host tags).

use super::shapes::{I64_MAX, take_aliased};
use crate::yaml::{Ctx, Node};
use fedvol_common::model::JobResources;
use fedvol_common::size::ByteSize;

/// Reads a Resource:
/// - `cpu.cores` (whole number >= 1, default 1) → `cpu`; `cpu.affinity` (`NUMA`|`SOCKET`|`CORE`),
///   `cpu.threads` (bool) and `cpu.sockets` (>= 1) are checked and dropped;
/// - `memory.size` (Fuzzball size, units case-insensitive, decimals allowed, no unit = bytes) →
///   `memory` in bytes, multiplied by the cores when `memory.by-core` (alias `byCore`) is true;
/// - `devices` (map of device name → whole number >= 0), `exclusive` (bool), `annotations`
///   (map of string → string, hard requirements on host tags).
///
/// Returns `None` only when the node is not a mapping; other problems are reported and the
/// field falls back to its default.
pub(super) fn resource(ctx: &mut Ctx, node: &Node, field: &str) -> Option<JobResources> {
    let mut r = ctx.map_shaped(
        node,
        field,
        "`resource: {cpu: {cores: 4}, memory: {size: 8GiB}, devices: {nvidia.com/gpu: 1}}`",
    )?;
    let mut out = JobResources {
        cpu: 1,
        ..JobResources::default()
    };
    if let Some(n) = r.take("cpu")
        && let Some(cores) = cpu(ctx, n, &r.path("cpu"))
    {
        out.cpu = cores;
    }
    if let Some(n) = r.take("memory")
        && let Some(mem) = memory(ctx, n, &r.path("memory"), out.cpu)
    {
        out.memory = mem;
    }
    if let Some(n) = r.take("devices") {
        let f = r.path("devices");
        if let Some(mut d) = ctx.map(n, &f) {
            for (k, v) in d.rest() {
                if let Some(count) = ctx.u64(v, &d.path(&k.name)) {
                    out.devices.insert(k.name.clone(), count);
                }
            }
            d.finish(ctx);
        }
    }
    if let Some(n) = r.take("exclusive") {
        out.exclusive = ctx.bool(n, &r.path("exclusive")).unwrap_or(false);
    }
    if let Some(n) = r.take("annotations") {
        out.annotations = ctx.string_map(n, &r.path("annotations")).unwrap_or_default();
    }
    r.finish(ctx);
    Some(out)
}

/// Reads `cpu`; returns the cores (when `cores` is given and valid).
fn cpu(ctx: &mut Ctx, node: &Node, field: &str) -> Option<u64> {
    let mut r = ctx.map(node, field)?;
    let cores = r.take("cores").and_then(|n| ctx.int(n, &r.path("cores"), 1, I64_MAX));
    if let Some(n) = r.take("affinity") {
        ctx.one_of(n, &r.path("affinity"), &["NUMA", "SOCKET", "CORE"]);
    }
    if let Some(n) = r.take("threads") {
        ctx.bool(n, &r.path("threads"));
    }
    if let Some(n) = r.take("sockets") {
        ctx.int(n, &r.path("sockets"), 1, I64_MAX);
    }
    r.finish(ctx);
    cores.map(|c| c as u64)
}

/// Reads `memory`; returns the bytes per node (size × cores when `by-core` is true).
fn memory(ctx: &mut Ctx, node: &Node, field: &str, cores: u64) -> Option<ByteSize> {
    let mut r = ctx.map(node, field)?;
    let size_node = r.take("size");
    let size = size_node.and_then(|n| {
        let f = r.path("size");
        let text = ctx.string(n, &f)?;
        match ByteSize::parse(&text) {
            Ok(b) => Some(b),
            Err(e) => {
                ctx.error(n.span, &f, e.to_string());
                None
            }
        }
    });
    let by_core = match take_aliased(ctx, &mut r, "by-core", "byCore") {
        Some(n) => ctx.bool(n, &r.path("by-core")).unwrap_or(false),
        None => false,
    };
    r.finish(ctx);
    let size = size?;
    if !by_core {
        return Some(size);
    }
    match size.0.checked_mul(u128::from(cores)) {
        Some(total) => Some(ByteSize(total)),
        None => {
            let span = size_node.map_or(node.span, |n| n.span);
            ctx.error(
                span,
                field,
                format!("memory size × {cores} cores (by-core) is too large"),
            );
            None
        }
    }
}
