//! Protocol error codes: one enum used by every party that sends an error and by every piece
//! of code that matches one, so that renaming a code is a compile error rather than a silent
//! break of, e.g., exactly-once commit settlement (which hinges on [`Code::Committed`] and
//! [`Code::CommitInProgress`]).
//!
//! On the wire a code is its snake_case name (`"commit_in_progress"`); a code this build does
//! not know (from a newer peer) is kept as [`Code::Other`] with its text.

use fedvol_common::decision::Reason;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $text:literal, )*) => {
        /// A protocol error code (see the module docs).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
            /// A code this build does not know, as sent.
            Other(String),
        }

        impl Code {
            /// The code's wire name.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Code::$variant => $text, )*
                    Code::Other(s) => s,
                }
            }

            /// The code named `text` ([`Code::Other`] when unknown).
            pub fn parse(text: &str) -> Code {
                match text {
                    $( $text => Code::$variant, )*
                    other => Code::Other(other.to_string()),
                }
            }

            /// Every known code (for tests and docs).
            pub const ALL: &'static [Code] = &[ $( Code::$variant, )* ];
        }
    };
}

codes! {
    /// The request body is not what the operation takes (not JSON, wrong version, a field of
    /// the wrong shape, over a limit). Nothing changed.
    BadRequest = "bad_request",
    /// The server failed (its store, a task); the request did not take effect.
    Internal = "internal",
    /// The answer would be larger than the NATS server's `max_payload`.
    ReplyTooLarge = "reply_too_large",
    /// The server has as many requests in progress as it takes (`maxInFlight`): ask again
    /// later. Nothing was done.
    Overloaded = "overloaded",
    /// Agent, release: the request is committed (so a release cannot undo it). Settles a commit
    /// whose answer was lost: it happened.
    Committed = "committed",
    /// Agent, commit or release: a commit of this request is running. The outcome is not
    /// known yet: ask again.
    CommitInProgress = "commit_in_progress",
    /// Agent, commit: no hold for this request (never made, released or lapsed).
    NoHold = "no_hold",
    /// Agent, commit: the hold lapsed before the commit.
    HoldExpired = "hold_expired",
    /// Agent, commit: a provisioner the hold needs left the inventory.
    NoSuchProvisioner = "no_such_provisioner",
    /// Agent, commit: a driver failed to create a volume; nothing was kept.
    ProvisioningFailed = "provisioning_failed",
    /// Agent, commit with a request: re-planned on the cluster's current state, the request no
    /// longer fits (the reply carries the re-plan). Nothing changed.
    NoLongerFits = "no_longer_fits",
    /// Agent, commit with a request: it does not fit now, but would without the commits of other
    /// requests in progress on this cluster: ask again shortly. Nothing changed.
    CapacityInFlight = "capacity_in_flight",
    /// Agent, plan or commit: the agent started on a fresh state (`--init`) and waits for the
    /// coordinators to restore the commits they stored for its cluster; it admits no new
    /// commit meanwhile. Nothing changed: ask again shortly.
    Restoring = "restoring",
    /// Agent, commit: this attempt of the request was released (fenced) on this cluster; it
    /// never commits. Nothing changed.
    Released = "released",
    /// Agent or coordinator, complete: the request is not committed.
    NotCommitted = "not_committed",
    /// A complete of a request whose batch jobs still run (`fedvol cancel` ends them first).
    JobsRunning = "jobs_running",
    /// The cluster's resource manager refused to run a job (`sbatch` failed); the commit was
    /// rolled back.
    SubmitFailed = "submit_failed",
    /// Coordinator: no decision is stored under the request id.
    NotFound = "not_found",
    /// Coordinator: the decision store (JetStream KV) failed.
    StoreUnavailable = "store_unavailable",
    /// A cluster did not answer in time.
    TimedOut = "timed_out",
    /// Nobody listens on the cluster's subject (NATS "no responders"), or the cluster is known
    /// dead or suspect.
    Unreachable = "unreachable",
    /// A peer answered something that could not be read.
    BadAnswer = "bad_answer",
    /// Coordinator: a commit on a cluster failed; the next cluster in the ranking was tried.
    CommitFailed = "commit_failed",
    /// Coordinator: a commit was not answered and its outcome could not be learnt; the
    /// decision stays `planned` until it is settled.
    CommitOutcomeUnknown = "commit_outcome_unknown",
    /// Coordinator: the commit attempts allowed (`commitAttempts`) were used up.
    CommitAttemptsExhausted = "commit_attempts_exhausted",
    /// NATS failed while talking to a peer.
    NatsError = "nats_error",
    /// Coordinator: the decision belongs to another user; only its owner may change it.
    NotOwner = "not_owner",
    /// Coordinator: the request id is already the id of a different request (another
    /// workflow, groups, seed, or a dry run against a real submit).
    RequestIdConflict = "request_id_conflict",
    /// Coordinator: the request would take a federation-wide quota past its limit;
    /// the message and the decision's `quota` give the quota, its use, the request and the
    /// limit. Nothing was held or committed.
    QuotaExceeded = "quota_exceeded",
    /// Coordinator: a `wait_for_capacity` submit found the queue at its
    /// `queue.maxQueued`. Nothing was queued.
    QueueFull = "queue_full",
    /// Coordinator: a queued decision waited `queue.maxWaitMs` without room.
    QueueTimeout = "queue_timeout",
    /// Coordinator: the user has `maxDecisionsPerUser` decisions stored and no quota applies
    /// to the submit; nothing was stored. Final decisions leave the store after
    /// `decisionRetentionMs`.
    TooManyDecisions = "too_many_decisions",
    /// Coordinator, submit: no cluster that answered can place the workflow, and some clusters
    /// did not answer (timed out, unreachable, `restoring`), or none is known: it may fit
    /// there. Nothing was booked; ask again (`fedvol submit` exits 75, `--wait` asks again,
    /// `--wait-for-capacity` queues it). Not "nothing fits".
    ClustersUnavailable = "clusters_unavailable",
    /// Coordinator, submit: every cluster answered, and on each some volume or job fails for a
    /// reason no freed capacity changes (an unknown project, a permission no group grants, an
    /// annotation or hard constraint nothing carries: kube-scheduler's
    /// UnschedulableAndUnresolvable), so a `wait_for_capacity` submit is refused at once
    /// instead of queued.
    Unresolvable = "unresolvable",
    /// Coordinator, submit: the workflow fits only on clusters an operator drained (`fedvol
    /// clusters drain`): they answered and could place it, but a drained cluster is never
    /// chosen for new work. Nothing was booked; a `wait_for_capacity` submit is queued until
    /// another cluster has room or the drain ends (`fedvol submit` exits 2).
    ClustersDrained = "clusters_drained",
    /// Coordinator, `drain` and `undrain`: the user is not one of the coordinator's operators
    /// (its `operators` setting). Nothing changed.
    NotOperator = "not_operator",
}

