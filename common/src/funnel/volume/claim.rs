//! Kubernetes claims (docs/design.md §2 step 1 mode `claim`; the Kubernetes volume provisioning design): class defaulting, then bind
//! before provisioning (step 5), then dynamic provisioning (step 6) by Kubernetes' rules.
//!
//! - Class: `storageClassName: <c>` → class `c`; `""` → no class; absent → the default class
//!   (the first provisioner marked default) or, with none, no class.
//! - Binding runs for every claim and needs no provisioner definition: existing volumes of a
//!   class without a StorageClass still bind (static provisioning). When the class has a
//!   definition, the user's groups must hold `access` on it (fedvol's default-deny policy;
//!   StorageClasses are open to everyone).
//! - Only when nothing binds: a claim with `volumeName` fails (it may bind that volume only, and
//!   the Kubernetes volume provisioning design's provisioners ignore claims with a volumeName); no class →
//!   `no_dynamic_provisioning`; a class without a definition → `no_such_class`; otherwise the
//!   class's provisioner provisions (permission `create`).

use crate::decision::{Mode, Reason, VolumeDecision, codes};
use crate::funnel::trace::Trace;
use crate::model::{Claim, ClaimClass, Inventory, Operation, VolumeRequest};
use crate::suggest::closest;

use super::provision::{self, NewName};
use super::{Ctx, Need, bind, bound, checks, failed, single, stages};

/// The class a claim binds and provisions with (the Kubernetes volume provisioning design class equality and defaulting):
/// `Named(c)` → `Some(c)` (`Named("")` counts as `Empty`); `Empty` → `None`; `Unset` → the first
/// provisioner with `default: true`, else `None`.
pub fn effective_class<'a>(inv: &'a Inventory, class: &'a ClaimClass) -> Option<&'a str> {
    match class {
        ClaimClass::Named(c) if !c.is_empty() => Some(c),
        ClaimClass::Named(_) | ClaimClass::Empty => None,
        ClaimClass::Unset => inv.provisioners.iter().find(|p| p.default).map(|p| p.name.as_str()),
    }
}

/// Resolves one claim; see the module docs.
pub(crate) fn resolve(ctx: &Ctx<'_>, v: &VolumeRequest, c: &Claim, trace: &mut Trace) -> VolumeDecision {
    let mode = Mode::Claim;
    let need = Need::claim(v, c);
    let class = effective_class(ctx.inv, &c.class);
    let definition = class.and_then(|n| ctx.provisioner(n));
    if let Some(p) = definition {
        let mut reasons = Vec::new();
        checks::permission(p, Operation::Access, ctx.user(), ctx.groups(), &mut reasons);
        let reasons = single(trace, stages::PERMISSION, &v.key, &p.name, reasons);
        if !reasons.is_empty() {
            return failed(mode, Some(&p.name), checks::combine(&reasons));
        }
    }
    let outcome = bind::bind(ctx, &need, class, c.volume_name.as_deref(), trace);
    if let Some(vol) = outcome.volume {
        return bound(mode, vol);
    }
    if let Some(name) = &c.volume_name {
        return failed(mode, class, volume_name_error(name, class, outcome.named_reasons));
    }
    match (class, definition) {
        (None, _) => failed(mode, None, no_dynamic_provisioning(&c.class)),
        (Some(cl), None) => failed(mode, Some(cl), no_such_class(ctx.inv, cl)),
        (Some(_), Some(p)) => {
            let name = provision::generated_name(&ctx.inv.cluster, &ctx.req.request_id, &v.key);
            provision::decide(ctx, mode, &need, p, Operation::Create, NewName::Generated(name), trace)
        }
    }
}

fn volume_name_error(name: &str, class: Option<&str>, reasons: Option<Vec<Reason>>) -> Reason {
    match reasons {
        None => Reason::new(
            codes::NO_SUCH_VOLUME,
            format!(
                "the claim's volumeName `{name}` names no volume in this cluster; a claim with a volumeName is never provisioned"
            ),
        ),
        Some(rs) => {
            let inner = checks::combine(&rs);
            Reason::new(
                &inner.code,
                format!(
                    "the claim's volumeName `{name}` (class {}) cannot be bound: {}",
                    bind::show_class(class),
                    inner.message
                ),
            )
        }
    }
}

fn no_dynamic_provisioning(class: &ClaimClass) -> Reason {
    let why = match class {
        ClaimClass::Unset => "the claim names no storage class and no class is marked default",
        _ => "the claim's storage class is \"\"",
    };
    Reason::new(
        codes::NO_DYNAMIC_PROVISIONING,
        format!("no volume without a class fits the claim, and {why}, so dynamic provisioning is disabled"),
    )
}

