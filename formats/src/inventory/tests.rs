//! Inventory parsing: the fedvol syntax, Kubernetes documents and includes, references.

use sha2::{Digest, Sha256};

use crate::files::{Loaded, parse_inventory_str};
use crate::yaml::Diagnostics;
use fedvol_common::model::{
    AccessMode, AccessModes, AccessPolicy, Driver, Inventory, Operation, PlacementPolicy, PowerState,
    ProvisionerStatus, ReclaimPolicy, Tag, VolumeMode, VolumePhase,
};

const FULL: &str = r#"cluster: cluster-a
provisioners:
  fast-storage:
    description: "Fast NVMe-backed NFS"
    driver:
      type: nfs
      target: "nfs-fast:/export/nvme"
    annotations:
      tier: fast
      region: us-west
    access: all
    ephemeral: all
  work-storage:
    driver:
      type: nfs
      target: "nfs-server:/export/work"
      mount: /mnt/work
    annotations:
      purpose: work
    ephemeral: all
  archive-storage:
    driver:
      type: nfs
      target: "nfs-server:/export/archive"
    annotations:
      purpose: archive
    access: all
    create: [archivists, admins]
    reclaimPolicy: Retain
    zones: [east]
  fast-tier:
    driver:
      type: hostpath
      path: /mnt/nvme
      local: true
    annotations:
      tier: fast
    ephemeral: all
    status: disabled
    volumeModes: [Filesystem, Block]
    maxVolumeSize: 2TiB
    freeSpace: 1.5TB
  standard-tier:
    driver:
      type: nfs
      target: "nfs-server:/export/standard"
    annotations:
      tier: standard
    access: all
    ephemeral: all
    default: true
    segment: rack-1
volumes:
  - name: my-archive
    provisioner: archive-storage
    size: 2TiB
  - name: scratch-1
    provisioner: fast-tier
    size: 100Gi
    host: east-1
    labels: {disk: nvme}
  - name: my-archive
    provisioner: work-storage
    accessModes: [RWO, ReadOnlyMany]
    volumeMode: Block
    phase: bound
    claimRef: {name: data, namespace: ml, uid: u-1}
    reclaimPolicy: Delete
projects:
  physics:
    zones:
      - zone: east
        priority: 1
        limits: {instances: 10, memory: 1TiB, cpu: 256, storage: 10TiB}
        usage: {instances: 2, memory: 64GiB, cpu: 16, storage: 1TB}
      - zone: west
zones:
  east:
    tags: ["gpu:a100", ssd]
    placementPolicy: binpack
    priority: 1
    segment: rack-1
    images: ["docker://nvcr.io/"]
    flavors: [{name: large, cpu: 32, memory: 128GiB}]
    storage: [fast-tier]
    hosts:
      - name: east-1
        tags: [nvme]
        capacity: {cpu: 64, memory: 512GiB, devices: {nvidia.com/gpu: 4}}
        allocated: {cpu: 8, memory: 32GiB, instances: 1}
        networks: [ib0]
      - name: east-2
        power: OFF
        capacity: {cpu: 64, memory: 512GiB, instances: 8}
  west:
    placementPolicy: SPREAD_MEMORY
    priority: 2
    hostCostPerHour: 0.75
"#;

fn parse(text: &str) -> Result<Loaded<Inventory>, Diagnostics> {
    parse_inventory_str("inv.yaml", text, None)
}

fn errors(text: &str) -> Vec<String> {
    parse(text).unwrap_err().0.iter().map(|d| d.to_string()).collect()
}

/// Kubernetes manifests and Fuzzfiles written for the include tests, in a fresh directory:
/// `k8s/class.yaml` (a zoned StorageClass at line 3), `k8s/pv.yaml` (a PersistentVolume pinned to
/// a zone), `k8s/mixed.yaml` (a StorageClass, a claim and a Deployment), `fuzzfiles/wf.yaml` (a
/// workflow) and `fuzzfiles/t__template.yaml` (a template).
fn include_fixtures() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "k8s/class.yaml",
        "# a zoned class\n\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: block-sc\nprovisioner: block.csi.example.com\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies:\n- matchLabelExpressions:\n  - key: topology.kubernetes.io/zone\n    values: [zone-b]\n",
    );
    write(
        "k8s/pv.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pinned-pv\nspec:\n  accessModes: [ReadWriteOnce]\n  capacity: {storage: 5Gi}\n  csi: {driver: block.csi.example.com, volumeHandle: vol-1}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n        - matchExpressions:\n            - {key: topology.kubernetes.io/zone, operator: In, values: [zone-b]}\n",
    );
    write(
        "k8s/mixed.yaml",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: lvm-sc}\nprovisioner: lvm.csi.example.com\n---\nkind: PersistentVolumeClaim\napiVersion: v1\nmetadata: {name: c}\nspec: {storageClassName: lvm-sc, accessModes: [ReadWriteOnce], resources: {requests: {storage: 4Gi}}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bench}\nspec: {replicas: 1}\n",
    );
    write(
        "fuzzfiles/wf.yaml",
        "version: v1\njobs:\n  a: {image: {uri: docker://a}}\n",
    );
    write(
        "fuzzfiles/t__template.yaml",
        "version: v1\njobs:\n  a: {image: {uri: {{ .Image }}}}\n",
    );
    d
}

