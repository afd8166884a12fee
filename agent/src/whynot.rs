//! `why_not`: for a request and a named zone, host or provisioner, every stage that rejected it
//! with every rule it broke, and a hint where one exists.

use fedvol_common::decision::{StageTrace, codes};
use fedvol_common::funnel::{ClusterState, PlanRequest, plan_cluster};
use fedvol_common::model::Inventory;
use fedvol_common::size::ByteSize;
use fedvol_common::wire::{Blocker, VERSION, WhyNotReply};

/// True when the stage candidate `cand` is what the user named: a zone (zone stages name zones,
/// host stages name `zone/host`), a host, or a provisioner (provisioner and volume-search
/// stages name provisioners).
fn names(cand: &str, stage: &str, zone: Option<&str>, host: Option<&str>, prov: Option<&str>) -> bool {
    let kind = stage.split('.').next().unwrap_or("");
    let (cz, ch) = cand.split_once('/').map_or((cand, None), |(z, h)| (z, Some(h)));
    let zone_hit = zone.is_some_and(|z| cz == z && (kind == "zone" || kind == "host"));
    let host_hit = host.is_some_and(|h| kind == "host" && ch == Some(h));
    let prov_hit = prov.is_some_and(|p| cand == p && (kind == "provisioner" || kind == "volume"));
    zone_hit || host_hit || prov_hit
}

/// A hint for a reason, where the fix is a number the user can act on.
fn hint(inv: &Inventory, code: &str, cand: &str) -> Option<String> {
    match code {
        codes::CAPACITY => inv
            .volumes
            .iter()
            .find(|v| v.name == cand)
            .map(|v| format!("fits if size <= {}", ByteSize(v.capacity.0))),
        codes::NOT_READY => Some(format!("fits once provisioner `{cand}` is READY")),
        codes::POWERED_OFF => Some("fits once the host is powered on".into()),
        _ => None,
    }
}

/// Re-plans `req` on `inv` (no hold, every rejection listed) and reports each stage that
/// rejected the named zone, host or provisioner.
pub fn why_not(
    cluster: &str,
    inv: &Inventory,
    state: &ClusterState,
    req: &PlanRequest,
    zone: Option<&str>,
    host: Option<&str>,
    provisioner: Option<&str>,
) -> WhyNotReply {
    let mut full = req.clone();
    full.trace_limit = 0;
    let d = plan_cluster(inv, state, &full);
    let blockers: Vec<Blocker> = d
        .trace
        .iter()
        .flat_map(|t: &StageTrace| {
            t.rejected
                .iter()
                .filter(|r| names(&r.candidate, &t.stage, zone, host, provisioner))
                .map(move |r| Blocker {
                    stage: t.stage.clone(),
                    subject: t.subject.clone(),
                    candidate: r.candidate.clone(),
                    reasons: r.reasons.clone(),
                    hint: r.reasons.iter().find_map(|x| hint(inv, &x.code, &r.candidate)),
                })
        })
        .collect();
    let named = [
        zone.map(|z| format!("zone {z}")),
        host.map(|h| format!("host {h}")),
        provisioner.map(|p| format!("provisioner {p}")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ");
    let summary = match blockers.first() {
        None => format!("{named}: not rejected by any stage of cluster {cluster} for this request"),
        Some(b) => format!(
            "{named}: blocked at {} for {} ({}){}",
            b.stage,
            b.subject,
            b.reasons
                .iter()
                .map(|r| r.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            if blockers.len() > 1 {
                format!(", and at {} more stage(s)", blockers.len() - 1)
            } else {
                String::new()
            }
        ),
    };
    WhyNotReply {
        v: VERSION,
        cluster: cluster.to_string(),
        blockers,
        summary,
        error: None,
    }
}
