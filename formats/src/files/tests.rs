//! Tests of file loading: the real Kubernetes manifests and Fuzzfiles of the third-party inputs
//! (`fedvol_testenv::real_inputs`, skipped without them), and one focused test per rule on
//! files written here.

use std::path::{Path, PathBuf};

use super::*;
use crate::kube::{DocKind, kind_of};
use crate::yaml::{Limits, load_documents};
use fedvol_common::model::{ClaimClass, VolumeSource, WorkflowFormat};

/// The real Kubernetes manifests, sorted, or `None` (the test skipped) without the inputs.
fn real_k8s_files() -> Option<Vec<PathBuf>> {
    let dir = fedvol_testenv::real_inputs()?.join("k8s");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    Some(files)
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
    let Some(files) = real_k8s_files() else { return };
    assert!(files.len() >= 40, "expected the real manifests, found {}", files.len());
    let (mut inventories, mut workflows) = (0, 0);
    for path in &files {
        let (sc, pv, pvc, other) = kinds_in(path);
        let text = std::fs::read_to_string(path).unwrap();
        let kind = classify(&path.display().to_string(), &text).unwrap();
        let expected = if pvc > 0 {
            FileKind::KubernetesClaims
        } else {
            FileKind::KubernetesInventory
        };
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
            assert_eq!(
                wf.notices.len(),
                sc + pv + other,
                "{}: {:?}",
                path.display(),
                wf.notices
            );
            for v in &wf.value.volumes {
                let VolumeSource::Claim(c) = &v.source else {
                    panic!("claim expected")
                };
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
    assert!(
        inventories >= 20 && workflows >= 20,
        "{inventories} inventories, {workflows} workflows"
    );
}

/// A manifest as installers ship them: a provisioner's objects around its StorageClass.
const INSTALLER: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: store-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: store-sa
  namespace: store-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: store-role, namespace: store-system}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: store-cluster-role}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: store-bind, namespace: store-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: store-cluster-bind}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: store-provisioner
  namespace: store-system
spec: {replicas: 1}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: node-local
provisioner: example.com/node-local
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: store-config
  namespace: store-system
data: {}
";

#[test]
fn skipped_kinds_are_named_with_file_and_line() {
    let dir = scratch_dir("installer");
    let path = dir.join("store-installer.yaml");
    std::fs::write(&path, INSTALLER).unwrap();
    let inv = load_inventory(&path).unwrap();
    assert_eq!(inv.value.provisioners.len(), 1);
    assert_eq!(inv.value.provisioners[0].name, "node-local");
    let kinds: Vec<&str> = [
        "Namespace",
        "ServiceAccount",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "Deployment",
        "ConfigMap",
    ]
    .to_vec();
    assert_eq!(inv.notices.len(), kinds.len());
    for (n, k) in inv.notices.iter().zip(kinds) {
        assert!(n.message.contains(k), "{n}");
        assert!(n.file.ends_with("store-installer.yaml"));
    }
    assert_eq!(inv.notices[0].line, 1);
    assert_eq!(inv.notices[1].line, 6);
    assert!(
        inv.notices[6]
            .to_string()
            .contains("Deployment `store-provisioner` (apps/v1)"),
        "{}",
        inv.notices[6]
    );
    // cluster named after the file stem, sanitised to a subject token
    assert_eq!(inv.value.cluster, "store-installer");
}

