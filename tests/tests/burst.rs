//! Bursts of submits against scarce capacity, short forms (the long form, S = 100
//! over C = 4 clusters, is `fedvol-burst` in RELIABILITY.md). Counts, never times: as many
//! submits as slots all commit; four times as many commit exactly S and the rest are refused
//! only once the capacity is gone; nothing is over-committed.

use fedvol_tests::burst::{BurstSpec, run};
use fedvol_tests::shipped::Shipped;

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

/// Forty racing submits from two users through two coordinators onto one cluster with exactly
/// ten one-job places, under the shipped NATS file `nats`, three times: each round commits
/// exactly ten and refuses the rest only once the ten are taken.
///
/// Under the shipped permissions an agent may answer only through `allow_responses`, which
/// grants one answer per reply subject of a received request (NATS docs, "Authorization":
/// `allow_responses`, default `max: 1`). When every concurrent plan to a cluster carried the
/// same reply subject, the second answer was refused by the server and the plan timed out:
/// 2 to 8 of 10 committed while places were free.
async fn forty_submits_commit_exactly_ten(nats: Shipped) {
    for round in 1..=3 {
        let spec = BurstSpec::new(10, 1, 40).from(2, 2).under(nats);
        let report = run(&spec).await;
        eprintln!("{nats:?} round {round}: {report}");
        assert_eq!(report.committed, 10, "{nats:?} round {round}: {report}");
        assert_eq!(report.refused, 30, "{nats:?} round {round}: {report}");
        assert_eq!(report.refused_while_free, 0, "{nats:?} round {round}: {report}");
        assert!(report.errors.is_empty(), "{nats:?} round {round}: {report}");
        assert_eq!(report.over_committed(), 0, "{nats:?} round {round}: {report}");
        report.check.assert_clean();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_single_conf_forty_racing_submits_commit_exactly_ten_three_rounds() {
    forty_submits_commit_exactly_ten(Shipped::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_secure_conf_forty_racing_submits_commit_exactly_ten_three_rounds() {
    forty_submits_commit_exactly_ten(Shipped::Secure).await;
}
