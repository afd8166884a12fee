//! The cluster registry: what this coordinator knows of each cluster from heartbeats
//! (`<prefix>.heartbeat.<cluster>`), start-up service discovery (`$SRV.INFO.fedvol-agent`) and
//! how the cluster answered recent plans. Pure bookkeeping (times are passed in, ms since the
//! epoch), so every rule is unit-tested:
//!
//! - **alive**: heard from within 3 heartbeat intervals (the interval the agent announces;
//!   [`DISCOVERY_INTERVAL_MS`] for an agent only seen through discovery so far).
//! - **suspect**: timed out on [`SUSPECT_AFTER`] consecutive plans and sent no heartbeat since
//!   the last of those timeouts. A suspect cluster is not waited for; an answer or a newer
//!   heartbeat lifts the suspicion.
//! - **forgotten**: not heard from for `forgetClusterAfterMs` ([`Registry::forget_silent`]), or
//!   known only through discovery (never a heartbeat) and served by nobody
//!   ([`Registry::forget_if_unconfirmed`]). Only heartbeats and discovery add clusters; an
//!   answer never does (an answer could name a cluster that does not exist).
//!
//! Each coordinator keeps its own registry (it is rebuilt from heartbeats within seconds);
//! decisions, the state that matters, live in NATS.

use std::collections::{BTreeMap, BTreeSet};

use fedvol_common::decision::Reason;
use fedvol_proto::Code;
use fedvol_proto::agent::Heartbeat;
use fedvol_proto::coordinator::ClusterInfo;

/// Consecutive plan timeouts after which a cluster is suspect.
pub const SUSPECT_AFTER: u32 = 2;

/// Heartbeat interval assumed for a cluster seen only through discovery, ms (the agent's
/// default).
pub const DISCOVERY_INTERVAL_MS: u64 = 2000;

/// Missed heartbeat intervals after which a cluster is presumed dead.
pub const DEAD_AFTER_INTERVALS: u64 = 3;

/// One cluster as this coordinator knows it.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// Instances (replica ids) and when each was last heard from (coordinator clock).
    instances: BTreeMap<String, u64>,
    /// When the cluster was last heard from (coordinator clock).
    last_seen_ms: u64,
    /// Send time of the newest heartbeat (agent clock); 0 when none yet.
    last_heartbeat_sent_ms: u64,
    inventory_version: String,
    load: f64,
    holds: usize,
    interval_ms: u64,
    consecutive_timeouts: u32,
    last_timeout_ms: u64,
    /// The agent's state generation from its latest heartbeat (empty: none said).
    state_generation: String,
    /// Why the agent said it is degraded in its latest heartbeat.
    degraded: Option<String>,
    /// The agent said it waits for its commits to be restored (a fresh state).
    restoring: bool,
}

impl Entry {
    fn new() -> Self {
        Entry {
            instances: BTreeMap::new(),
            last_seen_ms: 0,
            last_heartbeat_sent_ms: 0,
            inventory_version: String::new(),
            load: 0.0,
            holds: 0,
            interval_ms: DISCOVERY_INTERVAL_MS,
            consecutive_timeouts: 0,
            last_timeout_ms: 0,
            state_generation: String::new(),
            degraded: None,
            restoring: false,
        }
    }

    fn window_ms(&self) -> u64 {
        self.interval_ms.saturating_mul(DEAD_AFTER_INTERVALS)
    }

    fn alive(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.last_seen_ms) <= self.window_ms()
    }

    fn suspect(&self) -> bool {
        self.consecutive_timeouts >= SUSPECT_AFTER && self.last_heartbeat_sent_ms <= self.last_timeout_ms
    }

    /// Whether a plan sent at `now_ms` waits for this cluster: not when it is presumed dead
    /// (silent past its window) or suspect (timed out repeatedly, no heartbeat since).
    fn expectation(&self, now_ms: u64) -> Expectation {
        if !self.alive(now_ms) {
            return Expectation::Skip(Code::Unreachable.reason(format!(
                "presumed dead: no heartbeat for {} ms ({} intervals of {} ms)",
                now_ms.saturating_sub(self.last_seen_ms),
                DEAD_AFTER_INTERVALS,
                self.interval_ms
            )));
        }
        if self.suspect() {
            return Expectation::Skip(Code::Unreachable.reason(format!(
                "suspect: timed out on {} consecutive requests and sent no heartbeat since",
                self.consecutive_timeouts
            )));
        }
        Expectation::Wait
    }
}