#[test]
fn claim_workflows_from_files() {
    let dir = scratch_dir("claims");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // `storageClassName: ""` asks for no class (static binding), unlike an absent one.
    let wf = load_workflow(&write(
        "static.yaml",
        "# a claim bound by hand\n\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data-claim\nspec:\n  storageClassName: \"\"\n  volumeName: data-pv\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 5Gi\n",
    ))
    .unwrap()
    .value;
    assert_eq!(wf.name, "data-claim");
    let VolumeSource::Claim(c) = &wf.volumes[0].source else {
        panic!()
    };
    assert_eq!(c.class, ClaimClass::Empty);
    assert_eq!(c.volume_name.as_deref(), Some("data-pv"));
    assert_eq!(c.request.0, 5 << 30);
    assert_eq!(c.namespace, "default");
    assert_eq!(wf.volumes[0].line, 3);

    let wf = load_workflow(&write(
        "unset.yaml",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: models}\nspec:\n  accessModes: [ReadOnlyMany]\n  resources: {requests: {storage: 1Gi}}\n",
    ))
    .unwrap()
    .value;
    let VolumeSource::Claim(c) = &wf.volumes[0].source else {
        panic!()
    };
    assert_eq!(c.class, ClaimClass::Unset);

    let wf = load_workflow(&write(
        "restore.yaml",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: restored, namespace: lab}\nspec:\n  storageClassName: fast-sc\n  dataSource: {name: nightly, kind: VolumeSnapshot, apiGroup: snapshot.storage.k8s.io}\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
    ))
    .unwrap()
    .value;
    let VolumeSource::Claim(c) = &wf.volumes[0].source else {
        panic!()
    };
    assert_eq!(c.data_source.as_deref(), Some("VolumeSnapshot/nightly"));
    assert_eq!(c.class, ClaimClass::Named("fast-sc".into()));
    assert_eq!(c.namespace, "lab");

    // a claim beside a Pod: the Pod is skipped with a notice
    let wf = load_workflow(&write(
        "with-pod.yaml",
        "kind: PersistentVolumeClaim\napiVersion: v1\nmetadata: {name: web-data}\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: disk\n  resources: {requests: {storage: 200Gi}}\n\n---\n\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  volumes:\n    - {name: d, persistentVolumeClaim: {claimName: web-data}}\n",
    ))
    .unwrap();
    assert_eq!(wf.value.name, "web-data");
    assert_eq!(wf.notices.len(), 1);
    assert!(wf.notices[0].message.contains("Pod `web`"), "{}", wf.notices[0]);
    assert_eq!(wf.notices[0].line, 11);
}

fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedvol-files-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn classification() {
    let c = |t: &str| classify("f.yaml", t);
    assert_eq!(c("cluster: a\n").unwrap(), FileKind::Inventory);
    assert_eq!(c("zones: {}\n").unwrap(), FileKind::Inventory);
    assert_eq!(
        c("provisioners: {}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\n").unwrap(),
        FileKind::Inventory
    );
    assert_eq!(c("version: v1\njobs: {}\n").unwrap(), FileKind::Workflow);
    assert_eq!(c("{\"version\": \"v4\"}").unwrap(), FileKind::Workflow);
    assert_eq!(
        c("kind: StorageClass\n---\nkind: Namespace\n").unwrap(),
        FileKind::KubernetesInventory
    );
    assert_eq!(
        c("kind: PersistentVolume\n---\nkind: PersistentVolumeClaim\n").unwrap(),
        FileKind::KubernetesClaims
    );
    assert_eq!(
        c("apiVersion: v1\nkind: List\nitems:\n- kind: PersistentVolumeClaim\n").unwrap(),
        FileKind::KubernetesClaims
    );
    assert_eq!(
        c("version: v1\njobs:\n  a:\n    image: {{ .Values.image }}\n").unwrap(),
        FileKind::Template
    );
    assert_eq!(
        c("volumes: {{ toYaml .Values.volumes }}\n  x: [\n").unwrap(),
        FileKind::Template
    );
    let e = c("kind: Deployment\n---\nkind: Service\n").unwrap_err();
    assert!(e.0[0].message.contains("only Deployment, Service"), "{e}");
    let e = c("volumes: {}\n").unwrap_err();
    assert!(e.0[0].message.contains("cannot tell what this document is"), "{e}");
    assert!(e.0[0].hint.as_deref().unwrap().contains("cluster"));
    assert!(c("").unwrap_err().0[0].message.contains("no document"));
    let e = c("a: [1, 2\n").unwrap_err();
    assert!(e.0[0].message.starts_with("invalid YAML"), "{e}");
}

