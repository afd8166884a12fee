//! The compact wire form of a summarized answer (docs/design.md §4, "Summarized answers").
//!
//! A decision of 1,000 clusters keeps about 997 summaries; written as objects, each is about
//! 1.2 KB and the decision does not fit NATS's default 1 MiB payload. In a decision's
//! `clusters`, a summarized answer ([`ClusterDecision::summarized`]) is written as a JSON
//! array, and so are the records inside it, each in a fixed order with trailing absent values
//! left out:
//!
//! - a summary: `[status, elapsed_ms, inventory_version, feasible, load, soft_matched,
//!   volumes, jobs, trace]`, then `holds_named_volume`, `error`, `resource_manager` and `cost`
//!   up to the last that is set; `elapsed_ms` rounded to 0.01 ms;
//! - a stage record: `[stage, subject, considered, passed, reason_counts]`, and a sixth
//!   element `omitted` only when it is not `considered - passed`;
//! - a volume pick: `[mode, provisioner, volume, action]`, then `passed` and `error` when set;
//! - a job pick: `[zone, host, soft_matched]`, then `hosts` when it is not just `[host]`, then
//!   `error` when set;
//! - in a decision holding summaries, a choice step's dropped cluster with one reason:
//!   `[candidate, code, message]` (`[candidate, message]` for the code `not_chosen`, and the
//!   name alone when its reasons are those of the cluster before it in the list), and a step after the first that dropped nothing has no
//!   `kept` (it kept what the step before kept).
//!
//! A stage record whose rejected candidates all failed with one reason code writes its
//! `reason_counts` as that code alone (`"insufficient"` for `{"insufficient": considered -
//! passed}`).
//!
//! Readers take either form for every one of these records (the `read_*` functions below are
//! the fields' `deserialize_with`), so a full answer, a summary and every record of earlier
//! releases read into the same types. The writers are used only for summaries, so a decision
//! of at most three clusters is written exactly as before.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use indexmap::IndexMap;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use crate::decision::{ChoiceStep, ClusterDecision, JobDecision, Reason, Rejection, StageTrace, VolumeDecision, codes};

/// A record with a compact array form besides its object form.
pub(crate) trait Dense: Sized + DeserializeOwned {
    /// What the record is, for error messages ("a stage record").
    const WHAT: &'static str;
    /// Writes the array form.
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
    /// Reads the array form.
    fn read<'de, A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error>;
}

/// Serializes a record in its array form.
pub(crate) struct Compact<'a, T>(pub &'a T);

impl<T: Dense> Serialize for Compact<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.write(s)
    }
}

/// Serializes a slice of records in their array form.
pub(crate) struct CompactList<'a, T>(pub &'a [T]);

impl<T: Dense> Serialize for CompactList<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&Compact(item))?;
        }
        seq.end()
    }
}

/// Serializes a name → record map with the records in their array form.
pub(crate) struct CompactMap<'a, T>(pub &'a IndexMap<String, T>);

impl<T: Dense> Serialize for CompactMap<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, &Compact(v))?;
        }
        map.end()
    }
}

/// `serialize_with` for one cluster's answer on its own (an agent's plan reply): a summary in
/// its array form, a whole answer as an object.
///
/// Errors: the serializer's.
pub fn write_answer<S: Serializer>(c: &ClusterDecision, s: S) -> Result<S::Ok, S::Error> {
    if c.summarized { c.write(s) } else { c.serialize(s) }
}

/// `deserialize_with` for one cluster's answer on its own: either form.
///
/// Errors: neither form, or a damaged one (naming the array form's shape).
pub fn read_answer<'de, D: Deserializer<'de>>(d: D) -> Result<ClusterDecision, D::Error> {
    Either::deserialize(d).map(|e| e.0)
}

/// A decision's clusters: summaries in their array form, the others as objects.
pub(crate) struct Clusters<'a>(pub &'a IndexMap<String, ClusterDecision>);

impl Serialize for Clusters<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, c) in self.0 {
            if c.summarized {
                map.serialize_entry(k, &Compact(c))?;
            } else {
                map.serialize_entry(k, c)?;
            }
        }
        map.end()
    }
}

/// One record in either form.
struct Either<T>(T);