/// Whether a plan should wait for a cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
    /// Alive and not suspect: wait for its answer up to the deadline.
    Wait,
    /// Known dead or suspect: not waited for; the reason goes into its `unreachable` slot.
    Skip(Reason),
}

/// Every cluster this coordinator has heard of.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    clusters: BTreeMap<String, Entry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Records a heartbeat received at `now_ms`.
    pub fn heartbeat(&mut self, hb: &Heartbeat, now_ms: u64) {
        let e = self.clusters.entry(hb.cluster.clone()).or_insert_with(Entry::new);
        e.last_seen_ms = e.last_seen_ms.max(now_ms);
        e.last_heartbeat_sent_ms = e.last_heartbeat_sent_ms.max(hb.sent_ms);
        e.inventory_version = hb.inventory_version.clone();
        e.load = hb.load;
        e.holds = hb.holds;
        e.degraded = hb.degraded.clone();
        e.restoring = hb.restoring;
        if hb.interval_ms > 0 {
            e.interval_ms = hb.interval_ms;
        }
        e.instances.insert(hb.instance.clone(), now_ms);
        if !hb.state_generation.is_empty() {
            e.state_generation = hb.state_generation.clone();
        }
    }

    /// Every alive cluster (at `now_ms`) whose agent said its state generation, with it and
    /// whether the agent waits for its commits to be restored.
    pub fn state_generations(&self, now_ms: u64) -> Vec<(String, String, bool)> {
        self.clusters
            .iter()
            .filter(|(_, e)| e.alive(now_ms) && !e.state_generation.is_empty())
            .map(|(c, e)| (c.clone(), e.state_generation.clone(), e.restoring))
            .collect()
    }

    /// Records a cluster found by service discovery and confirmed on its own subject at
    /// `now_ms`. It counts as heard from, with [`DISCOVERY_INTERVAL_MS`] as its interval until
    /// its first heartbeat. No instance is counted: anyone who may answer `$SRV.INFO` can claim
    /// any cluster and any id, so replicas are counted from heartbeats only, whose subject
    /// `<prefix>.heartbeat.<cluster>` only that cluster's agents may publish.
    pub fn discovered(&mut self, cluster: &str, now_ms: u64) {
        let e = self.clusters.entry(cluster.to_string()).or_insert_with(Entry::new);
        e.last_seen_ms = e.last_seen_ms.max(now_ms);
    }

    /// Records that `cluster` answered a plan: its timeouts are forgotten and it counts as
    /// heard from at `now_ms`. An unknown cluster is not added (only heartbeats and discovery
    /// add clusters).
    pub fn answered(&mut self, cluster: &str, now_ms: u64) {
        if let Some(e) = self.clusters.get_mut(cluster) {
            e.consecutive_timeouts = 0;
            e.last_seen_ms = e.last_seen_ms.max(now_ms);
        }
    }

    /// Forgets every cluster not heard from (heartbeat, discovery, answer) within `after_ms`
    /// of `now_ms` (ms since the epoch). Returns each forgotten cluster with when it was last
    /// heard from.
    pub fn forget_silent(&mut self, now_ms: u64, after_ms: u64) -> Vec<(String, u64)> {
        let gone: Vec<(String, u64)> = self
            .clusters
            .iter()
            .filter(|(_, e)| now_ms.saturating_sub(e.last_seen_ms) > after_ms)
            .map(|(n, e)| (n.clone(), e.last_seen_ms))
            .collect();
        for (n, _) in &gone {
            self.clusters.remove(n);
        }
        gone
    }

    /// Forgets `cluster` if it is known only through discovery (it never sent a heartbeat,
    /// which only its own credentials may publish): called when nobody serves its subjects.
    /// Returns whether it was forgotten.
    pub fn forget_if_unconfirmed(&mut self, cluster: &str) -> bool {
        let unconfirmed = self
            .clusters
            .get(cluster)
            .is_some_and(|e| e.last_heartbeat_sent_ms == 0);
        if unconfirmed {
            self.clusters.remove(cluster);
        }
        unconfirmed
    }

    /// Records that `cluster` did not answer a plan it was waited for (at `now_ms`).
    pub fn timed_out(&mut self, cluster: &str, now_ms: u64) {
        if let Some(e) = self.clusters.get_mut(cluster) {
            e.consecutive_timeouts = e.consecutive_timeouts.saturating_add(1);
            e.last_timeout_ms = now_ms;
        }
    }

    /// Whether a plan sent at `now_ms` should wait for `cluster` (unknown clusters are not
    /// expected at all, so they get [`Expectation::Wait`] only if asked about). Plans read the
    /// rule through [`Registry::targets`]; the tests ask it for one cluster.
    #[cfg(test)]
    pub fn expectation(&self, cluster: &str, now_ms: u64) -> Expectation {
        match self.clusters.get(cluster) {
            Some(e) => e.expectation(now_ms),
            None => Expectation::Wait,
        }
    }

    /// Every known cluster among `only` (all of them when `None`), sorted by name, each with
    /// whether a plan sent at `now_ms` waits for it (dead or suspect: not waited for, the reason
    /// given): one walk of the registry for a plan's whole fan-out (at 1,000 clusters a lookup
    /// per name was a visible share of a plan).
    pub fn targets(&self, only: Option<&BTreeSet<String>>, now_ms: u64) -> Vec<(String, Expectation)> {
        self.clusters
            .iter()
            .filter(|(name, _)| only.is_none_or(|o| o.contains(*name)))
            .map(|(name, e)| (name.clone(), e.expectation(now_ms)))
            .collect()
    }

    /// True when no cluster is known.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// Every known cluster's name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }

    /// The inventory version of the cluster's last heartbeat (empty when none yet).
    pub fn inventory_version(&self, cluster: &str) -> Option<&str> {
        self.clusters
            .get(cluster)
            .map(|e| e.inventory_version.as_str())
            .filter(|v| !v.is_empty())
    }

    /// The registry as `fedvol clusters` shows it, sorted by name. `instances` lists the
    /// replicas heard from within the alive window (or the last one heard, when none is).
    pub fn info(&self, now_ms: u64) -> Vec<ClusterInfo> {
        self.clusters
            .iter()
            .map(|(name, e)| {
                let window = e.window_ms();
                let mut instances: Vec<String> = e
                    .instances
                    .iter()
                    .filter(|(_, seen)| now_ms.saturating_sub(**seen) <= window)
                    .map(|(i, _)| i.clone())
                    .collect();
                if instances.is_empty()
                    && let Some((i, _)) = e.instances.iter().max_by_key(|(_, seen)| **seen)
                {
                    instances.push(i.clone());
                }
                ClusterInfo {
                    name: name.clone(),
                    alive: e.alive(now_ms),
                    suspect: e.suspect(),
                    last_seen_ms: e.last_seen_ms,
                    inventory_version: e.inventory_version.clone(),
                    load: e.load,
                    holds: e.holds,
                    instances,
                    degraded: e.degraded.clone(),
                    restoring: e.restoring,
                    drain: None,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb(cluster: &str, instance: &str, sent_ms: u64, interval_ms: u64) -> Heartbeat {
        Heartbeat {
            cluster: cluster.into(),
            instance: instance.into(),
            inventory_version: "v1".into(),
            holds: 2,
            load: 0.25,
            sent_ms,
            interval_ms,
            state_generation: String::new(),
            degraded: None,
            restoring: false,
        }
    }

    #[test]
    fn restoring_follows_the_latest_heartbeat() {
        let mut r = Registry::new();
        let mut h = hb("a", "a-1", 1000, 100);
        h.restoring = true;
        r.heartbeat(&h, 1000);
        assert!(r.info(1000)[0].restoring);
        r.heartbeat(&hb("a", "a-1", 1100, 100), 1100);
        assert!(!r.info(1100)[0].restoring);
    }

    #[test]
    fn degraded_follows_the_latest_heartbeat() {
        let mut r = Registry::new();
        let mut h = hb("a", "a-1", 1000, 100);
        h.degraded = Some("slurm unreadable".into());
        r.heartbeat(&h, 1000);
        assert_eq!(r.info(1000)[0].degraded.as_deref(), Some("slurm unreadable"));
        r.heartbeat(&hb("a", "a-1", 1100, 100), 1100);
        assert_eq!(r.info(1100)[0].degraded, None);
    }

    #[test]
    fn alive_within_three_intervals_then_dead() {
        let mut r = Registry::new();
        r.heartbeat(&hb("a", "a-1", 1000, 100), 1000);
        assert_eq!(r.expectation("a", 1300), Expectation::Wait);
        let Expectation::Skip(reason) = r.expectation("a", 1301) else {
            panic!("dead after 3 intervals")
        };
        assert_eq!(reason.code, Code::Unreachable.as_str());
        assert!(reason.message.contains("presumed dead"), "{}", reason.message);
        let info = &r.info(1301)[0];
        assert!(!info.alive);
        assert_eq!(
            (info.inventory_version.as_str(), info.holds, info.load),
            ("v1", 2, 0.25)
        );
        assert_eq!(info.instances, ["a-1"], "the last instance is still named");
        r.heartbeat(&hb("a", "a-1", 1400, 100), 1400);
        assert_eq!(r.expectation("a", 1400), Expectation::Wait);
    }

    #[test]
    fn two_consecutive_timeouts_make_a_suspect_until_a_newer_heartbeat() {
        let mut r = Registry::new();
        r.heartbeat(&hb("a", "a-1", 1000, 10_000), 1000);
        r.timed_out("a", 2000);
        assert_eq!(r.expectation("a", 2000), Expectation::Wait, "one timeout is not enough");
        r.timed_out("a", 3000);
        let Expectation::Skip(reason) = r.expectation("a", 3000) else {
            panic!("suspect")
        };
        assert!(reason.message.contains("suspect"), "{}", reason.message);
        assert!(r.info(3000)[0].suspect && r.info(3000)[0].alive);
        // A heartbeat sent before the last timeout (delivered late) does not clear it.
        r.heartbeat(&hb("a", "a-1", 2500, 10_000), 3100);
        assert!(matches!(r.expectation("a", 3100), Expectation::Skip(_)));
        // One sent after it does.
        r.heartbeat(&hb("a", "a-1", 3200, 10_000), 3200);
        assert_eq!(r.expectation("a", 3200), Expectation::Wait);
        // Still two timeouts behind: the next timeout makes it suspect again at once.
        r.timed_out("a", 4000);
        assert!(matches!(r.expectation("a", 4000), Expectation::Skip(_)));
        // An answer forgets the timeouts.
        r.answered("a", 4100);
        r.timed_out("a", 5000);
        assert_eq!(r.expectation("a", 5000), Expectation::Wait);
    }

    #[test]
    fn discovery_counts_as_heard_with_the_default_interval() {
        let mut r = Registry::new();
        r.discovered("b", 10_000);
        assert_eq!(
            r.expectation("b", 10_000 + 3 * DISCOVERY_INTERVAL_MS),
            Expectation::Wait
        );
        assert!(matches!(
            r.expectation("b", 10_001 + 3 * DISCOVERY_INTERVAL_MS),
            Expectation::Skip(_)
        ));
        assert_eq!(r.names(), ["b"]);
        assert_eq!(r.inventory_version("b"), None);
        assert!(r.info(10_000)[0].instances.is_empty(), "discovery counts no replica");
        assert_eq!(r.expectation("never-heard", 0), Expectation::Wait);
    }

    #[test]
    fn answers_never_add_clusters_and_silent_ones_are_forgotten() {
        let mut r = Registry::new();
        r.answered("invented", 1000);
        assert!(r.names().is_empty(), "an answer adds no cluster");
        r.heartbeat(&hb("a", "a-1", 1000, 100), 1000);
        r.discovered("b", 1000);
        r.answered("a", 5000);
        assert_eq!(r.forget_silent(5000, 3000), [("b".to_string(), 1000)]);
        assert_eq!(r.names(), ["a"], "a answered at 5000: heard from");
        assert!(r.forget_silent(8000, 3000).is_empty());
        assert_eq!(r.forget_silent(8001, 3000), [("a".to_string(), 5000)]);
        assert!(r.names().is_empty());
    }

    #[test]
    fn a_discovered_cluster_nobody_serves_is_forgotten_unless_it_heartbeated() {
        let mut r = Registry::new();
        r.discovered("ghost", 1000);
        r.heartbeat(&hb("a", "a-1", 1000, 100), 1000);
        r.discovered("a", 1000);
        assert!(r.forget_if_unconfirmed("ghost"));
        assert!(
            !r.forget_if_unconfirmed("a"),
            "a heartbeated: kept (its agent may be restarting)"
        );
        assert!(!r.forget_if_unconfirmed("never-known"));
        assert_eq!(r.names(), ["a"]);
    }

    #[test]
    fn replicas_are_listed_while_alive() {
        let mut r = Registry::new();
        r.heartbeat(&hb("a", "a-1", 1000, 100), 1000);
        r.discovered("a", 1000);
        r.heartbeat(&hb("a", "a-2", 1050, 100), 1050);
        assert_eq!(r.info(1100)[0].instances, ["a-1", "a-2"]);
        r.heartbeat(&hb("a", "a-2", 1400, 100), 1400);
        assert_eq!(r.info(1400)[0].instances, ["a-2"], "a-1 silent for 400 ms");
    }
}
