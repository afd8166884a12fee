//! The federation a what-if plans on, cluster by cluster: a recorded live commit planned on its
//! own cluster as if it were not there ([`without`]), and an inventory given by the user read
//! with what fedvol committed on the cluster ([`replaced`]). docs/design.md §2.7.
//!
//! Both start from an agent's **effective inventory** (its files plus fedvol's commits, as the
//! agent's `inventory` operation answers it) and change only what they must, sharing every
//! other host with it (hosts are `Arc`s), so a what-if over thousands of decisions copies no
//! inventory per decision.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::decision::{Action, ClusterDecision};
use crate::funnel::Prepared;
use crate::model::{Inventory, PersistentVolume, Resources, VolumePhase};

/// Subtracts `b` from `a`, each amount saturating at 0 (a device that reaches 0 is removed).
pub fn sub_resources(a: &mut Resources, b: &Resources) {
    a.cpu = a.cpu.saturating_sub(b.cpu);
    a.memory.0 = a.memory.0.saturating_sub(b.memory.0);
    a.instances = a.instances.saturating_sub(b.instances);
    for (k, v) in &b.devices {
        if let Some(e) = a.devices.get_mut(k) {
            *e = e.saturating_sub(*v);
        }
    }
    a.devices.retain(|_, v| *v > 0);
}