impl<'de, T: Dense> Deserialize<'de> for Either<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Dense> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "{} (an object or its compact array)", T::WHAT)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
                T::read(seq)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_any(V(PhantomData)).map(Either)
    }
}

/// `deserialize_with` for a name → record map in either form, keeping the order.
pub(crate) fn read_map<'de, D: Deserializer<'de>, T: Dense>(d: D) -> Result<IndexMap<String, T>, D::Error> {
    let items: IndexMap<String, Either<T>> = IndexMap::deserialize(d)?;
    Ok(items.into_iter().map(|(k, e)| (k, e.0)).collect())
}

/// A choice step's dropped clusters in their compact form: each as [`Dense`] writes it, or its
/// name alone when its reasons are those of the one before it.
pub(crate) struct Dropped<'a>(pub &'a [Rejection]);

impl Serialize for Dropped<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        let mut before: Option<&[Reason]> = None;
        for r in self.0 {
            if before == Some(r.reasons.as_slice()) {
                seq.serialize_element(&r.candidate)?;
            } else {
                seq.serialize_element(&Compact(r))?;
            }
            before = Some(&r.reasons);
        }
        seq.end()
    }
}

/// One dropped cluster as written: whole, or its name alone.
enum DroppedWire {
    Name(String),
    Whole(Rejection),
}

