//! Volume resolution, docs/design.md §2 steps 1–6 (Fuzzball's Annotations and Selection;
//! Kubernetes binding and provisioning).
//!
//! Every workflow volume is resolved on its own, in workflow order, by a chain of named stages;
//! each stage records what it considered and **every** reason each rejected candidate failed
//! through [`run_filter`]. The stages, by module:
//!
//! - [`mode`]: step 1, which of the four resolution modes applies (stage `volume.mode`).
//! - [`named`]: step 2, `use: <provisioner>` (stage `provisioner.named`).
//! - [`by_name`]: step 3, `name:` without `use:` (stages `volume.by_name`, `volume.existing`).
//! - [`automatic`]: step 4, Fuzzball "Annotations and Selection" selection (stages `provisioner.status`,
//!   `provisioner.annotations`, `provisioner.permission`).
//! - [`claim`]: Kubernetes claims: class resolution, then steps 5 and 6.
//! - [`bind`]: step 5, bind before provisioning (stages `binding.candidates`, `binding.match`).
//! - [`provision`]: step 6, a new volume that matches the request (stage `provisioning`).
//!
//! Pure and deterministic: the same inventory, state and request give the same decisions and the
//! same trace. Nothing here panics on any input.

pub mod automatic;
pub mod bind;
pub mod by_name;
pub mod checks;
pub mod claim;
pub mod mode;
pub mod named;
pub mod provision;

#[cfg(test)]
mod bind_k8s_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod testkit;

use std::collections::BTreeMap;

use indexmap::IndexMap;

use super::trace::run_filter;
use super::volume_names::VolumeNames;
use super::{ClusterState, PlanRequest, VolumeId};
use crate::decision::{Action, Mode, Reason, VolumeDecision};
use crate::funnel::trace::Trace;
use crate::model::{
    AccessModes, Claim, FuzzballVolume, Inventory, LabelSelector, Operation, PersistentVolume, Provisioner, VolumeMode,
    VolumeRequest,
};
use crate::size::ByteSize;

pub use mode::Resolution;

/// Stable stage names recorded in the trace (docs/design.md §4 `trace[].stage`).
pub mod stages {
    /// Step 1: the resolution mode was decided (never rejects; marks where a volume's stages begin).
    pub const MODE: &str = "volume.mode";
    /// Step 2: the named provisioner exists, is READY and grants the operation.
    pub const NAMED: &str = "provisioner.named";
    /// Step 3: provisioners the user may access that hold a volume with the requested name.
    pub const BY_NAME: &str = "volume.by_name";
    /// Step 3: the one existing volume found is usable (provisioner READY, not being deleted).
    pub const EXISTING: &str = "volume.existing";
    /// Step 4: provisioner status is READY (Fuzzball "Annotations and Selection" "status check").
    pub const STATUS: &str = "provisioner.status";
    /// Step 4: requested annotations match exactly (Fuzzball "Annotations and Selection" "annotation match").
    pub const ANNOTATIONS: &str = "provisioner.annotations";
    /// Step 4 (and claims): the user's groups hold the operation's permission.
    pub const PERMISSION: &str = "provisioner.permission";
    /// Step 5: volumes of the request's storage class (the Kubernetes volume provisioning design class equality).
    pub const BINDING_CANDIDATES: &str = "binding.candidates";
    /// Step 5: volumes that satisfy the request (phase, capacity, modes, selector...).
    pub const BINDING_MATCH: &str = "binding.match";
    /// Step 6: the provisioner can create a volume matching the request.
    pub const PROVISIONING: &str = "provisioning";
}

/// Resolves every volume of `req.workflow`, in workflow order (docs/design.md §2 steps 1–6).
///
/// Returns one [`VolumeDecision`] per workflow volume key (a repeated key keeps its first
/// definition). Each decision has either an action (`bind`, `provision` with its
/// [`NewVolume`](crate::decision::NewVolume), or `existing`) or an `error` whose code comes from
/// [`crate::decision::codes`]. Every stage run is appended to `trace` with the volume key as
/// subject. Volumes bound by an earlier volume of the same workflow are not bound again (reason
/// `reserved`). Never panics; deterministic for equal inputs.
pub fn resolve_volumes(
    inv: &Inventory,
    state: &ClusterState,
    req: &PlanRequest,
    trace: &mut Trace,
) -> IndexMap<String, VolumeDecision> {
    resolve_named(inv, None, state, req, trace)
}

/// [`resolve_volumes`], looking volumes up by provisioner and name in `names` (an index
/// covering `inv`'s volumes, [`VolumeNames::covers`]) instead of walking them; the same
/// decisions.
pub fn resolve_named(
    inv: &Inventory,
    names: Option<&VolumeNames>,
    state: &ClusterState,
    req: &PlanRequest,
    trace: &mut Trace,
) -> IndexMap<String, VolumeDecision> {
    let mut ctx = Ctx {
        inv,
        names,
        state,
        req,
        taken: BTreeMap::new(),
    };
    let mut out = IndexMap::new();
    for v in &req.workflow.volumes {
        if out.contains_key(&v.key) {
            continue;
        }
        let decision = resolve_one(&ctx, v, trace);
        if decision.action == Some(Action::Bind)
            && let Some(name) = &decision.volume
        {
            let id = VolumeId {
                provisioner: decision.provisioner.clone(),
                name: name.clone(),
            };
            ctx.taken.insert(id, v.key.clone());
        }
        out.insert(v.key.clone(), decision);
    }
    out
}

