//! Live updates of the decisions list (`/events`): Server-Sent Events fed by the index that
//! the decisions bucket's watch keeps. Each change after the revision the browser already has
//! (`since`, or the `Last-Event-ID` of a reconnecting browser) is sent as an event whose id is
//! its bucket revision: `row` (`{"key", "html"}`, the row rendered by the list page's own
//! function) when the decision passes the page's filters, `gone` (`{"key"}`) when it does not
//! (any more). One watch serves every browser; a browser costs no JetStream consumer.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use super::index::{Filter, Index};
use super::pages::list;

/// The events after revision `since` that pass `filter`, then every later change, forever.
pub fn stream(index: Arc<Index>, filter: Filter, since: u64) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = index.subscribe();
    let state = (index, filter, since, rx, VecDeque::<Event>::new());
    let s = futures::stream::unfold(state, |(index, filter, mut last, mut rx, mut queue)| async move {
        loop {
            if let Some(e) = queue.pop_front() {
                return Some((Ok(e), (index, filter, last, rx, queue)));
            }
            rx.borrow_and_update();
            for (revision, key, slot) in index.changes_after(last) {
                last = last.max(revision);
                let (kind, data) = if filter.matches(&slot) {
                    let html = fedvol_common::limits::printable_lines(&list::row(&key, &slot).into_string());
                    ("row", serde_json::json!({ "key": key, "html": html }))
                } else {
                    ("gone", serde_json::json!({ "key": key }))
                };
                tracing::debug!(key = %key, revision, kind, "live update sent");
                queue.push_back(
                    Event::default()
                        .event(kind)
                        .id(revision.to_string())
                        .data(data.to_string()),
                );
            }
            if queue.is_empty() && rx.changed().await.is_err() {
                return None;
            }
        }
    });
    Sse::new(s).keep_alive(KeepAlive::default())
}
