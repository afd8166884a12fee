//! `jobs.<name>` (schema §3) and `services.<name>` (schema §7) → a draft of [`fedvol_common::model::Job`]
//! whose names are not yet checked against the rest of the workflow (see [`super::resolve`]).
//!
//! Placement reads: `image`, `mounts`, `resource`, `multinode.nodes`, `depends-on`/`requires`,
//! and fedvol's additions `constraints` (Cloud Assembly's provisioning funnel hard/soft tag constraints), `affinity`
//! (Cloud Assembly's provisioning funnel steps 3.3/3.4) and `networks`. `policy.timeout.execute` is kept as the job's
//! `timeout_ms` for the cost estimate. Everything else is checked for shape and
//! dropped.
//!
//! `policy` on a service: Service has no `policy` in the v4.2 schema, but two real catalog
//! files (ansys_fluent_desktop, ansys_ls_dyna_desktop) set `policy.timeout` on a service.
//! fedvol accepts it there with the same shape as a job's policy, so that real files are not
//! refused; it never affects placement (its timeout counts in the cost estimate like a job's).

use super::mount::{MountForm, MountRef, mounts};
use super::network::{job_network, service_network};
use super::resource::resource;
use super::service::{autoscaler, dynamic_config, probe};
use super::shapes::{I64_MAX, NameRef, abs_path, env_list, name_list, name_ref, policy, take_aliased, uri};
use crate::yaml::{Ctx, Node};
use fedvol_common::model::{Constraint, JobKind, JobResources};

/// One `depends-on` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Dependency {
    /// The job or service waited for.
    pub target: NameRef,
    /// `status: RUNNING` (only meaningful for a service), else `FINISHED`.
    pub running: bool,
}

/// A job or service as written, before cross-references and `defaults` are applied.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct JobDraft {
    /// The map key and where it stands.
    pub name: NameRef,
    /// Job or service.
    pub kind: JobKind,
    /// `image.uri`.
    pub image: Option<String>,
    /// The job's own mounts.
    pub mounts: Vec<MountRef>,
    /// The job's own resource, if it has one.
    pub resource: Option<JobResources>,
    /// `multinode.nodes` (default 1).
    pub nodes: u64,
    /// `depends-on` entries.
    pub depends_on: Vec<Dependency>,
    /// Deprecated `requires` names (used when `depends-on` is absent).
    pub requires: Vec<NameRef>,
    /// fedvol addition: tag constraints.
    pub constraints: Vec<Constraint>,
    /// fedvol addition: `affinity.with`.
    pub with: Vec<NameRef>,
    /// fedvol addition: `affinity.apart-from`.
    pub apart_from: Vec<NameRef>,
    /// fedvol addition: `networks`.
    pub networks: Vec<String>,
    /// `policy.timeout.execute`, ms.
    pub timeout_ms: Option<u64>,
    /// What the job runs (`command`/`args` or `script`, `env`, `cwd`) as one shell script
    /// ([`fedvol_common::run::compose`]); `None` when it gives no command.
    pub script: Option<String>,
}