impl<'de> Deserialize<'de> for DroppedWire {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DroppedWire;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a dropped cluster (an object, its compact array, or its name)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DroppedWire, E> {
                Ok(DroppedWire::Name(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<DroppedWire, A::Error> {
                Rejection::read(seq).map(DroppedWire::Whole)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<DroppedWire, A::Error> {
                Rejection::deserialize(de::value::MapAccessDeserializer::new(map)).map(DroppedWire::Whole)
            }
        }
        d.deserialize_any(V)
    }
}

/// `deserialize_with` for a choice step's dropped clusters in any form ([`Dropped`]).
///
/// Errors: a name alone first in the list (it has no reasons to repeat).
pub(crate) fn read_dropped<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Rejection>, D::Error> {
    let items: Vec<DroppedWire> = Vec::deserialize(d)?;
    let mut out: Vec<Rejection> = Vec::with_capacity(items.len());
    for item in items {
        let r = match item {
            DroppedWire::Whole(r) => r,
            DroppedWire::Name(candidate) => {
                let reasons = out.last().map(|p| p.reasons.clone()).ok_or_else(|| {
                    de::Error::custom("a dropped cluster named alone must follow one with its reasons")
                })?;
                Rejection { candidate, reasons }
            }
        };
        out.push(r);
    }
    Ok(out)
}

/// `deserialize_with` for a decision's choice steps in either form: a step without `kept`
/// kept what the step before kept.
pub(crate) fn read_steps<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ChoiceStep>, D::Error> {
    #[derive(Deserialize)]
    struct Step {
        rule: String,
        #[serde(default)]
        kept: Option<Vec<String>>,
        #[serde(deserialize_with = "read_dropped")]
        dropped: Vec<Rejection>,
    }
    let steps: Vec<Step> = Vec::deserialize(d)?;
    let mut out: Vec<ChoiceStep> = Vec::with_capacity(steps.len());
    for st in steps {
        let kept = match st.kept {
            Some(k) => k,
            None => out.last().map(|p| p.kept.clone()).unwrap_or_default(),
        };
        out.push(ChoiceStep {
            rule: st.rule,
            kept,
            dropped: st.dropped,
        });
    }
    Ok(out)
}

/// The next element of an array form, required.
fn need<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(seq: &mut A, i: usize, what: &str) -> Result<T, A::Error> {
    seq.next_element()?.ok_or_else(|| de::Error::invalid_length(i, &what))
}

/// The next element of an array form, absent or null as `None`.
fn opt<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(seq: &mut A) -> Result<Option<T>, A::Error> {
    Ok(seq.next_element::<Option<T>>()?.flatten())
}

/// Rejects elements past the last one the array form has.
fn end<'de, A: SeqAccess<'de>>(seq: &mut A, n: usize, what: &str) -> Result<(), A::Error> {
    match seq.next_element::<de::IgnoredAny>()? {
        None => Ok(()),
        Some(_) => Err(de::Error::invalid_length(n + 1, &what)),
    }
}

/// A stage record's reason counts: per code, or the one code every rejected candidate failed.
/// Read by its own visitor: `#[serde(untagged)]` buffers each value before trying a variant
/// (a summary read in 3.4 µs instead of 3.7 µs).
enum Counts {
    All(String),
    Each(BTreeMap<String, usize>),
}

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counts;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("reason counts (a code, or an object of code → count)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Counts, E> {
                Ok(Counts::All(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Counts, E> {
                Ok(Counts::All(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Counts, A::Error> {
                BTreeMap::deserialize(de::value::MapAccessDeserializer::new(map)).map(Counts::Each)
            }
        }
        d.deserialize_any(V)
    }
}

impl Dense for StageTrace {
    const WHAT: &'static str = "a stage record";

    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rejected = self.considered.saturating_sub(self.passed);
        let listed = self.omitted + self.rejected.len();
        let mut seq = s.serialize_seq(None)?;
        seq.serialize_element(&self.stage)?;
        seq.serialize_element(&self.subject)?;
        seq.serialize_element(&self.considered)?;
        seq.serialize_element(&self.passed)?;
        match self.reason_counts.iter().next() {
            Some((code, n)) if self.reason_counts.len() == 1 && *n == rejected => seq.serialize_element(code)?,
            _ => seq.serialize_element(&self.reason_counts)?,
        }
        if listed != rejected {
            seq.serialize_element(&listed)?;
        }
        seq.end()
    }

    fn read<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        const WHAT: &str = "[stage, subject, considered, passed, reason_counts(, omitted)]";
        let stage: String = need(&mut seq, 0, WHAT)?;
        let subject: String = need(&mut seq, 1, WHAT)?;
        let considered: usize = need(&mut seq, 2, WHAT)?;
        let passed: usize = need(&mut seq, 3, WHAT)?;
        let reason_counts = match need(&mut seq, 4, WHAT)? {
            Counts::All(code) => BTreeMap::from([(code, considered.saturating_sub(passed))]),
            Counts::Each(counts) => counts,
        };
        let omitted = opt(&mut seq)?.unwrap_or(considered.saturating_sub(passed));
        end(&mut seq, 6, WHAT)?;
        Ok(StageTrace {
            stage,
            subject,
            considered,
            passed,
            rejected: Vec::new(),
            omitted,
            reason_counts,
        })
    }
}

impl Dense for VolumeDecision {
    const WHAT: &'static str = "a volume pick";

    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        seq.serialize_element(&self.mode)?;
        seq.serialize_element(&self.provisioner)?;
        seq.serialize_element(&self.volume)?;
        seq.serialize_element(&self.action)?;
        if self.passed.is_some() || self.error.is_some() {
            seq.serialize_element(&self.passed)?;
        }
        if let Some(e) = &self.error {
            seq.serialize_element(e)?;
        }
        seq.end()
    }

    fn read<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        const WHAT: &str = "[mode, provisioner, volume, action(, passed, error)]";
        let mode = need(&mut seq, 0, WHAT)?;
        let provisioner = need(&mut seq, 1, WHAT)?;
        let volume = need(&mut seq, 2, WHAT)?;
        let action = need(&mut seq, 3, WHAT)?;
        let passed = opt(&mut seq)?;
        let error = opt(&mut seq)?;
        end(&mut seq, 6, WHAT)?;
        Ok(VolumeDecision {
            mode,
            provisioner,
            volume,
            action,
            error,
            passed,
            new_volume: None,
        })
    }
}

impl Dense for JobDecision {
    const WHAT: &'static str = "a job pick";

    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let just_host = match (&self.host, self.hosts.as_slice()) {
            (Some(h), [only]) => h == only,
            (None, []) => true,
            _ => false,
        };
        let mut seq = s.serialize_seq(None)?;
        seq.serialize_element(&self.zone)?;
        seq.serialize_element(&self.host)?;
        seq.serialize_element(&self.soft_matched)?;
        if !just_host || self.error.is_some() {
            seq.serialize_element(&self.hosts)?;
        }
        if let Some(e) = &self.error {
            seq.serialize_element(e)?;
        }
        seq.end()
    }

