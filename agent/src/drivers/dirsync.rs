//! A new volume directory's entry made durable by its base directory's `fsync`, shared by the
//! creations that finish together: group commit, as the agent's state store does for its
//! transactions (docs/design.md §1, the agent). A creator calls [`sync_entry`] after its `mkdir`
//! returned; the call returns once an `fsync` of the base that *began after* that `mkdir` has
//! ended. One caller runs the `fsync` for every creator that arrived before it began; those
//! arriving while it runs wait and share the next one. Before, every creation ran its own:
//! at 64 submits in flight an agent ran one directory `fsync` per volume created beside 0.25–0.5 state
//! syncs (BENCHMARKS.md, "Submits (issue 39, ninth part)").
//!
//! Invariant: a caller's ticket is taken after its change and only a sync begun with the count
//! at or past that ticket releases it. Best effort as before: a file system that cannot sync a
//! directory (or a base that cannot be opened) releases its callers as a sync would.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, PoisonError};

/// One base directory's group: tickets handed out and synced.
#[derive(Default)]
struct Group {
    turns: Mutex<Turns>,
    done: Condvar,
}

#[derive(Default)]
struct Turns {
    /// Tickets handed out (the last one's number).
    asked: u64,
    /// Every ticket up to this one is covered by an ended sync.
    synced: u64,
    /// A caller is running the base's `fsync` now.
    running: bool,
    /// How many `fsync`s began and how many ended (for tests).
    began: u64,
    syncs: u64,
}

/// The groups, one per base directory as spelled by the inventory: a process has as many as
/// its provisioners have bases, so the map stays small. Two spellings of one directory make two
/// groups, each still correct.
static GROUPS: LazyLock<Mutex<HashMap<PathBuf, Arc<Group>>>> = LazyLock::new(Default::default);

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; a poisoned one holds consistent counts.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn group(base: &Path) -> Arc<Group> {
    let mut groups = locked(&GROUPS);
    match groups.get(base) {
        Some(g) => Arc::clone(g),
        None => Arc::clone(groups.entry(base.to_path_buf()).or_default()),
    }
}

/// Makes the entries changed in `base` before this call durable: returns after an `fsync` of
/// `base` that began after the call did (run here, or by another caller of the same base).
/// Blocking; call it on a blocking thread. Errors are ignored as a single `fsync`'s were
/// (some file systems cannot sync a directory).
pub fn sync_entry(base: &Path) {
    let group = group(base);
    let mut turns = locked(&group.turns);
    turns.asked += 1;
    let ticket = turns.asked;
    loop {
        if turns.synced >= ticket {
            return;
        }
        if turns.running {
            turns = group.done.wait(turns).unwrap_or_else(PoisonError::into_inner);
            continue;
        }
        // Run the sync for every ticket handed out so far, this one included.
        turns.running = true;
        turns.began += 1;
        let upto = turns.asked;
        drop(turns);
        if let Ok(dir) = std::fs::File::open(base) {
            let _ = dir.sync_all();
        }
        turns = locked(&group.turns);
        turns.running = false;
        turns.synced = turns.synced.max(upto);
        turns.syncs += 1;
        group.done.notify_all();
    }
}

/// How many `fsync`s of `base` [`sync_entry`] began and ended in this process, in that order
/// (0 for a base never synced).
pub fn syncs_of(base: &Path) -> (u64, u64) {
    locked(&GROUPS).get(base).map_or((0, 0), |g| {
        let t = locked(&g.turns);
        (t.began, t.syncs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn a_lone_caller_runs_its_own_sync() {
        let dir = tempfile::tempdir().unwrap();
        sync_entry(dir.path());
        sync_entry(dir.path());
        assert_eq!(syncs_of(dir.path()), (2, 2), "each lone call runs its own sync");
    }

    #[test]
    fn no_caller_returns_before_a_sync_begun_after_it_arrived_has_ended() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        let n = 32;
        let barrier = Arc::new(Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (base, barrier) = (base.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    let (began_before, _) = syncs_of(&base);
                    sync_entry(&base);
                    let (_, ended_after) = syncs_of(&base);
                    (began_before, ended_after)
                })
            })
            .collect();
        for t in threads {
            let (began_before, ended_after) = t.join().unwrap();
            // Syncs run one at a time: sync number `began_before + 1` began after the caller
            // arrived; it must have ended (one already running then does not count).
            assert!(
                ended_after > began_before,
                "returned when {ended_after} syncs had ended, {began_before} had begun before it came"
            );
        }
    }

    #[test]
    fn callers_that_wait_for_a_running_sync_share_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        let g = group(&base);
        // A sync in flight (this test plays it): the callers arriving now must wait for it.
        locked(&g.turns).running = true;
        let n = 8;
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let base = base.clone();
                std::thread::spawn(move || sync_entry(&base))
            })
            .collect();
        while locked(&g.turns).asked < n {
            std::thread::yield_now();
        }
        {
            // The played sync ends, covering none of them (it began before they came).
            let mut t = locked(&g.turns);
            t.running = false;
            g.done.notify_all();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(syncs_of(&base), (1, 1), "{n} waiting callers share one sync");
    }
}