/// Resolves one volume: records its mode, then runs the mode's stages.
fn resolve_one(ctx: &Ctx<'_>, v: &VolumeRequest, trace: &mut Trace) -> VolumeDecision {
    let resolution = Resolution::of(&v.source);
    mode::record(trace, &v.key, &resolution);
    match resolution {
        Resolution::Named { provisioner, fuzzball } => named::resolve(ctx, v, fuzzball, provisioner, trace),
        Resolution::ByName { name, fuzzball } => by_name::resolve(ctx, v, fuzzball, name, trace),
        Resolution::Automatic { persistent, fuzzball } => automatic::resolve(ctx, v, fuzzball, persistent, trace),
        Resolution::Claim(c) => claim::resolve(ctx, v, c, trace),
    }
}

/// What one resolution run can see: the inventory snapshot, live state, the request, and the
/// volumes already bound by earlier volumes of this workflow (volume → workflow volume key).
pub(crate) struct Ctx<'a> {
    /// The cluster's inventory.
    pub inv: &'a Inventory,
    /// An index of `inv`'s volumes by provisioner and name, when the caller has one.
    pub names: Option<&'a VolumeNames>,
    /// Reservations held by requests.
    pub state: &'a ClusterState,
    /// The request being planned.
    pub req: &'a PlanRequest,
    /// Volumes bound by earlier volumes of this workflow.
    pub taken: BTreeMap<VolumeId, String>,
}

impl<'a> Ctx<'a> {
    /// The user's identity.
    pub fn user(&self) -> &'a str {
        &self.req.user
    }

    /// The user's groups.
    pub fn groups(&self) -> &'a [String] {
        &self.req.groups
    }

    /// The provisioner (storage class) named `name`, if defined.
    pub fn provisioner(&self, name: &str) -> Option<&'a Provisioner> {
        self.inv.provisioners.iter().find(|p| p.name == name)
    }

    /// The volume named `name` of provisioner `provisioner`, if any.
    pub fn volume_on(&self, provisioner: &str, name: &str) -> Option<&'a PersistentVolume> {
        if let Some(names) = self.names {
            return names.find(self.inv, provisioner, name);
        }
        self.inv
            .volumes
            .iter()
            .find(|v| v.name == name && v.provisioner.as_deref() == Some(provisioner))
            .map(|v| &**v)
    }

    /// Why `v` is held by someone else: another request's reservation, or an earlier volume of
    /// this workflow. The same request id holding it is fine (idempotent replay).
    pub fn held_elsewhere(&self, v: &PersistentVolume) -> Option<Reason> {
        let id = VolumeId {
            provisioner: v.provisioner.clone(),
            name: v.name.clone(),
        };
        if let Some(rid) = self.state.reserved_volumes.get(&id)
            && *rid != self.req.request_id
        {
            return Some(Reason::new(
                crate::decision::codes::RESERVED,
                format!("volume `{}` is reserved by request `{rid}`", v.name),
            ));
        }
        self.taken.get(&id).map(|key| {
            Reason::new(
                crate::decision::codes::RESERVED,
                format!(
                    "volume `{}` is already bound to workflow volume `{key}` of this request",
                    v.name
                ),
            )
        })
    }
}

/// What a request needs of a volume it binds or provisions (the Kubernetes volume provisioning design matching terms).
#[derive(Debug, Clone)]
pub(crate) struct Need<'a> {
    /// The workflow volume key (the trace subject).
    pub key: &'a str,
    /// Requested capacity, bytes (Fuzzball: `size` or 0 when absent).
    pub size: ByteSize,
    /// Access modes the volume must offer (a superset is fine).
    pub access_modes: AccessModes,
    /// Required volume mode.
    pub volume_mode: VolumeMode,
    /// Label selector (claims only).
    pub selector: Option<&'a LabelSelector>,
    /// The claim, for claims (pre-binding, `volumeName`, the new volume's claimRef).
    pub claim: Option<&'a Claim>,
}

impl<'a> Need<'a> {
    /// A Fuzzball volume's needs: its size (0 when absent), the request's access modes,
    /// Filesystem, no selector.
    pub fn fuzzball(v: &'a VolumeRequest, fb: &FuzzballVolume) -> Self {
        Need {
            key: &v.key,
            size: fb.size.unwrap_or_default(),
            access_modes: v.access_modes,
            volume_mode: VolumeMode::Filesystem,
            selector: None,
            claim: None,
        }
    }

    /// A claim's needs, from its spec.
    pub fn claim(v: &'a VolumeRequest, c: &'a Claim) -> Self {
        Need {
            key: &v.key,
            size: c.request,
            access_modes: c.access_modes,
            volume_mode: c.volume_mode,
            selector: c.selector.as_ref(),
            claim: Some(c),
        }
    }
}

