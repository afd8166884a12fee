//! Cross-references and inheritance: turns the decoded parts of a Fuzzfile into a
//! [`Workflow`].
//!
//! - Every name must resolve: a mount's volume must be defined under `volumes`; `depends-on`,
//!   `requires` and `affinity` must name a job or service of the workflow (jobs and services
//!   share one namespace). A dangling name is an error at the place it is written, with a
//!   "did you mean" hint.
//! - `defaults`: a job's mounts are its own, then `defaults.job.mounts` (services:
//!   `defaults.service.mounts`), then `defaults.mounts`, an inherited entry being skipped when a
//!   nearer level already has the same key (the volume name in v1, the path in v4), as a map
//!   merge would. Its resource is its own, else `defaults.job.resource`
//!   (`defaults.service.resource`), else `defaults.resource`, else 1 core and no memory.
//! - Access modes (the Kubernetes volume provisioning design claim semantics): a volume mounted by a multinode job (nodes > 1)
//!   or by two or more jobs/services, which may land on different hosts, needs ReadWriteMany;
//!   otherwise ReadWriteOnce.

use std::collections::{BTreeMap, BTreeSet};

use super::defaults::Defaults;
use super::job::JobDraft;
use super::mount::MountRef;
use super::shapes::NameRef;
use crate::yaml::{Ctx, closest};
use fedvol_common::model::{
    AccessMode, AccessModes, Affinity, FuzzballVolume, Job, JobKind, JobResources, Mount, VolumeRequest, VolumeSource,
    Workflow, WorkflowFormat,
};

/// Workflow-level fields read from the top of the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Header {
    /// fedvol addition `project`.
    pub project: Option<String>,
    /// fedvol addition `clusters`.
    pub clusters: Vec<String>,
    /// fedvol addition `priority` (a priority class name).
    pub priority: Option<String>,
    /// Workflow `annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// A decoded volume and its key.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct VolumeDraft {
    /// The volume's key and where it stands.
    pub key: NameRef,
    /// What it asks for.
    pub source: FuzzballVolume,
}

/// Checks every reference, applies `defaults`, computes access modes and builds the workflow.
/// Jobs come first, then services, each in file order (as `drafts` is).
pub(super) fn assemble(
    ctx: &mut Ctx,
    name: &str,
    format: WorkflowFormat,
    header: Header,
    volumes: Vec<VolumeDraft>,
    drafts: Vec<JobDraft>,
    defaults: &Defaults,
) -> Workflow {
    let volume_keys: Vec<&str> = volumes.iter().map(|v| v.key.name.as_str()).collect();
    let inherited = [&defaults.all, &defaults.job, &defaults.service];
    for m in drafts
        .iter()
        .flat_map(|d| &d.mounts)
        .chain(inherited.iter().flat_map(|l| &l.mounts))
    {
        check_volume(ctx, m, &volume_keys);
    }
    let kinds = job_kinds(ctx, &drafts);
    for d in &drafts {
        check_job_refs(ctx, d, &kinds);
    }
    let jobs: Vec<Job> = drafts.iter().map(|d| build_job(d, defaults, &volume_keys)).collect();
    let users = volume_users(&jobs);
    let volumes = volumes
        .into_iter()
        .map(|v| VolumeRequest {
            access_modes: access_modes(users.get(v.key.name.as_str())),
            line: v.key.span.line,
            key: v.key.name,
            source: VolumeSource::Fuzzball(v.source),
        })
        .collect();
    let mut annotations = header.annotations;
    for d in drafts.iter().filter(|d| d.kind == JobKind::Job) {
        if let Some(script) = &d.script {
            annotations.insert(fedvol_common::run::script_key(&d.name.name), script.clone());
        }
    }
    Workflow {
        name: name.to_string(),
        format,
        volumes,
        jobs,
        project: header.project,
        clusters: header.clusters,
        annotations,
        priority: header.priority,
    }
}

/// The section a job kind is written under.
fn section(kind: JobKind) -> &'static str {
    match kind {
        JobKind::Job => "jobs",
        JobKind::Service => "services",
    }
}

/// Reports a mount whose volume is not defined.
fn check_volume(ctx: &mut Ctx, m: &MountRef, volume_keys: &[&str]) {
    if volume_keys.contains(&m.volume.name.as_str()) {
        return;
    }
    let msg = format!(
        "mount names volume `{}`, which is not defined under `volumes`",
        m.volume.name
    );
    match closest(&m.volume.name, volume_keys.iter().copied()) {
        Some(c) => ctx.error_hint(m.volume.span, &m.field, msg, format!("did you mean `{c}`?")),
        None => ctx.error(m.volume.span, &m.field, msg),
    }
}

/// Maps every job and service name to its kind; a name used by both a job and a service is an
/// error (references could not tell them apart).
fn job_kinds(ctx: &mut Ctx, drafts: &[JobDraft]) -> BTreeMap<String, JobKind> {
    let mut kinds = BTreeMap::new();
    for d in drafts {
        if let Some(prev) = kinds.insert(d.name.name.clone(), d.kind)
            && prev != d.kind
        {
            let msg = format!(
                "`{}` is the name of both a job and a service; \
                 jobs and services share one namespace",
                d.name.name
            );
            ctx.error(d.name.span, &format!("{}.{}", section(d.kind), d.name.name), msg);
        }
    }
    kinds
}

