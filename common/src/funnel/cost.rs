//! One cluster's cost estimate for a plan: prices what the funnel chose with the
//! inventory's `costPerGbHour` (provisioners) and `hostCostPerHour` (zones). The rules are in
//! [`crate::cost`]; this module only reads the plan and the inventory. Pure.

use indexmap::IndexMap;

use crate::cost::{CostEstimate, HoursFrom, JobCost, VolumeCost};
use crate::decision::{Action, JobDecision, VolumeDecision};
use crate::funnel::PlanRequest;
use crate::model::Inventory;

/// Milliseconds in an hour.
const MS_PER_HOUR: f64 = 3_600_000.0;

/// Prices the plan's `volumes` and `jobs` (as `plan_cluster` resolved and placed them) on
/// `inv`. `None` when nothing the plan uses carries a price. Volumes and jobs that failed are
/// skipped (an infeasible plan is never chosen).
pub fn estimate(
    inv: &Inventory,
    req: &PlanRequest,
    volumes: &IndexMap<String, VolumeDecision>,
    jobs: &IndexMap<String, JobDecision>,
) -> Option<CostEstimate> {
    let default_hours = req.choice.unwrap_or_default().hours();
    let (hours, hours_from) = match req.workflow.declared_duration_ms() {
        Some(ms) => (ms as f64 / MS_PER_HOUR, HoursFrom::Declared),
        None => (default_hours, HoursFrom::Default),
    };
    let mut out = CostEstimate {
        total: 0.0,
        storage_per_hour: 0.0,
        hours,
        hours_from,
        volumes: IndexMap::new(),
        jobs: IndexMap::new(),
        unpriced_volumes: Vec::new(),
        unpriced_jobs: Vec::new(),
    };
    for (key, v) in volumes {
        if v.error.is_some() {
            continue;
        }
        let Some((provisioner, capacity)) = priced_volume(inv, v) else {
            continue;
        };
        let rate = inv
            .provisioners
            .iter()
            .find(|p| p.name == provisioner)
            .and_then(|p| p.cost_per_gb_hour);
        match rate {
            Some(rate) => {
                let per_hour = capacity.0 as f64 / 1e9 * rate;
                out.storage_per_hour += per_hour;
                out.volumes.insert(
                    key.clone(),
                    VolumeCost {
                        provisioner,
                        capacity,
                        cost_per_gb_hour: rate,
                        per_hour,
                    },
                );
            }
            None => out.unpriced_volumes.push(key.clone()),
        }
    }
    for (name, j) in jobs {
        let (Some(zone), None) = (&j.zone, &j.error) else {
            continue;
        };
        let hosts = if j.hosts.is_empty() {
            u64::from(j.host.is_some())
        } else {
            j.hosts.len() as u64
        };
        let price = inv
            .zones
            .iter()
            .find(|z| &z.name == zone)
            .and_then(|z| z.host_cost_per_hour);
        let Some(price) = price else {
            out.unpriced_jobs.push(name.clone());
            continue;
        };
        let own = req
            .workflow
            .jobs
            .iter()
            .find(|wj| &wj.name == name)
            .and_then(|wj| wj.timeout_ms);
        let (job_hours, from) = match own {
            Some(ms) => (ms as f64 / MS_PER_HOUR, HoursFrom::Timeout),
            None => (hours, hours_from),
        };
        let cost = hosts as f64 * price * job_hours;
        out.total += cost;
        out.jobs.insert(
            name.clone(),
            JobCost {
                zone: zone.clone(),
                hosts,
                host_cost_per_hour: price,
                hours: job_hours,
                hours_from: from,
                cost,
            },
        );
    }
    if out.volumes.is_empty() && out.jobs.is_empty() {
        return None;
    }
    out.total += out.storage();
    Some(out)
}

