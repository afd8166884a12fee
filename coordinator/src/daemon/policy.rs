//! The coordinator's federation-wide policy configuration: quotas, priority classes
//! and the queue of submits that wait for capacity. Read from the coordinator's YAML file
//! (strict, like every fedvol file):
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

use std::collections::BTreeMap;

use fedvol_common::model::Workflow;
use fedvol_common::quota::{Limits, Scope};
use fedvol_common::size::ByteSize;
use fedvol_formats::yaml::{Ctx, MapReader, Node};

/// One configured quota: who it applies to and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRule {
    /// Project, user or group.
    pub scope: Scope,
    /// The name, or `*` for every project, user or group (each counted on its own).
    pub name: String,
    /// The limits (at least one is set).
    pub limits: Limits,
}

/// The queue of submits that wait for capacity (`--wait-for-capacity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Most decisions queued at once across the federation (default 1000); a submit past it is
    /// refused `queue_full`.
    pub max_queued: usize,
    /// How long a decision may stay queued before it fails `queue_timeout`, ms (default one
    /// day).
    pub max_wait_ms: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            max_queued: 1000,
            max_wait_ms: 86_400_000,
        }
    }
}

/// The whole policy section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Quotas, in file order.
    pub quotas: Vec<QuotaRule>,
    /// Priority class name → value (higher is admitted first).
    pub priority_classes: BTreeMap<String, i64>,
    /// The class of a workflow that names none; `None` = value 0.
    pub default_priority_class: Option<String>,
    /// The queue's bounds.
    pub queue: QueueConfig,
}

/// One quota that applies to a request: the rule, and the name it is counted under (a `*` rule
/// counts each user, project or group under its own name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applicable<'a> {
    /// The rule.
    pub rule: &'a QuotaRule,
    /// The project, user or group the request is counted under.
    pub name: String,
}

impl Applicable<'_> {
    /// The usage ledger's key in the decision bucket: [`ledger_key`].
    pub fn key(&self) -> String {
        ledger_key(self.rule.scope, &self.name)
    }
}

/// The key of the usage ledger of quota `scope` `name` in the decision bucket:
/// `fedvol/quota/<scope>/<name>` with the name's bytes other than letters, digits, `-` and `_`
/// written `=XX` (KV keys take only those, `=`, `.` and `/`).
pub fn ledger_key(scope: Scope, name: &str) -> String {
    let mut k = format!("fedvol/quota/{}/", scope.as_str());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            k.push(b as char);
        } else {
            k.push_str(&format!("={b:02X}"));
        }
    }
    k
}

