//! Step 2 (docs/design.md §2; Fuzzball "Annotations and Selection" "When a workflow specifies use: my-provisioner"): the named
//! provisioner is looked up directly and no selection runs.
//!
//! Stage `provisioner.named` (one candidate, the name as written) records every reason it
//! cannot be used: `no_such_provisioner` (with a "did you mean"), `not_ready`, and
//! `permission_denied` for the operation. The operation: with `name:`, `access` when that volume
//! exists on the provisioner, else `create` (the new persistent volume gets that name); without
//! `name:`, `ephemeral`.
//!
//! Status: Fuzzball "Annotations and Selection" runs no selection for named use, but a provisioner that is not READY
//! (DISABLED, ERROR, PROVISIONING) cannot serve a volume, so fedvol refuses it with `not_ready`
//! rather than hand out storage that cannot work.
//!
//! Then: an existing volume → stage `volume.existing`; a new named volume → step 6 with that
//! name; no name → bind an Available volume of the provisioner (step 5), else provision an
//! ephemeral one (step 6).

use crate::decision::{Mode, Reason, VolumeDecision, codes};
use crate::funnel::trace::Trace;
use crate::model::{FuzzballVolume, Operation, VolumeRequest};
use crate::suggest::closest;

use super::provision::{self, NewName};
use super::{Ctx, Need, by_name, checks, failed, provision_new, single, stages};

/// Resolves `use: <provisioner>` (mode `named`).
pub(crate) fn resolve(
    ctx: &Ctx<'_>,
    v: &VolumeRequest,
    fb: &FuzzballVolume,
    provisioner: &str,
    trace: &mut Trace,
) -> VolumeDecision {
    let mode = Mode::Named;
    let p = ctx.provisioner(provisioner);
    let name = fb.name.as_deref();
    let existing = match (p, name) {
        (Some(p), Some(n)) => ctx.volume_on(&p.name, n),
        _ => None,
    };
    let op = match (name, existing) {
        (Some(_), Some(_)) => Operation::Access,
        (Some(_), None) => Operation::Create,
        (None, _) => Operation::Ephemeral,
    };
    let mut reasons = Vec::new();
    match p {
        None => reasons.push(no_such_provisioner(ctx, provisioner)),
        Some(p) => {
            checks::status(p, &mut reasons);
            checks::permission(p, op, ctx.user(), ctx.groups(), &mut reasons);
            if let (Some(n), Operation::Create, Some(last)) = (name, op, reasons.last_mut())
                && last.code == codes::PERMISSION_DENIED
            {
                last.message
                    .push_str(&format!(" (volume `{n}` does not exist there, so it would be created)"));
            }
        }
    }
    let reasons = single(trace, stages::NAMED, &v.key, provisioner, reasons);
    let Some(p) = p else {
        return failed(mode, None, checks::combine(&reasons));
    };
    if !reasons.is_empty() {
        return failed(mode, Some(&p.name), checks::combine(&reasons));
    }
    let need = Need::fuzzball(v, fb);
    match (name, existing) {
        (Some(_), Some(vol)) => by_name::existing(mode, &v.key, p, vol, trace),
        (Some(n), None) => provision::decide(ctx, mode, &need, p, op, NewName::Requested(n.to_string()), trace),
        (None, _) => provision_new(ctx, mode, &need, p, op, trace),
    }
}

