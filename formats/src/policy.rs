//! The federation-wide policy's keys (`quotas`, `priorityClasses`, `defaultPriorityClass`,
//! `queue`), read strictly with positions: in the coordinator's configuration file, and alone
//! in a policy file (`fedvol what-if --policy FILE`), whose other keys are errors.
//!
//! ```yaml
//! quotas:                       # summed over every cluster's live commits
//!   - {project: genomics, storage: 10TiB, volumes: 100, cpu: 512, memory: 2TiB, instances: 64}
//!   - {user: "*", volumes: 20}  # "*": every user, each on their own
//!   - {group: physics, cpu: 256}
//! priorityClasses: {high: 1000, normal: 0, low: -100}   # like Kubernetes PriorityClass values
//! defaultPriorityClass: normal  # a workflow naming no class gets this one (else priority 0)
//! queue: {maxQueued: 1000, maxWaitMs: 86400000}         # `--wait-for-capacity` submits
//! ```

use std::path::Path;

use fedvol_common::policy::{Policy, QuotaRule};
use fedvol_common::quota::{Limits, Scope};
use fedvol_common::size::ByteSize;

use crate::files::read_text;
use crate::yaml::{Ctx, Diagnostics, Limits as YamlLimits, MapReader, Node, load_documents};

/// Reads `quotas`, `priorityClasses`, `defaultPriorityClass` and `queue` from the
/// coordinator's top-level mapping `r`, reporting every problem to `ctx` with its position.
pub fn read_policy(policy: &mut Policy, ctx: &mut Ctx, r: &mut MapReader<'_>) {
    if let Some(n) = r.take("quotas")
        && let Some(items) = ctx.seq(n, "quotas")
    {
        for (i, item) in items.iter().enumerate() {
            if let Some(q) = quota(ctx, item, &format!("quotas[{i}]")) {
                policy.quotas.push(q);
            }
        }
    }
    if let Some(n) = r.take("priorityClasses")
        && let Some(mut m) = ctx.map(n, "priorityClasses")
    {
        for (k, v) in m.rest() {
            let f = format!("priorityClasses.{}", k.name);
            if let Some(x) = ctx.int(v, &f, -1_000_000_000, 1_000_000_000) {
                policy.priority_classes.insert(k.name.clone(), x as i64);
            }
        }
        m.finish(ctx);
    }
    if let Some(n) = r.take("defaultPriorityClass")
        && let Some(s) = ctx.nonempty_string(n, "defaultPriorityClass")
    {
        if !policy.priority_classes.contains_key(&s) {
            ctx.error(
                n.span,
                "defaultPriorityClass",
                format!("`{s}` is not one of priorityClasses (write priorityClasses first, and name one of them)"),
            );
        }
        policy.default_priority_class = Some(s);
    }
    if let Some(n) = r.take("queue")
        && let Some(mut m) = ctx.map(n, "queue")
    {
        if let Some(v) = m.take("maxQueued")
            && let Some(x) = ctx.int(v, "queue.maxQueued", 0, 1_000_000)
        {
            policy.queue.max_queued = x as usize;
        }
        if let Some(v) = m.take("maxWaitMs")
            && let Some(x) = ctx.int(v, "queue.maxWaitMs", 1, i128::from(u64::MAX >> 1))
        {
            policy.queue.max_wait_ms = x as u64;
        }
        m.finish(ctx);
    }
}

/// Reads a policy file: a mapping of the policy's keys only (an empty file is the default
/// policy: no quotas, no priority classes).
///
/// Errors: the file cannot be read, is not YAML, or has a bad or unknown key (each with line,
/// column and field; a coordinator.yaml's other keys are unknown here).
pub fn load_policy(path: &Path) -> Result<Policy, Diagnostics> {
    let text = read_text(path)?;
    parse_policy_str(&path.display().to_string(), &text)
}

/// [`load_policy`] of `text`, named `label` in messages.
pub fn parse_policy_str(label: &str, text: &str) -> Result<Policy, Diagnostics> {
    let mut ctx = Ctx::new(label);
    let docs = match load_documents(text, YamlLimits::default()) {
        Ok(docs) => docs,
        Err(e) => {
            ctx.error(e.span, "", format!("invalid YAML: {}", e.message));
            return Err(Diagnostics(ctx.into_diagnostics()));
        }
    };
    let mut policy = Policy::default();
    let Some(doc) = docs.first() else {
        return Ok(policy);
    };
    let Some(mut map) = ctx.map(doc, "") else {
        return Err(Diagnostics(ctx.into_diagnostics()));
    };
    read_policy(&mut policy, &mut ctx, &mut map);
    map.finish(&mut ctx);
    ctx.finish(policy)
}

/// Reads one quota: exactly one of `project`, `user`, `group`, and at least one limit.
fn quota(ctx: &mut Ctx, node: &Node, field: &str) -> Option<QuotaRule> {
    let mut m = ctx.map(node, field)?;
    let mut who: Vec<(Scope, String)> = Vec::new();
    for (key, scope) in [
        ("project", Scope::Project),
        ("user", Scope::User),
        ("group", Scope::Group),
    ] {
        if let Some(v) = m.take(key)
            && let Some(s) = ctx.nonempty_string(v, &m.path(key))
        {
            who.push((scope, s));
        }
    }
    let mut limits = Limits::default();
    let size = |ctx: &mut Ctx, m: &mut MapReader<'_>, key: &'static str| -> Option<ByteSize> {
        let v = m.take(key)?;
        let f = m.path(key);
        let s = ctx.string(v, &f)?;
        match ByteSize::parse(&s) {
            Ok(b) => Some(b),
            Err(e) => {
                ctx.error(v.span, &f, e.to_string());
                None
            }
        }
    };
    limits.storage = size(ctx, &mut m, "storage");
    limits.memory = size(ctx, &mut m, "memory");
    for (key, slot) in [
        ("volumes", &mut limits.volumes),
        ("cpu", &mut limits.cpu),
        ("instances", &mut limits.instances),
    ] {
        if let Some(v) = m.take(key) {
            *slot = ctx.int(v, &m.path(key), 0, i128::from(u64::MAX >> 1)).map(|x| x as u64);
        }
    }
    let span = m.span();
    m.finish(ctx);
    if who.len() != 1 {
        ctx.error(
            span,
            field,
            "a quota names exactly one of `project`, `user` or `group` (a name, or \"*\" for each)",
        );
        return None;
    }
    if limits == Limits::default() {
        ctx.error(
            span,
            field,
            "a quota limits at least one of storage, volumes, cpu, memory, instances",
        );
        return None;
    }
    let (scope, name) = who.remove(0);
    Some(QuotaRule { scope, name, limits })
}
