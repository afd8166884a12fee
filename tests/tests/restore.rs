//! Acknowledged decisions under restarts and retries, under the shipped single-server NATS
//! configuration (`deploy/nats/single.conf`, the shipped example users):
//! - an agent that lost its state and starts with `--init` admits no new commit before the
//!   coordinators restored the commits they stored for its cluster;
//! - a plain retry of `fedvol submit` after its coordinator died mid-commit resumes the same
//!   request instead of booking a second slot;
//! - one user's flood of dry runs is bounded and the coordinator's memory comes back.

use std::path::Path;
use std::time::{Duration, Instant};

use fedvol_tests::federation::slots_inventory;
use fedvol_tests::kit::{Kit, SLOT_WORKFLOW, agent_as, coordinator_as, fedvol_as, output_text, wait_clusters_as};
use fedvol_tests::{NatsServer, Spawned};

/// The shipped `single.conf`, listening on loopback ports with a temporary JetStream store.
fn single_server(kit: &Kit) -> NatsServer {
    kit.loopback_server("single.conf")
}

/// `fedvol -u alice <args>` as NATS user alice.
fn alice(url: &str, args: &[&str]) -> std::process::Output {
    fedvol_as(url, "alice", "alice", false, args)
}

/// The stored decision of `id`, as `fedvol decisions show -o json` prints it.
fn show(url: &str, id: &str) -> serde_json::Value {
    let o = alice(url, &["decisions", "show", id, "-o", "json"]);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(&o)))
}

/// The reconciler's lines of a coordinator's log.
fn reconciler_lines(coordinator: &Spawned) -> String {
    let log = coordinator.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("reconciler")).collect();
    lines.join("\n")
}

/// Writes the one-slot workflow to `<dir>/<name>.yaml`.
fn workflow(dir: &Path, name: &str) -> String {
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, SLOT_WORKFLOW).unwrap();
    p.display().to_string()
}