#[test]
fn real_fuzzfiles_classify_as_workflows_or_templates() {
    let Some(inputs) = fedvol_testenv::real_inputs() else {
        return;
    };
    let dir = inputs.join("fuzzfiles");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let want = if name.ends_with("__template.yaml") {
            FileKind::Template
        } else {
            FileKind::Workflow
        };
        assert_eq!(classify(&name, &text).unwrap(), want, "{name}");
        if want == FileKind::Template {
            let e = load_workflow(&path).unwrap_err();
            assert!(e.0[0].message.contains("unrendered template"), "{e}");
            assert!(e.0[0].hint.is_some());
        } else {
            // Fuzzfiles are handed to the Fuzzfile parser unchanged
            let via_files = parse_workflow_str(&name, "wf", &text).map(|l| l.value);
            assert_eq!(via_files, crate::fuzzfile::parse_fuzzfile(&name, "wf", &text));
        }
        n += 1;
    }
    assert!(n >= 60);
}

#[test]
fn template_error_points_at_the_action() {
    let e = parse_inventory_str("inv.yaml", "cluster: c\nprovisioners:\n  p: {{ .Values.p }}\n", None).unwrap_err();
    assert_eq!((e.0[0].line, e.0[0].col), (3, 6));
    assert!(e.0[0].message.contains("unrendered template"));
}

#[test]
fn claims_files_as_workflows() {
    let claim = |name: &str| {
        format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec: {{accessModes: [ReadWriteMany], resources: {{requests: {{storage: 1Gi}}}}}}\n"
        )
    };
    let text = format!(
        "{}---\n{}---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: s}}\nprovisioner: a.io/b\n",
        claim("a"),
        claim("b")
    );
    let wf = parse_workflow_str("pair.yaml", "pair", &text).unwrap();
    assert_eq!(wf.value.name, "pair", "several claims: named after the file");
    let keys: Vec<&str> = wf.value.volumes.iter().map(|v| v.key.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(wf.value.volumes[1].line, 6);
    assert_eq!(wf.notices.len(), 1);
    assert!(wf.notices[0].message.contains("StorageClass `s`"));
    assert_eq!(wf.notices[0].line, 11);

    let e = parse_workflow_str("dup.yaml", "dup", &format!("{}---\n{}", claim("a"), claim("a"))).unwrap_err();
    assert!(e.0[0].message.contains("already defined at line 1"), "{e}");
    assert_eq!(e.0[0].line, 6);

    let e = parse_workflow_str("bad.yaml", "bad", &format!("{}---\nversionx: 1\n", claim("a"))).unwrap_err();
    assert!(e.0[0].message.contains("no `kind`"), "{e}");

    let e = parse_workflow_str("inv.yaml", "inv", "cluster: c\n").unwrap_err();
    assert!(e.0[0].message.contains("cluster inventory, not a workflow"));
    let e = parse_workflow_str(
        "sc.yaml",
        "sc",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: s}\nprovisioner: a.io/b\n",
    )
    .unwrap_err();
    assert!(e.0[0].message.contains("no PersistentVolumeClaim"));
    // every error of every claim is reported
    let e = parse_workflow_str("two.yaml", "two", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: a}\nspec: {accessModes: [RWO], resources: {requests: {storage: 1Gi}}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: b}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1GB}}}\n").unwrap_err();
    assert_eq!(e.0.len(), 2, "{e}");
}

#[test]
fn inventory_file_is_not_a_workflow_and_vice_versa() {
    let e = parse_inventory_str("wf.yaml", "version: v1\njobs: {}\n", None).unwrap_err();
    assert!(e.0[0].message.contains("is a workflow"), "{e}");
}