impl Policy {
    /// The quotas that apply to a request of `user` in `groups` for `workflow` (its project, or
    /// `default`), each with the name it is counted under. A named rule and a `*` rule for the
    /// same name both apply.
    pub fn applicable<'a>(&'a self, workflow: &Workflow, user: &str, groups: &[String]) -> Vec<Applicable<'a>> {
        let project = workflow.project.as_deref().unwrap_or("default");
        let mut out = Vec::new();
        for rule in &self.quotas {
            let names: Vec<&str> = match rule.scope {
                Scope::Project => vec![project],
                Scope::User => vec![user],
                Scope::Group => groups.iter().map(String::as_str).collect(),
            };
            for n in names {
                if rule.name == "*" || rule.name == n {
                    out.push(Applicable {
                        rule,
                        name: n.to_string(),
                    });
                }
            }
        }
        out
    }

    /// The priority class and value of a request: the submit's class, else the workflow's
    /// `priority`, else `defaultPriorityClass`, else none (value 0).
    ///
    /// Errors: a class the configuration does not name, as a sentence listing the known ones.
    pub fn priority(&self, asked: Option<&str>, workflow: &Workflow) -> Result<(Option<String>, i64), String> {
        let class = asked
            .or(workflow.priority.as_deref())
            .or(self.default_priority_class.as_deref());
        let Some(c) = class else {
            return Ok((None, 0));
        };
        match self.priority_classes.get(c) {
            Some(v) => Ok((Some(c.to_string()), *v)),
            None if self.priority_classes.is_empty() => Err(format!(
                "priority class `{c}` is not known: this coordinator configures no priorityClasses"
            )),
            None => Err(format!(
                "priority class `{c}` is not known; the coordinator's priorityClasses are: {}",
                self.priority_classes.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Reads `quotas`, `priorityClasses`, `defaultPriorityClass` and `queue` from the
    /// coordinator's top-level mapping `r`, reporting every problem to `ctx` with its position.
    pub fn read(&mut self, ctx: &mut Ctx, r: &mut MapReader<'_>) {
        if let Some(n) = r.take("quotas")
            && let Some(items) = ctx.seq(n, "quotas")
        {
            for (i, item) in items.iter().enumerate() {
                if let Some(q) = quota(ctx, item, &format!("quotas[{i}]")) {
                    self.quotas.push(q);
                }
            }
        }
        if let Some(n) = r.take("priorityClasses")
            && let Some(mut m) = ctx.map(n, "priorityClasses")
        {
            for (k, v) in m.rest() {
                let f = format!("priorityClasses.{}", k.name);
                if let Some(x) = ctx.int(v, &f, -1_000_000_000, 1_000_000_000) {
                    self.priority_classes.insert(k.name.clone(), x as i64);
                }
            }
            m.finish(ctx);
        }
        if let Some(n) = r.take("defaultPriorityClass")
            && let Some(s) = ctx.nonempty_string(n, "defaultPriorityClass")
        {
            if !self.priority_classes.contains_key(&s) {
                ctx.error(
                    n.span,
                    "defaultPriorityClass",
                    format!("`{s}` is not one of priorityClasses (write priorityClasses first, and name one of them)"),
                );
            }
            self.default_priority_class = Some(s);
        }
        if let Some(n) = r.take("queue")
            && let Some(mut m) = ctx.map(n, "queue")
        {
            if let Some(v) = m.take("maxQueued")
                && let Some(x) = ctx.int(v, "queue.maxQueued", 0, 1_000_000)
            {
                self.queue.max_queued = x as usize;
            }
            if let Some(v) = m.take("maxWaitMs")
                && let Some(x) = ctx.int(v, "queue.maxWaitMs", 1, i128::from(u64::MAX >> 1))
            {
                self.queue.max_wait_ms = x as u64;
            }
            m.finish(ctx);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::config::CoordinatorConfig;

    fn load(text: &str) -> Result<CoordinatorConfig, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("coordinator.yaml");
        std::fs::write(&p, text).unwrap();
        CoordinatorConfig::load(&p).map_err(|d| d.to_string())
    }

    fn workflow(project: Option<&str>, priority: Option<&str>) -> Workflow {
        let mut w = fedvol_common::synth::workflow(1, 1);
        w.project = project.map(String::from);
        w.priority = priority.map(String::from);
        w
    }

    #[test]
    fn quotas_classes_and_queue_are_read() {
        let c = load(
            "quotas:
  - {project: genomics, storage: 10TiB, volumes: 100, cpu: 512, memory: 2TiB, instances: 64}
  - {user: '*', volumes: 20}
  - {group: physics, cpu: 256}
priorityClasses: {high: 1000, normal: 0, low: -100}
defaultPriorityClass: normal
queue: {maxQueued: 5, maxWaitMs: 60000}
",
        )
        .unwrap();
        let p = &c.policy;
        assert_eq!(p.quotas.len(), 3);
        assert_eq!(p.quotas[0].limits.storage, Some(ByteSize(10 << 40)));
        assert_eq!(p.quotas[1].scope, Scope::User);
        assert_eq!(p.priority_classes["low"], -100);
        assert_eq!(
            p.queue,
            QueueConfig {
                max_queued: 5,
                max_wait_ms: 60_000
            }
        );

        let w = workflow(Some("genomics"), None);
        let groups = vec!["physics".to_string(), "chem".to_string()];
        let a = p.applicable(&w, "alice", &groups);
        let keys: Vec<String> = a.iter().map(Applicable::key).collect();
        assert_eq!(
            keys,
            [
                "fedvol/quota/project/genomics",
                "fedvol/quota/user/alice",
                "fedvol/quota/group/physics"
            ]
        );
        assert_eq!(
            p.applicable(&workflow(None, None), "bob", &[]).len(),
            1,
            "only bob's own"
        );

        assert_eq!(p.priority(None, &w), Ok((Some("normal".into()), 0)));
        assert_eq!(
            p.priority(None, &workflow(None, Some("high"))),
            Ok((Some("high".into()), 1000))
        );
        assert_eq!(
            p.priority(Some("low"), &workflow(None, Some("high"))),
            Ok((Some("low".into()), -100))
        );
        let e = p.priority(Some("urgent"), &w).unwrap_err();
        assert!(e.contains("`urgent`") && e.contains("high, low, normal"), "{e}");
    }

    #[test]
    fn bad_quotas_are_reported_with_positions() {
        let e = load(
            "quotas:
  - {project: a, user: b, volumes: 1}
  - {project: c}
  - {group: d, storage: lots, cpu: -1, volumse: 2}
priorityClasses: {high: many}
defaultPriorityClass: urgent
",
        )
        .unwrap_err();
        for want in [
            ":2:5: quotas[0]: a quota names exactly one of",
            ":3:5: quotas[1]: a quota limits at least one",
            "quotas[2].storage",
            "quotas[2].cpu",
            "did you mean `volumes`",
            "priorityClasses.high",
            ":6:23: defaultPriorityClass: `urgent` is not one of priorityClasses",
        ] {
            assert!(e.contains(want), "missing {want:?} in:\n{e}");
        }
    }

    /// Every README block that starts `# coordinator.yaml` is a valid coordinator configuration.
    #[test]
    fn the_readme_configuration_loads() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/coordinator.md")).unwrap();
        let blocks: Vec<&str> = readme
            .split("```yaml\n# coordinator.yaml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap())
            .collect();
        assert!(!blocks.is_empty(), "the README shows the policy configuration");
        for b in blocks {
            let c = load(b).unwrap_or_else(|e| panic!("{e}\n{b}"));
            assert!(!c.policy.quotas.is_empty() || c.choice != Default::default(), "{b}");
        }
    }

    #[test]
    fn ledger_keys_are_kv_keys() {
        let rule = QuotaRule {
            scope: Scope::Group,
            name: "*".into(),
            limits: Limits::default(),
        };
        let a = Applicable {
            rule: &rule,
            name: "lab a/é".into(),
        };
        assert_eq!(a.key(), "fedvol/quota/group/lab=20a=2F=C3=A9");
    }
}
