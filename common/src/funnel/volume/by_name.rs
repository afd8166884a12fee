//! Step 3 (docs/design.md §2; Fuzzball "Annotations and Selection" "When a workflow references a persistent volume by name"):
//! `name:` without `use:`.
//!
//! Stage `volume.by_name` searches every provisioner, in inventory order, for a volume with the
//! name; a provisioner counts only when the user's groups may `access` it (or `create`, which
//! implies it) and it matches the volume's annotations, if any. Every provisioner that does not
//! count is recorded with all its reasons (`permission_denied`, `annotation_*`,
//! `no_such_volume`). One hit selects that provisioner and volume (`existing`); several is
//! `ambiguous_volume`, naming them all and asking for `use:`; none is `no_such_volume`.
//!
//! Stage `volume.existing` then checks the one volume found is usable: its provisioner is READY
//! and the volume is not being deleted.

use std::collections::BTreeMap;

use crate::decision::{Action, Mode, Reason, VolumeDecision, codes};
use crate::funnel::trace::Trace;
use crate::funnel::trace::run_filter;
use crate::model::{FuzzballVolume, Operation, PersistentVolume, Provisioner, VolumeRequest};
use crate::suggest::closest;

use super::{Ctx, checks, decision, failed, single, stages};

/// The result of a by-name search.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Search<'a> {
    /// Exactly one accessible, annotation-matching provisioner holds the volume.
    One(&'a Provisioner, &'a PersistentVolume),
    /// None does (`no_such_volume`, with hints).
    None(Reason),
    /// Several do (`ambiguous_volume`, naming them).
    Many(Reason),
}

/// Resolves a `name:`-only volume (mode `by_name`).
pub(crate) fn resolve(
    ctx: &Ctx<'_>,
    v: &VolumeRequest,
    fb: &FuzzballVolume,
    name: &str,
    trace: &mut Trace,
) -> VolumeDecision {
    match search(ctx, &v.key, name, &fb.annotations, trace) {
        Search::One(p, vol) => existing(Mode::ByName, &v.key, p, vol, trace),
        Search::None(r) | Search::Many(r) => failed(Mode::ByName, None, r),
    }
}

