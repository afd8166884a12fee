//! The decisions list page (`/decisions`): a filter form (user, workflow, state, cluster as
//! query parameters, so a filtered list is a link), the matching decisions newest first, and
//! a few lines of script that keep the table live from `/events` (the page is complete
//! without it).

use maud::{Markup, html};

use super::{Kind, badge, state_badge, when};
use crate::ui::index::{Choices, Filter, MAX_ROWS, Slot};

/// The live-update script (served as `/live.js`): opens `/events` with the page's filters and the revision the page
/// was rendered at, replaces or prepends each `row` it gets, removes each `gone` one.
pub const SCRIPT: &str = r#"
(function () {
  var body = document.getElementById('rows');
  var live = document.getElementById('live');
  if (!body || !window.EventSource) return;
  var q = new URLSearchParams(location.search);
  q.set('since', body.getAttribute('data-since'));
  var es = new EventSource('/events?' + q.toString());
  es.onopen = function () { live.textContent = 'live'; live.className = 'badge b-ok'; body.setAttribute('data-live', 'open'); };
  es.onerror = function () { live.textContent = 'reconnecting'; live.className = 'badge b-warn'; };
  es.addEventListener('row', function (e) {
    var m = JSON.parse(e.data);
    var t = document.createElement('tbody');
    t.innerHTML = m.html;
    var row = t.firstElementChild;
    var old = document.getElementById('d-' + m.key);
    if (old) old.remove();
    body.insertBefore(row, body.firstChild);
    row.classList.add('fresh');
    var empty = document.getElementById('empty');
    if (empty) empty.remove();
  });
  es.addEventListener('gone', function (e) {
    var old = document.getElementById('d-' + JSON.parse(e.data).key);
    if (old) old.remove();
  });
})();
"#;

/// One table row for the decision under `key` (the list page and live updates render rows
/// with this one function). Its id is `d-<key>`.
pub fn row(key: &str, slot: &Slot) -> Markup {
    let href = format!("/decisions/{key}");
    html! {
        tr id=(format!("d-{key}")) {
            td.mono { a href=(href) { (key) } }
            @match slot {
                Slot::Live(r) => {
                    td { (fedvol_common::limits::printable(&r.summary.workflow)) }
                    td { (r.user) }
                    td {
                        (state_badge(r.summary.state))
                        @if let Some(f) = r.summary.failure { " " (super::failure_badge(f)) }
                        @if r.summary.completing_since_ms.is_some() { " " (badge("completing", Kind::Warn)) }
                        @if r.dry_run { " " (badge("dry run", Kind::Info)) }
                    }
                    td {
                        @match &r.summary.chosen_cluster {
                            Some(c) => strong { (c) },
                            None => span.muted { "none" },
                        }
                    }
                    td.num { (r.answered) "/" (r.asked) " answered · " (r.feasible) " feasible" }
                    td.nowrap { (when(r.summary.updated_ms)) }
                }
                Slot::Unreadable(e) => {
                    td colspan="6" { (badge("unreadable", Kind::Bad)) " " span.muted { (e) } }
                }
                Slot::Gone => {
                    td colspan="6" { (badge("removed", Kind::Muted)) }
                }
            }
        }
    }
}

fn text_input(label: &str, name: &str, value: Option<&str>, list: Option<&str>) -> Markup {
    html! {
        label {
            (label)
            input type="text" name=(name) value=(value.unwrap_or("")) list=[list] placeholder="any";
        }
    }
}

/// The list page's body.
pub fn body(
    filter: &Filter,
    rows: &[(String, Slot)],
    total: usize,
    since: u64,
    choices: &Choices,
    broken: Option<&str>,
) -> Markup {
    html! {
        h1 { "Decisions " span #live .badge.b-muted { "static" } }
        @if let Some(why) = broken {
            p.alert { "The decisions store is not being watched: " (why) ". The list may be out of date; retrying." }
        }
        form.filters method="get" action="/decisions" {
            (text_input("User", "user", filter.user(), Some("users")))
            (text_input("Workflow contains", "workflow", filter.workflow(), None))
            label {
                "State"
                select name="state" {
                    option value="" { "any" }
                    @for s in crate::render::words::STATES {
                        @let w = crate::render::words::state(s);
                        option value=(w) selected[filter.state() == Some(w)] { (w) }
                    }
                }
            }
            (text_input("Chosen cluster", "cluster", filter.cluster(), Some("clusters")))
            button type="submit" { "Filter" }
            @if filter.any() { a href="/decisions" { "clear" } }
            datalist #users { @for u in &choices.users { option value=(u) {} } }
            datalist #clusters { @for c in &choices.clusters { option value=(c) {} } }
        }
        table {
            thead { tr {
                th { "Request" } th { "Workflow" } th { "User" } th { "State" }
                th { "Cluster" } th.num { "Clusters" } th { "Updated (UTC)" }
            } }
            tbody #rows data-since=(since) {
                @if rows.is_empty() {
                    tr #empty { td colspan="7" .muted {
                        @if filter.any() { "No decision matches these filters." } @else { "No decision is stored yet." }
                    } }
                }
                @for (k, s) in rows { (row(k, s)) }
            }
        }
        p.note {
            @if total > MAX_ROWS { "Showing the newest " (MAX_ROWS) " of " (total) " matching decisions; narrow them with the filters. " }
            @else { (total) " decision(s). " }
            "New and changed decisions appear as they are stored (with JavaScript; otherwise reload)."
        }
        // A file of its own, so that the Content-Security-Policy allows scripts from this
        // origin only (`script-src 'self'`), never inline ones.
        script src="/live.js" {}
    }
}
