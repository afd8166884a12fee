//! Human summaries of funnel traces, in the style of kube-scheduler's
//! "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had taint" line.

use std::collections::BTreeMap;

use crate::decision::{ClusterDecision, StageTrace};

/// The plural noun for a stage's candidates, from the stage name's prefix
/// (`provisioner.*` → "provisioners", `binding.*` → "volumes", `zone.*` → "zones", `host.*` → "hosts").
pub fn candidate_noun(stage: &str) -> &'static str {
    match stage.split('.').next().unwrap_or("") {
        "provisioner" => "provisioners",
        "binding" | "volume" => "volumes",
        "zone" => "zones",
        "host" => "hosts",
        "cluster" => "clusters",
        _ => "candidates",
    }
}

/// Turns a reason code into words: `annotation_mismatch` → "annotation mismatch".
pub fn code_words(code: &str) -> String {
    match code {
        "not_ready" => "not READY".to_string(),
        other => other.replace('_', " "),
    }
}

/// One line for a stage: `0/5 provisioners available: 3 annotation mismatch, 2 not READY`.
/// Each rejected candidate counts once under each distinct code it failed; codes are listed
/// by count, most frequent first, then by name.
pub fn stage_summary(t: &StageTrace) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    if t.reason_counts.is_empty() {
        // A trace from before per-code counts: count the listed rejections.
        for r in &t.rejected {
            let mut seen: Vec<&str> = Vec::new();
            for reason in &r.reasons {
                if !seen.contains(&reason.code.as_str()) {
                    seen.push(&reason.code);
                    *counts.entry(&reason.code).or_default() += 1;
                }
            }
        }
    } else {
        counts.extend(t.reason_counts.iter().map(|(c, n)| (c.as_str(), *n)));
    }
    let mut parts: Vec<(&str, usize)> = counts.into_iter().collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let detail = parts
        .iter()
        .map(|(c, n)| format!("{n} {}", code_words(c)))
        .collect::<Vec<_>>()
        .join(", ");
    let head = format!("{}/{} {} available", t.passed, t.considered, candidate_noun(&t.stage));
    if detail.is_empty() {
        head
    } else {
        format!("{head}: {detail}")
    }
}

/// The stages that stopped a subject: every stage that rejected candidates and let none
/// through, in trace order.
pub fn failed_stages(c: &ClusterDecision) -> Vec<&StageTrace> {
    c.trace.iter().filter(|t| t.passed == 0 && t.considered > 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Reason, Rejection};

    #[test]
    fn kube_scheduler_style_line() {
        let rej = |n: &str, codes: &[&str]| Rejection {
            candidate: n.into(),
            reasons: codes.iter().map(|c| Reason::new(c, "x")).collect(),
        };
        let t = StageTrace {
            stage: "provisioner.annotations".into(),
            subject: "scratch".into(),
            considered: 5,
            passed: 0,
            rejected: vec![
                rej("a", &["annotation_mismatch"]),
                rej("b", &["annotation_mismatch", "annotation_mismatch"]),
                rej("c", &["annotation_mismatch", "not_ready"]),
                rej("d", &["not_ready"]),
                rej("e", &["not_ready"]),
            ],
            omitted: 0,
            reason_counts: Default::default(),
        };
        assert_eq!(
            stage_summary(&t),
            "0/5 provisioners available: 3 annotation mismatch, 3 not READY"
        );
    }
}
