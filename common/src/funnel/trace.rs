//! The machinery every funnel stage shares: running named stages ([`Rule`]s) over candidates
//! while recording **every** reason each rejected candidate failed in the [`Trace`], and seeded
//! randomness.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use crate::decision::{Rejection, StageTrace};
use crate::rule::{Reasons, Recorder, Rule, rule, sift};

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
            self.rejected.push(Rejection {
                candidate: name(),
                reasons: reasons.take(),
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

/// The records of a chain of stages while [`sift`] runs them, with the trace's listing limit
/// and how candidates are named.
struct Records<N> {
    records: Vec<Record>,
    limit: usize,
    name: N,
}

impl<T, N: Fn(&T) -> String> Recorder<T> for Records<N> {
    fn detailed(&self, rule: usize) -> bool {
        self.records[rule].rejected.len() < self.limit
    }

    fn reject(&mut self, rule: usize, candidate: &T, reasons: &mut Reasons) {
        let name = &self.name;
        self.records[rule].reject(reasons, || name(candidate));
    }
}

/// Runs a chain of named stages ([`Rule`]s) over `candidates` ([`sift`], stage after stage):
/// each candidate goes through the stages in order and stops at the first that rejects it,
/// which records it; `name` names a candidate in the trace.
///
/// Each stage's record (considered, passed, rejections with all reasons up to the trace's
/// limit, exact counts per reason code for all) is appended to `trace`, in order, stopping
/// after the first stage that leaves no candidate (later stages are neither run nor
/// recorded). An idle stage is recorded with considered = passed. The trace and the result are
/// exactly those of running each stage alone on the survivors of the one before. Candidates
/// keep their order. Returns the survivors.
pub fn run_rules<'r, T: 'r, R: Deref<Target = dyn Rule<T> + 'r>>(
    trace: &mut Trace,
    subject: &str,
    candidates: Vec<T>,
    name: impl Fn(&T) -> String,
    rules: &[R],
) -> Vec<T> {
    let mut candidates = candidates;
    let considered = candidates.len();
    let mut records = Records {
        records: rules.iter().map(|_| Record::new()).collect(),
        limit: trace.limit,
        name,
    };
    sift(&mut candidates, rules, &mut records);
    let mut left = considered;
    for (rule, mut record) in rules.iter().zip(records.records) {
        record.considered = left;
        left -= record.rejected_count();
        trace.stages.push(record.into_stage(rule.name(), subject));
        if left == 0 {
            break;
        }
    }
    candidates
}

/// Runs one named stage ([`run_rules`] with one rule), always recorded.
pub fn run_rule<T>(
    trace: &mut Trace,
    subject: &str,
    candidates: Vec<T>,
    name: impl Fn(&T) -> String,
    rule: &dyn Rule<T>,
) -> Vec<T> {
    run_rules(trace, subject, candidates, name, &[rule])
}

/// Runs the stage named `stage` whose check is `check` ([`run_rule`] with a [`rule()`] made of
/// them; `check` may keep state across candidates, as `zone.multi_host` keeps the hosts each
/// zone would take).
///
/// `check` is called once per candidate and pushes every reason the candidate fails (an empty
/// list means it passes).
pub fn run_filter<T>(
    trace: &mut Trace,
    stage: &str,
    subject: &str,
    candidates: Vec<T>,
    name: impl Fn(&T) -> String,
    check: impl FnMut(&T, &mut Reasons),
) -> Vec<T> {
    let check = RefCell::new(check);
    let stage = rule(stage, |c: &T, r: &mut Reasons| (check.borrow_mut())(c, r));
    run_rule(trace, subject, candidates, name, &stage)
}

/// Records the ranking stage named `stage` over `n` candidates (indices `0..n`, in candidate
/// order), whose rejections need no rule: `lost(i)` is the one reason code candidate `i` lost
/// the ranking with (`None`: it was chosen, it passes). Only a listed candidate (the first
/// trace-limit of the rejected) is named (`name(i)`) and given its message
/// (`message(i, code)`); once the listing is full, `tally(from)` gives, for the candidates
/// `from..n` left, how many lost with each code (what `lost` says of them, counted: a ranking
/// knows its counts without asking each candidate), and they are counted per code and in
/// `omitted`, as [`run_filter`] counts them.
///
/// The record equals [`run_filter`]'s with a check that pushes that one reason (a randomized
/// test holds them equal), for a counter increment per listed candidate instead of a rule call
/// behind a `dyn` and a `RefCell` per candidate: a ranking stage rejects every candidate but the
/// chosen, so at 1,000 hosts `host.choice` rejected 900 hosts per job through the rule
/// machinery, 23% of an agent's CPU per plan (BENCHMARKS.md, "Submits (issue 39, eighth
/// part)"); asking each one `lost` was still 11% of a plan ("tenth part"). Returns how many
/// passed.
#[allow(clippy::too_many_arguments)]
pub fn record_ranking(
    trace: &mut Trace,
    stage: &str,
    subject: &str,
    n: usize,
    mut lost: impl FnMut(usize) -> Option<&'static str>,
    tally: impl FnOnce(usize) -> Vec<(&'static str, usize)>,
    name: impl Fn(usize) -> String,
    message: impl Fn(usize, &'static str) -> String,
) -> usize {
    let mut rejected = Vec::new();
    let mut omitted = 0;
    // Codes in order of first appearance with their counts: a ranking has two or three.
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    let mut count = |code: &'static str, k: usize| match counts.iter_mut().find(|(c, _)| same(c, code)) {
        Some((_, m)) => *m += k,
        None => counts.push((code, k)),
    };
    let mut i = 0;
    while i < n && rejected.len() < trace.limit {
        if let Some(code) = lost(i) {
            count(code, 1);
            rejected.push(Rejection {
                candidate: name(i),
                reasons: vec![crate::decision::Reason {
                    code: code.to_string(),
                    message: message(i, code),
                }],
            });
        }
        i += 1;
    }
    if i < n {
        for (code, k) in tally(i) {
            if k > 0 {
                count(code, k);
                omitted += k;
            }
        }
    }
    let passed = n - rejected.len() - omitted;
    trace.stages.push(StageTrace {
        stage: stage.to_string(),
        subject: subject.to_string(),
        considered: n,
        passed,
        rejected,
        omitted,
        reason_counts: counts.into_iter().map(|(c, k)| (c.to_string(), k)).collect(),
    });
    passed
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
        /// `record_ranking` records what `run_filter` records for a check that pushes the one
        /// code a candidate lost with: the same listed candidates, messages, omitted count,
        /// per-code counts, considered and passed, at every listing limit.
        #[test]
        fn a_ranking_records_what_its_filter_records(
            lost in proptest::collection::vec(proptest::option::of(0usize..3), 0..60),
            limit in 0usize..8,
        ) {
            const CODES: [&str; 3] = ["policy_order", "fewer_soft_matches", "seeded_draw"];
            let code = |i: usize| lost[i].map(|k| CODES[k]);
            let mut filtered = Trace::new(limit);
            let survivors = run_filter(&mut filtered, "host.choice", "job", (0..lost.len()).collect(), |i| format!("z/h{i}"), |i, r| {
                if let Some(c) = code(*i) {
                    r.fail(c, || format!("{c} for {i}"));
                }
            });
            let mut ranked = Trace::new(limit);
            // The tally counts what `code` says of the candidates left, as a ranking counts.
            let tally = |from: usize| {
                CODES.iter().map(|c| (*c, (from..lost.len()).filter(|&i| code(i) == Some(*c)).count())).collect()
            };
            let passed = record_ranking(&mut ranked, "host.choice", "job", lost.len(), code, tally, |i| format!("z/h{i}"), |i, c| format!("{c} for {i}"));
            proptest::prop_assert_eq!(passed, survivors.len());
            proptest::prop_assert_eq!(&*ranked, &*filtered);
        }
    }

    proptest::proptest! {
        /// `run_rules` records exactly what `run_filter` records stage after stage (stopping
        /// after a stage that leaves nothing), with listing limits and idle stages.
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
            let stages: Vec<Box<dyn Rule<u32>>> = divisors
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let d = *d;
                    let check = move |n: &u32, r: &mut Reasons| {
                        if let Some(d) = d {
                            check(d)(n, r);
                        }
                    };
                    Box::new(rule(NAMES[i], check).with_idle(d.is_none())) as Box<dyn Rule<u32>>
                })
                .collect();
            let mut fused = Trace::new(limit);
            let out = run_rules(&mut fused, "s", candidates, |n| n.to_string(), &stages);
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
