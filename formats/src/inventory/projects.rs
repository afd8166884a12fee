//! The `projects:` section (Cloud Assembly's provisioning funnel stage 1): each project lists the cloud zones it may use,
//! with a priority (lower is preferred), limits and current usage.

use super::common::opt_u64;
use crate::kube::fields::size;
use crate::yaml::{Ctx, Node, Span, join};
use fedvol_common::model::{Project, ProjectLimits, ProjectUsage, ZoneAssignment};

/// One project with the positions of its zone references.
#[derive(Debug, Clone)]
pub(crate) struct ProjectDef {
    /// The decoded project.
    pub project: Project,
    /// For each assignment, in order: its zone name's position.
    pub zone_spans: Vec<Span>,
}

/// Reads the `projects` map: `<name>: {zones: [{zone, priority, limits, usage}]}`.
/// `priority` is a whole number (default 0); `limits` and `usage` hold `instances`, `cpu`
/// (whole numbers) and `memory`, `storage` (sizes); absent limits are unlimited, absent usage 0.
pub(crate) fn decode_projects(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<ProjectDef> {
    let mut out: Vec<ProjectDef> = Vec::new();
    let Some(mut r) = ctx.map(node, field) else {
        return out;
    };
    for (key, value) in r.rest() {
        if out.iter().any(|p| p.project.name == key.name) {
            continue; // duplicate key, reported by `finish`
        }
        let pf = join(field, &key.name);
        let Some(mut pr) = ctx.map(value, &pf) else {
            continue;
        };
        let mut project = Project {
            name: key.name.clone(),
            zones: Vec::new(),
        };
        let mut zone_spans = Vec::new();
        if let Some(zones) = pr.require(ctx, "zones") {
            let zf = join(&pf, "zones");
            for (i, item) in ctx.seq(zones, &zf).unwrap_or_default().iter().enumerate() {
                if let Some((a, span)) = assignment(ctx, item, &format!("{zf}[{i}]")) {
                    project.zones.push(a);
                    zone_spans.push(span);
                }
            }
        }
        pr.finish(ctx);
        out.push(ProjectDef { project, zone_spans });
    }
    r.finish(ctx);
    out
}

fn assignment(ctx: &mut Ctx, node: &Node, field: &str) -> Option<(ZoneAssignment, Span)> {
    let errs = ctx.error_count();
    let mut r = ctx.map(node, field)?;
    let zone = r
        .require(ctx, "zone")
        .and_then(|n| ctx.nonempty_string(n, &r.path("zone")).map(|s| (s, n.span)));
    let priority = r
        .take("priority")
        .and_then(|n| ctx.int(n, &r.path("priority"), i64::MIN as i128, i64::MAX as i128))
        .unwrap_or(0) as i64;
    let mut limits = ProjectLimits::default();
    if let Some(n) = r.take("limits") {
        let f = r.path("limits");
        if let Some(mut l) = ctx.map(n, &f) {
            limits.instances = opt_u64(ctx, l.take("instances"), &join(&f, "instances"));
            limits.cpu = opt_u64(ctx, l.take("cpu"), &join(&f, "cpu"));
            limits.memory = l.take("memory").and_then(|m| size(ctx, m, &join(&f, "memory")));
            limits.storage = l.take("storage").and_then(|m| size(ctx, m, &join(&f, "storage")));
            l.finish(ctx);
        }
    }
    let mut usage = ProjectUsage::default();
    if let Some(n) = r.take("usage") {
        let f = r.path("usage");
        if let Some(mut u) = ctx.map(n, &f) {
            usage.instances = opt_u64(ctx, u.take("instances"), &join(&f, "instances")).unwrap_or(0);
            usage.cpu = opt_u64(ctx, u.take("cpu"), &join(&f, "cpu")).unwrap_or(0);
            usage.memory = u
                .take("memory")
                .and_then(|m| size(ctx, m, &join(&f, "memory")))
                .unwrap_or_default();
            usage.storage = u
                .take("storage")
                .and_then(|m| size(ctx, m, &join(&f, "storage")))
                .unwrap_or_default();
            u.finish(ctx);
        }
    }
    r.finish(ctx);
    if ctx.error_count() > errs {
        return None;
    }
    let (zone, span) = zone?;
    Some((
        ZoneAssignment {
            zone,
            priority,
            limits,
            usage,
        },
        span,
    ))
}
