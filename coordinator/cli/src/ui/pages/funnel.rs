//! The funnel as a picture: for one cluster, each stage the funnel ran (per volume or job) as a
//! horizontal bar whose length is the candidates it considered (relative to the stage that
//! considered most in that cluster) and whose green part is those that passed; the counts
//! beside it; and the rejected candidates with every reason behind a `<details>` (listed up
//! to the request's trace limit, the rest counted exactly per reason).

use fedvol_common::decision::{ClusterDecision, StageTrace};
use fedvol_common::explain::{candidate_noun, code_words};
use maud::{Markup, html};

use super::{Kind, badge};
use crate::render::words;

/// Percent of `part` in `whole`, 0 when `whole` is 0, with one decimal (a CSS length).
fn pct(part: usize, whole: usize) -> String {
    if whole == 0 {
        "0".into()
    } else {
        format!("{:.1}", part as f64 * 100.0 / whole as f64)
    }
}

/// One stage's bar: track length ∝ considered / `widest`; green = passed, red = rejected.
fn bar(t: &StageTrace, widest: usize) -> Markup {
    let rejected = t.considered.saturating_sub(t.passed);
    html! {
        div.bar style=(format!("width:{}%", pct(t.considered, widest)))
            title=(format!("{} considered, {} passed, {} rejected", t.considered, t.passed, rejected)) {
            div.pass style=(format!("width:{}%", pct(t.passed.min(t.considered), t.considered))) {}
            @if rejected > 0 {
                div.rej style=(format!("width:{}%", pct(rejected, t.considered))) {}
            }
        }
    }
}

/// Reason counts as `2 permission denied, 1 not READY`, most frequent first.
fn counts(t: &StageTrace) -> String {
    let mut parts: Vec<(&String, &usize)> = t.reason_counts.iter().collect();
    parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    parts
        .iter()
        .map(|(c, n)| format!("{n} {}", code_words(c)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The row under a stage that rejected candidates: the count per reason, and on demand every
/// listed candidate with all its reasons.
fn rejected(t: &StageTrace) -> Markup {
    let n = t.considered.saturating_sub(t.passed);
    html! {
        @if n > 0 {
            tr.rejected data-rejected-by=(t.stage) {
                td {}
                td colspan="3" {
                    details {
                        summary {
                            "✗ " (n) " rejected"
                            @let c = counts(t);
                            @if !c.is_empty() { ": " (c) }
                        }
                        ul {
                            @for r in &t.rejected {
                                li {
                                    span.mono { (r.candidate) } ": "
                                    (crate::render::table::messages(&r.reasons))
                                }
                            }
                            @if t.omitted > 0 {
                                li.muted { "… and " (t.omitted) " more (submit with a higher --trace-limit to list them)" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The card of cluster `name`: its status, then its funnel stage by stage. A summary links to
/// the page asking its agent for the whole answer (`?whole=<name>`); `asked`: that was asked,
/// so a summary still shown says the agent keeps the whole answer no longer.
pub fn cluster(name: &str, c: &ClusterDecision, chosen: bool, asked: bool) -> Markup {
    let widest = c.trace.iter().map(|t| t.considered).max().unwrap_or(0);
    html! {
        div id=(format!("cluster-{name}")) class=(if chosen { "card chosen" } else { "card" }) data-cluster=(name) {
            h3 {
                (name) " "
                @if chosen { (badge("chosen", Kind::Ok)) " " }
                (status_badge(c.status))
                " "
                @if c.feasible { (badge("feasible", Kind::Ok)) } @else { (badge("not feasible", Kind::Bad)) }
            }
            @if let Some(e) = &c.error {
                p.alert { (e.message) " (" (e.code) ")" }
            }
            @if c.summarized {
                p.muted {
                    "Stored as a summary: this cluster was neither chosen nor a runner-up, so only the stages that rejected candidates are kept, with counts and reasons; "
                    code { "fedvol why-not" } " names the candidates, asking the cluster."
                }
                @if asked {
                    p.alert.whole-gone {
                        "Its agent keeps no whole answer for this request any more (it keeps them 10 minutes after the plan, and none across a restart)."
                    }
                } @else {
                    p { a.whole href=(format!("?whole={name}#cluster-{name}")) { "Ask the cluster for its whole answer" } }
                }
            }
            @if c.trace.is_empty() && c.summarized {
                p.muted { "No stage rejected a candidate." }
            } @else if c.trace.is_empty() {
                p.muted { "No funnel trace: the cluster did not answer with a plan." }
            } @else {
                table.funnel {
                    thead { tr {
                        th { "For" } th { "Stage" } th.barcell { "Considered, passed" } th.num { "Passed" }
                    } }
                    tbody {
                        @for t in &c.trace {
                            tr.stage data-stage=(t.stage) {
                                td.mono { (t.subject) }
                                td.stage.mono { (t.stage) }
                                td.barcell { (bar(t, widest)) }
                                td.count title=(candidate_noun(&t.stage)) { (t.passed) "/" (t.considered) }
                            }
                            (rejected(t))
                        }
                    }
                }
            }
        }
    }
}

/// The badge of a cluster's answer status.
pub fn status_badge(s: fedvol_common::decision::ClusterStatus) -> Markup {
    use fedvol_common::decision::ClusterStatus as S;
    let kind = match s {
        S::Answered => Kind::Ok,
        S::TimedOut => Kind::Warn,
        S::Unreachable | S::Error => Kind::Bad,
    };
    badge(words::status(s), kind)
}

#[cfg(test)]
mod tests {
    use super::pct;

    #[test]
    fn percentages_never_divide_by_zero() {
        assert_eq!(pct(0, 0), "0");
        assert_eq!(pct(1, 4), "25.0");
        assert_eq!(pct(2, 3), "66.7");
    }
}