/// Submits `wf` under `id` until it is answered committed (the agent may still be starting).
async fn committed(url: &str, wf: &str, id: &str, coordinator: &Spawned) {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let o = alice(url, &["submit", wf, "--request-id", id, "-o", "json"]);
        if o.status.success() {
            let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(doc["state"], "committed", "{doc:#}");
            return;
        }
        assert!(
            Instant::now() < end,
            "{id} never committed: {}\ncoordinator's reconciler:\n{}",
            output_text(&o),
            reconciler_lines(coordinator)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Finding A. Kubernetes' PV controller never lets a new claim bind a volume whose claimRef
/// points at another claim, even when its cache was rebuilt (Kubernetes: PV controller,
/// syncVolume / IsVolumeBoundToClaim): what was acknowledged bound is restored before anything
/// new is admitted. Here: a cluster of exactly 2 slots, both committed; its agent is killed
/// with `kill -9`, its state wiped and started again with `--init`, and a submit comes at once.
/// The old decisions stay committed; the new one is refused (or waits), never committed over
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_agent_restores_its_commits_before_it_admits_a_new_one() {
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let coordinator = coordinator_as(&url, false, &[], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a");
    let inventory = slots_inventory("cluster-a", 2, &d, "all");
    // The agent waits for the coordinators' restore, as shipped (`restoreWaitMs` 60 s).
    let mut agent: Spawned = agent_as(&url, "cluster-a", false, &d, &inventory, &[]).await;
    wait_clusters_as(&url, false, &["cluster-a"]).await;
    // A new cluster's agent starts fresh too: it admits commits once a coordinator saw it.
    agent
        .wait_for_log("new commits are admitted", Duration::from_secs(20))
        .await;
    let wf = workflow(dir.path(), "slot");
    committed(&url, &wf, "old-1", &coordinator).await;
    committed(&url, &wf, "old-2", &coordinator).await;

    // The agent loses its state: kill -9, its data directory wiped, started fresh.
    agent.kill();
    std::fs::remove_dir_all(d.join("data")).unwrap();
    agent = agent_as(&url, "cluster-a", false, &d, &inventory, &[]).await;
    let o = alice(&url, &["submit", &wf, "--request-id", "new-1", "-o", "json"]);
    eprintln!("new submit right after the restart: {}", output_text(&o));

    // The gate opens because the coordinators restored the cluster (`restoreWaitMs` is 60 s:
    // it did not merely give up waiting), and the agent holds both old commits again.
    agent
        .wait_for_log(
            "the coordinators restored this cluster's commits",
            Duration::from_secs(20),
        )
        .await;
    eprintln!("coordinator's reconciler:\n{}", reconciler_lines(&coordinator));
    assert!(
        !agent.log().contains("no coordinator restored this cluster's commits"),
        "restored, not given up on: {}",
        agent.log()
    );
    let mut held = committed_on(&url, "cluster-a").await;
    held.sort();
    assert_eq!(held, ["old-1", "old-2"], "the fresh agent holds the restored commits");
    for id in ["old-1", "old-2"] {
        let doc = show(&url, id);
        assert_eq!(
            doc["state"],
            "committed",
            "an acknowledged commit stays committed: {id}: {doc:#}\nagent log:\n{}",
            agent.log()
        );
        let attempts = doc["attempts"].as_array().unwrap();
        assert!(
            attempts.len() >= 2
                && attempts
                    .last()
                    .is_some_and(|a| a["ok"] == true && a["cluster"] == "cluster-a"),
            "{id} carries its restoring commit attempt: {doc:#}"
        );
    }
    let new = show(&url, "new-1");
    assert_ne!(
        new["state"], "committed",
        "the new submit is not committed over the restored ones: {new:#}"
    );
    // Once restored, the cluster admits plans and is full again: a new submit is refused for
    // capacity by an answering cluster (not `restoring`).
    let o = alice(&url, &["submit", &wf, "--request-id", "new-2", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["state"], "failed", "{}", output_text(&o));
    let slot = &doc["decision"]["clusters"]["cluster-a"];
    assert_eq!(
        (slot["status"].as_str(), slot["feasible"].as_bool()),
        (Some("answered"), Some(false)),
        "cluster-a answers, and nothing fits: {doc:#}"
    );
    assert_eq!(o.status.code(), Some(2), "no cluster can place it: {}", output_text(&o));
}

/// A fresh federation under the shipped defaults: a coordinator, then an agent started with
/// `--init` and the restore gate as shipped (`restoreWaitMs` 60 s), and a submit the moment the
/// agent serves (from a client already connected, then from the CLI). A brand-new cluster has
/// nothing to restore, so it must admit the submit at once: the coordinator restores a cluster
/// on the heartbeat that says `restoring` (not at its next reconciler tick, up to 2 s later)
/// and, while the clusters that could place the workflow still answer `restoring`, asks them
/// again within the plan's deadline. Kubernetes' scheduler likewise keeps a pod whose nodes
/// are not ready yet pending and retries it rather than calling it unschedulable
/// (kube-scheduler: the scheduling queue's backoff and unschedulable pods).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_right_after_a_fresh_federation_starts_commits() {
    use fedvol_proto::coordinator::Submit;
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let coordinator = coordinator_as(&url, false, &[], &[]).await;
    let client = fedvol_tests::kit::client(&url, "alice", "_INBOX").await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a");
    let mut agent = agent_as(
        &url,
        "cluster-a",
        false,
        &d,
        &slots_inventory("cluster-a", 4, &d, "all"),
        &[],
    )
    .await;
    let small = fedvol_tests::load::small_workflow("first", 1);
    let msg = fedvol_tests::load::submit_msg("first-1", &small, false);
    let began = Instant::now();
    let r = fedvol_tests::load::coordinator_op::<Submit>(&client, "alice", &msg, Duration::from_secs(15))
        .await
        .unwrap();
    eprintln!(
        "first submit answered in {:.0} ms; the coordinator:\n{}",
        began.elapsed().as_secs_f64() * 1000.0,
        coordinator
            .log()
            .lines()
            .filter(|l| l.contains("reconciler") || l.contains("asking again"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let state = r.stored.as_ref().map(|s| s.state.as_str());
    assert_eq!(
        (state, r.error.as_ref().map(|e| e.code.to_string())),
        (Some("committed"), None),
        "the first submit, as the agent starts serving, commits: {r:#?}\ncoordinator's reconciler:\n{}",
        reconciler_lines(&coordinator)
    );
    let wf = workflow(dir.path(), "first");
    let o = alice(&url, &["submit", &wf, "-o", "json"]);
    let doc: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(&o)));
    assert_eq!(
        (o.status.code(), doc["state"].as_str()),
        (Some(0), Some("committed")),
        "{}",
        output_text(&o)
    );
    // The agent was restored (nothing to restore) and admits commits.
    agent
        .wait_for_log("new commits are admitted", Duration::from_secs(5))
        .await;
}

/// Stdout and stderr of `o`, stderr's lines joined (the CLI wraps its notes at 100 columns).
fn joined(o: &std::process::Output) -> String {
    output_text(o).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A cluster whose agent waits for its restore is not "nothing fits": with no reconciler
/// (`reconcileEveryMs: 0`, so nothing restores the fresh agent), `fedvol clusters` says the
/// cluster is restoring, and a submit no answering cluster can place waits within its deadline,
/// then answers the retryable `clusters_unavailable` (exit 75, explained), stored
/// `failed (unavailable)`, never exit 2. Kube-scheduler likewise keeps a pod whose plugin
/// could not decide (an `Error` status) apart from an unschedulable one, and retries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restoring_cluster_is_shown_and_a_submit_waiting_for_it_is_unavailable_not_nothing_fits() {
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let _coordinator = coordinator_as(&url, false, &["--reconcile-every-ms", "0"], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a");
    // The gate as shipped; nothing restores it in this test.
    let _agent = agent_as(
        &url,
        "cluster-a",
        false,
        &d,
        &slots_inventory("cluster-a", 2, &d, "all"),
        &[],
    )
    .await;
    let end = Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let o = alice(&url, &["clusters"]);
        let text = output_text(&o);
        if text.contains("cluster-a is restoring") {
            break text;
        }
        assert!(Instant::now() < end, "fedvol clusters never says restoring: {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("fedvol clusters:\n{listed}");
    assert!(listed.contains("restoring"), "{listed}");
    let o = alice(&url, &["clusters", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["clusters"][0]["restoring"], true, "{doc:#}");

    let wf = workflow(dir.path(), "wait");
    let began = Instant::now();
    let o = alice(&url, &["submit", &wf, "--request-id", "r-1"]);
    let took = began.elapsed();
    let text = joined(&o);
    eprintln!(
        "submit while cluster-a restores ({:.1} s): {}",
        took.as_secs_f64(),
        output_text(&o)
    );
    assert_eq!(o.status.code(), Some(75), "retryable, not nothing fits (2): {text}");
    assert!(text.contains("state: failed (unavailable)"), "{text}");
    assert!(
        text.contains("cluster-a (restoring)"),
        "names the cluster and why: {text}"
    );
    assert!(text.contains("(clusters_unavailable)"), "{text}");
    assert!(text.contains("not \"nothing fits\""), "the CLI explains: {text}");
    assert!(!text.contains("no cluster can place this workflow"), "{text}");
    let doc = show(&url, "r-1");
    assert_eq!(
        (doc["state"].as_str(), doc["decision"]["refused"]["code"].as_str()),
        (Some("failed"), Some("clusters_unavailable")),
        "{doc:#}"
    );
    let list = output_text(&alice(&url, &["decisions", "list"]));
    assert!(list.contains("failed (unavailable)"), "{list}");
}

/// A cluster killed (`kill -9`) is only unreachable: the submit that only it could place is
/// answered `clusters_unavailable` (exit 75), and the same submit under the same request id,
/// with `--wait`, is planned afresh and commits once the agent is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_only_an_unreachable_cluster_could_place_is_retryable_under_its_id() {
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let _coordinator = coordinator_as(&url, false, &[], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let (da, db) = (dir.path().join("a"), dir.path().join("b"));
    let inv_a = slots_inventory("cluster-a", 2, &da, "all");
    let mut a = agent_as(&url, "cluster-a", false, &da, &inv_a, &[]).await;
    // cluster-b has no host: nothing runs there.
    let _b = agent_as(
        &url,
        "cluster-b",
        false,
        &db,
        &slots_inventory("cluster-b", 0, &db, "all"),
        &[],
    )
    .await;
    wait_clusters_as(&url, false, &["cluster-a", "cluster-b"]).await;
    a.kill();
    let wf = workflow(dir.path(), "only-a");
    let o = alice(&url, &["submit", &wf, "--request-id", "u-1"]);
    let text = joined(&o);
    eprintln!("submit with cluster-a down: {}", output_text(&o));
    assert_eq!(o.status.code(), Some(75), "{text}");
    assert!(text.contains("cluster-a (unreachable)"), "{text}");
    assert!(
        text.contains("the 1 cluster that answered cannot place this workflow"),
        "{text}"
    );
    assert_eq!(show(&url, "u-1")["decision"]["refused"]["code"], "clusters_unavailable");

    // The agent comes back (same state file); the same request id, asked again, commits.
    a = agent_as(&url, "cluster-a", false, &da, &inv_a, &[]).await;
    let o = alice(&url, &["submit", &wf, "--request-id", "u-1", "--wait", "-o", "json"]);
    eprintln!("the same submit with --wait: {}", output_text(&o));
    let doc: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(&o)));
    assert_eq!(
        (
            o.status.code(),
            doc["state"].as_str(),
            doc["decision"]["chosen_cluster"].as_str()
        ),
        (Some(0), Some("committed"), Some("cluster-a")),
        "{}",
        output_text(&o)
    );
    assert_eq!(committed_on(&url, "cluster-a").await, ["u-1"]);
    drop(a);
}

/// `fedvol -u alice submit <wf> <extra>` as NATS user alice, with her state directory of this
/// federation (as every run of hers); returns the output.
fn submit_plain(url: &str, wf: &str, extra: &[&str]) -> std::process::Output {
    fedvol_tests::kit::command("fedvol", url, "alice", false)
        .args(["-u", "alice", "submit", wf, "-o", "json"])
        .args(extra)
        .output()
        .unwrap()
}

/// The request ids cluster `cluster`'s agent holds committed (asked as the coordinator user,
/// which may address agents under the shipped permissions).
async fn committed_on(url: &str, cluster: &str) -> Vec<String> {
    let client = fedvol_tests::kit::client(url, "coordinator", "_INBOX").await;
    let st = fedvol_tests::checker::fetch_status(&client, cluster).await.unwrap();
    st.committed
}

/// Finding B. A coordinator killed mid-commit leaves the decision `planned`; the user runs the
/// same `fedvol submit wf.yaml` again, without `--request-id`. The CLI resumes its own
/// unfinished request (Nomad: job register idempotency via JobModifyIndex; Amazon EC2:
/// ClientToken reused on retry) instead of booking a second slot, and says so; `fedvol
/// complete` of the still-planned decision answers within the CLI's wait. `--new` books afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_retry_after_a_coordinator_died_mid_commit_books_once() {
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let mut coordinator = coordinator_as(&url, false, &[], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a");
    let agent = agent_as(
        &url,
        "cluster-a",
        false,
        &d,
        &slots_inventory("cluster-a", 4, &d, "all"),
        &[],
    )
    .await;
    wait_clusters_as(&url, false, &["cluster-a"]).await;
    let wf = workflow(dir.path(), "retry");

    // The agent freezes as its commit starts; the coordinator is killed with kill -9 meanwhile.
    let freezer = fedvol_tests::faultkit::signal_on_line(
        agent.log_path(),
        "provisioning",
        agent.pid(),
        nix::sys::signal::Signal::SIGSTOP,
        Duration::from_secs(20),
    );
    let first = {
        let (url, wf) = (url.clone(), wf.clone());
        tokio::task::spawn_blocking(move || submit_plain(&url, &wf, &[]))
    };
    let line = tokio::task::spawn_blocking(move || freezer.join().ok().flatten())
        .await
        .unwrap()
        .expect("the commit starts");
    let id = fedvol_tests::faultkit::field(&line, "request_id").unwrap();
    coordinator.kill();
    agent.signal(nix::sys::signal::Signal::SIGCONT);
    let first = first.await.unwrap();
    eprintln!("first submit (coordinator killed mid-commit):\n{}", output_text(&first));
    assert_ne!(first.status.code(), Some(0), "{}", output_text(&first));
    let _again = coordinator_as(&url, false, &[], &[]).await;

    // The same command again.
    let began = Instant::now();
    let retry = submit_plain(&url, &wf, &[]);
    let shown = output_text(&retry);
    eprintln!("plain retry ({:.1} s):\n{shown}", began.elapsed().as_secs_f64());
    assert!(
        String::from_utf8_lossy(&retry.stderr).contains(&format!("resuming request {id}")),
        "the terminal says it resumes: {shown}"
    );
    let held = committed_on(&url, "cluster-a").await;
    assert_eq!(held, std::slice::from_ref(&id), "one slot booked after the retry");

    // Completing the decision still `planned` answers within the CLI's wait (15 s).
    let began = Instant::now();
    let done = alice(&url, &["complete", &id]);
    let took = began.elapsed();
    eprintln!("complete ({:.1} s):\n{}", took.as_secs_f64(), output_text(&done));
    assert!(
        took < Duration::from_millis(14_500),
        "answered within the wait: {:?}\n{}",
        took,
        output_text(&done)
    );
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(!err.contains("no answer from a coordinator"), "{err}");

    // `--new` books afresh: what a plain retry did before.
    let fresh = submit_plain(&url, &wf, &["--new"]);
    assert_eq!(fresh.status.code(), Some(0), "{}", output_text(&fresh));
    assert_eq!(committed_on(&url, "cluster-a").await.len(), 2);
}

/// Finding D. One user runs the same plain `fedvol submit wf.yaml` five times at once from one
/// machine (`for i in 1 2 3 4 5; do fedvol submit wf.yaml & done`): five processes sharing the
/// CLI's state directory, as every run of one user does. A sibling still running is not an
/// unfinished submit (it holds its entry's lock), so each run is a request of its own: five
/// request ids, five commits, no `resuming`. Every answer is learnt, so nothing is left to resume:
/// a sixth plain submit is a new request too, and the state file holds no entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_plain_submits_of_one_workflow_are_separate_requests() {
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let _coordinator = coordinator_as(&url, false, &[], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a");
    let _agent = agent_as(
        &url,
        "cluster-a",
        false,
        &d,
        &slots_inventory("cluster-a", 8, &d, "all"),
        &[],
    )
    .await;
    wait_clusters_as(&url, false, &["cluster-a"]).await;
    let wf = workflow(dir.path(), "par");

    let runs: Vec<_> = (0..5)
        .map(|_| {
            let (url, wf) = (url.clone(), wf.clone());
            tokio::task::spawn_blocking(move || submit_plain(&url, &wf, &[]))
        })
        .collect();
    let mut ids = Vec::new();
    for r in runs {
        let o = r.await.unwrap();
        let shown = output_text(&o);
        assert_eq!(o.status.code(), Some(0), "{shown}");
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("resuming"),
            "a running sibling is never resumed: {shown}"
        );
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["state"], "committed", "{shown}");
        ids.push(doc["decision"]["request_id"].as_str().unwrap().to_string());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5, "five submits, five requests: {ids:?}");
    let mut held = committed_on(&url, "cluster-a").await;
    held.sort();
    assert_eq!(held, ids, "the agent committed each of the five");

    // Every outcome was learnt: nothing is left to resume.
    let state = fedvol_tests::cli::state_dir(Some(&url), "alice");
    let book = std::fs::read_to_string(state.join("pending-submits.json")).unwrap_or_default();
    assert!(!book.contains("\"request_id\""), "no entry left: {book}");
    let sixth = submit_plain(&url, &wf, &[]);
    let shown = output_text(&sixth);
    assert_eq!(sixth.status.code(), Some(0), "{shown}");
    assert!(!String::from_utf8_lossy(&sixth.stderr).contains("resuming"), "{shown}");
    assert_eq!(committed_on(&url, "cluster-a").await.len(), 6, "{shown}");
}

/// Finding D, the other side. A plain submit killed with `kill -9` while its commit is under
/// way (its agent frozen with SIGSTOP) never learnt its outcome; the same command run again
/// resumes that request, says which earlier run it continues (its process id), and books one
/// slot in all. A third plain submit, once the second learnt the outcome, is a new request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_retry_after_the_cli_was_killed_resumes_its_request() {
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let _coordinator = coordinator_as(&url, false, &[], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a");
    let agent = agent_as(
        &url,
        "cluster-a",
        false,
        &d,
        &slots_inventory("cluster-a", 4, &d, "all"),
        &[],
    )
    .await;
    wait_clusters_as(&url, false, &["cluster-a"]).await;
    let wf = workflow(dir.path(), "killed");

    let freezer = fedvol_tests::faultkit::signal_on_line(
        agent.log_path(),
        "provisioning",
        agent.pid(),
        nix::sys::signal::Signal::SIGSTOP,
        Duration::from_secs(20),
    );
    let mut first = fedvol_tests::kit::command("fedvol", &url, "alice", false)
        .args(["-u", "alice", "submit", &wf, "-o", "json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let first_pid = first.id();
    let line = tokio::task::spawn_blocking(move || freezer.join().ok().flatten())
        .await
        .unwrap()
        .expect("the commit starts");
    let id = fedvol_tests::faultkit::field(&line, "request_id").unwrap();
    // kill -9 of the CLI mid-submit; then the agent goes on (it commits; nobody hears).
    first.kill().unwrap();
    first.wait().unwrap();
    agent.signal(nix::sys::signal::Signal::SIGCONT);

    let retry = submit_plain(&url, &wf, &[]);
    let shown = output_text(&retry);
    eprintln!("plain retry:\n{shown}");
    let err = String::from_utf8_lossy(&retry.stderr);
    assert!(
        err.contains(&format!("resuming request {id}")),
        "the retry resumes: {shown}"
    );
    assert!(
        err.contains(&format!("pid {first_pid}")),
        "it names the run it continues: {shown}"
    );
    assert_eq!(retry.status.code(), Some(0), "{shown}");
    assert_eq!(
        committed_on(&url, "cluster-a").await,
        std::slice::from_ref(&id),
        "one slot"
    );

    let third = submit_plain(&url, &wf, &[]);
    let shown = output_text(&third);
    assert!(!String::from_utf8_lossy(&third.stderr).contains("resuming"), "{shown}");
    assert_eq!(committed_on(&url, "cluster-a").await.len(), 2, "{shown}");
}

/// The resident set of process `pid`, MB (`VmRSS` of `/proc/<pid>/status`).
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb / 1024.0
}

/// Finding C. One user floods the coordinator with 5,000 dry runs (`fedvol submit --dry-run`,
/// not kept), sent as fast as a client can, 2,000 at a time (`FEDVOL_FLOOD`,
/// `FEDVOL_FLOOD_AT_ONCE`). The user's requests beyond its
/// per-user bound are refused at once with `overloaded` naming the limit (Kubernetes: API
/// Priority and Fairness, per-flow queues and "429 Too Many Requests"), and the coordinator's
/// memory comes back after the flood. Prints RSS before, right after, and 30 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_flood_of_dry_runs_is_bounded_and_memory_comes_back() {
    let flood = fedvol_tests::load::env_number("FEDVOL_FLOOD", 5_000) as usize;
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    // `FEDVOL_FLOOD_PER_USER` sets the bound (default: the coordinator's, 64), to measure
    // without it.
    let per_user = std::env::var("FEDVOL_FLOOD_PER_USER").unwrap_or_default();
    let extra: Vec<&str> = if per_user.is_empty() {
        Vec::new()
    } else {
        vec!["--max-in-flight-per-user", &per_user]
    };
    let coordinator = coordinator_as(&url, false, &extra, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut agents = Vec::new();
    for c in ["cluster-a", "cluster-b"] {
        let d = dir.path().join(c);
        agents.push(agent_as(&url, c, false, &d, &slots_inventory(c, 4, &d, "all"), &[]).await);
    }
    wait_clusters_as(&url, false, &["cluster-a", "cluster-b"]).await;
    let pid = coordinator.pid();
    let workflow = fedvol_tests::load::small_workflow("flood", 1);
    let client = fedvol_tests::kit::client(&url, "alice", "_INBOX").await;
    // Warm up: one dry run.
    let mut msg = fedvol_tests::load::submit_msg("", &workflow, true);
    msg.keep = false;
    let r = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
        &client,
        "alice",
        &msg,
        Duration::from_secs(10),
    )
    .await;
    assert!(r.is_ok_and(|r| r.error.is_none()), "a dry run is answered");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_mb(pid);

    let began = Instant::now();
    let at_once = fedvol_tests::load::env_number("FEDVOL_FLOOD_AT_ONCE", 2_000) as usize;
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(at_once));
    let mut tasks = Vec::new();
    for _ in 0..flood {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let (client, msg) = (client.clone(), msg.clone());
        tasks.push(tokio::spawn(async move {
            let r = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
                &client,
                "alice",
                &msg,
                Duration::from_secs(30),
            )
            .await;
            drop(permit);
            match r {
                Ok(r) => match r.error {
                    None => "answered".to_string(),
                    Some(e) => format!("{}: {}", e.code, e.message),
                },
                Err(e) => format!("no answer: {e}"),
            }
        }));
    }
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for t in tasks {
        *outcomes.entry(t.await.unwrap()).or_default() += 1;
    }
    let took = began.elapsed();
    let after = rss_mb(pid);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let later = rss_mb(pid);
    eprintln!(
        "flood of {flood} dry runs, {at_once} at a time, in {:.1} s: {outcomes:#?}\ncoordinator RSS: before {before:.1} MB, after the flood {after:.1} MB, 30 s later {later:.1} MB",
        took.as_secs_f64()
    );
    let refused = outcomes
        .iter()
        .filter(|(k, _)| k.starts_with("overloaded") && k.contains("maxInFlightPerUser"))
        .map(|(_, n)| n)
        .sum::<usize>();
    assert!(refused > 0, "the per-user bound refused some: {outcomes:#?}");
    assert!(
        later < before + 60.0,
        "memory comes back: before {before:.1} MB, 30 s later {later:.1} MB"
    );
    // Another user is served meanwhile and after.
    let bob = fedvol_tests::kit::client(&url, "bob", "_INBOX").await;
    let r = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
        &bob,
        "bob",
        &msg,
        Duration::from_secs(10),
    )
    .await;
    assert!(r.is_ok_and(|r| r.error.is_none()), "bob is answered");
}

