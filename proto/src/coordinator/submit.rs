//! The submit operation's bodies: [`SubmitMsg`] (a workflow to plan everywhere and, unless a
//! dry run, commit) and [`SubmitReply`] (the stored decision and/or why not; also the answer to
//! get and complete), written from the bucket's record when the coordinator has it.

use bytes::Bytes;

use crate::code::ProtoError;
use crate::decisions::StoredDecision;
use crate::endpoint::{ReplyBody, RequestBody};
use crate::version::encode_sized;

/// Submit: plan a workflow everywhere; commit unless `dry_run`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SubmitMsg {
    /// Idempotency key (the same id returns the same stored decision); empty = the coordinator
    /// picks one.
    #[serde(default)]
    pub request_id: String,
    /// The workflow.
    pub workflow: fedvol_common::model::Workflow,
    /// Only plan; hold and commit nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Seed (default: derived from the request id).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Groups the user claims. Used only when the coordinator runs without a directory (dev
    /// mode, with a warning); with a directory, groups come from it.
    #[serde(default)]
    pub groups: Vec<String>,
    /// How long to wait for clusters, ms (0 = the coordinator's default).
    #[serde(default)]
    pub timeout_ms: u64,
    /// Rejected candidates listed per funnel stage in the stored decision (0 = all; `None` = the
    /// coordinator's `traceLimit`, default
    /// [`fedvol_common::funnel::trace::STORED_TRACE_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_limit: Option<usize>,
    /// Store a dry run's decision in the decision bucket (then `get`, `why_not` and `replay`
    /// find it under its request id, and the id is taken). Without it a dry run
    /// reads and writes nothing in the bucket: the answer carries the whole decision. Real
    /// submits are always stored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
    /// The priority class to submit with (overrides the workflow's `priority`); a
    /// class the coordinator does not configure is `bad_request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// When nothing fits now (or a quota is exceeded), queue the decision
    /// (`queued`) and place it when room frees, instead of failing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_capacity: bool,
    /// The user's wish for the cluster choice (`fedvol submit --prefer-cost`, with
    /// `--cost-hours`). `None` = the coordinator's `choice:` configuration; when given it
    /// replaces it (default hours not given = the coordinator's `defaultHours`). Absent on the
    /// wire when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<fedvol_common::choice::ChoiceOptions>,
}

impl RequestBody for SubmitMsg {
    /// The workflow limits of [`fedvol_common::limits`] and the choice options' hours.
    fn check(&self, what: &str) -> Result<(), ProtoError> {
        crate::checks::workflow_limits(what, &self.workflow)?;
        crate::checks::choice_options(what, self.choice.as_ref())
    }

    /// The request id, when the submit carries one.
    fn request_id(&self) -> Option<&str> {
        (!self.request_id.is_empty()).then_some(self.request_id.as_str())
    }
}

impl SubmitMsg {
    /// What makes two submits under one request id the same request (one request id,
    /// one workflow): the sha256, in hex, of the workflow without its source positions
    /// ([`fedvol_common::model::Workflow::without_positions`]), the claimed groups (sorted,
    /// without repeats), the seed and the choice wish (left out when `None`, so requests without
    /// one keep the digest they had before it existed). Whether it is a dry run is compared from the stored
    /// record, since a real submit may take over a stored dry run of the same request.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        #[derive(serde::Serialize)]
        struct Identity<'a> {
            workflow: &'a fedvol_common::model::Workflow,
            groups: std::collections::BTreeSet<&'a str>,
            seed: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            choice: Option<&'a fedvol_common::choice::ChoiceOptions>,
        }
        let workflow = self.workflow.without_positions();
        let identity = Identity {
            workflow: &workflow,
            groups: self.groups.iter().map(String::as_str).collect(),
            seed: self.seed,
            choice: self.choice.as_ref(),
        };
        let bytes = serde_json::to_vec(&identity).unwrap_or_default();
        Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The answer to submit, get and complete: the stored decision, and/or why there is none or why
/// the operation did not take effect (a complete the cluster refused comes with the decision).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SubmitReply {
    /// The stored decision.
    #[serde(default)]
    pub stored: Option<StoredDecision>,
    /// Why the request failed, or did not fully take effect.
    #[serde(default)]
    pub error: Option<ProtoError>,
    /// `stored` as the coordinator just wrote it to the decision bucket (its record, from
    /// [`crate::encode`]), when it has those bytes: the answer is then written from them
    /// ([`crate::coordinator::Submit`]'s `encode_reply`) instead of encoding the decision a
    /// second time (about 2.4 ms for the 450 KB decision of 1,000 clusters). Never on the wire
    /// as such; `None` after decoding.
    #[serde(skip)]
    pub stored_record: Option<StoredRecord>,
}

