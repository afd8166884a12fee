//! A what-if's quota verdicts (docs/design.md §2.7, `fedvol what-if --policy FILE`): whether
//! each recorded decision would pass the coordinator's quotas as they stand and under another
//! policy, against the federation's live use as it stands. The check is the one admission runs
//! ([`crate::quota::check`], every applicable quota of [`Policy::applicable`]); the use is summed
//! from the live decisions (being committed or committed; a decision's own use is left out of
//! its own check, as a coordinator's ledger leaves out the request it admits again).

use std::collections::BTreeMap;

use crate::decision::Reason;
use crate::model::Workflow;
use crate::policy::Policy;
use crate::quota::{Amounts, Limits, QuotaCheck, Scope, check, refusal_message};

/// The reason code of a quota refusal (as a coordinator's submit gives it).
pub const QUOTA_EXCEEDED: &str = "quota_exceeded";

/// Who one decision is counted under and what it counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// The user it was made for.
    pub user: String,
    /// The user's groups as the request carried them.
    pub groups: Vec<String>,
    /// What it counts ([`Amounts::of`] its workflow).
    pub amounts: Amounts,
    /// True when it is live (being committed or committed): its use is in [`Usage`].
    pub live: bool,
}

impl Subject {
    /// The subject of a request of `user` in `groups` for `workflow`, live or not.
    pub fn of(workflow: &Workflow, user: &str, groups: &[String], live: bool) -> Subject {
        Subject {
            user: user.to_string(),
            groups: groups.to_vec(),
            amounts: Amounts::of(workflow),
            live,
        }
    }
}

/// The federation's live use per project, user and group name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage(pub BTreeMap<(Scope, String), Amounts>);

impl Usage {
    /// Counts `s` (a live decision of a workflow of project `project`) under its project, its
    /// user and each of its groups.
    pub fn add(&mut self, project: &str, s: &Subject) {
        let names = std::iter::once((Scope::Project, project))
            .chain(std::iter::once((Scope::User, s.user.as_str())))
            .chain(s.groups.iter().map(|g| (Scope::Group, g.as_str())));
        for (scope, name) in names {
            let e = self.0.entry((scope, name.to_string())).or_default();
            *e = e.plus(&s.amounts);
        }
    }

    /// The use of `scope` `name`, [`Amounts::default`] when none.
    pub fn of(&self, scope: Scope, name: &str) -> Amounts {
        self.0.get(&(scope, name.to_string())).copied().unwrap_or_default()
    }
}

/// Every check `policy`'s quotas make of `s` (a decision for `workflow`), with the use of
/// others: `usage` less `s`'s own when it is live.
pub fn checks(policy: &Policy, usage: &Usage, workflow: &Workflow, s: &Subject) -> Vec<QuotaCheck> {
    let mut out = Vec::new();
    for a in policy.applicable(workflow, &s.user, &s.groups) {
        let mut used = usage.of(a.rule.scope, &a.name);
        if s.live {
            used = used.minus(&s.amounts);
        }
        out.extend(check(a.rule.scope, &a.name, &a.rule.limits, &used, &s.amounts));
    }
    out
}

/// The refusal `checks` give (`quota_exceeded`, every exceeded check in words), if any.
pub fn refusal(checks: &[QuotaCheck]) -> Option<Reason> {
    refusal_message(checks).map(|m| Reason::new(QUOTA_EXCEEDED, m))
}

/// One quota's use and limits, today's policy against the other one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuotaUse {
    /// Who it applies to.
    pub scope: Scope,
    /// The project, user or group name (a `*` rule gives a row per name in use).
    pub name: String,
    /// The live use.
    pub used: Amounts,
    /// Its limits under the coordinators' policy today; absent: no quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub today: Option<Limits>,
    /// Its limits under the policy tried; absent: no quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tried: Option<Limits>,
    /// Decisions the policy tried refuses (of those planned).
    pub refused: u64,
    /// Decisions today's policy refuses.
    pub refused_today: u64,
}

