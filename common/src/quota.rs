//! Federation-wide quotas: what one workflow counts against a quota, and whether a
//! quota has room for it. Pure; the coordinator keeps the usage (`daemon::quota`).
//!
//! What a workflow counts follows Kubernetes' ResourceQuota (kubernetes.io, "Resource Quotas",
//! sections "Storage Resource Quota" and "Compute Resource Quota"): requests, not what a
//! cluster happened to give.
//! - `storage`: the sum of the sizes its volume requests ask for (a Fuzzfile volume's `size`,
//!   a claim's `resources.requests.storage`; a volume named without a size counts 0), bytes;
//!   Kubernetes' `requests.storage`.
//! - `volumes`: how many volume requests it has; Kubernetes' `persistentvolumeclaims`.
//! - `cpu`, `memory`, `instances`: over the jobs that are placed (docs/design.md §2 places the jobs
//!   that mount a volume), cores × nodes, memory × nodes (bytes) and nodes: exactly what a
//!   commit allocates on hosts (Cloud Assembly's provisioning funnel's `limits` count the same three).

use std::fmt;

use crate::model::{VolumeSource, Workflow};
use crate::size::ByteSize;

/// A resource a quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// Requested volume sizes, bytes.
    Storage,
    /// Volume requests.
    Volumes,
    /// CPU cores of placed jobs (× nodes).
    Cpu,
    /// Memory of placed jobs (× nodes), bytes.
    Memory,
    /// Hosts (instances) of placed jobs.
    Instances,
}

impl Resource {
    /// Every resource, in the order checks are listed.
    pub const ALL: [Resource; 5] = [
        Resource::Storage,
        Resource::Volumes,
        Resource::Cpu,
        Resource::Memory,
        Resource::Instances,
    ];

    /// The name used in configuration and decisions (`storage`, `volumes`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Storage => "storage",
            Resource::Volumes => "volumes",
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
            Resource::Instances => "instances",
        }
    }

    /// True for resources counted in bytes.
    pub fn is_bytes(self) -> bool {
        matches!(self, Resource::Storage | Resource::Memory)
    }

    /// `value` in this resource's unit, as people read it (`10GiB`, `4 cores`, `3`).
    pub fn show(self, value: u128) -> String {
        match self {
            Resource::Storage | Resource::Memory => ByteSize(value).to_string(),
            Resource::Cpu => format!("{value} cores"),
            Resource::Volumes | Resource::Instances => value.to_string(),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Amounts of every quota resource (what one workflow asks for, or what a quota has in use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Amounts {
    /// Bytes.
    #[serde(default)]
    pub storage: ByteSize,
    /// Volume requests.
    #[serde(default)]
    pub volumes: u64,
    /// Cores.
    #[serde(default)]
    pub cpu: u64,
    /// Bytes.
    #[serde(default)]
    pub memory: ByteSize,
    /// Hosts.
    #[serde(default)]
    pub instances: u64,
}

impl Amounts {
    /// What `workflow` counts against a quota (module docs).
    pub fn of(workflow: &Workflow) -> Amounts {
        let mut a = Amounts {
            volumes: workflow.volumes.len() as u64,
            ..Amounts::default()
        };
        for v in &workflow.volumes {
            let size = match &v.source {
                VolumeSource::Fuzzball(f) => f.size.map_or(0, |s| s.0),
                VolumeSource::Claim(c) => c.request.0,
            };
            a.storage.0 = a.storage.0.saturating_add(size);
        }
        for j in &workflow.jobs {
            let nodes = j.nodes.max(1);
            a.cpu = a.cpu.saturating_add(j.resources.cpu.saturating_mul(nodes));
            a.memory.0 = a
                .memory
                .0
                .saturating_add(j.resources.memory.0.saturating_mul(u128::from(nodes)));
            a.instances = a.instances.saturating_add(nodes);
        }
        a
    }

    /// The amount of `r`.
    pub fn get(&self, r: Resource) -> u128 {
        match r {
            Resource::Storage => self.storage.0,
            Resource::Volumes => u128::from(self.volumes),
            Resource::Cpu => u128::from(self.cpu),
            Resource::Memory => self.memory.0,
            Resource::Instances => u128::from(self.instances),
        }
    }

    /// `self` less `other`, each amount at least 0.
    pub fn minus(&self, other: &Amounts) -> Amounts {
        Amounts {
            storage: ByteSize(self.storage.0.saturating_sub(other.storage.0)),
            volumes: self.volumes.saturating_sub(other.volumes),
            cpu: self.cpu.saturating_sub(other.cpu),
            memory: ByteSize(self.memory.0.saturating_sub(other.memory.0)),
            instances: self.instances.saturating_sub(other.instances),
        }
    }

    /// The sum of `self` and `other` (saturating).
    pub fn plus(&self, other: &Amounts) -> Amounts {
        Amounts {
            storage: ByteSize(self.storage.0.saturating_add(other.storage.0)),
            volumes: self.volumes.saturating_add(other.volumes),
            cpu: self.cpu.saturating_add(other.cpu),
            memory: ByteSize(self.memory.0.saturating_add(other.memory.0)),
            instances: self.instances.saturating_add(other.instances),
        }
    }
}

/// Who a quota applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The workflow's `project` (`default` when it names none).
    Project,
    /// The submitting user.
    User,
    /// A group the user belongs to (from the coordinator's directory).
    Group,
}

impl Scope {
    /// `project`, `user` or `group`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::User => "user",
            Scope::Group => "group",
        }
    }
}

