//! Puts an inventory together from its fedvol document and Kubernetes objects, and checks what
//! no single document can: dangling references and duplicates across sections and files.

use std::collections::{BTreeMap, BTreeSet};

use super::doc::FedvolDoc;
use super::kubernetes::KubeItems;
use crate::kube::{HOSTNAME_LABEL, notice};
use crate::yaml::{Diagnostic, Span};
use fedvol_common::model::{
    AccessMode, AccessModes, Driver, Inventory, LabelRequirement, NodeAffinity, Provisioner, SelectorOperator,
};

fn at(line: usize) -> Span {
    Span { line, col: 1 }
}

/// Access modes a volume gets when its entry gives none: shared file systems
/// ([`Driver::is_shared_file_system`]: nfs, efs, shared hostpath, Azure Files, OCI, Filestore)
/// offer RWO, ROX and RWX; node-local hostpath, `k8s_pvc` and external storage RWO.
fn natural_modes(driver: Option<&Driver>) -> AccessModes {
    match driver {
        Some(d) if d.is_shared_file_system() => AccessModes::of(&[
            AccessMode::ReadWriteOnce,
            AccessMode::ReadOnlyMany,
            AccessMode::ReadWriteMany,
        ]),
        _ => AccessModes::of(&[AccessMode::ReadWriteOnce]),
    }
}