/// An empty decision for `mode` (no provisioner, volume, action or error yet).
pub(crate) fn decision(mode: Mode) -> VolumeDecision {
    VolumeDecision {
        mode,
        provisioner: None,
        volume: None,
        action: None,
        error: None,
        passed: None,
        new_volume: None,
    }
}

/// A failed decision for `mode`, with the provisioner chosen so far (if any).
pub(crate) fn failed(mode: Mode, provisioner: Option<&str>, error: Reason) -> VolumeDecision {
    VolumeDecision {
        provisioner: provisioner.map(str::to_string),
        error: Some(error),
        ..decision(mode)
    }
}

/// Fuzzball requests without a name: provision a new volume on Fuzzball "Annotations and Selection"'s chosen provisioner `p`
/// for operation `op`.
///
/// Fuzzball volumes never bind another Available persistent volume (only claims do, the Kubernetes volume provisioning design):
/// a nameless ephemeral or scratch request would otherwise capture someone's named dataset, and
/// completing the workflow would then apply the reclaim policy to it. A retry of the same
/// request finds its own deterministically named volume again (see [`provision::decide`]).
pub(crate) fn provision_new(
    ctx: &Ctx<'_>,
    mode: Mode,
    need: &Need<'_>,
    p: &Provisioner,
    op: Operation,
    trace: &mut Trace,
) -> VolumeDecision {
    let name = provision::generated_name(&ctx.inv.cluster, &ctx.req.request_id, need.key);
    provision::decide(ctx, mode, need, p, op, provision::NewName::Generated(name), trace)
}

/// Records a stage with exactly one candidate whose reasons were computed beforehand (the
/// candidate passes when `reasons` is empty). Returns the reasons.
pub(crate) fn single(
    trace: &mut Trace,
    stage: &str,
    subject: &str,
    candidate: &str,
    reasons: Vec<Reason>,
) -> Vec<Reason> {
    run_filter(
        trace,
        stage,
        subject,
        vec![candidate.to_string()],
        Clone::clone,
        |_, out| out.extend(reasons.iter().cloned()),
    );
    reasons
}

/// The decision binding `vol`.
pub(crate) fn bound(mode: Mode, vol: &PersistentVolume) -> VolumeDecision {
    VolumeDecision {
        provisioner: vol.provisioner.clone(),
        volume: Some(vol.name.clone()),
        action: Some(Action::Bind),
        ..decision(mode)
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;
    use crate::decision::codes;

    #[test]
    fn decisions_keep_workflow_order_and_every_stage_names_its_subject() {
        let inv = inventory("a")
            .provisioner(
                prov("fast", hostpath())
                    .annotate("tier", "fast")
                    .ephemeral_all()
                    .create_all(),
            )
            .volume(pv("pv-1", Some("fast"), gib(5)))
            .build();
        let wf = workflow(vec![
            fb_volume(
                "zeta",
                FbSpec {
                    annotations: ann(&[("tier", "fast")]),
                    ..Default::default()
                },
            ),
            fb_volume(
                "alpha",
                FbSpec {
                    use_: Some("fast"),
                    name: Some("pv-1"),
                    ..Default::default()
                },
            ),
            claim_volume("data", claim("data").class_named("fast").size(gib(1))),
        ]);
        let mut trace = Trace::default();
        let out = resolve_volumes(&inv, &ClusterState::default(), &request(wf, &["g"]), &mut trace);
        assert_eq!(out.keys().collect::<Vec<_>>(), ["zeta", "alpha", "data"]);
        assert!(
            trace
                .iter()
                .all(|t| ["zeta", "alpha", "data"].contains(&t.subject.as_str()))
        );
        assert_eq!(trace.iter().filter(|t| t.stage == stages::MODE).count(), 3);
    }

    #[test]
    fn a_volume_bound_by_one_workflow_volume_is_not_bound_again() {
        let inv = inventory("a")
            .provisioner(prov("std", nfs()).ephemeral_all().create_all())
            .volume(pv("pv-1", Some("std"), gib(10)))
            .build();
        let wf = workflow(vec![
            claim_volume("one", claim("one").class_named("std").size(gib(1))),
            claim_volume("two", claim("two").class_named("std").size(gib(1))),
        ]);
        let mut trace = Trace::default();
        let out = resolve_volumes(&inv, &ClusterState::default(), &request(wf, &[]), &mut trace);
        assert_eq!(out["one"].action, Some(Action::Bind));
        assert_eq!(out["one"].volume.as_deref(), Some("pv-1"));
        assert_eq!(out["two"].action, Some(Action::Provision));
        let last_match = trace
            .iter()
            .rfind(|t| t.stage == stages::BINDING_MATCH && t.subject == "two")
            .unwrap();
        assert_eq!(last_match.rejected[0].reasons[0].code, codes::RESERVED);
        assert!(last_match.rejected[0].reasons[0].message.contains("`one`"));
    }
}
