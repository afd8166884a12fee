//! The web view's pages and index on real decisions (the offline funnel on synthetic
//! clusters): hostile names are escaped, the funnel is drawn for every cluster, and the index
//! keeps the latest revision of each decision.

use fedvol_common::funnel::PlanRequest;
use fedvol_common::synth::{self, SynthSizes};
use fedvol_proto::decisions::{DecisionState, StoredDecision};

use super::index::{Filter, Index, Slot};
use super::pages;
use crate::feed::FeedEvent;

const HOSTILE: &str = "<script>alert(1)</script>";

/// A committed decision of `workflow` by `user`, planned offline on two synthetic clusters
/// (`east`, `we<i>st`); also the render tests' fixture.
pub(crate) fn stored(workflow: &str, user: &str) -> StoredDecision {
    let sizes = SynthSizes {
        hosts: 4,
        provisioners: 2,
        volumes: 3,
    };
    let inventories = [synth::cluster("east", sizes), synth::cluster("we<i>st", sizes)];
    let mut wf = synth::workflow(1, 1);
    wf.name = workflow.to_string();
    let request = PlanRequest::new("r1", wf, user).with_seed(7).with_trace_limit(5);
    let decision = fedvol_common::offline::plan_locally(&inventories, &request);
    StoredDecision {
        priority_class: None,
        priority: 0,
        wait_for_capacity: false,
        queued_ms: None,
        run_failure: None,
        completing: None,
        state: DecisionState::Committed,
        decision,
        request,
        attempts: vec![],
        completion: None,
        updated_ms: 1_740_830_405_000,
        dry_run: false,
        request_digest: None,
    }
}