#[test]
fn full_inventory_in_seed_syntax() {
    let loaded = parse(FULL).unwrap();
    assert!(loaded.notices.is_empty(), "{:?}", loaded.notices);
    let inv = loaded.value;
    assert_eq!(inv.cluster, "cluster-a");
    let names: Vec<&str> = inv.provisioners.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fast-storage",
            "work-storage",
            "archive-storage",
            "fast-tier",
            "standard-tier"
        ]
    );

    let fast = &inv.provisioners[0];
    assert_eq!(fast.description.as_deref(), Some("Fast NVMe-backed NFS"));
    assert_eq!(
        fast.driver,
        Driver::Nfs {
            target: "nfs-fast:/export/nvme".into(),
            mount: None,
            version: None,
            options: None,
            sub_path: None,
        }
    );
    assert_eq!(fast.annotations.get("tier").map(String::as_str), Some("fast"));
    assert_eq!(fast.annotations.get("region").map(String::as_str), Some("us-west"));
    assert_eq!(fast.permissions.access, AccessPolicy::All);
    assert_eq!(fast.permissions.ephemeral, AccessPolicy::All);
    assert_eq!(fast.permissions.create, AccessPolicy::Deny, "absent policy = nobody");
    assert!(!fast.permissions.allows(Operation::Create, "anyone", &["anyone".into()]));
    assert_eq!(fast.status, ProvisionerStatus::Ready);
    assert_eq!(fast.reclaim_policy, ReclaimPolicy::Delete);
    assert_eq!(fast.volume_modes, vec![VolumeMode::Filesystem]);
    assert!(!fast.default && !fast.from_storage_class);
    assert_eq!((fast.origin.file.as_str(), fast.origin.line), ("inv.yaml", 3));

    let work = &inv.provisioners[1];
    assert_eq!(
        work.driver,
        Driver::Nfs {
            target: "nfs-server:/export/work".into(),
            mount: Some("/mnt/work".into()),
            version: None,
            options: None,
            sub_path: None,
        }
    );
    assert_eq!(work.permissions.access, AccessPolicy::Deny);

    let archive = &inv.provisioners[2];
    assert_eq!(
        archive.permissions.create,
        AccessPolicy::Groups(["admins".to_string(), "archivists".to_string()].into())
    );
    assert!(
        archive
            .permissions
            .allows(Operation::Ephemeral, "u", &["admins".into()]),
        "create implies ephemeral"
    );
    assert_eq!(archive.reclaim_policy, ReclaimPolicy::Retain);
    assert_eq!(archive.reachability.zones, vec!["east"]);

    let tier = &inv.provisioners[3];
    assert_eq!(
        tier.driver,
        Driver::Hostpath {
            path: "/mnt/nvme".into(),
            local: true,
            sub_path: None,
        }
    );
    assert_eq!(tier.status, ProvisionerStatus::Disabled);
    assert_eq!(tier.volume_modes, vec![VolumeMode::Filesystem, VolumeMode::Block]);
    assert_eq!(tier.max_volume_size.map(|b| b.0), Some(2 << 40));
    assert_eq!(tier.free_bytes.map(|b| b.0), Some(1_500_000_000_000));

    let std_tier = &inv.provisioners[4];
    assert!(std_tier.default);
    assert_eq!(std_tier.reachability.segment.as_deref(), Some("rack-1"));

    // volumes: names repeat across provisioners; modes default by driver
    assert_eq!(inv.volumes.len(), 3);
    let v0 = &inv.volumes[0];
    assert_eq!(
        (v0.name.as_str(), v0.provisioner.as_deref()),
        ("my-archive", Some("archive-storage"))
    );
    assert_eq!(v0.capacity.0, 2 << 40);
    assert_eq!(
        v0.access_modes,
        AccessModes::of(&[
            AccessMode::ReadWriteOnce,
            AccessMode::ReadOnlyMany,
            AccessMode::ReadWriteMany
        ])
    );
    assert_eq!(v0.reclaim_policy, ReclaimPolicy::Retain);
    assert_eq!(v0.phase, VolumePhase::Available);
    let v1 = &inv.volumes[1];
    assert_eq!(
        v1.access_modes,
        AccessModes::of(&[AccessMode::ReadWriteOnce]),
        "node-local storage is RWO"
    );
    let pinned = v1.node_affinity.as_ref().unwrap();
    assert!(pinned.matches(&[("kubernetes.io/hostname".to_string(), "east-1".to_string())].into()));
    assert!(!pinned.matches(&[("kubernetes.io/hostname".to_string(), "east-2".to_string())].into()));
    let v2 = &inv.volumes[2];
    assert_eq!(
        v2.access_modes,
        AccessModes::of(&[AccessMode::ReadWriteOnce, AccessMode::ReadOnlyMany])
    );
    assert_eq!(
        (v2.volume_mode, v2.phase, v2.reclaim_policy),
        (VolumeMode::Block, VolumePhase::Bound, ReclaimPolicy::Delete)
    );
    let cr = v2.claim_ref.as_ref().unwrap();
    assert_eq!(
        (cr.namespace.as_str(), cr.name.as_str(), cr.uid.as_deref()),
        ("ml", "data", Some("u-1"))
    );
    assert_eq!(v2.capacity.0, 0, "no size = 0 bytes");

    // projects
    let p = &inv.projects[0];
    assert_eq!(p.name, "physics");
    assert_eq!((p.zones[0].zone.as_str(), p.zones[0].priority), ("east", 1));
    assert_eq!(p.zones[0].limits.instances, Some(10));
    assert_eq!(p.zones[0].limits.memory.map(|b| b.0), Some(1 << 40));
    assert_eq!(p.zones[0].usage.storage.0, 1_000_000_000_000);
    assert_eq!((p.zones[1].zone.as_str(), p.zones[1].priority), ("west", 0));
    assert_eq!(p.zones[1].limits.cpu, None);

    // zones and hosts
    let east = &inv.zones[0];
    assert_eq!(
        east.tags,
        vec![Tag::parse("gpu:a100").unwrap(), Tag::parse("ssd").unwrap()]
    );
    assert_eq!((east.placement_policy, east.priority), (PlacementPolicy::Binpack, 1));
    assert_eq!(east.images, vec!["docker://nvcr.io/"]);
    assert_eq!(east.flavors[0].memory.0, 128 << 30);
    assert_eq!(east.storage, vec!["fast-tier"]);
    let h1 = &east.hosts[0];
    assert_eq!(
        (h1.power, h1.capacity.cpu, h1.capacity.instances),
        (PowerState::On, 64, 64)
    );
    assert_eq!(h1.capacity.devices.get("nvidia.com/gpu"), Some(&4));
    assert_eq!(
        (h1.allocated.cpu, h1.allocated.memory.0, h1.allocated.instances),
        (8, 32 << 30, 1)
    );
    assert_eq!(h1.networks, vec!["ib0"]);
    assert_eq!(east.hosts[1].power, PowerState::Off);
    assert_eq!(inv.zones[1].placement_policy, PlacementPolicy::SpreadMemory);
    assert!(inv.zones[1].hosts.is_empty());
    assert_eq!(
        (east.host_cost_per_hour, inv.zones[1].host_cost_per_hour),
        (None, Some(0.75))
    );

    // version: first 16 hex digits of sha256 of the file
    let digest = Sha256::digest(FULL.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    assert_eq!(inv.version, hex);
}

