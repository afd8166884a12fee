//! Asking the coordinators: connecting with a command's NATS options, one call whose failure
//! is printed, a stored decision by id, and a request id from a unique start of it.

use fedvol_proto::NoArgs;
use fedvol_proto::coordinator::{self as api, CoordinatorEndpoint, DecisionRef, SubmitReply};

use super::exit::EXIT_BAD_INPUT;
use super::net::{NetArgs, block_on};
use super::print::fail;
use crate::client::{Client, ClientError};

/// Connects with `net` and runs `f` with the client on a fresh runtime; a connection that
/// cannot be made is an error line, exit 1.
pub fn with_client(net: &NetArgs, f: impl AsyncFnOnce(&Client) -> u8) -> u8 {
    block_on(async {
        match net.connect().await {
            Ok(client) => f(&client).await,
            Err(e) => fail(&e),
        }
    })
}

/// Calls endpoint `E` and returns its reply; a failure the coordinator answered with is printed
/// as `error: <what>: <message> (<code>)`, and the exit code returned instead.
pub async fn ask<E: CoordinatorEndpoint>(client: &Client, req: &E::Request, what: &str) -> Result<E::Reply, u8> {
    match client.call::<E>(req).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(f)) => {
            eprintln!("error: {what}: {} ({})", f.error.message, f.error.code);
            Err(EXIT_BAD_INPUT)
        }
        Err(e) => Err(fail(&e)),
    }
}

/// A submit-shaped answer (submit, get, complete): a failure body reads as a reply with only an
/// error, so that it is printed like every other error of these commands.
pub fn as_submit_reply(r: Result<SubmitReply, fedvol_proto::Failure>) -> SubmitReply {
    r.unwrap_or_else(|f| SubmitReply::error(f.error))
}

/// Decision `id`: the stored decision, or the error the coordinator answered with.
///
/// Errors: the call's ([`ClientError`]).
pub async fn get(client: &Client, id: &str) -> Result<SubmitReply, ClientError> {
    get_whole(client, id, None).await
}

/// [`get`], with `cluster`'s whole answer when its agent still keeps it (`DecisionRef.whole`).
pub async fn get_whole(client: &Client, id: &str, cluster: Option<&str>) -> Result<SubmitReply, ClientError> {
    client
        .call::<api::Get>(&DecisionRef {
            request_id: id.to_string(),
            cancel: false,
            whole: cluster.map(str::to_string),
        })
        .await
        .map(as_submit_reply)
}

/// The request id `given` stands for: itself when a decision is stored under it, else the one
/// stored id it is a prefix of (like `docker` and `git` ids). A prefix of several ids, or of
/// none, is an error line naming them; the exit code is returned instead.
pub async fn resolve_id(client: &Client, given: &str) -> Result<String, u8> {
    match get(client, given).await {
        Ok(r) if r.stored.is_some() => return Ok(given.to_string()),
        Ok(r) if r.error.as_ref().is_some_and(|e| e.is(&fedvol_proto::Code::NotFound)) => {}
        // Any other answer is left to the command itself to report.
        Ok(_) => return Ok(given.to_string()),
        Err(e) => return Err(fail(&e)),
    }
    let all = ask::<api::List>(client, &NoArgs {}, "decisions list").await?;
    let matches: Vec<&str> = all
        .decisions
        .iter()
        .map(|d| d.request_id.as_str())
        .filter(|id| id.starts_with(given))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).to_string()),
        [] => {
            eprintln!("error: no decision is stored under `{given}` or an id starting with it (fedvol decisions list)");
            Err(EXIT_BAD_INPUT)
        }
        many => {
            let shown: Vec<&str> = many.iter().take(5).copied().collect();
            let more = if many.len() > 5 {
                format!(" and {} more", many.len() - 5)
            } else {
                String::new()
            };
            eprintln!(
                "error: `{given}` is the start of {} request ids ({}{more}); give more of it",
                many.len(),
                shown.join(", ")
            );
            Err(EXIT_BAD_INPUT)
        }
    }
}
