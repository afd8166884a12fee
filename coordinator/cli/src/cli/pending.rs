//! The CLI's unfinished submits: a plain `fedvol submit` (no `--request-id`) makes a fresh
//! request id. When the CLI does not learn the outcome of that submit (no answer in time, the
//! coordinator stopped mid-commit, the commit is in doubt, Ctrl-C, `kill -9`), running the same
//! command again must not book a second slot under another fresh id. So the CLI keeps, per
//! user, subject prefix and request digest ([`fedvol_proto::coordinator::SubmitMsg::digest`]:
//! the workflow, groups, seed and choice options), the request id of each submit whose outcome
//! it has not learnt, and the next plain submit of the same request resumes one of them;
//! `--new` submits afresh. An entry is dropped once an answer says what became of the request
//! (committed, failed, queued, or refused for good).
//!
//! This is Nomad's rule for job registration retried by a client (Nomad: job register
//! idempotency via `JobModifyIndex` / `EnforceIndex`) and the AWS SDKs' client tokens
//! (Amazon EC2: "Ensuring idempotency", `ClientToken` reused on retry): the client that retries
//! keeps the token of the request it could not see finish.
//!
//! **Several runs at once.** One user's runs share the file (`for i in 1 2 3; do fedvol submit
//! wf.yaml & done`). A submit that is still running is not unfinished: each submit holds an
//! exclusive `flock` on its entry's lock file (`pending-submits.d/<request id>.lock`) for its
//! whole life ([`Claim`]); the kernel releases it when the process ends, however it ends. A
//! plain submit resumes only an entry whose lock it can take, i.e. one whose run has ended
//! without learning the outcome; a running sibling's entry is left alone, so parallel plain
//! submits are independent requests. Every read-modify-write of the file holds an exclusive
//! `flock` on `pending-submits.json.lock`, so no writer loses another's update; the file itself
//! is replaced atomically (temporary file and rename), so a reader never sees half of it.
//!
//! The file is `$FEDVOL_STATE_DIR/pending-submits.json`, else
//! `$XDG_STATE_HOME/fedvol/pending-submits.json`, else `~/.local/state/fedvol/…`. Entries older
//! than [`MAX_AGE_MS`] are dropped (the coordinators settle an abandoned decision within
//! minutes).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Entries older than this are forgotten, ms (a week).
pub const MAX_AGE_MS: u64 = 7 * 24 * 3600 * 1000;

/// An unfinished submit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Its key ([`key`]): user, subject prefix and request digest.
    #[serde(default)]
    pub key: String,
    /// Its request id.
    pub request_id: String,
    /// The workflow's name (for people reading the file).
    pub workflow: String,
    /// When it was first sent, ms since the epoch.
    pub since_ms: u64,
    /// The process id of the last run that sent it (0: not known, a file of an earlier
    /// version).
    #[serde(default)]
    pub pid: u32,
    /// When that run started it, ms since the epoch (0: not known).
    #[serde(default)]
    pub run_ms: u64,
}

/// The file's contents.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Book {
    /// The unfinished submits, oldest first.
    #[serde(default)]
    submits: Vec<Entry>,
    /// The layout of earlier versions (key → entry, one per key); read, moved into `submits`,
    /// never written.
    #[serde(default, skip_serializing)]
    pending: BTreeMap<String, Entry>,
}

/// Why the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    /// No place for the file: none of the variables of the module docs is set.
    #[error("no directory for the CLI's state: set FEDVOL_STATE_DIR, XDG_STATE_HOME or HOME")]
    NoDirectory,
    /// The file (or a lock file beside it) could not be read, written or locked.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io_err(p: &Path) -> impl Fn(std::io::Error) -> PendingError + '_ {
    move |source| PendingError::Io {
        path: p.display().to_string(),
        source,
    }
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

/// The lock file of the entry of `request_id` beside the file `p`: its characters other than
/// ASCII letters, digits, `-`, `_` and `.` become `_` (request ids never hold `/`, and those
/// the CLI makes hold none of them).
fn entry_lock_path(p: &Path, request_id: &str) -> PathBuf {
    let name: String = request_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    p.with_extension("d").join(format!("{name}.lock"))
}