    fn read<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        const WHAT: &str = "[zone, host, soft_matched(, hosts, error)]";
        let zone = need(&mut seq, 0, WHAT)?;
        let host: Option<String> = need(&mut seq, 1, WHAT)?;
        let soft_matched = need(&mut seq, 2, WHAT)?;
        let hosts = match opt::<_, Vec<String>>(&mut seq)? {
            Some(h) => h,
            None => host.iter().cloned().collect(),
        };
        let error = opt(&mut seq)?;
        end(&mut seq, 5, WHAT)?;
        Ok(JobDecision {
            zone,
            host,
            error,
            hosts,
            soft_matched,
        })
    }
}

impl Dense for Rejection {
    const WHAT: &'static str = "a dropped cluster";

    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.reasons.as_slice() {
            [one] if one.code == codes::NOT_CHOSEN => (&self.candidate, &one.message).serialize(s),
            [one] => (&self.candidate, &one.code, &one.message).serialize(s),
            _ => self.serialize(s),
        }
    }

    fn read<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        const WHAT: &str = "[candidate(, code), message]";
        let candidate = need(&mut seq, 0, WHAT)?;
        let second: String = need(&mut seq, 1, WHAT)?;
        let (code, message) = match opt::<_, String>(&mut seq)? {
            Some(message) => (second, message),
            None => (codes::NOT_CHOSEN.to_string(), second),
        };
        end(&mut seq, 3, WHAT)?;
        Ok(Rejection {
            candidate,
            reasons: vec![Reason { code, message }],
        })
    }
}

