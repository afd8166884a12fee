//! Storage drivers: create and delete the storage asset behind a volume (seed 001's
//! provisioner and deleter roles). PLACEHOLDER API, being implemented.

/// Why a driver could not create or delete an asset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// The provisioner refused (bad parameters, unsatisfiable request): retrying will not help.
    #[error("provisioner refused: {0}")]
    Refused(String),
    /// The asset could not be created or deleted now (I/O error, no answer): may be retried.
    #[error("{0}")]
    Failed(String),
}

/// What a successful provisioning created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// Where the asset is: a directory path, an EFS access-point path, an external source id.
    pub source: String,
    /// A human line for the volume's `ProvisioningSucceeded` event.
    pub message: String,
}
