//! `changes`: a long poll, "every decision changed after revision R, waiting up to T ms for
//! one", answered from the decision index ([`crate::daemon::index`]) at once when something
//! newer exists, else at the first change or at the timeout, and cut to fit the server's
//! `max_payload` (`more` says to ask again at once).

use std::time::Duration;

use fedvol_proto::coordinator::{ChangesQuery, ChangesReply, MAX_CHANGES_WAIT_MS};

use crate::daemon::Coordinator;
use crate::daemon::watchers::Watch;

/// Room left in an answer for its envelope (`v`, `last`, `more`), bytes.
const ENVELOPE_BYTES: usize = 256;

/// Waits until `watch` is ended (its place given to another user), or forever without one.
async fn ended(watch: Option<&Watch>) {
    match watch {
        Some(w) => w.ended().await,
        None => std::future::pending().await,
    }
}

/// `changes` of `user`: the decisions changed after `q.after`; when none is, waits up to
/// `q.wait_ms` (at most [`MAX_CHANGES_WAIT_MS`]) for one. Never fails: at the timeout the
/// answer is empty with `last` the revision the index has seen.
///
/// A user past its read budget (`readBytesPerSecondPerUser`,
/// [`crate::daemon::per_user::ReadBudget`]) first waits until it is paid; when that takes
/// longer than the query's wait, the answer is empty at `q.after` after the wait (the client
/// asks again). A watch whose place in the pool
/// went to another user ([`crate::daemon::watchers`]) is answered at once with what there is.
pub async fn changes(co: &Coordinator, user: &str, q: &ChangesQuery, watch: Option<&Watch>) -> ChangesReply {
    let wait = Duration::from_millis(q.wait_ms.min(MAX_CHANGES_WAIT_MS));
    let until = tokio::time::Instant::now() + wait;
    let debt = co.reads.wait(user);
    if !debt.is_zero() {
        let nothing = ChangesReply {
            changes: Vec::new(),
            last: q.after,
            more: false,
        };
        if debt > wait {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = ended(watch) => {}
            }
            return nothing;
        }
        tokio::select! {
            _ = tokio::time::sleep(debt) => {}
            _ = ended(watch) => return nothing,
        }
    }
    tokio::select! {
        _ = tokio::time::timeout_at(until, co.index.changed_after(q.after)) => {}
        _ = ended(watch) => {}
    }
    let budget = co.client.max_payload().saturating_sub(ENVELOPE_BYTES);
    let (reply, bytes) = co.index.changes_after_sized(q.after, budget);
    co.reads.take(user, bytes + ENVELOPE_BYTES);
    reply
}
