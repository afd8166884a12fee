//! Binding by Kubernetes' own rules for a PersistentVolume's `spec.claimRef`.
//! Each table row cites the upstream function it follows:
//! - component-helpers `storage/volume/pv_helpers.go`: `IsVolumeBoundToClaim` (name and
//!   namespace equal; a non-empty claimRef uid equal to the claim's), `FindMatchingVolume` (a
//!   volume with a claimRef that does not name the claim is skipped; a pre-bound volume is
//!   returned before the phase, selector and class checks, after capacity, volume mode and
//!   deletion);
//! - `pkg/controller/volume/persistentvolume/index.go`: `findByClaim` (access-mode sets searched
//!   fewest modes first; the first set with any match wins).

use super::bind::claim_ref_names;
use super::stages;
use super::testkit::*;
use crate::decision::{Action, codes};
use crate::model::{ClaimRef, VolumePhase};

fn class_fast() -> InvBuilder {
    inventory("a").provisioner(storage_class("fast", "ebs.csi.aws.com"))
}

fn r(namespace: &str, name: &str, uid: Option<&str>) -> ClaimRef {
    ClaimRef {
        namespace: namespace.into(),
        name: name.into(),
        uid: uid.map(str::to_string),
    }
}

/// `IsVolumeBoundToClaim`, row by row.
#[test]
fn is_volume_bound_to_claim() {
    let plain = claim("data").build(); // namespace default, no uid
    let with_uid = claim("data").uid("u-1").build();
    let rows: [(&str, ClaimRef, &crate::model::Claim, bool); 9] = [
        ("same name and namespace", r("default", "data", None), &plain, true),
        (
            "namespace compared exactly, not defaulted",
            r("", "data", None),
            &plain,
            false,
        ),
        ("another namespace", r("ml", "data", None), &plain, false),
        ("another name", r("default", "other", None), &plain, false),
        (
            "empty uid means no uid",
            r("default", "data", Some("")),
            &with_uid,
            true,
        ),
        (
            "claimRef uid equals the claim's",
            r("default", "data", Some("u-1")),
            &with_uid,
            true,
        ),
        (
            "claimRef uid differs",
            r("default", "data", Some("u-2")),
            &with_uid,
            false,
        ),
        (
            "claimRef uid, claim without uid",
            r("default", "data", Some("u-1")),
            &plain,
            false,
        ),
        ("empty claimRef names no claim", r("", "", None), &plain, false),
    ];
    for (why, cr, c, want) in rows {
        assert_eq!(claim_ref_names(&cr, c), want, "{why}");
    }
}

/// `FindMatchingVolume`: `volume.Spec.ClaimRef != nil && !IsVolumeBoundToClaim` → skipped, also
/// when the claimRef's fields are empty or hold only a uid.
#[test]
fn a_claim_ref_naming_another_claim_reserves_the_volume() {
    for cr in [
        r("default", "other", None),
        r("", "", None),
        r("", "", Some("u-9")),
        r("", "data", None),
    ] {
        let inv = class_fast()
            .volume(crate::model::PersistentVolume {
                claim_ref: Some(cr.clone()),
                ..pv("reserved", Some("fast"), gib(5)).into()
            })
            .build();
        let (d, trace) = resolve_one(&inv, claim_volume("v", claim("data").class_named("fast")), &[]);
        assert_eq!(d.action, Some(Action::Provision), "{cr:?}");
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "reserved"),
            [codes::CLAIMED_BY_OTHER],
            "{cr:?}"
        );
    }
}

/// `findByClaim`: the pre-bound volume wins only within the first access-mode set holding a
/// match; a matching volume with fewer modes comes first.
#[test]
fn prebound_wins_only_within_the_access_mode_search_order() {
    let inv = class_fast()
        .volume(pv("rwo", Some("fast"), gib(9)))
        .volume(
            pv("mine", Some("fast"), gib(5))
                .modes(&[RWO, RWX])
                .claim_ref("default", "data", None),
        )
        .build();
    let (d, _) = resolve_one(&inv, claim_volume("v", claim("data").class_named("fast")), &[]);
    assert_eq!(
        d.volume.as_deref(),
        Some("rwo"),
        "the RWO set is searched before RWO+RWX"
    );
    // Within one set the pre-bound volume wins over a smaller one.
    let inv = class_fast()
        .volume(pv("small", Some("fast"), gib(1)))
        .volume(pv("mine", Some("fast"), gib(50)).claim_ref("default", "data", None))
        .build();
    let (d, _) = resolve_one(&inv, claim_volume("v", claim("data").class_named("fast")), &[]);
    assert_eq!(d.volume.as_deref(), Some("mine"));
}

/// `FindMatchingVolume` returns a pre-bound volume before its class check: a volume pre-bound
/// to the claim binds even when its class differs from the claim's.
#[test]
fn prebound_is_returned_before_the_class_check() {
    let inv = class_fast()
        .volume(pv("mine", Some("slow"), gib(5)).claim_ref("default", "data", None))
        .volume(pv("theirs", Some("slow"), gib(5)))
        .build();
    let (d, trace) = resolve_one(&inv, claim_volume("v", claim("data").class_named("fast")), &[]);
    assert_eq!((d.action, d.volume.as_deref()), (Some(Action::Bind), Some("mine")));
    assert_eq!(
        rejected_codes(&trace, stages::BINDING_CANDIDATES, "theirs"),
        [codes::CLASS_MISMATCH]
    );
}

/// `FindMatchingVolume` checks a pre-bound volume's capacity, volume mode and deletion, but not
/// its phase (the phase check comes after the pre-bound return).
#[test]
fn prebound_needs_capacity_mode_and_no_deletion_but_any_phase() {
    let inv = class_fast()
        .volume(
            pv("mine", Some("fast"), gib(5))
                .claim_ref("default", "data", None)
                .phase(VolumePhase::Released),
        )
        .build();
    let (d, _) = resolve_one(&inv, claim_volume("v", claim("data").class_named("fast")), &[]);
    assert_eq!(d.volume.as_deref(), Some("mine"));
    let inv = class_fast()
        .volume(
            pv("mine", Some("fast"), gib(5))
                .claim_ref("default", "data", None)
                .deleting(),
        )
        .build();
    let (d, trace) = resolve_one(&inv, claim_volume("v", claim("data").class_named("fast")), &[]);
    assert_eq!(d.action, Some(Action::Provision));
    assert_eq!(
        rejected_codes(&trace, stages::BINDING_MATCH, "mine"),
        [codes::BEING_DELETED]
    );
}
