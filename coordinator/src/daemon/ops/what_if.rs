//! `what_if`: recorded decisions planned again under hypothetical changes, holding and
//! committing nothing (docs/design.md §2.7; `fedvol what-if`). The decisions are selected from
//! the index as `list` reads it and read from the bucket, each known cluster's agent is asked
//! once for its effective inventory, and [`fedvol_common::whatif::run`] plans every decision on
//! today's federation and the changed one with the funnel and the choice, on the blocking pool.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::Semaphore;

use std::collections::{BTreeMap, BTreeSet};

use fedvol_common::policy::Policy;
use fedvol_common::quota::Scope;
use fedvol_common::whatif::Recorded;
use fedvol_common::whatif::quota::{self, QuotaUse, Subject, Usage};
use fedvol_proto::agent::{self as agent, AgentOp, InventoryReply};
use fedvol_proto::coordinator::{
    DEFAULT_SINCE_MS, DEFAULT_STATES, DecisionSummary, MAX_WHAT_IF_DECISIONS, WhatIfQuery, WhatIfReply,
};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::rpc::call;
use fedvol_proto::{Code, Failure, NoArgs, now_ms};

use crate::daemon::Coordinator;
use crate::daemon::what_if::{federations, live, project_of, read_record, recorded};

/// One what-if at a time per coordinator: it takes every core for its planning.
static ONE: Semaphore = Semaphore::const_new(1);

/// Records read from the bucket at once.
const READS_AT_ONCE: usize = 32;

/// How long before the request's deadline planning stops, so that the `timed_out` answer
/// arrives while the caller still waits, ms.
const ANSWER_MARGIN_MS: u64 = 300;

/// The longest one what-if plans, ms, whatever deadline its request gives: it holds this
/// coordinator's cores meanwhile (5,000 decisions over 16 clusters of 100 hosts: about 4 s).
const MAX_PLANNING_MS: u64 = 120_000;

/// The least an agent's `inventory` answer is waited for, ms (as `cluster` waits).
const INVENTORY_WAIT_MS: u64 = 5000;

/// True when summary `d` passes `q`'s filters other than the project (read from the record):
/// state, age, user, workflow.
fn selected(q: &WhatIfQuery, d: &DecisionSummary, now: u64) -> bool {
    let states: &[_] = if q.states.is_empty() {
        &DEFAULT_STATES
    } else {
        &q.states
    };
    let since = q.since_ms.unwrap_or(DEFAULT_SINCE_MS);
    states.contains(&d.state)
        && (since == 0 || d.updated_ms >= now.saturating_sub(since))
        && q.user.as_ref().is_none_or(|u| *u == d.user)
        && q.workflow
            .as_ref()
            .is_none_or(|w| d.workflow.to_lowercase().contains(&w.to_lowercase()))
}

/// What [`decode`] gives: the selected decisions, the live use the records add up to (with a
/// policy to try), and how many records could not be read.
struct Decoded {
    recs: Vec<Recorded>,
    usage: Usage,
    bad: u64,
}

/// The records `raws` (request id, bytes, selected) read for a what-if ([`read_record`]) on
/// `threads` threads: the selected ones (those of `project` only when one is given, in their
/// order) as [`Recorded`]; with `count_use`, every live one's use ([`Usage`]). Records that
/// cannot be read are counted (each logged).
fn decode(raws: Vec<(String, bytes::Bytes, bool)>, project: Option<&str>, threads: usize, count_use: bool) -> Decoded {
    let chunk = raws.len().div_ceil(threads.max(1)).max(1);
    let parts: Vec<(Vec<Recorded>, Usage, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = raws
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut out = Vec::with_capacity(part.len());
                    let mut usage = Usage::default();
                    let mut bad = 0;
                    for (id, bytes, chosen) in part {
                        match read_record(bytes) {
                            Ok(stored) => {
                                if count_use && live(&stored) && !stored.dry_run {
                                    let r = &stored.request;
                                    usage.add(project_of(&stored), &Subject::of(&r.workflow, &r.user, &r.groups, true));
                                }
                                if *chosen && project.is_none_or(|p| p == project_of(&stored)) {
                                    out.push(recorded(id, &stored));
                                }
                            }
                            Err(e) => {
                                bad += 1;
                                tracing::warn!(request_id = %id, error = %e, "what-if: a recorded decision could not be read; left out");
                            }
                        }
                    }
                    (out, usage, bad)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| (Vec::new(), Usage::default(), 0)))
            .collect()
    });
    let mut d = Decoded {
        recs: Vec::with_capacity(raws.len()),
        usage: Usage::default(),
        bad: 0,
    };
    for (r, u, b) in parts {
        d.recs.extend(r);
        for (k, v) in u.0 {
            let e = d.usage.0.entry(k).or_default();
            *e = e.plus(&v);
        }
        d.bad += b;
    }
    d
}

