//! Step 5 (docs/design.md §2; the Kubernetes volume provisioning design "the controller attempts to find an existing volume that will
//! fulfill the claim", with Kubernetes' own matching order): bind before provisioning.
//!
//! The rules are Kubernetes' (component-helpers `storage/volume/pv_helpers.go`:
//! `FindMatchingVolume`, `IsVolumeBoundToClaim`; `pkg/controller/volume/persistentvolume/index.go`:
//! `findByClaim`). Two stages, both recording every reason:
//! - `binding.candidates`: class equality. Only volumes whose class equals the request's class
//!   are considered (`Some(c)` ↔ volumes of class `c`; `None` ↔ volumes with no class) — except
//!   a volume pre-bound to this claim, which `FindMatchingVolume` returns before its class check.
//! - `binding.match`: not being deleted, not reserved by another request (or an earlier volume
//!   of this workflow), capacity >= request (exact bytes), same volume mode, access modes a
//!   superset of the request's (`findByClaim` only searches such access-mode sets), and the
//!   claim's `volumeName` when it has one; for a volume not pre-bound to this claim also: no
//!   claimRef at all (a claimRef naming anything else, even with empty fields, reserves the
//!   volume), phase Available and every selector requirement met.
//!
//! A volume is pre-bound to a claim when its claimRef's name and namespace equal the claim's,
//! exactly (no defaulting), and, when the claimRef has a non-empty uid, the claim's uid equals
//! it (`IsVolumeBoundToClaim`).
//!
//! Choice (`findByClaim`): the fitting volumes are grouped by their exact access-mode set,
//! groups with fewer modes first (equal counts: by the set's canonical order); the first group
//! with a fit decides: its volume pre-bound to this claim if it has one, else its smallest
//! volume (ties: inventory order) — the Kubernetes volume provisioning design "the smallest matching volume". A pre-bound volume
//! in a later group does not beat a fit in an earlier one.

use crate::decision::{Reason, codes};
use crate::funnel::trace::Trace;
use crate::funnel::trace::run_filter;
use crate::model::{Claim, ClaimRef, PersistentVolume, VolumePhase};
use crate::rule::ReasonSink;

use super::{Ctx, Need, stages};

/// What binding found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BindOutcome<'a> {
    /// The volume to bind, if one fits.
    pub volume: Option<&'a PersistentVolume>,
    /// With a `volumeName` and nothing bound: every reason that volume was rejected (class
    /// included); `None` when no volume has that name.
    pub named_reasons: Option<Vec<Reason>>,
}

/// True when `r` names `claim`, by Kubernetes' `IsVolumeBoundToClaim` (component-helpers
/// `storage/volume/pv_helpers.go`): name and namespace equal, exactly; a non-empty claimRef uid
/// must equal the claim's uid (a claim without one does not match it).
pub fn claim_ref_names(r: &ClaimRef, claim: &Claim) -> bool {
    r.namespace == claim.namespace
        && r.name == claim.name
        && match r.uid.as_deref() {
            None | Some("") => true,
            Some(u) => claim.uid.as_deref() == Some(u),
        }
}

