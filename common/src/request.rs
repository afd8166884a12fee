//! What a cluster is asked: one placement request ([`PlanRequest`]) and how the cross-cluster
//! choice runs for it ([`ChoiceOptions`]), together, so that the funnel ([`crate::funnel`]) and
//! the choice ([`crate::choice`]) both read them from below.

use crate::funnel::trace::{DEFAULT_TRACE_LIMIT, seed_from_request_id};
use crate::model::Workflow;

/// Hours a job (and the workflow's storage) is counted for when no job declares a timeout and
/// neither the user nor the coordinator set other default hours.
pub const DEFAULT_HOURS: f64 = 1.0;

/// Largest default hours accepted (about 114 years): beyond it an estimate means nothing.
pub const MAX_HOURS: f64 = 1_000_000.0;

/// One placement request as a cluster sees it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanRequest {
    /// Idempotency key.
    pub request_id: String,
    /// The workflow.
    pub workflow: Workflow,
    /// The user's identity.
    pub user: String,
    /// The user's groups (for Fuzzball "Annotations and Selection" permission checks).
    pub groups: Vec<String>,
    /// Seed for every random choice.
    pub seed: u64,
    /// Most rejected candidates each stage lists in the trace (0 = all); exact counts per
    /// reason code are kept regardless. Default [`DEFAULT_TRACE_LIMIT`].
    #[serde(default = "default_trace_limit")]
    pub trace_limit: usize,
    /// How the cross-cluster choice runs for this request (the `cost` rule and its
    /// default hours). Carried here so that every run of the choice for the request (the
    /// coordinator's first choice, its commit phase after a refused commit, replay, why-not
    /// from the record) uses the same options; agents read the default hours for the cost
    /// estimate. `None` (absent on the wire, as earlier releases send it) = no `cost` rule and
    /// the default hours [`DEFAULT_HOURS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<ChoiceOptions>,
}

impl PlanRequest {
    /// A request `request_id` by `user` for `workflow`, with the defaults a coordinator gives
    /// a submit that sets nothing else: no groups, the seed derived from the request id
    /// ([`seed_from_request_id`]), the trace limit [`DEFAULT_TRACE_LIMIT`] and no choice
    /// options. The `with_*` setters change one field each.
    pub fn new(request_id: impl Into<String>, workflow: Workflow, user: impl Into<String>) -> Self {
        let request_id = request_id.into();
        PlanRequest {
            seed: seed_from_request_id(&request_id),
            request_id,
            workflow,
            user: user.into(),
            groups: Vec::new(),
            trace_limit: DEFAULT_TRACE_LIMIT,
            choice: None,
        }
    }

    /// The same request for a user in `groups`.
    pub fn with_groups<S: Into<String>>(mut self, groups: impl IntoIterator<Item = S>) -> Self {
        self.groups = groups.into_iter().map(Into::into).collect();
        self
    }

    /// The same request with `seed` for every random choice.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The same request listing at most `limit` rejected candidates per stage (0 = all).
    pub fn with_trace_limit(mut self, limit: usize) -> Self {
        self.trace_limit = limit;
        self
    }

    /// The same request with the choice options `choice`.
    pub fn with_choice(mut self, choice: Option<ChoiceOptions>) -> Self {
        self.choice = choice;
        self
    }
}

fn default_trace_limit() -> usize {
    DEFAULT_TRACE_LIMIT
}

/// How the choice runs for one request (carried in [`PlanRequest::choice`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ChoiceOptions {
    /// Run the `cost` rule (prefer the cluster with the lowest estimated cost).
    #[serde(default)]
    pub cost: bool,
    /// Hours counted when no job declares a timeout (`None` = [`DEFAULT_HOURS`]); must be
    /// finite, > 0 and at most [`MAX_HOURS`] ([`ChoiceOptions::check`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_hours: Option<f64>,
}

impl ChoiceOptions {
    /// The default hours in force: `default_hours`, else [`DEFAULT_HOURS`].
    pub fn hours(&self) -> f64 {
        self.default_hours.unwrap_or(DEFAULT_HOURS)
    }

    /// `Err` with what is wrong when `default_hours` is not a finite number in (0, MAX_HOURS].
    pub fn check(&self) -> Result<(), String> {
        check_hours(self.default_hours.unwrap_or(DEFAULT_HOURS))
    }
}

/// `Err` naming the rule when `h` is not a finite number of hours in (0, [`MAX_HOURS`]].
pub fn check_hours(h: f64) -> Result<(), String> {
    if h.is_finite() && h > 0.0 && h <= MAX_HOURS {
        Ok(())
    } else {
        Err(format!(
            "default hours must be a number > 0 and <= {MAX_HOURS}, not {h}"
        ))
    }
}
