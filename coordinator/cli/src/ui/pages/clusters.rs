//! The clusters page (`/clusters`): what the coordinators know of each cluster (the
//! coordinator's `clusters` operation, as `fedvol clusters` prints it): alive or suspect, load,
//! holds, inventory version, last heartbeat, replicas, and an operator's drain (who, when, why).

use fedvol_proto::coordinator::ClustersReply;
use maud::{Markup, html};

use super::{Kind, badge, when};

/// The clusters page's body.
pub fn body(r: &ClustersReply) -> Markup {
    let now = fedvol_proto::now_ms();
    html! {
        h1 { "Clusters" }
        @if r.clusters.is_empty() {
            p.muted { "No cluster is known to the coordinators yet (none has sent a heartbeat)." }
        } @else {
            table #cluster-list {
                thead { tr {
                    th { "Cluster" } th { "State" } th { "Load" } th.num { "Holds" }
                    th { "Inventory version" } th { "Last seen (UTC)" } th { "Replicas" }
                } }
                tbody {
                    @for c in &r.clusters {
                        tr data-cluster=(c.name) {
                            td { strong { (c.name) } }
                            td {
                                @if !c.alive { (badge("not alive", Kind::Bad)) }
                                @else if c.suspect { (badge("suspect", Kind::Warn)) }
                                @else if c.restoring { (badge("restoring", Kind::Warn)) }
                                @else { (badge("alive", Kind::Ok)) }
                                @if c.drain.is_some() {
                                    " " (badge("drained", Kind::Warn))
                                }
                            }
                            td.load {
                                div style="display:flex;gap:8px;align-items:center" {
                                    div.bar style="width:140px" title=(format!("load {:.2}", c.load)) {
                                        div.pass style=(format!("width:{:.1}%", (c.load.clamp(0.0, 1.0)) * 100.0)) {}
                                    }
                                    span.mono { (format!("{:.2}", c.load)) }
                                }
                            }
                            td.num { (c.holds) }
                            td.mono title=(c.inventory_version) { (short(&c.inventory_version)) }
                            td.nowrap {
                                (when(c.last_seen_ms)) " "
                                span.muted { "(" (crate::render::words::ago(c.last_seen_ms, now)) ")" }
                            }
                            td.mono.nowrap {
                                @if c.instances.is_empty() { span.muted { "-" } }
                                @else { (c.instances.len()) ": " (c.instances.join(", ")) }
                            }
                        }
                    }
                }
            }
            @if r.clusters.iter().any(|c| c.drain.is_some()) || !r.drained_unknown.is_empty() {
                h2 { "Drained" }
                table #drained-list {
                    thead { tr { th { "Cluster" } th { "By" } th { "Since (UTC)" } th { "Reason" } } }
                    tbody {
                        @for (name, d, known) in r.clusters.iter().filter_map(|c| c.drain.as_ref().map(|d| (&c.name, d, true)))
                            .chain(r.drained_unknown.iter().map(|d| (&d.cluster, &d.drain, false))) {
                            tr data-drained=(name) {
                                td { strong { (name) } @if !known { " " span.muted { "(not known yet)" } } }
                                td { (d.by) }
                                td.nowrap {
                                    (when(d.at_ms)) " "
                                    span.muted { "(" (crate::render::words::ago(d.at_ms, now)) ")" }
                                }
                                td { (d.reason) }
                            }
                        }
                    }
                }
            }
            p.note {
                "Drained: an operator took the cluster out of the choice for new work; it still answers plans, and what is committed there runs on. "
                "Alive: heard from within three heartbeat intervals. Suspect: two plans in a row timed out, until the next heartbeat. "
                "Load is the share of the cluster's capacity in use (0 to 1). The page shows the coordinator's view when it was loaded."
            }
        }
    }
}

/// An inventory version shortened to 16 characters (the whole one is in the cell's tooltip).
fn short(v: &str) -> String {
    match v.char_indices().nth(16) {
        Some((i, _)) => format!("{}…", &v[..i]),
        None => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_versions_keep_their_start() {
        assert_eq!(super::short("abc"), "abc");
        assert_eq!(super::short(&"x".repeat(20)), format!("{}…", "x".repeat(16)));
    }
}
