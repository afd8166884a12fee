//! A plan answer as the state keeps it: encoded once, never copied.
//!
//! A hold and the commit it becomes each carry the plan answer they were made from (an
//! agent's [`PlanReply`], about 8 KB of JSON at 1,000 hosts, most of it the funnel's stage
//! records), so that a repeated request id gets the same answer (docs/design.md §5). Kept as
//! decoded records the answer costs about four times its text in memory, and every commit
//! copied it three times and encoded it twice (its hold's record, its commit's record): a
//! `perf` profile of an agent under 64 submits in flight put those copies at 4% of its CPU,
//! and each live commit kept about 60 KB of memory, most of it this answer.
//!
//! - [`ReplyText`]: the answer's JSON text, shared. A commit keeps only this: it is read back
//!   only to answer a repeated commit or reserving plan, and when the commit completes.
//! - [`HeldReply`]: the answer decoded (what a hold is counted from: its allocations, its
//!   volumes) together with its text, made once when the hold is made. A record that carries
//!   it is written with the text as it is, not encoded again; the commit takes the text.
//!
//! Both are written exactly as the [`PlanReply`] they hold (records of earlier releases read
//! the same), and reading one checks that its text is a whole [`PlanReply`]: a damaged record
//! is refused when the state is loaded, as it was when the answer was read into its records.

use std::sync::Arc;

use serde_json::value::RawValue;

use fedvol_proto::agent::PlanReply;

/// A plan answer's JSON text, shared (module docs). Equal when the texts are.
#[derive(Debug, Clone)]
pub struct ReplyText(Arc<RawValue>);

impl ReplyText {
    /// The text of `reply`, as a record writes it.
    pub fn encode(reply: &PlanReply) -> ReplyText {
        // A plan answer is plain data (strings, numbers, maps with string keys): encoding it
        // cannot fail; `null` stands in should that ever change (and fails to read back).
        let raw = serde_json::value::to_raw_value(reply).unwrap_or_else(|_| RawValue::NULL.to_owned());
        ReplyText(Arc::from(raw))
    }

    /// The answer, read back from its text.
    ///
    /// Errors: the text is not a [`PlanReply`] (never for a text made by [`ReplyText::encode`]
    /// or read by [`ReplyText`]'s `Deserialize`, which checks it).
    pub fn decode(&self) -> Result<PlanReply, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// [`ReplyText::decode`] for the commit of `request_id`, as a state error.
    ///
    /// Errors: [`super::CoreError::Unreadable`].
    pub fn read(&self, request_id: &str) -> Result<PlanReply, super::CoreError> {
        self.decode().map_err(|e| super::CoreError::Unreadable {
            request_id: request_id.to_string(),
            message: e.to_string(),
        })
    }

    /// The text's length, bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// True when the text is empty (never for a valid answer).
    pub fn is_empty(&self) -> bool {
        self.0.get().is_empty()
    }
}

impl PartialEq for ReplyText {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl serde::Serialize for ReplyText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for ReplyText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        serde_json::from_str::<PlanReply>(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(ReplyText(Arc::from(raw)))
    }
}

/// A plan answer decoded, with its text (module docs). Reads as the [`PlanReply`] it holds.
#[derive(Debug, Clone)]
pub struct HeldReply {
    value: Arc<PlanReply>,
    text: ReplyText,
}

impl HeldReply {
    /// `reply`, encoded once.
    pub fn new(reply: PlanReply) -> HeldReply {
        let text = ReplyText::encode(&reply);
        HeldReply {
            value: Arc::new(reply),
            text,
        }
    }

    /// Its text (shared, not copied).
    pub fn text(&self) -> &ReplyText {
        &self.text
    }

    /// The answer, moved out when nothing else shares it (else copied).
    pub fn into_reply(self) -> PlanReply {
        Arc::try_unwrap(self.value).unwrap_or_else(|shared| PlanReply::clone(&shared))
    }
}

impl std::ops::Deref for HeldReply {
    type Target = PlanReply;

    fn deref(&self) -> &PlanReply {
        &self.value
    }
}

impl PartialEq for HeldReply {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl From<PlanReply> for HeldReply {
    fn from(reply: PlanReply) -> HeldReply {
        HeldReply::new(reply)
    }
}

impl serde::Serialize for HeldReply {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.text.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for HeldReply {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        let value: PlanReply = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(HeldReply {
            value: Arc::new(value),
            text: ReplyText(Arc::from(raw)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::decision::{ClusterDecision, ClusterStatus};

    fn reply() -> PlanReply {
        let mut decision = ClusterDecision::without_answer(ClusterStatus::Answered, 1.5, None);
        decision.feasible = true;
        PlanReply {
            request_id: "r-1".into(),
            cluster: "c1".into(),
            decision,
            hold: None,
        }
    }

    #[test]
    fn written_exactly_as_the_answer_and_read_back_the_same() {
        let r = reply();
        let plain = serde_json::to_string(&r).unwrap();
        let held = HeldReply::new(r.clone());
        assert_eq!(serde_json::to_string(&held).unwrap(), plain);
        assert_eq!(serde_json::to_string(held.text()).unwrap(), plain);
        // Records of earlier releases (the answer encoded in place) read into both.
        let back: HeldReply = serde_json::from_str(&plain).unwrap();
        assert_eq!(*back, r);
        assert_eq!(back, held);
        let text: ReplyText = serde_json::from_str(&plain).unwrap();
        assert_eq!(text.decode().unwrap(), r);
        assert_eq!(text.len(), plain.len());
        // Moved out, not copied, when nothing shares it.
        assert_eq!(held.into_reply(), r);
    }

    #[test]
    fn a_text_that_is_no_answer_is_refused_when_read() {
        for bad in [r#"{"request_id":"r"}"#, r#""just a string""#, "[1,2]"] {
            assert!(serde_json::from_str::<ReplyText>(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<HeldReply>(bad).is_err(), "{bad}");
        }
    }
}
