//! `network` of jobs (schema §5 Job.Network) and of services (schema §7 Service.Network).
//! Neither affects volume placement; both are checked for shape and dropped. (fedvol's own
//! placement field is `networks`, a list of network names, read in [`super::job`].)

use super::shapes::{port, port_list, take_aliased};
use crate::yaml::{Ctx, Node};

/// Job.Network: `isolated` (bool), `expose-tcp`/`expose-udp` (port lists; camelCase aliases
/// `exposeTcp`/`exposeUdp` accepted).
pub(super) fn job_network(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(mut r) = ctx.map(node, field) else {
        return;
    };
    if let Some(n) = r.take("isolated") {
        ctx.bool(n, &r.path("isolated"));
    }
    if let Some(n) = take_aliased(ctx, &mut r, "expose-tcp", "exposeTcp") {
        port_list(ctx, n, &r.path("expose-tcp"));
    }
    if let Some(n) = take_aliased(ctx, &mut r, "expose-udp", "exposeUdp") {
        port_list(ctx, n, &r.path("expose-udp"));
    }
    r.finish(ctx);
}

/// Service.Network: `ports` (`{name, port (required), protocol tcp|udp}`), `endpoints`
/// (`{name (required), port-name (required, must name one of `ports`), protocol
/// http|https|grpc|grpcs|tcp|tls, type subdomain|path, scope user|group|organization|public}`)
/// and `host` (bool).
pub(super) fn service_network(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(mut r) = ctx.map(node, field) else {
        return;
    };
    let mut port_names: Vec<String> = Vec::new();
    if let Some(n) = r.take("ports") {
        let f = r.path("ports");
        for (i, item) in ctx.seq(n, &f).unwrap_or_default().iter().enumerate() {
            let Some(mut p) = ctx.map(item, &format!("{f}[{i}]")) else {
                continue;
            };
            if let Some(name) = p.take("name").and_then(|n| ctx.nonempty_string(n, &p.path("name"))) {
                port_names.push(name);
            }
            if let Some(n) = p.require(ctx, "port") {
                port(ctx, n, &p.path("port"));
            }
            if let Some(n) = p.take("protocol") {
                ctx.one_of(n, &p.path("protocol"), &["tcp", "udp"]);
            }
            p.finish(ctx);
        }
    }
    if let Some(n) = r.take("endpoints") {
        let f = r.path("endpoints");
        for (i, item) in ctx.seq(n, &f).unwrap_or_default().iter().enumerate() {
            let Some(mut e) = ctx.map(item, &format!("{f}[{i}]")) else {
                continue;
            };
            if let Some(n) = e.require(ctx, "name") {
                ctx.nonempty_string(n, &e.path("name"));
            }
            if let Some(n) = e.require(ctx, "port-name") {
                let pf = e.path("port-name");
                if let Some(name) = ctx.nonempty_string(n, &pf)
                    && !port_names.contains(&name)
                {
                    let msg = format!("endpoint names port `{name}`, which is not among this service's `ports`");
                    match crate::yaml::closest(&name, port_names.iter().map(String::as_str)) {
                        Some(c) => ctx.error_hint(n.span, &pf, msg, format!("did you mean `{c}`?")),
                        None => ctx.error(n.span, &pf, msg),
                    }
                }
            }
            if let Some(n) = e.take("protocol") {
                ctx.one_of(
                    n,
                    &e.path("protocol"),
                    &["http", "https", "grpc", "grpcs", "tcp", "tls"],
                );
            }
            if let Some(n) = e.take("type") {
                ctx.one_of(n, &e.path("type"), &["subdomain", "path"]);
            }
            if let Some(n) = e.take("scope") {
                ctx.one_of(n, &e.path("scope"), &["user", "group", "organization", "public"]);
            }
            e.finish(ctx);
        }
    }
    if let Some(n) = r.take("host") {
        ctx.bool(n, &r.path("host"));
    }
    r.finish(ctx);
}
