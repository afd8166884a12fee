//! Step 4 (docs/design.md §2; Fuzzball "Annotations and Selection"): automatic provisioner selection for
//! volumes with `size`/`annotations` only, `use: ephemeral`, `use: persistent`, or nothing.
//!
//! Every provisioner, in inventory order, goes through three checks, each its own stage:
//! `provisioner.status` (READY), `provisioner.annotations` (every requested key present with an
//! identical value) and `provisioner.permission` (the operation: `ephemeral`, or `create` for
//! `use: persistent`). Each check is evaluated for **every** provisioner, so a rejected
//! provisioner shows every check it failed, not just the first. The first provisioner that
//! passes all three wins (Fuzzball "Annotations and Selection"); the decision's `passed` says how many did. `size` is not a
//! selection criterion (Fuzzball "Annotations and Selection"); it only sizes a bound or provisioned volume.
//!
//! `use: persistent` with `name:` first searches for an existing accessible volume with that
//! name (stage `volume.by_name`): one → `existing`, several → `ambiguous_volume`; only when none
//! exists is a provisioner selected to create it under that name. Requests without a name bind
//! an Available volume of the chosen provisioner when one fits (step 5), else provision (step 6).

use std::collections::BTreeMap;

use crate::decision::{Mode, Reason, VolumeDecision, codes};
use crate::funnel::trace::Trace;
use crate::funnel::trace::run_filter;
use crate::model::{FuzzballVolume, Operation, Provisioner, VolumeRequest};

use super::by_name::{self, Search};
use super::provision::{self, NewName};
use super::{Ctx, Need, checks, failed, provision_new, stages};

/// Resolves an automatic volume (mode `automatic`).
pub(crate) fn resolve(
    ctx: &Ctx<'_>,
    v: &VolumeRequest,
    fb: &FuzzballVolume,
    persistent: bool,
    trace: &mut Trace,
) -> VolumeDecision {
    let mode = Mode::Automatic;
    let op = if persistent {
        Operation::Create
    } else {
        Operation::Ephemeral
    };
    let name = if persistent { fb.name.as_deref() } else { None };
    if let Some(n) = name {
        match by_name::search(ctx, &v.key, n, &fb.annotations, trace) {
            Search::One(p, vol) => return by_name::existing(mode, &v.key, p, vol, trace),
            Search::Many(r) => return failed(mode, None, r),
            Search::None(_) => {}
        }
    }
    let selection = select(ctx, &v.key, &fb.annotations, op, trace);
    let passed = selection.passing.len();
    let Some(p) = selection.passing.first() else {
        return VolumeDecision {
            passed: Some(0),
            ..failed(mode, None, selection.no_provisioner(ctx, op))
        };
    };
    let need = Need::fuzzball(v, fb);
    let mut d = match name {
        Some(n) => provision::decide(ctx, mode, &need, p, op, NewName::Requested(n.to_string()), trace),
        None => provision_new(ctx, mode, &need, p, op, trace),
    };
    d.passed = Some(passed);
    d
}

/// The outcome of Fuzzball "Annotations and Selection" selection.
#[derive(Debug, Clone)]
pub(crate) struct Selection<'a> {
    /// Provisioners that passed every check, in inventory order (the first wins).
    pub passing: Vec<&'a Provisioner>,
    /// Every other provisioner with the codes of every check it failed, in inventory order.
    pub failing: Vec<(String, Vec<String>)>,
}

impl Selection<'_> {
    /// The `no_provisioner` error, summarising each provisioner's failed checks.
    fn no_provisioner(&self, ctx: &Ctx<'_>, op: Operation) -> Reason {
        if self.failing.is_empty() {
            return Reason::new(
                codes::NO_PROVISIONER,
                format!("cluster `{}` has no provisioners", ctx.inv.cluster),
            );
        }
        let each: Vec<String> = self
            .failing
            .iter()
            .map(|(p, cs)| format!("`{p}`: {}", cs.join(", ")))
            .collect();
        Reason::new(
            codes::NO_PROVISIONER,
            format!(
                "no provisioner passed the status, annotation and `{}` permission checks ({} considered): {}",
                op.as_str(),
                self.failing.len(),
                each.join("; ")
            ),
        )
    }
}

