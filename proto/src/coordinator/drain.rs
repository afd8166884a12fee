//! The operators' bodies (`<prefix>.operator.<op>.<user>`, docs/design.md §5): a cluster's
//! drain ([`DrainMsg`]), its end (`undrain`, a [`super::ClusterRef`]), their answer
//! ([`DrainReply`]), and a drain as the coordinators store it ([`ClusterDrain`], the value of
//! the decision bucket's key `fedvol/drain/<cluster>`: [`drain_key`]).

use fedvol_common::drain::{Drain, check_reason};
use fedvol_common::limits::is_token;

use crate::code::{Code, ProtoError};
use crate::endpoint::{ReplyBody, RequestBody};

/// The prefix of the decision bucket's drain keys: `fedvol/drain/<cluster>` holds a
/// [`ClusterDrain`] while the cluster is drained (a request id never contains `/`).
pub const DRAIN_KEY_PREFIX: &str = "fedvol/drain/";

/// The decision bucket's key of `cluster`'s drain.
pub fn drain_key(cluster: &str) -> String {
    format!("{DRAIN_KEY_PREFIX}{cluster}")
}

/// Drain `cluster` (`fedvol clusters drain CLUSTER --reason TEXT`): from now on it answers
/// plans but no coordinator chooses it for new work; what is committed there runs on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DrainMsg {
    /// The cluster (a subject token).
    pub cluster: String,
    /// Why (1 to 300 visible characters on one line), kept with the drain and shown wherever
    /// it is ([`fedvol_common::drain::check_reason`]).
    pub reason: String,
    /// Drain it even though no coordinator knows it yet (a cluster about to join that must
    /// not take work at once). Without it, an unknown name is refused `not_found`, so a typo
    /// never leaves the cluster meant undrained.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub before_join: bool,
}

impl RequestBody for DrainMsg {
    /// The cluster is a subject token; the reason as [`check_reason`] takes it.
    fn check(&self, what: &str) -> Result<(), ProtoError> {
        if !is_token(&self.cluster) {
            return Err(Code::BadRequest.error(format!(
                "{what}: `{}` is not a cluster name (letters, digits, `-` and `_`)",
                fedvol_common::limits::printable(&self.cluster.chars().take(80).collect::<String>())
            )));
        }
        check_reason(&self.reason).map_err(|e| Code::BadRequest.error(format!("{what}: {e}")))
    }
}

/// A drain as stored and answered: the cluster and its [`Drain`] (who, when, why).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterDrain {
    /// The cluster.
    pub cluster: String,
    /// Who drained it, when and why.
    #[serde(flatten)]
    pub drain: Drain,
}

/// The answer to `drain` and `undrain`: the cluster's drain now, and whether this request
/// changed it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DrainReply {
    /// The cluster.
    pub cluster: String,
    /// True when this request drained (or undrained) it; false when it already was (the drain
    /// in force is kept as it is: its operator, time and reason).
    pub changed: bool,
    /// The drain in force after the request: `None` after an undrain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<Drain>,
    /// The drain this request ended (`undrain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Drain>,
    /// Whether a coordinator knows the cluster (heard from its agent).
    #[serde(default)]
    pub known: bool,
}

impl ReplyBody for DrainReply {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_are_checked_and_stored_flat() {
        let ok = DrainMsg {
            cluster: "cluster-a".into(),
            reason: "rack 4 power work".into(),
            before_join: false,
        };
        assert!(ok.check("drain").is_ok());
        let bad = DrainMsg {
            cluster: "a.b".into(),
            ..ok.clone()
        };
        assert!(bad.check("drain").unwrap_err().message.contains("not a cluster name"));
        let bad = DrainMsg {
            reason: String::new(),
            ..ok.clone()
        };
        assert!(bad.check("drain").unwrap_err().message.contains("needs a reason"));
        let stored = ClusterDrain {
            cluster: "cluster-a".into(),
            drain: Drain {
                by: "ops".into(),
                at_ms: 5,
                reason: "r".into(),
            },
        };
        assert_eq!(
            serde_json::to_string(&stored).unwrap(),
            r#"{"cluster":"cluster-a","by":"ops","at_ms":5,"reason":"r"}"#
        );
        assert_eq!(drain_key("cluster-a"), "fedvol/drain/cluster-a");
    }
}
