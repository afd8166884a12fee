//! The example cluster inventories and workflows of `deploy/examples/`, built into the `fedvol`
//! binary, so that `fedvol dev` and `fedvol demo` work from any directory once the binaries are
//! installed (no clone needed). [`write`] puts them in a directory (the dev run's state
//! directory) where the agents read them and the user can submit them by absolute path.
//!
//! The texts are the repository's files as they are (`include_str!`), so the built-in examples
//! and `deploy/examples/` never differ.

use std::path::{Path, PathBuf};

/// The cluster inventories, with the paths they are written under (relative to the examples
/// directory). `cluster-c.yaml` includes `k8s/storage.yaml` by a path relative to itself.
pub const CLUSTERS: &[(&str, &str)] = &[
    (
        "clusters/cluster-a.yaml",
        include_str!("../../../deploy/examples/clusters/cluster-a.yaml"),
    ),
    (
        "clusters/cluster-b.yaml",
        include_str!("../../../deploy/examples/clusters/cluster-b.yaml"),
    ),
    (
        "clusters/cluster-c.yaml",
        include_str!("../../../deploy/examples/clusters/cluster-c.yaml"),
    ),
    (
        "clusters/k8s/storage.yaml",
        include_str!("../../../deploy/examples/clusters/k8s/storage.yaml"),
    ),
];

/// The example workflows `fedvol demo` submits (in name order) and `fedvol dev` suggests.
pub const WORKFLOWS: &[(&str, &str)] = &[
    (
        "workflows/claim-gold-selector.yaml",
        include_str!("../../../deploy/examples/workflows/claim-gold-selector.yaml"),
    ),
    (
        "workflows/claim-standard.yaml",
        include_str!("../../../deploy/examples/workflows/claim-standard.yaml"),
    ),
    (
        "workflows/gpu-soft-constraints.yaml",
        include_str!("../../../deploy/examples/workflows/gpu-soft-constraints.yaml"),
    ),
    (
        "workflows/mpi-spread.yaml",
        include_str!("../../../deploy/examples/workflows/mpi-spread.yaml"),
    ),
    (
        "workflows/named-project-data.yaml",
        include_str!("../../../deploy/examples/workflows/named-project-data.yaml"),
    ),
    (
        "workflows/scratch-fast.yaml",
        include_str!("../../../deploy/examples/workflows/scratch-fast.yaml"),
    ),
    (
        "workflows/work-archive.yaml",
        include_str!("../../../deploy/examples/workflows/work-archive.yaml"),
    ),
];

/// The workflow for the local Slurm of `fedvol dev --slurm`.
pub const SLURM_WORKFLOW: (&str, &str) = (
    "slurm/workflow.yaml",
    include_str!("../../../deploy/examples/slurm/workflow.yaml"),
);

/// Where [`write`] put the examples: absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The cluster inventories' directory (`<dir>/clusters`).
    pub clusters: PathBuf,
    /// The workflows' directory (`<dir>/workflows`).
    pub workflows: PathBuf,
    /// The Slurm workflow (`<dir>/slurm/workflow.yaml`).
    pub slurm_workflow: PathBuf,
}

/// Writes every built-in example under `dir` (created if missing), as `deploy/examples/` lays
/// them out.
///
/// Errors: a directory or file that cannot be written.
pub fn write(dir: &Path) -> std::io::Result<Written> {
    let dir = std::path::absolute(dir)?;
    for (rel, text) in CLUSTERS.iter().chain(WORKFLOWS).chain([&SLURM_WORKFLOW]) {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, text)?;
    }
    Ok(Written {
        clusters: dir.join("clusters"),
        workflows: dir.join("workflows"),
        slurm_workflow: dir.join(SLURM_WORKFLOW.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `deploy/examples/{clusters,workflows}` is built in: an example added there
    /// and not here fails this test.
    #[test]
    fn every_example_of_the_repository_is_built_in() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples");
        let mut on_disk = Vec::new();
        for sub in ["clusters", "clusters/k8s", "workflows"] {
            for e in std::fs::read_dir(root.join(sub)).unwrap() {
                let p = e.unwrap().path();
                if p.is_file() {
                    on_disk.push(format!("{sub}/{}", p.file_name().unwrap().to_string_lossy()));
                }
            }
        }
        on_disk.sort();
        let mut built: Vec<String> = CLUSTERS.iter().chain(WORKFLOWS).map(|(p, _)| p.to_string()).collect();
        built.sort();
        assert_eq!(on_disk, built);
    }

    #[test]
    fn written_examples_are_the_repository_files() {
        let d = tempfile::tempdir().unwrap();
        let w = write(d.path()).unwrap();
        assert!(w.clusters.is_absolute());
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples");
        for (rel, _) in CLUSTERS.iter().chain(WORKFLOWS) {
            assert_eq!(
                std::fs::read(d.path().join(rel)).unwrap(),
                std::fs::read(root.join(rel)).unwrap(),
                "{rel}"
            );
        }
    }
}
