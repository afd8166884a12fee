//! Step 6 (docs/design.md §2; the Kubernetes volume provisioning design "Dynamic provisioning" and "external provisioner" rules): when
//! nothing binds, the chosen provisioner creates a volume that matches the request, or refuses
//! with every reason and nothing is created.
//!
//! The new volume: capacity = the request (never smaller), the request's access modes and volume
//! mode, the provisioner's own labels (a label selector is satisfiable only by them: the Kubernetes volume provisioning design, a
//! provisioner refuses selectors it does not understand), annotations
//! `pv.kubernetes.io/provisioned-by` and `volume.beta.kubernetes.io/storage-class`, the
//! provisioner's reclaim policy, a claimRef to the claim that led to it, and a deterministic name
//! so a retry of the same request cannot create a second volume.

use std::collections::BTreeMap;

use crate::decision::{Action, Mode, NewVolume, Reason, VolumeDecision, codes};
use crate::funnel::trace::Trace;
use crate::funnel::trace::{fnv1a, mix64};
use crate::model::{ClaimRef, Driver, Operation, Provisioner, VolumeMode};
use crate::suggest::closest;

use super::{Ctx, Need, bound, checks, decision, failed, single, stages};

/// Annotation naming the provisioner that created a volume (the Kubernetes volume provisioning design: used to delete it).
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// Annotation naming the storage class of a provisioned volume (the Kubernetes volume provisioning design).
pub const STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// fedvol's own out-of-tree provisioners and the StorageClass parameters each understands.
/// The Kubernetes volume provisioning design: a provisioner that meets unknown parameters MUST NOT provision. Parameters of other
/// external provisioners are opaque here and validated by that provisioner at commit.
pub const FEDVOL_PROVISIONERS: [(&str, &[&str]); 2] = [
    ("fedvol.io/hostpath", &["path", "local"]),
    ("fedvol.io/nfs", &["server", "share", "mount"]),
];

/// The deterministic name of a volume provisioned for workflow volume `key` of request
/// `request_id` on `cluster`: `pvc-` and 16 lowercase hex digits of a stable 64-bit hash
/// (FNV-1a then SplitMix64 over the three strings, NUL-separated). The same inputs always give
/// the same name on every platform, so a retried request names the same volume.
pub fn generated_name(cluster: &str, request_id: &str, key: &str) -> String {
    let mut bytes = Vec::with_capacity(cluster.len() + request_id.len() + key.len() + 2);
    for (i, part) in [cluster, request_id, key].into_iter().enumerate() {
        if i > 0 {
            bytes.push(0);
        }
        bytes.extend_from_slice(part.as_bytes());
    }
    format!("pvc-{:016x}", mix64(fnv1a(&bytes)))
}

/// Every unknown StorageClass parameter of a fedvol-owned external provisioner (see
/// [`FEDVOL_PROVISIONERS`]), one `provisioning_refused` reason per key with a "did you mean"
/// hint. Empty for every other driver.
pub fn parameter_failures(driver: &Driver) -> Vec<Reason> {
    let Driver::External {
        provisioner,
        parameters,
    } = driver
    else {
        return Vec::new();
    };
    let Some((_, allowed)) = FEDVOL_PROVISIONERS.iter().find(|(n, _)| n == provisioner) else {
        return Vec::new();
    };
    parameters
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| {
            let hint = closest(k, allowed.iter().copied())
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            Reason::new(
                codes::PROVISIONING_REFUSED,
                format!(
                    "unknown parameter `{k}` for provisioner {provisioner}{hint}; it understands {}",
                    allowed.join(", ")
                ),
            )
        })
        .collect()
}

/// The value of [`PROVISIONED_BY`] for volumes of `p`: the external provisioner's name, else the
/// driver kind (`nfs`, `hostpath`, `efs`).
pub fn provisioned_by(p: &Provisioner) -> String {
    match &p.driver {
        Driver::External { provisioner, .. } => provisioner.clone(),
        d => d.kind().to_string(),
    }
}