/// The provisioner and capacity of a volume the plan provisions or binds; `None` for a volume
/// used as it is, or a bound volume the inventory does not list.
fn priced_volume(inv: &Inventory, v: &VolumeDecision) -> Option<(String, crate::size::ByteSize)> {
    match v.action? {
        Action::Provision => {
            let nv = v.new_volume.as_ref()?;
            Some((nv.provisioner.clone(), nv.capacity))
        }
        Action::Bind => {
            let provisioner = v.provisioner.clone()?;
            let name = v.volume.as_deref()?;
            let pv = inv
                .volumes
                .iter()
                .find(|pv| pv.name == name && pv.provisioner.as_deref() == Some(provisioner.as_str()))?;
            Some((provisioner, pv.capacity))
        }
        Action::Existing => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Mode;
    use crate::funnel::placement::testkit::{existing, failed, host, inv, job, provisioned, req, vols, with, zone};
    use crate::funnel::volume::testkit::pv;
    use crate::size::ByteSize;

    const GB: u128 = 1_000_000_000;

    fn placed(zone: &str, hosts: &[&str]) -> JobDecision {
        JobDecision {
            zone: Some(zone.into()),
            host: hosts.first().map(|h| h.to_string()),
            hosts: if hosts.len() > 1 {
                hosts.iter().map(|h| h.to_string()).collect()
            } else {
                Vec::new()
            },
            ..Default::default()
        }
    }

    fn priced_inventory() -> Inventory {
        let mut i = inv(vec![
            with(zone("cheap", vec![host("c1", 8, 8)]), |z| {
                z.host_cost_per_hour = Some(0.5)
            }),
            zone("free", vec![host("f1", 8, 8)]),
        ]);
        i.provisioners[0].cost_per_gb_hour = Some(0.1);
        let mut other = i.provisioners[0].clone();
        other.name = "plain".into();
        other.cost_per_gb_hour = None;
        i.provisioners.push(other);
        i.volumes
            .push(std::sync::Arc::new(pv("old", Some("nfs"), ByteSize(5 * GB)).into()));
        i
    }

    #[test]
    fn storage_and_hosts_are_priced_with_their_hours() {
        let inv = priced_inventory();
        let mut provision = provisioned("nfs", "scratch", 0);
        if let Some(nv) = provision.new_volume.as_mut() {
            nv.capacity = ByteSize(20 * GB);
        }
        let bind = VolumeDecision {
            mode: Mode::Claim,
            provisioner: Some("nfs".into()),
            volume: Some("old".into()),
            action: Some(Action::Bind),
            error: None,
            passed: None,
            new_volume: None,
        };
        let volumes = vols(vec![
            ("scratch", provision),
            ("claim", bind),
            ("named", existing("nfs", "data")),
            ("plain", provisioned("plain", "p", 1)),
            ("broken", failed()),
        ]);
        let jobs: IndexMap<String, JobDecision> = [
            ("train".to_string(), placed("cheap", &["c1", "c2"])),
            ("post".to_string(), placed("cheap", &["c1"])),
            ("side".to_string(), placed("free", &["f1"])),
        ]
        .into_iter()
        .collect();
        // train declares 3 h, post nothing: the workflow's declared duration is train's 3 h.
        let r = req(
            vec![
                with(job("train", &[]), |j| j.timeout_ms = Some(3 * 3_600_000)),
                job("post", &[]),
                job("side", &[]),
            ],
            1,
        );
        let e = estimate(&inv, &r, &volumes, &jobs).unwrap();
        assert_eq!((e.hours, e.hours_from), (3.0, HoursFrom::Declared));
        // 20 GB x 0.1 + 5 GB (the bound volume's capacity) x 0.1 = 2.5 per hour.
        assert!((e.storage_per_hour - 2.5).abs() < 1e-12, "{e:?}");
        assert_eq!(e.volumes.keys().collect::<Vec<_>>(), ["scratch", "claim"]);
        assert_eq!(e.volumes["claim"].capacity, ByteSize(5 * GB));
        assert_eq!(
            e.unpriced_volumes,
            ["plain"],
            "no costPerGbHour; the named volume is not priced"
        );
        let train = &e.jobs["train"];
        assert_eq!(
            (train.hosts, train.hours, train.hours_from),
            (2, 3.0, HoursFrom::Timeout)
        );
        assert!((train.cost - 3.0).abs() < 1e-12, "2 hosts x 0.5 x 3 h");
        assert_eq!(
            e.jobs["post"].hours_from,
            HoursFrom::Declared,
            "no timeout: the workflow's hours"
        );
        assert_eq!(e.unpriced_jobs, ["side"]);
        // 2.5 x 3 + 3 + 1 x 0.5 x 3 = 12.
        assert!((e.total - 12.0).abs() < 1e-9, "{}", e.total);
        assert_eq!(
            e.breakdown(),
            "storage (scratch 20 GB x 0.1/GB-h + claim 5 GB x 0.1/GB-h) x 3 h (declared) = 7.50; \
             hosts: train 2 x 0.5/h x 3 h (timeout) = 3.00, post 1 x 0.5/h x 3 h (declared) = 1.50; \
             unpriced (counted 0): volume(s) plain, job(s) side"
        );
    }

    #[test]
    fn default_hours_apply_without_timeouts_and_nothing_priced_gives_none() {
        let inv = priced_inventory();
        let jobs: IndexMap<String, JobDecision> = [("a".to_string(), placed("cheap", &["c1"]))].into_iter().collect();
        let mut r = req(vec![job("a", &[])], 1);
        let e = estimate(&inv, &r, &IndexMap::new(), &jobs).unwrap();
        assert_eq!((e.hours, e.hours_from, e.total), (1.0, HoursFrom::Default, 0.5));
        r.choice = Some(crate::choice::ChoiceOptions {
            cost: true,
            default_hours: Some(4.0),
        });
        assert_eq!(estimate(&inv, &r, &IndexMap::new(), &jobs).unwrap().total, 2.0);
        let unpriced: IndexMap<String, JobDecision> =
            [("a".to_string(), placed("free", &["f1"]))].into_iter().collect();
        assert_eq!(
            estimate(&inv, &r, &vols(vec![("n", existing("nfs", "d"))]), &unpriced),
            None
        );
    }
}
