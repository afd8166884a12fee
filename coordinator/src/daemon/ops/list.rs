//! `list`: every stored decision's summary, newest first, from the decision index
//! ([`crate::daemon::index`]) once it has caught up with the bucket, else from the bucket.

use std::time::Duration;

use fedvol_proto::coordinator::ListReply;
use fedvol_proto::{Code, Failure};

use crate::daemon::Coordinator;

/// How long `list` waits for the index to catch up with the bucket before reading the bucket
/// itself.
const CATCH_UP_MS: u64 = 2000;

/// The longest a `list` waits for its user's read budget; beyond, it is refused `overloaded`.
const LIST_WAITS_AT_MOST: Duration = Duration::from_secs(2);

/// `list` of `user`: every stored decision's summary, newest first. Answered from the index
/// once it has seen the bucket's last revision (so a decision stored before the request is
/// listed); when it cannot catch up within `CATCH_UP_MS` (its watch is down), the bucket's
/// keys are read, one such listing at a time. The answer counts against the user's read
/// budget as `changes` answers do.
///
/// Errors: the store failed (`store_unavailable`); the user's read budget would take longer
/// than `LIST_WAITS_AT_MOST` to allow it (`overloaded`, saying when to ask again).
pub async fn list(co: &Coordinator, user: &str) -> Result<ListReply, Failure> {
    wait_for_budget(co, user).await?;
    let reply = list_all(co).await?;
    let bytes = serde_json::to_vec(&reply).map_or(0, |v| v.len());
    co.reads.take(user, bytes);
    Ok(reply)
}

/// Waits until `user`'s read budget allows a read; refuses when that would take longer than
/// `LIST_WAITS_AT_MOST`.
///
/// Errors: `overloaded`, saying when to ask again.
pub(super) async fn wait_for_budget(co: &Coordinator, user: &str) -> Result<(), Failure> {
    let debt = co.reads.wait(user);
    if debt > LIST_WAITS_AT_MOST {
        return Err(Failure::new(
            Code::Overloaded,
            format!(
                "user {} read more decisions than this coordinator's limit per user allows (readBytesPerSecondPerUser: {} bytes per second): ask again in {} ms",
                fedvol_common::limits::printable(user),
                co.cfg.read_bytes_per_second_per_user,
                debt.as_millis()
            ),
        ));
    }
    tokio::time::sleep(debt).await;
    Ok(())
}

/// Every stored decision's summary, newest first (see [`list`]), charging no read budget.
///
/// Errors: the store failed (`store_unavailable`).
pub(super) async fn list_all(co: &Coordinator) -> Result<ListReply, Failure> {
    let unavailable = |e: crate::daemon::store::StoreError| Failure::new(Code::StoreUnavailable, e.to_string());
    let last = co.store.last_revision().await.map_err(unavailable)?;
    if co.index.reaches(last, Duration::from_millis(CATCH_UP_MS)).await {
        return Ok(ListReply {
            decisions: co.index.summaries(),
        });
    }
    tracing::warn!(
        last,
        seen = co.index.seen(),
        "list: the decisions index is behind the bucket; reading the bucket"
    );
    let _one = co
        .listing
        .acquire()
        .await
        .map_err(|e| Failure::new(Code::Internal, e.to_string()))?;
    co.store
        .list()
        .await
        .map(|decisions| ListReply { decisions })
        .map_err(unavailable)
}
