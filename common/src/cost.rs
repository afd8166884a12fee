//! The cost estimate of one cluster's plan, carried in the decision document as
//! `ClusterDecision.cost` and compared by the `cost` cluster-choice step.
//!
//! What is priced, in the currency unit the inventory's prices are written in:
//! - **storage**: every volume the plan provisions or binds, its capacity in GB (10^9 bytes)
//!   times its provisioner's `costPerGbHour`, for the workflow's hours. Volumes used as they
//!   are (`existing`, requested by name) cost nothing extra; a volume whose provisioner has no
//!   `costPerGbHour` counts 0 and is listed in `unpriced_volumes`.
//! - **hosts**: every placed job, the number of hosts it takes times its zone's
//!   `hostCostPerHour`, for the job's hours. A job in a zone without a price counts 0 and is
//!   listed in `unpriced_jobs`.
//!
//! Hours: a job's own `policy.timeout.execute`; otherwise, and for storage, the workflow's
//! declared duration ([`crate::model::Workflow::declared_duration_ms`]: the longest
//! `depends-on` chain of timeouts); when no job declares a timeout, the request's default
//! hours ([`crate::choice::ChoiceOptions::hours`], 1 h unless the coordinator or the user set
//! another). Built by [`crate::funnel::cost::estimate`]; pure.

use indexmap::IndexMap;

use crate::size::ByteSize;

/// Where a number of hours came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoursFrom {
    /// The job's own `policy.timeout.execute`.
    Timeout,
    /// The workflow's declared duration (its longest chain of job timeouts).
    Declared,
    /// No job declares a timeout: the request's default hours.
    Default,
}

/// One priced volume.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VolumeCost {
    /// The provisioner (storage class) it is provisioned by or bound from.
    pub provisioner: String,
    /// `provision` or `bind`: the new volume's size or the bound volume's capacity, bytes.
    pub capacity: ByteSize,
    /// The provisioner's `costPerGbHour` (per 10^9 bytes and hour).
    pub cost_per_gb_hour: f64,
    /// `capacity` in GB times `cost_per_gb_hour`: cost per hour.
    pub per_hour: f64,
}

/// One priced job.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobCost {
    /// The zone it was placed in.
    pub zone: String,
    /// Hosts it takes (multi-host jobs: all of them).
    pub hosts: u64,
    /// The zone's `hostCostPerHour`.
    pub host_cost_per_hour: f64,
    /// Hours the job is counted for.
    pub hours: f64,
    /// Where `hours` came from.
    pub hours_from: HoursFrom,
    /// `hosts` x `host_cost_per_hour` x `hours`.
    pub cost: f64,
}

/// What one cluster's plan would cost the workflow: `total` = `storage_per_hour` x `hours` +
/// the sum of the jobs' `cost`. Present only when something in the plan is priced.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CostEstimate {
    /// The estimate for the whole workflow (storage and hosts), currency units.
    pub total: f64,
    /// The sum of the priced volumes' `per_hour`.
    pub storage_per_hour: f64,
    /// Hours storage is counted for: the workflow's declared duration, or the default.
    pub hours: f64,
    /// Where `hours` came from (`declared` or `default`).
    pub hours_from: HoursFrom,
    /// Priced volumes by workflow volume key, in workflow order.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub volumes: IndexMap<String, VolumeCost>,
    /// Priced jobs by name, in workflow order.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub jobs: IndexMap<String, JobCost>,
    /// Volumes the plan provisions or binds whose provisioner has no `costPerGbHour` (counted 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced_volumes: Vec<String>,
    /// Placed jobs whose zone has no `hostCostPerHour` (counted 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced_jobs: Vec<String>,
}

impl CostEstimate {
    /// The storage part of `total`.
    pub fn storage(&self) -> f64 {
        self.storage_per_hour * self.hours
    }

    /// The estimate's terms as one line, with the figures it was computed from, e.g.
    /// `storage 10 GB x 0.1/GB-h x 2 h = 2.00; hosts: train 1 x 5/h x 2 h = 10.00`.
    /// Several volumes are listed inside the storage term; unpriced volumes and jobs are
    /// named at the end.
    pub fn breakdown(&self) -> String {
        let mut parts = Vec::new();
        if !self.volumes.is_empty() {
            let terms: Vec<String> = self
                .volumes
                .iter()
                .map(|(key, v)| {
                    format!(
                        "{}{} GB x {}/GB-h",
                        if self.volumes.len() > 1 {
                            format!("{key} ")
                        } else {
                            String::new()
                        },
                        gb(v.capacity),
                        v.cost_per_gb_hour
                    )
                })
                .collect();
            let sum = if terms.len() > 1 {
                format!("({})", terms.join(" + "))
            } else {
                terms.join("")
            };
            parts.push(format!(
                "storage {sum} x {} h{} = {}",
                hours(self.hours),
                from_note(self.hours_from),
                money(self.storage())
            ));
        }
        if !self.jobs.is_empty() {
            let terms: Vec<String> = self
                .jobs
                .iter()
                .map(|(name, j)| {
                    format!(
                        "{name} {} x {}/h x {} h{} = {}",
                        j.hosts,
                        j.host_cost_per_hour,
                        hours(j.hours),
                        from_note(j.hours_from),
                        money(j.cost)
                    )
                })
                .collect();
            parts.push(format!("hosts: {}", terms.join(", ")));
        }
        let mut unpriced = Vec::new();
        if !self.unpriced_volumes.is_empty() {
            unpriced.push(format!("volume(s) {}", self.unpriced_volumes.join(", ")));
        }
        if !self.unpriced_jobs.is_empty() {
            unpriced.push(format!("job(s) {}", self.unpriced_jobs.join(", ")));
        }
        if !unpriced.is_empty() {
            parts.push(format!("unpriced (counted 0): {}", unpriced.join(", ")));
        }
        parts.join("; ")
    }
}

