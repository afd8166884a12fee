//! Property tests: for random inventories and claims, a bound volume always satisfies its claim
//! (class, capacity, access modes, volume mode, selector, availability), a provisioned volume
//! matches it, no volume is bound twice, and resolution never panics and is deterministic.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::claim::effective_class;
use super::testkit::*;
use crate::decision::Action;
use crate::funnel::{ClusterState, PlanRequest, VolumeId};
use crate::model::*;
use crate::size::ByteSize;

const CLASSES: [&str; 4] = ["a", "b", "c", "d"]; // "d" never has a definition
const KEYS: [&str; 2] = ["region", "tier"];
const VALUES: [&str; 3] = ["east", "west", "gold"];

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop::sample::select(&KEYS[..]),
        prop::sample::select(&VALUES[..]),
        0..=2,
    )
    .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

fn volume_mode() -> impl Strategy<Value = VolumeMode> {
    prop_oneof![4 => Just(VolumeMode::Filesystem), 1 => Just(VolumeMode::Block)]
}

fn access_modes() -> impl Strategy<Value = AccessModes> {
    (0u8..16).prop_map(AccessModes)
}

fn provisioner(name: &'static str) -> impl Strategy<Value = Provisioner> {
    (
        any::<bool>(),
        prop::bool::weighted(0.8),
        0u8..6,
        labels(),
        prop::option::weighted(0.3, 0u128..12),
        any::<bool>(),
    )
        .prop_map(move |(default, ready, perms, labels, max, block)| {
            let mut p = storage_class(name, "example.com/x").build();
            p.default = default;
            if !ready {
                p.status = ProvisionerStatus::Disabled;
            }
            p.permissions = match perms {
                0 => Permissions::default(),
                1 => Permissions {
                    access: AccessPolicy::All,
                    ..Default::default()
                },
                _ => Permissions::open(),
            };
            p.labels = labels;
            p.max_volume_size = max.map(gib);
            if !block {
                p.volume_modes = vec![VolumeMode::Filesystem];
            }
            p
        })
}

fn claim_ref() -> impl Strategy<Value = Option<ClaimRef>> {
    prop_oneof![
        8 => Just(None),
        1 => Just(Some(ClaimRef { namespace: "default".into(), name: "c0".into(), uid: None })),
        1 => Just(Some(ClaimRef { namespace: "default".into(), name: "other".into(), uid: None })),
    ]
}

fn phase() -> impl Strategy<Value = VolumePhase> {
    prop_oneof![
        12 => Just(VolumePhase::Available),
        1 => Just(VolumePhase::Bound),
        1 => Just(VolumePhase::Released),
        1 => Just(VolumePhase::Pending),
    ]
}

fn volume(i: usize) -> impl Strategy<Value = PersistentVolume> {
    (
        prop::option::weighted(0.8, prop::sample::select(&CLASSES[..])),
        0u128..12,
        access_modes().prop_map(|m| AccessModes(m.0 | 1)),
        volume_mode(),
        labels(),
        phase(),
        claim_ref(),
        prop::bool::weighted(0.15),
    )
        .prop_map(move |(class, cap, modes, vm, labels, phase, claim_ref, deleting)| {
            let mut v: PersistentVolume = pv(&format!("v{i}"), class, gib(cap)).into();
            v.access_modes = modes;
            v.volume_mode = vm;
            v.labels = labels;
            v.phase = phase;
            v.claim_ref = claim_ref;
            v.being_deleted = deleting;
            v
        })
}

fn inventory_strategy() -> impl Strategy<Value = Inventory> {
    let provs = (
        provisioner("a"),
        provisioner("b"),
        provisioner("c"),
        prop::sample::select(&[0usize, 1, 2, 3, 3, 3][..]),
    );
    let vols = (0usize..16).prop_flat_map(|n| (0..n).map(volume).collect::<Vec<_>>());
    (provs, vols).prop_map(|((a, b, c, keep), volumes)| {
        let mut provisioners = vec![a, b, c];
        provisioners.truncate(keep);
        Inventory {
            cluster: "prop".into(),
            provisioners,
            volumes: volumes.into_iter().map(std::sync::Arc::new).collect(),
            version: "v".into(),
            ..Default::default()
        }
    })
}

