//! The array forms of a cluster's answer and of the records inside it (a stage record, a volume
//! pick, a job pick) and of a dropped cluster: each record's [`Dense`] implementation, and the
//! writers and readers of answers in either form ([`write_answer`], [`read_answer`],
//! [`Clusters`]).

use std::collections::BTreeMap;
use std::fmt;

use indexmap::IndexMap;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use super::form::{Compact, CompactList, CompactMap, Dense, Either, EitherList, EitherMap, end, need, opt};
use crate::decision::{ClusterDecision, JobDecision, Reason, Rejection, StageTrace, VolumeDecision, codes};

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
pub(super) struct Clusters<'a>(pub &'a IndexMap<String, ClusterDecision>);

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
            Counts::All(code) => {
                // One entry: inserted, not sorted and bulk-built as `BTreeMap::from` does.
                let mut one = BTreeMap::new();
                one.insert(code, considered.saturating_sub(passed));
                one
            }
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
        let volumes = need::<_, EitherMap<VolumeDecision>>(&mut seq, 6, WHAT)?.0;
        let jobs = need::<_, EitherMap<JobDecision>>(&mut seq, 7, WHAT)?.0;
        let trace = need::<_, EitherList<StageTrace>>(&mut seq, 8, WHAT)?.0;
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
            volumes,
            jobs,
            trace,
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
