//! The machinery every funnel stage shares: running a named filter over candidates while
//! recording **every** reason each rejected candidate failed, and seeded randomness.

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};

use crate::decision::{Reason, Rejection, StageTrace};

/// Rejected candidates listed per stage by default (docs/design.md §2 asks for every reason of every
/// rejected candidate; with 100k hosts that is megabytes per decision, so beyond this many the
/// stage keeps exact counts per reason code and `why_not` gives any one candidate in full).
pub const DEFAULT_TRACE_LIMIT: usize = 50;

/// Rejected candidates listed per stage in the decisions a coordinator stores (submits that do
/// not ask for another limit). Exact `reason_counts` are kept whatever the limit, and `why_not`
/// explains any one candidate in full, so a short sample keeps stored decisions small: at
/// 1,000 hosts a cluster's part is about 7 KB with 5 listed against 35 KB with 50 (measured with
/// `examples/plan_synth`).
pub const STORED_TRACE_LIMIT: usize = 5;

/// The stage records of one plan, with the most rejections each stage lists.
/// Dereferences to the list of [`StageTrace`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    stages: Vec<StageTrace>,
    limit: usize,
}

impl Trace {
    /// An empty trace listing at most `limit` rejected candidates per stage (0 = all of them).
    pub fn new(limit: usize) -> Self {
        Trace {
            stages: Vec::new(),
            limit: if limit == 0 { usize::MAX } else { limit },
        }
    }

    /// The stage records, in the order the stages ran.
    pub fn into_stages(self) -> Vec<StageTrace> {
        self.stages
    }
}

impl Default for Trace {
    /// A trace with [`DEFAULT_TRACE_LIMIT`].
    fn default() -> Self {
        Trace::new(DEFAULT_TRACE_LIMIT)
    }
}

impl Deref for Trace {
    type Target = Vec<StageTrace>;
    fn deref(&self) -> &Vec<StageTrace> {
        &self.stages
    }
}

impl DerefMut for Trace {
    fn deref_mut(&mut self) -> &mut Vec<StageTrace> {
        &mut self.stages
    }
}

/// Where a stage's check puts the reasons one candidate fails.
///
/// Use [`Reasons::fail`] with a message closure in hot stages: when the candidate will not be
/// listed in the trace (the stage is past its limit) the message is never formatted and nothing
/// is allocated, only the code is counted.
#[derive(Debug, Default)]
pub struct Reasons {
    /// Codes and messages (a message is empty when the candidate will not be listed and the
    /// reason came through [`Reasons::fail`]).
    list: Vec<(Cow<'static, str>, String)>,
    detailed: bool,
}

impl Reasons {
    /// Records a failure with `code` (one of [`crate::decision::codes`]); `message` runs only if
    /// the candidate will be listed.
    pub fn fail(&mut self, code: &'static str, message: impl FnOnce() -> String) {
        let message = if self.detailed { message() } else { String::new() };
        self.list.push((Cow::Borrowed(code), message));
    }

    /// Records a fully formed reason.
    pub fn push(&mut self, reason: Reason) {
        self.list.push((Cow::Owned(reason.code), reason.message));
    }

    /// Records several reasons.
    pub fn extend(&mut self, reasons: impl IntoIterator<Item = Reason>) {
        for r in reasons {
            self.push(r);
        }
    }

    /// True when no reason was recorded (the candidate passes).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The codes recorded so far, in order.
    pub fn codes(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|(c, _)| &**c)
    }
}

/// Anything a check can push reasons into: a plain `Vec<Reason>` or a stage's [`Reasons`].
pub trait ReasonSink {
    /// Records one reason.
    fn push_reason(&mut self, reason: Reason);
}

impl ReasonSink for Vec<Reason> {
    fn push_reason(&mut self, reason: Reason) {
        self.push(reason);
    }
}

impl ReasonSink for Reasons {
    fn push_reason(&mut self, reason: Reason) {
        self.push(reason);
    }
}

/// The record of one stage while candidates go through it.
struct Record {
    considered: usize,
    rejected: Vec<Rejection>,
    omitted: usize,
    /// Rejected candidates per reason code, in order of first appearance (a few codes per
    /// stage: a short list is cheaper to search than a map).
    counts: Vec<(Cow<'static, str>, usize)>,
}

impl Record {
    fn new() -> Self {
        Record {
            considered: 0,
            rejected: Vec::new(),
            omitted: 0,
            counts: Vec::new(),
        }
    }

    /// Prepares `reasons` for the next candidate: empty, detailed while the stage lists fewer
    /// than `limit` rejected candidates.
    fn start(&self, reasons: &mut Reasons, limit: usize) {
        reasons.list.clear();
        reasons.detailed = self.rejected.len() < limit;
    }

