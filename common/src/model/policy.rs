//! Group access policies on provisioners (Fuzzball "Annotations and Selection": "group permission check").

use std::collections::BTreeSet;

/// Who may perform one operation on a provisioner. Default-deny: an absent policy is `Deny`.
///
/// Files write `all` or a list of groups (Fuzzball "Annotations and Selection"); Fuzzball's API form
/// `{all: bool, groups: {names: [...]}, users: {names: [...]}}` is read too
/// (Fuzzball's provisioner definition reference, "Top level": users additive with groups,
/// ignored when `all` is set).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessPolicy {
    /// Nobody (the default when the field is absent).
    #[default]
    Deny,
    /// Every user (`all`).
    All,
    /// Members of these groups.
    Groups(BTreeSet<String>),
    /// Members of these groups, and these users (the API form with `users`). A user matches
    /// when the request's user identity is one of the names, exactly.
    Members {
        /// Group names.
        groups: BTreeSet<String>,
        /// User names.
        users: BTreeSet<String>,
    },
}

impl AccessPolicy {
    /// True when `user`, a member of `groups`, is allowed.
    pub fn allows(&self, user: &str, groups: &[String]) -> bool {
        match self {
            AccessPolicy::Deny => false,
            AccessPolicy::All => true,
            AccessPolicy::Groups(g) => groups.iter().any(|x| g.contains(x)),
            AccessPolicy::Members { groups: g, users } => users.contains(user) || groups.iter().any(|x| g.contains(x)),
        }
    }

    /// Short text for messages: `nobody`, `all`, `groups [a, b]` or `groups [a] and users [u]`.
    pub fn describe(&self) -> String {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        match self {
            AccessPolicy::Deny => "nobody".into(),
            AccessPolicy::All => "all".into(),
            AccessPolicy::Groups(g) => format!("groups [{}]", list(g)),
            AccessPolicy::Members { groups, users } => format!("groups [{}] and users [{}]", list(groups), list(users)),
        }
    }
}

/// The operation a volume request needs permission for (Fuzzball "Annotations and Selection").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Use an existing persistent volume.
    Access,
    /// Create a per-workflow ephemeral volume.
    Ephemeral,
    /// Create a new persistent volume.
    Create,
}

impl Operation {
    /// The policy field's name in the inventory (`access`, `ephemeral`, `create`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Access => "access",
            Operation::Ephemeral => "ephemeral",
            Operation::Create => "create",
        }
    }
}

/// The three policies of one provisioner. `create` implies `access` and `ephemeral` (Fuzzball "Annotations and Selection" as
/// fedvol's docs/design.md §2 reads it).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Permissions {
    /// May use existing persistent volumes.
    pub access: AccessPolicy,
    /// May create new persistent volumes (implies the other two).
    pub create: AccessPolicy,
    /// May create ephemeral volumes.
    pub ephemeral: AccessPolicy,
}

impl Permissions {
    /// Everyone may do everything (used for Kubernetes StorageClasses, which carry no group policy).
    pub fn open() -> Self {
        Permissions {
            access: AccessPolicy::All,
            create: AccessPolicy::All,
            ephemeral: AccessPolicy::All,
        }
    }

    /// True when `user`, a member of `groups`, may perform `op`.
    pub fn allows(&self, op: Operation, user: &str, groups: &[String]) -> bool {
        match op {
            Operation::Create => self.create.allows(user, groups),
            Operation::Access => self.access.allows(user, groups) || self.create.allows(user, groups),
            Operation::Ephemeral => self.ephemeral.allows(user, groups) || self.create.allows(user, groups),
        }
    }

    /// The policy consulted first for `op` (for messages).
    pub fn policy(&self, op: Operation) -> &AccessPolicy {
        match op {
            Operation::Access => &self.access,
            Operation::Create => &self.create,
            Operation::Ephemeral => &self.ephemeral,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_deny_and_create_implies() {
        let g = vec!["physics".to_string()];
        let mut p = Permissions::default();
        assert!(!p.allows(Operation::Ephemeral, "u", &g));
        p.create = AccessPolicy::Groups(["physics".to_string()].into());
        assert!(p.allows(Operation::Ephemeral, "u", &g));
        assert!(p.allows(Operation::Access, "u", &g));
        assert!(!p.allows(Operation::Access, "u", &["chem".to_string()]));
        p.ephemeral = AccessPolicy::All;
        assert!(p.allows(Operation::Ephemeral, "u", &[]));
    }
}
