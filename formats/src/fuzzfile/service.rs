//! Service-only fields (schema §7): `readiness-probe`, `autoscaler` and `dynamic-config`.
//! None of them affects placement; they are checked for shape and dropped.

use super::shapes::{I32_MAX, port};
use crate::yaml::{Ctx, Node};

/// Probe: exactly one of `exec{command}`, `http-get{path, port, scheme, http-headers[{name,
/// value}]}`, `tcp-socket{port}`, `grpc{port, service}`, plus the int32 timing fields
/// `initial-delay-seconds`, `period-seconds`, `timeout-seconds`, `success-threshold`,
/// `failure-threshold` (all >= 0).
pub(super) fn probe(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(mut r) = ctx.map(node, field) else {
        return;
    };
    let mut actions = Vec::new();
    if let Some(n) = r.take("exec") {
        actions.push("exec");
        if let Some(mut e) = ctx.map(n, &r.path("exec")) {
            if let Some(c) = e.require(ctx, "command") {
                ctx.string_list(c, &e.path("command"));
            }
            e.finish(ctx);
        }
    }
    if let Some(n) = r.take("http-get") {
        actions.push("http-get");
        if let Some(mut h) = ctx.map(n, &r.path("http-get")) {
            if let Some(p) = h.take("path") {
                ctx.string(p, &h.path("path"));
            }
            if let Some(p) = h.require(ctx, "port") {
                port(ctx, p, &h.path("port"));
            }
            if let Some(s) = h.take("scheme") {
                ctx.one_of(s, &h.path("scheme"), &["HTTP", "HTTPS"]);
            }
            if let Some(hs) = h.take("http-headers") {
                let f = h.path("http-headers");
                for (i, item) in ctx.seq(hs, &f).unwrap_or_default().iter().enumerate() {
                    if let Some(mut hd) = ctx.map(item, &format!("{f}[{i}]")) {
                        if let Some(x) = hd.require(ctx, "name") {
                            ctx.nonempty_string(x, &hd.path("name"));
                        }
                        if let Some(x) = hd.take("value") {
                            ctx.string(x, &hd.path("value"));
                        }
                        hd.finish(ctx);
                    }
                }
            }
            h.finish(ctx);
        }
    }
    if let Some(n) = r.take("tcp-socket") {
        actions.push("tcp-socket");
        if let Some(mut t) = ctx.map(n, &r.path("tcp-socket")) {
            if let Some(p) = t.require(ctx, "port") {
                port(ctx, p, &t.path("port"));
            }
            t.finish(ctx);
        }
    }
    if let Some(n) = r.take("grpc") {
        actions.push("grpc");
        if let Some(mut g) = ctx.map(n, &r.path("grpc")) {
            if let Some(p) = g.require(ctx, "port") {
                port(ctx, p, &g.path("port"));
            }
            if let Some(s) = g.take("service") {
                ctx.string(s, &g.path("service"));
            }
            g.finish(ctx);
        }
    }
    for key in [
        "initial-delay-seconds",
        "period-seconds",
        "timeout-seconds",
        "success-threshold",
        "failure-threshold",
    ] {
        if let Some(n) = r.take(key) {
            ctx.int(n, &r.path(key), 0, I32_MAX);
        }
    }
    if actions.len() != 1 {
        let found = if actions.is_empty() {
            "none".to_string()
        } else {
            actions.join(", ")
        };
        ctx.error(
            r.span(),
            r.field(),
            format!("a readiness probe needs exactly one of exec, http-get, tcp-socket, grpc; found {found}"),
        );
    }
    r.finish(ctx);
}

/// Autoscaler: `replicas{min, max}` (int32 >= 0, min <= max), `metrics{enabled, path, port,
/// interval, includes[]}`, `scale-up{triggers: [ScalePolicy]}`, `scale-down: ScalePolicy`.
pub(super) fn autoscaler(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(mut r) = ctx.map(node, field) else {
        return;
    };
    if let Some(n) = r.take("replicas")
        && let Some(mut rep) = ctx.map(n, &r.path("replicas"))
    {
        let min = rep.take("min").and_then(|x| ctx.int(x, &rep.path("min"), 0, I32_MAX));
        let max_node = rep.take("max");
        let max = max_node.and_then(|x| ctx.int(x, &rep.path("max"), 0, I32_MAX));
        if let (Some(lo), Some(hi), Some(at)) = (min, max, max_node)
            && lo > hi
        {
            ctx.error(at.span, &rep.path("max"), format!("max ({hi}) is below min ({lo})"));
        }
        rep.finish(ctx);
    }
    if let Some(n) = r.take("metrics")
        && let Some(mut m) = ctx.map(n, &r.path("metrics"))
    {
        if let Some(x) = m.take("enabled") {
            ctx.bool(x, &m.path("enabled"));
        }
        if let Some(x) = m.take("path") {
            ctx.string(x, &m.path("path"));
        }
        if let Some(x) = m.take("port") {
            port(ctx, x, &m.path("port"));
        }
        if let Some(x) = m.take("interval") {
            ctx.string(x, &m.path("interval"));
        }
        if let Some(x) = m.take("includes") {
            ctx.string_list(x, &m.path("includes"));
        }
        m.finish(ctx);
    }
    if let Some(n) = r.take("scale-up")
        && let Some(mut up) = ctx.map(n, &r.path("scale-up"))
    {
        if let Some(t) = up.take("triggers") {
            let f = up.path("triggers");
            for (i, item) in ctx.seq(t, &f).unwrap_or_default().iter().enumerate() {
                scale_policy(ctx, item, &format!("{f}[{i}]"));
            }
        }
        up.finish(ctx);
    }
    if let Some(n) = r.take("scale-down") {
        scale_policy(ctx, n, &r.path("scale-down"));
    }
    r.finish(ctx);
}

/// ScalePolicy: `metrics-query`, `cooldown-period`, `drain-period` (strings), `services` (list).
fn scale_policy(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(mut r) = ctx.map(node, field) else {
        return;
    };
    for key in ["metrics-query", "cooldown-period", "drain-period"] {
        if let Some(n) = r.take(key) {
            ctx.string(n, &r.path(key));
        }
    }
    if let Some(n) = r.take("services") {
        ctx.string_list(n, &r.path("services"));
    }
    r.finish(ctx);
}

/// Dynamic config: `path` and `script` (strings), `services` (list of strings).
pub(super) fn dynamic_config(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(mut r) = ctx.map(node, field) else {
        return;
    };
    for key in ["path", "script"] {
        if let Some(n) = r.take(key) {
            ctx.string(n, &r.path(key));
        }
    }
    if let Some(n) = r.take("services") {
        ctx.string_list(n, &r.path("services"));
    }
    r.finish(ctx);
}
