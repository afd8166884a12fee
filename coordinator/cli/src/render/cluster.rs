//! The human view of one cluster (`fedvol clusters show C`), as `kubectl describe
//! node` shows a node: the registry's view (and an operator's drain: who, when, why, as
//! `kubectl describe node` shows `Unschedulable`), the provisioners in selection order with their
//! status and access policies (Fuzzball "Annotations and Selection"), and each zone with its priority, placement policy and
//! free capacity (Cloud Assembly's provisioning funnel).

use std::collections::BTreeMap;

use fedvol_common::model::{Host, PowerState, Resources};
use fedvol_proto::coordinator::ClusterReply;

use super::layout::{fill, para, table};
use super::words::ago;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Bytes as GiB with one decimal (`88.0GiB`).
fn gib(bytes: u128) -> String {
    format!("{:.1}GiB", bytes as f64 / GIB)
}

/// What is free on `h`: capacity minus what the file says is allocated minus what fedvol
/// holds and committed there (`in_use`), never below zero.
fn free(h: &Host, in_use: Option<&Resources>) -> (u64, u128, u64) {
    let zero = Resources::default();
    let u = in_use.unwrap_or(&zero);
    (
        h.capacity.cpu.saturating_sub(h.allocated.cpu).saturating_sub(u.cpu),
        h.capacity
            .memory
            .bytes()
            .saturating_sub(h.allocated.memory.bytes())
            .saturating_sub(u.memory.bytes()),
        h.capacity
            .instances
            .saturating_sub(h.allocated.instances)
            .saturating_sub(u.instances),
    )
}

/// The placement policy as the inventory spells it (Cloud Assembly's provisioning funnel).
fn policy_name(p: fedvol_common::model::PlacementPolicy) -> &'static str {
    use fedvol_common::model::PlacementPolicy as P;
    match p {
        P::Default => "DEFAULT",
        P::Binpack => "BINPACK",
        P::Spread => "SPREAD",
        P::SpreadMemory => "SPREAD_MEMORY",
    }
}

/// Renders `r` for a terminal, `now_ms` being the current time (ms since the epoch).
pub fn render(r: &ClusterReply, now_ms: u64) -> String {
    let info = &r.info;
    let status = &r.agent.status;
    let inv = &r.agent.inventory;
    // Whole counts, also when the agent cut its lists to fit `max_payload`.
    let totals = r.agent.totals();
    let mut out = format!("cluster {}\n", info.name);
    let state = match (info.alive, info.suspect) {
        (true, false) => "alive",
        (true, true) => "suspect (recent requests timed out)",
        (false, _) => "presumed dead",
    };
    out.push_str(&para(
        "  ",
        "    ",
        &format!(
            "{state}, last heartbeat {}; inventory {}; load {:.2}; holds {}; committed workflows {}; replicas {}",
            ago(info.last_seen_ms, now_ms),
            status.inventory_version,
            status.load,
            totals.holds,
            totals.committed,
            info.instances.len().max(1),
        ),
    ));
    match &status.source {
        Some(src) => {
            let read = if src.read_ms == 0 {
                "never read".to_string()
            } else {
                format!("read {}", ago(src.read_ms, now_ms))
            };
            out.push_str(&para(
                "  ",
                "    ",
                &format!("zones and hosts from {} ({read})", src.source),
            ));
        }
        None => out.push_str("  zones and hosts from the inventory file\n"),
    }
    if let Some(d) = &info.degraded {
        out.push_str(&para("  degraded: ", "    ", d));
    }
    if let Some(d) = &info.drain {
        out.push_str(&para(
            "  drained: ",
            "    ",
            &format!(
                "by {} at {} ({}): {}; it still answers plans, but no coordinator chooses it for new work, and what is committed here runs on",
                d.by,
                super::words::utc(d.at_ms),
                ago(d.at_ms, now_ms),
                d.reason
            ),
        ));
    }

    out.push_str("\nprovisioners (automatic selection takes the first that passes, in this order):\n");
    let header = [
        "PROVISIONER",
        "DRIVER",
        "STATUS",
        "ANNOTATIONS",
        "ACCESS",
        "EPHEMERAL",
        "CREATE",
    ];
    let mut t = table(&header);
    let rows = inv
        .provisioners
        .iter()
        .map(|p| {
            let ann: Vec<String> = p.annotations.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vec![
                if p.default {
                    format!("{} (default)", p.name)
                } else {
                    p.name.clone()
                },
                p.driver.kind().to_string(),
                format!("{:?}", p.status).to_lowercase(),
                if ann.is_empty() { "-".into() } else { ann.join(" ") },
                p.permissions.access.describe(),
                p.permissions.ephemeral.describe(),
                p.permissions.create.describe(),
            ]
        })
        .collect();
    fill(&mut t, &header, rows);
    out.push_str(&format!("{t}\n"));

    out.push_str("\nzones (lowest priority number first; free = capacity - allocated - fedvol's):\n");
    let header = [
        "ZONE",
        "PRIORITY",
        "POLICY",
        "HOSTS ON",
        "CPU FREE",
        "MEMORY FREE",
        "INSTANCES FREE",
    ];
    let mut t = table(&header);
    let use_of: &BTreeMap<String, Resources> = &status.host_use;
    let rows = inv
        .zones
        .iter()
        .map(|z| {
            let on: Vec<&Host> = z
                .hosts
                .iter()
                .map(|h| h.as_ref())
                .filter(|h| h.power == PowerState::On)
                .collect();
            let (mut cpu, mut mem, mut inst) = (0u64, 0u128, 0u64);
            let (mut cpu_all, mut mem_all, mut inst_all) = (0u64, 0u128, 0u64);
            // Instances 0 = no limit (Cloud Assembly's provisioning funnel hosts without an instance count; Slurm hosts).
            let unlimited = on.iter().any(|h| h.capacity.instances == 0);
            for h in &on {
                let (c, m, i) = free(h, use_of.get(&h.name));
                cpu += c;
                mem += m;
                inst = inst.saturating_add(i);
                cpu_all += h.capacity.cpu;
                mem_all += h.capacity.memory.bytes();
                inst_all = inst_all.saturating_add(h.capacity.instances);
            }
            vec![
                z.name.clone(),
                z.priority.to_string(),
                policy_name(z.placement_policy).to_string(),
                format!("{}/{}", on.len(), z.hosts.len()),
                format!("{cpu}/{cpu_all}"),
                format!("{}/{}", gib(mem), gib(mem_all)),
                if unlimited {
                    "no limit".to_string()
                } else {
                    format!("{inst}/{inst_all}")
                },
            ]
        })
        .collect();
    fill(&mut t, &header, rows);
    out.push_str(&format!("{t}\n"));
    out.push_str(&format!(
        "\npersistent volumes in the inventory: {}; volumes fedvol manages: {}\n",
        totals.volumes, totals.managed_volumes
    ));
    if r.agent.cut.is_some() {
        out.push_str(&para(
            "",
            "  ",
            &format!(
                "(the agent's lists were cut to fit the NATS server's max_payload: -o json gives the first {} of each; the counts above are whole)",
                status.committed.len().max(status.volumes.len())
            ),
        ));
    }
    out
}
