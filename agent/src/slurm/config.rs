//! The agent configuration's `slurm:` block: how to reach Slurm, how often to read it, and the
//! fedvol settings Slurm has no word for (each partition's zone priority, placement policy,
//! tags, segment and host price; which GRES is which device).
//!
//! ```yaml
//! inventorySource: slurm
//! slurm:
//!   scontrol: /usr/bin/scontrol     # default `scontrol` on PATH
//!   slurmConf: /etc/slurm/slurm.conf  # SLURM_CONF for the commands; default: Slurm's own
//!   refreshMs: 10000                # default 10000
//!   timeoutMs: 5000                 # each command, default 5000
//!   onlyListed: false               # true: partitions not listed below are not zones
//!   partitions:                     # in preference order (a node in several goes to the first)
//!     gpu: {priority: 1, placementPolicy: BINPACK, tags: ["accel:gpu"], segment: rack-1}
//!     batch: {priority: 5, hostCostPerHour: 0.4}   # price of one node-hour (cost-aware choice)
//!   devices: {gpu: nvidia.com/gpu}  # GRES name → device name (this is the default)
//!   jobs:                           # absent: fedvol submits nothing (placement only)
//!     run: directly                 # directly | container
//!     runtime: [apptainer, exec]    # container only: the command before the image
//!     sbatch: /usr/bin/sbatch       # default `sbatch` on PATH
//!     scancel: /usr/bin/scancel     # default `scancel` on PATH
//!     pollMs: 1000                  # how often job states are read (one scontrol call), default 1000
//!     output: /shared/logs/%x-%j.out  # sbatch --output; default <workDir>/<request id>/<job>-<id>.out
//!     grant: sudo                   # how jobs run as their users: sudo -n -u <account> (deploy/sudo/fedvol-agent)
//!     sudo: /usr/bin/sudo           # default `sudo` on PATH
//!     userMap: /etc/fedvol/users.map  # `<federation user> <account>` lines; absent: the same name
//!     minUid: 1000                  # accounts below are refused (root, system accounts)
//!     workDir: '%h/fedvol'          # each request's working directory is <workDir>/<request id>; %u account, %h home
//!     account: project              # sbatch --account: the workflow's project, or a map {project: account}; absent: none
//!     qos: {high: high}             # priority class -> sbatch --qos; absent: none
//!     memPerCore: 1GiB              # counted and asked (--mem) for a job that gives no memory, default 1GiB
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fedvol_common::model::{PlacementPolicy, Tag};
use fedvol_formats::yaml::decode::join;
use fedvol_formats::yaml::{Ctx, Node};

/// fedvol's settings for one partition's zone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionSettings {
    /// The partition's name.
    pub name: String,
    /// Zone priority (lower = preferred); absent: minus the partition's `PriorityTier`.
    pub priority: Option<i64>,
    /// Host selection policy; absent: `DEFAULT` (seeded random).
    pub placement_policy: Option<PlacementPolicy>,
    /// Zone capability tags.
    pub tags: Vec<Tag>,
    /// Network segment, for storage reachability.
    pub segment: Option<String>,
    /// `hostCostPerHour`: the price of one node of the partition for one hour (the zone's
    /// `hostCostPerHour`); absent: its nodes are not priced.
    pub host_cost_per_hour: Option<Price>,
}

/// A price read from the configuration: a finite number >= 0 (the parser refuses anything else,
/// NaN included), so equality of two prices is an equivalence and the settings can be `Eq`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Price(pub f64);

impl Eq for Price {}

/// How a submitted job's command runs on its node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RunMode {
    /// The job's script runs as it is; its image is recorded in the job's comment, not used.
    #[default]
    Directly,
    /// The job's script runs inside its image through a container runtime: `runtime`, then the
    /// image (its URI as the workflow gives it), then `/bin/sh -c <script>`.
    Container {
        /// The runtime's command and arguments before the image (`[apptainer, exec]`).
        runtime: Vec<String>,
    },
}

/// Which Slurm account (`sbatch --account`) a job is charged to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AccountRule {
    /// None given: Slurm's default account of the job's user.
    #[default]
    None,
    /// The workflow's project (`default` when it names none).
    Project,
    /// Per project; a project not listed gets none.
    Map(BTreeMap<String, String>),
}