#[test]
fn kubernetes_documents_in_the_same_file_follow_fedvol_provisioners() {
    let text = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: k8s-first\nprovisioner: a.io/b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: junk}\n---\ncluster: c1\nprovisioners:\n  mine:\n    driver: {type: efs, fileSystemId: fs-12345678}\n    access: all\nvolumes:\n  - {name: v, provisioner: k8s-first}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec:\n  storageClassName: no-such-class\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  csi: {driver: d, volumeHandle: h}\n";
    let loaded = parse(text).unwrap();
    let inv = loaded.value;
    let names: Vec<&str> = inv.provisioners.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["mine", "k8s-first"]);
    assert_eq!(
        inv.provisioners[0].driver,
        Driver::Efs {
            file_system_id: "fs-12345678".into(),
            region: None,
            subnet_ids: Vec::new(),
            sub_path: None,
        }
    );
    assert_eq!(inv.volumes.len(), 2);
    assert_eq!(
        inv.volumes[1].provisioner.as_deref(),
        Some("no-such-class"),
        "a PV may name a class without a StorageClass"
    );
    assert_eq!(
        inv.volumes[0].access_modes,
        AccessModes::of(&[AccessMode::ReadWriteOnce]),
        "external storage is RWO by default"
    );
    assert_eq!(loaded.notices.len(), 1);
    assert_eq!(loaded.notices[0].line, 7);
    assert!(loaded.notices[0].message.contains("ConfigMap `junk`"));
}

