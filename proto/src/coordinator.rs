//! The coordinators' operations (queue group `coordinator`, subject
//! `<prefix>.coordinator.<op>.<user>`) and their bodies: the table below is the whole list
//! ([`CoordinatorOp`] shows it with its bodies).

use crate::agent::WhyNotReply;
use crate::code::ProtoError;
use crate::decisions::{DecisionState, StoredDecision};
use crate::endpoint::{NoArgs, ReplyBody, RequestBody};
use crate::failure::Failure;
use crate::operations::operations;
use crate::version::encode;
use bytes::Bytes;
use fedvol_common::funnel::why_not::Target;

operations! {
    /// The coordinators' operations: the `<op>` token of `<prefix>.coordinator.<op>.<user>`.
    pub enum CoordinatorOp, served as CoordinatorEndpoint {
        /// Plan a workflow across the federation and, unless dry-run, commit it.
        Submit = "submit": SubmitMsg => SubmitReply;
        /// End a committed workflow (its cluster frees allocations and reclaims volumes).
        Complete = "complete": DecisionRef => SubmitReply;
        /// Explain why a cluster did not choose a zone, host or provisioner for a decision.
        WhyNot = "why_not": WhyNotQuery => WhyNotReply;
        /// The cluster registry.
        Clusters = "clusters": NoArgs => ClustersReply;
        /// Stored decisions, newest first.
        List = "list": NoArgs => ListReply;
        /// One stored decision.
        Get = "get": DecisionRef => SubmitReply;
        /// Re-run a stored request with its seed and compare.
        Replay = "replay": DecisionRef => ReplayReply;
        /// One cluster in detail: the registry's view and its agent's effective inventory and
        /// status (`fedvol clusters show`).
        Cluster = "cluster": ClusterRef => ClusterReply;
        /// The decisions changed after a bucket revision, waiting up to a bound for one (a long
        /// poll): how `fedvol decisions watch` and `fedvol ui` follow the decision store without a
        /// JetStream consumer of their own.
        Changes = "changes": ChangesQuery => ChangesReply;
    }
}

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
        crate::agent::workflow_limits(what, &self.workflow)?;
        crate::agent::choice_options(what, self.choice.as_ref())
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
    /// ([`Submit`]'s `encode_reply`) instead of encoding the decision a second time (about
    /// 2.4 ms for the 450 KB decision of 1,000 clusters). Never on the wire as such; `None`
    /// after decoding.
    #[serde(skip)]
    pub stored_record: Option<StoredRecord>,
}

impl ReplyBody for SubmitReply {
    const CARRIES_ERROR: bool = true;

    /// From the stored record when the reply has it ([`SubmitReply::stored_record`]), else
    /// encoded.
    fn encode_body(&self) -> Bytes {
        self.spliced().unwrap_or_else(|| encode(self))
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

/// Complete, get and replay: act on a stored decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionRef {
    /// The decision's request id.
    pub request_id: String,
    /// Complete only: cancel the workflow's batch jobs on its cluster first (`fedvol cancel`).
    /// Absent (false) from earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel: bool,
    /// Get only: a cluster whose answer the decision stores as a summary, to be answered whole
    /// as its agent still keeps it (`answer`, docs/design.md §5); the stored decision is not
    /// changed. When the agent keeps it no longer, the answer is the stored one. Absent from
    /// earlier releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole: Option<String>,
}

impl RequestBody for DecisionRef {
    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// Why not: ask the cluster of a stored decision why not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhyNotQuery {
    /// The decision's request id.
    pub request_id: String,
    /// The cluster to ask.
    pub cluster: String,
    /// What to explain: the body's `zone`, `host` and `provisioner` fields.
    #[serde(flatten)]
    pub target: Target,
}

impl RequestBody for WhyNotQuery {
    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// The cluster `cluster` asks about (the `cluster` operation).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterRef {
    /// The cluster's name.
    pub cluster: String,
}

impl RequestBody for ClusterRef {}

/// The answer to `cluster`: what the coordinator's registry knows of it and what its agent
/// serves (provisioners with status and policies, zones and hosts, capacity in use), as
/// `kubectl describe node` shows a node.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClusterReply {
    /// The registry's entry.
    pub info: ClusterInfo,
    /// The agent's effective inventory and status (driver secrets redacted by the agent).
    pub agent: crate::agent::InventoryReply,
}

impl ReplyBody for ClusterReply {}

/// One cluster in the coordinator's registry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClusterInfo {
    /// Name.
    pub name: String,
    /// Heard from within three heartbeat intervals.
    pub alive: bool,
    /// Timed out on recent requests and not heard from since: not waited for.
    pub suspect: bool,
    /// Last heartbeat, ms since the epoch.
    pub last_seen_ms: u64,
    /// Inventory version of the last heartbeat.
    pub inventory_version: String,
    /// Load of the last heartbeat.
    pub load: f64,
    /// Live holds of the last heartbeat.
    pub holds: usize,
    /// Replica instances heard from.
    pub instances: Vec<String>,
    /// Why the cluster is degraded, from its last heartbeat (its live inventory
    /// source is unreadable and it serves its last good reading); absent when healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// The cluster's agent started on a fresh state (`--init`) and its last heartbeat says it
    /// waits for the coordinators to restore the commits they stored for it: until then it
    /// answers plans and new commits `restoring` (docs/design.md §6). Absent when false, and
    /// from coordinators of earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restoring: bool,
}