/// How the new volume is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NewName {
    /// The name the workflow asked for (named persistent volumes).
    Requested(String),
    /// [`generated_name`] for this request and volume.
    Generated(String),
}

/// Provisions for `need` on `p` with permission for `op`, as a decision: `provision` with the
/// new volume, or the refusal (every reason joined). A generated name that already exists on `p`
/// is this request's own volume from an earlier attempt and is bound instead of created twice.
pub(crate) fn decide(
    ctx: &Ctx<'_>,
    mode: Mode,
    need: &Need<'_>,
    p: &Provisioner,
    op: Operation,
    name: NewName,
    trace: &mut Trace,
) -> VolumeDecision {
    // One walk over the inventory's volumes answers both questions about the name.
    let existing = match &name {
        NewName::Requested(n) | NewName::Generated(n) => ctx.volume_on(&p.name, n),
    };
    if let (NewName::Generated(_), Some(vol)) = (&name, existing)
        && !vol.being_deleted
    {
        return bound(mode, vol);
    }
    match plan(ctx, need, p, op, name, existing.is_some(), trace) {
        Ok(nv) => VolumeDecision {
            provisioner: Some(p.name.clone()),
            volume: Some(nv.name.clone()),
            action: Some(Action::Provision),
            new_volume: Some(nv),
            ..decision(mode)
        },
        Err(r) => failed(mode, Some(&p.name), r),
    }
}

