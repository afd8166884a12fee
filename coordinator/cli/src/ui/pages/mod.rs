//! The web view's HTML, server-rendered with `maud` (every value escaped; the only raw text
//! is this module's own style sheet and script): the page frame ([`page`]) and one module per
//! page. Everything a page needs is inline: no external asset, no CDN, so it works offline.

pub mod clusters;
pub mod decision;
pub mod funnel;
pub mod list;
pub mod what_if;

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// Which navigation entry is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// The decisions list and decision pages.
    Decisions,
    /// The clusters page.
    Clusters,
    /// The what-if page.
    WhatIf,
}

/// Who the view reads as, shown in the header.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// The `-u` user the coordinator requests are made as.
    pub user: String,
}

const STYLE: &str = r#"
:root{--fg:#1d2430;--muted:#5c6675;--line:#dde2ea;--bg:#f6f7f9;--card:#fff;--ok:#2f8a4c;--okbg:#e3f3e8;
--bad:#b8322f;--badbg:#fbe6e5;--warn:#9a6700;--warnbg:#fff4d6;--info:#1f5fae;--infobg:#e4eefb;--bar:#e9edf3}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header{background:#1d2430;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:baseline}
header .brand{font-weight:700;font-size:16px;letter-spacing:.3px}
header nav a{color:#c9d3e3;text-decoration:none;margin-right:16px}
header nav a.on{color:#fff;border-bottom:2px solid #7fb2ff;padding-bottom:2px}
header .who{margin-left:auto;color:#9aa6b8;font-size:12px}
main{padding:18px 24px 40px;max-width:1400px}
h1{font-size:20px;margin:4px 0 12px}
h2{font-size:16px;margin:26px 0 10px}
h3{font-size:14px;margin:0 0 8px}
a{color:var(--info)}
table{border-collapse:collapse;background:var(--card);border:1px solid var(--line);width:100%}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:baseline}
th{font-size:12px;text-transform:uppercase;letter-spacing:.4px;color:var(--muted);background:#fafbfc}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12.5px}
.muted{color:var(--muted)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap}
.b-ok{background:var(--okbg);color:var(--ok)}.b-bad{background:var(--badbg);color:var(--bad)}
.b-warn{background:var(--warnbg);color:var(--warn)}.b-info{background:var(--infobg);color:var(--info)}
.b-muted{background:#eceff3;color:var(--muted)}
form.filters{display:flex;gap:10px;flex-wrap:wrap;align-items:end;margin:0 0 14px}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:var(--muted);gap:2px}
form.filters input,form.filters select{font:inherit;padding:4px 6px;border:1px solid var(--line);border-radius:4px;min-width:140px;height:30px;background:#fff}
button{font:inherit;padding:5px 14px;border:1px solid #2d6fd0;background:#2d6fd0;color:#fff;border-radius:4px;cursor:pointer}
.note{font-size:12px;color:var(--muted);margin:8px 0}
.alert{background:var(--badbg);color:var(--bad);padding:8px 12px;border-radius:4px;margin:0 0 12px}
dl.facts{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:4px 16px;background:var(--card);border:1px solid var(--line);padding:10px 14px;margin:0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:14px}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:12px 14px}
.card.chosen{border-color:var(--ok);box-shadow:0 0 0 1px var(--ok) inset}
.funnel td{border-bottom:1px dashed var(--line);padding:4px 6px}
.funnel .stage{white-space:nowrap}
.bar{position:relative;height:14px;background:var(--bar);border-radius:3px;min-width:2px}
.bar .pass{position:absolute;left:0;top:0;bottom:0;background:var(--ok);border-radius:3px 0 0 3px}
.bar .rej{position:absolute;top:0;bottom:0;right:0;background:#e6a4a2;border-radius:0 3px 3px 0}
.barcell{width:45%}
.card{overflow-x:auto}
.nowrap{white-space:nowrap}
.funnel tr.rejected td{border-bottom:1px dashed var(--line);padding-top:0}
.funnel tr.stage:has(+ tr.rejected) td{border-bottom:none}
details summary{cursor:pointer;color:var(--bad);font-size:12.5px}
details.why{font-size:12.5px;color:var(--muted)}details.why summary{color:var(--info)}
td.count{white-space:nowrap;text-align:right;font-variant-numeric:tabular-nums}
details ul{margin:4px 0 6px 0;padding-left:18px;font-size:12.5px}
ol.steps{background:var(--card);border:1px solid var(--line);margin:0;padding:10px 14px 10px 34px}
ol.steps li{margin:4px 0}
ul.plain{list-style:none;margin:0;padding:0}
tr.fresh{animation:fresh 2s ease-out}
@keyframes fresh{from{background:#fff4c2}to{background:transparent}}
.legend span{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 4px 0 12px;vertical-align:-1px}
footer{color:var(--muted);font-size:12px;padding:0 24px 24px}
"#;

/// A whole page: `title`, the navigation with `nav` current, `body`.
pub fn page(title: &str, nav: Nav, viewer: &Viewer, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · fedvol" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    span.brand { "fedvol" }
                    nav {
                        a href="/decisions" class=[(nav == Nav::Decisions).then_some("on")] { "Decisions" }
                        a href="/clusters" class=[(nav == Nav::Clusters).then_some("on")] { "Clusters" }
                        a href="/what-if" class=[(nav == Nav::WhatIf).then_some("on")] { "What if" }
                    }
                    span.who { "read-only · as " (viewer.user) }
                }
                main { (body) }
                footer {
                    "Read-only view. It shows every decision in the decisions bucket, as "
                    code { "fedvol decisions" } " does, with the NATS credentials it was started with."
                }
            }
        }
    }
}

/// A small state badge: `word` with a colour for its kind.
pub fn badge(word: &str, kind: Kind) -> Markup {
    let class = match kind {
        Kind::Ok => "badge b-ok",
        Kind::Bad => "badge b-bad",
        Kind::Warn => "badge b-warn",
        Kind::Info => "badge b-info",
        Kind::Muted => "badge b-muted",
    };
    html! { span class=(class) { (word) } }
}

/// The colour of a badge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Good (committed, answered, alive).
    Ok,
    /// Bad (failed, unreachable).
    Bad,
    /// Needs a look (timed out, suspect, planned).
    Warn,
    /// Neutral information (completed, dry run).
    Info,
    /// Nothing to say.
    Muted,
}

/// The badge of a decision's lifecycle state.
pub fn state_badge(s: fedvol_proto::decisions::DecisionState) -> Markup {
    use fedvol_proto::decisions::DecisionState as S;
    let kind = match s {
        S::Committed => Kind::Ok,
        S::Completed => Kind::Info,
        S::Planned => Kind::Warn,
        S::Failed => Kind::Bad,
        S::Queued => Kind::Warn,
        S::Cancelled => Kind::Muted,
    };
    badge(crate::render::words::state(s), kind)
}

/// The badge saying what failed, beside a `failed` state's ([`crate::render::words::failure`]):
/// a retryable outcome (clusters did not answer) is a warning, the others are failures.
pub fn failure_badge(f: fedvol_proto::decisions::FailureKind) -> Markup {
    use fedvol_proto::decisions::FailureKind as F;
    let kind = match f {
        F::Unavailable => Kind::Warn,
        F::NothingFits | F::Refused | F::CommitFailed | F::JobFailed => Kind::Bad,
    };
    badge(crate::render::words::failure(f), kind)
}

/// A time as UTC text, with how long ago it was (at render) in its tooltip.
pub fn when(ms: u64) -> Markup {
    let now = fedvol_proto::now_ms();
    html! {
        span title=(crate::render::words::ago(ms, now)) { (crate::render::words::utc(ms)) }
    }
}

/// A page telling what went wrong (the coordinator did not answer, no such decision...).
pub fn error_body(heading: &str, message: &str) -> Markup {
    html! {
        h1 { (heading) }
        p.alert { (message) }
        p { a href="/decisions" { "Back to the decisions" } }
    }
}