/// The answer to clusters.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClustersReply {
    /// Every cluster ever heard from, by name.
    #[serde(default)]
    pub clusters: Vec<ClusterInfo>,
}

impl ReplyBody for ClustersReply {}

/// One line of the decisions list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionSummary {
    /// Request id (the KV key).
    pub request_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Lifecycle state.
    pub state: DecisionState,
    /// Chosen cluster.
    pub chosen_cluster: Option<String>,
    /// Last change, ms since the epoch.
    pub updated_ms: u64,
    /// The user the request was made for (absent from coordinators in earlier releases: empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// A kept dry run (nothing was held or committed); absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The request's priority class, if any; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// The priority's value; absent when 0.
    #[serde(default, skip_serializing_if = "crate::decisions::is_zero")]
    pub priority: i64,
    /// When the decision was first queued, ms since the epoch; absent when never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
    /// The batch jobs the decision runs on its cluster's resource manager, with their states;
    /// absent when none (`fedvol decisions watch` shows their changes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::batch::BatchJob>,
    /// Why the decision failed or was refused, one line of at most [`REASON_CHARS`]
    /// characters ([`reason`]); absent otherwise, and from coordinators of earlier releases
    /// (`fedvol decisions watch` shows it under a failed row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a `failed` decision, which of `failed`'s meanings holds
    /// ([`crate::decisions::FailureKind`]); absent otherwise (and from coordinators of
    /// earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<crate::decisions::FailureKind>,
}

/// The most characters of [`DecisionSummary::reason`]; a longer reason is cut, ending in `…`.
pub const REASON_CHARS: usize = 300;

/// Why a decision failed or was refused, in one line, from its parts: the workflow's failed
/// jobs (`run_failure`), else the refusal of its request (`refused`: a quota, the queue), else,
/// when no cluster took it, its last failed commit attempt (`commit on C failed: message
/// (code)`); `None` when none applies (a committed decision, or one nothing fits, whose reason
/// is per cluster). Cut to [`REASON_CHARS`].
pub fn reason(
    run_failure: Option<&str>,
    refused: Option<&fedvol_common::decision::Reason>,
    chosen: bool,
    last_failed_commit: Option<(&str, &ProtoError)>,
) -> Option<String> {
    let text = if let Some(f) = run_failure {
        f.to_string()
    } else if let Some(r) = refused {
        format!("refused: {} ({})", r.message, r.code)
    } else if let (false, Some((cluster, e))) = (chosen, last_failed_commit) {
        format!("commit on {cluster} failed: {} ({})", e.message, e.code)
    } else {
        return None;
    };
    Some(if text.chars().count() > REASON_CHARS {
        let mut cut: String = text.chars().take(REASON_CHARS - 1).collect();
        cut.push('…');
        cut
    } else {
        text
    })
}

impl DecisionSummary {
    /// The summary of `stored`, kept under `request_id`.
    pub fn of(request_id: String, stored: &StoredDecision) -> DecisionSummary {
        let last_failed = stored
            .attempts
            .iter()
            .rev()
            .find_map(|a| a.error.as_ref().filter(|_| !a.ok).map(|e| (a.cluster.as_str(), e)));
        DecisionSummary {
            reason: reason(
                stored.run_failure.as_deref(),
                stored.decision.refused.as_ref(),
                stored.decision.chosen_cluster.is_some(),
                last_failed,
            ),
            request_id,
            workflow: stored.decision.workflow.clone(),
            state: stored.state,
            chosen_cluster: stored.decision.chosen_cluster.clone(),
            updated_ms: stored.updated_ms,
            user: stored.request.user.clone(),
            dry_run: stored.dry_run,
            priority_class: stored.priority_class.clone(),
            priority: stored.priority,
            queued_ms: stored.queued_ms,
            jobs: stored.jobs().to_vec(),
            failure: stored.failure(),
        }
    }
}

/// The answer to list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListReply {
    /// Newest first.
    #[serde(default)]
    pub decisions: Vec<DecisionSummary>,
}

impl ReplyBody for ListReply {}

/// The changes query: every decision whose latest change is after bucket revision `after`,
/// oldest change first; when there is none yet, wait up to `wait_ms` for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChangesQuery {
    /// The bucket revision the caller has seen everything up to (0: from the start, i.e. the
    /// latest value of every decision).
    #[serde(default)]
    pub after: u64,
    /// How long to wait for a change when there is none after `after`, ms (0: answer at once;
    /// the coordinator caps it at [`MAX_CHANGES_WAIT_MS`]).
    #[serde(default)]
    pub wait_ms: u64,
}

