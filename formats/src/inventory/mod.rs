//! Cluster inventories (docs/design.md §3): fedvol syntax plus Kubernetes StorageClass and
//! PersistentVolume documents, in the same multi-document file or in `include:`d files.
//!
//! fedvol syntax (camelCase keys, like Kubernetes):
//! ```yaml
//! cluster: cluster-a                 # required; a NATS subject token
//! include: [k8s/classes.yaml]        # Kubernetes manifests, relative to this file
//! provisioners:                      # Fuzzball "Annotations and Selection" syntax, name-keyed, inventory order kept
//!   fast-storage:
//!     description: "Fast NVMe-backed NFS"
//!     driver: {type: nfs, target: "nfs-fast:/export/nvme"}
//!     annotations: {tier: fast, region: us-west}
//!     access: all                    # `all` or a list of groups; absent = nobody
//!     ephemeral: all
//!     create: [physics]
//!     status: READY                  # READY | DISABLED | ERROR | PROVISIONING
//!     default: false
//!     reclaimPolicy: Delete          # Delete | Retain | Recycle
//!     zones: [zone-a]                # reachability; absent = every zone
//!     segment: rack-1
//!     maxVolumeSize: 10TiB
//!     freeSpace: 2TiB
//!     volumeModes: [Filesystem]
//! volumes:
//!   - {name: my-dataset, provisioner: fast-storage, size: 100GiB, accessModes: [RWX]}
//! projects:
//!   physics:
//!     zones: [{zone: zone-a, priority: 1, limits: {instances: 10, memory: 1TiB}}]
//! zones:
//!   zone-a:
//!     tags: ["gpu:a100", ssd]
//!     placementPolicy: BINPACK       # DEFAULT | BINPACK | SPREAD | SPREAD_MEMORY
//!     priority: 1
//!     hosts:
//!       - {name: node-1, capacity: {cpu: 64, memory: 512GiB}}
//! ```
//! A file holding only Kubernetes documents is an inventory too; its cluster is named after the
//! file. [`parse_inventory`] is the entry point; reading files is left to the caller
//! (`format::files`).

mod assemble;
mod common;
mod doc;
mod kubernetes;
mod projects;
mod provisioners;
mod volumes;
mod zones;

pub use common::{cost as price, is_subject_token};
pub use doc::TOP_LEVEL_KEYS as INVENTORY_KEYS;

use sha2::{Digest, Sha256};

use crate::docs::{Loaded, load_docs};
use crate::kube::notice;
use crate::yaml::{Ctx, Diagnostics, Span};
use fedvol_common::model::Inventory;
use kubernetes::{KubeItems, Role, read_documents};

/// One file named by `include:`, as read by the caller.
#[derive(Debug, Clone)]
pub struct IncludedFile {
    /// The name to report it under (the resolved path).
    pub label: String,
    /// Its text.
    pub text: String,
}

/// Turns a file stem into a cluster name: characters other than letters, digits, `-` and `_`
/// become `-`; an empty result becomes `cluster`.
pub fn cluster_name_from_stem(stem: &str) -> String {
    let s: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches('-').to_string();
    if s.is_empty() { "cluster".to_string() } else { s }
}

/// Parses an inventory whose main file is `label` with `text`.
///
/// - `fallback_cluster` names the cluster when the file has no fedvol document (a file of
///   Kubernetes documents only); pass the sanitised file stem ([`cluster_name_from_stem`]).
/// - `read_include` reads one `include:` path as written; its error text is reported at the
///   `include:` entry.
///
/// Returns the inventory and notices (skipped documents, unenforced topologies), or every
/// error of every file. `Inventory.version` is the first 16 hex digits of the SHA-256 over the
/// bytes of the main file and then each included file, in order.
pub fn parse_inventory(
    label: &str,
    text: &str,
    fallback_cluster: &str,
    read_include: &mut dyn FnMut(&str) -> Result<IncludedFile, String>,
) -> Result<Loaded<Inventory>, Diagnostics> {
    parse_inventory_with(label, text, fallback_cluster, read_include, None)
}

/// [`parse_inventory`], for an inventory whose zones and hosts come from elsewhere when
/// `zones_from` names that source (e.g. `Slurm`): a `zones:` section is then an error naming
/// the source, and references to zones and hosts (project zones, provisioner `zones`, volume
/// `host`) are left for the caller to check against the source's zones.
pub fn parse_inventory_with(
    label: &str,
    text: &str,
    fallback_cluster: &str,
    read_include: &mut dyn FnMut(&str) -> Result<IncludedFile, String>,
    zones_from: Option<&str>,
) -> Result<Loaded<Inventory>, Diagnostics> {
    let mut hasher = Sha256::new();
    hasher.update(text.as_bytes());
    let docs = load_docs(label, text)?;
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    let mut kube = KubeItems::default();
    let mut ctx = Ctx::new(label);
    let fedvol = read_documents(&mut ctx, &docs, Role::Main, &mut notes, &mut kube);
    errors.extend(ctx.into_diagnostics());
    if let Some(doc) = &fedvol {
        for (path, span) in &doc.includes {
            let file = match read_include(path) {
                Ok(f) => f,
                Err(msg) => {
                    errors.push(notice(
                        label,
                        *span,
                        "include",
                        format!("cannot include `{path}`: {msg}"),
                    ));
                    continue;
                }
            };
            hasher.update(file.text.as_bytes());
            match load_docs(&file.label, &file.text) {
                Ok(docs) => {
                    let mut ictx = Ctx::new(file.label.as_str());
                    read_documents(&mut ictx, &docs, Role::Include, &mut notes, &mut kube);
                    errors.extend(ictx.into_diagnostics());
                }
                Err(d) => errors.extend(d.0),
            }
        }
    }
    let digest = hasher.finalize();
    let version: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    if fedvol.is_none() && kube.class_names.is_empty() && kube.volumes.is_empty() && errors.is_empty() {
        let why = if kube.claims > 0 {
            "it holds PersistentVolumeClaims only: load it as a workflow"
        } else {
            "it has no inventory document (`cluster:`) and no StorageClass or PersistentVolume"
        };
        errors.push(notice(
            label,
            Span { line: 1, col: 1 },
            "",
            format!("not a cluster inventory: {why}"),
        ));
    }
    let cluster = match fedvol.as_ref().and_then(|d| d.cluster.clone()) {
        Some((c, _)) => c,
        None => cluster_name_from_stem(fallback_cluster),
    };
    let inventory = assemble::assemble(
        label,
        cluster,
        fedvol.unwrap_or_default(),
        kube,
        version,
        zones_from,
        &mut errors,
        &mut notes,
    );
    sort_by_position(label, &mut errors);
    sort_by_position(label, &mut notes);
    if errors.is_empty() {
        Ok(Loaded {
            value: inventory,
            notices: notes,
        })
    } else {
        Err(Diagnostics(errors))
    }
}

#[cfg(test)]
mod fuzzball_tests;
#[cfg(test)]
mod tests;

/// Orders diagnostics by file (in order of first appearance: the main file, then includes),
/// then line and column, so that users read them top to bottom.
fn sort_by_position(main: &str, diags: &mut [crate::yaml::Diagnostic]) {
    let mut files: Vec<String> = vec![main.to_string()];
    for d in diags.iter() {
        if !files.contains(&d.file) {
            files.push(d.file.clone());
        }
    }
    diags.sort_by_key(|d| (files.iter().position(|f| *f == d.file), d.line, d.col));
}
