//! Every NATS subject and queue group of the contract (docs/design.md §5), built from a prefix
//! (default [`DEFAULT_PREFIX`]) and the operation enums, so that a server and its callers
//! cannot disagree on a subject.

use crate::agent::AgentOp;
use crate::coordinator::CoordinatorOp;
use crate::provisioner::ProvisionerOp;

/// Default subject prefix (`fedvol.v1`).
pub const DEFAULT_PREFIX: &str = "fedvol.v1";

/// The service name agents register under with the NATS service API (`$SRV.INFO.fedvol-agent`
/// finds them; the cluster is in the service's metadata under `cluster`).
pub const AGENT_SERVICE: &str = "fedvol-agent";

/// Builds every subject of the contract from a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Default for Subjects {
    fn default() -> Self {
        Subjects::new(DEFAULT_PREFIX)
    }
}

/// Turns any name into one NATS subject token: characters other than ASCII letters, digits,
/// `-` and `_` become `_` (so `example.com/nfs` → `example_com_nfs`); empty becomes `_`.
pub fn subject_token(name: &str) -> String {
    let t: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() { "_".to_string() } else { t }
}

impl Subjects {
    /// The coordinators' queue group.
    pub const COORDINATOR_QUEUE: &'static str = "coordinator";

    /// Subjects under `prefix` (e.g. `fedvol.v1`; a trailing dot is ignored).
    pub fn new(prefix: &str) -> Self {
        Subjects {
            prefix: prefix.trim_end_matches('.').to_string(),
        }
    }

    /// The prefix, without a trailing dot.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>.plan`: broadcast to every cluster (one answer per cluster via its queue group).
    pub fn plan(&self) -> String {
        format!("{}.plan", self.prefix)
    }

    /// `<prefix>.cluster.<cluster>.<op>`: one cluster's endpoint.
    pub fn cluster(&self, cluster: &str, op: AgentOp) -> String {
        format!("{}.cluster.{}.{}", self.prefix, cluster, op.name())
    }

    /// `<prefix>.heartbeat.<cluster>`: an agent's periodic heartbeat.
    pub fn heartbeat(&self, cluster: &str) -> String {
        format!("{}.heartbeat.{}", self.prefix, cluster)
    }

    /// `<prefix>.heartbeat.*`: every cluster's heartbeat.
    pub fn heartbeats(&self) -> String {
        format!("{}.heartbeat.*", self.prefix)
    }

    /// `<prefix>.provisioner.<cluster>.<name as token>.<op>`: an out-of-tree provisioner's
    /// endpoint (the Kubernetes volume provisioning design).
    pub fn provisioner(&self, cluster: &str, name: &str, op: ProvisionerOp) -> String {
        format!(
            "{}.provisioner.{}.{}.{}",
            self.prefix,
            cluster,
            subject_token(name),
            op.name()
        )
    }

    /// `<prefix>.coordinator.<op>.<user>`: a user's request to the coordinators (queue group
    /// [`Subjects::COORDINATOR_QUEUE`]); `<prefix>.operator.<op>.<user>` for the operators'
    /// operations ([`CoordinatorOp::family`]). With auth on, NATS permissions tie the `<user>`
    /// token to the user's credentials, so it is the user's identity.
    pub fn coordinator(&self, op: CoordinatorOp, user: &str) -> String {
        format!("{}.{}.{}.{}", self.prefix, op.family(), op.name(), subject_token(user))
    }

    /// `<prefix>.coordinator.<op>.*` (`<prefix>.operator.<op>.*` for the operators'
    /// operations): what coordinators subscribe to for `op`.
    pub fn coordinator_all(&self, op: CoordinatorOp) -> String {
        format!("{}.{}.{}.*", self.prefix, op.family(), op.name())
    }

    /// The queue group of one cluster's agents: `agent.<cluster>`.
    pub fn agent_queue(cluster: &str) -> String {
        format!("agent.{cluster}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_follow_the_contract() {
        let s = Subjects::default();
        assert_eq!(s.plan(), "fedvol.v1.plan");
        assert_eq!(
            s.cluster("cluster-a", AgentOp::Commit),
            "fedvol.v1.cluster.cluster-a.commit"
        );
        assert_eq!(s.cluster("c", AgentOp::WhyNot), "fedvol.v1.cluster.c.why_not");
        assert_eq!(s.heartbeat("c"), "fedvol.v1.heartbeat.c");
        assert_eq!(
            s.provisioner("c", "example.com/nfs", ProvisionerOp::Provision),
            "fedvol.v1.provisioner.c.example_com_nfs.provision"
        );
        assert_eq!(
            s.coordinator(CoordinatorOp::Submit, "alice"),
            "fedvol.v1.coordinator.submit.alice"
        );
        assert_eq!(
            s.coordinator_all(CoordinatorOp::WhyNot),
            "fedvol.v1.coordinator.why_not.*"
        );
        assert_eq!(
            s.coordinator(CoordinatorOp::Drain, "ops"),
            "fedvol.v1.operator.drain.ops"
        );
        assert_eq!(
            s.coordinator_all(CoordinatorOp::Undrain),
            "fedvol.v1.operator.undrain.*"
        );
        assert_eq!(Subjects::agent_queue("c"), "agent.c");
        assert_eq!(Subjects::new("x.v1.").plan(), "x.v1.plan");
    }

    #[test]
    fn tokens_never_contain_separators() {
        for n in ["a.b", "a b", "a/b", "*", ">", ""] {
            let t = subject_token(n);
            assert!(
                !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{t}"
            );
        }
    }
}