fn requirement() -> impl Strategy<Value = LabelRequirement> {
    (
        prop::sample::select(&KEYS[..]),
        prop_oneof![
            Just(SelectorOperator::In),
            Just(SelectorOperator::NotIn),
            Just(SelectorOperator::Exists),
            Just(SelectorOperator::DoesNotExist)
        ],
        prop::collection::vec(prop::sample::select(&VALUES[..]), 1..=2),
    )
        .prop_map(|(k, op, vals)| LabelRequirement {
            key: k.to_string(),
            operator: op,
            values: match op {
                SelectorOperator::In | SelectorOperator::NotIn => vals.into_iter().map(str::to_string).collect(),
                _ => Vec::new(),
            },
        })
}

fn claim_strategy(name: &'static str) -> impl Strategy<Value = Claim> {
    (
        prop_oneof![
            1 => Just(ClaimClass::Unset),
            1 => Just(ClaimClass::Empty),
            4 => prop::sample::select(&["a", "a", "b", "c", "d"][..]).prop_map(|c| ClaimClass::Named(c.to_string()))
        ],
        prop::sample::select(&[1u8, 1, 4, 5, 2, 0][..]).prop_map(AccessModes),
        volume_mode(),
        0u128..12,
        prop::option::weighted(0.3, (labels(), prop::collection::vec(requirement(), 0..=2))),
        prop::option::weighted(0.15, (0usize..9).prop_map(|i| format!("v{i}"))),
    )
        .prop_map(move |(class, modes, vm, size, sel, volume_name)| Claim {
            namespace: "default".into(),
            name: name.into(),
            uid: None,
            class,
            access_modes: modes,
            volume_mode: vm,
            request: gib(size),
            selector: sel.map(|(match_labels, match_expressions)| LabelSelector {
                match_labels,
                match_expressions,
            }),
            volume_name,
            data_source: None,
        })
}

fn reservations(inv: &Inventory, pattern: u16) -> ClusterState {
    let mut state = ClusterState::default();
    for (i, v) in inv.volumes.iter().enumerate() {
        let holder = match (pattern >> (2 * (i % 8))) & 3 {
            1 => "req-1",
            2 => "req-other",
            _ => continue,
        };
        state.reserved_volumes.insert(
            VolumeId {
                provisioner: v.provisioner.clone(),
                name: v.name.clone(),
            },
            holder.to_string(),
        );
    }
    state
}

fn request_of(claims: Vec<Claim>, groups: &[&str]) -> PlanRequest {
    let volumes = claims
        .into_iter()
        .map(|c| VolumeRequest {
            key: format!("k-{}", c.name),
            access_modes: c.access_modes,
            source: VolumeSource::Claim(c),
            line: 1,
        })
        .collect();
    request(workflow(volumes), groups)
}