/// Adds `b` into `a`, each amount saturating.
pub fn add_resources(a: &mut Resources, b: &Resources) {
    a.cpu = a.cpu.saturating_add(b.cpu);
    a.memory.0 = a.memory.0.saturating_add(b.memory.0);
    a.instances = a.instances.saturating_add(b.instances);
    for (k, v) in &b.devices {
        let e = a.devices.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

/// Where host `host` of zone `zone` is in `inv` (zone index, host index).
fn host_at(inv: &Inventory, zone: &str, host: &str) -> Option<(usize, usize)> {
    let zi = inv.zones.iter().position(|z| z.name == zone)?;
    let hi = inv.zones[zi].hosts.iter().position(|h| h.name == host)?;
    Some((zi, hi))
}

/// `inv` (prepared as `prepared`) as it would be without the live commit of `request_id`
/// whose answer on this cluster is `own`: the capacity `own.allocations` took is given back
/// to its hosts (saturating at the file's allocations' floor of 0), the volumes it provisioned
/// (`action: provision`) are left out, and a volume it bound (`action: bind`) reads
/// `Available` again, its claimRef's uid cleared when the commit filled it in with the request
/// id. This is what an agent's own re-plan of a request it committed sees (its ledger without
/// the request), read from the outside: an agent restores a bound volume's stored record, this
/// keeps the claimRef's name, which names this request's claim, so the volume is still the one
/// the claim binds first.
///
/// Allocations on hosts `inv` lacks are ignored. Returns the inventory and its prepared form
/// (refreshed from `prepared` on the hosts that changed; no other host is copied).
pub fn without(inv: &Inventory, prepared: &Prepared, own: &ClusterDecision, request_id: &str) -> (Inventory, Prepared) {
    let mut out = inv.clone_without_volumes();
    let mut touched = Vec::new();
    for a in &own.allocations {
        if let Some((zi, hi)) = host_at(&out, &a.zone, &a.host) {
            sub_resources(&mut Arc::make_mut(&mut out.zones[zi].hosts[hi]).allocated, &a.resources);
            touched.push((zi, hi));
        }
    }
    // Its own volumes (few): compared by name with each of the cluster's, no hashing.
    let own_volumes: Vec<(Option<&str>, &str, Action)> = own
        .volumes
        .values()
        .filter_map(|v| Some((v.provisioner.as_deref(), v.volume.as_deref()?, v.action?)))
        .filter(|(_, _, a)| *a != Action::Existing)
        .collect();
    if own_volumes.is_empty() {
        out.volumes = inv.volumes.clone();
        let prepared = prepared.refreshed(&out, touched);
        return (out, prepared);
    }
    let is = |pv: &PersistentVolume, action: Action| {
        own_volumes
            .iter()
            .any(|&(p, n, a)| a == action && pv.name == n && pv.provisioner.as_deref() == p)
    };
    let mut removed = Vec::new();
    let mut replaced = Vec::new();
    for (i, pv) in inv.volumes.iter().enumerate() {
        if is(pv, Action::Provision) {
            removed.push(i);
        } else if is(pv, Action::Bind) && pv.phase == VolumePhase::Bound {
            let mut free: PersistentVolume = (**pv).clone();
            free.phase = VolumePhase::Available;
            if let Some(r) = free.claim_ref.as_mut()
                && r.uid.as_deref() == Some(request_id)
            {
                r.uid = None;
            }
            replaced.push((i, Arc::new(free)));
        }
    }
    out.volumes = inv
        .volumes
        .iter()
        .enumerate()
        .filter(|(i, _)| removed.binary_search(i).is_err())
        .map(|(i, pv)| match replaced.iter().find(|(at, _)| *at == i) {
            Some((_, free)) => free.clone(),
            None => pv.clone(),
        })
        .collect();
    let prepared = prepared.refreshed_edited(&out, touched, &removed);
    (out, prepared)
}

/// The inventory `given` (a cluster's inventory as its files would say, read by the user)
/// with what fedvol committed on the cluster today, taken from its agent's effective inventory
/// `effective`: `host_use` (capacity held per host by fedvol's live commits, keyed
/// `zone/host`, as the agent's `status` reports it) is added to the hosts of `given` with the
/// same zone and name (capacity on hosts `given` lacks is dropped: that work would have to
/// move), and every volume fedvol manages there (`managed`: provisioner and name) replaces
/// the volume of that provisioner and name in `given`, or is added after its volumes. Returns
/// the inventory and how much held capacity found no host (as one sum).
pub fn replaced(
    given: &Inventory,
    effective: &Inventory,
    host_use: &BTreeMap<String, Resources>,
    managed: &[(Option<String>, String)],
) -> (Inventory, Resources) {
    let mut out = given.clone();
    let mut homeless = Resources::default();
    for (key, used) in host_use {
        let found = key.split_once('/').and_then(|(zone, host)| host_at(&out, zone, host));
        match found {
            Some((zi, hi)) => add_resources(&mut Arc::make_mut(&mut out.zones[zi].hosts[hi]).allocated, used),
            None => add_resources(&mut homeless, used),
        }
    }
    for (provisioner, name) in managed {
        let Some(pv) = effective
            .volumes
            .iter()
            .find(|v| v.name == *name && v.provisioner == *provisioner)
        else {
            continue;
        };
        match out
            .volumes
            .iter()
            .position(|v| v.name == *name && v.provisioner == *provisioner)
        {
            Some(i) => out.volumes[i] = pv.clone(),
            None => out.volumes.push(pv.clone()),
        }
    }
    (out, homeless)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{HostAllocation, Mode, VolumeDecision};
    use crate::funnel::{ClusterState, PlanRequest, plan_prepared};
    use crate::synth::{SynthSizes, cluster, workflow};

    /// A plan of a synthetic workflow on a synthetic cluster, and the inventory with that
    /// plan's allocations counted on its hosts and its new volumes added Bound (what an agent's
    /// effective inventory shows once it committed it).
    fn committed(req: &PlanRequest) -> (Inventory, Inventory, ClusterDecision) {
        let base = cluster(
            "c",
            SynthSizes {
                hosts: 20,
                provisioners: 3,
                volumes: 10,
            },
        );
        let slot = plan_prepared(&base, &Prepared::new(&base), &ClusterState::default(), req);
        assert!(slot.feasible, "{slot:#?}");
        let mut eff = base.clone();
        for a in &slot.allocations {
            let (zi, hi) = host_at(&eff, &a.zone, &a.host).unwrap();
            add_resources(&mut Arc::make_mut(&mut eff.zones[zi].hosts[hi]).allocated, &a.resources);
        }
        for v in slot.volumes.values() {
            if let Some(nv) = &v.new_volume {
                eff.volumes
                    .push(Arc::new(nv.to_persistent_volume(VolumePhase::Bound, None)));
            }
        }
        (base, eff, slot)
    }

    #[test]
    fn without_its_own_commit_a_request_plans_as_it_did_before_it_committed() {
        let req = PlanRequest::new("r-1", workflow(2, 10), "u").with_seed(7);
        let (base, eff, slot) = committed(&req);
        let prepared = Prepared::new(&eff);
        let (inv, prep) = without(&eff, &prepared, &slot, "r-1");
        for (a, b) in inv
            .zones
            .iter()
            .flat_map(|z| &z.hosts)
            .zip(base.zones.iter().flat_map(|z| &z.hosts))
        {
            assert_eq!(a.allocated, b.allocated, "host {}", a.name);
        }
        assert_eq!(
            inv.volumes.len(),
            base.volumes.len(),
            "its provisioned volume is left out"
        );
        let again = plan_prepared(&inv, &prep, &ClusterState::default(), &req);
        assert_eq!((&again.volumes, &again.jobs), (&slot.volumes, &slot.jobs));
        // The refreshed prepared form plans as one prepared afresh.
        let fresh = plan_prepared(&inv, &Prepared::new(&inv), &ClusterState::default(), &req);
        assert_eq!(again, fresh);
    }

    #[test]
    fn a_bound_volume_reads_available_again_and_its_uid_is_cleared() {
        let mut inv = cluster(
            "c",
            SynthSizes {
                hosts: 2,
                provisioners: 1,
                volumes: 1,
            },
        );
        let mut pv: PersistentVolume = (*inv.volumes[0]).clone();
        pv.name = "pv-1".into();
        pv.provisioner = Some("p".into());
        pv.phase = VolumePhase::Bound;
        pv.claim_ref = Some(crate::model::ClaimRef {
            namespace: "fedvol".into(),
            name: "w.v".into(),
            uid: Some("r-1".into()),
        });
        inv.volumes.push(Arc::new(pv));
        let mut own = ClusterDecision::without_answer(crate::decision::ClusterStatus::Answered, 0.0, None);
        own.volumes.insert(
            "v".into(),
            VolumeDecision {
                mode: Mode::Automatic,
                provisioner: Some("p".into()),
                volume: Some("pv-1".into()),
                action: Some(Action::Bind),
                error: None,
                passed: None,
                new_volume: None,
            },
        );
        own.allocations.push(HostAllocation {
            zone: "nowhere".into(),
            host: "none".into(),
            job: "j".into(),
            resources: Resources {
                cpu: 1,
                ..Default::default()
            },
        });
        let (out, _) = without(&inv, &Prepared::new(&inv), &own, "r-1");
        let v = out.volumes.last().unwrap();
        assert_eq!(v.phase, VolumePhase::Available);
        assert_eq!(v.claim_ref.as_ref().unwrap().uid, None);
        assert_eq!(v.claim_ref.as_ref().unwrap().name, "w.v");
    }

    #[test]
    fn a_replaced_inventory_keeps_what_fedvol_committed_on_hosts_of_the_same_name() {
        let given = cluster(
            "c",
            SynthSizes {
                hosts: 4,
                provisioners: 1,
                volumes: 1,
            },
        );
        let h0 = &given.zones[0].hosts[0];
        let key = format!("{}/{}", given.zones[0].name, h0.name);
        let used = Resources {
            cpu: 3,
            instances: 1,
            ..Default::default()
        };
        let host_use = BTreeMap::from([(key, used.clone()), ("gone/h".to_string(), used.clone())]);
        let mut effective = given.clone();
        let mut managed_pv: PersistentVolume = (*given.volumes[0]).clone();
        managed_pv.name = "pvc-r-1".into();
        managed_pv.provisioner = Some("x".into());
        managed_pv.phase = VolumePhase::Bound;
        effective.volumes.push(Arc::new(managed_pv));
        let managed = vec![
            (Some("x".to_string()), "pvc-r-1".to_string()),
            (None, "deleted".to_string()),
        ];
        let (out, homeless) = replaced(&given, &effective, &host_use, &managed);
        let mut expect = h0.allocated.clone();
        add_resources(&mut expect, &used);
        assert_eq!(out.zones[0].hosts[0].allocated, expect);
        assert_eq!(homeless, used, "capacity on a host the file lacks is counted apart");
        assert_eq!(out.volumes.len(), given.volumes.len() + 1);
        assert_eq!(out.volumes.last().unwrap().name, "pvc-r-1");
    }
}