/// The code of the answer to a commit of `id` (no hold, no request) sent to `cluster`'s agent
/// as the coordinator user.
async fn commit_code(client: &async_nats::Client, cluster: &str, id: &str) -> String {
    use fedvol_proto::agent::{AgentEndpoint, Commit};
    let subject = fedvol_proto::Subjects::default().cluster(cluster, Commit::OP);
    let msg = fedvol_proto::agent::ActionMsg::new(id, fedvol_proto::now_ms() + 5_000);
    let r = fedvol_proto::rpc::call::<Commit>(client, &subject, &msg, Duration::from_secs(5), "test")
        .await
        .unwrap();
    match r {
        Ok(reply) => reply.error.map_or_else(|| "ok".to_string(), |e| e.code.to_string()),
        Err(f) => f.error.code.to_string(),
    }
}

/// Finding A, with no coordinator around: the agent started fresh refuses new commits with
/// `restoring` for `restoreWaitMs`, then says in its log that no coordinator restored its
/// cluster and admits them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_coordinator_a_fresh_agent_waits_a_bounded_time() {
    let kit = Kit::copy();
    let nats = single_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("a");
    let wait = [("FEDVOL_RESTORE_WAIT_MS", "2000")];
    let mut agent = agent_as(
        &url,
        "cluster-a",
        false,
        &d,
        &slots_inventory("cluster-a", 1, &d, "all"),
        &wait,
    )
    .await;
    let client = fedvol_tests::kit::client(&url, "coordinator", "_INBOX").await;
    assert_eq!(commit_code(&client, "cluster-a", "early").await, "restoring");
    agent
        .wait_for_log(
            "no coordinator restored this cluster's commits within restoreWaitMs",
            Duration::from_secs(10),
        )
        .await;
    // Admitted now: refused only because it holds nothing for that id.
    assert_eq!(commit_code(&client, "cluster-a", "later").await, "no_hold");
}
