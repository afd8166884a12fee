//! The coordinator's federation-wide policy: quotas, priority classes and the queue of
//! submits that wait for capacity. The types and rules are [`fedvol_common::policy`]; its keys
//! in the coordinator's file are read by [`fedvol_formats::policy::read_policy`].

pub use fedvol_common::policy::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::config::CoordinatorConfig;
    use fedvol_common::model::Workflow;
    use fedvol_common::quota::{Limits, Scope};
    use fedvol_common::size::ByteSize;

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