/// Builds the inventory. Order: fedvol provisioners in file order, then StorageClasses in
/// document order (Fuzzball "Annotations and Selection" picks the first passing provisioner); fedvol volumes, then
/// PersistentVolumes. Errors appended to `errors`: a volume naming no provisioner (a Kubernetes
/// PV may name a class without a StorageClass), a volume pinned to an unknown host or a
/// node-local volume with no host, a project zone, zone `storage` entry or provisioner `zones`
/// entry naming nothing, duplicate provisioner names (also across StorageClasses), duplicate
/// host names, duplicate volumes (same provisioner and name; PV names are unique), a project
/// assigning one zone twice. Notices: a StorageClass whose allowed zones the inventory does not
/// define.
///
/// With `zones_from` set (zones and hosts come from a live source such as Slurm), a `zones:`
/// section is an error, and references to zones and hosts (project zones, provisioner `zones`,
/// volume `host`) are not checked here: the source's zones are known only at run time.
#[allow(clippy::too_many_arguments)]
pub(crate) fn assemble(
    main_file: &str,
    cluster: String,
    fedvol: FedvolDoc,
    kube: KubeItems,
    version: String,
    zones_from: Option<&str>,
    errors: &mut Vec<Diagnostic>,
    notes: &mut Vec<Diagnostic>,
) -> Inventory {
    let mut err = |file: &str, span: Span, field: &str, msg: String| errors.push(notice(file, span, field, msg));
    let external = zones_from.is_some();
    if let Some(source) = zones_from {
        for z in &fedvol.zones {
            err(
                main_file,
                at(z.zone.origin.line),
                &format!("zones.{}", z.zone.name),
                format!(
                    "zones and hosts come from {source} (the agent's inventorySource); remove `zones:` from this file and give zone settings in the agent's configuration"
                ),
            );
        }
    }

    // Provisioners: names must be unique across fedvol definitions and StorageClasses.
    let mut provisioners: Vec<Provisioner> = fedvol.provisioners.iter().map(|d| d.provisioner.clone()).collect();
    let mut where_defined: BTreeMap<String, String> = provisioners
        .iter()
        .map(|p| (p.name.clone(), format!("{}:{}", p.origin.file, p.origin.line)))
        .collect();
    for key in &fedvol.provisioner_keys {
        where_defined
            .entry(key.clone())
            .or_insert_with(|| main_file.to_string());
    }
    for class in kube.classes {
        if let Some(first) = where_defined.get(&class.name) {
            err(
                &class.origin.file,
                at(class.origin.line),
                "metadata.name",
                format!("provisioner `{}` is already defined at {first}", class.name),
            );
            continue;
        }
        where_defined.insert(
            class.name.clone(),
            format!("{}:{}", class.origin.file, class.origin.line),
        );
        provisioners.push(class);
    }
    let provisioner_names: BTreeSet<&str> = fedvol
        .provisioner_keys
        .iter()
        .chain(kube.class_names.iter())
        .map(String::as_str)
        .collect();

    // Zones and hosts.
    let zone_names: BTreeSet<&str> = fedvol.zone_keys.iter().map(String::as_str).collect();
    let mut hosts: BTreeMap<&str, &str> = BTreeMap::new();
    for z in &fedvol.zones {
        for (h, span) in z.zone.hosts.iter().zip(&z.host_spans) {
            match hosts.get(h.name.as_str()) {
                Some(other) => err(
                    main_file,
                    *span,
                    &format!("zones.{}.hosts", z.zone.name),
                    format!("host `{}` is already listed in zone `{other}`", h.name),
                ),
                None => {
                    hosts.insert(&h.name, &z.zone.name);
                }
            }
        }
        for (p, span) in &z.storage_refs {
            if !provisioner_names.contains(p.as_str()) {
                err(
                    main_file,
                    *span,
                    &format!("zones.{}.storage", z.zone.name),
                    format!("zone `{}` lists provisioner `{p}`, which is not defined", z.zone.name),
                );
            }
        }
    }
    for d in &fedvol.provisioners {
        for (z, span) in &d.zone_refs {
            if !external && !zone_names.contains(z.as_str()) {
                err(
                    main_file,
                    *span,
                    &format!("provisioners.{}.zones", d.provisioner.name),
                    format!(
                        "provisioner `{}` is reachable from zone `{z}`, which is not defined",
                        d.provisioner.name
                    ),
                );
            }
        }
    }
    for p in &fedvol.projects {
        let mut seen = BTreeSet::new();
        for (a, span) in p.project.zones.iter().zip(&p.zone_spans) {
            let field = format!("projects.{}.zones", p.project.name);
            if !external && !zone_names.contains(a.zone.as_str()) {
                err(
                    main_file,
                    *span,
                    &field,
                    format!(
                        "project `{}` is assigned zone `{}`, which is not defined",
                        p.project.name, a.zone
                    ),
                );
            }
            if !seen.insert(a.zone.as_str()) {
                err(
                    main_file,
                    *span,
                    &field,
                    format!("project `{}` is assigned zone `{}` twice", p.project.name, a.zone),
                );
            }
        }
    }
    if !zone_names.is_empty() {
        for p in provisioners
            .iter()
            .filter(|p| p.from_storage_class && !p.reachability.zones.is_empty())
        {
            if !p.reachability.zones.iter().any(|z| zone_names.contains(z.as_str())) {
                notes.push(notice(
                    &p.origin.file,
                    at(p.origin.line),
                    "allowedTopologies",
                    format!("StorageClass `{}` is limited to zones {} and this inventory defines none of them: no zone reaches its storage", p.name, p.reachability.zones.join(", ")),
                ));
            }
        }
    }

    // Volumes.
    let mut volumes = Vec::new();
    let mut seen: BTreeMap<(Option<String>, String), String> = BTreeMap::new();
    for d in fedvol.volumes {
        let mut v = d.volume;
        let prov = provisioners.iter().find(|p| p.name == d.provisioner.0);
        if !provisioner_names.contains(d.provisioner.0.as_str()) {
            err(
                main_file,
                d.provisioner.1,
                "volumes.provisioner",
                format!(
                    "volume `{}` names provisioner `{}`, which is not defined",
                    v.name, d.provisioner.0
                ),
            );
        }
        if !d.modes_given {
            v.access_modes = natural_modes(prov.map(|p| &p.driver));
        }
        match &d.host {
            Some((h, span)) => {
                if !external && !hosts.contains_key(h.as_str()) {
                    err(
                        main_file,
                        *span,
                        "volumes.host",
                        format!("volume `{}` is pinned to host `{h}`, which no zone lists", v.name),
                    );
                }
                v.node_affinity = Some(NodeAffinity {
                    terms: vec![vec![LabelRequirement {
                        key: HOSTNAME_LABEL.to_string(),
                        operator: SelectorOperator::In,
                        values: vec![h.clone()],
                    }]],
                });
            }
            None if prov.is_some_and(|p| p.driver.is_node_local()) => {
                err(
                    main_file,
                    d.span,
                    "volumes.host",
                    format!(
                        "volume `{}` lives on node-local provisioner `{}` and needs `host:` naming its host",
                        v.name, d.provisioner.0
                    ),
                );
            }
            None => {}
        }
        let key = (v.provisioner.clone(), v.name.clone());
        match seen.get(&key) {
            Some(first) => err(
                main_file,
                d.span,
                "volumes.name",
                format!(
                    "volume `{}` of provisioner `{}` is already defined at {first}",
                    v.name, d.provisioner.0
                ),
            ),
            None => {
                seen.insert(key, format!("{}:{}", v.origin.file, v.origin.line));
                volumes.push(std::sync::Arc::new(v));
            }
        }
    }
    let mut pv_names: BTreeMap<String, String> = BTreeMap::new();
    for v in kube.volumes {
        let here = format!("{}:{}", v.origin.file, v.origin.line);
        if let Some(first) = pv_names.get(&v.name) {
            err(
                &v.origin.file,
                at(v.origin.line),
                "metadata.name",
                format!("PersistentVolume `{}` is already defined at {first}", v.name),
            );
            continue;
        }
        pv_names.insert(v.name.clone(), here.clone());
        let key = (v.provisioner.clone(), v.name.clone());
        if let Some(first) = seen.get(&key) {
            err(
                &v.origin.file,
                at(v.origin.line),
                "metadata.name",
                format!(
                    "volume `{}` of class `{}` is already defined at {first}",
                    v.name,
                    v.provisioner.as_deref().unwrap_or("")
                ),
            );
            continue;
        }
        seen.insert(key, here);
        volumes.push(std::sync::Arc::new(v));
    }

    Inventory {
        cluster,
        provisioners,
        volumes,
        projects: fedvol.projects.into_iter().map(|p| p.project).collect(),
        zones: fedvol.zones.into_iter().map(|z| z.zone).collect(),
        version,
    }
}