/// Reads one job or service. Returns `None` only when the node is not a mapping.
pub(super) fn job(
    ctx: &mut Ctx,
    name: NameRef,
    node: &Node,
    field: &str,
    kind: JobKind,
    form: MountForm,
) -> Option<JobDraft> {
    let shape = match kind {
        JobKind::Service => {
            "a service: `image: {uri: docker://...}`, `command: [...]` or `script: |`, and optional `mounts`, `resource`, `depends-on`"
        }
        _ => {
            "a job: `image: {uri: docker://...}`, `command: [...]` or `script: |`, and optional `mounts`, `resource`, `depends-on`"
        }
    };
    let mut r = ctx.map_shaped(node, field, shape)?;
    let mut d = JobDraft {
        name,
        kind,
        image: None,
        mounts: Vec::new(),
        resource: None,
        nodes: 1,
        depends_on: Vec::new(),
        requires: Vec::new(),
        constraints: Vec::new(),
        with: Vec::new(),
        apart_from: Vec::new(),
        networks: Vec::new(),
        timeout_ms: None,
        script: None,
    };
    // Placement fields.
    if let Some(n) = r.take("image") {
        d.image = uri(ctx, n, &r.path("image"));
    }
    if let Some(n) = r.take("mounts") {
        d.mounts = mounts(ctx, n, &r.path("mounts"), form);
    }
    if let Some(n) = r.take("resource") {
        d.resource = resource(ctx, n, &r.path("resource"));
    }
    if let Some(n) = r.take("multinode") {
        d.nodes = multinode(ctx, n, &r.path("multinode")).unwrap_or(1);
    }
    if let Some(n) = r.take("depends-on") {
        d.depends_on = dependencies(ctx, n, &r.path("depends-on"));
    }
    if let Some(n) = r.take("requires") {
        d.requires = name_list(ctx, n, &r.path("requires"));
    }
    if let Some(n) = r.take("constraints") {
        d.constraints = constraints(ctx, n, &r.path("constraints"));
    }
    if let Some(n) = r.take("affinity")
        && let Some(mut a) = ctx.map_shaped(
            n,
            &r.path("affinity"),
            "`affinity: {with: [<job>...], apart-from: [<job>...]}`",
        )
    {
        if let Some(x) = a.take("with") {
            d.with = name_list(ctx, x, &a.path("with"));
        }
        if let Some(x) = a.take("apart-from") {
            d.apart_from = name_list(ctx, x, &a.path("apart-from"));
        }
        a.finish(ctx);
    }
    if let Some(n) = r.take("networks") {
        d.networks = name_list(ctx, n, &r.path("networks"))
            .into_iter()
            .map(|n| n.name)
            .collect();
    }
    // Fields checked for shape only.
    if let Some(n) = r.take("name") {
        // The map key is the job's name; real files repeat it here.
        ctx.string(n, &r.path("name"));
    }
    let mut argv: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for (slot, key) in argv.iter_mut().zip(["command", "args"]) {
        if let Some(n) = r.take(key) {
            *slot = ctx.string_list(n, &r.path(key)).unwrap_or_default();
        }
    }
    let mut script = None;
    if let Some(n) = r.take("script") {
        script = ctx.string(n, &r.path("script"));
    }
    let mut env = Vec::new();
    if let Some(n) = r.take("env") {
        env = env_list(ctx, n, &r.path("env"));
    }
    let mut cwd = None;
    if let Some(n) = r.take("cwd") {
        cwd = abs_path(ctx, n, &r.path("cwd"));
    }
    d.script = fedvol_common::run::compose(&argv[0], &argv[1], script.as_deref(), &env, cwd.as_deref());
    if let Some(n) = r.take("files") {
        ctx.string_map(n, &r.path("files"));
    }
    if let Some(n) = r.take("preemptible") {
        ctx.bool(n, &r.path("preemptible"));
    }
    if let Some(n) = r.take("policy") {
        d.timeout_ms = policy(ctx, n, &r.path("policy"));
    }
    match kind {
        JobKind::Job => {
            if let Some(n) = r.take("task-array") {
                task_array(ctx, n, &r.path("task-array"));
            }
            if let Some(n) = r.take("network") {
                job_network(ctx, n, &r.path("network"));
            }
        }
        JobKind::Service => {
            if let Some(n) = r.take("persist") {
                ctx.bool(n, &r.path("persist"));
            }
            if let Some(n) = r.take("readiness-probe") {
                probe(ctx, n, &r.path("readiness-probe"));
            }
            if let Some(n) = r.take("autoscaler") {
                autoscaler(ctx, n, &r.path("autoscaler"));
            }
            if let Some(n) = r.take("dynamic-config") {
                dynamic_config(ctx, n, &r.path("dynamic-config"));
            }
            if let Some(n) = r.take("network") {
                service_network(ctx, n, &r.path("network"));
            }
        }
    }
    r.finish(ctx);
    Some(d)
}

