//! The decision document's layout ([`Decision`]'s serde implementations, and [`ChoiceStep`]'s
//! reader): its clusters with summaries in their array form ([`super::records::Clusters`]), and,
//! when it holds summaries, its choice steps compact ([`Steps`]: dropped clusters as arrays or
//! names alone, [`Dropped`]; a step that dropped nothing without its `kept`). Readers take
//! either form.

use std::fmt;

use indexmap::IndexMap;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

use super::form::{Compact, Dense, read_map};
use super::records::Clusters;
use crate::decision::{ChoiceStep, ClusterDecision, Decision, Reason, Rejection};

/// A choice step's dropped clusters in their compact form: each as [`Dense`] writes it, or its
/// name alone when its reasons are those of the one before it.
pub(super) struct Dropped<'a>(pub &'a [Rejection]);

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
pub(super) fn read_dropped<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Rejection>, D::Error> {
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
pub(super) fn read_steps<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ChoiceStep>, D::Error> {
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

/// A choice step written in its compact form; `.1`: it is the first step.
struct CompactStep<'a>(&'a ChoiceStep, bool);

impl Serialize for CompactStep<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (step, first) = (self.0, self.1);
        let mut m = s.serialize_struct("ChoiceStep", 3)?;
        m.serialize_field("rule", &step.rule)?;
        if first || !step.dropped.is_empty() {
            m.serialize_field("kept", &step.kept)?;
        }
        m.serialize_field("dropped", &Dropped(&step.dropped))?;
        m.end()
    }
}

/// The choice steps, compact when the decision holds summaries: dropped clusters in their
/// array form, and a step after the first that dropped nothing without its `kept` (the same
/// as the step before).
struct Steps<'a> {
    steps: &'a [ChoiceStep],
    compact: bool,
}

impl Serialize for Steps<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.compact {
            return self.steps.serialize(s);
        }
        s.collect_seq(self.steps.iter().enumerate().map(|(i, st)| CompactStep(st, i == 0)))
    }
}

/// The decision document: its clusters with summaries in their array form, its choice steps
/// compact when it holds summaries, `quota`, `refused` and `drained` only when set.
impl Serialize for Decision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("Decision", 9)?;
        m.serialize_field("request_id", &self.request_id)?;
        m.serialize_field("workflow", &self.workflow)?;
        m.serialize_field("seed", &self.seed)?;
        m.serialize_field("chosen_cluster", &self.chosen_cluster)?;
        m.serialize_field("clusters", &Clusters(&self.clusters))?;
        let steps = Steps {
            steps: &self.choice,
            compact: self.clusters.values().any(|c| c.summarized),
        };
        m.serialize_field("choice", &steps)?;
        if !self.quota.is_empty() {
            m.serialize_field("quota", &self.quota)?;
        }
        if let Some(r) = &self.refused {
            m.serialize_field("refused", r)?;
        }
        if !self.drained.is_empty() {
            m.serialize_field("drained", &self.drained)?;
        }
        m.end()
    }
}

/// The decision document in either form (`read_map` for its clusters, `read_steps` for its
/// choice steps); `choice`, `quota`, `refused` and `drained` may be absent.
impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "Decision")]
        struct Wire {
            request_id: String,
            workflow: String,
            seed: u64,
            chosen_cluster: Option<String>,
            #[serde(deserialize_with = "read_map")]
            clusters: IndexMap<String, ClusterDecision>,
            #[serde(default, deserialize_with = "read_steps")]
            choice: Vec<ChoiceStep>,
            #[serde(default)]
            quota: Vec<crate::quota::QuotaCheck>,
            #[serde(default)]
            refused: Option<Reason>,
            #[serde(default)]
            drained: crate::drain::Drains,
        }
        let w = Wire::deserialize(d)?;
        Ok(Decision {
            request_id: w.request_id,
            workflow: w.workflow,
            seed: w.seed,
            chosen_cluster: w.chosen_cluster,
            clusters: w.clusters,
            choice: w.choice,
            quota: w.quota,
            refused: w.refused,
            drained: w.drained,
        })
    }
}

/// One choice step, its dropped clusters in any form (`read_dropped`); `kept` may be absent.
impl<'de> Deserialize<'de> for ChoiceStep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "ChoiceStep")]
        struct Wire {
            rule: String,
            #[serde(default)]
            kept: Vec<String>,
            #[serde(deserialize_with = "read_dropped")]
            dropped: Vec<Rejection>,
        }
        let w = Wire::deserialize(d)?;
        Ok(ChoiceStep {
            rule: w.rule,
            kept: w.kept,
            dropped: w.dropped,
        })
    }
}