/// Runs both binding stages for `need` against the volumes of `class`, honouring
/// `volume_name` (the only volume a claim with `spec.volumeName` may bind).
pub(crate) fn bind<'a>(
    ctx: &Ctx<'a>,
    need: &Need<'_>,
    class: Option<&str>,
    volume_name: Option<&str>,
    trace: &mut Trace,
) -> BindOutcome<'a> {
    let all: Vec<&'a PersistentVolume> = ctx.inv.volumes.iter().map(|v| &**v).collect();
    let first_stage = trace.len();
    let of_class = run_filter(
        trace,
        stages::BINDING_CANDIDATES,
        need.key,
        all,
        |v| v.name.clone(),
        |v, out| {
            // FindMatchingVolume returns a volume pre-bound to the claim before its class check.
            if v.provisioner.as_deref() != class && !prebound(need, v) {
                out.push(Reason::new(
                    codes::CLASS_MISMATCH,
                    format!(
                        "volume class {}, request wants class {}",
                        show_class(v.provisioner.as_deref()),
                        show_class(class)
                    ),
                ));
            }
        },
    );
    let fits = run_filter(
        trace,
        stages::BINDING_MATCH,
        need.key,
        of_class,
        |v| v.name.clone(),
        |v, out| match_reasons(ctx, need, volume_name, v, out),
    );
    let volume = choose(need, &fits);
    let named_reasons = match (volume, volume_name) {
        (None, Some(n)) if ctx.inv.volumes.iter().any(|v| v.name == n) => Some(
            trace[first_stage..]
                .iter()
                .flat_map(|t| &t.rejected)
                .filter(|r| r.candidate == n)
                .flat_map(|r| r.reasons.iter().cloned())
                .collect(),
        ),
        _ => None,
    };
    BindOutcome { volume, named_reasons }
}

/// `"fast"` or `(none)`, for messages.
pub fn show_class(class: Option<&str>) -> String {
    match class {
        Some(c) => format!("`{c}`"),
        None => "(none)".to_string(),
    }
}

fn prebound(need: &Need<'_>, v: &PersistentVolume) -> bool {
    match (need.claim, &v.claim_ref) {
        (Some(c), Some(r)) => claim_ref_names(r, c),
        _ => false,
    }
}

/// Every reason `v` cannot be bound for `need` (see the module docs for the rules).
fn match_reasons(
    ctx: &Ctx<'_>,
    need: &Need<'_>,
    volume_name: Option<&str>,
    v: &PersistentVolume,
    out: &mut impl ReasonSink,
) {
    let pre = prebound(need, v);
    // FindMatchingVolume returns a pre-bound volume before it looks at the phase.
    if !pre && v.phase != VolumePhase::Available {
        out.push_reason(Reason::new(
            codes::NOT_AVAILABLE,
            format!("volume is {:?}, not Available", v.phase),
        ));
    }
    if !pre && let Some(r) = &v.claim_ref {
        out.push_reason(Reason::new(
            codes::CLAIMED_BY_OTHER,
            format!("volume is pre-bound to claim {}", describe_ref(r)),
        ));
    }
    if v.being_deleted {
        out.push_reason(Reason::new(codes::BEING_DELETED, "volume is being deleted"));
    }
    if let Some(r) = ctx.held_elsewhere(v) {
        out.push_reason(r);
    }
    if v.capacity < need.size {
        out.push_reason(Reason::new(
            codes::CAPACITY,
            format!("capacity {} is smaller than the requested {}", v.capacity, need.size),
        ));
    }
    if v.volume_mode != need.volume_mode {
        out.push_reason(Reason::new(
            codes::VOLUME_MODE,
            format!("volume mode {:?}, request wants {:?}", v.volume_mode, need.volume_mode),
        ));
    }
    if !v.access_modes.is_superset_of(need.access_modes) {
        out.push_reason(Reason::new(
            codes::ACCESS_MODES,
            format!(
                "volume offers access modes {}, request needs {}",
                v.access_modes.describe(),
                need.access_modes.describe()
            ),
        ));
    }
    if !pre && let Some(sel) = need.selector {
        for f in sel.failures(&v.labels) {
            out.push_reason(Reason::new(codes::SELECTOR, f));
        }
    }
    if let Some(n) = volume_name
        && v.name != n
    {
        out.push_reason(Reason::new(
            codes::VOLUME_NAME,
            format!("the claim's volumeName is `{n}`"),
        ));
    }
}

