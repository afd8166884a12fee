//! The CLI's unfinished submits: a plain `fedvol submit` (no `--request-id`) makes a fresh
//! request id. When the CLI does not learn the outcome of that submit (no answer in time, the
//! coordinator stopped mid-commit, the commit is in doubt, Ctrl-C), running the same command
//! again must not book a second slot under another fresh id. So the CLI keeps, per user,
//! subject prefix and request digest ([`fedvol_proto::coordinator::SubmitMsg::digest`]: the
//! workflow, groups, seed and choice options), the request id of a submit whose outcome it has
//! not learnt, and the next plain submit of the same request resumes it; `--new` submits
//! afresh. The entry is dropped once an answer says what became of the request (committed,
//! failed, queued, or refused for good).
//!
//! This is Nomad's rule for job registration retried by a client (Nomad: job register
//! idempotency via `JobModifyIndex` / `EnforceIndex`) and the AWS SDKs' client tokens
//! (Amazon EC2: "Ensuring idempotency", `ClientToken` reused on retry): the client that retries
//! keeps the token of the request it could not see finish.
//!
//! The file is `$FEDVOL_STATE_DIR/pending-submits.json`, else
//! `$XDG_STATE_HOME/fedvol/pending-submits.json`, else `~/.local/state/fedvol/…`; it is written
//! atomically (temporary file and rename). Entries older than [`MAX_AGE_MS`] are dropped (the
//! coordinators settle an abandoned decision within minutes).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Entries older than this are forgotten, ms (a week).
pub const MAX_AGE_MS: u64 = 7 * 24 * 3600 * 1000;

/// An unfinished submit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Its request id.
    pub request_id: String,
    /// The workflow's name (for people reading the file).
    pub workflow: String,
    /// When it was first sent, ms since the epoch.
    pub since_ms: u64,
}

/// The file's contents: key ([`key`]) → entry.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Book {
    #[serde(default)]
    pending: BTreeMap<String, Entry>,
}

/// Why the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    /// No place for the file: none of the variables of the module docs is set.
    #[error("no directory for the CLI's state: set FEDVOL_STATE_DIR, XDG_STATE_HOME or HOME")]
    NoDirectory,
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The file's path (module docs), or `None` when no variable names a directory.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = var("FEDVOL_STATE_DIR")
        .or_else(|| var("XDG_STATE_HOME").map(|d| d.join("fedvol")))
        .or_else(|| var("HOME").map(|d| d.join(".local/state/fedvol")))?;
    Some(dir.join("pending-submits.json"))
}

/// The key of a submit of `user` under subject prefix `prefix` with request digest `digest`.
pub fn key(user: &str, prefix: &str, digest: &str) -> String {
    format!("{user} {prefix} {digest}")
}

fn load(p: &std::path::Path) -> Book {
    // An unreadable or damaged file is no unfinished submit (a fresh id is made, as before).
    std::fs::read(p)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save(p: &std::path::Path, book: &Book) -> Result<(), PendingError> {
    let io = |source| PendingError::Io {
        path: p.display().to_string(),
        source,
    };
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = p.with_extension(format!("json.{}", std::process::id()));
    let body = serde_json::to_vec_pretty(book).map_err(|e| io(std::io::Error::other(e)))?;
    std::fs::write(&tmp, body).map_err(io)?;
    std::fs::rename(&tmp, p).map_err(io)
}

/// The unfinished submit under `key`, if any younger than [`MAX_AGE_MS`] at `now_ms`.
pub fn find(key: &str, now_ms: u64) -> Option<Entry> {
    let p = path()?;
    load(&p)
        .pending
        .get(key)
        .filter(|e| now_ms.saturating_sub(e.since_ms) < MAX_AGE_MS)
        .cloned()
}

/// Records `entry` under `key` as unfinished (before the request is sent), dropping entries
/// older than [`MAX_AGE_MS`].
///
/// Errors: [`PendingError`] when the file cannot be written.
pub fn remember(key: &str, entry: Entry, now_ms: u64) -> Result<(), PendingError> {
    let p = path().ok_or(PendingError::NoDirectory)?;
    let mut book = load(&p);
    book.pending
        .retain(|_, e| now_ms.saturating_sub(e.since_ms) < MAX_AGE_MS);
    book.pending.insert(key.to_string(), entry);
    save(&p, &book)
}

/// Forgets the submit under `key` when its request id is `request_id` (its outcome is known).
///
/// Errors: [`PendingError`] when the file cannot be written.
pub fn forget(key: &str, request_id: &str) -> Result<(), PendingError> {
    let p = path().ok_or(PendingError::NoDirectory)?;
    let mut book = load(&p);
    if book.pending.get(key).is_some_and(|e| e.request_id == request_id) {
        book.pending.remove(key);
        save(&p, &book)?;
    }
    Ok(())
}

/// Forgets every unfinished submit under request id `request_id` (it was completed, or found
/// failed).
///
/// Errors: [`PendingError`] when the file cannot be written.
pub fn forget_request(request_id: &str) -> Result<(), PendingError> {
    let Some(p) = path() else {
        return Ok(());
    };
    let mut book = load(&p);
    let before = book.pending.len();
    book.pending.retain(|_, e| e.request_id != request_id);
    if book.pending.len() != before {
        save(&p, &book)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_kept_until_forgotten_and_lapses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pending-submits.json");
        let mut book = Book::default();
        book.pending.insert(
            key("alice", "fedvol.v1", "d1"),
            Entry {
                request_id: "wf-1".into(),
                workflow: "wf".into(),
                since_ms: 1_000,
            },
        );
        save(&p, &book).unwrap();
        let back = load(&p);
        assert_eq!(back.pending.len(), 1);
        assert_eq!(back.pending[&key("alice", "fedvol.v1", "d1")].request_id, "wf-1");
        std::fs::write(&p, b"not json").unwrap();
        assert!(load(&p).pending.is_empty(), "a damaged file is no unfinished submit");
    }
}