/// Sets each decision's quota refusals under `today`'s policy and the one `tried`, against
/// `usage`; returns each quota's row ([`uses`]).
fn judge_quotas(recs: &mut [Recorded], usage: &Usage, today: &Policy, tried: &Policy) -> Vec<QuotaUse> {
    // The quotas a decision's checks exceed, each once.
    let over = |checks: &[fedvol_common::quota::QuotaCheck]| -> BTreeSet<(Scope, String)> {
        checks
            .iter()
            .filter(|c| c.exceeded)
            .map(|c| (c.scope, c.name.clone()))
            .collect()
    };
    let mut refused: BTreeMap<(Scope, String), (u64, u64)> = BTreeMap::new();
    for rec in recs.iter_mut() {
        let r = &rec.request;
        let s = Subject::of(&r.workflow, &r.user, &r.groups, rec.own.is_some());
        let now = quota::checks(today, usage, &r.workflow, &s);
        let then = quota::checks(tried, usage, &r.workflow, &s);
        for k in over(&now) {
            refused.entry(k).or_default().0 += 1;
        }
        for k in over(&then) {
            refused.entry(k).or_default().1 += 1;
        }
        rec.quota_today = quota::refusal(&now);
        rec.quota_tried = quota::refusal(&then);
    }
    quota::uses(today, tried, usage, &refused)
}

/// `f`'s output and how long it took, ms.
async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, f64) {
    let t = Instant::now();
    let r = f.await;
    (r, t.elapsed().as_secs_f64() * 1000.0)
}

/// Each known cluster (in the order a plan asks them) with its agent's `inventory` answer,
/// or why there is none.
async fn inventories(co: &Coordinator, until: u64) -> Vec<(String, Result<InventoryReply, String>)> {
    let names = co.registry().names();
    let wait = Duration::from_millis(
        co.cfg
            .deadline_ms
            .max(INVENTORY_WAIT_MS)
            .min(until.saturating_sub(now_ms()).max(1)),
    );
    let ask = |name: String| async move {
        let subject = co.subjects.cluster(&name, AgentOp::Inventory);
        let answer = match call::<agent::Inventory>(&co.client, &subject, &NoArgs {}, wait, "coordinator").await {
            Ok(Ok(r)) if r.cluster == name => Ok(r),
            Ok(Ok(r)) => Err(format!("answered in the name of `{}`", r.cluster)),
            Ok(Err(f)) => Err(format!("{} ({})", f.error.message, f.error.code)),
            Err(e) => Err(e.to_string()),
        };
        (name, answer)
    };
    futures::future::join_all(names.into_iter().map(ask)).await
}

