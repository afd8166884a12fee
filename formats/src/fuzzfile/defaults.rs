//! `defaults` (schema §2): what jobs and services inherit. Placement inherits `mounts` and
//! `resource`, and jobs inherit `defaults.job.policy.timeout.execute` (for the cost estimate,
//! the cost estimate) unless they set their own; `env` and the rest of `policy` are checked for shape
//! and dropped.

use super::mount::{MountForm, MountRef, mounts};
use super::resource::resource;
use super::shapes::{env_list, policy};
use crate::yaml::{Ctx, Node};
use fedvol_common::model::{JobKind, JobResources};

/// Mounts and resource inherited from one level of `defaults`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Inherited {
    /// Mounts every job (or service) at this level gets, unless it mounts the same key itself.
    pub mounts: Vec<MountRef>,
    /// Resource used when the job (or service) has none.
    pub resource: Option<JobResources>,
}

/// The whole `defaults` section.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Defaults {
    /// `defaults.mounts` / `defaults.resource`: for jobs and services.
    pub all: Inherited,
    /// `defaults.job`: for jobs.
    pub job: Inherited,
    /// `defaults.service`: for services.
    pub service: Inherited,
    /// `defaults.job.policy.timeout.execute`, ms: for jobs without a timeout of their own.
    pub job_timeout_ms: Option<u64>,
}

impl Defaults {
    /// The kind-specific level for `kind`.
    pub fn for_kind(&self, kind: JobKind) -> &Inherited {
        match kind {
            JobKind::Job => &self.job,
            JobKind::Service => &self.service,
        }
    }
}

/// Reads `defaults`: `job` {`env`, `mounts`, `policy`, `resource`}, `service` {`env`, `mounts`,
/// `resource`} and the shared `env`, `mounts`, `resource`.
pub(super) fn defaults(ctx: &mut Ctx, node: &Node, field: &str, form: MountForm) -> Defaults {
    let mut out = Defaults::default();
    let Some(mut r) = ctx.map(node, field) else {
        return out;
    };
    out.all = level(ctx, &mut r, form);
    if let Some(n) = r.take("job")
        && let Some(mut j) = ctx.map(n, &r.path("job"))
    {
        out.job = level(ctx, &mut j, form);
        if let Some(p) = j.take("policy") {
            out.job_timeout_ms = policy(ctx, p, &j.path("policy"));
        }
        j.finish(ctx);
    }
    if let Some(n) = r.take("service")
        && let Some(mut s) = ctx.map(n, &r.path("service"))
    {
        out.service = level(ctx, &mut s, form);
        s.finish(ctx);
    }
    r.finish(ctx);
    out
}

/// Reads the `env`, `mounts` and `resource` keys every level shares.
fn level(ctx: &mut Ctx, r: &mut crate::yaml::MapReader<'_>, form: MountForm) -> Inherited {
    let mut out = Inherited::default();
    if let Some(n) = r.take("env") {
        let _ = env_list(ctx, n, &r.path("env"));
    }
    if let Some(n) = r.take("mounts") {
        out.mounts = mounts(ctx, n, &r.path("mounts"), form);
    }
    if let Some(n) = r.take("resource") {
        out.resource = resource(ctx, n, &r.path("resource"));
    }
    out
}