/// Stage `provisioning`: checks that `p` can create a volume matching `need` and builds it.
/// Reasons (all recorded): `not_ready`, `permission_denied` for `op`, and
/// `provisioning_refused` for an unsupported volume mode, a size over `max_volume_size` or
/// `free_bytes`, each selector requirement its labels fail, each unknown fedvol parameter, and a
/// name already taken on `p` (`taken`: a volume of `p` has that name).
fn plan(
    ctx: &Ctx<'_>,
    need: &Need<'_>,
    p: &Provisioner,
    op: Operation,
    name: NewName,
    taken: bool,
    trace: &mut Trace,
) -> Result<NewVolume, Reason> {
    let mut reasons = Vec::new();
    checks::status(p, &mut reasons);
    checks::permission(p, op, ctx.user(), ctx.groups(), &mut reasons);
    let supported: &[VolumeMode] = if p.volume_modes.is_empty() {
        &[VolumeMode::Filesystem]
    } else {
        &p.volume_modes
    };
    if !supported.contains(&need.volume_mode) {
        reasons.push(refused(format!(
            "provisioner `{}` cannot create {:?} volumes (it supports {})",
            p.name,
            need.volume_mode,
            supported
                .iter()
                .map(|m| format!("{m:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if let Some(max) = p.max_volume_size
        && need.size > max
    {
        reasons.push(refused(format!(
            "requested {} exceeds provisioner `{}`'s largest volume {max}",
            need.size, p.name
        )));
    }
    if let Some(free) = p.free_bytes
        && need.size > free
    {
        reasons.push(refused(format!(
            "requested {} exceeds provisioner `{}`'s free space {free}",
            need.size, p.name
        )));
    }
    if let Some(sel) = need.selector {
        for f in sel.failures(&p.labels) {
            reasons.push(refused(format!(
                "provisioner `{}` cannot satisfy the claim's selector: {f} (its volumes carry only its own labels)",
                p.name
            )));
        }
    }
    reasons.extend(parameter_failures(&p.driver));
    let name = match name {
        NewName::Requested(n) | NewName::Generated(n) => n,
    };
    if taken {
        reasons.push(refused(format!(
            "a volume named `{name}` already exists on provisioner `{}`",
            p.name
        )));
    }
    let reasons = single(trace, stages::PROVISIONING, need.key, &p.name, reasons);
    if !reasons.is_empty() {
        let mut err = checks::combine(&reasons);
        err.message.push_str("; nothing is created");
        return Err(err);
    }
    let annotations = BTreeMap::from([
        (PROVISIONED_BY.to_string(), provisioned_by(p)),
        (STORAGE_CLASS.to_string(), p.name.clone()),
    ]);
    Ok(NewVolume {
        name,
        provisioner: p.name.clone(),
        capacity: need.size,
        access_modes: need.access_modes,
        volume_mode: need.volume_mode,
        labels: p.labels.clone(),
        annotations,
        reclaim_policy: p.reclaim_policy,
        ephemeral: op == Operation::Ephemeral,
        host: None,
        claim_ref: need.claim.map(|c| ClaimRef {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            uid: c.uid.clone(),
        }),
    })
}

fn refused(message: String) -> Reason {
    Reason::new(codes::PROVISIONING_REFUSED, message)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::funnel::ClusterState;
    use crate::model::{ReclaimPolicy, SelectorOperator};

    #[test]
    fn generated_names_are_stable_and_distinct() {
        let a = generated_name("cluster-a", "req-1", "data");
        assert_eq!(a, generated_name("cluster-a", "req-1", "data"));
        assert_eq!(a.len(), 4 + 16);
        assert!(a.starts_with("pvc-") && a[4..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, generated_name("cluster-b", "req-1", "data"));
        assert_ne!(a, generated_name("cluster-a", "req-2", "data"));
        assert_ne!(a, generated_name("cluster-a", "req-1", "data2"));
        // The separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(generated_name("x", "ab", "c"), generated_name("x", "a", "bc"));
    }

    #[test]
    fn deterministic_name_is_stable_across_calls() {
        let inv = inventory("a")
            .provisioner(storage_class("fast", "ebs.csi.aws.com"))
            .build();
        let v = || claim_volume("data", claim("data").class_named("fast").size(gib(4)));
        let (d1, _) = resolve_one(&inv, v(), &[]);
        let (d2, _) = resolve_one(&inv, v(), &[]);
        assert_eq!(d1.action, Some(Action::Provision));
        assert_eq!(d1.volume, d2.volume);
        assert_eq!(
            d1.volume.as_deref(),
            Some(generated_name("a", "req-1", "data").as_str())
        );
    }

    #[test]
    fn new_volume_matches_the_claim_and_carries_class_and_reclaim_policy() {
        let inv = inventory("a")
            .provisioner(
                storage_class("gold", "foo.org/foo-volume")
                    .reclaim(ReclaimPolicy::Retain)
                    .label("region", "north"),
            )
            .build();
        let c = claim("fooclaim")
            .class_named("gold")
            .size(gib(4))
            .modes(&[RWO, ROX])
            .block()
            .uid("5a29")
            .selector(selector(
                &[],
                vec![req("region", SelectorOperator::NotIn, &["east", "west"])],
            ));
        let (d, trace) = resolve_one(&inv, claim_volume("data", c), &[]);
        let nv = d.new_volume.expect("provisioned");
        assert_eq!(nv.capacity, gib(4));
        assert_eq!(nv.access_modes, modes(&[RWO, ROX]));
        assert_eq!(nv.volume_mode, VolumeMode::Block);
        assert_eq!(nv.reclaim_policy, ReclaimPolicy::Retain);
        assert_eq!(nv.labels, ann(&[("region", "north")]));
        assert_eq!(nv.annotations[PROVISIONED_BY], "foo.org/foo-volume");
        assert_eq!(nv.annotations[STORAGE_CLASS], "gold");
        assert!(!nv.ephemeral);
        let cr = nv.claim_ref.expect("claimRef");
        assert_eq!(
            (cr.namespace.as_str(), cr.name.as_str(), cr.uid.as_deref()),
            ("default", "fooclaim", Some("5a29"))
        );
        assert_eq!(stage(&trace, stages::PROVISIONING).passed, 1);
    }

    #[test]
    fn unsatisfiable_selector_refuses_and_names_each_failing_requirement() {
        let inv = inventory("a")
            .provisioner(storage_class("gold", "foo.org/foo-volume").label("region", "east"))
            .build();
        let sel = selector(
            &[("tier", "gold")],
            vec![
                req("region", SelectorOperator::NotIn, &["east", "west"]),
                req("zone", SelectorOperator::Exists, &[]),
            ],
        );
        let (d, trace) = resolve_one(
            &inv,
            claim_volume("data", claim("c").class_named("gold").selector(sel)),
            &[],
        );
        assert_eq!(d.action, None);
        let err = d.error.expect("refused");
        assert_eq!(err.code, codes::PROVISIONING_REFUSED);
        assert!(err.message.contains("nothing is created"));
        assert_eq!(rejected_codes(&trace, stages::PROVISIONING, "gold").len(), 3);
        assert!(
            err.message.contains("tier")
                && err.message.contains("region notin (east,west)")
                && err.message.contains("zone")
        );
    }

    #[test]
    fn unknown_fedvol_parameters_refuse_but_other_external_parameters_are_opaque() {
        let inv = inventory("a")
            .provisioner(
                prov(
                    "hp",
                    external("fedvol.io/hostpath", &[("path", "/data"), ("pth", "x"), ("size", "1")]),
                )
                .create_all(),
            )
            .provisioner(
                prov(
                    "nf",
                    external("fedvol.io/nfs", &[("server", "s"), ("share", "/e"), ("mount", "/m")]),
                )
                .create_all(),
            )
            .provisioner(prov("other", external("example.com/nfs", &[("whatever", "x")])).create_all())
            .build();
        let (d, trace) = resolve_one(&inv, claim_volume("v", claim("c").class_named("hp")), &[]);
        let err = d.error.expect("refused");
        assert_eq!(err.code, codes::PROVISIONING_REFUSED);
        assert!(err.message.contains("`pth`") && err.message.contains("did you mean `path`"));
        assert!(err.message.contains("`size`"));
        assert_eq!(rejected_codes(&trace, stages::PROVISIONING, "hp").len(), 2);
        for ok in ["nf", "other"] {
            let (d, _) = resolve_one(&inv, claim_volume("v", claim("c").class_named(ok)), &[]);
            assert_eq!(d.action, Some(Action::Provision), "{ok}: {:?}", d.error);
        }
    }

    #[test]
    fn volume_mode_size_and_free_space_refuse_with_all_reasons() {
        let inv = inventory("a")
            .provisioner(
                prov("small", nfs())
                    .create_all()
                    .max_size(gib(2))
                    .free(gib(1))
                    .volume_modes(&[VolumeMode::Filesystem]),
            )
            .build();
        let (d, trace) = resolve_one(
            &inv,
            claim_volume("v", claim("c").class_named("small").size(gib(3)).block()),
            &[],
        );
        assert_eq!(d.error.expect("refused").code, codes::PROVISIONING_REFUSED);
        assert_eq!(rejected_codes(&trace, stages::PROVISIONING, "small").len(), 3);
        let (d, _) = resolve_one(
            &inv,
            claim_volume("v", claim("c").class_named("small").size(gib(1))),
            &[],
        );
        assert_eq!(d.action, Some(Action::Provision));
    }

    #[test]
    fn provisioning_needs_create_permission_and_ready_status() {
        let inv = inventory("a")
            .provisioner(
                prov("p", nfs())
                    .access_all()
                    .ephemeral_all()
                    .status(crate::model::ProvisionerStatus::Disabled),
            )
            .build();
        let (d, trace) = resolve_one(&inv, claim_volume("v", claim("c").class_named("p")), &[]);
        assert!(d.error.is_some());
        assert_eq!(
            rejected_codes(&trace, stages::PROVISIONING, "p"),
            [codes::NOT_READY, codes::PERMISSION_DENIED]
        );
    }

    #[test]
    fn a_retry_binds_the_volume_an_earlier_attempt_created() {
        let name = generated_name("a", "req-1", "v");
        let inv = inventory("a")
            .provisioner(storage_class("fast", "ebs.csi.aws.com"))
            .volume(pv(&name, Some("fast"), gib(1)).phase(crate::model::VolumePhase::Bound))
            .build();
        let (d, _) = resolve_with(
            &inv,
            &ClusterState::default(),
            claim_volume("v", claim("c").class_named("fast")),
            &[],
        );
        assert_eq!(d.action, Some(Action::Bind));
        assert_eq!(d.volume.as_deref(), Some(name.as_str()));
    }
}