#[test]
fn includes_join_the_cluster_and_the_version() {
    let dir = include_fixtures();
    let (sc, pv, mixed) = ("k8s/class.yaml", "k8s/pv.yaml", "k8s/mixed.yaml");
    let text = format!(
        "cluster: k\ninclude: [{sc}, {pv}, {mixed}]\nprovisioners:\n  local:\n    driver: {{type: hostpath, path: /data}}\n    access: all\nzones:\n  zone-b:\n    storage: [block-sc]\n"
    );
    let loaded = parse_inventory_str("inv.yaml", &text, Some(dir.path())).unwrap();
    let inv = &loaded.value;
    let names: Vec<&str> = inv.provisioners.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["local", "block-sc", "lvm-sc"]);
    let block = &inv.provisioners[1];
    assert_eq!(block.reachability.zones, vec!["zone-b"]);
    assert!(block.origin.file.ends_with("class.yaml"));
    assert_eq!(block.origin.line, 3);
    let pinned = &inv.volumes[0];
    assert_eq!(pinned.name, "pinned-pv");
    assert_eq!(pinned.provisioner, None);
    assert_eq!(pinned.reclaim_policy, ReclaimPolicy::Retain);
    assert_eq!(
        pinned.node_affinity.as_ref().unwrap().terms[0][0].values,
        vec!["zone-b"]
    );
    // the included file's PVC and Deployment are skipped with notices naming that file
    assert_eq!(loaded.notices.len(), 2, "{:?}", loaded.notices);
    assert!(loaded.notices.iter().all(|n| n.file.ends_with("mixed.yaml")));
    // version covers the main file and every include, in order
    let mut h = Sha256::new();
    h.update(text.as_bytes());
    for p in [sc, pv, mixed] {
        h.update(std::fs::read(dir.path().join(p)).unwrap());
    }
    let hex: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    assert_eq!(inv.version, hex);
}

#[test]
fn include_problems_are_errors_at_the_include_entry() {
    let dir = include_fixtures();
    let e = parse("cluster: k\ninclude: [x.yaml]\n").unwrap_err();
    assert_eq!((e.0[0].line, e.0[0].col), (2, 11));
    assert!(e.0[0].message.contains("inventory's location"), "{e}");
    let e = parse_inventory_str("inv.yaml", "cluster: k\ninclude:\n  - missing.yaml\n", Some(dir.path())).unwrap_err();
    assert_eq!(e.0[0].line, 3);
    assert!(e.0[0].message.contains("cannot include `missing.yaml`"), "{e}");
    assert!(e.0[0].message.contains("No such file"), "{e}");
    // an included file may not be an inventory itself
    let e = parse_inventory_str(
        "inv.yaml",
        "cluster: k\ninclude: [fuzzfiles/wf.yaml]\n",
        Some(dir.path()),
    )
    .unwrap_err();
    assert!(e.0[0].message.contains("Kubernetes manifests only"), "{e}");
    // an included template is refused as such
    let e = parse_inventory_str(
        "inv.yaml",
        "cluster: k\ninclude: [fuzzfiles/t__template.yaml]\n",
        Some(dir.path()),
    )
    .unwrap_err();
    assert!(e.0[0].message.contains("unrendered template"), "{e}");
}