impl AccountRule {
    /// The account for a workflow of `project`.
    pub fn account(&self, project: Option<&str>) -> Option<String> {
        let project = project.unwrap_or("default");
        match self {
            AccountRule::None => None,
            AccountRule::Project => Some(project.to_string()),
            AccountRule::Map(m) => m.get(project).cloned(),
        }
    }
}

/// How the agent submits committed jobs to Slurm and follows them (`slurm.jobs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobsConfig {
    /// How the command runs.
    pub run: RunMode,
    /// The `sbatch` program.
    pub sbatch: PathBuf,
    /// The `scancel` program.
    pub scancel: PathBuf,
    /// How often the jobs' states are read, ms.
    pub poll_ms: u64,
    /// `sbatch --output` (Slurm's filename pattern), when given.
    pub output: Option<String>,
    /// The `sudo` program of the grant (`grant: sudo`, the only mechanism).
    pub sudo: PathBuf,
    /// The user map file (`<federation user> <account>` lines); `None`: the same name.
    pub user_map: Option<PathBuf>,
    /// The lowest uid a job may run as.
    pub min_uid: u32,
    /// Where each request's working directory goes (`%u`: the account, `%h`: its home).
    pub work_dir: String,
    /// `sbatch --account`.
    pub account: AccountRule,
    /// Priority class → `sbatch --qos`.
    pub qos: BTreeMap<String, String>,
    /// Memory per core for a job that asks for none, bytes.
    pub mem_per_core: fedvol_common::size::ByteSize,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            run: RunMode::Directly,
            sbatch: PathBuf::from("sbatch"),
            scancel: PathBuf::from("scancel"),
            poll_ms: 1_000,
            output: None,
            sudo: PathBuf::from("sudo"),
            user_map: None,
            min_uid: 1000,
            work_dir: "%h/fedvol".to_string(),
            account: AccountRule::None,
            qos: BTreeMap::new(),
            mem_per_core: fedvol_common::size::ByteSize(1 << 30),
        }
    }
}

/// How the agent reads its zones and hosts from Slurm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmConfig {
    /// The `scontrol` program (default `scontrol`, looked up on PATH).
    pub scontrol: PathBuf,
    /// `SLURM_CONF` for the commands, when not Slurm's default.
    pub slurm_conf: Option<PathBuf>,
    /// How often Slurm is read, ms (default 10000; SIGHUP reads it at once).
    pub refresh_ms: u64,
    /// How long one command may run, ms (default 5000); then it is killed and the read failed.
    pub timeout_ms: u64,
    /// Only the partitions listed in `partitions` become zones.
    pub only_listed: bool,
    /// Per-partition settings, in preference order.
    pub partitions: Vec<PartitionSettings>,
    /// GRES name → device name (`gpu` → `nvidia.com/gpu` unless given; others keep their name).
    pub devices: BTreeMap<String, String>,
    /// Submitting committed jobs (`slurm.jobs`); `None`: fedvol places and submits nothing.
    pub jobs: Option<Box<JobsConfig>>,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            scontrol: PathBuf::from("scontrol"),
            slurm_conf: None,
            refresh_ms: 10_000,
            timeout_ms: 5_000,
            only_listed: false,
            partitions: Vec::new(),
            devices: BTreeMap::new(),
            jobs: None,
        }
    }
}

impl SlurmConfig {
    /// The device name a job asks for to get GRES `gres` (`gpu` → `nvidia.com/gpu`, as the
    /// Fuzzfile spells GPUs, unless `devices` says otherwise; other names unchanged).
    pub fn device_name(&self, gres: &str) -> String {
        match self.devices.get(gres) {
            Some(d) => d.clone(),
            None if gres == "gpu" => "nvidia.com/gpu".to_string(),
            None => gres.to_string(),
        }
    }

    /// The GRES name of device `device` (the inverse of [`Self::device_name`]).
    pub fn gres_name(&self, device: &str) -> String {
        if let Some((g, _)) = self.devices.iter().find(|(_, d)| d.as_str() == device) {
            return g.clone();
        }
        if device == "nvidia.com/gpu" && !self.devices.contains_key("gpu") {
            return "gpu".to_string();
        }
        device.to_string()
    }

    /// The settings of partition `name`, if the configuration lists it.
    pub fn settings(&self, name: &str) -> Option<&PartitionSettings> {
        self.partitions.iter().find(|p| p.name == name)
    }
}

