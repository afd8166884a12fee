//! Following a committed workflow's jobs to their end (`submit --follow`, and `cancel` while
//! Slurm still ends the jobs): each job's state changes on stderr, then the outcome.

use fedvol_proto::coordinator::SubmitReply;
use fedvol_proto::decisions::{DecisionState, StoredDecision};

use super::ask::get;
use super::exit::{EXIT_BAD_INPUT, EXIT_OK};
use super::print::fail;
use crate::client::Client;
use crate::render::layout::para;
use crate::render::stored::{completed_text, job_line, job_lines};

/// `submit --follow`: reads decision `id` every second until it is neither committed nor
/// planned, printing each job state change on stderr; then the outcome on stdout. Exit 0 when
/// the workflow completed (or, with `cancelling`, was cancelled, as `fedvol cancel` asked), 1
/// when it failed or was cancelled otherwise (or when the decision could not be read).
pub async fn follow_jobs(client: &Client, id: &str, mut last: StoredDecision, cancelling: bool) -> u8 {
    if last.jobs().is_empty() {
        eprintln!(
            "note: --follow: cluster {} runs no jobs for fedvol; complete the decision with `fedvol complete {id}` when the workflow ended",
            last.decision.chosen_cluster.as_deref().unwrap_or("?")
        );
        return EXIT_OK;
    }
    eprintln!("following the jobs of {id} (Ctrl-C stops following; the jobs keep running)");
    let mut seen: Vec<(String, &'static str)> = Vec::new();
    let mut failures = 0;
    loop {
        for j in last.jobs() {
            let st = j.state.as_str();
            if !seen.iter().any(|(n, s)| n == &j.job && *s == st) {
                let first = !seen.iter().any(|(n, _)| n == &j.job);
                seen.retain(|(n, _)| n != &j.job);
                seen.push((j.job.clone(), st));
                // Who runs it and where its output goes: once, with its first state.
                eprint!(
                    "{}",
                    if first {
                        job_lines(j, "  ")
                    } else {
                        para("  ", "    ", &job_line(j))
                    }
                );
            }
        }
        if !matches!(last.state, DecisionState::Committed | DecisionState::Planned) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        match get(client, id).await {
            Ok(SubmitReply { stored: Some(s), .. }) => {
                failures = 0;
                last = s;
            }
            Ok(_) | Err(_) if failures < 30 => failures += 1,
            Ok(_) => {
                eprintln!("error: decision {id} can no longer be read");
                return EXIT_BAD_INPUT;
            }
            Err(e) => return fail(&e),
        }
    }
    print!("{}", completed_text(id, &last));
    if last.state == DecisionState::Completed || (cancelling && last.state == DecisionState::Cancelled) {
        EXIT_OK
    } else {
        EXIT_BAD_INPUT
    }
}