/// Kubernetes' `IsVolumeBoundToClaim`, written out independently of `bind::claim_ref_names`.
fn claim_names(r: &ClaimRef, c: &Claim) -> bool {
    r.namespace == c.namespace && r.name == c.name && (r.uid.as_deref().unwrap_or("").is_empty() || r.uid == c.uid)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bound_and_provisioned_volumes_satisfy_their_claims(
        inv in inventory_strategy(),
        c0 in claim_strategy("c0"),
        c1 in claim_strategy("c1"),
        pattern in any::<u16>(),
        in_group in any::<bool>(),
    ) {
        let state = reservations(&inv, pattern);
        let groups: &[&str] = if in_group { &["lab"] } else { &[] };
        let req = request_of(vec![c0.clone(), c1.clone()], groups);
        let (out, trace) = resolve_all(&inv, &state, &req);
        let (again, trace_again) = resolve_all(&inv, &state, &req);
        prop_assert_eq!(&out, &again);
        prop_assert_eq!(&trace, &trace_again);
        prop_assert_eq!(out.len(), 2);

        let mut bound_ids = Vec::new();
        for c in [&c0, &c1] {
            let d = &out[&format!("k-{}", c.name)];
            prop_assert_eq!(d.mode, crate::decision::Mode::Claim);
            let class = effective_class(&inv, &c.class);
            match d.action {
                Some(Action::Bind) => {
                    prop_assert!(d.error.is_none());
                    let name = d.volume.clone().expect("bound volume named");
                    let v = inv.volumes.iter()
                        .find(|v| v.name == name && v.provisioner == d.provisioner)
                        .expect("bound volume exists");
                    let pre = v.claim_ref.as_ref().is_some_and(|r| claim_names(r, c));
                    // A pre-bound volume is returned before the class check (FindMatchingVolume).
                    prop_assert!(pre || v.provisioner.as_deref() == class, "class equality");
                    prop_assert!(v.capacity >= c.request, "capacity");
                    prop_assert!(v.access_modes.is_superset_of(c.access_modes), "access modes");
                    prop_assert_eq!(v.volume_mode, c.volume_mode);
                    prop_assert!(!v.being_deleted);
                    prop_assert!(v.phase == VolumePhase::Available || pre, "phase");
                    prop_assert!(v.claim_ref.is_none() || pre, "claimed by another claim");
                    if !pre && let Some(sel) = &c.selector {
                        prop_assert!(sel.matches(&v.labels), "selector");
                    }
                    if let Some(n) = &c.volume_name {
                        prop_assert_eq!(n, &v.name);
                    }
                    let id = VolumeId { provisioner: v.provisioner.clone(), name: v.name.clone() };
                    prop_assert_ne!(state.reserved_volumes.get(&id).map(String::as_str), Some("req-other"));
                    prop_assert!(!bound_ids.contains(&id), "bound twice");
                    bound_ids.push(id);
                }
                Some(Action::Provision) => {
                    prop_assert!(d.error.is_none());
                    prop_assert!(c.volume_name.is_none(), "a claim with volumeName is never provisioned");
                    let nv = d.new_volume.clone().expect("new volume");
                    prop_assert_eq!(Some(nv.provisioner.as_str()), class);
                    let p = inv.provisioners.iter().find(|p| p.name == nv.provisioner).expect("definition");
                    prop_assert_eq!(p.status, ProvisionerStatus::Ready);
                    prop_assert!(nv.capacity >= c.request);
                    prop_assert_eq!(nv.access_modes, c.access_modes);
                    prop_assert_eq!(nv.volume_mode, c.volume_mode);
                    prop_assert!(p.volume_modes.contains(&nv.volume_mode));
                    prop_assert!(p.max_volume_size.is_none_or(|m| nv.capacity <= m));
                    if let Some(sel) = &c.selector {
                        prop_assert!(sel.matches(&nv.labels), "provisioned labels satisfy the selector");
                    }
                    prop_assert_eq!(nv.reclaim_policy, p.reclaim_policy);
                    let cr = nv.claim_ref.clone().expect("claimRef");
                    prop_assert!(claim_names(&cr, c));
                }
                Some(Action::Existing) => prop_assert!(false, "claims never use `existing`"),
                None => {
                    let err = d.error.clone().expect("an unresolved volume has an error");
                    prop_assert!(!err.code.is_empty() && !err.message.is_empty());
                }
            }
        }
        for t in &trace {
            prop_assert!(t.passed + t.rejected.len() == t.considered, "stage {} counts", t.stage);
            prop_assert!(t.rejected.iter().all(|r| !r.reasons.is_empty()));
        }
    }

    #[test]
    fn fuzzball_resolution_never_panics_and_is_deterministic(
        inv in inventory_strategy(),
        use_ in prop::option::of(prop::sample::select(&["ephemeral", "persistent", "a", "b", "zz", ""][..])),
        name in prop::option::of(prop::sample::select(&["v0", "v1", "v7", "new-one"][..])),
        size in prop::option::of(0u128..12),
        wanted in labels(),
        modes in access_modes(),
        in_group in any::<bool>(),
    ) {
        let mut inv = inv;
        for (i, p) in inv.provisioners.iter_mut().enumerate() {
            p.annotations = if i % 2 == 0 { [("region".to_string(), "east".to_string())].into() } else { BTreeMap::new() };
        }
        let spec = FbSpec {
            use_,
            name,
            size: size.map(gib),
            annotations: wanted,
            modes: Some(modes),
        };
        let groups: &[&str] = if in_group { &["lab"] } else { &[] };
        let req = request(workflow(vec![fb_volume("v", spec.clone()), fb_volume("w", spec)]), groups);
        let (out, trace) = resolve_all(&inv, &ClusterState::default(), &req);
        let (again, trace_again) = resolve_all(&inv, &ClusterState::default(), &req);
        prop_assert_eq!(&out, &again);
        prop_assert_eq!(&trace, &trace_again);
        for d in out.values() {
            prop_assert!(d.action.is_some() != d.error.is_some(), "exactly one of action and error: {:?}", d);
            if d.action == Some(Action::Bind) {
                let v = inv.volumes.iter().find(|v| Some(&v.name) == d.volume.as_ref() && v.provisioner == d.provisioner).expect("exists");
                prop_assert!(v.capacity >= ByteSize(size.map(gib).unwrap_or_default().0));
                prop_assert!(v.access_modes.is_superset_of(modes));
                prop_assert!(v.claim_ref.is_none());
            }
        }
    }
}
