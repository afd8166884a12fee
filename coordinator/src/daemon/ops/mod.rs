//! The coordinator's operations, one module each, and `dispatch`, which serves each by its
//! name: `submit`, `complete` (and cancel), `get`, `replay`, `why_not`, `clusters`, `cluster`,
//! `list`, `count`, `changes` (the long poll), `what_if`, and the operators' `drain` and
//! `undrain`. Each takes its decoded request and answers with its reply type or a
//! [`Failure`](fedvol_proto::Failure) (codes of [`fedvol_proto::Code`], or the agent's own),
//! never a missing answer.
//!
//! Each operation is an entry point above [`crate::daemon::lifecycle`] (the steps a decision's
//! life shares) and the decision index ([`crate::daemon::index`]), as the agent has one module
//! per endpoint. Adding an operation: its request and reply in `proto`, its module here, its arm
//! in `dispatch` (the `match` is exhaustive, so a forgotten one does not compile).

pub mod changes;
pub mod clusters;
pub mod complete;
pub mod count;
pub mod drain;
pub mod get;
pub mod list;
pub mod replay;
pub mod submit;
pub mod what_if;
pub mod why_lost;
pub mod why_not;

pub use changes::changes;
pub use clusters::{cluster, clusters};
pub use complete::complete;
pub use count::count;
pub use drain::{drain, undrain};
pub use get::get;
pub use list::list;
pub use replay::replay;
pub use submit::submit;
pub use what_if::what_if;
pub use why_not::why_not;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8};

use bytes::Bytes;

use fedvol_proto::coordinator::{self as api, CoordinatorOp};

use super::Coordinator;
use super::answer::{record_id, serve};

/// Answers one request of operation `op` from `user` with body `payload`: decodes it as that
/// operation's request, runs the operation, and encodes its reply or failure. `ran` is set as
/// [`serve`] says; `submit_failed` is set when a submit's reply carries an error; `watch` is a
/// `changes` long poll's place in the watch pool (answered early when another user takes it).
///
/// `None` when nothing is to be answered (a body the operation's endpoint drops unanswered).
pub(crate) async fn dispatch(
    co: &Arc<Coordinator>,
    op: CoordinatorOp,
    user: &str,
    payload: &[u8],
    ran: &AtomicU8,
    submit_failed: &AtomicBool,
    watch: Option<&super::watchers::Watch>,
) -> Option<Bytes> {
    match op {
        CoordinatorOp::Submit => {
            serve::<api::Submit, _, _>(co, user, payload, ran, |req| async move {
                Some(Ok(submit::counted(co, user, req, submit_failed).await))
            })
            .await
        }
        CoordinatorOp::Complete => {
            serve::<api::Complete, _, _>(co, user, payload, ran, |q| async move {
                record_id(&q.request_id);
                Some(Ok(complete(co, &q, user).await))
            })
            .await
        }
        CoordinatorOp::Get => {
            serve::<api::Get, _, _>(co, user, payload, ran, |q| async move {
                record_id(&q.request_id);
                Some(Ok(get(co, &q).await))
            })
            .await
        }
        CoordinatorOp::Replay => {
            serve::<api::Replay, _, _>(co, user, payload, ran, |q| async move {
                record_id(&q.request_id);
                Some(replay(co, &q).await)
            })
            .await
        }
        CoordinatorOp::WhyNot => {
            serve::<api::WhyNot, _, _>(co, user, payload, ran, |q| async move {
                record_id(&q.request_id);
                Some(why_not(co, &q).await)
            })
            .await
        }
        CoordinatorOp::Clusters => {
            serve::<api::Clusters, _, _>(co, user, payload, ran, |_| async { Some(Ok(clusters(co))) }).await
        }
        CoordinatorOp::List => {
            serve::<api::List, _, _>(co, user, payload, ran, |_| async { Some(list(co, user).await) }).await
        }
        CoordinatorOp::Changes => {
            serve::<api::Changes, _, _>(co, user, payload, ran, |q| async move {
                Some(Ok(changes(co, user, &q, watch).await))
            })
            .await
        }
        CoordinatorOp::Count => {
            serve::<api::Count, _, _>(co, user, payload, ran, |_| async { Some(count(co, user).await) }).await
        }
        CoordinatorOp::WhatIf => {
            serve::<api::WhatIf, _, _>(
                co,
                user,
                payload,
                ran,
                |q| async move { Some(what_if(co, user, q).await) },
            )
            .await
        }
        CoordinatorOp::Drain => {
            serve::<api::Drain, _, _>(
                co,
                user,
                payload,
                ran,
                |q| async move { Some(drain(co, user, &q).await) },
            )
            .await
        }
        CoordinatorOp::Undrain => {
            serve::<api::Undrain, _, _>(
                co,
                user,
                payload,
                ran,
                |q| async move { Some(undrain(co, user, &q).await) },
            )
            .await
        }
        CoordinatorOp::Cluster => {
            serve::<api::Cluster, _, _>(co, user, payload, ran, |q| async move { Some(cluster(co, &q).await) }).await
        }
    }
}