#[test]
fn unreadable_and_oversized_files_are_clear_errors() {
    let missing = Path::new("/nonexistent/fedvol/inventory.yaml");
    let e = load_inventory(missing).unwrap_err();
    assert_eq!(e.0[0].file, "/nonexistent/fedvol/inventory.yaml");
    assert!(
        e.0[0].message.contains("cannot read file") && e.0[0].message.contains("No such file"),
        "{e}"
    );
    assert!(
        load_workflow(missing)
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/fedvol/inventory.yaml")
    );

    let dir = scratch_dir("limits");
    let big = dir.join("big.yaml");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(max_file_bytes() as u64 + 1).unwrap();
    let e = load_inventory(&big).unwrap_err();
    assert!(e.0[0].message.contains("larger than the limit of 64 MiB"), "{e}");
    let bin = dir.join("bin.yaml");
    std::fs::write(&bin, b"cluster: c\n\xff\xfe").unwrap();
    let e = load_inventory(&bin).unwrap_err();
    assert!(e.0[0].message.contains("not UTF-8"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn load_inventory_resolves_includes_next_to_the_file() {
    let dir = scratch_dir("include");
    std::fs::create_dir_all(dir.join("k8s")).unwrap();
    std::fs::write(
        dir.join("k8s/classes.yaml"),
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: gold\n  annotations: {storageclass.kubernetes.io/is-default-class: \"true\"}\nprovisioner: a.io/b\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("cluster.yaml"),
        "cluster: here\ninclude: [k8s/classes.yaml]\nzones:\n  z: {storage: [gold]}\n",
    )
    .unwrap();
    let inv = load_inventory(&dir.join("cluster.yaml")).unwrap().value;
    assert_eq!(inv.provisioners[0].name, "gold");
    assert!(inv.provisioners[0].default);
    assert!(inv.provisioners[0].origin.file.ends_with("k8s/classes.yaml"));
    // changing an included file changes the version
    let before = inv.version.clone();
    std::fs::write(
        dir.join("k8s/classes.yaml"),
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: gold}\nprovisioner: a.io/b\n",
    )
    .unwrap();
    let inv = load_inventory(&dir.join("cluster.yaml")).unwrap().value;
    assert_ne!(inv.version, before);
    assert!(!inv.provisioners[0].default);
    std::fs::remove_dir_all(&dir).unwrap();
}

mod no_panics {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = "cluster: c\ninclude: []\nprovisioners:\n  p:\n    driver: {type: nfs, target: \"s:/x\"}\n    access: [a]\n    zones: [z]\nvolumes:\n  - {name: v, provisioner: p, size: 1Gi, host: h, claimRef: {name: c}}\nprojects:\n  pr: {zones: [{zone: z, limits: {cpu: 1}}]}\nzones:\n  z:\n    hosts: [{name: h, capacity: {cpu: 1, memory: 1Gi}}]\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Gt, values: [\"1\"]}]}]}}\n  csi: {driver: d, volumeHandle: h}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, selector: {matchLabels: {a: b}}}\n";

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Truncated and corrupted inputs give errors or values, never a panic.
        #[test]
        fn damaged_inputs_never_panic(cut in 0usize..SAMPLE.len(), at in 0usize..SAMPLE.len(), byte in proptest::sample::select(b"{}[]:,-'\"\n #&*!|>".to_vec())) {
            let mut bytes = SAMPLE.as_bytes()[..cut.max(1)].to_vec();
            let i = at % bytes.len();
            bytes[i] = byte;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let _ = classify("f.yaml", &text);
            let _ = parse_inventory_str("f.yaml", &text, None);
            let _ = parse_workflow_str("f.yaml", "f", &text);
        }

        /// Arbitrary text never panics either.
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse_inventory_str("f.yaml", &text, None);
            let _ = parse_workflow_str("f.yaml", "f", &text);
        }
    }
}

#[test]
fn workflows_over_the_limits_are_refused_at_the_item() {
    let mut text = String::from("version: v4\nvolumes:\n");
    for i in 0..=fedvol_common::limits::MAX_WORKFLOW_VOLUMES {
        text.push_str(&format!("  v{i}: {{size: 1GiB}}\n"));
    }
    let e = parse_workflow_str("big.yaml", "big", &text).unwrap_err();
    let line = 3 + fedvol_common::limits::MAX_WORKFLOW_VOLUMES;
    assert!(
        e.to_string().contains(&format!(
            "big.yaml:{line}:1: volumes: 1001 volumes, more than the limit of 1000"
        )),
        "{e}"
    );
    let long = "j".repeat(254);
    let text = format!("version: v4\njobs:\n  {long}:\n    image: {{uri: docker://x}}\n");
    let e = parse_workflow_str("w.yaml", "w", &text).unwrap_err();
    assert!(e.to_string().contains("w.yaml:3:1: jobs.jjjj"), "{e}");
    assert!(
        e.to_string()
            .contains("job name of 254 bytes is longer than the limit of 253"),
        "{e}"
    );
}
