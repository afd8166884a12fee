//! The human views of a stored decision (the KV record around a decision): its state, why a
//! workflow failed, the decision itself ([`super::table`]), commit attempts, the jobs a cluster
//! runs for it and what completing it reclaimed. `fedvol submit`, `decisions show`, `complete`,
//! `cancel`, `decisions watch` and `demo` print these.

use fedvol_common::limits::printable;
use fedvol_proto::Code;
use fedvol_proto::agent::ActionReply;
use fedvol_proto::batch::BatchJob;
use fedvol_proto::decisions::{CommitAttempt, DecisionState, StoredDecision};

use super::{layout, words};

/// The table view of a stored decision: state and, for a workflow whose jobs failed, why;
/// the decision itself, attempts and jobs; `all`: every cluster in full however many (`-o
/// wide`, [`crate::render::outcomes`]).
pub fn stored_table(s: &StoredDecision, all: bool) -> String {
    let mut out = format!(
        "state: {}{}\n",
        words::state_with(s.state, s.failure()),
        if s.dry_run { " (dry run)" } else { "" }
    );
    // Why the workflow failed comes first, before the plan that led to it.
    if let Some(f) = &s.run_failure {
        out.push_str(&layout::para("workflow failed: ", "  ", &printable(f)));
    }
    let label = if s.state == DecisionState::Queued {
        "waiting: "
    } else if unavailable(s) {
        "not placed now: "
    } else {
        "refused: "
    };
    out.push_str(&super::table::render_stored(
        &s.decision,
        label,
        !s.jobs().is_empty(),
        all,
    ));
    if !s.attempts.is_empty() {
        out.push_str("\ncommit attempts:\n");
    }
    for a in &s.attempts {
        out.push_str(&attempt_line(a));
    }
    if !s.jobs().is_empty() {
        out.push_str("\njobs (run by Slurm on the chosen cluster):\n");
        for j in s.jobs() {
            out.push_str(&job_lines(j, "  "));
        }
    }
    if let Some(c) = &s.completion {
        out.push_str(&format!("completed: {}\n", outcome_line(c)));
    }
    if let Some(line) = completing_line(s, fedvol_proto::now_ms()) {
        out.push_str(&line);
    }
    out
}

/// For a decision whose `complete` its cluster has not answered yet
/// ([`StoredDecision::completing`]): since when, and that the coordinators keep sending it.
fn completing_line(s: &StoredDecision, now_ms: u64) -> Option<String> {
    let c = s.completing.as_ref()?;
    let cluster = s.decision.chosen_cluster.as_deref().unwrap_or("its cluster");
    let what = if c.cancel { "cancel" } else { "complete" };
    Some(layout::para(
        "completing: ",
        "  ",
        &format!(
            "asked {}; {} has not answered the {what} yet, the coordinators keep sending it",
            words::ago(c.since_ms, now_ms),
            printable(cluster)
        ),
    ))
}

/// One line of `commit attempts:`. An attempt still `pending` was sent and its outcome was
/// never recorded (the cluster may have committed or rolled it back), so it reads as in doubt,
/// never as `ok`, whatever `ok` holds; one not ok without an error reads as failed.
/// Wrapped at the terminal's width ([`layout::para`]).
fn attempt_line(a: &CommitAttempt) -> String {
    let cluster = printable(&a.cluster);
    let text = if a.pending {
        format!(
            "commit on {cluster}: in doubt (sent, outcome not recorded: the cluster is asked what became of it when the decision is taken over)"
        )
    } else {
        match (&a.error, a.ok) {
            (None, true) => format!("commit on {cluster}: ok"),
            (None, false) => format!("commit on {cluster}: failed"),
            (Some(e), _) => format!("commit on {cluster}: failed: {} ({})", printable(&e.message), e.code),
        }
    };
    layout::para("  ", "    ", &text)
}