fn tag_list(ctx: &mut Ctx, n: &Node, field: &str) -> Vec<Tag> {
    let Some(items) = ctx.string_list(n, field) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in items {
        match Tag::parse(&s) {
            Ok(t) => out.push(t),
            Err(e) => ctx.error(n.span, field, e.to_string()),
        }
    }
    out
}

/// Reads the `slurm:` block at `node` (field name `slurm`); relative paths are relative to
/// `base`. Problems go to `ctx` with their position.
pub fn parse_slurm(ctx: &mut Ctx, node: &Node, base: &Path) -> SlurmConfig {
    let mut cfg = SlurmConfig::default();
    let Some(mut r) = ctx.map(node, "slurm") else {
        return cfg;
    };
    let rel = |s: String| {
        let p = PathBuf::from(s);
        if p.is_absolute() || p.components().count() == 1 {
            p
        } else {
            base.join(p)
        }
    };
    if let Some(n) = r.take("scontrol")
        && let Some(s) = ctx.nonempty_string(n, "slurm.scontrol")
    {
        cfg.scontrol = rel(s);
    }
    if let Some(n) = r.take("slurmConf")
        && let Some(s) = ctx.nonempty_string(n, "slurm.slurmConf")
    {
        let p = PathBuf::from(s);
        cfg.slurm_conf = Some(if p.is_absolute() { p } else { base.join(p) });
    }
    for (key, slot, min) in [
        ("refreshMs", &mut cfg.refresh_ms, 100),
        ("timeoutMs", &mut cfg.timeout_ms, 100),
    ] {
        if let Some(n) = r.take(key)
            && let Some(v) = ctx.int(n, &join("slurm", key), min, 86_400_000)
        {
            *slot = v as u64;
        }
    }
    if let Some(n) = r.take("onlyListed")
        && let Some(v) = ctx.bool(n, "slurm.onlyListed")
    {
        cfg.only_listed = v;
    }
    if let Some(n) = r.take("devices")
        && let Some(m) = ctx.string_map(n, "slurm.devices")
    {
        cfg.devices = m;
    }
    if let Some(n) = r.take("jobs") {
        cfg.jobs = parse_jobs(ctx, n, &rel).map(Box::new);
    }
    if let Some(n) = r.take("partitions")
        && let Some(mut pr) = ctx.map(n, "slurm.partitions")
    {
        for (k, v) in pr.rest() {
            let field = join("slurm.partitions", &k.name);
            let mut s = PartitionSettings {
                name: k.name.clone(),
                ..Default::default()
            };
            if v.is_null() {
                cfg.partitions.push(s);
                continue;
            }
            let Some(mut p) = ctx.map(v, &field) else { continue };
            if let Some(n) = p.take("priority") {
                s.priority = ctx
                    .int(n, &join(&field, "priority"), i64::MIN as i128, i64::MAX as i128)
                    .map(|v| v as i64);
            }
            if let Some(n) = p.take("placementPolicy") {
                s.placement_policy = match ctx.one_of(
                    n,
                    &join(&field, "placementPolicy"),
                    &["DEFAULT", "BINPACK", "SPREAD", "SPREAD_MEMORY"],
                ) {
                    Some("BINPACK") => Some(PlacementPolicy::Binpack),
                    Some("SPREAD") => Some(PlacementPolicy::Spread),
                    Some("SPREAD_MEMORY") => Some(PlacementPolicy::SpreadMemory),
                    Some(_) => Some(PlacementPolicy::Default),
                    None => None,
                };
            }
            if let Some(n) = p.take("tags") {
                s.tags = tag_list(ctx, n, &join(&field, "tags"));
            }
            if let Some(n) = p.take("segment") {
                s.segment = ctx.nonempty_string(n, &join(&field, "segment"));
            }
            if let Some(n) = p.take("hostCostPerHour") {
                s.host_cost_per_hour =
                    fedvol_formats::inventory::price(ctx, n, &join(&field, "hostCostPerHour"), "a price per host-hour")
                        .map(Price);
            }
            p.finish(ctx);
            cfg.partitions.push(s);
        }
        pr.finish(ctx);
    }
    r.finish(ctx);
    cfg
}