#[test]
fn every_dangling_reference_is_reported_with_its_position() {
    let text = "cluster: c\nprovisioners:\n  p1:\n    driver: {type: hostpath, path: /x}\n    zones: [nowhere]\nvolumes:\n  - {name: v1, provisioner: ghost}\n  - {name: v2, provisioner: p1, host: phantom}\nprojects:\n  science:\n    zones:\n      - zone: z1\n      - zone: atlantis\n      - zone: z1\nzones:\n  z1:\n    storage: [p1, vanished]\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 6, "{errs:#?}");
    let expect = [
        "inv.yaml:5:13: provisioners.p1.zones: provisioner `p1` is reachable from zone `nowhere`, which is not defined",
        "inv.yaml:7:29: volumes.provisioner: volume `v1` names provisioner `ghost`, which is not defined",
        "inv.yaml:8:39: volumes.host: volume `v2` is pinned to host `phantom`, which no zone lists",
        "inv.yaml:13:15: projects.science.zones: project `science` is assigned zone `atlantis`, which is not defined",
        "inv.yaml:14:15: projects.science.zones: project `science` is assigned zone `z1` twice",
        "inv.yaml:17:19: zones.z1.storage: zone `z1` lists provisioner `vanished`, which is not defined",
    ];
    for e in expect {
        assert!(errs.iter().any(|x| x == e), "missing `{e}` in {errs:#?}");
    }
}

#[test]
fn duplicates_are_errors() {
    let text = "cluster: c\nprovisioners:\n  ebs-sc:\n    driver: {type: hostpath, path: /x}\n  p2:\n    driver: {type: hostpath, path: /y}\n  p2:\n    driver: {type: hostpath, path: /z}\nvolumes:\n  - {name: v, provisioner: ebs-sc}\n  - {name: v, provisioner: p2}\n  - {name: v, provisioner: ebs-sc}\nzones:\n  a:\n    hosts: [{name: h1, capacity: {cpu: 1, memory: 1GiB}}]\n  b:\n    hosts: [{name: h1, capacity: {cpu: 1, memory: 1GiB}}]\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: ebs-sc}\nprovisioner: ebs.csi.aws.com\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(
        errs.iter()
            .any(|e| e.starts_with("inv.yaml:7:3: provisioners.p2: duplicate key")),
        "{errs:#?}"
    );
    assert!(
        errs.iter().any(|e| e.starts_with(
            "inv.yaml:12:5: volumes.name: volume `v` of provisioner `ebs-sc` is already defined at inv.yaml:10"
        )),
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.starts_with("inv.yaml:17:20: zones.b.hosts: host `h1` is already listed in zone `a`")),
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .any(|e| e
                .starts_with("inv.yaml:19:1: metadata.name: provisioner `ebs-sc` is already defined at inv.yaml:3")),
        "{errs:#?}"
    );
    // duplicate PersistentVolume names (cluster-scoped in Kubernetes)
    let pv = "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: same}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /a}}\n";
    let errs = errors(&format!("cluster: c\n{pv}{pv}"));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].contains("PersistentVolume `same` is already defined at inv.yaml:3"),
        "{errs:#?}"
    );
}

#[test]
fn unknown_keys_get_hints_with_line_and_column_and_errors_are_collected() {
    let text = "cluster: c\nprovisioners:\n  p:\n    driver: {type: nfs, target: \"srv:/x\"}\n    anotations: {tier: fast}\n    acess: all\n    ephemeral: physics\n    status: REDY\nzones:\n  z:\n    placementPolicy: BINPAK\n    hosts:\n      - name: h\n        capacity: {cpu: 1, memroy: 1GiB}\nvolumes:\n  - {name: v, provisioner: p, size: 10XB}\n  - {name: w, provisioner: p, accessModes: [RXW]}\n";
    let e = parse(text).unwrap_err();
    let find = |field: &str| {
        e.0.iter()
            .find(|d| d.field == field)
            .unwrap_or_else(|| panic!("no error for {field}: {e}"))
    };
    let d = find("provisioners.p.anotations");
    assert_eq!((d.line, d.col), (5, 5));
    assert_eq!(d.hint.as_deref(), Some("did you mean `annotations`?"));
    assert_eq!(
        find("provisioners.p.acess").hint.as_deref(),
        Some("did you mean `access`?")
    );
    let d = find("provisioners.p.ephemeral");
    assert_eq!(d.hint.as_deref(), Some("for a single group write `[physics]`"));
    assert_eq!(
        find("provisioners.p.status").hint.as_deref(),
        Some("did you mean `READY`?")
    );
    assert_eq!(
        find("zones.z.placementPolicy").hint.as_deref(),
        Some("did you mean `BINPACK`?")
    );
    let d = find("zones.z.hosts[0].capacity.memroy");
    assert_eq!((d.line, d.col), (14, 28));
    assert!(
        find("zones.z.hosts[0].capacity")
            .message
            .contains("missing required field `memory`")
    );
    assert!(find("volumes[0].size").message.contains("unknown unit `XB`"));
    assert!(
        find("volumes[1].accessModes[0]")
            .message
            .contains("unknown access mode `RXW`")
    );
    assert!(e.0.len() >= 9, "{e}");
    // no cascade: the provisioner with errors is still known to its volumes
    assert!(!e.to_string().contains("which is not defined"), "{e}");
}