/// Checks `depends-on`, `requires` and `affinity` names of one job.
fn check_job_refs(ctx: &mut Ctx, d: &JobDraft, kinds: &BTreeMap<String, JobKind>) {
    let base = format!("{}.{}", section(d.kind), d.name.name);
    for dep in &d.depends_on {
        let field = format!("{base}.depends-on");
        if let Some(kind) = check_target(ctx, &dep.target, d, &field, kinds)
            && dep.running
            && kind == JobKind::Job
        {
            ctx.error(
                dep.target.span,
                &field,
                format!(
                    "status RUNNING applies only to services, and `{}` is a job; use FINISHED",
                    dep.target.name
                ),
            );
        }
    }
    for req in &d.requires {
        check_target(ctx, req, d, &format!("{base}.requires"), kinds);
    }
    for w in &d.with {
        check_target(ctx, w, d, &format!("{base}.affinity.with"), kinds);
    }
    for a in &d.apart_from {
        check_target(ctx, a, d, &format!("{base}.affinity.apart-from"), kinds);
        if d.with.iter().any(|w| w.name == a.name) {
            ctx.error(
                a.span,
                &format!("{base}.affinity.apart-from"),
                format!(
                    "`{}` is also listed under `with`; a job cannot both share and avoid its host",
                    a.name
                ),
            );
        }
    }
}

/// Checks that `target` names another job or service; returns its kind.
fn check_target(
    ctx: &mut Ctx,
    target: &NameRef,
    owner: &JobDraft,
    field: &str,
    kinds: &BTreeMap<String, JobKind>,
) -> Option<JobKind> {
    if target.name == owner.name.name {
        ctx.error(target.span, field, format!("`{}` refers to itself", target.name));
        return None;
    }
    if let Some(kind) = kinds.get(&target.name) {
        return Some(*kind);
    }
    let msg = format!("`{}` is not a job or service of this workflow", target.name);
    match closest(&target.name, kinds.keys().map(String::as_str)) {
        Some(c) => ctx.error_hint(target.span, field, msg, format!("did you mean `{c}`?")),
        None => ctx.error(target.span, field, msg),
    }
    None
}

/// Builds the model job: merged mounts (see the module docs; dangling ones left out), the
/// inherited resource, and names.
fn build_job(d: &JobDraft, defaults: &Defaults, volume_keys: &[&str]) -> Job {
    let levels = [&d.mounts, &defaults.for_kind(d.kind).mounts, &defaults.all.mounts];
    let mut keys: BTreeSet<&str> = BTreeSet::new();
    let mut merged: Vec<&MountRef> = Vec::new();
    for level in levels {
        for m in level {
            if keys.insert(&m.key) {
                merged.push(m);
            }
        }
    }
    let mounts = merged
        .into_iter()
        .filter(|m| volume_keys.contains(&m.volume.name.as_str()))
        .map(|m| Mount {
            volume: m.volume.name.clone(),
            path: m.path.clone(),
        })
        .collect();
    let resources = d
        .resource
        .clone()
        .or_else(|| defaults.for_kind(d.kind).resource.clone())
        .or_else(|| defaults.all.resource.clone())
        .unwrap_or(JobResources {
            cpu: 1,
            ..JobResources::default()
        });
    let depends_on = if d.depends_on.is_empty() {
        d.requires.iter().map(|r| r.name.clone()).collect()
    } else {
        d.depends_on.iter().map(|dep| dep.target.name.clone()).collect()
    };
    Job {
        name: d.name.name.clone(),
        kind: d.kind,
        image: d.image.clone(),
        mounts,
        resources,
        nodes: d.nodes,
        depends_on,
        constraints: d.constraints.clone(),
        affinity: Affinity {
            with: d.with.iter().map(|n| n.name.clone()).collect(),
            apart_from: d.apart_from.iter().map(|n| n.name.clone()).collect(),
        },
        networks: d.networks.clone(),
        timeout_ms: match d.kind {
            JobKind::Job => d.timeout_ms.or(defaults.job_timeout_ms),
            JobKind::Service => d.timeout_ms,
        },
        line: d.name.span.line,
    }
}

/// For each mounted volume: how many jobs/services mount it, and whether one of them is
/// multinode.
fn volume_users(jobs: &[Job]) -> BTreeMap<&str, (usize, bool)> {
    let mut users: BTreeMap<&str, (usize, bool)> = BTreeMap::new();
    for j in jobs {
        let mine: BTreeSet<&str> = j.mounts.iter().map(|m| m.volume.as_str()).collect();
        for v in mine {
            let e = users.entry(v).or_default();
            e.0 += 1;
            e.1 |= j.nodes > 1;
        }
    }
    users
}

/// ReadWriteMany when the volume is mounted by two or more jobs/services or by a multinode
/// job, else ReadWriteOnce (also for a volume nobody mounts).
fn access_modes(users: Option<&(usize, bool)>) -> AccessModes {
    match users {
        Some(&(count, multinode)) if count >= 2 || multinode => AccessModes::of(&[AccessMode::ReadWriteMany]),
        _ => AccessModes::of(&[AccessMode::ReadWriteOnce]),
    }
}
