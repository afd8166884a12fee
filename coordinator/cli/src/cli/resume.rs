//! A plain submit's memory of itself ([`super::pending`] keeps the file): the entry a real
//! submit without `--request-id` keeps while its outcome is unknown, the earlier run it resumes
//! instead of booking again (said on stderr), and when the entry is dropped. `fedvol submit`
//! holds one [`Resume`] for its whole life (its lock with it).

use fedvol_proto::coordinator::SubmitMsg;
use fedvol_proto::now_ms;

use super::pending::{self, Claim, Entry};
use crate::render::words::ago;

/// What one submit remembers: its request's key (a real submit; none for a dry run) and its
/// claim on its entry (a plain submit that is sent and whose entry could be written).
pub struct Resume {
    key: Option<String>,
    claim: Option<Claim>,
}

impl Resume {
    /// The memory of submit `msg` by `user` under subject prefix `prefix`, keyed by the
    /// request's digest as given (before a fresh request id is made); nothing is written yet.
    pub fn new(user: &str, prefix: &str, msg: &SubmitMsg) -> Resume {
        Resume {
            key: (!msg.dry_run).then(|| pending::key(user, prefix, &msg.digest())),
            claim: None,
        }
    }

    /// Claims the entry of a real submit that is `plain` (no `--request-id`) and `sendable`:
    /// when `resume` (no `--new`) and an earlier run of the same request ended without learning
    /// its outcome, `msg` takes that run's request id (said on stderr); else `msg`'s own fresh
    /// id is remembered. A file that cannot be written is a note: the submit goes on.
    pub fn begin(&mut self, msg: &mut SubmitMsg, plain: bool, sendable: bool, resume: bool) {
        let Some(k) = self.key.as_ref().filter(|_| plain && sendable) else {
            return;
        };
        match pending::begin(k, &msg.workflow.name, &msg.request_id, resume, now_ms()) {
            Ok(begun) => {
                if let Some(e) = &begun.resumed {
                    msg.request_id = e.request_id.clone();
                    eprintln!("{}", resuming_note(e));
                }
                self.claim = Some(begun.claim);
            }
            Err(e) => eprintln!(
                "note: this submit cannot be resumed by a plain retry ({e}); after an error, use --request-id"
            ),
        }
    }

    /// The request was never received (nobody listening, refused by the server, never sent):
    /// nothing was booked, so the claimed entry is dropped and nothing is left to resume.
    pub fn not_received(&mut self) {
        if let Some(Err(e)) = self.claim.take().map(Claim::finish) {
            eprintln!("note: {e}");
        }
    }

    /// The outcome of `request_id` is learnt (decided, failed, queued, refused for good): its
    /// entry is dropped, whether this run claimed it or a submit under `--request-id` settles
    /// one an earlier plain run left.
    pub fn learnt(&mut self, request_id: &str) {
        let done = match (self.claim.take(), &self.key) {
            (Some(c), _) => c.finish(),
            (None, Some(k)) => pending::forget(k, request_id),
            (None, None) => Ok(()),
        };
        if let Err(e) = done {
            eprintln!("note: {e}");
        }
    }
}

/// The line saying which earlier run a plain submit continues: `resuming request <id>: ...`.
fn resuming_note(e: &Entry) -> String {
    let when = |ms: u64| match ago(ms, now_ms()) {
        s if s == "now" => "just now".to_string(),
        s => s,
    };
    let run = if e.pid == 0 {
        format!("first sent {}", when(e.since_ms))
    } else if e.run_ms == e.since_ms {
        format!("pid {}, started {}", e.pid, when(e.run_ms))
    } else {
        format!(
            "pid {}, started {}; first sent {}",
            e.pid,
            when(e.run_ms),
            when(e.since_ms)
        )
    };
    format!(
        "resuming request {}: the earlier submit of this workflow ({run}) ended before it learnt its outcome (--new submits afresh)",
        e.request_id
    )
}