fn no_such_provisioner(ctx: &Ctx<'_>, name: &str) -> Reason {
    let hint = closest(name, ctx.inv.provisioners.iter().map(|p| p.name.as_str()))
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default();
    Reason::new(
        codes::NO_SUCH_PROVISIONER,
        format!("cluster `{}` has no provisioner named `{name}`{hint}", ctx.inv.cluster),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::decision::Action;
    use crate::model::{AccessPolicy, ProvisionerStatus};

    fn my_nfs() -> ProvBuilder {
        prov("my-nfs", nfs())
    }

    #[test]
    fn named_use_with_existing_volume_needs_access_only() {
        let inv = inventory("a")
            .provisioner(my_nfs().access_all())
            .volume(pv("project-data", Some("my-nfs"), gib(1)))
            .build();
        let spec = FbSpec {
            use_: Some("my-nfs"),
            name: Some("project-data"),
            ..Default::default()
        };
        let (d, trace) = resolve_one(&inv, fb_volume("data", spec), &[]);
        assert_eq!(d.mode, Mode::Named);
        assert_eq!(
            (d.action, d.volume.as_deref()),
            (Some(Action::Existing), Some("project-data"))
        );
        // No selection stages run for named use.
        assert!(
            trace
                .iter()
                .all(|t| !t.stage.starts_with("provisioner.") || t.stage == stages::NAMED)
        );
    }

    #[test]
    fn named_use_of_a_missing_volume_creates_it_with_that_name_when_allowed() {
        let spec = || FbSpec {
            use_: Some("my-nfs"),
            name: Some("project-data"),
            size: Some(gib(3)),
            ..Default::default()
        };
        let inv = inventory("a").provisioner(my_nfs().access_all()).build();
        let (d, trace) = resolve_one(&inv, fb_volume("data", spec()), &[]);
        let err = d.error.expect("needs create");
        assert_eq!(err.code, codes::PERMISSION_DENIED);
        assert!(err.message.contains("would be created"));
        assert_eq!(
            rejected_codes(&trace, stages::NAMED, "my-nfs"),
            [codes::PERMISSION_DENIED]
        );
        let inv = inventory("a")
            .provisioner(my_nfs().create(AccessPolicy::Groups(["lab".to_string()].into())))
            .build();
        let (d, _) = resolve_one(&inv, fb_volume("data", spec()), &["lab"]);
        assert_eq!(d.action, Some(Action::Provision));
        let nv = d.new_volume.expect("new volume");
        assert_eq!(
            (nv.name.as_str(), nv.capacity, nv.ephemeral),
            ("project-data", gib(3), false)
        );
    }

    #[test]
    fn named_use_without_name_is_ephemeral() {
        let inv = inventory("a").provisioner(my_nfs().ephemeral_all()).build();
        let (d, _) = resolve_one(
            &inv,
            fb_volume(
                "scratch",
                FbSpec {
                    use_: Some("my-nfs"),
                    ..Default::default()
                },
            ),
            &[],
        );
        assert_eq!(d.action, Some(Action::Provision));
        assert!(d.new_volume.expect("new").ephemeral);
        assert_eq!(d.passed, None);
    }

    #[test]
    fn unknown_provisioner_suggests_the_closest() {
        let inv = inventory("a")
            .provisioner(prov("fast-storage", nfs()).ephemeral_all())
            .build();
        let (d, trace) = resolve_one(
            &inv,
            fb_volume(
                "s",
                FbSpec {
                    use_: Some("fast-storag"),
                    ..Default::default()
                },
            ),
            &[],
        );
        let err = d.error.expect("unknown");
        assert_eq!(err.code, codes::NO_SUCH_PROVISIONER);
        assert!(err.message.contains("did you mean `fast-storage`"));
        assert_eq!(d.provisioner, None);
        assert_eq!(stage(&trace, stages::NAMED).rejected[0].candidate, "fast-storag");
    }

    #[test]
    fn not_ready_named_provisioner_is_refused_with_every_reason() {
        let inv = inventory("a")
            .provisioner(my_nfs().status(ProvisionerStatus::Error))
            .build();
        let (d, trace) = resolve_one(
            &inv,
            fb_volume(
                "s",
                FbSpec {
                    use_: Some("my-nfs"),
                    ..Default::default()
                },
            ),
            &[],
        );
        assert_eq!(d.error.expect("refused").code, codes::NOT_READY);
        assert_eq!(
            rejected_codes(&trace, stages::NAMED, "my-nfs"),
            [codes::NOT_READY, codes::PERMISSION_DENIED]
        );
    }
}