/// The file's lock, held while it is read, changed and written: an exclusive `flock` on
/// `<file>.lock`, released when dropped.
struct BookLock(#[allow(dead_code)] File);

fn lock_book(p: &Path) -> Result<BookLock, PendingError> {
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(p))?;
    }
    let lp = p.with_extension("json.lock");
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lp)
        .map_err(io_err(&lp))?;
    f.lock().map_err(io_err(&lp))?;
    Ok(BookLock(f))
}

fn load(p: &Path) -> Book {
    // An unreadable or damaged file is no unfinished submit (a fresh id is made, as before).
    let mut book: Book = std::fs::read(p)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    for (k, mut e) in std::mem::take(&mut book.pending) {
        e.key = k;
        book.submits.push(e);
    }
    book
}

fn save(p: &Path, book: &Book) -> Result<(), PendingError> {
    let io = io_err(p);
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).map_err(&io)?;
    }
    let tmp = p.with_extension(format!("json.{}", std::process::id()));
    let body = serde_json::to_vec_pretty(book).map_err(|e| io(std::io::Error::other(e)))?;
    std::fs::write(&tmp, body).map_err(&io)?;
    std::fs::rename(&tmp, p).map_err(io)
}

/// Takes the lock of the entry of `request_id` beside `p` without waiting: `Ok(Some(file))`
/// holding it, `Ok(None)` when another process holds it (its run is still going).
fn try_lock_entry(p: &Path, request_id: &str) -> Result<Option<File>, PendingError> {
    let lp = entry_lock_path(p, request_id);
    if let Some(dir) = lp.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(&lp))?;
    }
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lp)
        .map_err(io_err(&lp))?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io_err(&lp)(e)),
    }
}

/// A submit's hold on its entry, for the life of the submit: while it is held no other plain
/// submit resumes the request. Dropped without [`Claim::finish`] (the outcome unknown, or the
/// process ended), the entry stays, for the next plain submit to resume.
#[derive(Debug)]
pub struct Claim {
    file: PathBuf,
    request_id: String,
    /// The entry's lock, held while this value lives.
    _lock: File,
}

impl Claim {
    /// The request id this submit sends.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The outcome is known: drops the entry and its lock file.
    ///
    /// Errors: [`PendingError`] when the file cannot be written.
    pub fn finish(self) -> Result<(), PendingError> {
        drop_entries(&self.file, |e| e.request_id == self.request_id)
    }
}

/// What [`begin`] gave: the claim on the entry this submit sends under, and the earlier run it
/// continues when it resumes one.
#[derive(Debug)]
pub struct Begun {
    /// This submit's entry, locked.
    pub claim: Claim,
    /// The unfinished submit it resumes (as the file had it before), if any.
    pub resumed: Option<Entry>,
}

/// Starts a plain submit under `key` (workflow `workflow`), at `now_ms`: with `resume`, takes
/// over the oldest unfinished submit under `key` whose run has ended (its lock is free);
/// otherwise, or when there is none, records a new entry under request id `fresh_id`. Either
/// way the entry is locked for the life of the returned [`Claim`] and names this process as
/// its run. Entries older than [`MAX_AGE_MS`] are dropped on the way.
///
/// Errors: [`PendingError`] when the file or a lock file cannot be written or locked.
pub fn begin(key: &str, workflow: &str, fresh_id: &str, resume: bool, now_ms: u64) -> Result<Begun, PendingError> {
    let p = path().ok_or(PendingError::NoDirectory)?;
    let _book_lock = lock_book(&p)?;
    let mut book = load(&p);
    let (kept, lapsed): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut book.submits)
        .into_iter()
        .partition(|e| now_ms.saturating_sub(e.since_ms) < MAX_AGE_MS);
    book.submits = kept;
    for e in lapsed {
        // Best effort: a lock file left behind holds nothing once its entry is gone.
        let _ = std::fs::remove_file(entry_lock_path(&p, &e.request_id));
    }
    let me = std::process::id();
    if resume {
        for i in 0..book.submits.len() {
            let e = &book.submits[i];
            if e.key != key {
                continue;
            }
            // Held: a sibling run is still going; it is not unfinished.
            let Some(lock) = try_lock_entry(&p, &e.request_id)? else {
                continue;
            };
            let earlier = e.clone();
            let e = &mut book.submits[i];
            e.pid = me;
            e.run_ms = now_ms;
            save(&p, &book)?;
            return Ok(Begun {
                claim: Claim {
                    file: p,
                    request_id: earlier.request_id.clone(),
                    _lock: lock,
                },
                resumed: Some(earlier),
            });
        }
    }
    let lock = try_lock_entry(&p, fresh_id)?.ok_or_else(|| {
        io_err(&entry_lock_path(&p, fresh_id))(std::io::Error::other(
            "a fresh request id's lock is held by another process",
        ))
    })?;
    book.submits.push(Entry {
        key: key.to_string(),
        request_id: fresh_id.to_string(),
        workflow: workflow.to_string(),
        since_ms: now_ms,
        pid: me,
        run_ms: now_ms,
    });
    save(&p, &book)?;
    Ok(Begun {
        claim: Claim {
            file: p,
            request_id: fresh_id.to_string(),
            _lock: lock,
        },
        resumed: None,
    })
}