/// Reads `slurm.jobs` (see the module's example).
fn parse_jobs(ctx: &mut Ctx, node: &Node, rel: &dyn Fn(String) -> PathBuf) -> Option<JobsConfig> {
    let mut cfg = JobsConfig::default();
    if node.is_null() {
        return Some(cfg);
    }
    let mut r = ctx.map(node, "slurm.jobs")?;
    let mut runtime = None;
    if let Some(n) = r.take("runtime") {
        runtime = ctx.string_list(n, "slurm.jobs.runtime");
        if runtime.as_ref().is_some_and(Vec::is_empty) {
            ctx.error(
                n.span,
                "slurm.jobs.runtime",
                "expected the runtime's command, e.g. [apptainer, exec]",
            );
        }
    }
    let mode = match r.take("run") {
        Some(n) => ctx
            .one_of(n, "slurm.jobs.run", &["directly", "container"])
            .map(|m| (m, n.span)),
        None => Some(("directly", node.span)),
    };
    match (mode, runtime) {
        (Some(("container", _)), Some(rt)) => cfg.run = RunMode::Container { runtime: rt },
        (Some(("container", span)), None) => ctx.error(
            span,
            "slurm.jobs.runtime",
            "`run: container` needs `runtime`, the command before the image, e.g. [apptainer, exec]",
        ),
        (Some((_, span)), Some(_)) => ctx.error(
            span,
            "slurm.jobs.runtime",
            "`runtime` is read only with `run: container`; add it, or remove `runtime`",
        ),
        _ => {}
    }
    for (key, slot) in [("sbatch", &mut cfg.sbatch), ("scancel", &mut cfg.scancel)] {
        if let Some(n) = r.take(key)
            && let Some(s) = ctx.nonempty_string(n, &join("slurm.jobs", key))
        {
            *slot = rel(s);
        }
    }
    if let Some(n) = r.take("pollMs")
        && let Some(v) = ctx.int(n, "slurm.jobs.pollMs", 100, 86_400_000)
    {
        cfg.poll_ms = v as u64;
    }
    if let Some(n) = r.take("output") {
        cfg.output = ctx.nonempty_string(n, "slurm.jobs.output");
    }
    if let Some(n) = r.take("grant") {
        let _ = ctx.one_of(n, "slurm.jobs.grant", &["sudo"]);
    }
    if let Some(n) = r.take("sudo")
        && let Some(s) = ctx.nonempty_string(n, "slurm.jobs.sudo")
    {
        cfg.sudo = rel(s);
    }
    if let Some(n) = r.take("userMap")
        && let Some(s) = ctx.nonempty_string(n, "slurm.jobs.userMap")
    {
        let p = rel(s);
        cfg.user_map = Some(if p.components().count() == 1 && !p.is_absolute() {
            rel(format!("./{}", p.display()))
        } else {
            p
        });
    }
    if let Some(n) = r.take("minUid")
        && let Some(v) = ctx.int(n, "slurm.jobs.minUid", 1, i128::from(u32::MAX))
    {
        cfg.min_uid = v as u32;
    }
    if let Some(n) = r.take("workDir")
        && let Some(s) = ctx.nonempty_string(n, "slurm.jobs.workDir")
    {
        if !(s.starts_with('/') || s.starts_with("%h")) {
            ctx.error(
                n.span,
                "slurm.jobs.workDir",
                "expected an absolute path, or one starting with `%h` (the account's home)",
            );
        }
        cfg.work_dir = s;
    }
    if let Some(n) = r.take("account") {
        if n.is_null() {
        } else if let Some(m) = n
            .as_map()
            .is_some()
            .then(|| ctx.string_map(n, "slurm.jobs.account"))
            .flatten()
        {
            cfg.account = AccountRule::Map(m);
        } else if ctx.one_of(n, "slurm.jobs.account", &["project"]).is_some() {
            cfg.account = AccountRule::Project;
        }
    }
    if let Some(n) = r.take("qos")
        && let Some(m) = ctx.string_map(n, "slurm.jobs.qos")
    {
        cfg.qos = m;
    }
    if let Some(n) = r.take("memPerCore")
        && let Some(s) = ctx.nonempty_string(n, "slurm.jobs.memPerCore")
    {
        match fedvol_common::size::ByteSize::parse(&s) {
            Ok(b) => cfg.mem_per_core = b,
            Err(e) => ctx.error(
                n.span,
                "slurm.jobs.memPerCore",
                format!("expected a size such as 2GiB: {e}"),
            ),
        }
    }
    r.finish(ctx);
    Some(cfg)
}