fn from_note(from: HoursFrom) -> &'static str {
    match from {
        HoursFrom::Timeout => " (timeout)",
        HoursFrom::Declared => " (declared)",
        HoursFrom::Default => " (default)",
    }
}

/// Bytes as GB (10^9 bytes), exactly: `10`, `10.73741824`.
pub fn gb(bytes: ByteSize) -> String {
    let whole = bytes.0 / 1_000_000_000;
    let frac = bytes.0 % 1_000_000_000;
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:09}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Hours with at most 4 decimals, trailing zeros dropped: `2`, `1.5`, `0.1667`.
pub fn hours(h: f64) -> String {
    trim(format!("{h:.4}"))
}

/// A cost with 2 decimals, or up to 6 when 2 would misstate it by more than 0.1 %
/// (`12.40`, `0.000125`).
pub fn money(x: f64) -> String {
    for digits in 2..=6 {
        let s = format!("{x:.digits$}");
        let back: f64 = s.parse().unwrap_or(x);
        if (back - x).abs() <= x.abs() * 1e-3 {
            return s;
        }
    }
    format!("{x:.6}")
}

/// Two costs as text with enough decimals to show they differ (`12.40 > 12.39`).
pub fn two_costs(a: f64, b: f64) -> (String, String) {
    let (x, y) = (money(a), money(b));
    if x != y {
        return (x, y);
    }
    for digits in 3..=9 {
        let (x, y) = (format!("{a:.digits$}"), format!("{b:.digits$}"));
        if x != y {
            return (x, y);
        }
    }
    (format!("{a}"), format!("{b}"))
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_exact_and_readable() {
        assert_eq!(gb(ByteSize(10_000_000_000)), "10");
        assert_eq!(gb(ByteSize(10 << 30)), "10.73741824");
        assert_eq!(gb(ByteSize(1)), "0.000000001");
        assert_eq!(hours(2.0), "2");
        assert_eq!(hours(1.5), "1.5");
        assert_eq!(hours(1.0 / 6.0), "0.1667");
        assert_eq!(money(12.4), "12.40");
        assert_eq!(money(0.000125), "0.000125");
        assert_eq!(money(0.0), "0.00");
        assert_eq!(two_costs(3.101, 3.1), ("3.101".to_string(), "3.100".to_string()));
    }

    #[test]
    fn breakdown_names_every_term_and_what_is_unpriced() {
        let mut e = CostEstimate {
            total: 12.0,
            storage_per_hour: 1.0,
            hours: 2.0,
            hours_from: HoursFrom::Declared,
            volumes: IndexMap::new(),
            jobs: IndexMap::new(),
            unpriced_volumes: vec!["data".into()],
            unpriced_jobs: Vec::new(),
        };
        e.volumes.insert(
            "scratch".into(),
            VolumeCost {
                provisioner: "fast".into(),
                capacity: ByteSize(10_000_000_000),
                cost_per_gb_hour: 0.1,
                per_hour: 1.0,
            },
        );
        e.jobs.insert(
            "train".into(),
            JobCost {
                zone: "z".into(),
                hosts: 2,
                host_cost_per_hour: 2.5,
                hours: 2.0,
                hours_from: HoursFrom::Timeout,
                cost: 10.0,
            },
        );
        assert_eq!(
            e.breakdown(),
            "storage 10 GB x 0.1/GB-h x 2 h (declared) = 2.00; hosts: train 2 x 2.5/h x 2 h (timeout) = 10.00; \
             unpriced (counted 0): volume(s) data"
        );
        e.volumes.insert(
            "more".into(),
            VolumeCost {
                provisioner: "slow".into(),
                capacity: ByteSize(500_000_000),
                cost_per_gb_hour: 0.02,
                per_hour: 0.01,
            },
        );
        assert!(
            e.breakdown()
                .starts_with("storage (scratch 10 GB x 0.1/GB-h + more 0.5 GB x 0.02/GB-h) x 2 h"),
            "{}",
            e.breakdown()
        );
    }
}