#[test]
fn hostile_names_are_escaped_on_every_page() {
    let s = stored(HOSTILE, "mallory\"><b>");
    let page = pages::decision::body("r1", &s, Some(HOSTILE)).into_string();
    assert!(!page.contains("<script>") && !page.contains("<i>st"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{page}");
    assert!(page.contains("we&lt;i&gt;st"), "{page}");
    assert!(page.contains("mallory&quot;&gt;&lt;b&gt;"), "{page}");

    let row = pages::list::row("r1", &Slot::Live(Box::new(super::index::Row::of("r1".into(), &s)))).into_string();
    assert!(!row.contains("<script>") && row.contains("&lt;script&gt;"), "{row}");
    assert!(!row.contains("<b>"), "{row}");
}

#[test]
fn the_decision_page_draws_every_clusters_funnel_with_counts() {
    let s = stored("train", "alice");
    let page = pages::decision::body("r1", &s, None).into_string();
    for (name, c) in &s.decision.clusters {
        let name = maud::html! { (name) }.into_string();
        assert!(
            page.contains(&format!("data-cluster=\"{name}\"><h3>")),
            "card of {name}"
        );
        for t in &c.trace {
            assert!(page.contains(&format!("data-stage=\"{}\"", t.stage)), "{}", t.stage);
            assert!(page.contains(&format!("{}/{}</td>", t.passed, t.considered)));
        }
    }
    assert!(page.contains("data-rule=\"feasible\""), "the choice steps");
}

fn put(key: &str, revision: u64, s: &StoredDecision) -> FeedEvent {
    FeedEvent::Put {
        key: key.into(),
        revision,
        summary: Box::new(fedvol_proto::coordinator::DecisionSummary::of(key.into(), s)),
        clusters: fedvol_proto::coordinator::ClusterCounts::of(s),
    }
}

#[test]
fn the_index_keeps_the_latest_revision_and_reports_changes_in_order() {
    let index = Index::new();
    let mut s = stored("train", "alice");
    index.apply(put("a", 3, &s));
    s.state = DecisionState::Completed;
    index.apply(put("a", 5, &s));
    // A watch restarted from history sends an older value again: nothing changes.
    s.state = DecisionState::Planned;
    index.apply(put("a", 4, &s));
    index.apply(put("b", 6, &stored("infer", "bob")));
    assert_eq!(index.last_revision(), 6);

    let (rows, total) = index.rows(&Filter::default());
    assert_eq!(total, 2);
    match &rows.iter().find(|(k, _)| k == "a").map(|(_, s)| s) {
        Some(Slot::Live(r)) => assert_eq!(r.summary.state, DecisionState::Completed),
        other => panic!("{other:?}"),
    }
    let alice = Filter {
        user: Some("alice".into()),
        ..Filter::default()
    };
    assert_eq!(index.rows(&alice).1, 1);

    index.apply(FeedEvent::Removed {
        key: "a".into(),
        revision: 7,
    });
    assert_eq!(
        index.rows(&Filter::default()).1,
        1,
        "a removed decision leaves the list"
    );
    let changes: Vec<(u64, String)> = index.changes_after(4).into_iter().map(|(r, k, _)| (r, k)).collect();
    assert_eq!(changes, vec![(6, "b".to_string()), (7, "a".to_string())]);
}

/// A commit attempt stored `pending` (sent, its outcome never recorded: the cluster may have
/// rolled it back) is in doubt, not `ok`, in `decisions show` and on the decision page.
#[test]
fn a_pending_commit_attempt_reads_as_in_doubt_not_ok() {
    let mut s = stored("train", "alice");
    s.state = DecisionState::Planned;
    s.attempts = vec![fedvol_proto::decisions::CommitAttempt {
        cluster: "east".into(),
        attempt: 1,
        pending: true,
        ok: false,
        error: None,
        volumes: vec![],
        jobs: vec![],
    }];
    let text = crate::render::stored::stored_table(&s, false);
    assert!(text.contains("commit on east: in doubt"), "{text}");
    assert!(!text.contains("commit on east: ok"), "{text}");
    // A pending attempt stored with `ok` set (written before the outcome was known) is still
    // in doubt.
    s.attempts[0].ok = true;
    let text = crate::render::stored::stored_table(&s, false);
    assert!(text.contains("commit on east: in doubt"), "{text}");
    let page = pages::decision::body("r1", &s, None).into_string();
    assert!(page.contains("in doubt"), "{page}");
    assert!(!page.contains(">committed<"), "{page}");
}

/// A decision stored before names were checked, whose workflow and volume names hold U+202E
/// (right-to-left override) and U+200B (zero width space): the page shows them escaped
/// (Unicode TR #36 §2.1), never raw.
#[test]
fn spoofing_characters_of_a_stored_decision_are_escaped_on_the_page() {
    let mut s = stored("invoice\u{202e}fdp.exe", "alice");
    for c in s.decision.clusters.values_mut() {
        c.volumes = c
            .volumes
            .drain(..)
            .map(|(k, v)| (format!("scr\u{200b}atch-{k}"), v))
            .collect();
    }
    let viewer = super::Viewer { user: "alice".into() };
    let page = super::html(
        "Decision r1",
        super::Nav::Decisions,
        &viewer,
        pages::decision::body("r1", &s, None),
    );
    assert!(!page.contains('\u{202e}') && !page.contains('\u{200b}'), "{page}");
    assert!(page.contains("invoice\\u{202e}fdp.exe"), "{page}");
    assert!(page.contains("scr\\u{200b}atch-"), "{page}");
}

/// The `Host` names the view answers to (OWASP, DNS rebinding): its own address, `localhost`
/// on loopback, the `--allowed-host` names (with the bound port unless they give one), case
/// aside; nothing else.
#[test]
fn the_host_check_accepts_the_view_s_own_names_only() {
    let check = super::HostCheck::new(
        "127.0.0.1:8080".parse().unwrap(),
        &["View.Example.org".into(), "proxy.example:443".into()],
    );
    for ok in [
        "127.0.0.1:8080",
        "localhost:8080",
        "LocalHost:8080",
        "view.example.org:8080",
        "proxy.example:443",
    ] {
        assert!(check.allows(ok), "{ok}");
    }
    for bad in [
        "",
        "127.0.0.1",
        "localhost",
        "attacker.example:8080",
        "view.example.org",
        "proxy.example:8080",
        "127.0.0.1:8081",
    ] {
        assert!(!check.allows(bad), "{bad}");
    }
    let v6 = super::HostCheck::new("[::1]:80".parse().unwrap(), &[]);
    assert!(v6.allows("[::1]") && v6.allows("[::1]:80") && v6.allows("localhost"));
    let wide = super::HostCheck::new("0.0.0.0:8080".parse().unwrap(), &[]);
    assert!(wide.allows("0.0.0.0:8080") && !wide.allows("localhost:8080"));
}

/// A decision whose cluster ran its jobs on Slurm: `decisions show` and the decision page list
/// each job with its Slurm id, state and exit code, and why the workflow failed.
#[test]
fn jobs_run_by_slurm_are_shown_with_their_states() {
    use fedvol_proto::batch::{BatchJob, JobState};
    let mut s = stored("train", "alice");
    s.state = DecisionState::Failed;
    let job = |name: &str, id: &str, state, exit_code| BatchJob {
        job: name.into(),
        id: id.into(),
        state,
        exit_code,
        signal: None,
        reason: None,
        submitted_ms: 1_700_000_000_000,
        started_ms: Some(1_700_000_001_000),
        ended_ms: Some(1_700_000_005_000),
        user: Some("alice".into()),
        output: Some(format!("/home/alice/fedvol/r1/{name}-{id}.out")),
    };
    let jobs = vec![
        job("prep", "41", JobState::Failed, Some(3)),
        job("train", "42", JobState::Cancelled, None),
    ];
    s.run_failure = fedvol_proto::batch::failure(&jobs);
    s.attempts = vec![fedvol_proto::decisions::CommitAttempt {
        cluster: "east".into(),
        attempt: 1,
        pending: false,
        ok: true,
        error: None,
        volumes: vec![],
        jobs,
    }];
    let text = crate::render::stored::stored_table(&s, false);
    assert!(
        text.contains("job prep (Slurm job 41): failed, exit code 3, started 2023-11-14T22:13:21Z"),
        "{text}"
    );
    assert!(text.contains("job train (Slurm job 42): cancelled"), "{text}");
    assert!(
        text.contains("workflow failed: job `prep` (Slurm job 41) ended failed with exit code 3"),
        "{text}"
    );
    assert!(
        text.contains("\n    as alice, output /home/alice/fedvol/r1/prep-41.out\n"),
        "where each job's output is: {text}"
    );
    let page = pages::decision::body("r1", &s, None).into_string();
    assert!(page.contains("<td class=\"mono\">41</td>"), "{page}");
    assert!(page.contains(">cancelled<"), "{page}");
    assert!(page.contains("<td>alice</td>"), "{page}");
    assert!(
        page.contains("<td class=\"mono\">/home/alice/fedvol/r1/train-42.out</td>"),
        "{page}"
    );
    // A run ended by `fedvol cancel`: its own final state, in the table and on the page.
    s.state = DecisionState::Cancelled;
    let text = crate::render::stored::stored_table(&s, false);
    assert!(text.to_lowercase().contains("cancelled"), "{text}");
    let page = pages::decision::body("r1", &s, None).into_string();
    assert!(page.contains(">cancelled<"), "{page}");
}

/// Why a workflow failed comes first wherever its decision is shown: in the first lines of
/// `decisions show` (not after the clusters, volumes, jobs and attempts) and among the decision
/// page's facts, before its clusters and funnel.
#[test]
fn a_failed_workflows_reason_comes_first_in_show_and_on_the_page() {
    use fedvol_proto::batch::{BatchJob, JobState};
    let mut s = stored("train", "alice");
    s.state = DecisionState::Failed;
    let jobs = vec![BatchJob {
        job: "prep".into(),
        id: "41".into(),
        state: JobState::Failed,
        exit_code: Some(3),
        signal: None,
        reason: None,
        submitted_ms: 1_700_000_000_000,
        started_ms: Some(1_700_000_001_000),
        ended_ms: Some(1_700_000_005_000),
        user: None,
        output: None,
    }];
    s.run_failure = fedvol_proto::batch::failure(&jobs);
    let why = "job `prep` (Slurm job 41) ended failed with exit code 3";
    let text = crate::render::stored::stored_table(&s, false);
    let line = text
        .lines()
        .position(|l| l.contains(why))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line < 3,
        "the reason is on line {} of {}:\n{text}",
        line + 1,
        text.lines().count()
    );
    assert_eq!(text.matches(why).count(), 1, "said once: {text}");
    let page = pages::decision::body("r1", &s, None).into_string();
    let at = page.find(why).unwrap_or_else(|| panic!("{page}"));
    let clusters = page.find("<h2>Clusters</h2>").unwrap_or_else(|| panic!("{page}"));
    assert!(at < clusters, "the reason is after the clusters: {page}");
    assert_eq!(page.matches(why).count(), 1, "said once: {page}");
}

/// A summarized cluster's card links to its whole answer (`?whole=`); asked, and still a
/// summary, it says its agent keeps the whole answer no longer.
#[test]
fn a_summary_links_to_its_whole_answer_and_says_when_it_is_gone() {
    let mut s = stored("w", "alice");
    let name = s.decision.clusters.keys().next().cloned().unwrap();
    s.decision.clusters[&name].summarize();
    let page = pages::decision::body("r1", &s, None).into_string();
    assert!(
        page.contains(&format!("href=\"?whole={name}#cluster-{name}\"")),
        "{page}"
    );
    assert!(!page.contains("keeps no whole answer"), "{page}");
    let page = pages::decision::body_with("r1", &s, None, Some(&name)).into_string();
    assert!(
        page.contains("keeps no whole answer for this request any more"),
        "{page}"
    );
    assert!(!page.contains("?whole="), "{page}");
}

/// The clusters page spells a heartbeat's age as `fedvol clusters` does (one spelling of an
/// age in every view): `12s ago`, never another form of the same time.
#[test]
fn the_clusters_page_spells_ages_as_the_terminal_does() {
    let reply = fedvol_proto::coordinator::ClustersReply {
        clusters: vec![fedvol_proto::coordinator::ClusterInfo {
            name: "east".into(),
            alive: true,
            suspect: false,
            last_seen_ms: fedvol_proto::now_ms().saturating_sub(12_300),
            inventory_version: "v1".into(),
            load: 0.5,
            holds: 0,
            instances: vec![],
            degraded: None,
            restoring: false,
            drain: None,
        }],
        drained_unknown: Vec::new(),
    };
    let page = pages::clusters::body(&reply).into_string();
    assert!(page.contains("(12s ago)"), "{page}");
}

/// The what-if page: the form keeps what was asked, the counts and each changed decision are
/// shown with what it was and would be, and every name (a cluster, a request id, a reason) is
/// escaped; an error is shown in place of the report.
#[test]
fn the_what_if_page_shows_the_report_and_escapes_names() {
    use fedvol_common::whatif::{DecisionWhatIf, Outcome, Report, Transition, VolumePick};
    use fedvol_proto::coordinator::WhatIfReply;
    let mut was = Outcome {
        cluster: Some(HOSTILE.into()),
        ..Outcome::default()
    };
    was.volumes.insert(
        "scratch".into(),
        VolumePick {
            provisioner: Some("fast".into()),
            volume: Some("pvc-1".into()),
            action: None,
        },
    );
    let d = DecisionWhatIf {
        request_id: "r1".into(),
        workflow: "w".into(),
        user: "alice".into(),
        project: "default".into(),
        state: "committed".into(),
        transition: Transition::PlacedToRefused,
        drift: false,
        kept_on_tie: false,
        quota_changed: false,
        was,
        would_be: Outcome::refused("nothing_fits", HOSTILE),
        today: None,
    };
    let mut report = Report {
        planned: 2,
        changed: 1,
        decisions: vec![d],
        ..Report::default()
    };
    report.clusters.insert(HOSTILE.into(), Default::default());
    let r = WhatIfReply {
        changes: vec![format!("drain {HOSTILE}")],
        clusters: vec![],
        selected: 2,
        unreadable: 0,
        planning_ms: 1.0,
        report,
        cut: None,
        quotas: Vec::new(),
    };
    let form = pages::what_if::Form {
        drain: Some(HOSTILE.into()),
        remove: None,
        since: Some("2h".into()),
    };
    let page = pages::what_if::body(&form, Ok(&r)).into_string();
    assert!(!page.contains("<script>"), "{page}");
    assert!(page.contains("Changed: </strong>1 of 2"), "{page}");
    assert!(
        page.contains("placed → refused") && page.contains("volume scratch: fast/pvc-1 → -"),
        "{page}"
    );
    assert!(page.contains("value=\"2h\""), "the form keeps what was asked: {page}");
    let failed = pages::what_if::body(&form, Err(HOSTILE)).into_string();
    assert!(
        failed.contains("class=\"alert\"") && !failed.contains("<script>"),
        "{failed}"
    );
    assert_eq!(
        pages::what_if::Form::names(&Some(" a, ,b ".into())),
        ["a".to_string(), "b".to_string()]
    );
}

/// A decision whose `complete` its cluster has not answered says so on its page, with when it
/// was asked; the cluster's name escaped like every other.
#[test]
fn an_unanswered_complete_is_shown_on_the_page() {
    let mut s = stored("w", "alice");
    let plain = pages::decision::body("r1", &s, None).into_string();
    assert!(!plain.contains("id=\"completing\""), "{plain}");
    s.decision.chosen_cluster = Some(HOSTILE.into());
    s.completing = Some(fedvol_proto::decisions::Completing {
        since_ms: 1_740_830_405_000,
        cancel: false,
    });
    let page = pages::decision::body("r1", &s, None).into_string();
    assert!(page.contains("id=\"completing\""), "{page}");
    assert!(page.contains("complete asked 2025-03-01T12:00:05Z"), "{page}");
    assert!(!page.contains("<script>"), "{page}");
}