/// Stage `volume.by_name`: see the module docs.
pub(crate) fn search<'a>(
    ctx: &Ctx<'a>,
    key: &str,
    name: &str,
    annotations: &BTreeMap<String, String>,
    trace: &mut Trace,
) -> Search<'a> {
    let candidates: Vec<&'a Provisioner> = ctx.inv.provisioners.iter().collect();
    let hits = run_filter(
        trace,
        stages::BY_NAME,
        key,
        candidates,
        |p| p.name.clone(),
        |p, out| {
            checks::permission(p, Operation::Access, ctx.user(), ctx.groups(), out);
            checks::annotations(annotations, &p.annotations, out);
            if ctx.volume_on(&p.name, name).is_none() {
                out.push(Reason::new(
                    codes::NO_SUCH_VOLUME,
                    format!("provisioner `{}` holds no volume named `{name}`", p.name),
                ));
            }
        },
    );
    match hits.as_slice() {
        [] => Search::None(not_found(ctx, name, annotations)),
        [p] => match ctx.volume_on(&p.name, name) {
            Some(vol) => Search::One(p, vol),
            None => Search::None(not_found(ctx, name, annotations)),
        },
        many => {
            let names: Vec<String> = many.iter().map(|p| format!("`{}`", p.name)).collect();
            Search::Many(Reason::new(
                codes::AMBIGUOUS_VOLUME,
                format!(
                    "a volume named `{name}` exists on several provisioners you may access: {}; add `use: <provisioner>` to say which",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Explains a search without hits: where the name exists but was not usable, and a close name
/// the user may access.
fn not_found(ctx: &Ctx<'_>, name: &str, annotations: &BTreeMap<String, String>) -> Reason {
    let mut msg = format!("no provisioner you may access holds a volume named `{name}`");
    if !annotations.is_empty() {
        let pairs: Vec<String> = annotations.iter().map(|(k, v)| format!("{k}={v}")).collect();
        msg.push_str(&format!(" with annotations {}", pairs.join(",")));
    }
    let elsewhere: Vec<String> = ctx
        .inv
        .volumes
        .iter()
        .filter(|v| v.name == name)
        .filter_map(|v| v.provisioner.as_ref().map(|p| format!("`{p}`")))
        .collect();
    if !elsewhere.is_empty() {
        msg.push_str(&format!(
            "; it exists on {}, rejected for the reasons in stage {}",
            elsewhere.join(", "),
            stages::BY_NAME
        ));
    } else {
        let accessible = ctx.inv.volumes.iter().filter(|v| {
            v.provisioner
                .as_deref()
                .and_then(|p| ctx.provisioner(p))
                .is_some_and(|p| p.permissions.allows(Operation::Access, ctx.user(), ctx.groups()))
        });
        if let Some(c) = closest(name, accessible.map(|v| v.name.as_str())) {
            msg.push_str(&format!(" (did you mean `{c}`?)"));
        }
    }
    Reason::new(codes::NO_SUCH_VOLUME, msg)
}

/// Stage `volume.existing`: uses the existing volume `vol` of `p` as it is (action `existing`)
/// when `p` is READY and `vol` is not being deleted; otherwise fails with every reason.
pub(crate) fn existing(
    mode: Mode,
    key: &str,
    p: &Provisioner,
    vol: &PersistentVolume,
    trace: &mut Trace,
) -> VolumeDecision {
    let mut reasons = Vec::new();
    checks::status(p, &mut reasons);
    if vol.being_deleted {
        reasons.push(Reason::new(
            codes::BEING_DELETED,
            format!("volume `{}` on provisioner `{}` is being deleted", vol.name, p.name),
        ));
    }
    let reasons = single(trace, stages::EXISTING, key, &vol.name, reasons);
    if !reasons.is_empty() {
        return failed(mode, Some(&p.name), checks::combine(&reasons));
    }
    VolumeDecision {
        provisioner: Some(p.name.clone()),
        volume: Some(vol.name.clone()),
        action: Some(Action::Existing),
        ..decision(mode)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::model::{AccessPolicy, ProvisionerStatus};

    /// Fuzzball "Annotations and Selection"'s `purpose` example: `results` names `my-archive` narrowed by `purpose: archive`.
    fn purpose_inventory() -> crate::model::Inventory {
        inventory("a")
            .provisioner(prov("work-storage", nfs()).annotate("purpose", "work").ephemeral_all())
            .provisioner(
                prov("archive-storage", nfs())
                    .annotate("purpose", "archive")
                    .access_all(),
            )
            .volume(pv("my-archive", Some("archive-storage"), gib(100)))
            .build()
    }

    #[test]
    fn by_name_finds_the_one_accessible_volume() {
        let results = FbSpec {
            name: Some("my-archive"),
            annotations: ann(&[("purpose", "archive")]),
            ..Default::default()
        };
        let (d, trace) = resolve_one(&purpose_inventory(), fb_volume("results", results), &[]);
        assert_eq!(d.mode, Mode::ByName);
        assert_eq!(d.action, Some(Action::Existing));
        assert_eq!(
            (d.provisioner.as_deref(), d.volume.as_deref()),
            (Some("archive-storage"), Some("my-archive"))
        );
        // work-storage fails access permission, the annotation and holds no such volume: all recorded.
        assert_eq!(
            rejected_codes(&trace, stages::BY_NAME, "work-storage"),
            [
                codes::PERMISSION_DENIED,
                codes::ANNOTATION_MISMATCH,
                codes::NO_SUCH_VOLUME
            ]
        );
        assert_eq!(stage(&trace, stages::EXISTING).passed, 1);
    }

    #[test]
    fn same_name_on_several_accessible_provisioners_is_ambiguous() {
        let inv = inventory("a")
            .provisioner(prov("nfs-a", nfs()).access_all())
            .provisioner(prov("nfs-b", nfs()).access_all())
            .provisioner(prov("nfs-c", nfs()))
            .volume(pv("my-dataset", Some("nfs-a"), gib(1)))
            .volume(pv("my-dataset", Some("nfs-b"), gib(1)))
            .volume(pv("my-dataset", Some("nfs-c"), gib(1)))
            .build();
        let (d, _) = resolve_one(
            &inv,
            fb_volume(
                "data",
                FbSpec {
                    name: Some("my-dataset"),
                    ..Default::default()
                },
            ),
            &[],
        );
        let err = d.error.expect("ambiguous");
        assert_eq!(err.code, codes::AMBIGUOUS_VOLUME);
        assert!(err.message.contains("`nfs-a`") && err.message.contains("`nfs-b`") && !err.message.contains("nfs-c"));
        assert!(err.message.contains("use:"));
        // Annotations narrow the search and resolve the ambiguity.
        let inv2 = {
            let mut i = inv.clone();
            i.provisioners[1].annotations = ann(&[("site", "b")]);
            i
        };
        let spec = FbSpec {
            name: Some("my-dataset"),
            annotations: ann(&[("site", "b")]),
            ..Default::default()
        };
        let (d, _) = resolve_one(&inv2, fb_volume("data", spec), &[]);
        assert_eq!(d.provisioner.as_deref(), Some("nfs-b"));
    }

    #[test]
    fn missing_volume_is_an_error_with_hints() {
        let inv = inventory("a")
            .provisioner(prov("open", nfs()).access_all())
            .provisioner(prov("locked", nfs()).access(AccessPolicy::Groups(["lab".to_string()].into())))
            .volume(pv("my-dataset", Some("open"), gib(1)))
            .volume(pv("secret", Some("locked"), gib(1)))
            .build();
        let (d, _) = resolve_one(
            &inv,
            fb_volume(
                "d",
                FbSpec {
                    name: Some("my-datset"),
                    ..Default::default()
                },
            ),
            &[],
        );
        let err = d.error.expect("absent");
        assert_eq!(err.code, codes::NO_SUCH_VOLUME);
        assert!(err.message.contains("did you mean `my-dataset`"));
        let (d, _) = resolve_one(
            &inv,
            fb_volume(
                "d",
                FbSpec {
                    name: Some("secret"),
                    ..Default::default()
                },
            ),
            &["chem"],
        );
        let err = d.error.expect("not accessible");
        assert!(err.message.contains("exists on `locked`"));
        let (d, _) = resolve_one(
            &inv,
            fb_volume(
                "d",
                FbSpec {
                    name: Some("secret"),
                    ..Default::default()
                },
            ),
            &["lab"],
        );
        assert_eq!(d.action, Some(Action::Existing));
    }

    #[test]
    fn existing_volume_on_a_disabled_provisioner_or_being_deleted_is_refused() {
        let inv = inventory("a")
            .provisioner(prov("p", nfs()).access_all().status(ProvisionerStatus::Disabled))
            .volume(pv("v", Some("p"), gib(1)).deleting())
            .build();
        let (d, trace) = resolve_one(
            &inv,
            fb_volume(
                "d",
                FbSpec {
                    name: Some("v"),
                    ..Default::default()
                },
            ),
            &[],
        );
        assert_eq!(d.error.expect("unusable").code, codes::NOT_READY);
        assert_eq!(
            rejected_codes(&trace, stages::EXISTING, "v"),
            [codes::NOT_READY, codes::BEING_DELETED]
        );
    }
}