/// Multinode: `nodes` (>= 1), `implementation` (`ompi`|`openmpi`|`mpich`|`gasnet`|`generic`,
/// any case), `procs-per-node` (alias `procsPerNode`, >= 1). Returns `nodes` when given.
fn multinode(ctx: &mut Ctx, node: &Node, field: &str) -> Option<u64> {
    let mut r = ctx.map_shaped(node, field, "`multinode: {nodes: 2, implementation: openmpi}`")?;
    let nodes = r.take("nodes").and_then(|n| ctx.int(n, &r.path("nodes"), 1, I64_MAX));
    if let Some(n) = r.take("implementation") {
        ctx.one_of(
            n,
            &r.path("implementation"),
            &["ompi", "openmpi", "mpich", "gasnet", "generic"],
        );
    }
    if let Some(n) = take_aliased(ctx, &mut r, "procs-per-node", "procsPerNode") {
        ctx.int(n, &r.path("procs-per-node"), 1, I64_MAX);
    }
    r.finish(ctx);
    nodes.map(|n| n as u64)
}

/// Task array: `start` and `end` (inclusive, >= 0, start <= end), `concurrency` (1 to 200).
fn task_array(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(mut r) = ctx.map(node, field) else {
        return;
    };
    let start = r.take("start").and_then(|n| ctx.int(n, &r.path("start"), 0, I64_MAX));
    let end_node = r.take("end");
    let end = end_node.and_then(|n| ctx.int(n, &r.path("end"), 0, I64_MAX));
    if let (Some(s), Some(e), Some(at)) = (start, end, end_node)
        && s > e
    {
        ctx.error(
            at.span,
            &r.path("end"),
            format!("end ({e}) is before start ({s}); both are inclusive"),
        );
    }
    if let Some(n) = r.take("concurrency") {
        ctx.int(n, &r.path("concurrency"), 1, 200);
    }
    r.finish(ctx);
}

/// The shape of one `depends-on` entry, for errors (docs/formats.md shows it too).
pub(super) const DEPENDENCY_SHAPE: &str = "`- name: <job>` per entry, with an optional `status: finished` (the default: after it ended well) or, for a service, `status: running` (once it runs), e.g. `depends-on: [{name: prep}]`";

/// `depends-on`: a list of `{name (required), status (FINISHED|RUNNING, any case),
/// description}`.
fn dependencies(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<Dependency> {
    let mut out = Vec::new();
    let Some(items) = ctx.seq_shaped(node, field, DEPENDENCY_SHAPE) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let Some(mut r) = ctx.map_shaped(item, &f, DEPENDENCY_SHAPE) else {
            continue;
        };
        let target = r.require(ctx, "name").and_then(|n| name_ref(ctx, n, &r.path("name")));
        let running = r
            .take("status")
            .and_then(|n| ctx.one_of(n, &r.path("status"), &["FINISHED", "RUNNING"]))
            .is_some_and(|s| s == "RUNNING");
        if let Some(n) = r.take("description") {
            ctx.string(n, &r.path("description"));
        }
        r.finish(ctx);
        if let Some(target) = target {
            out.push(Dependency { target, running });
        }
    }
    out
}

/// fedvol addition `constraints`: a list of `[!]key[:value][:hard|:soft]` strings (Cloud Assembly's provisioning funnel).
fn constraints(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<Constraint> {
    let mut out = Vec::new();
    let Some(items) = ctx.seq(node, field) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let Some(text) = ctx.nonempty_string(item, &f) else {
            continue;
        };
        match Constraint::parse(&text) {
            Ok(c) => out.push(c),
            Err(msg) => ctx.error(item.span, &f, msg.to_string()),
        }
    }
    out
}