#[test]
fn bad_values_are_errors() {
    let cases = [
        ("cluster: \"a.b\"\n", "not a valid cluster name"),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: nfs, target: /export}}\n",
            "not an NFS export",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: hostpath, path: relative}}\n",
            "not an absolute path",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: efs, fileSystemId: fs-xyz}}\n",
            "not an EFS file system id",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: external, provisioner: \"bad name\"}}\n",
            "not a provisioner name",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: nfs, target: \"s:/x\", path: /y}}\n",
            "unknown field `path`",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: ceph}}\n",
            "expected one of nfs, hostpath, efs, k8s_pvc, azure_files, oci_fss, oci_lustre, filestore, external",
        ),
        (
            "cluster: c\nprovisioners:\n  ephemeral: {driver: {type: hostpath, path: /x}}\n",
            "reserved",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: hostpath, path: /x}, maxVolumeSize: -1GB}\n",
            "negative",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: hostpath, path: /x}, freeSpace: lots}\n",
            "not a size",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: hostpath, path: /x}, volumeModes: []}\n",
            "at least one volume mode",
        ),
        (
            "cluster: c\nprovisioners:\n  p: {driver: {type: hostpath, path: /x, local: true}}\nvolumes: [{name: v, provisioner: p}]\n",
            "needs `host:`",
        ),
        (
            "cluster: c\nvolumes: [{name: ../x, provisioner: p}]\n",
            "not a valid volume name",
        ),
        ("cluster: c\nzones:\n  z: {tags: [\":x\"]}\n", "not a tag"),
        ("cluster: c\nzones:\n  z: {priority: high}\n", "whole number"),
        (
            "cluster: c\nzones:\n  z: {hostCostPerHour: -0.5}\n",
            "inv.yaml:3:24: zones.z.hostCostPerHour: expected a number >= 0 (a price per host-hour), found `-0.5`",
        ),
        (
            "cluster: c\nzones:\n  z: {hostCostPerHour: .nan}\n",
            "zones.z.hostCostPerHour: expected a number >= 0",
        ),
        (
            "cluster: c\nzones:\n  z: {hostCostPerHour: cheap}\n",
            "zones.z.hostCostPerHour: expected a number >= 0",
        ),
        (
            "cluster: c\nzones:\n  z: {hostCostPerHour: [1]}\n",
            "zones.z.hostCostPerHour: expected a number >= 0",
        ),
        (
            "cluster: c\nprojects:\n  p: {zones: [{priority: 1}]}\n",
            "missing required field `zone`",
        ),
        ("provisioners: {}\n", "missing required field `cluster`"),
        (
            "cluster: c\nvolumes:\n  v: {provisioner: p}\n",
            "volume name is unique only within its provisioner",
        ),
        ("cluster: c\n---\ncluster: d\n", "a second inventory document"),
    ];
    for (text, want) in cases {
        let e = parse(text).unwrap_err();
        assert!(
            e.to_string().contains(want),
            "`{text}` should fail with `{want}`, got: {e}"
        );
    }
}

