//! Kubernetes storage vocabulary shared by inventories, claims and the funnel (the Kubernetes volume provisioning design):
//! access modes, volume mode, reclaim policy, label selectors and node affinity.

use std::collections::BTreeMap;

/// One access mode of a persistent volume or claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum AccessMode {
    /// `ReadWriteOnce` (RWO): read-write by one node.
    ReadWriteOnce,
    /// `ReadOnlyMany` (ROX): read-only by many nodes.
    ReadOnlyMany,
    /// `ReadWriteMany` (RWX): read-write by many nodes.
    ReadWriteMany,
    /// `ReadWriteOncePod` (RWOP): read-write by one pod.
    ReadWriteOncePod,
}

impl AccessMode {
    /// All modes with their spelled-out and short names.
    pub const ALL: [(AccessMode, &'static str, &'static str); 4] = [
        (AccessMode::ReadWriteOnce, "ReadWriteOnce", "RWO"),
        (AccessMode::ReadOnlyMany, "ReadOnlyMany", "ROX"),
        (AccessMode::ReadWriteMany, "ReadWriteMany", "RWX"),
        (AccessMode::ReadWriteOncePod, "ReadWriteOncePod", "RWOP"),
    ];

    /// Parses `ReadWriteOnce` or `RWO` (and the other three).
    pub fn parse(s: &str) -> Option<AccessMode> {
        Self::ALL
            .iter()
            .find(|(_, long, short)| *long == s || *short == s)
            .map(|(m, ..)| *m)
    }

    /// The short name (`RWO`, `ROX`, `RWX`, `RWOP`).
    pub fn short(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(m, ..)| *m == self)
            .map(|(_, _, s)| *s)
            .unwrap_or("?")
    }

    fn bit(self) -> u8 {
        match self {
            AccessMode::ReadWriteOnce => 1,
            AccessMode::ReadOnlyMany => 2,
            AccessMode::ReadWriteMany => 4,
            AccessMode::ReadWriteOncePod => 8,
        }
    }
}

/// A set of access modes, as a bit set (cheap to compare and to group by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct AccessModes(pub u8);

impl AccessModes {
    /// The set holding exactly `modes`.
    pub fn of(modes: &[AccessMode]) -> Self {
        AccessModes(modes.iter().fold(0, |acc, m| acc | m.bit()))
    }

    /// True when every mode of `other` is in `self` (the Kubernetes volume provisioning design: a volume's modes must be a
    /// superset of the claim's).
    pub fn is_superset_of(self, other: AccessModes) -> bool {
        self.0 & other.0 == other.0
    }

    /// How many modes the set holds.
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// True for the empty set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when `m` is in the set.
    pub fn contains(self, m: AccessMode) -> bool {
        self.0 & m.bit() != 0
    }

    /// The modes in the set, in the canonical order.
    pub fn modes(self) -> Vec<AccessMode> {
        AccessMode::ALL
            .iter()
            .map(|(m, ..)| *m)
            .filter(|m| self.contains(*m))
            .collect()
    }

    /// Short form such as `RWO,RWX` (`-` when empty).
    pub fn describe(self) -> String {
        if self.is_empty() {
            return "-".into();
        }
        self.modes().iter().map(|m| m.short()).collect::<Vec<_>>().join(",")
    }
}

impl serde::Serialize for AccessModes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.modes().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for AccessModes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(AccessModes::of(&Vec::<AccessMode>::deserialize(d)?))
    }
}

/// Whether a volume is a filesystem or a raw block device. Unset means `Filesystem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub enum VolumeMode {
    /// A mounted filesystem (the default).
    #[default]
    Filesystem,
    /// A raw block device.
    Block,
}

/// What happens to a volume when its claim or workflow ends (the Kubernetes volume provisioning design, deletion).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub enum ReclaimPolicy {
    /// The driver deletes the storage asset, then the record goes (the default for provisioned volumes).
    #[default]
    Delete,
    /// The volume stays, `Released`, and is not bound again until an admin resets it.
    Retain,
    /// Deprecated in Kubernetes; accepted and treated like `Retain` by fedvol.
    Recycle,
}

/// The lifecycle phase of a persistent volume (Kubernetes `status.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub enum VolumePhase {
    /// Free to bind (the default for a volume with no claimRef).
    #[default]
    Available,
    /// Bound to a claim.
    Bound,
    /// Its claim is gone; awaiting reclaim.
    Released,
    /// Reclaim failed.
    Failed,
    /// Not yet available.
    Pending,
}

/// A label selector: `matchLabels` and `matchExpressions` (Kubernetes semantics, all ANDed).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    pub match_expressions: Vec<LabelRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: SelectorOperator,
    /// Values for `In`/`NotIn` (must be empty for `Exists`/`DoesNotExist`).
    pub values: Vec<String>,
}

/// Operators of a label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// Node selectors only: the value, as an integer, is greater.
    Gt,
    /// Node selectors only: the value, as an integer, is less.
    Lt,
}

impl LabelRequirement {
    /// True when `labels` satisfy this requirement (Kubernetes semantics).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let v = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => v.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => v.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => v.is_some(),
            SelectorOperator::DoesNotExist => v.is_none(),
            SelectorOperator::Gt | SelectorOperator::Lt => {
                let (Some(v), Some(bound)) = (
                    v.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|b| b.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == SelectorOperator::Gt {
                    v > bound
                } else {
                    v < bound
                }
            }
        }
    }

    /// Text form, e.g. `region notin (east,west)`.
    pub fn describe(&self) -> String {
        match self.operator {
            SelectorOperator::In => format!("{} in ({})", self.key, self.values.join(",")),
            SelectorOperator::NotIn => format!("{} notin ({})", self.key, self.values.join(",")),
            SelectorOperator::Exists => self.key.clone(),
            SelectorOperator::DoesNotExist => format!("!{}", self.key),
            SelectorOperator::Gt => format!("{} > {}", self.key, self.values.join(",")),
            SelectorOperator::Lt => format!("{} < {}", self.key, self.values.join(",")),
        }
    }
}

impl LabelSelector {
    /// True when the selector has no requirement (it matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Every requirement `labels` fail, as text (empty when the selector matches).
    pub fn failures(&self, labels: &BTreeMap<String, String>) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.match_labels {
            match labels.get(k) {
                Some(x) if x == v => {}
                Some(x) => out.push(format!("label {k}={x}, selector wants {k}={v}")),
                None => out.push(format!("label {k} missing, selector wants {k}={v}")),
            }
        }
        for r in &self.match_expressions {
            if !r.matches(labels) {
                out.push(format!("selector requirement `{}` not met", r.describe()));
            }
        }
        out
    }

    /// True when `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.failures(labels).is_empty()
    }
}

/// A persistent volume's claimRef: the claim it is (pre-)bound to.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ClaimRef {
    /// The claim's namespace (Kubernetes' default is `default`).
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's uid, when the reference pins one.
    pub uid: Option<String>,
}

/// Node affinity of a persistent volume: it is usable only from hosts matching at least one term
/// (terms are ORed, the requirements inside a term ANDed). Host labels for matching are the
/// host's tags (`key:value` as key=value, bare `key` as key="") plus `kubernetes.io/hostname`
/// = host name and `topology.kubernetes.io/zone` = zone name.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct NodeAffinity {
    /// `required.nodeSelectorTerms`, each a list of `matchExpressions`.
    pub terms: Vec<Vec<LabelRequirement>>,
}

impl NodeAffinity {
    /// True when a host with `labels` satisfies at least one term.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().any(|t| t.iter().all(|r| r.matches(labels)))
    }
}
