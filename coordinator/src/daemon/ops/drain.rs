//! `drain` and `undrain`: an operator takes a cluster out of the choice for new work, or puts
//! it back (`fedvol clusters drain CLUSTER --reason TEXT`, `fedvol clusters undrain CLUSTER`).
//!
//! Only operators: the shipped NATS permissions let only the `ops` identity publish on
//! `<prefix>.operator.>` (every user may publish `<prefix>.coordinator.*.<own name>` only), and
//! the coordinator also refuses a user not in its `operators` (`not_operator`), so a site whose
//! permission files let more through still has a gate. The drain is one key of the decision
//! bucket ([`super::super::drains`]), written by compare-and-set: of two operators draining
//! the same cluster at once one writes and the other is answered with the drain in force
//! (`changed: false`); an undrain deletes the key at the revision it read, so it never ends a
//! drain it did not see.

use fedvol_common::drain::Drain;
use fedvol_proto::coordinator::{ClusterDrain, ClusterRef, DrainMsg, DrainReply, drain_key};
use fedvol_proto::{Code, Failure, now_ms};

use crate::daemon::Coordinator;
use crate::daemon::store::Write;

/// Rounds of read-then-write before a drain or undrain that keeps meeting other writers gives
/// up (`store_unavailable`, nothing changed by it).
const ROUNDS: usize = 8;

/// Refuses `user` unless it is one of the coordinator's operators.
///
/// Errors: `not_operator`, saying who the operators are and how to name one.
fn operator(co: &Coordinator, user: &str, what: &str) -> Result<(), Failure> {
    if co.cfg.operators.iter().any(|o| o == user) {
        return Ok(());
    }
    let who = fedvol_common::limits::printable(user);
    let message = if co.cfg.operators.is_empty() {
        format!(
            "user {who} may not {what} clusters: this coordinator has no operators (name them in its configuration, `operators: [<user>]`, or with --operator)"
        )
    } else {
        format!(
            "user {who} may not {what} clusters: only operators may ({}); nothing changed",
            co.cfg.operators.join(", ")
        )
    };
    tracing::warn!(user = %who, "{what} refused: not an operator");
    Err(Failure::new(Code::NotOperator, message))
}

/// Whether a coordinator knows `cluster` (its registry: heartbeats and discovery).
fn known(co: &Coordinator, cluster: &str) -> bool {
    co.registry().names().iter().any(|n| n == cluster)
}

/// `drain` of `user`: drains `q.cluster` with `q.reason`, recording `user` and now (docs/design.md
/// §5). A cluster already drained keeps its drain (the answer says by whom, `changed: false`).
///
/// Errors: `not_operator`; `not_found` for a cluster no coordinator knows unless
/// `before_join` (naming the known ones, with the closest); `store_unavailable`.
pub async fn drain(co: &Coordinator, user: &str, q: &DrainMsg) -> Result<DrainReply, Failure> {
    operator(co, user, "drain")?;
    let is_known = known(co, &q.cluster);
    if !is_known && !q.before_join {
        let names = co.registry().names();
        let hint = fedvol_common::suggest::closest(&q.cluster, names.iter().map(String::as_str))
            .map(|c| format!("; did you mean `{c}`?"))
            .unwrap_or_default();
        return Err(Failure::new(
            Code::NotFound,
            format!(
                "no cluster named `{}` is known (known: {}{hint}): nothing was drained; to drain a cluster before it joins, add --before-join",
                q.cluster,
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ),
        )
        .from_cluster(&q.cluster));
    }
    let key = drain_key(&q.cluster);
    let store = |e: super::super::store::StoreError| Failure::new(Code::StoreUnavailable, e.to_string());
    for _ in 0..ROUNDS {
        if let Some((existing, rev)) = co.store.get_json::<ClusterDrain>(&key).await.map_err(store)? {
            co.drains.set(&q.cluster, Some(existing.drain.clone()), rev);
            return Ok(DrainReply {
                cluster: q.cluster.clone(),
                changed: false,
                drain: Some(existing.drain),
                ended: None,
                known: is_known,
            });
        }
        let drain = Drain {
            by: user.to_string(),
            at_ms: now_ms(),
            reason: q.reason.trim().to_string(),
        };
        let record = ClusterDrain {
            cluster: q.cluster.clone(),
            drain: drain.clone(),
        };
        match co.store.put_json(&key, &record, None).await.map_err(store)? {
            Write::Done(rev) => {
                co.drains.set(&q.cluster, Some(drain.clone()), rev);
                return Ok(DrainReply {
                    cluster: q.cluster.clone(),
                    changed: true,
                    drain: Some(drain),
                    ended: None,
                    known: is_known,
                });
            }
            // Another drain was written meanwhile: read it and answer with it.
            Write::Conflict => continue,
        }
    }
    Err(kept_changing(&q.cluster))
}

/// `undrain` of `user`: ends `q.cluster`'s drain; a cluster that is not drained is answered
/// `changed: false`.
///
/// Errors: `not_operator`; `bad_request` for a name that is no subject token;
/// `store_unavailable`.
pub async fn undrain(co: &Coordinator, user: &str, q: &ClusterRef) -> Result<DrainReply, Failure> {
    operator(co, user, "undrain")?;
    if !fedvol_common::limits::is_token(&q.cluster) {
        return Err(Failure::new(
            Code::BadRequest,
            format!(
                "`{}` is not a cluster name",
                fedvol_common::limits::printable(&q.cluster)
            ),
        ));
    }
    let key = drain_key(&q.cluster);
    let is_known = known(co, &q.cluster);
    let store = |e: super::super::store::StoreError| Failure::new(Code::StoreUnavailable, e.to_string());
    for _ in 0..ROUNDS {
        let Some((existing, rev)) = co.store.get_json::<ClusterDrain>(&key).await.map_err(store)? else {
            return Ok(DrainReply {
                cluster: q.cluster.clone(),
                changed: false,
                drain: None,
                ended: None,
                known: is_known,
            });
        };
        match co.store.delete_raw(&key, rev).await.map_err(store)? {
            Write::Done(_) => {
                // The delete marker's revision is past `rev`; the watch brings the exact one.
                co.drains.set(&q.cluster, None, rev + 1);
                tracing::info!(cluster = %q.cluster, by = %fedvol_common::limits::printable(user), "undrained");
                return Ok(DrainReply {
                    cluster: q.cluster.clone(),
                    changed: true,
                    drain: None,
                    ended: Some(existing.drain),
                    known: is_known,
                });
            }
            Write::Conflict => continue,
        }
    }
    Err(kept_changing(&q.cluster))
}

/// The answer when `cluster`'s drain changed under every one of the [`ROUNDS`] tries of a
/// compare-and-set write: `store_unavailable`, asking again.
fn kept_changing(cluster: &str) -> Failure {
    Failure::new(
        Code::StoreUnavailable,
        format!("the drain of `{cluster}` kept changing under this request ({ROUNDS} tries): ask again"),
    )
}