/// What `fedvol complete` prints: the state, the cluster, each volume's outcome.
pub fn completed_text(id: &str, s: &StoredDecision) -> String {
    let mut out = format!(
        "{id}: {}{} on {}\n",
        words::state(s.state),
        if s.dry_run { " (dry run)" } else { "" },
        s.decision.chosen_cluster.as_deref().unwrap_or("no cluster")
    );
    if let Some(f) = &s.run_failure {
        out.push_str(&layout::para("failed: ", "  ", &printable(f)));
    }
    for j in s.jobs() {
        out.push_str(&job_lines(j, "  "));
    }
    if let Some(c) = &s.completion {
        out.push_str(&layout::para("volumes: ", "  ", &outcome_line(c)));
    }
    out
}

fn outcome_line(r: &ActionReply) -> String {
    let vols: Vec<String> = r
        .volumes
        .iter()
        .map(|v| format!("{} {}", v.volume, v.outcome))
        .collect();
    if vols.is_empty() {
        "nothing to reclaim".into()
    } else {
        vols.join(", ")
    }
}

/// True when no cluster was chosen because clusters did not answer (`clusters_unavailable`).
pub fn unavailable(s: &StoredDecision) -> bool {
    s.decision
        .refused
        .as_ref()
        .is_some_and(|r| Code::ClustersUnavailable.is(r))
}

/// One job of a decision: name, Slurm id, state, exit code, start and end (UTC).
pub fn job_line(j: &BatchJob) -> String {
    let mut out = format!("job {} (Slurm job {}): {}", printable(&j.job), j.id, j.state.as_str());
    if let Some(c) = j.exit_code {
        out.push_str(&format!(", exit code {c}"));
    }
    if let Some(sig) = j.signal {
        out.push_str(&format!(", signal {sig}"));
    }
    if let Some(t) = j.started_ms {
        out.push_str(&format!(", started {}", words::utc(t)));
    }
    if let Some(t) = j.ended_ms {
        out.push_str(&format!(", ended {}", words::utc(t)));
    }
    if let Some(r) = &j.reason {
        out.push_str(&format!(" ({})", printable(r)));
    }
    out
}

/// Who runs a job and where its output is (`as alice, output /home/alice/...`), when the
/// decision records them (jobs of earlier releases ran as the agent and say nothing).
pub fn job_place(j: &BatchJob) -> Option<String> {
    match (&j.user, &j.output) {
        (Some(u), Some(o)) => Some(format!("as {}, output {}", printable(u), printable(o))),
        (Some(u), None) => Some(format!("as {}", printable(u))),
        (None, Some(o)) => Some(format!("output {}", printable(o))),
        (None, None) => None,
    }
}

/// [`job_line`], then [`job_place`] on a line of its own below it, indented by `indent`.
pub fn job_lines(j: &BatchJob, indent: &str) -> String {
    let more = format!("{indent}  ");
    let mut out = layout::para(indent, &more, &job_line(j));
    if let Some(p) = job_place(j) {
        out.push_str(&layout::para(&more, &format!("{more}  "), &p));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_proto::decisions::Completing;

    fn committed() -> StoredDecision {
        let mut s = crate::ui::tests::stored("w", "alice");
        s.decision.chosen_cluster = Some("east".into());
        s
    }

    /// `decisions show` of a decision whose `complete` its cluster has not answered says so,
    /// since when, and that it is still being sent; nothing is said otherwise.
    #[test]
    fn an_unanswered_complete_is_shown() {
        let mut s = committed();
        assert!(!stored_table(&s, false).contains("completing:"));
        s.completing = Some(Completing {
            since_ms: 1_000,
            cancel: false,
        });
        let line = completing_line(&s, 43_000).expect("a line");
        assert_eq!(
            line,
            "completing: asked 42s ago; east has not answered the complete yet, the coordinators keep sending it\n"
        );
        s.completing = Some(Completing {
            since_ms: 1_000,
            cancel: true,
        });
        assert!(
            completing_line(&s, 1_000)
                .unwrap()
                .contains("asked now; east has not answered the cancel")
        );
        assert!(stored_table(&s, false).contains("completing: asked"));
    }
}