/// `findByClaim`'s order: the first access-mode group (fewest modes, then the set's canonical
/// order) holding a fit decides; within it the volume pre-bound to this claim, else the smallest
/// capacity (ties: inventory order).
fn choose<'a>(need: &Need<'_>, fits: &[&'a PersistentVolume]) -> Option<&'a PersistentVolume> {
    let group = fits.iter().map(|v| (v.access_modes.len(), v.access_modes)).min()?;
    let in_group = || {
        fits.iter()
            .filter(move |v| (v.access_modes.len(), v.access_modes) == group)
    };
    in_group()
        .find(|v| prebound(need, v))
        .or_else(|| in_group().min_by_key(|v| v.capacity))
        .copied()
}

/// A claimRef for messages: `namespace/name`, with the uid when it has one; empty fields are
/// shown as `""`.
fn describe_ref(r: &ClaimRef) -> String {
    let show = |s: &str| {
        if s.is_empty() {
            "\"\"".to_string()
        } else {
            s.to_string()
        }
    };
    match r.uid.as_deref() {
        Some(u) if !u.is_empty() => format!("{}/{} (uid {u})", show(&r.namespace), show(&r.name)),
        _ => format!("{}/{}", show(&r.namespace), show(&r.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::decision::Action;
    use crate::funnel::{ClusterState, VolumeId};
    use crate::model::SelectorOperator::*;

    fn class_fast() -> InvBuilder {
        inventory("a").provisioner(storage_class("fast", "ebs.csi.aws.com"))
    }

    fn bind_claim(
        inv: &crate::model::Inventory,
        c: ClaimBuilder,
    ) -> (crate::decision::VolumeDecision, Vec<crate::decision::StageTrace>) {
        resolve_one(inv, claim_volume("data", c), &[])
    }

    #[test]
    fn smallest_matching_volume_wins_ties_by_inventory_order() {
        let inv = class_fast()
            .volume(pv("big", Some("fast"), gib(100)))
            .volume(pv("too-small", Some("fast"), gib(4)))
            .volume(pv("snug-1", Some("fast"), gib(10)))
            .volume(pv("snug-2", Some("fast"), gib(10)))
            .volume(pv("other-class", Some("slow"), gib(5)))
            .build();
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast").size(gib(5)));
        assert_eq!((d.action, d.volume.as_deref()), (Some(Action::Bind), Some("snug-1")));
        assert_eq!(d.provisioner.as_deref(), Some("fast"));
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_CANDIDATES, "other-class"),
            [codes::CLASS_MISMATCH]
        );
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "too-small"),
            [codes::CAPACITY]
        );
        assert_eq!(stage(&trace, stages::BINDING_MATCH).passed, 3);
    }

    #[test]
    fn capacity_is_exact_bytes() {
        let inv = class_fast().volume(pv("exact", Some("fast"), gib(5))).build();
        let (d, _) = bind_claim(&inv, claim("c").class_named("fast").size(gib(5)));
        assert_eq!(d.volume.as_deref(), Some("exact"));
        let (d, _) = bind_claim(
            &inv,
            claim("c").class_named("fast").size(crate::size::ByteSize(gib(5).0 + 1)),
        );
        assert_eq!(d.action, Some(Action::Provision));
    }

    #[test]
    fn access_mode_groups_are_searched_fewest_modes_first() {
        let inv = class_fast()
            .volume(pv("rwo-rwx-small", Some("fast"), gib(5)).modes(&[RWO, RWX]))
            .volume(pv("rwo-big", Some("fast"), gib(50)).modes(&[RWO]))
            .volume(pv("rwx-only", Some("fast"), gib(5)).modes(&[RWX]))
            .build();
        // RWO group (1 mode) beats the smaller RWO+RWX volume (2 modes).
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast").size(gib(5)).modes(&[RWO]));
        assert_eq!(d.volume.as_deref(), Some("rwo-big"));
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "rwx-only"),
            [codes::ACCESS_MODES]
        );
        // A claim for RWO+RWX can only use the superset.
        let (d, _) = bind_claim(&inv, claim("c").class_named("fast").size(gib(5)).modes(&[RWO, RWX]));
        assert_eq!(d.volume.as_deref(), Some("rwo-rwx-small"));
    }

    #[test]
    fn volume_mode_must_be_equal() {
        let inv = class_fast()
            .volume(pv("blk", Some("fast"), gib(5)).block())
            .volume(pv("fs", Some("fast"), gib(9)))
            .build();
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast"));
        assert_eq!(d.volume.as_deref(), Some("fs"));
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "blk"),
            [codes::VOLUME_MODE]
        );
        let (d, _) = bind_claim(&inv, claim("c").class_named("fast").block());
        assert_eq!(d.volume.as_deref(), Some("blk"));
    }

    #[test]
    fn prebound_volume_wins_within_its_access_mode_group() {
        let inv = class_fast()
            .volume(pv("snug", Some("fast"), gib(5)))
            .volume(pv("mine", Some("fast"), gib(50)).claim_ref("default", "c", None))
            .volume(pv("theirs", Some("fast"), gib(5)).claim_ref("default", "other", None))
            .build();
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast").size(gib(5)));
        assert_eq!(d.volume.as_deref(), Some("mine"));
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "theirs"),
            [codes::CLAIMED_BY_OTHER]
        );
        // Uid pins the claim: a different uid is another claim.
        let inv = class_fast()
            .volume(pv("snug", Some("fast"), gib(5)))
            .volume(pv("old", Some("fast"), gib(50)).claim_ref("default", "c", Some("uid-1")))
            .build();
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast").uid("uid-2"));
        assert_eq!(d.volume.as_deref(), Some("snug"));
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "old"),
            [codes::CLAIMED_BY_OTHER]
        );
        let (d, _) = bind_claim(&inv, claim("c").class_named("fast").uid("uid-1"));
        assert_eq!(d.volume.as_deref(), Some("old"));
    }

    #[test]
    fn prebound_volume_still_needs_capacity_and_mode() {
        let inv = class_fast()
            .volume(
                pv("mine", Some("fast"), gib(1))
                    .claim_ref("default", "c", None)
                    .label("tier", "bronze"),
            )
            .volume(pv("other", Some("fast"), gib(9)).label("tier", "gold"))
            .build();
        let gold = selector(&[("tier", "gold")], vec![]);
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast").size(gib(5)).selector(gold.clone()));
        assert_eq!(d.volume.as_deref(), Some("other"));
        assert_eq!(rejected_codes(&trace, stages::BINDING_MATCH, "mine"), [codes::CAPACITY]);
        // The selector does not apply to the administrator's explicit pre-binding.
        let (d, _) = bind_claim(&inv, claim("c").class_named("fast").size(gib(1)).selector(gold));
        assert_eq!(d.volume.as_deref(), Some("mine"));
    }

    #[test]
    fn volume_name_allows_only_that_volume_and_never_provisions() {
        let inv = class_fast()
            .volume(pv("small", Some("fast"), gib(5)))
            .volume(pv("wanted", Some("fast"), gib(50)))
            .volume(pv("tiny", Some("fast"), gib(1)))
            .build();
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast").volume_name("wanted"));
        assert_eq!(d.volume.as_deref(), Some("wanted"));
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "small"),
            [codes::VOLUME_NAME]
        );
        let (d, _) = bind_claim(&inv, claim("c").class_named("fast").volume_name("tiny").size(gib(2)));
        let err = d.error.expect("tiny is too small");
        assert_eq!(err.code, codes::CAPACITY);
        assert_eq!(d.action, None);
        let (d, _) = bind_claim(&inv, claim("c").class_named("fast").volume_name("ghost"));
        assert_eq!(d.error.expect("absent").code, codes::NO_SUCH_VOLUME);
    }

    #[test]
    fn match_expressions_in_notin_exists_doesnotexist() {
        let inv = class_fast()
            .volume(
                pv("east", Some("fast"), gib(5))
                    .label("region", "east")
                    .label("ssd", ""),
            )
            .volume(pv("north", Some("fast"), gib(6)).label("region", "north"))
            .volume(pv("bare", Some("fast"), gib(7)))
            .build();
        let pick = |exprs: Vec<crate::model::LabelRequirement>| {
            bind_claim(&inv, claim("c").class_named("fast").selector(selector(&[], exprs)))
                .0
                .volume
        };
        assert_eq!(
            pick(vec![req("region", In, &["north", "south"])]).as_deref(),
            Some("north")
        );
        // NotIn matches volumes without the label too.
        assert_eq!(pick(vec![req("region", NotIn, &["east"])]).as_deref(), Some("north"));
        assert_eq!(
            pick(vec![req("region", NotIn, &["east", "north"])]).as_deref(),
            Some("bare")
        );
        assert_eq!(pick(vec![req("ssd", Exists, &[])]).as_deref(), Some("east"));
        assert_eq!(pick(vec![req("region", DoesNotExist, &[])]).as_deref(), Some("bare"));
        let (_, trace) = bind_claim(
            &inv,
            claim("c")
                .class_named("fast")
                .selector(selector(&[("region", "west")], vec![req("ssd", Exists, &[])])),
        );
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "north"),
            [codes::SELECTOR, codes::SELECTOR]
        );
        assert_eq!(rejected_codes(&trace, stages::BINDING_MATCH, "east"), [codes::SELECTOR]);
    }

    #[test]
    fn reserved_by_another_request_is_skipped_but_the_same_request_may_replay() {
        let inv = class_fast()
            .volume(pv("pv-1", Some("fast"), gib(5)))
            .volume(pv("pv-2", Some("fast"), gib(9)))
            .build();
        let mut state = ClusterState::default();
        state.reserved_volumes.insert(
            VolumeId {
                provisioner: Some("fast".into()),
                name: "pv-1".into(),
            },
            "req-other".into(),
        );
        let (d, trace) = resolve_with(&inv, &state, claim_volume("data", claim("c").class_named("fast")), &[]);
        assert_eq!(d.volume.as_deref(), Some("pv-2"));
        let codes_pv1 = rejected_codes(&trace, stages::BINDING_MATCH, "pv-1");
        assert_eq!(codes_pv1, [codes::RESERVED]);
        state.reserved_volumes.insert(
            VolumeId {
                provisioner: Some("fast".into()),
                name: "pv-1".into(),
            },
            "req-1".into(),
        );
        let (d, _) = resolve_with(&inv, &state, claim_volume("data", claim("c").class_named("fast")), &[]);
        assert_eq!(d.volume.as_deref(), Some("pv-1"));
    }

    #[test]
    fn being_deleted_and_unavailable_volumes_record_every_reason() {
        let inv = class_fast()
            .volume(
                pv("doomed", Some("fast"), gib(1))
                    .deleting()
                    .phase(VolumePhase::Released)
                    .block(),
            )
            .build();
        let (d, trace) = bind_claim(&inv, claim("c").class_named("fast").size(gib(5)));
        assert_eq!(d.action, Some(Action::Provision));
        assert_eq!(
            rejected_codes(&trace, stages::BINDING_MATCH, "doomed"),
            [
                codes::NOT_AVAILABLE,
                codes::BEING_DELETED,
                codes::CAPACITY,
                codes::VOLUME_MODE
            ]
        );
    }

    #[test]
    fn fuzzball_requests_never_bind_an_existing_volume() {
        // A nameless scratch request must not capture someone's Available dataset: it provisions.
        let inv = inventory("a")
            .provisioner(prov("std", nfs()).ephemeral_all())
            .volume(pv("someones-dataset", Some("std"), gib(50)))
            .build();
        let (d, trace) = resolve_one(
            &inv,
            fb_volume(
                "scratch",
                FbSpec {
                    size: Some(gib(5)),
                    ..Default::default()
                },
            ),
            &[],
        );
        assert_eq!(d.action, Some(Action::Provision));
        assert!(d.volume.as_deref().is_some_and(|n| n.starts_with("pvc-")), "{d:?}");
        assert!(!trace.iter().any(|t| t.stage == stages::BINDING_MATCH));
    }
}