impl ReplyBody for SubmitReply {
    const CARRIES_ERROR: bool = true;

    /// From the stored record when the reply has it ([`SubmitReply::stored_record`]), else
    /// encoded.
    fn encode_body(&self) -> Bytes {
        self.spliced().unwrap_or_else(|| {
            let capacity = self.stored.as_ref().map_or(128, StoredDecision::encoded_size_hint);
            encode_sized(self, capacity)
        })
    }
}

/// The bytes of a stored decision's record ([`SubmitReply::stored_record`]). Compares equal to
/// any other (it is a cache of `stored`, not a value of its own) and shows only its length.
#[derive(Clone)]
pub struct StoredRecord(pub Bytes);

impl PartialEq for StoredRecord {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for StoredRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredRecord({} bytes)", self.0.len())
    }
}

impl SubmitReply {
    /// A reply with the stored decision only.
    pub fn stored(stored: StoredDecision) -> Self {
        SubmitReply {
            stored: Some(stored),
            error: None,
            stored_record: None,
        }
    }

    /// A reply with an error only.
    pub fn error(error: ProtoError) -> Self {
        SubmitReply {
            stored: None,
            error: Some(error),
            stored_record: None,
        }
    }

    /// The same reply, answered from `record`: the bytes [`crate::encode`] made of exactly
    /// `self.stored` (what the bucket holds).
    pub fn with_record(mut self, record: Bytes) -> Self {
        self.stored_record = Some(StoredRecord(record));
        self
    }

    /// The reply's wire body written from its stored record: `{"v":<VERSION>,"stored":` + the
    /// record without its version + `,"error":` + the error + `}`, the bytes [`crate::encode`] makes
    /// of the reply (tested byte for byte). `None` without a record, or a record that does not
    /// start as [`crate::encode`] starts one.
    fn spliced(&self) -> Option<Bytes> {
        let head = format!("{{\"v\":{},", crate::version::VERSION);
        let record = &self.stored_record.as_ref()?.0;
        let fields = record.strip_prefix(head.as_bytes())?;
        let error = serde_json::to_vec(&self.error).ok()?;
        let mut out = Vec::with_capacity(record.len() + error.len() + 32);
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(b"\"stored\":{");
        out.extend_from_slice(fields);
        out.extend_from_slice(b",\"error\":");
        out.extend_from_slice(&error);
        out.push(b'}');
        Some(Bytes::from(out))
    }
}

#[cfg(test)]
mod stored_record_tests {
    use super::SubmitReply;
    use crate::coordinator::Submit;
    use crate::{Code, Endpoint, encode};

    /// The answer written from the stored record is the answer encoded, byte for byte: with
    /// and without an error, for decisions of 1 to 40 clusters (summaries and whole answers).
    #[test]
    fn an_answer_from_the_stored_record_is_the_answer_encoded() {
        for n in [1, 4, 17, 40] {
            let stored = crate::listing::tests::stored(n);
            for error in [None, Some(Code::QuotaExceeded.error("over the quota"))] {
                let reply = SubmitReply {
                    stored: Some(stored.clone()),
                    error,
                    stored_record: None,
                };
                let encoded = Submit::encode_reply(&reply);
                let spliced = Submit::encode_reply(&reply.clone().with_record(encode(&stored)));
                assert_eq!(
                    String::from_utf8_lossy(&spliced),
                    String::from_utf8_lossy(&encoded),
                    "{n} clusters"
                );
                let back = Submit::decode_reply(&spliced, "client").unwrap().unwrap();
                assert_eq!(back.stored.as_ref(), Some(&stored));
            }
        }
    }

    /// The room reserved for a record is at least what it takes (no buffer grows while a
    /// decision is written), and the bytes are `encode`'s whatever the room.
    #[test]
    fn a_records_reserved_room_holds_it() {
        for n in [0, 1, 4, 17, 40] {
            let stored = crate::listing::tests::stored(n);
            let bytes = encode(&stored);
            assert!(
                bytes.len() <= stored.encoded_size_hint(),
                "{n} clusters: {} bytes",
                bytes.len()
            );
            for room in [0, 7, stored.encoded_size_hint()] {
                assert_eq!(crate::encode_sized(&stored, room), bytes, "{n} clusters, room {room}");
            }
        }
    }

    /// A record that does not start as `encode` writes one is not spliced: the answer is
    /// encoded.
    #[test]
    fn a_record_of_another_shape_is_not_used() {
        let stored = crate::listing::tests::stored(2);
        let reply = SubmitReply::stored(stored.clone()).with_record(bytes::Bytes::from_static(b"{\"x\":1}"));
        assert_eq!(Submit::encode_reply(&reply), encode(&SubmitReply::stored(stored)));
    }
}
