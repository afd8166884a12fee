//! The bodies of `what_if` (docs/design.md §2.7): which recorded decisions to plan again and
//! the hypothetical changes ([`WhatIfQuery`]), and the report ([`WhatIfReply`]).

use fedvol_common::model::Inventory;
use fedvol_common::whatif::Report;

use crate::code::ProtoError;
use crate::decisions::DecisionState;
use crate::endpoint::{ReplyBody, RequestBody};

/// How far back a what-if looks by default: 7 days, ms.
pub const DEFAULT_SINCE_MS: u64 = 7 * 24 * 3600 * 1000;

/// The states a what-if plans again by default: what was placed or refused for good or for
/// now (live and ended work, failures, the queue).
pub const DEFAULT_STATES: [DecisionState; 4] = [
    DecisionState::Committed,
    DecisionState::Completed,
    DecisionState::Failed,
    DecisionState::Queued,
];

/// The most recorded decisions one what-if plans again.
pub const MAX_WHAT_IF_DECISIONS: usize = 100_000;

/// The hypothetical changes: each names a cluster (an added one by its inventory's
/// `cluster`). All optional; none at all is the baseline (today's federation alone).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhatIfChanges {
    /// Clusters that take no new work (planned, never chosen: dropped with code `drained`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drain: Vec<String>,
    /// Clusters gone (neither planned nor offered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Replacement inventories, each for the known cluster its `cluster` names (fedvol's live
    /// commits there still count, on hosts of the same zone and name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventories: Vec<Inventory>,
    /// New clusters, each with its inventory and no commits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Inventory>,
    /// Another policy (quotas, priority classes, queue: `fedvol what-if --policy FILE`): each
    /// decision is checked against its quotas beside today's live use, and against today's
    /// policy for comparison; a decision it refuses is refused `quota_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<fedvol_common::policy::Policy>,
}

impl WhatIfChanges {
    /// True when it changes nothing (the baseline).
    pub fn is_empty(&self) -> bool {
        self.drain.is_empty()
            && self.remove.is_empty()
            && self.inventories.is_empty()
            && self.add.is_empty()
            && self.policy.is_none()
    }
}

/// `what_if`: plan recorded decisions again with `changes` (`fedvol what-if`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhatIfQuery {
    /// Absolute deadline, ms since the epoch: past it the coordinator stops (`timed_out`).
    pub deadline_ms: u64,
    /// Only decisions changed within this many ms before now (default [`DEFAULT_SINCE_MS`]; 0:
    /// every one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// Only this user's decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Only decisions of this project (`default` for workflows that name none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Only decisions whose workflow name contains this (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Only decisions in these states (default [`DEFAULT_STATES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<DecisionState>,
    /// The changes.
    #[serde(default)]
    pub changes: WhatIfChanges,
}

impl RequestBody for WhatIfQuery {
    fn deadline_ms(&self) -> Option<u64> {
        Some(self.deadline_ms)
    }

    /// Cluster names are subject tokens; each inventory within the limits of
    /// [`fedvol_common::limits::inventory_problems`]; a cluster named by two changes of one
    /// kind, or replaced and added at once, is refused.
    fn check(&self, what: &str) -> Result<(), ProtoError> {
        let bad = |m: String| Err(crate::Code::BadRequest.error(format!("{what}: {m}")));
        let c = &self.changes;
        let named = c
            .drain
            .iter()
            .map(|n| ("drain", n.as_str()))
            .chain(c.remove.iter().map(|n| ("remove", n.as_str())));
        let inventories = c
            .inventories
            .iter()
            .map(|i| ("inventory", i))
            .chain(c.add.iter().map(|i| ("add", i)));
        let mut seen = std::collections::BTreeSet::new();
        for (kind, name) in named.chain(inventories.clone().map(|(k, i)| (k, i.cluster.as_str()))) {
            if !fedvol_common::limits::is_token(name) {
                return bad(format!(
                    "{kind}: `{}` is not a cluster name (letters, digits, `-`, `_`)",
                    fedvol_common::limits::printable(name)
                ));
            }
            let group = if kind == "add" { "inventory" } else { kind };
            if !seen.insert((group, name)) {
                return bad(format!("{kind}: cluster `{name}` is named twice"));
            }
        }
        for (kind, inv) in inventories {
            let problems = fedvol_common::limits::inventory_problems(inv);
            if !problems.is_empty() {
                return bad(format!(
                    "{kind} `{}`: {}",
                    inv.cluster,
                    fedvol_common::limits::join_problems(&problems)
                ));
            }
        }
        if let Some(u) = &self.user
            && fedvol_common::limits::check_user(u).is_err()
        {
            return bad(format!(
                "user `{}` is not a user name",
                fedvol_common::limits::printable(u)
            ));
        }
        Ok(())
    }
}

/// One cluster a what-if planned on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhatIfCluster {
    /// The cluster.
    pub name: String,
    /// The inventory version today's plans used (its agent's), empty when it could not be
    /// asked.
    pub inventory_version: String,
    /// Why it is not planned on as it is, or what limits its answers (not answering, its
    /// inventory cut to `max_payload`, commits on hosts a replacement inventory lacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How much of the per-decision list an answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhatIfCut {
    /// Decisions listed (the first ones: changed first).
    pub listed: u64,
    /// Decisions planned (every count is over all of them).
    pub planned: u64,
}

