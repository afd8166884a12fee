//! The out-of-tree provisioner protocol (the Kubernetes volume provisioning design): an agent's `external` driver asks a
//! provisioner written by someone else, on
//! `<prefix>.provisioner.<cluster>.<name as token>.<op>`, to create or delete a volume's
//! asset. Its answer keeps the shape third parties implement: `{"v": 1, "ok": bool,
//! "source": "...", "error": "text"}` (the error is text, not a [`crate::ProtoError`]).

use std::collections::BTreeMap;

use fedvol_common::decision::NewVolume;

use crate::endpoint::{ReplyBody, RequestBody};
use crate::operations::operations;

operations! {
    /// The provisioner operations: the `<op>` token of the provisioner subjects.
    pub enum ProvisionerOp, served as ProvisionerEndpoint {
        /// Create a volume's asset.
        Provision = "provision": ProvisionMsg => ProvisionerReply;
        /// Delete a volume's asset.
        Delete = "delete": DeleteMsg => ProvisionerReply;
    }
}

/// Provision: ask an out-of-tree provisioner for a volume.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProvisionMsg {
    /// Idempotency key: the same id must not create a second asset.
    pub request_id: String,
    /// The volume to create (its name is deterministic).
    pub volume: NewVolume,
    /// The storage class parameters, as written in the inventory: a parameter whose key looks
    /// like a credential holds a secret *reference* (`file:/path`, `env:NAME`,
    /// [`fedvol_common::secrets::SecretRef`]) that the provisioner resolves itself; the agent
    /// never reads or sends the secret.
    pub parameters: BTreeMap<String, String>,
}

impl RequestBody for ProvisionMsg {
    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// Delete: ask an out-of-tree provisioner to delete a volume's asset.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteMsg {
    /// Idempotency key.
    pub request_id: String,
    /// The volume's name.
    pub volume: String,
    /// Its provisioner / storage class.
    pub provisioner: String,
}

impl RequestBody for DeleteMsg {
    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// An out-of-tree provisioner's answer to provision or delete.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProvisionerReply {
    /// True when the asset was created (or deleted).
    pub ok: bool,
    /// Where the asset is (a path, a volume id), for provision.
    #[serde(default)]
    pub source: Option<String>,
    /// Why not.
    #[serde(default)]
    pub error: Option<String>,
}

impl ReplyBody for ProvisionerReply {
    /// The answer has its own `ok` and `error`: a failure body reads as a refusal.
    const CARRIES_ERROR: bool = true;
}

impl ProvisionerReply {
    /// A success, with the asset's `source` for provision.
    pub fn done(source: Option<String>) -> Self {
        ProvisionerReply {
            ok: true,
            source,
            error: None,
        }
    }

    /// A refusal saying why.
    pub fn refused(error: impl Into<String>) -> Self {
        ProvisionerReply {
            ok: false,
            source: None,
            error: Some(error.into()),
        }
    }
}
