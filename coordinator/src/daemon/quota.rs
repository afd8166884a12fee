//! Federation-wide quota usage, kept in the decision bucket so that it survives
//! coordinator restarts and is exact when several coordinators admit at once.
//!
//! Each quota that applies to some request has a **ledger**: the key
//! [`super::policy::Applicable::key`] (`fedvol/quota/<scope>/<name>`, a key no request id can
//! be) holding every live request counted against it, by request id, with what it counts
//! ([`Amounts::of`] its workflow). A request is **admitted** by adding its entry to each of its
//! ledgers, one after the other in key order, each by compare-and-set on the ledger's revision:
//! the check (`used + requested <= limit` for every limited resource) and the write are one
//! atomic step per ledger, so two coordinators racing on one quota can never both take its last
//! room. A request refused by one ledger is taken out of the ledgers it was already added to.
//! (A request counted in one ledger and refused by the next may, for that moment, make a third
//! request see less room than there is: a refusal that errs towards the limit, never past it.)
//!
//! An entry leaves its ledgers when the request's decision ends without a live commit (failed,
//! queued to wait) or is completed ([`release`]). Entries left by a coordinator that died
//! between admitting and storing its outcome are dropped by the reconciler ([`sweep`]): an
//! entry older than the commit phase's bound whose decision is absent, failed, completed,
//! queued or a dry run.

use std::collections::BTreeMap;

use fedvol_common::quota::{Amounts, QuotaCheck, check};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::now_ms;

use super::Coordinator;
use super::policy::Applicable;
use super::store::{StoreError, Write};

/// The prefix of every ledger key.
pub const LEDGER_PREFIX: &str = "fedvol/quota/";

/// One ledger's value.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Ledger {
    /// Live requests by request id.
    #[serde(default)]
    entries: BTreeMap<String, Entry>,
}

/// One request counted in a ledger.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Entry {
    /// When it was admitted, ms since the epoch.
    at_ms: u64,
    /// What it counts.
    amounts: Amounts,
}

impl Ledger {
    /// The sum of every entry but `except`'s.
    fn used(&self, except: &str) -> Amounts {
        self.entries
            .iter()
            .filter(|(id, _)| id.as_str() != except)
            .fold(Amounts::default(), |acc, (_, e)| acc.plus(&e.amounts))
    }
}

/// How admission went.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Every applicable quota's checks, in the order of the configuration.
    pub checks: Vec<QuotaCheck>,
    /// True when a check is exceeded (then the request is counted nowhere).
    pub exceeded: bool,
}

/// Reads a ledger and its revision (`None` = no ledger yet).
async fn read(co: &Coordinator, key: &str) -> Result<(Ledger, Option<u64>), StoreError> {
    Ok(co
        .store
        .get_json(key)
        .await?
        .map_or((Ledger::default(), None), |(l, rev)| (l, Some(rev))))
}

/// Writes a ledger over revision `rev` (compare-and-set).
async fn write(co: &Coordinator, key: &str, ledger: &Ledger, rev: Option<u64>) -> Result<Write, StoreError> {
    co.store.put_json(key, ledger, rev).await
}

