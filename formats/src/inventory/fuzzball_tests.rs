//! Fuzzball provisioner definitions, unmodified. The reference is
//! Fuzzball's provisioner definition reference, gathered from Fuzzball's documentation and its v4
//! OpenAPI schema (`StorageProvisionerDefinition`, `StorageProvisionerDriverConfig`).

use crate::files::{Loaded, parse_inventory_str};
use crate::yaml::Diagnostics;
use fedvol_common::model::{AccessMode, AccessModes, AccessPolicy, Driver, Inventory, Operation};

fn parse(text: &str) -> Result<Loaded<Inventory>, Diagnostics> {
    parse_inventory_str("inv.yaml", text, None)
}

/// `provisioners:` holding `defs` (a name-keyed map as Fuzzball writes it), indented in place.
fn inventory(defs: &str) -> String {
    let mut s = String::from("cluster: c\nprovisioners:\n");
    for line in defs.lines() {
        s.push_str("  ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn first_error(defs: &str) -> String {
    parse(&inventory(defs)).unwrap_err().0[0].to_string()
}

/// The schema's own example ("Example (as Fuzzball documents it)"), read from the reference
/// file: an EFS provisioner spelled `filesystemId` with a `region` is accepted as it is.
#[test]
fn the_reference_example_is_accepted_unmodified() {
    let Some(reference) = fedvol_testenv::provisioner_reference() else {
        return;
    };
    let md = std::fs::read_to_string(reference).unwrap();
    let start = md.find("```yaml\n").unwrap() + "```yaml\n".len();
    let example = &md[start..start + md[start..].find("```").unwrap()];
    let inv = parse(&inventory(example)).unwrap().value;
    assert_eq!(inv.provisioners.len(), 2);
    let cloud = &inv.provisioners[1];
    assert_eq!(cloud.name, "cloud-fast");
    assert_eq!(
        cloud.driver,
        Driver::Efs {
            file_system_id: "fs-12345678".into(),
            region: Some("us-west-2".into()),
            subnet_ids: Vec::new(),
            sub_path: None,
        }
    );
    assert!(cloud.permissions.allows(Operation::Ephemeral, "u", &[]));
}

/// Every documented driver type with every documented field, spelled as Fuzzball spells it
/// (schema table "Driver"), plus the top-level `costPerGbHour` and `segment`, and the API fields
/// `nfsSyncMode` and `selfProvisioned`.
#[test]
fn every_documented_driver_type_and_field_is_accepted() {
    let defs = r#"nfs-v4:
  driver: {type: nfs, target: "nfs-fast:/export/nvme", version: 4, options: "hard,intr", subPath: team-a, nfsSyncMode: sync}
  costPerGbHour: 0.00012
  segment: rack-1
  ephemeral: all
scratch:
  driver: {type: hostpath, path: /scratch, local: true, subPath: fuzzball}
efs:
  driver: {type: efs, filesystemId: fs-0123abcd, region: us-west-2, subnetIds: [subnet-1, subnet-2], subPath: vols, selfProvisioned: true}
pvc:
  driver: {type: k8s_pvc, storageClassName: gp3, namespace: fuzzball}
azure:
  driver: {type: azure_files, accountName: acct, shareName: share, region: westeurope, subPath: wf}
fss:
  driver: {type: oci_fss, compartmentId: ocid1.compartment, availabilityDomain: AD-1, mountTargetId: ocid1.mt, subPath: wf}
lustre:
  driver: {type: oci_lustre, lustreCapacityGbs: 31200, lustrePerformanceTier: MBPS_PER_TB_125, compartmentId: ocid1.compartment, availabilityDomain: AD-1}
gcp:
  driver: {type: filestore, region: us-central1, subPath: wf}
"#;
    let inv = parse(&inventory(defs)).unwrap().value;
    let by = |n: &str| inv.provisioners.iter().find(|p| p.name == n).unwrap();
    assert_eq!(
        by("nfs-v4").driver,
        Driver::Nfs {
            target: "nfs-fast:/export/nvme".into(),
            mount: None,
            version: Some(4),
            options: Some("hard,intr".into()),
            sub_path: Some("team-a".into()),
        }
    );
    assert_eq!(by("nfs-v4").cost_per_gb_hour, Some(0.00012));
    assert_eq!(by("nfs-v4").nfs_sync_mode.as_deref(), Some("sync"));
    assert_eq!(by("nfs-v4").reachability.segment.as_deref(), Some("rack-1"));
    assert_eq!(
        by("scratch").driver,
        Driver::Hostpath {
            path: "/scratch".into(),
            local: true,
            sub_path: Some("fuzzball".into()),
        }
    );
    assert_eq!(
        by("efs").driver,
        Driver::Efs {
            file_system_id: "fs-0123abcd".into(),
            region: Some("us-west-2".into()),
            subnet_ids: vec!["subnet-1".into(), "subnet-2".into()],
            sub_path: Some("vols".into()),
        }
    );
    assert!(by("efs").self_provisioned);
    assert_eq!(
        by("pvc").driver,
        Driver::K8sPvc {
            storage_class_name: Some("gp3".into()),
            namespace: Some("fuzzball".into()),
        }
    );
    assert_eq!(by("azure").driver.kind(), "azure_files");
    assert_eq!(by("fss").driver.sub_path(), Some("wf"));
    assert_eq!(
        by("lustre").driver,
        Driver::OciLustre {
            lustre_capacity_gbs: Some(31200),
            lustre_performance_tier: Some("MBPS_PER_TB_125".into()),
            compartment_id: Some("ocid1.compartment".into()),
            availability_domain: Some("AD-1".into()),
        }
    );
    assert_eq!(by("gcp").driver.kind(), "filestore");
    // Only the types fedvol's agent acts on create volumes; the others plan.
    let acted: Vec<&str> = inv
        .provisioners
        .iter()
        .filter(|p| p.driver.acted_on())
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(acted, ["nfs-v4", "scratch", "efs"]);
}

/// fedvol's earlier spelling of the EFS id stays accepted; both at once is an error.
#[test]
fn efs_id_spellings() {
    let inv = parse(&inventory("e: {driver: {type: efs, fileSystemId: fs-12345678}}"))
        .unwrap()
        .value;
    assert!(
        matches!(&inv.provisioners[0].driver, Driver::Efs { file_system_id, .. } if file_system_id == "fs-12345678")
    );
    let e = first_error("e: {driver: {type: efs, filesystemId: fs-12345678, fileSystemId: fs-12345678}}");
    assert!(e.contains("given twice") && e.contains("keep `filesystemId`"), "{e}");
    let e = first_error("e: {driver: {type: efs, region: us-west-2}}");
    assert!(e.contains("missing required field `filesystemId`"), "{e}");
}

/// Bad values name the file, line, column and field, and say what was expected.
#[test]
fn bad_fuzzball_values_are_errors_with_positions() {
    let cases = [
        (
            "n: {driver: {type: nfs, target: \"s:/x\", version: 5}}",
            "inv.yaml:3:",
            "expected NFS version 3 or 4",
        ),
        (
            "h: {driver: {type: hostpath, path: /x, subPath: ../etc}}",
            "subPath",
            "not a subdirectory",
        ),
        (
            "h: {driver: {type: hostpath, path: /x}, costPerGbHour: -1}",
            "costPerGbHour",
            "expected a number >= 0",
        ),
        (
            "l: {driver: {type: oci_lustre, lustreCapacityGbs: lots}}",
            "lustreCapacityGbs",
            "expected a whole number",
        ),
        (
            "k: {driver: {type: k8s_pvc, storageclassName: x}}",
            "did you mean `storageClassName`",
            "unknown field",
        ),
        (
            "k: {driver: {type: azure, accountName: x}}",
            "driver.type",
            "expected one of nfs, hostpath, efs, k8s_pvc",
        ),
    ];
    for (defs, want_a, want_b) in cases {
        let e = first_error(defs);
        assert!(e.contains(want_a) && e.contains(want_b), "{defs}: {e}");
    }
}

/// The API form of a policy (schema "Top level": `{all, groups: {names}, users: {names}}`,
/// users additive with groups, ignored when `all` is set).
#[test]
fn access_policies_in_the_api_form() {
    let defs = r#"p:
  driver: {type: hostpath, path: /x}
  access: {groups: {names: [physics]}, users: {names: [alice]}}
  create: {all: true, groups: {names: [nobody-matters]}}
  ephemeral: {groups: {names: []}}
"#;
    let inv = parse(&inventory(defs)).unwrap().value;
    let p = &inv.provisioners[0].permissions;
    assert!(p.access.allows("alice", &[]), "a listed user");
    assert!(p.access.allows("bob", &["physics".into()]), "a listed group");
    assert!(!p.access.allows("bob", &["chem".into()]));
    assert_eq!(p.create, AccessPolicy::All);
    assert_eq!(p.ephemeral, AccessPolicy::Deny, "empty lists grant nobody");
}

/// Volumes of a shared file system offer the many-host modes when their entry gives none.
#[test]
fn cloud_file_systems_offer_shared_access_modes() {
    let text = "cluster: c\nprovisioners:\n  az: {driver: {type: azure_files, shareName: s}}\n  pvc: {driver: {type: k8s_pvc}}\nvolumes:\n  - {name: a, provisioner: az, size: 1Gi}\n  - {name: b, provisioner: pvc, size: 1Gi}\n";
    let inv = parse(text).unwrap().value;
    assert!(inv.volumes[0].access_modes.contains(AccessMode::ReadWriteMany));
    assert_eq!(
        inv.volumes[1].access_modes,
        AccessModes::of(&[AccessMode::ReadWriteOnce])
    );
}