/// The limits of one quota; `None` = that resource is not limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// Bytes.
    pub storage: Option<ByteSize>,
    /// Volume requests.
    pub volumes: Option<u64>,
    /// Cores.
    pub cpu: Option<u64>,
    /// Bytes.
    pub memory: Option<ByteSize>,
    /// Hosts.
    pub instances: Option<u64>,
}

impl Limits {
    /// The limit on `r`, if any.
    pub fn get(&self, r: Resource) -> Option<u128> {
        match r {
            Resource::Storage => self.storage.map(|b| b.0),
            Resource::Volumes => self.volumes.map(u128::from),
            Resource::Cpu => self.cpu.map(u128::from),
            Resource::Memory => self.memory.map(|b| b.0),
            Resource::Instances => self.instances.map(u128::from),
        }
    }
}

/// One quota's verdict on one resource for one request: recorded in the decision document
/// (`quota`), one entry per limited resource of every quota that applies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuotaCheck {
    /// Who the quota applies to.
    pub scope: Scope,
    /// The project, user or group name.
    pub name: String,
    /// The resource limited.
    pub resource: Resource,
    /// In use by live decisions (committed, or being committed) before this request, in the
    /// resource's unit (bytes for storage and memory).
    pub used: u128,
    /// What this request asks for.
    pub requested: u128,
    /// The limit.
    pub limit: u128,
    /// `used + requested > limit`: the request is refused (`quota_exceeded`).
    pub exceeded: bool,
}

impl QuotaCheck {
    /// The verdict in words, with figures:
    /// `project genomics: storage 8GB used + 4GB requested > 10GB limit`.
    pub fn describe(&self) -> String {
        let r = self.resource;
        let op = if self.exceeded { ">" } else { "<=" };
        format!(
            "{} {}: {} {} used + {} requested {op} {} limit",
            self.scope.as_str(),
            self.name,
            r,
            r.show(self.used),
            r.show(self.requested),
            r.show(self.limit)
        )
    }
}

/// Checks `requested` against one quota (`scope` `name`, `limits`) whose live usage is `used`:
/// one [`QuotaCheck`] per limited resource.
pub fn check(scope: Scope, name: &str, limits: &Limits, used: &Amounts, requested: &Amounts) -> Vec<QuotaCheck> {
    Resource::ALL
        .iter()
        .filter_map(|&r| {
            let limit = limits.get(r)?;
            let (u, q) = (used.get(r), requested.get(r));
            Some(QuotaCheck {
                scope,
                name: name.to_string(),
                resource: r,
                used: u,
                requested: q,
                limit,
                exceeded: q > 0 && u.saturating_add(q) > limit,
            })
        })
        .collect()
}

/// The reason of a refusal: every exceeded check, in words.
pub fn refusal_message(checks: &[QuotaCheck]) -> Option<String> {
    let over: Vec<String> = checks.iter().filter(|c| c.exceeded).map(QuotaCheck::describe).collect();
    (!over.is_empty()).then(|| format!("quota exceeded: {}", over.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceeded_only_past_the_limit_with_figures() {
        let limits = Limits {
            volumes: Some(3),
            storage: Some(ByteSize(10_000_000_000)),
            ..Limits::default()
        };
        let used = Amounts {
            volumes: 2,
            storage: ByteSize(8_000_000_000),
            ..Amounts::default()
        };
        let one = Amounts {
            volumes: 1,
            storage: ByteSize(2_000_000_000),
            ..Amounts::default()
        };
        let c = check(Scope::Project, "genomics", &limits, &used, &one);
        assert_eq!(c.len(), 2, "only limited resources are checked");
        assert!(c.iter().all(|c| !c.exceeded), "exactly at the limit is allowed: {c:?}");
        let two = one.plus(&Amounts {
            storage: ByteSize(1),
            ..Amounts::default()
        });
        let c = check(Scope::Project, "genomics", &limits, &used, &two);
        let msg = refusal_message(&c).unwrap_or_default();
        assert_eq!(
            msg,
            "quota exceeded: project genomics: storage 8GB used + 2000000001B requested > 10GB limit"
        );
        // Asking for nothing of an exhausted resource is not refused.
        let full = Amounts { volumes: 5, ..used };
        let none = Amounts::default();
        assert!(
            check(Scope::User, "alice", &limits, &full, &none)
                .iter()
                .all(|c| !c.exceeded)
        );
    }
}
