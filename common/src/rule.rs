//! The one shape of every rule that keeps or drops candidates: funnel stages (volume, zone and
//! host stages, recorded in the trace) and the cross-cluster choice rules (recorded as
//! `choice` steps). A [`Rule`] has a name and a check that records every reason a candidate
//! fails into [`Reasons`]; [`sift`] runs a chain of rules over candidates, rule after rule, and
//! hands each dropped candidate, with its reasons, to a [`Recorder`].
//!
//! Modelled on Nomad's feasibility checkers (`scheduler/feasible.go`: `FeasibilityChecker`
//! with `Feasible(node)`, the reason going to the context's metrics) and kube-scheduler's
//! filter plugins (`pkg/scheduler/framework/interface.go`: `FilterPlugin` with `Name()` and
//! `Filter(...)`): a rule is set up once for what it judges (a job, a request, the clusters
//! still in the running) and then asked per candidate.

use std::borrow::Cow;
use std::ops::Deref;

use crate::decision::Reason;

/// A named rule that keeps or drops candidates of type `T`.
pub trait Rule<T> {
    /// The rule's name, as the record shows it (a stage name such as `host.power`, a choice
    /// rule such as `least_loaded`).
    fn name(&self) -> &str;

    /// True when the rule can drop no candidate as it is set up (nothing to check for this
    /// job or request): [`sift`] then records it without asking it about any candidate.
    fn idle(&self) -> bool {
        false
    }

    /// Records in `reasons` every reason `candidate` fails the rule; none recorded = kept.
    fn check(&self, candidate: &T, reasons: &mut Reasons);

    /// Runs this rule alone, as rule number `k` of a chain, over `candidates`: each candidate
    /// it drops goes to `recorder` with its reasons, the others stay in order. The default is
    /// compiled once per rule type, so [`Rule::check`] is called directly (inlined for a
    /// [`FnRule`]) rather than through the `dyn Rule` of every candidate: [`sift`] makes one
    /// virtual call per rule, not one per rule and candidate.
    fn sift_alone(&self, k: usize, candidates: &mut Vec<T>, recorder: &mut dyn Recorder<T>) {
        sift_with(k, candidates, recorder, |c, r| self.check(c, r));
    }
}

/// A rule made of a name and a check function (see [`rule`]).
pub struct FnRule<'n, F> {
    name: &'n str,
    idle: bool,
    check: F,
}

/// The rule `name` whose check is `check` (called once per candidate, pushing every reason it
/// fails; a `Fn(&T, &mut Reasons)` makes it a `Rule<T>`).
pub fn rule<F>(name: &str, check: F) -> FnRule<'_, F> {
    FnRule {
        name,
        idle: false,
        check,
    }
}

impl<F> FnRule<'_, F> {
    /// The same rule, [`Rule::idle`] when `idle` is true.
    pub fn with_idle(mut self, idle: bool) -> Self {
        self.idle = idle;
        self
    }
}

impl<T, F: Fn(&T, &mut Reasons)> Rule<T> for FnRule<'_, F> {
    fn name(&self) -> &str {
        self.name
    }

    fn idle(&self) -> bool {
        self.idle
    }

    fn check(&self, candidate: &T, reasons: &mut Reasons) {
        (self.check)(candidate, reasons)
    }
}

/// Where a rule's check puts the reasons one candidate fails.
///
/// Use [`Reasons::fail`] with a message closure in hot rules: when the candidate will not be
/// listed (the recorder is past its listing limit) the message is never formatted and nothing
/// is allocated, only the code is counted.
#[derive(Debug, Default)]
pub struct Reasons {
    /// Codes and messages (a message is empty when the candidate will not be listed and the
    /// reason came through [`Reasons::fail`]).
    pub(crate) list: Vec<(Cow<'static, str>, String)>,
    /// True when the candidate will be listed with its messages.
    pub(crate) detailed: bool,
}

impl Reasons {
    /// Records a failure with `code` (one of [`crate::decision::codes`]); `message` runs only if
    /// the candidate will be listed.
    #[inline]
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

    /// Takes the recorded reasons out, in order (leaving none).
    pub fn take(&mut self) -> Vec<Reason> {
        self.list
            .drain(..)
            .map(|(code, message)| Reason {
                code: code.into_owned(),
                message,
            })
            .collect()
    }
}

/// Anything a check can push reasons into: a plain `Vec<Reason>` or a rule's [`Reasons`].
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

/// What [`sift`] tells about the candidates it drops: the trace's stage records or the
/// choice's steps.
pub trait Recorder<T> {
    /// True when the next candidate rule number `rule` drops will be listed with its messages
    /// (false: only its codes count, see [`Reasons::fail`]). Changes only when rule `rule`
    /// drops a candidate ([`sift`] asks again only then).
    fn detailed(&self, rule: usize) -> bool;

    /// `candidate` failed rule number `rule` with `reasons` (not empty; the recorder may take
    /// them).
    fn reject(&mut self, rule: usize, candidate: &T, reasons: &mut Reasons);
}

/// Runs `rules` over `candidates`, rule after rule: each rule judges the candidates every rule
/// before it kept and hands each it drops, with its reasons, to `recorder`. Idle rules
/// ([`Rule::idle`]) are not asked. Candidates keep their order; the survivors stay in
/// `candidates`.
///
/// A candidate stops at the first rule that drops it, and each rule sees the same candidates
/// in the same order, as one pass asking every candidate of every rule in turn would: the
/// recorder gets the same rejections in the same order per rule. Only the order of rejections
/// *across* rules differs, which no recorder reads (each keeps its rules apart by number).
/// Rule by rule, the check of each rule runs in a loop of its own ([`Rule::sift_alone`]),
/// without a virtual call per candidate (BENCHMARKS.md, "Submits (issue 39, ninth part)").
pub fn sift<'r, T, R>(candidates: &mut Vec<T>, rules: &[R], recorder: &mut impl Recorder<T>)
where
    R: Deref<Target = dyn Rule<T> + 'r>,
    T: 'r,
{
    for (k, rule) in rules.iter().enumerate() {
        if candidates.is_empty() {
            break;
        }
        if !rule.idle() {
            rule.sift_alone(k, candidates, recorder);
        }
    }
}

/// One rule, number `k`, whose check is `check`, over `candidates` ([`Rule::sift_alone`]).
fn sift_with<T>(
    k: usize,
    candidates: &mut Vec<T>,
    recorder: &mut dyn Recorder<T>,
    mut check: impl FnMut(&T, &mut Reasons),
) {
    // Whether the next drop is listed: asked again only after a drop.
    let mut listed = recorder.detailed(k);
    let mut reasons = Reasons::default();
    // Survivors move to the front in order, as `Vec::retain` would keep them; a plain loop keeps
    // the per-candidate work in one function on the hot path (100k hosts a job).
    let mut kept = 0;
    for i in 0..candidates.len() {
        let c = &candidates[i];
        reasons.list.clear();
        reasons.detailed = listed;
        check(c, &mut reasons);
        if !reasons.list.is_empty() {
            recorder.reject(k, c, &mut reasons);
            listed = recorder.detailed(k);
            continue;
        }
        if kept != i {
            candidates.swap(kept, i);
        }
        kept += 1;
    }
    candidates.truncate(kept);
}
