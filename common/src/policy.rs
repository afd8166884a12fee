//! The federation-wide policy a coordinator applies (its configuration file's `quotas`,
//! `priorityClasses`, `defaultPriorityClass` and `queue`; read by `fedvol_formats::policy`):
//! which quotas apply to a request and under which name each counts it, a request's priority
//! class, and the key of each quota's usage ledger in the decision bucket. Pure data, also
//! carried by a what-if that tries another policy (docs/design.md §2.7).
//!
//! Quotas are summed over the live commits of every cluster, as a Kubernetes ResourceQuota is
//! over a namespace's objects; priority classes are values as Kubernetes PriorityClass gives
//! them (higher is admitted first).

use std::collections::BTreeMap;

use crate::model::Workflow;
use crate::quota::{Limits, Scope};

/// One configured quota: who it applies to and its limits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuotaRule {
    /// Project, user or group.
    pub scope: Scope,
    /// The name, or `*` for every project, user or group (each counted on its own).
    pub name: String,
    /// The limits (at least one is set).
    pub limits: Limits,
}

/// The queue of submits that wait for capacity (`--wait-for-capacity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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
}
