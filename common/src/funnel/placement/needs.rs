//! What one job needs from a cloud zone and its hosts (Cloud Assembly's provisioning funnel), worked out once per job before
//! any stage runs, and which jobs of the workflow may run at the same time.

use std::collections::{BTreeMap, BTreeSet};

use indexmap::IndexMap;

use crate::decision::{Action, Reason, VolumeDecision, codes};
use crate::model::{Constraint, Inventory, Job, PersistentVolume, Provisioner, Resources, Strength};

/// One workflow volume a job mounts, with what the volume funnel decided for it.
#[derive(Debug, Clone)]
pub(crate) struct Mounted<'a> {
    /// The volume's key in the workflow.
    pub key: &'a str,
    /// The volume funnel's decision (always without error here).
    pub decision: &'a VolumeDecision,
    /// The provisioner's definition, when the inventory has one (a class used only for static
    /// binding may have none).
    pub provisioner: Option<&'a Provisioner>,
    /// The existing persistent volume, for `bind` and `existing`.
    pub pv: Option<&'a PersistentVolume>,
}

impl Mounted<'_> {
    /// The provisioner's name, if the decision names one.
    pub fn provisioner_name(&self) -> Option<&str> {
        self.decision.provisioner.as_deref()
    }

    /// True for a new volume on node-local storage (hostpath with `local: true`): it will live
    /// on the host of the first job that mounts it and pins every later job to that host.
    pub fn is_node_local_new(&self) -> bool {
        self.decision.action == Some(Action::Provision) && self.provisioner.is_some_and(|p| p.driver.is_node_local())
    }

    /// Bytes of storage a new volume adds to the project's usage (0 for existing volumes).
    pub fn new_bytes(&self) -> u128 {
        self.decision.new_volume.as_ref().map_or(0, |n| n.capacity.0)
    }
}

/// Everything the placement stages ask of one job.
#[derive(Debug, Clone)]
pub(crate) struct JobNeeds<'a> {
    /// The job itself (constraints, affinity, networks, image).
    pub job: &'a Job,
    /// Per host: cpu cores, memory bytes, 1 instance, devices.
    pub per_node: Resources,
    /// Number of distinct hosts (multinode `nodes`; 0 is read as 1).
    pub nodes: u64,
    /// Distinct mounted volumes, in mount order.
    pub mounts: Vec<Mounted<'a>>,
}

impl<'a> JobNeeds<'a> {
    /// The job's hard constraints (Cloud Assembly's provisioning funnel step 3.2).
    pub fn hard(&self) -> impl Iterator<Item = &'a Constraint> {
        self.job.constraints.iter().filter(|c| c.strength == Strength::Hard)
    }

    /// The job's soft constraints (Cloud Assembly's provisioning funnel step 4.1).
    pub fn soft(&self) -> impl Iterator<Item = &'a Constraint> {
        self.job.constraints.iter().filter(|c| c.strength == Strength::Soft)
    }

    /// The job wants its hosts to itself (`resource.exclusive`).
    pub fn exclusive(&self) -> bool {
        self.job.resources.exclusive
    }

    /// Resource annotations: hard requirements that host ∪ zone tags hold `key` with exactly
    /// `value`.
    pub fn annotations(&self) -> &'a BTreeMap<String, String> {
        &self.job.resources.annotations
    }

    /// Totals over all nodes: (instances, cpu cores, memory bytes), saturating.
    pub fn totals(&self) -> (u64, u64, u128) {
        (
            self.nodes,
            self.per_node.cpu.saturating_mul(self.nodes),
            self.per_node.memory.0.saturating_mul(u128::from(self.nodes)),
        )
    }
}

/// Works out what `job` needs.
///
/// Errors: `volume_unresolved` naming every mounted volume that the workflow does not define or
/// that the volume funnel could not resolve (such a job is not placed).
pub(crate) fn job_needs<'a>(
    inv: &'a Inventory,
    job: &'a Job,
    volumes: &'a IndexMap<String, VolumeDecision>,
) -> Result<JobNeeds<'a>, Reason> {
    let mut mounts: Vec<Mounted<'a>> = Vec::new();
    let mut problems = Vec::new();
    for m in &job.mounts {
        if mounts.iter().any(|x| x.key == m.volume) {
            continue;
        }
        match volumes.get(&m.volume) {
            None => problems.push(format!("`{}` is not a volume of the workflow", m.volume)),
            Some(d) => match &d.error {
                Some(e) => problems.push(format!("`{}` ({}: {})", m.volume, e.code, e.message)),
                None => mounts.push(mounted(inv, &m.volume, d)),
            },
        }
    }
    if !problems.is_empty() {
        return Err(Reason::new(
            codes::VOLUME_UNRESOLVED,
            format!(
                "job `{}` mounts volumes that could not be resolved: {}",
                job.name,
                problems.join("; ")
            ),
        ));
    }
    let r = &job.resources;
    let per_node = Resources {
        cpu: r.cpu,
        memory: r.memory,
        instances: 1,
        devices: r.devices.clone(),
    };
    Ok(JobNeeds {
        job,
        per_node,
        nodes: job.nodes.max(1),
        mounts,
    })
}

fn mounted<'a>(inv: &'a Inventory, key: &'a str, d: &'a VolumeDecision) -> Mounted<'a> {
    let prov_name = d.provisioner.as_deref();
    let provisioner = prov_name.and_then(|n| inv.provisioners.iter().find(|p| p.name == n));
    let pv = match (d.action, d.volume.as_deref()) {
        (Some(Action::Bind | Action::Existing), Some(name)) => inv
            .volumes
            .iter()
            .find(|v| v.name == name && v.provisioner.as_deref() == prov_name),
        _ => None,
    };
    Mounted {
        key,
        decision: d,
        provisioner,
        pv: pv.map(|v| &**v),
    }
}

/// Which jobs of a workflow may run at the same time: two jobs run concurrently unless one
/// transitively depends on the other through `depends_on`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dependencies {
    /// Per job name: every job it transitively waits for.
    ancestors: BTreeMap<String, BTreeSet<String>>,
}

impl Dependencies {
    /// Builds the transitive closure of `depends_on` over `jobs` (cycles and unknown names are
    /// tolerated: a cycle makes its members depend on each other).
    pub fn new(jobs: &[Job]) -> Self {
        let direct: BTreeMap<&str, &[String]> = jobs
            .iter()
            .map(|j| (j.name.as_str(), j.depends_on.as_slice()))
            .collect();
        let mut ancestors = BTreeMap::new();
        for j in jobs {
            let mut seen: BTreeSet<String> = BTreeSet::new();
            let mut stack: Vec<&str> = j.depends_on.iter().map(String::as_str).collect();
            while let Some(n) = stack.pop() {
                if seen.insert(n.to_string())
                    && let Some(next) = direct.get(n)
                {
                    stack.extend(next.iter().map(String::as_str));
                }
            }
            ancestors.insert(j.name.clone(), seen);
        }
        Dependencies { ancestors }
    }

    /// True when `a` waits (directly or transitively) for `b`.
    pub fn depends(&self, a: &str, b: &str) -> bool {
        self.ancestors.get(a).is_some_and(|s| s.contains(b))
    }

    /// True when jobs `a` and `b` (distinct) may run at the same time.
    pub fn concurrent(&self, a: &str, b: &str) -> bool {
        a != b && !self.depends(a, b) && !self.depends(b, a)
    }
}