    /// Records a candidate that failed with `reasons` (not empty): each distinct code counted
    /// once, and the candidate listed with every reason when `reasons` is detailed.
    fn reject(&mut self, reasons: &mut Reasons, name: impl FnOnce() -> String) {
        let list = &reasons.list;
        for (i, (code, _)) in list.iter().enumerate() {
            if list[..i].iter().any(|(p, _)| p == code) {
                continue;
            }
            match self.counts.iter_mut().find(|(c, _)| same(c, code)) {
                Some((_, n)) => *n += 1,
                None => self.counts.push((code.clone(), 1)),
            }
        }
        if reasons.detailed {
            let reasons = reasons
                .list
                .drain(..)
                .map(|(code, message)| Reason {
                    code: code.into_owned(),
                    message,
                })
                .collect();
            self.rejected.push(Rejection {
                candidate: name(),
                reasons,
            });
        } else {
            self.omitted += 1;
        }
    }

    fn rejected_count(&self) -> usize {
        self.rejected.len() + self.omitted
    }

    fn into_stage(self, stage: &str, subject: &str) -> StageTrace {
        StageTrace {
            stage: stage.to_string(),
            subject: subject.to_string(),
            considered: self.considered,
            passed: self.considered - self.rejected_count(),
            rejected: self.rejected,
            omitted: self.omitted,
            reason_counts: self.counts.into_iter().map(|(c, n)| (c.into_owned(), n)).collect(),
        }
    }
}

/// Equal codes (the same constant compares by address first).
fn same(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// Runs one named filter stage.
///
/// `check` is called once per candidate and pushes every reason the candidate fails (an empty
/// list means it passes). The stage's record (considered, passed, rejections with all reasons
/// up to the trace's limit, exact counts per reason code for all) is appended to `trace`.
/// Candidates keep their order. Returns the survivors.
pub fn run_filter<T>(
    trace: &mut Trace,
    stage: &str,
    subject: &str,
    candidates: Vec<T>,
    name: impl Fn(&T) -> String,
    mut check: impl FnMut(&T, &mut Reasons),
) -> Vec<T> {
    let mut candidates = candidates;
    let mut record = Record::new();
    record.considered = candidates.len();
    let mut reasons = Reasons::default();
    let limit = trace.limit;
    candidates.retain(|c| {
        record.start(&mut reasons, limit);
        check(c, &mut reasons);
        if reasons.list.is_empty() {
            return true;
        }
        record.reject(&mut reasons, || name(c));
        false
    });
    trace.stages.push(record.into_stage(stage, subject));
    candidates
}

/// The check of one stage run by [`run_filters`].
pub type Check<'c, T> = Box<dyn Fn(&T, &mut Reasons) + 'c>;

/// One named stage of [`run_filters`].
pub struct Stage<'c, T> {
    /// The stage's name in the trace.
    pub name: &'static str,
    /// Its check, as for [`run_filter`]; `None` when the stage has nothing to check for this
    /// subject (every candidate passes: the stage is still recorded, considered = passed).
    pub check: Option<Check<'c, T>>,
}

/// Runs a chain of named filter stages over `candidates` in one pass: each candidate goes
/// through the stages in order and stops at the first that rejects it, which records it.
///
/// The trace and the result are exactly those of calling [`run_filter`] once per stage, each on
/// the survivors of the one before, and stopping after the first stage that leaves no candidate
/// (later stages are neither run nor recorded): checks are per candidate and candidates keep
/// their order, so every stage sees the same candidates in the same order and lists the same
/// first rejections.
pub fn run_filters<T>(
    trace: &mut Trace,
    subject: &str,
    candidates: Vec<T>,
    name: impl Fn(&T) -> String,
    stages: &[Stage<'_, T>],
) -> Vec<T> {
    let mut candidates = candidates;
    let mut records: Vec<Record> = stages.iter().map(|_| Record::new()).collect();
    let mut reasons = Reasons::default();
    let limit = trace.limit;
    let active: Vec<(usize, &Check<'_, T>)> = stages
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.check.as_ref().map(|c| (i, c)))
        .collect();
    let considered = candidates.len();
    candidates.retain(|c| {
        for (i, check) in &active {
            let record = &mut records[*i];
            record.start(&mut reasons, limit);
            check(c, &mut reasons);
            if !reasons.list.is_empty() {
                record.reject(&mut reasons, || name(c));
                return false;
            }
        }
        true
    });
    let mut left = considered;
    for (stage, mut record) in stages.iter().zip(records) {
        record.considered = left;
        left -= record.rejected_count();
        trace.stages.push(record.into_stage(stage.name, subject));
        if left == 0 {
            break;
        }
    }
    candidates
}

/// FNV-1a 64-bit hash: stable across Rust versions and platforms (unlike `DefaultHasher`).
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64 finaliser: spreads the bits of `x` (used to derive choices from a seed).
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Deterministic "random" index in `0..n` for the choice named `context` under `seed`
/// (docs/design.md §2: randomness only from the request's seed, so decisions replay exactly).
/// Returns 0 when `n` is 0 or 1.
pub fn seeded_pick(seed: u64, context: &str, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    (mix64(seed ^ fnv1a(context.as_bytes())) % n as u64) as usize
}

/// The default seed of a request: derived from its id.
pub fn seed_from_request_id(request_id: &str) -> u64 {
    mix64(fnv1a(request_id.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Reason;

    #[test]
    fn filter_records_all_reasons() {
        let mut trace = Trace::default();
        let out = run_filter(
            &mut trace,
            "s",
            "v",
            vec![1, 2, 3, 4],
            |n| n.to_string(),
            |n, r| {
                if n % 2 == 0 {
                    r.push(Reason::new("even", "is even"));
                    r.push(Reason::new("small", "is small"));
                }
            },
        );
        assert_eq!(out, vec![1, 3]);
        assert_eq!(trace[0].considered, 4);
        assert_eq!(trace[0].passed, 2);
        assert_eq!(trace[0].rejected[0].reasons.len(), 2);
        assert_eq!(trace[0].reason_counts["even"], 2);
    }

    #[test]
    fn limit_keeps_counts_exact() {
        let mut trace = Trace::new(3);
        let out = run_filter(
            &mut trace,
            "s",
            "v",
            (0..100).collect(),
            |n| n.to_string(),
            |n, r| {
                if *n >= 10 {
                    r.push(Reason::new("big", "is big"));
                }
            },
        );
        assert_eq!(out.len(), 10);
        assert_eq!(trace[0].rejected.len(), 3);
        assert_eq!(trace[0].omitted, 87);
        assert_eq!(trace[0].reason_counts["big"], 90);
        let mut all = Trace::new(0);
        run_filter(
            &mut all,
            "s",
            "v",
            (0..100).collect(),
            |n| n.to_string(),
            |_, r| r.push(Reason::new("x", "x")),
        );
        assert_eq!((all[0].rejected.len(), all[0].omitted), (100, 0));
    }

    proptest::proptest! {
        /// `run_filters` records exactly what `run_filter` records stage after stage (stopping
        /// after a stage that leaves nothing), with listing limits and stages without a check.
        #[test]
        fn one_pass_over_the_stages_records_what_a_pass_per_stage_records(
            candidates in proptest::collection::vec(0u32..64, 0..40),
            divisors in proptest::collection::vec(proptest::option::of(1u32..7), 0..5),
            limit in 0usize..4,
        ) {
            // Stage `i` rejects multiples of its divisor, with one or two reasons.
            let check = |d: u32| move |n: &u32, r: &mut Reasons| {
                if n.is_multiple_of(d) {
                    r.fail(if d.is_multiple_of(2) { "even" } else { "odd" }, || format!("{n} divides by {d}"));
                    if n.is_multiple_of(2 * d) {
                        r.push(Reason::new("twice", format!("{n} divides by {}", 2 * d)));
                    }
                }
            };
            const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
            let mut chained = Trace::new(limit);
            let mut left = candidates.clone();
            for (i, d) in divisors.iter().enumerate() {
                left = run_filter(&mut chained, NAMES[i], "s", left, |n| n.to_string(), |n, r| {
                    if let Some(d) = d {
                        check(*d)(n, r);
                    }
                });
                if left.is_empty() {
                    break;
                }
            }
            let stages: Vec<Stage<'_, u32>> = divisors
                .iter()
                .enumerate()
                .map(|(i, d)| Stage {
                    name: NAMES[i],
                    check: d.map(|d| Box::new(check(d)) as Check<'_, u32>),
                })
                .collect();
            let mut fused = Trace::new(limit);
            let out = run_filters(&mut fused, "s", candidates, |n| n.to_string(), &stages);
            proptest::prop_assert_eq!(out, left);
            proptest::prop_assert_eq!(fused, chained);
        }
    }

    #[test]
    fn picks_are_stable_and_in_range() {
        for n in 1..20 {
            let a = seeded_pick(42, "zone:job-a", n);
            assert_eq!(a, seeded_pick(42, "zone:job-a", n));
            assert!(a < n);
        }
        assert_eq!(seed_from_request_id("r-1"), seed_from_request_id("r-1"));
        assert_ne!(seed_from_request_id("r-1"), seed_from_request_id("r-2"));
    }
}