fn no_such_class(inv: &Inventory, class: &str) -> Reason {
    let hint = closest(class, inv.provisioners.iter().map(|p| p.name.as_str()))
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default();
    Reason::new(
        codes::NO_SUCH_CLASS,
        format!(
            "no volume of class `{class}` fits the claim, and class `{class}` has no provisioner or StorageClass{hint}, so none can be provisioned"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::decision::Action;

    #[test]
    fn named_class_binds_only_volumes_of_that_class() {
        let inv = inventory("a")
            .provisioner(storage_class("fast", "ebs.csi.aws.com"))
            .volume(pv("classless", None, gib(5)))
            .volume(pv("slow-1", Some("slow"), gib(5)))
            .volume(pv("fast-1", Some("fast"), gib(50)))
            .build();
        let (d, trace) = resolve_one(&inv, claim_volume("v", claim("c").class_named("fast")), &[]);
        assert_eq!(d.volume.as_deref(), Some("fast-1"));
        assert_eq!(stage(&trace, stages::BINDING_CANDIDATES).passed, 1);
    }

    #[test]
    fn empty_class_binds_only_classless_volumes_and_never_provisions() {
        let inv = inventory("a")
            .provisioner(storage_class("fast", "ebs.csi.aws.com").default_class())
            .volume(pv("fast-1", Some("fast"), gib(5)))
            .volume(pv("classless", None, gib(50)))
            .build();
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").class_empty()), &[]);
        assert_eq!(
            (d.volume.as_deref(), d.provisioner.as_deref()),
            (Some("classless"), None)
        );
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").class_empty().size(gib(60))), &[]);
        assert_eq!(d.error.expect("nothing fits").code, codes::NO_DYNAMIC_PROVISIONING);
    }

    #[test]
    fn unset_class_takes_the_default_class_unlike_empty() {
        let inv = inventory("a")
            .provisioner(storage_class("slow", "kubernetes.io/aws-ebs"))
            .provisioner(storage_class("fast", "ebs.csi.aws.com").default_class())
            .volume(pv("classless", None, gib(5)))
            .volume(pv("fast-1", Some("fast"), gib(5)))
            .build();
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c")), &[]);
        assert_eq!(d.volume.as_deref(), Some("fast-1"));
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").size(gib(9))), &[]);
        assert_eq!(
            (d.action, d.provisioner.as_deref()),
            (Some(Action::Provision), Some("fast"))
        );
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").class_empty()), &[]);
        assert_eq!(d.volume.as_deref(), Some("classless"));
    }

    #[test]
    fn unset_class_without_a_default_behaves_like_empty() {
        let inv = inventory("a")
            .provisioner(storage_class("fast", "ebs.csi.aws.com"))
            .volume(pv("fast-1", Some("fast"), gib(5)))
            .volume(pv("classless", None, gib(5)))
            .build();
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c")), &[]);
        assert_eq!(d.volume.as_deref(), Some("classless"));
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").size(gib(9))), &[]);
        let err = d.error.expect("no provisioning");
        assert_eq!(err.code, codes::NO_DYNAMIC_PROVISIONING);
        assert!(err.message.contains("no class is marked default"));
    }

    #[test]
    fn class_without_definition_binds_statically_but_cannot_provision() {
        let inv = inventory("a")
            .provisioner(storage_class("fast", "ebs.csi.aws.com"))
            .volume(pv("manual-1", Some("manual"), gib(5)))
            .build();
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").class_named("manual")), &[]);
        assert_eq!((d.action, d.volume.as_deref()), (Some(Action::Bind), Some("manual-1")));
        let (d, _) = resolve_one(
            &inv,
            claim_volume("v", claim("c").class_named("manual").size(gib(9))),
            &[],
        );
        assert_eq!(d.error.expect("no class").code, codes::NO_SUCH_CLASS);
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").class_named("fasst")), &[]);
        assert!(d.error.expect("typo").message.contains("did you mean `fast`"));
    }

    #[test]
    fn fedvol_provisioner_as_class_needs_access_to_bind_and_create_to_provision() {
        let inv = inventory("a")
            .provisioner(prov("lab", nfs()).access(crate::model::AccessPolicy::Groups(["lab".to_string()].into())))
            .volume(pv("lab-1", Some("lab"), gib(5)))
            .build();
        let (d, trace) = resolve_one(&inv, claim_volume("v", claim("c").class_named("lab")), &["chem"]);
        assert_eq!(d.error.expect("denied").code, codes::PERMISSION_DENIED);
        assert_eq!(
            rejected_codes(&trace, stages::PERMISSION, "lab"),
            [codes::PERMISSION_DENIED]
        );
        let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").class_named("lab")), &["lab"]);
        assert_eq!(d.volume.as_deref(), Some("lab-1"));
        let (d, _) = resolve_one(
            &inv,
            claim_volume("v", claim("c").class_named("lab").size(gib(9))),
            &["lab"],
        );
        assert_eq!(d.error.expect("no create").code, codes::PERMISSION_DENIED);
    }
}