impl Code {
    /// True when `reason` carries this code.
    pub fn is(&self, reason: &Reason) -> bool {
        reason.code == self.as_str()
    }

    /// A [`ProtoError`] with this code and `message`.
    pub fn error(self, message: impl Into<String>) -> ProtoError {
        ProtoError {
            code: self,
            message: message.into(),
        }
    }

    /// A decision-document [`Reason`] with this code and `message`.
    pub fn reason(&self, message: impl Into<String>) -> Reason {
        Reason::new(self.as_str(), message)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Code {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(Code::parse(&s))
    }
}

/// A typed protocol error: `{"code": "...", "message": "..."}` on the wire, the same shape as
/// a decision document's [`Reason`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct ProtoError {
    /// The code.
    pub code: Code,
    /// What happened, for people.
    pub message: String,
}

impl ProtoError {
    /// True when the error carries `code`.
    pub fn is(&self, code: &Code) -> bool {
        &self.code == code
    }
}

impl From<ProtoError> for Reason {
    fn from(e: ProtoError) -> Reason {
        Reason {
            code: e.code.as_str().to_string(),
            message: e.message,
        }
    }
}

impl From<Reason> for ProtoError {
    fn from(r: Reason) -> ProtoError {
        ProtoError {
            code: Code::parse(&r.code),
            message: r.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_by_name() {
        for c in Code::ALL {
            assert_eq!(&Code::parse(c.as_str()), c);
            let json = serde_json::to_string(c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(&serde_json::from_str::<Code>(&json).unwrap(), c);
        }
        // The settle codes are what the previous release sent (a rename would break
        // exactly-once commit settlement with older agents).
        assert_eq!(Code::Committed.as_str(), "committed");
        assert_eq!(Code::CommitInProgress.as_str(), "commit_in_progress");
    }

    #[test]
    fn unknown_codes_are_kept() {
        let e: ProtoError = serde_json::from_str(r#"{"code":"shiny_new","message":"m"}"#).unwrap();
        assert_eq!(e.code, Code::Other("shiny_new".into()));
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":"shiny_new","message":"m"}"#
        );
        let r: Reason = e.into();
        assert_eq!(r.code, "shiny_new");
    }
}
