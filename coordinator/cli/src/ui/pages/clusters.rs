//! The clusters page (`/clusters`): what the coordinators know of each cluster (the
//! coordinator's `clusters` operation, as `fedvol clusters` prints it): alive or suspect, load,
//! holds, inventory version, last heartbeat, replicas.

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
            p.note {
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
