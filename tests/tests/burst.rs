//! Bursts of submits against scarce capacity, short forms (issue 13; the long form, S = 100
//! over C = 4 clusters, is `fedvol-burst` in RELIABILITY.md). Counts, never times: as many
//! submits as slots all commit; four times as many commit exactly S and the rest are refused
//! only once the capacity is gone; nothing is over-committed.

use fedvol_tests::burst::{BurstSpec, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_as_many_submits_as_slots_commits_them_all() {
    let report = run(&BurstSpec::new(12, 3, 12)).await;
    eprintln!("{report}");
    assert_eq!(report.committed, 12, "{report}");
    assert_eq!((report.refused, report.errors.len()), (0, 0), "{report}");
    assert_eq!(report.over_committed(), 0, "{report}");
    report.check.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_times_as_many_submits_commit_exactly_the_slots_and_refuse_only_when_full() {
    let report = run(&BurstSpec::new(12, 3, 48)).await;
    eprintln!("{report}");
    assert_eq!(report.committed, 12, "{report}");
    assert_eq!(report.refused, 36, "{report}");
    assert_eq!(report.refused_while_free, 0, "{report}");
    assert!(report.errors.is_empty(), "{report}");
    assert_eq!(report.over_committed(), 0, "{report}");
    report.check.assert_clean();
}