/// `what_if` of `user` (module docs).
///
/// Errors: `overloaded` (another what-if runs here, or the user's read budget), `bad_request`
/// (more than [`MAX_WHAT_IF_DECISIONS`] decisions selected; a change naming an unknown
/// cluster), `store_unavailable`, `timed_out` (planning did not end before the deadline, or
/// within [`MAX_PLANNING_MS`]).
pub async fn what_if(co: &Coordinator, user: &str, q: WhatIfQuery) -> Result<WhatIfReply, Failure> {
    let Ok(_one) = ONE.try_acquire() else {
        return Err(Failure::new(
            Code::Overloaded,
            "another what-if is running on this coordinator: ask again when it has answered",
        ));
    };
    let started = Instant::now();
    super::list::wait_for_budget(co, user).await?;
    let now = now_ms();
    let tried = q.changes.policy.clone();
    // The selected decisions; with a policy to try, also every live one (whose use its quotas
    // count), read once.
    let ids: Vec<(String, bool)> = super::list::list_all(co)
        .await?
        .decisions
        .into_iter()
        .filter_map(|d| {
            let chosen = selected(&q, &d, now);
            let live = tried.is_some() && matches!(d.state, DecisionState::Planned | DecisionState::Committed);
            (chosen || live).then_some((d.request_id, chosen))
        })
        .collect();
    let chosen = ids.iter().filter(|(_, c)| *c).count();
    if chosen > MAX_WHAT_IF_DECISIONS || ids.len() > 2 * MAX_WHAT_IF_DECISIONS {
        return Err(Failure::new(
            Code::BadRequest,
            format!(
                "{chosen} recorded decisions match ({} to read with the live ones a policy's quotas count); a what-if plans at most {MAX_WHAT_IF_DECISIONS}: narrow it (since, user, project, workflow, state)",
                ids.len()
            ),
        ));
    }
    let reads = futures::stream::iter(ids)
        .map(|(id, chosen)| async move {
            let r = co.store.get_raw(&id).await;
            (id, r, chosen)
        })
        .buffered(READS_AT_ONCE)
        .collect::<Vec<_>>();
    let selected_ms = started.elapsed().as_secs_f64() * 1000.0;
    let ((reads, records_ms), (asked, inventories_ms)) =
        tokio::join!(timed(reads), timed(inventories(co, q.deadline_ms)));
    tracing::info!(
        decisions = reads.len(),
        selected_ms,
        records_ms,
        inventories_ms,
        "what-if: recorded decisions and inventories read"
    );
    let mut unreadable = 0u64;
    let mut raws = Vec::with_capacity(reads.len());
    for (id, r, chosen) in reads {
        match r {
            Ok(Some((bytes, _))) => raws.push((id, bytes, chosen)),
            // Removed since it was listed (retention): not recorded any more.
            Ok(None) => {}
            Err(e) => {
                unreadable += 1;
                tracing::warn!(request_id = %id, error = %e, "what-if: a recorded decision could not be read; left out");
            }
        }
    }
    let (fed, clusters, mut changes) =
        federations(&asked, &q.changes, &co.drains.all()).map_err(|e| Failure::new(Code::BadRequest, e.to_string()))?;
    if let Some(p) = &tried {
        changes.push(format!(
            "policy tried: {} quotas (today: {})",
            p.quotas.len(),
            co.cfg.policy.quotas.len()
        ));
    }
    let read_ms = started.elapsed().as_secs_f64() * 1000.0;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_at = q
        .deadline_ms
        .saturating_sub(ANSWER_MARGIN_MS)
        .min(now_ms() + MAX_PLANNING_MS);
    let timer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(stop_at.saturating_sub(now_ms()))).await;
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        })
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let planning = Instant::now();
    let project = q.project.clone();
    let today_policy = co.cfg.policy.clone();
    let report = tokio::task::spawn_blocking({
        let stop = stop.clone();
        move || {
            let mut d = decode(raws, project.as_deref(), threads, tried.is_some());
            let quotas = tried
                .as_ref()
                .map(|p| judge_quotas(&mut d.recs, &d.usage, &today_policy, p))
                .unwrap_or_default();
            let report = fedvol_common::whatif::run(&fed, &d.recs, threads, &stop);
            (report, d.recs.len() as u64, d.bad, quotas)
        }
    })
    .await
    .map(|(report, selected, bad, quotas)| {
        unreadable += bad;
        (report, selected, quotas)
    });
    timer.abort();
    let planning_ms = planning.elapsed().as_secs_f64() * 1000.0;
    let selected = report.as_ref().map_or(0, |(_, n, _)| *n);
    let (report, quotas) = match report {
        Ok((r, _, quotas)) => (Ok(r), quotas),
        Err(e) => (Err(e), Vec::new()),
    };
    let report = match report {
        Ok(Some(r)) => r,
        Ok(None) => {
            return Err(Failure::new(
                Code::TimedOut,
                format!(
                    "the what-if of {selected} decisions did not end before its deadline ({:.0} ms reading, {planning_ms:.0} ms planning): narrow it or wait longer (--timeout-ms)",
                    read_ms
                ),
            ));
        }
        Err(e) => return Err(Failure::new(Code::Internal, format!("what-if planning failed: {e}"))),
    };
    tracing::info!(
        selected,
        changed = report.changed,
        drift = report.drift,
        read_ms,
        planning_ms,
        "what-if planned"
    );
    let mut reply = WhatIfReply {
        changes,
        clusters,
        selected,
        unreadable,
        planning_ms,
        report,
        cut: None,
        quotas,
    };
    let cut = reply.fit(co.client.max_payload().saturating_sub(agent::INVENTORY_ENVELOPE_BYTES));
    tracing::info!(
        cut,
        total_ms = started.elapsed().as_secs_f64() * 1000.0,
        "what-if answered"
    );
    co.reads.take(user, serde_json::to_vec(&reply).map_or(0, |v| v.len()));
    Ok(reply)
}