#[test]
fn json_inventory_works_through_the_same_loader() {
    let text = r#"{"cluster": "json-c", "provisioners": {"fast-storage": {"driver": {"type": "nfs", "target": "nfs-fast:/export/nvme"}, "annotations": {"tier": "fast"}, "access": "all", "create": ["physics"]}}, "zones": {"z": {"priority": 3, "hosts": [{"name": "h", "capacity": {"cpu": 4, "memory": "16GiB"}}]}}, "volumes": [{"name": "v", "provisioner": "fast-storage", "size": "10GB"}]}"#;
    let inv = parse_inventory_str("inv.json", text, None).unwrap().value;
    assert_eq!(inv.cluster, "json-c");
    assert_eq!(
        inv.provisioners[0].permissions.create,
        AccessPolicy::Groups(["physics".to_string()].into())
    );
    assert_eq!(inv.zones[0].priority, 3);
    assert_eq!(inv.volumes[0].capacity.0, 10_000_000_000);
    let e = parse_inventory_str("inv.json", r#"{"cluster": "c", "zones": {"z": {"prority": 1}}}"#, None).unwrap_err();
    assert_eq!(e.0[0].hint.as_deref(), Some("did you mean `priority`?"));
    assert_eq!((e.0[0].line, e.0[0].col), (1, 34));
}

#[test]
fn kubernetes_only_file_is_an_inventory_named_after_the_file() {
    let text = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: s}\nprovisioner: a.io/b\n";
    let inv = parse_inventory_str("dir/My Cluster.v2.yaml", text, None).unwrap().value;
    assert_eq!(inv.cluster, "My-Cluster");
    assert!(inv.zones.is_empty() && inv.projects.is_empty());
    let e = parse_inventory_str("claims.yaml", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n", None).unwrap_err();
    assert!(e.to_string().contains("load it as a workflow"), "{e}");
}

#[test]
fn storage_class_zones_unknown_to_the_inventory_give_a_notice() {
    let text = "cluster: c\nzones:\n  z1: {}\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: s}\nprovisioner: a.io/b\nallowedTopologies:\n- matchLabelExpressions:\n  - {key: topology.kubernetes.io/zone, values: [us-east-2c]}\n";
    let loaded = parse(text).unwrap();
    assert_eq!(loaded.notices.len(), 1);
    assert!(loaded.notices[0].message.contains("no zone reaches its storage"));
    assert_eq!(loaded.notices[0].line, 5);
}

// ---------------------------------------------------------------------------------------------
// Security: driver secrets are references; limits

#[test]
fn inline_credentials_in_driver_parameters_are_refused_at_their_position() {
    let text = "cluster: c\nprovisioners:\n  ext:\n    driver:\n      type: external\n      provisioner: example.com/dirs\n      parameters:\n        mode: \"0750\"\n        token: hunter2-inline\n        apiKey: env:EXAMPLE_API_KEY\n        passwordFile: file:/etc/fedvol/nfs-password\n        csi.storage.k8s.io/provisioner-secret-name: csi-secret\n";
    let e = parse_inventory_str("inv.yaml", text, None).unwrap_err();
    assert_eq!(e.0.len(), 1, "{e}");
    let d = &e.0[0];
    assert_eq!((d.line, d.col), (9, 16), "{e}");
    assert_eq!(d.field, "provisioners.ext.driver.parameters.token");
    assert!(d.message.contains("looks like a credential"), "{e}");
    assert!(!e.to_string().contains("hunter2"), "the value is never repeated: {e}");
    // References (and keys that only name a Kubernetes Secret) are kept as written.
    let ok = text.replace("hunter2-inline", "file:/etc/fedvol/token");
    let inv = parse_inventory_str("inv.yaml", &ok, None).unwrap().value;
    let Driver::External { parameters, .. } = &inv.provisioners[0].driver else {
        panic!("external")
    };
    assert_eq!(parameters["token"], "file:/etc/fedvol/token");
    assert_eq!(parameters["apiKey"], "env:EXAMPLE_API_KEY");
}

#[test]
fn storage_class_parameters_follow_the_same_rule() {
    let sc = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: fast\nprovisioner: example.com/nfs\nparameters:\n  server: nfs.example\n  password: \"p4ss\"\n";
    let e = parse_inventory_str("k8s.yaml", sc, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("k8s.yaml:8:13: parameters.password: parameter `password` looks like a credential"),
        "{e}"
    );
    assert!(!e.to_string().contains("p4ss"), "{e}");
    parse_inventory_str("k8s.yaml", &sc.replace("\"p4ss\"", "env:NFS_PASSWORD"), None).unwrap();
}

/// Credentials written inside a value, whatever the key: an `Authorization` header (RFC 9110
/// §11.6.2) and a password in an address's user-info (RFC 3986 §3.2.1), with or without a
/// scheme. Each is refused at its value's line and column, naming the field and what is
/// expected, without repeating the value; the references are taken.
#[test]
fn authorization_headers_and_user_info_passwords_are_refused_wherever_parameters_are_checked() {
    let inv = "cluster: c\nprovisioners:\n  ext:\n    driver:\n      type: external\n      provisioner: example.com/dirs\n      parameters:\n        headers: \"Authorization: Basic aHVudGVyMjpzM2NyM3Q=\"\n        server: \"admin:s3cr3t@nas1:/export\"\n        endpoint: \"https://admin:s3cr3t@api.example/v1\"\n        archive: \"nfs://u:s3cr3t@nas2/export\"\n  nfs1:\n    driver: {type: nfs, target: \"admin:s3cr3t@nas1:/export\"}\n";
    let e = parse_inventory_str("inv.yaml", inv, None).unwrap_err();
    let text = e.to_string();
    assert!(
        !text.contains("s3cr3t") && !text.contains("aHVudGVy"),
        "never repeated: {text}"
    );
    let at = |field: &str| {
        e.0.iter()
            .find(|d| d.field == field)
            .unwrap_or_else(|| panic!("no diagnostic for {field}: {text}"))
    };
    let d = at("provisioners.ext.driver.parameters.headers");
    assert_eq!((d.file.as_str(), d.line, d.col), ("inv.yaml", 8, 18), "{text}");
    assert!(d.message.contains("`Authorization` header"), "{text}");
    assert!(d.message.contains("`file:/path/to/secret` or `env:VARIABLE`"), "{text}");
    let d = at("provisioners.ext.driver.parameters.server");
    assert_eq!(d.line, 9, "{text}");
    assert!(d.message.contains("password in its user-info"), "{text}");
    assert!(
        at("provisioners.ext.driver.parameters.endpoint")
            .message
            .contains("URL with a password")
    );
    assert!(
        at("provisioners.ext.driver.parameters.archive")
            .message
            .contains("URL with a password")
    );
    let d = at("provisioners.nfs1.driver.target");
    assert_eq!(d.line, 13, "{text}");
    assert!(d.message.contains("password in its user-info"), "{text}");
    assert!(d.message.contains("expected server:/path"), "{text}");
    assert_eq!(e.0.len(), 5, "{text}");
    // The same values by reference, or without credentials, are taken.
    let ok = inv
        .replace(
            "Authorization: Basic aHVudGVyMjpzM2NyM3Q=",
            "Authorization: Basic env:NAS_AUTH",
        )
        .replace("admin:s3cr3t@", "")
        .replace("u:s3cr3t@", "");
    parse_inventory_str("inv.yaml", &ok, None).unwrap();
    // A StorageClass's parameters follow the same rule.
    let sc = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: fast\nprovisioner: example.com/nfs\nparameters:\n  share: \"u:s3cr3t@nas1:/export\"\n  header: \"Authorization: Bearer s3cr3t-token\"\n";
    let e = parse_inventory_str("sc.yaml", sc, None).unwrap_err().to_string();
    assert!(e.contains("sc.yaml:7:10: parameters.share: parameter `share`"), "{e}");
    assert!(e.contains("sc.yaml:8:11: parameters.header: parameter `header`"), "{e}");
    assert!(!e.contains("s3cr3t"), "{e}");
}

#[test]
fn inventory_limits_are_errors() {
    let long = "c".repeat(254);
    let e = parse_inventory_str("inv.yaml", &format!("cluster: {long}\n"), None).unwrap_err();
    assert!(e.to_string().contains("cluster name of 254 bytes"), "{e}");
    let big = "v".repeat(fedvol_common::limits::MAX_ANNOTATIONS_BYTES);
    let text = format!(
        "cluster: c\nprovisioners:\n  p:\n    driver: {{type: hostpath, path: /x}}\n    annotations: {{a: {big}}}\n"
    );
    let e = parse_inventory_str("inv.yaml", &text, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("provisioners.p.annotations: annotations total 262145 bytes"),
        "{e}"
    );
}

/// An inventory whose zones come from a live source (the agent's Slurm source): references to
/// zones and hosts are left to the agent, and a `zones:` section is refused naming the source.
#[test]
fn zones_from_elsewhere_skip_zone_references_and_refuse_zones() {
    let dir = std::env::temp_dir().join(format!("fedvol-zones-elsewhere-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("inv.yaml");
    std::fs::write(
        &p,
        "cluster: c\nprovisioners:\n  s:\n    driver: {type: hostpath, path: /x, local: true}\n    zones: [gpu]\n    ephemeral: all\nvolumes:\n  - {name: v, provisioner: s, size: 1GiB, host: n1}\nprojects:\n  p:\n    zones: [{zone: batch, priority: 1}]\n",
    )
    .unwrap();
    let inv = crate::load_inventory_without_zones(&p, "Slurm").unwrap().value;
    assert!(inv.zones.is_empty());
    assert_eq!(inv.projects[0].zones[0].zone, "batch");
    assert!(
        crate::load_inventory(&p).is_err(),
        "with files, the same references dangle"
    );

    std::fs::write(&p, "cluster: c\nzones:\n  z1:\n    hosts: []\n").unwrap();
    let e = crate::load_inventory_without_zones(&p, "Slurm")
        .unwrap_err()
        .to_string();
    assert!(e.contains("zones and hosts come from Slurm"), "{e}");
    assert!(e.contains("inv.yaml:3:"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