impl Dense for ClusterDecision {
    const WHAT: &'static str = "a cluster's answer";

    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        seq.serialize_element(&self.status)?;
        seq.serialize_element(&((self.elapsed_ms * 100.0).round() / 100.0))?;
        seq.serialize_element(&self.inventory_version)?;
        seq.serialize_element(&self.feasible)?;
        seq.serialize_element(&self.load)?;
        seq.serialize_element(&self.soft_matched)?;
        seq.serialize_element(&CompactMap(&self.volumes))?;
        seq.serialize_element(&CompactMap(&self.jobs))?;
        seq.serialize_element(&CompactList(&self.trace))?;
        // The optional tail, up to its last element that is set.
        let tail = if self.cost.is_some() {
            4
        } else if self.resource_manager.is_some() {
            3
        } else if self.error.is_some() {
            2
        } else {
            usize::from(self.holds_named_volume)
        };
        if tail >= 1 {
            seq.serialize_element(&self.holds_named_volume)?;
        }
        if tail >= 2 {
            seq.serialize_element(&self.error)?;
        }
        if tail >= 3 {
            seq.serialize_element(&self.resource_manager)?;
        }
        if tail >= 4 {
            seq.serialize_element(&self.cost)?;
        }
        seq.end()
    }

    fn read<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        const WHAT: &str = "[status, elapsed_ms, inventory_version, feasible, load, soft_matched, \
                            volumes, jobs, trace(, holds_named_volume, error, resource_manager, cost)]";
        let status = need(&mut seq, 0, WHAT)?;
        let elapsed_ms = need(&mut seq, 1, WHAT)?;
        let inventory_version = need(&mut seq, 2, WHAT)?;
        let feasible = need(&mut seq, 3, WHAT)?;
        let load = need(&mut seq, 4, WHAT)?;
        let soft_matched = need(&mut seq, 5, WHAT)?;
        let volumes = need::<_, IndexMap<String, Either<VolumeDecision>>>(&mut seq, 6, WHAT)?;
        let jobs = need::<_, IndexMap<String, Either<JobDecision>>>(&mut seq, 7, WHAT)?;
        let trace = need::<_, Vec<Either<StageTrace>>>(&mut seq, 8, WHAT)?;
        let holds_named_volume = opt(&mut seq)?.unwrap_or(false);
        let error = opt(&mut seq)?;
        let resource_manager = opt(&mut seq)?;
        let cost = opt(&mut seq)?;
        end(&mut seq, 13, WHAT)?;
        Ok(ClusterDecision {
            status,
            elapsed_ms,
            inventory_version,
            feasible,
            volumes: volumes.into_iter().map(|(k, e)| (k, e.0)).collect(),
            jobs: jobs.into_iter().map(|(k, e)| (k, e.0)).collect(),
            trace: trace.into_iter().map(|e| e.0).collect(),
            error,
            soft_matched,
            load,
            holds_named_volume,
            allocations: Vec::new(),
            resource_manager,
            cost,
            summarized: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Action, ClusterStatus, Decision, Mode};
    use serde_json::{Value, json};

    fn reason(code: &str, message: &str) -> Reason {
        Reason {
            code: code.into(),
            message: message.into(),
        }
    }

    fn stage(stage: &str, considered: usize, passed: usize, counts: &[(&str, usize)]) -> StageTrace {
        StageTrace {
            stage: stage.into(),
            subject: "train".into(),
            considered,
            passed,
            rejected: Vec::new(),
            omitted: considered - passed,
            reason_counts: counts.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
        }
    }

    /// A summary using every optional part of the array forms.
    fn summary(name: &str) -> ClusterDecision {
        let mut c = ClusterDecision::without_answer(ClusterStatus::Answered, 12.0, None);
        c.inventory_version = Some("0123456789abcdef".into());
        c.load = 0.375;
        c.soft_matched = 2;
        c.volumes.insert(
            "data".into(),
            VolumeDecision {
                mode: Mode::Automatic,
                provisioner: Some("nfs".into()),
                volume: Some(format!("pvc-{name}")),
                action: Some(Action::Provision),
                error: None,
                passed: Some(2),
                new_volume: None,
            },
        );
        c.volumes.insert(
            "scratch".into(),
            VolumeDecision {
                mode: Mode::Named,
                provisioner: None,
                volume: None,
                action: None,
                error: Some(reason("not_found", "no provisioner `x`")),
                passed: None,
                new_volume: None,
            },
        );
        c.jobs.insert(
            "one".into(),
            JobDecision {
                zone: Some("z".into()),
                host: Some("h1".into()),
                error: None,
                hosts: vec!["h1".into()],
                soft_matched: 1,
            },
        );
        c.jobs.insert(
            "many".into(),
            JobDecision {
                zone: Some("z".into()),
                host: Some("h1".into()),
                error: None,
                hosts: vec!["h1".into(), "h2".into()],
                soft_matched: 0,
            },
        );
        c.jobs.insert(
            "none".into(),
            JobDecision {
                error: Some(reason("no_zone", "no zone")),
                ..Default::default()
            },
        );
        c.trace = vec![
            stage("host.power", 10, 8, &[("powered_off", 2)]),
            stage("host.capacity", 8, 5, &[("insufficient", 3), ("devices", 1)]),
            StageTrace {
                omitted: 1,
                ..stage("host.network", 5, 3, &[("no_network", 1)])
            },
        ];
        c.holds_named_volume = true;
        c.resource_manager = Some("slurm".into());
        c.summarized = true;
        c
    }

    fn decision(clusters: IndexMap<String, ClusterDecision>) -> Decision {
        let names: Vec<String> = clusters.keys().cloned().collect();
        Decision {
            request_id: "r".into(),
            workflow: "w".into(),
            seed: 1,
            chosen_cluster: names.first().cloned(),
            choice: vec![
                ChoiceStep {
                    rule: "feasible".into(),
                    kept: names.clone(),
                    dropped: Vec::new(),
                },
                ChoiceStep {
                    rule: "workflow_order".into(),
                    kept: names.clone(),
                    dropped: Vec::new(),
                },
                ChoiceStep {
                    rule: "least_loaded".into(),
                    kept: names[..1].to_vec(),
                    dropped: names[1..]
                        .iter()
                        .enumerate()
                        .map(|(i, n)| Rejection {
                            candidate: n.clone(),
                            reasons: if i == 0 {
                                vec![reason("a", "first"), reason("b", "second")]
                            } else if i == 1 {
                                vec![reason("infeasible", "nothing fits")]
                            } else {
                                vec![reason(codes::NOT_CHOSEN, "load 0.38 > 0.00 (a)")]
                            },
                        })
                        .collect(),
                },
            ],
            clusters,
            quota: Vec::new(),
            refused: None,
        }
    }

    #[test]
    fn a_decision_with_summaries_reads_back_as_it_was_written() {
        let mut clusters = IndexMap::new();
        let mut full = summary("a");
        full.summarized = false;
        full.trace[0].rejected = vec![Rejection {
            candidate: "h9".into(),
            reasons: vec![reason("powered_off", "h9 is off")],
        }];
        full.trace[0].omitted = 1;
        clusters.insert("a".to_string(), full);
        for n in ["b", "c", "d", "e"] {
            clusters.insert(n.to_string(), summary(n));
        }
        clusters["c"].elapsed_ms = 12.3456;
        clusters["d"].cost = None;
        clusters["d"].resource_manager = None;
        clusters["d"].holds_named_volume = false;
        let d = decision(clusters);
        let text = serde_json::to_string(&d).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["clusters"]["a"].is_object(), "a full answer stays an object");
        assert!(v["clusters"]["b"].is_array(), "{}", v["clusters"]["b"]);
        // The summary without the optional tail ends with its stage records.
        assert_eq!(v["clusters"]["d"].as_array().map(Vec::len), Some(9));
        assert_eq!(
            v["clusters"]["b"][8][0],
            json!(["host.power", "train", 10, 8, "powered_off"])
        );
        assert_eq!(v["choice"][1].get("kept"), None, "a step that dropped nothing");
        assert_eq!(v["choice"][2]["dropped"][2], json!(["d", "load 0.38 > 0.00 (a)"]));
        assert_eq!(
            v["choice"][2]["dropped"][3],
            json!("e"),
            "the same reasons as the one before"
        );
        let mut back: Decision = serde_json::from_str(&text).unwrap();
        assert_eq!(back.clusters["c"].elapsed_ms, 12.35, "rounded to 0.01 ms");
        back.clusters["c"].elapsed_ms = 12.3456;
        assert_eq!(back, d);
    }

    #[test]
    fn a_small_decision_is_written_as_before() {
        let mut clusters = IndexMap::new();
        for n in ["a", "b"] {
            let mut c = summary(n);
            c.summarized = false;
            clusters.insert(n.to_string(), c);
        }
        let d = decision(clusters);
        let v = serde_json::to_value(&d).unwrap();
        // What the derived form of these types writes: objects everywhere, every `kept`.
        assert!(v["clusters"]["a"]["trace"][0].is_object());
        assert!(v["clusters"]["a"]["jobs"]["one"].is_object());
        assert!(v["choice"][1]["kept"].is_array());
        assert_eq!(
            v["choice"][2]["dropped"][0],
            json!({"candidate": "b", "reasons": [{"code": "a", "message": "first"}, {"code": "b", "message": "second"}]})
        );
        assert_eq!(serde_json::from_value::<Decision>(v).unwrap(), d);
    }

    #[test]
    fn summaries_written_as_objects_still_read() {
        // A summary as the object form writes it (records of the release before the array form).
        let mut c = summary("b");
        c.resource_manager = None;
        let object = json!({
            "status": "answered", "elapsed_ms": 12.0, "inventory_version": "0123456789abcdef",
            "feasible": false, "volumes": serde_json::to_value(&c.volumes).unwrap(),
            "jobs": serde_json::to_value(&c.jobs).unwrap(),
            "trace": serde_json::to_value(&c.trace).unwrap(), "soft_matched": 2, "load": 0.375,
            "holds_named_volume": true, "summarized": true
        });
        let d = json!({"request_id": "r", "workflow": "w", "seed": 1, "chosen_cluster": null,
                       "clusters": {"b": object}, "choice": []});
        let read: Decision = serde_json::from_value(d).unwrap();
        assert_eq!(read.clusters["b"], c);
    }

    #[test]
    fn a_damaged_array_form_is_an_error_naming_the_shape() {
        let bad = json!({"request_id": "r", "workflow": "w", "seed": 1, "chosen_cluster": null,
                         "clusters": {"b": ["answered", 1.0]}, "choice": []});
        let e = serde_json::from_value::<Decision>(bad).unwrap_err().to_string();
        assert!(e.contains("[status, elapsed_ms"), "{e}");
        let alone = json!({"request_id": "r", "workflow": "w", "seed": 1, "chosen_cluster": null,
                           "clusters": {}, "choice": [{"rule": "feasible", "kept": [], "dropped": ["b"]}]});
        let e = serde_json::from_value::<Decision>(alone).unwrap_err().to_string();
        assert!(e.contains("must follow one with its reasons"), "{e}");
        let extra = json!(["host.power", "j", 1, 0, "x", 1, 2]);
        let e = serde_json::from_value::<Vec<Either<StageTrace>>>(json!([extra]))
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("[stage, subject")));
    }
}
