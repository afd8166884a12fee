//! Typed Slurm records: nodes (`scontrol -d -o --future show node`) and partitions (`scontrol
//! -o --all show partition`), read from [`Record`]s. Only the fields fedvol maps are read;
//! every other key is ignored.

use std::collections::BTreeMap;

use super::records::Record;

/// Why a record could not be read: the output line, the record, the field and what was
/// expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {record}: {field}: {message}")]
pub struct RecordError {
    /// 1-based line of the command's output.
    pub line: usize,
    /// The node or partition (`node n1`), or `a record` when it has no name.
    pub record: String,
    /// The Slurm field (`CPUTot`).
    pub field: String,
    /// What was wrong and what was expected.
    pub message: String,
}

/// A node's state as `scontrol` prints it: a base state and `+`-joined flags
/// (`MIXED+DRAIN`, `IDLE+CLOUD+POWERED_DOWN`, `DOWN+NOT_RESPONDING`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeState {
    /// The base state, upper case (`IDLE`, `MIXED`, `ALLOCATED`, `DOWN`, `FUTURE`, ...).
    pub base: String,
    /// The flags, upper case (`DRAIN`, `NOT_RESPONDING`, `POWERED_DOWN`, ...).
    pub flags: Vec<String>,
}

impl NodeState {
    /// Parses `BASE[+FLAG...]`; a trailing `*` (sinfo's "not responding") becomes the
    /// `NOT_RESPONDING` flag.
    pub fn parse(s: &str) -> NodeState {
        let mut s = s.trim().to_ascii_uppercase();
        let mut flags = Vec::new();
        if s.ends_with('*') {
            s.pop();
            flags.push("NOT_RESPONDING".to_string());
        }
        let mut parts = s.split('+');
        let base = parts.next().unwrap_or_default().to_string();
        flags.extend(parts.filter(|p| !p.is_empty()).map(str::to_string));
        NodeState { base, flags }
    }

    /// Whether fedvol may place work on a node in this state (the documented mapping): the
    /// base state is `IDLE`, `MIXED`, `ALLOCATED` or `COMPLETING`, and no flag says the node is
    /// leaving or gone ([`OFF_FLAGS`]). Every other base state (`DOWN`, `FUTURE`, `UNKNOWN`,
    /// `ERROR`, ... and any state a later Slurm adds) is off.
    pub fn is_on(&self) -> bool {
        ON_STATES.contains(&self.base.as_str()) && !self.flags.iter().any(|f| OFF_FLAGS.contains(&f.as_str()))
    }
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.base)?;
        for fl in &self.flags {
            write!(f, "+{fl}")?;
        }
        Ok(())
    }
}

/// Base states in which a node runs jobs: power state on.
pub const ON_STATES: &[&str] = &["IDLE", "MIXED", "ALLOCATED", "COMPLETING"];

/// Flags that make a node off whatever its base state: drained or draining, failed or failing,
/// not responding, powered down or powering up or down, rebooting, in maintenance, reserved,
/// registered with an invalid configuration.
pub const OFF_FLAGS: &[&str] = &[
    "DRAIN",
    "DRAINING",
    "DRAINED",
    "FAIL",
    "FAILING",
    "NOT_RESPONDING",
    "POWERED_DOWN",
    "POWERING_DOWN",
    "POWER_DOWN",
    "POWERING_UP",
    "REBOOT_REQUESTED",
    "REBOOT_ISSUED",
    "MAINTENANCE",
    "RESERVED",
    "INVALID_REG",
    "INVALID",
];

/// One generic resource entry: `gpu:a100:2` → name `gpu`, type `a100`, count 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gres {
    /// The resource's name (`gpu`, `mps`, `shard`, ...).
    pub name: String,
    /// Its type, when typed (`a100`).
    pub kind: Option<String>,
    /// How many.
    pub count: u64,
}

/// Parses a `Gres=` / `GresUsed=` value: comma-separated `name[:type][:count][(...)]` entries
/// (a missing count is 1; counts may carry a `K`/`M`/`G`/`T` multiplier of 1024; a `(S:0-1)` or
/// `(IDX:0,2)` suffix is ignored, commas inside it included; a `(null)` type is no type).
///
/// Errors: a count that is not a number, as a sentence.
pub fn parse_gres(s: &str) -> Result<Vec<Gres>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut item = String::new();
    let mut items = Vec::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ if depth > 0 => continue,
            _ => {}
        }
        if depth == 0 && c != ')' {
            item.push(c);
        }
    }
    items.push(item);
    for it in items {
        let it = it.trim();
        if it.is_empty() || it == "(null)" {
            continue;
        }
        let parts: Vec<&str> = it.split(':').collect();
        let name = parts[0].to_string();
        let (kind, count) = match parts.len() {
            1 => (None, 1),
            2 => match count_of(parts[1]) {
                Some(n) => (None, n),
                None => (Some(parts[1].to_string()), 1),
            },
            _ => {
                let last = parts[parts.len() - 1];
                let n = count_of(last).ok_or_else(|| format!("`{it}`: `{last}` is not a count"))?;
                (Some(parts[1..parts.len() - 1].join(":")), n)
            }
        };
        let kind = kind.filter(|k| k != "(null)" && !k.is_empty());
        out.push(Gres { name, kind, count });
    }
    Ok(out)
}

