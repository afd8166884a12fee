//! The `identity.user` stage: on a cluster that runs a workflow's jobs as the people who
//! submitted them, the workflow's user must map to a local account there, or the cluster
//! cannot take the workflow (docs/design.md §2.6).
//!
//! The mapping itself is the agent's (it reads its user map and the password database, I/O
//! the funnel never does); the funnel gets its verdict as a [`RunAs`] and records it as a
//! stage like any other: one candidate, the federation user, kept or rejected with code
//! `unmapped_user` ([`crate::decision::codes::UNMAPPED_USER`]). A rejected user's jobs are not
//! placed (each gets the reason as its error) and the cluster is not feasible, so the
//! coordinator's choice goes to another cluster and `why-not` says why.
//!
//! Open OnDemand refuses a user its `user_map_match`/`user_map_cmd` cannot map ("the user is
//! not mapped, access denied"), and a grid-mapfile admits only the identities it lists: the
//! same rule, never running a job as anyone else.

use crate::decision::{Reason, codes};
use crate::funnel::trace::{Trace, run_filter};

/// The stage's name in the trace.
pub const STAGE: &str = "identity.user";

/// The trace subject of the stage (it judges the whole workflow, not one volume or job).
pub const SUBJECT: &str = "workflow";

/// Who a workflow's jobs and volumes would belong to on a cluster that runs jobs as their
/// users, as the agent resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunAs {
    /// The local (Unix) account the workflow's user maps to.
    Account(String),
    /// The user maps to no usable account; the sentence says why (and what an operator
    /// would do about it).
    Unmapped(String),
}

/// Runs the stage for `user` with the agent's verdict `run_as`, recording it in `trace`.
/// Returns the reason the cluster cannot take the workflow, or `None` when the user maps.
pub fn check(trace: &mut Trace, user: &str, run_as: &RunAs) -> Option<Reason> {
    let kept = run_filter(
        trace,
        STAGE,
        SUBJECT,
        vec![user.to_string()],
        |u| u.clone(),
        |_, r| {
            if let RunAs::Unmapped(why) = run_as {
                r.push(Reason::new(codes::UNMAPPED_USER, why.clone()));
            }
        },
    );
    match (kept.is_empty(), run_as) {
        (true, RunAs::Unmapped(why)) => Some(Reason::new(codes::UNMAPPED_USER, why.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_user_passes_and_an_unmapped_one_is_recorded_with_its_reason() {
        let mut t = Trace::default();
        assert_eq!(check(&mut t, "alice", &RunAs::Account("alice".into())), None);
        assert_eq!((t[0].stage.as_str(), t[0].considered, t[0].passed), (STAGE, 1, 1));
        let mut t = Trace::default();
        let why = RunAs::Unmapped("no account `carol` on this cluster".into());
        let r = check(&mut t, "carol", &why).unwrap();
        assert_eq!(r.code, codes::UNMAPPED_USER);
        assert_eq!((t[0].considered, t[0].passed), (1, 0));
        assert_eq!(t[0].rejected[0].candidate, "carol");
        assert_eq!(t[0].reason_counts[codes::UNMAPPED_USER], 1);
    }
}
