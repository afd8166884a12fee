//! `fedvol complete ID` and `fedvol cancel ID`: end a committed workflow on its cluster (which
//! frees its capacity and applies each volume's reclaim policy); `cancel` first cancels its
//! jobs (Slurm's `scancel`) and, while Slurm still ends them, follows the decision to its end.
//! Only the user who submitted a decision may end it: a refusal names the command to run as
//! its owner.

use fedvol_proto::Code;
use fedvol_proto::coordinator::{self as api, DecisionRef, SubmitReply};
use fedvol_proto::decisions::DecisionState;

use crate::cli::args::IdArgs;
use crate::cli::ask::{as_submit_reply, get, resolve_id, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::follow::follow_jobs;
use crate::cli::pending::forget_request;
use crate::cli::print::{fail, show_stored};
use crate::client::Client;
use crate::commands::{Leading, Run};
use crate::render::Output;
use crate::render::layout::para;
use crate::render::stored::completed_text;

/// `fedvol complete`.
#[derive(Debug, clap::Args)]
pub struct Complete {
    /// The decision.
    #[command(flatten)]
    pub id: IdArgs,
}

impl Run for Complete {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.id.net)
    }

    fn run(self) -> u8 {
        with_client(&self.id.net, async |client| complete(client, &self.id, false).await)
    }
}

/// `fedvol cancel`.
#[derive(Debug, clap::Args)]
pub struct Cancel {
    /// The decision.
    #[command(flatten)]
    pub id: IdArgs,
}

impl Run for Cancel {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.id.net)
    }

    fn run(self) -> u8 {
        with_client(&self.id.net, async |client| complete(client, &self.id, true).await)
    }
}

/// Runs `fedvol complete` (`cancel` false) or `fedvol cancel` (true: the workflow's batch jobs
/// are cancelled on its cluster first, then it is completed).
async fn complete(client: &Client, a: &IdArgs, cancel: bool) -> u8 {
    let id = match resolve_id(client, &a.id).await {
        Ok(id) => id,
        Err(code) => return code,
    };
    let msg = DecisionRef {
        request_id: id.clone(),
        cancel,
        whole: None,
    };
    let answer = client.call::<api::Complete>(&msg).await.map(as_submit_reply);
    let not_owner = matches!(&answer, Ok(SubmitReply { error: Some(e), .. }) if e.code == Code::NotOwner);
    let hint = if not_owner {
        owner_hint(client, &id, if cancel { "cancel" } else { "complete" }).await
    } else {
        String::new()
    };
    // Completed (or found failed): no plain submit is to resume it.
    if let Ok(r) = &answer
        && r.stored.as_ref().is_some_and(|s| {
            matches!(
                s.state,
                DecisionState::Completed | DecisionState::Failed | DecisionState::Cancelled
            )
        })
        && let Err(e) = forget_request(&id)
    {
        eprintln!("note: {e}");
    }
    let table_view = matches!(a.output.output, Output::Table | Output::Wide);
    match answer {
        // Cancelled, but Slurm still ends the jobs (COMPLETING): the volumes are reclaimed
        // once they ended; follow the decision to its end.
        Ok(SubmitReply {
            error: Some(e),
            stored: Some(s),
            ..
        }) if cancel && table_view && e.code == Code::JobsRunning => {
            eprint!(
                "{}",
                para("note: ", "  ", &fedvol_common::limits::printable(&e.message))
            );
            follow_jobs(client, &id, s, true).await
        }
        // Refused (a failed or queued decision, one already completed elsewhere...): the
        // error, briefly; `decisions show` has the decision.
        Ok(SubmitReply {
            error: Some(e), stored, ..
        }) if table_view => {
            let state = stored
                .as_ref()
                .map(|s| format!(" (the decision is {})", crate::render::words::state(s.state)))
                .unwrap_or_default();
            eprint!(
                "{}",
                para(
                    "error: ",
                    "  ",
                    &format!(
                        "complete {id}: {} ({}){state}; fedvol decisions show {id} prints it",
                        fedvol_common::limits::printable(&e.message),
                        e.code
                    )
                )
            );
            eprint!("{hint}");
            EXIT_BAD_INPUT
        }
        // The table view says what completing did; `decisions show` has the decision.
        Ok(r) if table_view && r.error.is_none() => match &r.stored {
            Some(s) => {
                print!("{}", completed_text(&id, s));
                EXIT_OK
            }
            None => show_stored(&r, a.output.output, &format!("complete {id}")).map_or_else(|c| c, |_| EXIT_OK),
        },
        Ok(r) => {
            let code = show_stored(&r, a.output.output, &format!("complete {id}")).map_or_else(|c| c, |_| EXIT_OK);
            eprint!("{hint}");
            code
        }
        Err(e) => fail(&e),
    }
}

/// The line after a `not_owner` refusal of `fedvol <verb> ID`: the command that runs as the
/// decision's owner (`hint: run it as its owner: fedvol complete -u alice ID`), the owner read
/// from the decision (anyone may read one); a generic `-u OWNER` when it cannot be.
async fn owner_hint(client: &Client, id: &str, verb: &str) -> String {
    let owner = match get(client, id).await {
        Ok(SubmitReply { stored: Some(s), .. }) if !s.request.user.is_empty() => Some(s.request.user),
        _ => None,
    };
    // The command stays on one line to be copied (the refusal above names the owner).
    let text = match owner {
        Some(u) => format!(
            "run it as its owner: fedvol {verb} -u {} {id}",
            fedvol_common::limits::printable(&u)
        ),
        None => format!("run it as the user who submitted it: fedvol {verb} -u OWNER {id}"),
    };
    para("hint: ", "  ", &text)
}
