//! fedvol's user-facing file formats (docs/design.md §3), strict: unknown keys, wrong types and dangling
//! references are errors naming file, line, column and field, with "did you mean" hints, and
//! every error in a file is reported.
//!
//! - [`inventory`]: a cluster inventory (fedvol syntax), plus Kubernetes StorageClass and
//!   PersistentVolume documents in the same file or in `include:`d files.
//! - [`kube`]: Kubernetes StorageClass / PersistentVolume / PersistentVolumeClaim decoding.
//! - [`fuzzfile`]: Fuzzfile workflows (v1 and v4).
//! - [`template`]: detection of unrendered Go templates (`{{ }}`).
//! - [`render`]: rendering catalog templates with their values files (`fedvol render`,
//!   `--values`).
//! - [`files`]: reading files, classifying documents, inventory versions.

pub mod docs;
pub mod files;
pub mod fuzzfile;
pub mod inventory;
pub mod kube;
pub mod render;
pub mod template;

pub use files::{
    FileKind, classify, load_inventory, load_inventory_without_zones, load_workflow, parse_inventory_str,
    parse_workflow_str,
};
