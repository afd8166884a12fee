//! fedvol-formats: reading the files users write (docs/design.md §3). Strict: unknown keys, wrong types and dangling
//! references are errors naming file, line, column and field, with "did you mean" hints, and
//! every error in a file is reported.
//!
//! - [`yaml`]: YAML documents with line and column positions, and the typed readers on them.
//! - [`inventory`]: a cluster inventory (fedvol syntax), plus Kubernetes StorageClass and
//!   PersistentVolume documents in the same file or in `include:`d files.
//! - [`kube`]: Kubernetes StorageClass / PersistentVolume / PersistentVolumeClaim decoding.
//! - [`fuzzfile`]: Fuzzfile workflows (v1 and v4).
//! - [`template`]: detection of unrendered Go templates (`{{ }}`).
//! - [`render`]: rendering catalog templates with their values files (`fedvol render`,
//!   `--values`).
//! - [`files`]: reading files, classifying documents, inventory versions.
//! - [`nats`]: the `nats:` block of the agent's and the coordinator's configuration files.
//!
//! The core crate (`fedvol-common`: the model, the funnel, the cluster choice) depends on none
//! of this: every reader here produces `fedvol_common::model` values.

#![warn(missing_docs)]

pub mod docs;
pub mod files;
pub mod fuzzfile;
pub mod inventory;
pub mod kube;
pub mod nats;
pub mod policy;
pub mod render;
pub mod template;
pub mod yaml;

pub use files::{
    FileKind, classify, load_inventory, load_inventory_without_zones, load_workflow, parse_inventory_str,
    parse_workflow_str,
};