impl RequestBody for ChangesQuery {}

/// The longest a `changes` query waits for a change, ms.
pub const MAX_CHANGES_WAIT_MS: u64 = 30_000;

/// How many clusters a decision's plan reached, answered and could place it on (the web view's
/// list columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterCounts {
    /// Clusters asked.
    pub asked: usize,
    /// Clusters that answered.
    pub answered: usize,
    /// Clusters that could place the workflow.
    pub feasible: usize,
}

impl ClusterCounts {
    /// The counts of `stored`'s plan.
    pub fn of(stored: &StoredDecision) -> ClusterCounts {
        let clusters = &stored.decision.clusters;
        ClusterCounts {
            asked: clusters.len(),
            answered: clusters
                .values()
                .filter(|c| c.status == fedvol_common::decision::ClusterStatus::Answered)
                .count(),
            feasible: clusters.values().filter(|c| c.feasible).count(),
        }
    }
}

/// What a key of the decision bucket holds after a change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangeKind {
    /// A decision, as `decisions list` summarises it.
    Put {
        /// The decision's summary.
        summary: Box<DecisionSummary>,
        /// How many clusters its plan reached.
        #[serde(default)]
        clusters: ClusterCounts,
    },
    /// A value that does not decode as a stored decision.
    Unreadable {
        /// Why it does not decode.
        error: String,
    },
    /// The decision was deleted or purged.
    Removed,
}

/// One decision's latest change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionChange {
    /// The key: the request id.
    pub request_id: String,
    /// The bucket revision of the change (grows with every change of the bucket).
    pub revision: u64,
    /// What the key holds now.
    pub change: ChangeKind,
}

/// The answer to changes: the decisions changed after the query's revision, oldest change
/// first, only the latest change of each (so intermediate states may be skipped), cut to fit
/// the server's `max_payload`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChangesReply {
    /// The changes, oldest first.
    #[serde(default)]
    pub changes: Vec<DecisionChange>,
    /// The revision the caller is now up to date with: ask again with `after` = this.
    pub last: u64,
    /// True when the answer was cut to fit and more changes wait: ask again at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

impl ReplyBody for ChangesReply {}

/// The answer to replay.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReply {
    /// True when every cluster that answered gave the same volumes and jobs as stored.
    pub identical: bool,
    /// Each difference, in words (including inventory versions that changed since).
    pub differences: Vec<String>,
    /// The replayed decision.
    #[serde(default)]
    pub replayed: Option<fedvol_common::decision::Decision>,
}

impl ReplyBody for ReplayReply {
    /// The fields the previous release's readers of [`ReplayReply`] required.
    fn legacy_failure_fields(_f: &Failure) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("identical".into(), false.into());
        m.insert("differences".into(), serde_json::Value::Array(Vec::new()));
        m
    }
}

/// A request id for workflow `workflow`: its name reduced to key characters (letters, digits,
/// `-`, `_`; anything else becomes `-`; at most 64 of them), a dash, and `unique` (e.g. a NUID);
/// just `unique` when nothing of the name is left. The coordinator makes one this way when a
/// submit carries none, and so does the CLI before it sends (a retry must carry the
/// id of the first attempt).
pub fn request_id_for(workflow: &str, unique: &str) -> String {
    let stem: String = workflow
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let stem = stem.trim_matches('-');
    if stem.is_empty() {
        unique.to_string()
    } else {
        format!("{stem}-{unique}")
    }
}

/// A fresh unique token from `client`: the last token of a new inbox name (a NUID, 22
/// characters, unique across processes).
pub fn unique_token(client: &async_nats::Client) -> String {
    let inbox = client.new_inbox();
    inbox.rsplit('.').next().unwrap_or(&inbox).to_string()
}

#[cfg(test)]
mod request_id_tests {
    use super::request_id_for;

    #[test]
    fn request_ids_keep_the_workflow_name_as_key_characters() {
        assert_eq!(request_id_for("train", "N1"), "train-N1");
        assert_eq!(request_id_for("a b/c.d", "N1"), "a-b-c-d-N1");
        assert_eq!(request_id_for("--x--", "N1"), "x-N1");
        assert_eq!(request_id_for("", "N1"), "N1");
        assert_eq!(request_id_for("***", "N1"), "N1");
        assert_eq!(request_id_for(&"w".repeat(100), "N").len(), 64 + 2);
    }
}

#[cfg(test)]
mod stored_record_tests {
    use super::{Submit, SubmitReply};
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

    /// A record that does not start as `encode` writes one is not spliced: the answer is
    /// encoded.
    #[test]
    fn a_record_of_another_shape_is_not_used() {
        let stored = crate::listing::tests::stored(2);
        let reply = SubmitReply::stored(stored.clone()).with_record(bytes::Bytes::from_static(b"{\"x\":1}"));
        assert_eq!(Submit::encode_reply(&reply), encode(&SubmitReply::stored(stored)));
    }
}
