//! Tests of file loading against the real Kubernetes manifests in `shared/real-inputs/k8s`.

use std::path::{Path, PathBuf};

use super::*;
use crate::format::kube::{DocKind, kind_of};
use crate::model::{ClaimClass, VolumeSource, WorkflowFormat};
use crate::yaml::{Limits, load_documents};

fn real_k8s_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/real-inputs/k8s")).to_path_buf()
}

fn real_k8s_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(real_k8s_dir())
        .expect("real-inputs/k8s is readable")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    files
}

/// Counts the kinds in a file independently of the loader (plain YAML scan).
fn kinds_in(path: &Path) -> (usize, usize, usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let docs = load_documents(&text, Limits::default()).unwrap();
    let (mut sc, mut pv, mut pvc, mut other) = (0, 0, 0, 0);
    for d in &docs {
        match kind_of(d).map(|(_, k)| DocKind::of(&k)) {
            Some(DocKind::StorageClass) => sc += 1,
            Some(DocKind::PersistentVolume) => pv += 1,
            Some(DocKind::PersistentVolumeClaim) => pvc += 1,
            Some(_) => other += 1,
            None => {}
        }
    }
    (sc, pv, pvc, other)
}

#[test]
fn every_real_manifest_loads_by_its_kinds() {
    let files = real_k8s_files();
    assert!(files.len() >= 40, "expected the real manifests, found {}", files.len());
    let (mut inventories, mut workflows) = (0, 0);
    for path in &files {
        let (sc, pv, pvc, other) = kinds_in(path);
        let text = std::fs::read_to_string(path).unwrap();
        let kind = classify(&path.display().to_string(), &text).unwrap();
        let expected = if pvc > 0 { FileKind::KubernetesClaims } else { FileKind::KubernetesInventory };
        assert_eq!(kind, expected, "{}", path.display());
        if sc + pv > 0 {
            let inv = load_inventory(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(inv.value.provisioners.len(), sc, "{}", path.display());
            assert_eq!(inv.value.volumes.len(), pv, "{}", path.display());
            assert!(inv.value.provisioners.iter().all(|p| p.from_storage_class));
            assert_eq!(inv.value.version.len(), 16);
            // every skipped document (claims and other kinds) gives exactly one notice
            let skipped = inv.notices.iter().filter(|n| n.message.starts_with("skipped")).count();
            assert_eq!(skipped, pvc + other, "{}: {:?}", path.display(), inv.notices);
            inventories += 1;
        } else {
            let err = load_inventory(path).unwrap_err();
            assert!(err.to_string().contains("load it as a workflow"), "{err}");
        }
        if pvc > 0 {
            let wf = load_workflow(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(wf.value.format, WorkflowFormat::KubernetesClaim);
            assert_eq!(wf.value.volumes.len(), pvc);
            assert!(wf.value.jobs.is_empty());
            assert_eq!(wf.notices.len(), sc + pv + other, "{}: {:?}", path.display(), wf.notices);
            for v in &wf.value.volumes {
                let VolumeSource::Claim(c) = &v.source else { panic!("claim expected") };
                assert_eq!(v.key, c.name);
                assert_eq!(v.access_modes, c.access_modes);
                assert!(c.request.0 > 0);
            }
            if pvc == 1 {
                assert_eq!(wf.value.name, wf.value.volumes[0].key);
            }
            workflows += 1;
        } else {
            let err = load_workflow(path).unwrap_err();
            assert!(err.to_string().contains("no PersistentVolumeClaim"), "{err}");
        }
    }
    assert!(inventories >= 20 && workflows >= 20, "{inventories} inventories, {workflows} workflows");
}

fn real(name: &str) -> PathBuf {
    real_k8s_dir().join(name)
}

#[test]
fn skipped_kinds_are_named_with_file_and_line() {
    let inv = load_inventory(&real("local-path-provisioner__deploy__local-path-storage.yaml")).unwrap();
    assert_eq!(inv.value.provisioners.len(), 1);
    assert_eq!(inv.value.provisioners[0].name, "local-path");
    let kinds: Vec<&str> = ["Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "Deployment", "ConfigMap"].to_vec();
    assert_eq!(inv.notices.len(), kinds.len());
    for (n, k) in inv.notices.iter().zip(kinds) {
        assert!(n.message.contains(k), "{n}");
        assert!(n.file.ends_with("local-path-storage.yaml"));
    }
    assert_eq!(inv.notices[0].line, 1);
    assert_eq!(inv.notices[1].line, 7);
    assert!(inv.notices[6].to_string().contains("Deployment `local-path-provisioner` (apps/v1)"), "{}", inv.notices[6]);
    // cluster named after the file stem, sanitised to a subject token
    assert_eq!(inv.value.cluster, "local-path-provisioner__deploy__local-path-storage");
}

#[test]
fn claim_workflows_from_real_files() {
    let wf = load_workflow(&real("aws-ebs-csi-driver__examples__kubernetes__static-provisioning__manifests__claim.yaml")).unwrap().value;
    assert_eq!(wf.name, "ebs-claim");
    let VolumeSource::Claim(c) = &wf.volumes[0].source else { panic!() };
    assert_eq!(c.class, ClaimClass::Empty);
    assert_eq!(c.volume_name.as_deref(), Some("test-pv"));
    assert_eq!(c.request.0, 5 << 30);
    assert_eq!(c.namespace, "default");
    assert_eq!(wf.volumes[0].line, 15);

    let wf = load_workflow(&real("kubernetes-examples__AI__model-serving-tensorflow__pvc.yaml")).unwrap().value;
    let VolumeSource::Claim(c) = &wf.volumes[0].source else { panic!() };
    assert_eq!(c.class, ClaimClass::Unset);

    let wf = load_workflow(&real("csi-driver-host-path__examples__csi-restore.yaml")).unwrap().value;
    let VolumeSource::Claim(c) = &wf.volumes[0].source else { panic!() };
    assert_eq!(c.data_source.as_deref(), Some("VolumeSnapshot/new-snapshot-demo"));
    assert_eq!(c.class, ClaimClass::Named("csi-hostpath-sc".into()));

    // a claim beside a Pod: the Pod is skipped with a notice
    let wf = load_workflow(&real("gcp-compute-persistent-disk-csi-driver__examples__kubernetes__demo-pod.yaml")).unwrap();
    assert_eq!(wf.value.name, "podpvc");
    assert_eq!(wf.notices.len(), 1);
    assert!(wf.notices[0].message.contains("Pod `web-server`"));
    assert_eq!(wf.notices[0].line, 15);
}