/// The answer to `what_if`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhatIfReply {
    /// The changes applied, in words (`drain cluster-b`...); empty for the baseline.
    #[serde(default)]
    pub changes: Vec<String>,
    /// The clusters of today's federation, in the order planned, with their notes.
    #[serde(default)]
    pub clusters: Vec<WhatIfCluster>,
    /// Recorded decisions selected by the filters (all planned).
    pub selected: u64,
    /// Selected decisions that could not be read (each left out, with a warning in the log).
    #[serde(default, skip_serializing_if = "crate::decisions::is_zero")]
    pub unreadable: u64,
    /// Time spent reading the records and planning, ms (on the coordinator's blocking pool).
    pub planning_ms: f64,
    /// The report: counts over every decision, and the per-decision list (cut, see `cut`).
    pub report: Report,
    /// Present when the per-decision list was cut to fit `max_payload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<WhatIfCut>,
    /// With another policy: each quota either policy sets (a `*` rule per name in use), its
    /// live use, its limits today and tried, and the decisions each refuses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<fedvol_common::whatif::quota::QuotaUse>,
}

impl ReplyBody for WhatIfReply {}

impl WhatIfReply {
    /// Cuts `report.decisions` to at most `budget` bytes of encoded answer, keeping the first
    /// ones (changed first) and every count, and records `cut`. Returns whether it cut.
    pub fn fit(&mut self, budget: usize) -> bool {
        let len = |v: &WhatIfReply| serde_json::to_vec(v).map_or(0, |b| b.len());
        if len(self) <= budget {
            return false;
        }
        let all = std::mem::take(&mut self.report.decisions);
        let planned = all.len() as u64;
        let base = len(self) + 64;
        let mut used = base;
        let mut keep = 0;
        for d in &all {
            let n = serde_json::to_vec(d).map_or(0, |b| b.len()) + 1;
            if used + n > budget {
                break;
            }
            used += n;
            keep += 1;
        }
        let mut all = all;
        all.truncate(keep);
        self.report.decisions = all;
        self.cut = Some(WhatIfCut {
            listed: keep as u64,
            planned,
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::whatif::{DecisionWhatIf, Outcome, Transition};

    fn reply(n: usize) -> WhatIfReply {
        let d = |i: usize| DecisionWhatIf {
            request_id: format!("wf-{i:06}"),
            workflow: "wf".into(),
            user: "alice".into(),
            project: "default".into(),
            state: "committed".into(),
            transition: Transition::Stays,
            drift: false,
            kept_on_tie: false,
            quota_changed: false,
            was: Outcome::refused("nothing_fits", "x".repeat(200)),
            would_be: Outcome::refused("nothing_fits", "x".repeat(200)),
            today: None,
        };
        WhatIfReply {
            changes: vec![],
            clusters: vec![],
            selected: n as u64,
            unreadable: 0,
            planning_ms: 1.0,
            report: Report {
                planned: n as u64,
                decisions: (0..n).map(d).collect(),
                ..Report::default()
            },
            cut: None,
            quotas: Vec::new(),
        }
    }

    #[test]
    fn a_long_list_is_cut_to_the_budget_and_says_so() {
        let mut small = reply(3);
        assert!(!small.fit(1 << 20));
        assert_eq!(small.cut, None);
        let mut big = reply(10_000);
        assert!(big.fit(1 << 20));
        let bytes = serde_json::to_vec(&big).unwrap().len();
        assert!(bytes <= 1 << 20, "{bytes}");
        let cut = big.cut.unwrap();
        assert_eq!(cut.planned, 10_000);
        assert_eq!(cut.listed as usize, big.report.decisions.len());
        assert!(cut.listed > 100 && cut.listed < 10_000, "{cut:?}");
        assert_eq!(big.report.planned, 10_000, "counts are whole");
    }

    #[test]
    fn changes_name_clusters_once_and_by_token() {
        let q = |changes: WhatIfChanges| WhatIfQuery {
            deadline_ms: 1,
            since_ms: None,
            user: None,
            project: None,
            workflow: None,
            states: vec![],
            changes,
        };
        assert!(q(WhatIfChanges::default()).check("what_if").is_ok());
        let e = q(WhatIfChanges {
            drain: vec!["a".into(), "a".into()],
            ..Default::default()
        })
        .check("what_if")
        .unwrap_err();
        assert!(e.message.contains("named twice"), "{e:?}");
        let e = q(WhatIfChanges {
            remove: vec!["a.b".into()],
            ..Default::default()
        })
        .check("what_if")
        .unwrap_err();
        assert!(e.message.contains("`a.b` is not a cluster name"), "{e:?}");
        let inv = Inventory {
            cluster: "x".into(),
            ..Default::default()
        };
        let e = q(WhatIfChanges {
            inventories: vec![inv.clone()],
            add: vec![inv],
            ..Default::default()
        })
        .check("what_if")
        .unwrap_err();
        assert!(e.message.contains("named twice"), "{e:?}");
    }
}
