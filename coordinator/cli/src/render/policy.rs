//! The coordinator's policy in a decision, for people: why it refused the request
//! (`quota_exceeded`, `queue_full`, `queue_timeout`, withdrawn) and every quota that applies,
//! with its use, the request and the limit.

use fedvol_common::decision::Decision;
use fedvol_common::quota::QuotaCheck;

use super::layout::{fill, para, table};

/// The refusal line (introduced by `label`, e.g. `refused: `) and the quota table of `d`; empty
/// when neither applies.
pub fn render(d: &Decision, label: &str) -> String {
    let mut out = String::new();
    if let Some(r) = &d.refused {
        out.push_str(&para(label, "  ", &format!("{} ({})", r.message, r.code)));
        out.push('\n');
    }
    if !d.quota.is_empty() {
        out.push_str("quotas:\n");
        out.push_str(&quota_table(&d.quota));
        out.push_str("\n\n");
    }
    out
}

/// One row per quota and resource: `QUOTA`, `RESOURCE`, `USED`, `REQUESTED`, `LIMIT`, `VERDICT`.
pub fn quota_table(checks: &[QuotaCheck]) -> String {
    let header = ["QUOTA", "RESOURCE", "USED", "REQUESTED", "LIMIT", "VERDICT"];
    let mut t = table(&header);
    let rows = checks
        .iter()
        .map(|c| {
            let r = c.resource;
            let left = c.limit.saturating_sub(c.used);
            vec![
                format!("{} {}", c.scope.as_str(), c.name),
                r.to_string(),
                r.show(c.used),
                r.show(c.requested),
                r.show(c.limit),
                if c.exceeded {
                    format!("exceeded ({} left)", r.show(left))
                } else {
                    "ok".to_string()
                },
            ]
        })
        .collect();
    fill(&mut t, &header, rows);
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::quota::{Resource, Scope};

    #[test]
    fn refusal_and_figures() {
        let mut d = Decision {
            request_id: "r".into(),
            workflow: "w".into(),
            seed: 1,
            chosen_cluster: None,
            clusters: Default::default(),
            choice: Vec::new(),
            quota: vec![QuotaCheck {
                scope: Scope::Project,
                name: "genomics".into(),
                resource: Resource::Storage,
                used: 8_000_000_000,
                requested: 4_000_000_000,
                limit: 10_000_000_000,
                exceeded: true,
            }],
            refused: Some(fedvol_common::decision::Reason::new(
                "quota_exceeded",
                "quota exceeded: x",
            )),
            drained: Default::default(),
        };
        let text = render(&d, "refused: ");
        assert!(
            text.starts_with("refused: quota exceeded: x (quota_exceeded)\n"),
            "{text}"
        );
        for cell in [
            "project genomics",
            "storage",
            "8GB",
            "4GB",
            "10GB",
            "exceeded (2GB left)",
        ] {
            assert!(text.contains(cell), "{cell} in\n{text}");
        }
        d.quota.clear();
        d.refused = None;
        assert_eq!(render(&d, "refused: "), "");
    }
}