/// Drops the entries `gone` selects and their lock files, under the file's lock.
fn drop_entries(p: &Path, gone: impl Fn(&Entry) -> bool) -> Result<(), PendingError> {
    if !p.exists() {
        return Ok(());
    }
    let _book_lock = lock_book(p)?;
    let mut book = load(p);
    let (dropped, kept): (Vec<Entry>, Vec<Entry>) = book.submits.into_iter().partition(|e| gone(e));
    book.submits = kept;
    if dropped.is_empty() {
        return Ok(());
    }
    save(p, &book)?;
    for e in dropped {
        // Removed under the file's lock: a submit looking for an entry to resume holds that
        // lock too, so it never locks a file of an entry that is gone.
        match std::fs::remove_file(entry_lock_path(p, &e.request_id)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_err(p)(err));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Forgets the submit under `key` with request id `request_id` (its outcome is known).
///
/// Errors: [`PendingError`] when the file cannot be written.
pub fn forget(key: &str, request_id: &str) -> Result<(), PendingError> {
    let p = path().ok_or(PendingError::NoDirectory)?;
    drop_entries(&p, |e| e.key == key && e.request_id == request_id)
}

/// Forgets every unfinished submit under request id `request_id` (it was completed, or found
/// failed).
///
/// Errors: [`PendingError`] when the file cannot be written.
pub fn forget_request(request_id: &str) -> Result<(), PendingError> {
    let Some(p) = path() else {
        return Ok(());
    };
    drop_entries(&p, |e| e.request_id == request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, id: &str) -> Entry {
        Entry {
            key: key.into(),
            request_id: id.into(),
            workflow: "wf".into(),
            since_ms: 1_000,
            pid: 1,
            run_ms: 1_000,
        }
    }

    #[test]
    fn an_entry_is_kept_until_forgotten_and_a_damaged_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pending-submits.json");
        let k = key("alice", "fedvol.v1", "d1");
        let book = Book {
            submits: vec![entry(&k, "wf-1")],
            ..Book::default()
        };
        save(&p, &book).unwrap();
        let back = load(&p);
        assert_eq!(back.submits, [entry(&k, "wf-1")]);
        drop_entries(&p, |e| e.request_id == "wf-1").unwrap();
        assert!(load(&p).submits.is_empty());
        std::fs::write(&p, b"not json").unwrap();
        assert!(load(&p).submits.is_empty(), "a damaged file is no unfinished submit");
    }

    /// A file written by an earlier version (one entry per key) is read as one entry each.
    #[test]
    fn the_earlier_layout_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pending-submits.json");
        std::fs::write(
            &p,
            r#"{"pending": {"alice fedvol.v1 d1": {"request_id": "wf-1", "workflow": "wf", "since_ms": 5}}}"#,
        )
        .unwrap();
        let back = load(&p);
        assert_eq!(back.submits.len(), 1);
        assert_eq!(back.submits[0].key, "alice fedvol.v1 d1");
        assert_eq!(back.submits[0].request_id, "wf-1");
    }

    /// An entry whose lock is held (a run still going) cannot be taken; once its holder lets
    /// go (the process ended), it can.
    #[test]
    fn a_held_entry_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pending-submits.json");
        let held = try_lock_entry(&p, "wf-1").unwrap().expect("free at first");
        assert!(
            try_lock_entry(&p, "wf-1").unwrap().is_none(),
            "held by another open file"
        );
        drop(held);
        assert!(try_lock_entry(&p, "wf-1").unwrap().is_some(), "free once let go");
        assert_eq!(
            entry_lock_path(&p, "a b/c"),
            dir.path().join("pending-submits.d/a_b_c.lock")
        );
    }
}
