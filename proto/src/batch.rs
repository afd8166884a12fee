//! The jobs an agent submitted to its cluster's resource manager (Slurm) for a committed
//! request, and their states as the agent last saw them: part of the agent's commit, `jobs`
//! and complete answers ([`crate::agent::ActionReply::jobs`]) and of the stored decision
//! ([`crate::decisions::CommitAttempt::jobs`]).
//!
//! States follow Slurm's job states (`scontrol show job`'s `JobState`, the "JOB STATE CODES"
//! of the squeue manual): PENDING → `pending`; RUNNING, SUSPENDED, COMPLETING, CONFIGURING →
//! `running`; COMPLETED → `completed`; FAILED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE → `failed`;
//! CANCELLED, PREEMPTED → `cancelled`; TIMEOUT → `timeout`; NODE_FAIL → `node_fail`; a job
//! Slurm no longer knows (past the controller's `MinJobAge` with no accounting) → `lost`.

/// A batch job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for resources or for the jobs it depends on.
    Pending,
    /// Running (or completing, suspended).
    Running,
    /// Ended with exit code 0.
    Completed,
    /// Ended with a non-zero exit code (or out of memory, boot failure, deadline).
    Failed,
    /// Cancelled (by `fedvol cancel`, by an administrator, by a dependency that can never be
    /// met, or preempted).
    Cancelled,
    /// Killed at its time limit.
    Timeout,
    /// One of its nodes failed.
    NodeFail,
    /// The resource manager no longer knows the job: its end is unknown.
    Lost,
}

impl JobState {
    /// Every state, in the order the metrics list them.
    pub const ALL: [JobState; 8] = [
        JobState::Pending,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::Lost,
    ];

    /// The state's wire name (`pending`, `running`, `node_fail`...).
    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Timeout => "timeout",
            JobState::NodeFail => "node_fail",
            JobState::Lost => "lost",
        }
    }

    /// True once the job will not change any more.
    pub const fn ended(self) -> bool {
        !matches!(self, JobState::Pending | JobState::Running)
    }

    /// Slurm's `JobState` word → the state; `None` for a word this release does not know.
    pub fn from_slurm(word: &str) -> Option<JobState> {
        Some(match word {
            "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESV_DEL_HOLD" => JobState::Pending,
            "RUNNING" | "SUSPENDED" | "COMPLETING" | "CONFIGURING" | "RESIZING" | "SIGNALING" | "STAGE_OUT"
            | "STOPPED" => JobState::Running,
            "COMPLETED" => JobState::Completed,
            "FAILED" | "OUT_OF_MEMORY" | "BOOT_FAIL" | "DEADLINE" => JobState::Failed,
            "CANCELLED" | "PREEMPTED" | "REVOKED" | "SPECIAL_EXIT" => JobState::Cancelled,
            "TIMEOUT" => JobState::Timeout,
            "NODE_FAIL" => JobState::NodeFail,
            _ => return None,
        })
    }
}

/// One workflow job submitted to the resource manager.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BatchJob {
    /// The workflow's job name.
    pub job: String,
    /// The resource manager's job id (Slurm's).
    pub id: String,
    /// The state last seen.
    pub state: JobState,
    /// The exit code, once ended (Slurm's `ExitCode` before the `:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did (after the `:`; 0 is left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Slurm's reason (`Dependency`, `DependencyNeverSatisfied`, ...) or why it is `lost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was submitted, ms since the epoch.
    pub submitted_ms: u64,
    /// When it started, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// When it ended, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// The local account it runs as (the workflow's user mapped on its cluster); absent in
    /// records of earlier releases, whose jobs ran as the agent's account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Where its output (stdout and stderr) is written, on the cluster's file system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// True when the jobs ended because `fedvol cancel` cancelled them (the run is `cancelled`):
/// every job ended, none failed ([`failure`] is `None`), and one was cancelled by fedvol.
pub fn cancelled_by_fedvol(jobs: &[BatchJob]) -> bool {
    all_ended(jobs)
        && failure(jobs).is_none()
        && jobs
            .iter()
            .any(|j| j.state == JobState::Cancelled && j.reason.as_deref() == Some(CANCELLED_BY_FEDVOL))
}

/// The reason recorded for a job `fedvol cancel` cancelled.
pub const CANCELLED_BY_FEDVOL: &str = "cancelled by `fedvol cancel`";

/// Whether every job of `jobs` ended.
pub fn all_ended(jobs: &[BatchJob]) -> bool {
    jobs.iter().all(|j| j.state.ended())
}

/// What ended the workflow badly, in one sentence, or `None` when every job completed: the first
/// job (in workflow order) that failed, timed out, lost its node or was lost, with its exit
/// code; else the first cancelled one, unless `fedvol cancel` cancelled it (its reason is
/// [`CANCELLED_BY_FEDVOL`]: the workflow was ended on purpose, and completes).
pub fn failure(jobs: &[BatchJob]) -> Option<String> {
    let bad = jobs
        .iter()
        .find(|j| {
            !matches!(
                j.state,
                JobState::Completed | JobState::Cancelled | JobState::Pending | JobState::Running
            )
        })
        .or_else(|| {
            jobs.iter()
                .find(|j| j.state == JobState::Cancelled && j.reason.as_deref() != Some(CANCELLED_BY_FEDVOL))
        })?;
    let code = match (bad.exit_code, bad.signal) {
        (Some(c), Some(s)) => format!(" with exit code {c} (signal {s})"),
        (Some(c), None) => format!(" with exit code {c}"),
        _ => String::new(),
    };
    let why = bad.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
    Some(format!(
        "job `{}` (Slurm job {}) ended {}{code}{why}",
        bad.job,
        bad.id,
        bad.state.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, state: JobState, code: Option<i32>) -> BatchJob {
        BatchJob {
            job: name.into(),
            id: "7".into(),
            state,
            exit_code: code,
            signal: None,
            reason: None,
            submitted_ms: 1,
            started_ms: None,
            ended_ms: None,
            user: None,
            output: None,
        }
    }

    #[test]
    fn the_first_failed_job_names_the_failure() {
        let ok = [job("a", JobState::Completed, Some(0))];
        assert_eq!(failure(&ok), None);
        assert!(all_ended(&ok));
        let bad = [job("a", JobState::Failed, Some(3)), job("b", JobState::Cancelled, None)];
        assert_eq!(failure(&bad[1..]).unwrap(), "job `b` (Slurm job 7) ended cancelled");
        let mut by_user = bad[1].clone();
        by_user.reason = Some(CANCELLED_BY_FEDVOL.into());
        assert_eq!(failure(&[by_user]), None);
        assert_eq!(
            failure(&bad).unwrap(),
            "job `a` (Slurm job 7) ended failed with exit code 3"
        );
        assert!(!all_ended(&[job("a", JobState::Running, None)]));
        assert_eq!(JobState::from_slurm("NODE_FAIL"), Some(JobState::NodeFail));
        assert_eq!(JobState::from_slurm("nonsense"), None);
    }
}