/// Runs the three Fuzzball "Annotations and Selection" checks over every provisioner (stages `provisioner.status`,
/// `provisioner.annotations`, `provisioner.permission`, each recording all its reasons) and
/// returns those that passed all three.
pub(crate) fn select<'a>(
    ctx: &Ctx<'a>,
    key: &str,
    wanted: &BTreeMap<String, String>,
    op: Operation,
    trace: &mut Trace,
) -> Selection<'a> {
    let provs = &ctx.inv.provisioners;
    // Every check for every provisioner, computed once: [status, annotations, permission].
    let per: Vec<[Vec<Reason>; 3]> = provs
        .iter()
        .map(|p| {
            let (mut s, mut a, mut g) = (Vec::new(), Vec::new(), Vec::new());
            checks::status(p, &mut s);
            checks::annotations(wanted, &p.annotations, &mut a);
            checks::permission(p, op, ctx.user(), ctx.groups(), &mut g);
            [s, a, g]
        })
        .collect();
    let all: Vec<usize> = (0..provs.len()).collect();
    let name = |i: &usize| provs.get(*i).map(|p| p.name.clone()).unwrap_or_default();
    for (k, stage) in [stages::STATUS, stages::ANNOTATIONS, stages::PERMISSION]
        .into_iter()
        .enumerate()
    {
        run_filter(trace, stage, key, all.clone(), name, |i, out| {
            if let Some(rs) = per.get(*i).and_then(|checks| checks.get(k)) {
                out.extend(rs.iter().cloned());
            }
        });
    }
    let mut passing = Vec::new();
    let mut failing = Vec::new();
    for (p, checks) in provs.iter().zip(&per) {
        let failed_codes: Vec<String> = checks.iter().flatten().map(|r| r.code.clone()).collect();
        if failed_codes.is_empty() {
            passing.push(p);
        } else {
            failing.push((p.name.clone(), failed_codes));
        }
    }
    Selection { passing, failing }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::decision::Action;
    use crate::model::{AccessPolicy, Inventory, ProvisionerStatus};

    fn fast(annotations: &[(&str, &str)]) -> FbSpec<'static> {
        FbSpec {
            annotations: ann(annotations),
            ..Default::default()
        }
    }

    /// Fuzzball "Annotations and Selection"'s fast-tier / standard-tier inventory.
    fn tiers() -> Inventory {
        inventory("a")
            .provisioner(prov("fast-tier", hostpath()).annotate("tier", "fast").ephemeral_all())
            .provisioner(
                prov("standard-tier", nfs())
                    .annotate("tier", "standard")
                    .access_all()
                    .ephemeral_all(),
            )
            .build()
    }

    #[test]
    fn annotations_pick_the_tier() {
        let (d, trace) = resolve_one(&tiers(), fb_volume("scratch", fast(&[("tier", "fast")])), &[]);
        assert_eq!(d.mode, Mode::Automatic);
        assert_eq!(
            (d.provisioner.as_deref(), d.action, d.passed),
            (Some("fast-tier"), Some(Action::Provision), Some(1))
        );
        assert_eq!(
            rejected_codes(&trace, stages::ANNOTATIONS, "standard-tier"),
            [codes::ANNOTATION_MISMATCH]
        );
        let (d, _) = resolve_one(&tiers(), fb_volume("scratch", fast(&[("tier", "standard")])), &[]);
        assert_eq!(d.provisioner.as_deref(), Some("standard-tier"));
    }

    #[test]
    fn no_annotations_takes_the_first_passing_and_counts_all_that_passed() {
        let (d, trace) = resolve_one(&tiers(), fb_volume("scratch", FbSpec::default()), &[]);
        assert_eq!((d.provisioner.as_deref(), d.passed), (Some("fast-tier"), Some(2)));
        assert_eq!(stage(&trace, stages::ANNOTATIONS).passed, 2);
    }

    #[test]
    fn size_is_not_a_selection_criterion() {
        let inv = inventory("a")
            .provisioner(prov("tiny", nfs()).ephemeral_all().max_size(gib(1)))
            .provisioner(prov("huge", nfs()).ephemeral_all())
            .build();
        let (d, trace) = resolve_one(
            &inv,
            fb_volume(
                "s",
                FbSpec {
                    size: Some(gib(10)),
                    ..Default::default()
                },
            ),
            &[],
        );
        // tiny is selected (first passing); its size limit then refuses provisioning.
        assert_eq!(d.provisioner.as_deref(), Some("tiny"));
        assert_eq!(d.passed, Some(2));
        assert_eq!(d.error.expect("too big").code, codes::PROVISIONING_REFUSED);
        assert_eq!(stage(&trace, stages::STATUS).passed, 2);
    }

    /// Fuzzball "Annotations and Selection"'s `workspace` volume: size 50GB, purpose=work, ephemeral.
    #[test]
    fn purpose_work_workspace_selects_work_storage() {
        let inv = inventory("a")
            .provisioner(prov("work-storage", nfs()).annotate("purpose", "work").ephemeral_all())
            .provisioner(
                prov("archive-storage", nfs())
                    .annotate("purpose", "archive")
                    .access_all(),
            )
            .build();
        let spec = FbSpec {
            size: Some(crate::size::ByteSize(50_000_000_000)),
            annotations: ann(&[("purpose", "work")]),
            ..Default::default()
        };
        let (d, trace) = resolve_one(&inv, fb_volume("workspace", spec), &[]);
        assert_eq!(d.provisioner.as_deref(), Some("work-storage"));
        let nv = d.new_volume.expect("ephemeral volume");
        assert!(nv.ephemeral);
        assert_eq!(nv.capacity.0, 50_000_000_000);
        // archive-storage fails both the annotation and the ephemeral permission: both recorded.
        assert_eq!(
            rejected_codes(&trace, stages::ANNOTATIONS, "archive-storage"),
            [codes::ANNOTATION_MISMATCH]
        );
        assert_eq!(
            rejected_codes(&trace, stages::PERMISSION, "archive-storage"),
            [codes::PERMISSION_DENIED]
        );
    }

    #[test]
    fn every_check_is_evaluated_for_every_provisioner() {
        let inv = inventory("a")
            .provisioner(
                prov("broken", nfs())
                    .status(ProvisionerStatus::Disabled)
                    .annotate("tier", "slow"),
            )
            .provisioner(prov("ok", nfs()).annotate("tier", "fast").ephemeral_all())
            .build();
        let (d, trace) = resolve_one(
            &inv,
            fb_volume("s", fast(&[("tier", "fast"), ("region", "us-west")])),
            &[],
        );
        // Nothing passes: `ok` lacks region.
        let err = d.error.expect("none");
        assert_eq!(err.code, codes::NO_PROVISIONER);
        assert_eq!(d.passed, Some(0));
        assert!(
            err.message
                .contains("`broken`: not_ready, annotation_missing, annotation_mismatch, permission_denied")
        );
        assert!(err.message.contains("`ok`: annotation_missing"));
        assert_eq!(rejected_codes(&trace, stages::STATUS, "broken"), [codes::NOT_READY]);
        assert_eq!(
            rejected_codes(&trace, stages::ANNOTATIONS, "broken"),
            [codes::ANNOTATION_MISSING, codes::ANNOTATION_MISMATCH]
        );
        assert_eq!(
            rejected_codes(&trace, stages::PERMISSION, "broken"),
            [codes::PERMISSION_DENIED]
        );
        for s in [stages::STATUS, stages::ANNOTATIONS, stages::PERMISSION] {
            assert_eq!(stage(&trace, s).considered, 2);
        }
    }

    #[test]
    fn status_and_permission_filter_with_default_deny_and_create_implies() {
        let inv = inventory("a")
            .provisioner(
                prov("off", nfs())
                    .ephemeral_all()
                    .status(ProvisionerStatus::Provisioning),
            )
            .provisioner(prov("no-policy", nfs()))
            .provisioner(prov("creators", nfs()).create(AccessPolicy::Groups(["physics".to_string()].into())))
            .build();
        let (d, _) = resolve_one(&inv, fb_volume("s", FbSpec::default()), &["physics"]);
        assert_eq!((d.provisioner.as_deref(), d.passed), (Some("creators"), Some(1)));
        let (d, trace) = resolve_one(&inv, fb_volume("s", FbSpec::default()), &["chem"]);
        assert_eq!(d.error.expect("denied").code, codes::NO_PROVISIONER);
        assert_eq!(
            rejected_codes(&trace, stages::PERMISSION, "no-policy"),
            [codes::PERMISSION_DENIED]
        );
    }

    #[test]
    fn persistent_needs_create() {
        let inv = inventory("a")
            .provisioner(prov("eph", nfs()).ephemeral_all().access_all())
            .provisioner(prov("pers", nfs()).create_all())
            .build();
        let spec = FbSpec {
            use_: Some("persistent"),
            name: Some("my-archive"),
            ..Default::default()
        };
        let (d, _) = resolve_one(&inv, fb_volume("results", spec), &[]);
        assert_eq!(
            (d.provisioner.as_deref(), d.action, d.passed),
            (Some("pers"), Some(Action::Provision), Some(1))
        );
        let nv = d.new_volume.expect("new");
        assert_eq!(nv.name, "my-archive");
        assert!(!nv.ephemeral);
    }

    #[test]
    fn persistent_with_existing_name_uses_it_and_ambiguity_is_an_error() {
        let inv = inventory("a")
            .provisioner(prov("pers", nfs()).create_all())
            .provisioner(prov("other", nfs()).access_all())
            .volume(pv("my-archive", Some("other"), gib(1)))
            .build();
        let spec = || FbSpec {
            use_: Some("persistent"),
            name: Some("my-archive"),
            ..Default::default()
        };
        let (d, trace) = resolve_one(&inv, fb_volume("results", spec()), &[]);
        assert_eq!(
            (d.action, d.provisioner.as_deref(), d.passed),
            (Some(Action::Existing), Some("other"), None)
        );
        assert!(trace.iter().all(|t| t.stage != stages::STATUS));
        let mut inv2 = inv.clone();
        inv2.volumes
            .push(std::sync::Arc::new(pv("my-archive", Some("pers"), gib(1)).into()));
        let (d, _) = resolve_one(&inv2, fb_volume("results", spec()), &[]);
        assert_eq!(d.error.expect("ambiguous").code, codes::AMBIGUOUS_VOLUME);
    }

    /// Fuzzball "Annotations and Selection"'s federated example: the same `tier: fast` request lands on a hostpath
    /// provisioner on cluster A and on EFS on cluster B.
    #[test]
    fn federated_same_annotations_different_backends() {
        let a = inventory("cluster-a")
            .provisioner(
                prov("fast-storage", hostpath())
                    .annotate("tier", "fast")
                    .ephemeral_all(),
            )
            .build();
        let b = inventory("cluster-b")
            .provisioner(prov("slow-storage", nfs()).annotate("tier", "slow").ephemeral_all())
            .provisioner(
                prov("fast-storage", efs("fs-12345678"))
                    .annotate("tier", "fast")
                    .ephemeral_all(),
            )
            .build();
        let v = || fb_volume("scratch", fast(&[("tier", "fast")]));
        let (da, _) = resolve_one(&a, v(), &[]);
        let (db, _) = resolve_one(&b, v(), &[]);
        let driver_of = |inv: &Inventory, d: &crate::decision::VolumeDecision| {
            let name = d.provisioner.clone().expect("chosen");
            inv.provisioners
                .iter()
                .find(|p| p.name == name)
                .map(|p| p.driver.kind())
                .expect("exists")
        };
        assert_eq!(driver_of(&a, &da), "hostpath");
        assert_eq!(driver_of(&b, &db), "efs");
        assert_eq!(
            da.new_volume.expect("a").annotations[provision::PROVISIONED_BY],
            "hostpath"
        );
        assert_eq!(db.new_volume.expect("b").annotations[provision::PROVISIONED_BY], "efs");
        assert_ne!(da.volume, db.volume, "names include the cluster");
    }
}