/// Checks `requested` against every applicable quota without counting it (a dry run).
///
/// Errors: a ledger could not be read.
pub async fn peek(
    co: &Coordinator,
    request_id: &str,
    applicable: &[Applicable<'_>],
    requested: &Amounts,
) -> Result<Verdict, StoreError> {
    let mut checks = Vec::new();
    for a in applicable {
        let (ledger, _) = read(co, &a.key()).await?;
        checks.extend(check(
            a.rule.scope,
            &a.name,
            &a.rule.limits,
            &ledger.used(request_id),
            requested,
        ));
    }
    let exceeded = checks.iter().any(|c| c.exceeded);
    Ok(Verdict { checks, exceeded })
}

/// Admits request `request_id` asking `requested` under every applicable quota (module docs):
/// counts it in each ledger, or in none when one is exceeded. Idempotent: a request already
/// counted is checked against the others' use and counted once.
///
/// Errors: a ledger could not be read or written (the request is then counted nowhere, as far
/// as this coordinator could undo it).
pub async fn admit(
    co: &Coordinator,
    request_id: &str,
    applicable: &[Applicable<'_>],
    requested: &Amounts,
) -> Result<Verdict, StoreError> {
    // A request over a quota as things stand is refused without being counted anywhere, so
    // that it never makes another request see less room than there is.
    let first = peek(co, request_id, applicable, requested).await?;
    if first.exceeded {
        return Ok(first);
    }
    let mut order: Vec<usize> = (0..applicable.len()).collect();
    order.sort_by_key(|&i| applicable[i].key());
    order.dedup_by_key(|i| applicable[*i].key());
    let mut checks: Vec<Option<Vec<QuotaCheck>>> = vec![None; applicable.len()];
    let mut counted: Vec<String> = Vec::new();
    let mut exceeded = false;
    for &i in &order {
        let a = &applicable[i];
        let key = a.key();
        let result = loop {
            let (mut ledger, rev) = match read(co, &key).await {
                Ok(x) => x,
                Err(e) => break Err(e),
            };
            let c = check(
                a.rule.scope,
                &a.name,
                &a.rule.limits,
                &ledger.used(request_id),
                requested,
            );
            if exceeded || c.iter().any(|c| c.exceeded) {
                break Ok((c, false));
            }
            if ledger.entries.contains_key(request_id) {
                break Ok((c, true));
            }
            ledger.entries.insert(
                request_id.to_string(),
                Entry {
                    at_ms: now_ms(),
                    amounts: *requested,
                },
            );
            match write(co, &key, &ledger, rev).await {
                Ok(Write::Done(_)) => break Ok((c, true)),
                Ok(Write::Conflict) => continue,
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok((c, added)) => {
                exceeded |= c.iter().any(|c| c.exceeded);
                if added && !exceeded {
                    counted.push(key);
                }
                checks[i] = Some(c);
            }
            Err(e) => {
                remove(co, request_id, &counted).await;
                return Err(e);
            }
        }
    }
    if exceeded {
        remove(co, request_id, &counted).await;
    }
    // Duplicate keys (a named rule and a `*` rule for one name) each keep their own checks.
    for i in 0..applicable.len() {
        if checks[i].is_none() {
            let a = &applicable[i];
            let (ledger, _) = read(co, &a.key()).await?;
            checks[i] = Some(check(
                a.rule.scope,
                &a.name,
                &a.rule.limits,
                &ledger.used(request_id),
                requested,
            ));
        }
    }
    let checks: Vec<QuotaCheck> = checks.into_iter().flatten().flatten().collect();
    Ok(Verdict { exceeded, checks })
}

/// Takes `request_id` out of the ledgers `keys` (best effort: a failure is logged, and the
/// reconciler's [`sweep`] drops the entry later).
async fn remove(co: &Coordinator, request_id: &str, keys: &[String]) {
    for key in keys {
        for _ in 0..64 {
            let (mut ledger, rev) = match read(co, key).await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(key, error = %e, "quota ledger could not be read to release a request");
                    break;
                }
            };
            if ledger.entries.remove(request_id).is_none() {
                break;
            }
            match write(co, key, &ledger, rev).await {
                Ok(Write::Done(_)) => break,
                Ok(Write::Conflict) => continue,
                Err(e) => {
                    tracing::warn!(key, error = %e, "quota ledger could not be written to release a request");
                    break;
                }
            }
        }
    }
}

/// Takes request `request_id` out of every ledger its decision's quota checks name (when it
/// ends without a live commit, or is completed).
pub async fn release(co: &Coordinator, request_id: &str, checks: &[QuotaCheck]) {
    let mut keys: Vec<String> = checks
        .iter()
        .map(|c| super::policy::ledger_key(c.scope, &c.name))
        .collect();
    keys.sort();
    keys.dedup();
    remove(co, request_id, &keys).await;
}

/// True when a decision in `state` holds (or may soon hold) a live commit, so that its quota
/// entry stays.
fn live(state: DecisionState, dry_run: bool) -> bool {
    !dry_run && matches!(state, DecisionState::Planned | DecisionState::Committed)
}

/// The reconciler's repair (module docs): in every ledger, drops the entries older than
/// `older_than_ms` whose decision is not live. Returns how many it dropped.
///
/// Errors: the ledgers could not be listed.
pub async fn sweep(co: &Coordinator, older_than_ms: u64) -> Result<usize, StoreError> {
    let keys = co.store.raw_keys(LEDGER_PREFIX).await?;
    let now = now_ms();
    let mut dropped = 0;
    for key in keys {
        let (ledger, _) = read(co, &key).await?;
        let mut dead = Vec::new();
        for (id, e) in &ledger.entries {
            if now.saturating_sub(e.at_ms) <= older_than_ms {
                continue;
            }
            let alive = match co.store.get(id).await {
                Ok(Some((s, _))) => live(s.state, s.dry_run),
                Ok(None) => false,
                Err(_) => true,
            };
            if !alive {
                dead.push(id.clone());
            }
        }
        for id in &dead {
            tracing::info!(key, request_id = %id, "quota: an entry without a live decision dropped");
            remove(co, id, std::slice::from_ref(&key)).await;
        }
        dropped += dead.len();
    }
    Ok(dropped)
}
