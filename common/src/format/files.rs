//! Reading files: classify documents, load inventories and workflows. PLACEHOLDER (helper H2).
use std::path::Path;
use crate::model::{Inventory, Workflow};
use crate::yaml::Diagnostics;

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A fedvol cluster inventory (has `cluster:` or `provisioners:`).
    Inventory,
    /// A Fuzzfile (has `version:`).
    Workflow,
    /// Only Kubernetes StorageClass / PersistentVolume documents (and skipped other kinds).
    KubernetesInventory,
    /// Kubernetes PersistentVolumeClaims (possibly beside StorageClasses / PVs).
    KubernetesClaims,
    /// An unrendered Go template.
    Template,
}

/// Classifies a file's text. Errors: unreadable YAML.
pub fn classify(_label: &str, _text: &str) -> Result<FileKind, Diagnostics> { todo!() }
/// Loads one cluster's inventory from `path` (and its `include:`s).
pub fn load_inventory(_path: &Path) -> Result<Inventory, Diagnostics> { todo!() }
/// Parses an inventory from text; `base_dir` resolves `include:` paths.
pub fn parse_inventory_str(_label: &str, _text: &str, _base_dir: Option<&Path>) -> Result<Inventory, Diagnostics> { todo!() }
/// Loads a workflow: a Fuzzfile or a file of PersistentVolumeClaims.
pub fn load_workflow(_path: &Path) -> Result<Workflow, Diagnostics> { todo!() }
/// Parses a workflow from text; `name` is used for Fuzzfiles (which have no name field).
pub fn parse_workflow_str(_label: &str, _name: &str, _text: &str) -> Result<Workflow, Diagnostics> { todo!() }