/// The limits `policy` sets on `scope` `name` (a named rule first, else a `*` rule).
fn limits_of(policy: &Policy, scope: Scope, name: &str) -> Option<Limits> {
    let rules = policy.quotas.iter().filter(|r| r.scope == scope);
    let named = rules.clone().find(|r| r.name == name);
    named
        .or_else(|| rules.clone().find(|r| r.name == "*"))
        .map(|r| r.limits)
}

/// A row per quota either policy sets, per name: named rules once, `*` rules once per name in
/// `usage`; refusals counted from `refused` (each decision's exceeded checks, today's and
/// tried, as (scope, name) pairs). Sorted by scope and name.
pub fn uses(
    today: &Policy,
    tried: &Policy,
    usage: &Usage,
    refused: &BTreeMap<(Scope, String), (u64, u64)>,
) -> Vec<QuotaUse> {
    let mut names: std::collections::BTreeSet<(Scope, String)> = std::collections::BTreeSet::new();
    for rule in today.quotas.iter().chain(&tried.quotas) {
        if rule.name == "*" {
            names.extend(usage.0.keys().filter(|(s, _)| *s == rule.scope).cloned());
        } else {
            names.insert((rule.scope, rule.name.clone()));
        }
    }
    names
        .into_iter()
        .map(|(scope, name)| {
            let (refused_today, refused_tried) = refused.get(&(scope, name.clone())).copied().unwrap_or_default();
            QuotaUse {
                used: usage.of(scope, &name),
                today: limits_of(today, scope, &name),
                tried: limits_of(tried, scope, &name),
                refused: refused_tried,
                refused_today,
                scope,
                name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::QuotaRule;

    fn policy(cpu: u64) -> Policy {
        Policy {
            quotas: vec![QuotaRule {
                scope: Scope::Group,
                name: "*".into(),
                limits: Limits {
                    cpu: Some(cpu),
                    ..Limits::default()
                },
            }],
            ..Policy::default()
        }
    }

    /// A quota is summed over the live decisions (Kubernetes ResourceQuota counts a
    /// namespace's objects the same way); a decision is checked against the others' use only.
    #[test]
    fn a_lower_quota_refuses_what_no_longer_fits_beside_the_others() {
        let w = crate::synth::workflow(1, 1);
        let per = Amounts::of(&w).cpu;
        assert!(per > 0);
        let groups = vec!["physics".to_string()];
        let live: Vec<Subject> = (0..3).map(|_| Subject::of(&w, "alice", &groups, true)).collect();
        let mut usage = Usage::default();
        for s in &live {
            usage.add("default", s);
        }
        assert_eq!(usage.of(Scope::Group, "physics").cpu, 3 * per);
        // Room for all three: none refused, each checked against the other two.
        let c = checks(&policy(3 * per), &usage, &w, &live[0]);
        assert_eq!((c.len(), c[0].used, refusal(&c)), (1, u128::from(2 * per), None));
        // Room for two: each live one still fits beside the other two? No: 2 + 1 > 2.
        let c = checks(&policy(2 * per), &usage, &w, &live[0]);
        let r = refusal(&c).unwrap();
        assert_eq!(r.code, QUOTA_EXCEEDED);
        assert!(r.message.contains("group physics: cpu"), "{r:?}");
        // A decision not live (failed, completed) is checked against all three.
        let gone = Subject::of(&w, "alice", &groups, false);
        assert!(refusal(&checks(&policy(3 * per), &usage, &w, &gone)).is_some());
        // A user in no group is under no group quota.
        let lone = Subject::of(&w, "bob", &[], false);
        assert!(checks(&policy(0), &usage, &w, &lone).is_empty());
        let rows = uses(&Policy::default(), &policy(2 * per), &usage, &BTreeMap::new());
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].name.as_str(), rows[0].today, rows[0].tried.unwrap().cpu),
            ("physics", None, Some(2 * per))
        );
    }
}