fn count_of(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        Some(b'T' | b't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// A Slurm node, as fedvol reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    /// `NodeName`.
    pub name: String,
    /// `State`.
    pub state: NodeState,
    /// CPUs jobs may use: `CPUEfctv` (22.05 and later: total less specialised cores), else
    /// `CPUTot`.
    pub cpus: u64,
    /// `CPUAlloc`: CPUs allocated to jobs.
    pub cpus_alloc: u64,
    /// `RealMemory`, MiB (Slurm's "MB" are MiB).
    pub memory_mib: u64,
    /// `AllocMem`, MiB (0 when memory is not a consumable resource).
    pub memory_alloc_mib: u64,
    /// `ActiveFeatures` (or `Features` on old releases), in order.
    pub features: Vec<String>,
    /// `Gres`.
    pub gres: Vec<Gres>,
    /// `GresUsed` (printed with `scontrol -d`).
    pub gres_used: Vec<Gres>,
    /// `Partitions`, in Slurm's order.
    pub partitions: Vec<String>,
    /// `Reason`, when set (why it is down or drained).
    pub reason: Option<String>,
}

fn number(r: &Record, who: &str, key: &str, required: bool) -> Result<u64, RecordError> {
    match r.get(key) {
        Some(v) => v.parse::<u64>().map_err(|_| RecordError {
            line: r.line,
            record: who.to_string(),
            field: key.to_string(),
            message: format!("`{v}` is not a whole number"),
        }),
        None if required => Err(RecordError {
            line: r.line,
            record: who.to_string(),
            field: key.to_string(),
            message: "missing; expected a whole number".to_string(),
        }),
        None => Ok(0),
    }
}

fn list(v: Option<&str>) -> Vec<String> {
    v.map(|v| {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

impl SlurmNode {
    /// Reads a node record.
    ///
    /// Errors: no `NodeName`, no `State`, a missing or non-numeric `CPUTot`/`RealMemory`, a
    /// non-numeric `CPUAlloc`/`AllocMem`/`CPUEfctv`, an unreadable `Gres`/`GresUsed` count.
    pub fn from_record(r: &Record) -> Result<SlurmNode, RecordError> {
        let name = r.get("NodeName").ok_or_else(|| RecordError {
            line: r.line,
            record: "a record".into(),
            field: "NodeName".into(),
            message: "missing; every node line starts with NodeName=".into(),
        })?;
        let who = format!("node {name}");
        let state = r.get("State").ok_or_else(|| RecordError {
            line: r.line,
            record: who.clone(),
            field: "State".into(),
            message: "missing; expected a state such as IDLE or MIXED+DRAIN".into(),
        })?;
        let total = number(r, &who, "CPUTot", true)?;
        let cpus = match r.get("CPUEfctv") {
            Some(_) => number(r, &who, "CPUEfctv", false)?,
            None => total,
        };
        let gres_of = |key: &str| {
            parse_gres(r.get(key).unwrap_or("")).map_err(|m| RecordError {
                line: r.line,
                record: who.clone(),
                field: key.to_string(),
                message: m,
            })
        };
        Ok(SlurmNode {
            name: name.to_string(),
            state: NodeState::parse(state),
            cpus,
            cpus_alloc: number(r, &who, "CPUAlloc", false)?,
            memory_mib: number(r, &who, "RealMemory", true)?,
            memory_alloc_mib: number(r, &who, "AllocMem", false)?,
            features: list(r.get("ActiveFeatures").or_else(|| r.get("Features"))),
            gres: gres_of("Gres")?,
            gres_used: gres_of("GresUsed")?,
            partitions: list(r.get("Partitions")),
            reason: r.get("Reason").map(str::to_string),
        })
    }
}

/// A Slurm partition, as fedvol reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmPartition {
    /// `PartitionName`.
    pub name: String,
    /// `State`, upper case: `UP`, `DOWN`, `DRAIN` or `INACTIVE`.
    pub state: String,
    /// `PriorityTier` (higher = preferred by Slurm); 0 when absent.
    pub priority_tier: u64,
    /// `Default=YES`.
    pub default: bool,
}

impl SlurmPartition {
    /// Whether jobs may start in it (`State=UP`).
    pub fn is_up(&self) -> bool {
        self.state == "UP"
    }

    /// Reads a partition record.
    ///
    /// Errors: no `PartitionName`, a non-numeric `PriorityTier`.
    pub fn from_record(r: &Record) -> Result<SlurmPartition, RecordError> {
        let name = r.get("PartitionName").ok_or_else(|| RecordError {
            line: r.line,
            record: "a record".into(),
            field: "PartitionName".into(),
            message: "missing; every partition line starts with PartitionName=".into(),
        })?;
        let who = format!("partition {name}");
        Ok(SlurmPartition {
            name: name.to_string(),
            state: r.get("State").unwrap_or("UP").to_ascii_uppercase(),
            priority_tier: number(r, &who, "PriorityTier", false)?,
            default: r.get("Default").is_some_and(|v| v.eq_ignore_ascii_case("YES")),
        })
    }
}

/// Sums entries by resource name (types together): `gpu:a100:2,gpu:v100:1` → `gpu: 3`.
pub fn counts_by_name(g: &[Gres]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in g {
        let c: &mut u64 = out.entry(e.name.clone()).or_default();
        *c = c.saturating_add(e.count);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::records::parse_records;

    #[test]
    fn states_map_to_power() {
        for (s, on) in [
            ("IDLE", true),
            ("MIXED", true),
            ("ALLOCATED", true),
            ("COMPLETING", true),
            ("ALLOCATED+COMPLETING", true),
            ("IDLE+CLOUD", true),
            ("MIXED+DRAIN", false),
            ("IDLE+DRAIN", false),
            ("DOWN+NOT_RESPONDING", false),
            ("IDLE*", false),
            ("IDLE+CLOUD+POWERED_DOWN", false),
            ("FUTURE", false),
            ("DOWN", false),
            ("UNKNOWN", false),
            ("SOMETHING_NEW", false),
            ("idle", true),
        ] {
            assert_eq!(NodeState::parse(s).is_on(), on, "{s}");
        }
        assert_eq!(NodeState::parse("MIXED+DRAIN").to_string(), "MIXED+DRAIN");
    }

    #[test]
    fn gres_entries() {
        let g = parse_gres("gpu:a100:2(S:0-1),gpu:v100:1(S:0,2),mps:1K,nic").unwrap();
        assert_eq!(
            g,
            vec![
                Gres {
                    name: "gpu".into(),
                    kind: Some("a100".into()),
                    count: 2
                },
                Gres {
                    name: "gpu".into(),
                    kind: Some("v100".into()),
                    count: 1
                },
                Gres {
                    name: "mps".into(),
                    kind: None,
                    count: 1024
                },
                Gres {
                    name: "nic".into(),
                    kind: None,
                    count: 1
                },
            ]
        );
        assert_eq!(counts_by_name(&g)["gpu"], 3);
        let used = parse_gres("gpu:a100:1(IDX:0),gpu:(null):0(IDX:N/A)").unwrap();
        assert_eq!(used[1].kind, None);
        assert_eq!(parse_gres("gpu:0").unwrap()[0].count, 0);
        assert_eq!(parse_gres("gpu:tesla").unwrap()[0].kind.as_deref(), Some("tesla"));
        assert!(parse_gres("gpu:a100:lots").unwrap_err().contains("is not a count"));
        assert!(parse_gres("").unwrap().is_empty());
    }

    #[test]
    fn captured_nodes_read() {
        let rs = parse_records(include_str!("testdata/nodes-22.05.8.txt"));
        let nodes: Vec<SlurmNode> = rs.iter().map(|r| SlurmNode::from_record(r).unwrap()).collect();
        let n1 = &nodes[0];
        assert_eq!(
            (n1.cpus, n1.cpus_alloc, n1.memory_mib, n1.memory_alloc_mib),
            (4, 2, 8000, 1000)
        );
        assert_eq!(n1.features, ["intel", "ib"]);
        assert_eq!(n1.partitions, ["batch", "gpu"]);
        assert_eq!(counts_by_name(&n1.gres)["gpu"], 2);
        assert_eq!(counts_by_name(&n1.gres_used)["gpu"], 1);
        assert!(n1.state.is_on());
        assert_eq!(
            nodes[1].reason.as_deref(),
            Some("test drain [root@2026-11-24T22:58:25]")
        );
        assert!(!nodes[1].state.is_on());
        assert_eq!(nodes[2].state.base, "FUTURE");
        assert!(nodes[2].features.is_empty());
        assert!(!nodes[3].state.is_on());
    }

    #[test]
    fn bad_numbers_name_line_node_and_field() {
        let rs = parse_records("NodeName=x State=IDLE CPUTot=four RealMemory=1\n");
        let e = SlurmNode::from_record(&rs[0]).unwrap_err();
        assert_eq!(e.to_string(), "line 1: node x: CPUTot: `four` is not a whole number");
        let rs = parse_records("NodeName=x State=IDLE CPUTot=4\n");
        assert!(
            SlurmNode::from_record(&rs[0])
                .unwrap_err()
                .to_string()
                .contains("RealMemory: missing")
        );
    }

    #[test]
    fn captured_partitions_read() {
        let rs = parse_records(include_str!("testdata/partitions-22.05.8.txt"));
        let ps: Vec<SlurmPartition> = rs.iter().map(|r| SlurmPartition::from_record(r).unwrap()).collect();
        assert_eq!(
            ps.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["batch", "gpu", "maint"]
        );
        assert!(ps[0].default && ps[0].is_up());
        assert_eq!(ps[1].priority_tier, 10);
        assert!(!ps[2].is_up());
    }
}
