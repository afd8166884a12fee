//! What an admission at commit costs the agent's state, in process: no NATS, no driver, no
//! fsync in the timed part. One cluster of the benchmark's shape (`fedvol-bench`'s inventory:
//! 4 hostpath provisioners, 1,000 existing volumes, H hosts) and the benchmark's workflow;
//! N commits, each carrying its request (the agent plans it again on its current state, holds
//! what it chose, and records the commit with a new volume, as `fedvol submit` makes it do),
//! one after the other on one thread, the store synced every 500. Prints, for every 500
//! commits, the time per commit and the heap bytes still live per commit (a counting wrapper
//! around mimalloc, the agent's allocator).
//!
//! `cargo run --release -p fedvol-tests --example commit_loop -- [COMMITS=4000] [HOSTS=1000]`
//!
//! Deterministic in what it does (seeds are the commit's number), so two builds compare on
//! one machine without the federation's noise; BENCHMARKS.md, "Submits (issue 39, sixth part)".

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use fedvol_agent::state::core::{DriverResult, Next};
use fedvol_common::funnel::PlanRequest;
use fedvol_proto::agent::ActionMsg;
use fedvol_tests::bench::inventory::{Shape, inventory};
use fedvol_tests::bench::workflow::{GROUP, USER, workflow};

/// Heap bytes allocated and not yet freed.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: every call is passed to mimalloc unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const WINDOW: usize = 500;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("COMMITS and HOSTS are numbers"))
        .collect();
    let commits = args.first().copied().unwrap_or(4000);
    let hosts = args.get(1).copied().unwrap_or(1000);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let shape = Shape {
        hosts,
        provisioners: 4,
        volumes: 1000,
    };
    let inv = inventory("c00", shape, &dir.path().join("storage")).expect("the bench's inventory");
    let wf = workflow().expect("the bench's workflow");
    let (store, snap) = fedvol_agent::state::backend::Store::open(&dir.path().join("state.redb")).expect("the state");
    let ledger = fedvol_agent::state::ledger::Ledger::from_snapshot(snap);
    let mut core = fedvol_agent::state::Core::new("c00", inv, store, ledger, 30_000);
    println!("{commits} commits, one cluster of {hosts} hosts (1,000 volumes, 4 provisioners), one thread");
    println!("{:>8}  {:>12}  {:>22}", "commits", "us/commit", "live bytes per commit");
    let (mut timed, mut window_start) = (std::time::Duration::ZERO, Instant::now());
    let mut live_before = LIVE.load(Ordering::Relaxed);
    for i in 0..commits {
        let id = format!("loop-{i}");
        let request = PlanRequest::new(id.clone(), wf.clone(), USER)
            .with_groups([GROUP])
            .with_seed(i as u64)
            .with_trace_limit(5);
        let msg = ActionMsg {
            request: Some(request),
            attempt: 1,
            ..ActionMsg::new(&id, 0)
        };
        let Next::Run(work) = core.begin_commit(&msg, 1_000).expect("the store") else {
            panic!("commit {i} was refused: the bench's hosts hold millions of these");
        };
        let results = work
            .into_iter()
            .map(|w| {
                let source = format!("/storage/{}", w.volume.name);
                (w, DriverResult::Ok(source))
            })
            .collect();
        let reply = core.finish_commit(&id, results, 1_000).expect("the store");
        assert!(reply.ok, "commit {i}: {reply:?}");
        if (i + 1) % WINDOW == 0 {
            timed += window_start.elapsed();
            let per = window_start.elapsed().as_secs_f64() * 1e6 / WINDOW as f64;
            // Synced outside the timed part: queued writes are held until a sync.
            let store = core.store();
            store.sync_through(store.written()).expect("the sync");
            let live = LIVE.load(Ordering::Relaxed);
            println!(
                "{:>8}  {per:>12.1}  {:>22}",
                i + 1,
                (live - live_before) / WINDOW as isize
            );
            live_before = live;
            window_start = Instant::now();
        }
    }
    let done = (commits / WINDOW) * WINDOW;
    if done > 0 {
        println!(
            "mean over {done} commits: {:.1} us per commit",
            timed.as_secs_f64() * 1e6 / done as f64
        );
    }
}
