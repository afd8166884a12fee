//! The `fedvol` CLI against a live federation: nats-server, a coordinator and two agents as
//! real processes; every federation command run as a user would.

use fedvol_tests::shipped::LoggedIn;
use std::process::{Command, Output};
use std::time::Duration;

use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::{NatsServer, Spawned, bin_path};

fn fedvol(nats: &NatsServer, args: &[&str]) -> Output {
    fedvol_tests::cli::fedvol_as(nats, "alice", args)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const WORKFLOW: &str = "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_federation_command_works_against_a_live_federation() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    // Cluster `big` has room; cluster `none` grants nobody the scratch provisioner.
    let big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 2, d, "all")).await;
    let _none = AgentProc::start(&nats, 200, |d| slots_inventory("none", 2, d, "[physics]")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();

    // clusters: both known, alive and restored (a fresh agent answers `restoring` until then).
    fedvol_tests::cli::wait_ready_as(&nats, "alice", &["big", "none"]).await;

    // submit: exit 0, the table names the chosen cluster and why the other lost.
    let o = fedvol(&nats, &["submit", &wf, "--request-id", "cli-1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("state: committed"), "{out}");
    assert!(out.contains("chosen cluster: big"), "{out}");
    assert!(out.contains("why not:") && out.contains("permission denied"), "{out}");
    assert_eq!(
        std::fs::read_dir(big.scratch()).unwrap().count(),
        1,
        "the volume directory exists"
    );

    // decisions list / show (json).
    let (out, _) = text(&fedvol(&nats, &["decisions", "list"]));
    assert!(out.contains("cli-1") && out.contains("committed"), "{out}");
    let o = fedvol(&nats, &["decisions", "show", "cli-1", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(doc["decision"]["chosen_cluster"], "big");
    assert_eq!(doc["decision"]["clusters"]["none"]["status"], "answered");
    assert_eq!(doc["decision"]["clusters"]["none"]["feasible"], false);

    // why-not: the other cluster's provisioner, with the permission reason.
    let o = fedvol(
        &nats,
        &["why-not", "cli-1", "--cluster", "none", "--provisioner", "scratch"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("provisioner.permission") && out.contains("permission_denied"),
        "{out}"
    );

    // replay: identical.
    let (out, err) = text(&fedvol(&nats, &["decisions", "replay", "cli-1"]));
    assert!(out.contains("identical"), "{out}\n{err}");

    // watch: sees the completion as a new revision.
    let url = nats.url();
    let mut watch = Spawned::bin("fedvol", ["--nats", url.as_str(), "decisions", "watch"]);
    watch.wait_for_log("cli-1", Duration::from_secs(10)).await;
    let o = fedvol(&nats, &["complete", "cli-1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.starts_with("cli-1: completed on big\nvolumes: pvc-") && out.contains(" deleted"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_dir(big.scratch()).unwrap().count(),
        0,
        "reclaim policy Delete removed it"
    );
    watch.wait_for_log("completed", Duration::from_secs(10)).await;

    // Nothing fits: exit 2, the decision still printed.
    let o = fedvol(
        &nats,
        &["submit", &wf, "--request-id", "cli-2", "--dry-run", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "a dry run that fits");
    let big_wf = dir.path().join("big.yaml");
    std::fs::write(&big_wf, WORKFLOW.replace("cores: 8", "cores: 64")).unwrap();
    let o = fedvol(
        &nats,
        &["submit", &big_wf.display().to_string(), "--request-id", "cli-3"],
    );
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("chosen cluster: none"), "{out}");

    // A catalog template is submitted with --values (rendered first); alone it is refused.
    let tpl = dir.path().join("template.yaml");
    std::fs::write(&tpl, WORKFLOW.replace("cores: 8", "cores: {{ .Cores }}")).unwrap();
    let values = dir.path().join("values.yaml");
    std::fs::write(&values, "values:\n  - name: Cores\n    uint_value: 4\n").unwrap();
    let tpl = tpl.display().to_string();
    let o = fedvol(&nats, &["submit", &tpl, "--request-id", "cli-t0"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(err.contains("unrendered template") && err.contains("--values"), "{err}");
    let o = fedvol(
        &nats,
        &[
            "submit",
            &tpl,
            "--values",
            &values.display().to_string(),
            "--request-id",
            "cli-t1",
            "--dry-run",
            "-o",
            "json",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["decision"]["chosen_cluster"], "big", "{out}");
}

#[test]
fn without_a_coordinator_or_nats_the_cli_says_so_in_one_line() {
    let nats = NatsServer::start();
    let o = fedvol(&nats, &["clusters"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("no coordinator is answering"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = Command::new(bin_path("fedvol"))
        .args(["--nats", "nats://127.0.0.1:1", "clusters"])
        .logged_in()
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("cannot connect to NATS"), "{err}");
    // `--wait` says what it waits for, once, then gives up at --wait-ms.
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let o = fedvol(
        &nats,
        &["submit", &wf.display().to_string(), "--wait", "--wait-ms", "1500"],
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("waiting for a coordinator to answer on fedvol.v1.coordinator.submit.alice")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("no coordinator is answering"), "{err}");
}

/// When planning found a feasible cluster but every commit failed (here an
/// out-of-tree provisioner nobody serves), the decision says so per cluster, with the driver's
/// error and what to do, instead of "no cluster can place this workflow".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_says_planning_succeeded_and_what_to_do() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(
        &nats,
        &[
            "--deadline-ms",
            "1500",
            "--discovery-ms",
            "300",
            "--commit-timeout-ms",
            "8000",
        ],
    )
    .await;
    let _ext = AgentProc::start(&nats, 200, |_| {
        "cluster: ext\nprovisioners:\n  dirs:\n    driver: {type: external, provisioner: example.com/dirs}\n    ephemeral: all\nzones:\n  z1:\n    hosts:\n      - {name: h0, capacity: {cpu: 8, memory: 32GiB, instances: 4}}\n".to_string()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let mut o = fedvol(&nats, &["submit", &wf, "--request-id", "ext-1", "--wait"]);
    for _ in 0..50 {
        // The coordinator may not have heard the agent yet: a fresh id until it has.
        if String::from_utf8_lossy(&o.stdout).contains("commit on ext") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        o = fedvol(&nats, &["submit", &wf, "--wait"]);
    }
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "nothing committed: {out}\n{err}");
    // The reason leads: right under the header, before any table.
    let header = out
        .find("chosen cluster: none: the commit failed")
        .unwrap_or_else(|| panic!("{out}"));
    let reason = out.find("on ext: commit failed:").unwrap_or_else(|| panic!("{out}"));
    assert!(reason > header && reason < out.find('┌').unwrap(), "{out}");
    assert!(out.contains("no volume was created"), "{out}");
    assert!(!out.contains("no cluster can place this workflow"), "{out}");
    // Wrapped at the terminal's width: read as one text.
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("commit on ext: failed:"), "{out}");
    assert!(flat.contains("no provisioner serves"), "the driver's error: {out}");
    assert!(
        flat.contains("start the out-of-tree provisioner example.com/dirs")
            && flat.contains("deploy/examples/external-provisioner/"),
        "what to do: {out}"
    );
}

/// One request id, one workflow. The same request again gets the stored
/// decision (also from a file laid out differently); another workflow, other groups or a dry
/// run under a taken id is `request_id_conflict` (exit 1), naming the stored workflow, and
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_id_is_one_workflow() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let _big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 4, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let first = write("first.yaml", WORKFLOW);
    // The same workflow (a Fuzzfile's name is its file's stem) with a comment and blank lines:
    // its positions move.
    std::fs::create_dir(dir.path().join("again")).unwrap();
    let relaid = write("again/first.yaml", &format!("# the same request\n\n{WORKFLOW}"));
    let other = write("other.yaml", &WORKFLOW.replace("cores: 8", "cores: 4"));

    let mut o = fedvol(
        &nats,
        &["submit", &first, "--request-id", "same-1", "--wait", "-o", "json"],
    );
    for _ in 0..50 {
        if o.status.code() == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        o = fedvol(
            &nats,
            &["submit", &first, "--request-id", "same-1", "--wait", "-o", "json"],
        );
    }
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let stored: serde_json::Value = serde_json::from_str(&out).unwrap();

    for again in [&first, &relaid] {
        let o = fedvol(&nats, &["submit", again, "--request-id", "same-1", "-o", "json"]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "the same request: {out}\n{err}");
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["decision"], stored["decision"], "the stored decision, unchanged");
    }
    let conflicts: [&[&str]; 3] = [
        &["submit", &other, "--request-id", "same-1"],
        &["submit", &first, "--request-id", "same-1", "-g", "physics"],
        // A kept dry run takes its id (one not kept never touches the bucket).
        &["submit", &first, "--request-id", "same-1", "--dry-run", "--keep"],
    ];
    for args in conflicts {
        let o = fedvol(&nats, args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {out}\n{err}");
        assert!(err.contains("(request_id_conflict)"), "{args:?}: {err}");
        assert!(
            err.contains("request id `same-1` is taken by the decision of workflow `first` (committed)"),
            "{args:?}: names the stored workflow: {err}"
        );
    }
    let o = fedvol(&nats, &["decisions", "show", "same-1", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["decision"], stored["decision"], "nothing changed");
    assert_eq!(doc["state"], "committed");
}

/// A newcomer who completes (or cancels) a decision as another user than the one who submitted
/// it (`fedvol complete ID` without the `-u` of the submit) is told whose it is and the command
/// that runs as them; nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completing_another_users_decision_says_to_run_it_as_the_owner() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let _big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 4, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let submit = || fedvol(&nats, &["submit", &wf, "--request-id", "owned-1", "--wait"]);
    let mut o = submit();
    for _ in 0..50 {
        if o.status.code() == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        o = submit();
    }
    assert_eq!(o.status.code(), Some(0), "{}", fedvol_tests::cli::shown(&o));
    for (verb, args) in [("complete", ["complete", "owned-1"]), ("cancel", ["cancel", "owned-1"])] {
        let o = fedvol_tests::cli::fedvol_as(&nats, "bob", &args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
        assert!(err.contains("(not_owner)"), "{err}");
        assert!(
            err.contains(&format!("hint: run it as its owner: fedvol {verb} -u alice owned-1\n")),
            "{verb}: {err}"
        );
        assert_fits_100(verb, &err);
    }
    let o = fedvol(&nats, &["complete", "owned-1"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the owner completes it: {}",
        fedvol_tests::cli::shown(&o)
    );
}

/// `decisions watch` at 100 columns: every request id whole (a start unique when printed may be
/// shared later), the id column aligned on every row and under its header, and a failed row
/// followed by why it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_keeps_ids_whole_in_aligned_columns_and_says_why_a_decision_failed() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let _big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 4, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    // A Fuzzfile's workflow is its file's stem: long ids, `gpu-soft-constraints-<22>`.
    let wf = dir.path().join("gpu-soft-constraints.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let too_big = dir.path().join("too-big.yaml");
    std::fs::write(&too_big, WORKFLOW.replace("cores: 8", "cores: 64")).unwrap();
    let too_big = too_big.display().to_string();
    let url = nats.url();
    let mut watch = Spawned::start({
        let mut c = Command::new(fedvol_tests::bin_path("fedvol"));
        c.args(["decisions", "watch", "--nats", url.as_str()])
            .env("COLUMNS", "100");
        fedvol_tests::shipped::login(&mut c);
        c
    });
    let mut ids = Vec::new();
    for _ in 0..3 {
        let mut o = fedvol(&nats, &["submit", &wf, "--wait"]);
        for _ in 0..50 {
            if o.status.code() == Some(0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            o = fedvol(&nats, &["submit", &wf, "--wait"]);
        }
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
        let id = out
            .split_whitespace()
            .skip_while(|w| *w != "request:")
            .nth(1)
            .unwrap()
            .to_string();
        ids.push(id);
    }
    let o = fedvol(&nats, &["submit", &too_big, "--request-id", "too-big-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", fedvol_tests::cli::shown(&o));
    watch.wait_for_log("why:", Duration::from_secs(10)).await;
    for id in &ids {
        watch.wait_for_log(id, Duration::from_secs(10)).await;
    }
    let log = watch.log();
    assert_fits_100("decisions watch", &log);
    let header = log.lines().next().unwrap_or_default();
    assert!(header.starts_with("TIME") && header.contains("REQUEST ID"), "{log}");
    // Columns in characters (`→` is one column, three bytes).
    let column = |line: &str, word: &str| line.find(word).map(|i| line[..i].chars().count());
    let col = column(header, "REQUEST ID").unwrap();
    for id in ids.iter().map(String::as_str).chain(["too-big-1"]) {
        let rows: Vec<&str> = log.lines().filter(|l| l.contains(id)).collect();
        assert!(!rows.is_empty(), "{id} is shown whole:\n{log}");
        for r in rows {
            assert_eq!(column(r, id), Some(col), "aligned under REQUEST ID:\n{log}");
        }
    }
    let lines: Vec<&str> = log.lines().collect();
    let failed = lines
        .iter()
        .position(|l| l.contains("too-big-1") && l.contains("failed"))
        .unwrap_or_else(|| panic!("{log}"));
    let why = lines.get(failed + 1).copied().unwrap_or_default();
    assert!(
        why.trim_start()
            .starts_with("why: no cluster can place it: 1 of 1 answered, 0 could place it"),
        "{log}"
    );
}

/// Every line of `out` is at most 100 characters (output fits 100 columns).
fn assert_fits_100(what: &str, out: &str) {
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{what}: a line of {} columns:\n{l}\n\n{out}",
            l.chars().count()
        );
    }
}

/// `decisions count`: the coordinators count the stored decisions by state, in all and per
/// chosen cluster (a decision nothing fits has none: `(none)`); the table fits 100 columns and
/// says how many are kept dry runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_count_says_how_many_are_in_each_state_per_cluster() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let _big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 4, d, "all")).await;
    let _none = AgentProc::start(&nats, 200, |d| slots_inventory("none", 2, d, "[physics]")).await;
    // Both alive and restored before the submits: a fresh agent answers `restoring` until its
    // restore, and "nothing fits" below needs every cluster's answer (CI on 6bfc1f3 got
    // `clusters_unavailable` from `none`).
    fedvol_tests::cli::wait_ready_as(&nats, "alice", &["big", "none"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let huge = dir.path().join("huge.yaml");
    std::fs::write(&huge, WORKFLOW.replace("cores: 8", "cores: 100000")).unwrap();
    let huge = huge.display().to_string();
    let count = |args: &[&str]| -> (Option<i32>, String) {
        let mut all = vec!["decisions", "count"];
        all.extend_from_slice(args);
        let o = fedvol(&nats, &all);
        let (out, err) = text(&o);
        (o.status.code(), format!("{out}{err}"))
    };
    assert_eq!(count(&[]), (Some(0), "no decisions stored\n".to_string()));

    let mut committed = false;
    for _ in 0..50 {
        let o = fedvol(&nats, &["submit", &wf, "--request-id", "count-1"]);
        if o.status.code() == Some(0) && text(&o).0.contains("chosen cluster: big") {
            committed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(committed, "the first submit is committed");
    for args in [
        vec!["submit", &wf, "--request-id", "count-2"],
        vec!["complete", "count-2"],
        vec!["submit", &wf, "--request-id", "count-3", "--dry-run", "--keep"],
    ] {
        let o = fedvol(&nats, &args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {:?}", text(&o));
    }
    let o = fedvol(&nats, &["submit", &huge, "--request-id", "count-4"]);
    assert_eq!(o.status.code(), Some(2), "nothing fits: {:?}", text(&o));

    let (code, out) = count(&["-o", "json"]);
    assert_eq!(code, Some(0), "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(doc["total"], 4, "{doc:#}");
    assert_eq!(doc["dry_runs"], 1, "{doc:#}");
    assert_eq!(
        doc["states"],
        serde_json::json!({"committed": 1, "completed": 1, "failed": 1, "planned": 1}),
        "{doc:#}"
    );
    assert_eq!(
        doc["clusters"],
        serde_json::json!({"big": {"committed": 1, "completed": 1, "planned": 1}}),
        "{doc:#}"
    );
    assert_eq!(doc["unplaced"], serde_json::json!({"failed": 1}), "{doc:#}");

    let (code, out) = count(&[]);
    assert_eq!(code, Some(0), "{out}");
    assert_fits_100("decisions count", &out);
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.trim_start_matches('│').split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row {name}: {out}"))
            .split(|c: char| c == '│' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    // Columns: CLUSTER, PLANNED, QUEUED, COMMITTED, COMPLETED, CANCELLED, FAILED, TOTAL.
    assert!(
        out.contains("PLANNED") && out.contains("CANCELLED") && out.contains("TOTAL"),
        "{out}"
    );
    assert_eq!(row("big"), ["big", "1", "0", "1", "1", "0", "0", "3"], "{out}");
    assert_eq!(row("(none)"), ["(none)", "0", "0", "0", "0", "0", "1", "1"], "{out}");
    assert_eq!(row("all"), ["all", "1", "0", "1", "1", "0", "1", "4"], "{out}");
    assert!(out.contains("1 of them kept dry runs"), "{out}");
}

/// `decisions list` filters, sorts and limits like `kubectl get`, marks dry runs, fits
/// 100 columns (`-o wide` in full); ids are accepted by unique prefix; `watch` stamps each line
/// and says what changed; `plan` and `show` fit 100 columns too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_found_filtered_and_shown_within_100_columns() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let _big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 4, d, "all")).await;
    let _none = AgentProc::start(&nats, 200, |d| slots_inventory("none", 2, d, "[physics]")).await;
    // Both alive and restored before the submits (a fresh agent answers `restoring` until then).
    fedvol_tests::cli::wait_ready_as(&nats, "alice", &["big", "none"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let long_id = "a-rather-long-request-id-for-the-prefix-test-0001";
    let mut ok = false;
    for _ in 0..50 {
        let o = fedvol(&nats, &["submit", &wf, "--request-id", long_id]);
        if o.status.code() == Some(0) && text(&o).0.contains("chosen cluster: big") {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "the first submit is committed");
    let o = fedvol(&nats, &["submit", &wf, "--request-id", "other-2"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    // A kept dry run for bob.
    let o = Command::new(bin_path("fedvol"))
        .args(["submit", &wf, "--request-id", "bobs-dry-3", "--dry-run", "--keep"])
        .args(["--nats", &nats.url(), "-u", "bob"])
        .env_remove("FEDVOL_OUTPUT")
        .logged_in()
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));

    let list = |args: &[&str]| -> String {
        let mut all = vec!["decisions", "list"];
        all.extend_from_slice(args);
        let o = fedvol(&nats, &all);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {:?}", text(&o));
        text(&o).0
    };
    let out = list(&[]);
    assert_fits_100("decisions list", &out);
    // Too wide whole: the id is cut to a start no other id shares, widened to the room there
    // is, with no ellipsis (it is copied as it is), and the table says so.
    let cell = out
        .lines()
        .find_map(|l| {
            l.trim_start_matches('│')
                .split_whitespace()
                .next()
                .filter(|c| c.starts_with("a-rather"))
        })
        .unwrap_or_else(|| panic!("{out}"));
    assert!(long_id.starts_with(cell) && cell.len() < long_id.len(), "{out}");
    assert!(!out.contains('…') && out.contains("unique start"), "{out}");
    let o = fedvol(&nats, &["decisions", "show", cell]);
    assert_eq!(o.status.code(), Some(0), "the cut id works: {:?}", text(&o));
    assert!(out.contains("planned (dry run)") && out.contains("bob"), "{out}");
    let wide = list(&["-o", "wide"]);
    assert!(wide.contains(long_id), "{wide}");
    let out = list(&["--for-user", "bob"]);
    assert!(out.contains("bobs-dry-3") && !out.contains("other-2"), "{out}");
    let out = list(&["--state", "dry-run"]);
    assert!(out.contains("bobs-dry-3") && !out.contains("other-2"), "{out}");
    let out = list(&["--state", "committed", "--sort", "workflow"]);
    assert!(out.contains("other-2") && !out.contains("bobs-dry-3"), "{out}");
    let json = |args: &[&str]| -> Vec<String> {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&list(&all)).unwrap();
        v["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["request_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(json(&["--limit", "1"]), ["bobs-dry-3"], "newest first, then cut");
    assert_eq!(json(&["--since", "1h"]).len(), 3);
    assert_eq!(json(&["--cluster", "none"]).len(), 0);
    assert_eq!(json(&["--workflow", "no-such-workflow"]).len(), 0);
    let o = fedvol(&nats, &["decisions", "list", "--since", "yesterday-ish"]);
    assert_eq!(o.status.code(), Some(64), "a bad age is a usage error: {:?}", text(&o));

    // Ids by unique prefix; an ambiguous or unknown prefix is an error naming what it found.
    let o = fedvol(&nats, &["decisions", "show", "a-rather"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains(long_id), "{out}");
    assert_fits_100("decisions show", &out);
    let o = fedvol(
        &nats,
        &["submit", &wf, "--request-id", "other-4", "--dry-run", "--keep"],
    );
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let o = fedvol(&nats, &["decisions", "show", "other"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("start of 2 request ids") && err.contains("other-2") && err.contains("other-4"),
        "{err}"
    );
    let o = fedvol(
        &nats,
        &["why-not", "zzz", "--cluster", "none", "--provisioner", "scratch"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("no decision is stored under `zzz`"),
        "{:?}",
        text(&o)
    );

    // watch: a timestamp on each line, and what changed.
    let url = nats.url();
    let mut watch = Spawned::bin("fedvol", ["decisions", "watch", "--nats", url.as_str()]);
    watch.wait_for_log("other-2", Duration::from_secs(10)).await;
    let o = fedvol(&nats, &["complete", "other-"]);
    assert_eq!(o.status.code(), Some(1), "ambiguous prefix: {:?}", text(&o));
    let o = fedvol(&nats, &["complete", "other-2"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    watch
        .wait_for_log("committed → completed", Duration::from_secs(10))
        .await;
    let log = watch.log();
    let line = log
        .lines()
        .find(|l| l.contains("other-2") && l.contains("new committed"))
        .unwrap_or_else(|| panic!("{log}"));
    // The time of day on the row, the date (UTC) on a line of its own above.
    let time = line.split_whitespace().next().unwrap_or_default();
    assert!(
        time.len() == 8 && time.chars().filter(|c| *c == ':').count() == 2,
        "{line}"
    );
    assert!(
        log.lines().any(|l| l.starts_with("20") && l.ends_with(" (UTC)")),
        "{log}"
    );
    assert_fits_100("decisions watch", &log);
    assert!(
        !log.contains("fedvol/"),
        "the coordinators' own keys are not decisions:\n{log}"
    );
}

/// `fedvol plan` fits 100 columns on every example workflow (3 clusters, failures
/// and all), and says a reason shared by several clusters once, naming them.
#[test]
fn plan_output_fits_100_columns_and_says_shared_reasons_once() {
    let root = fedvol_tests::bins::workspace_root();
    let clusters = root.join("deploy/examples/clusters");
    let mut args: Vec<String> = vec!["plan".into()];
    for c in ["cluster-a", "cluster-b", "cluster-c"] {
        args.push("-i".into());
        args.push(clusters.join(format!("{c}.yaml")).display().to_string());
    }
    args.extend(["-u", "alice", "-g", "researchers", "-g", "physics"].map(String::from));
    let mut shared = false;
    for e in std::fs::read_dir(root.join("deploy/examples/workflows")).unwrap() {
        let p = e.unwrap().path();
        let mut a = args.clone();
        a.push(p.display().to_string());
        let o = Command::new(bin_path("fedvol"))
            .args(&a)
            .env_remove("FEDVOL_OUTPUT")
            .env_remove("COLUMNS")
            .logged_in()
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert!(matches!(o.status.code(), Some(0 | 2)), "{}: {out}\n{err}", p.display());
        assert_fits_100(&p.display().to_string(), &out);
        shared |= out.contains("why not, on cluster-b and cluster-c:");
    }
    assert!(shared, "work-archive fails alike on b and c: said once");
}

/// Daemon logs written to a file (not a terminal) carry no ANSI colour codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_logs_in_a_file_have_no_colour_codes() {
    let nats = NatsServer::start();
    let coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let agent = AgentProc::start(&nats, 200, |d| slots_inventory("plain", 1, d, "all")).await;
    let o = fedvol(&nats, &["clusters"]);
    assert!(o.status.success() || o.status.code() == Some(1), "{:?}", text(&o));
    for (who, log) in [("agent", agent.proc.log()), ("coordinator", coord.proc.log())] {
        assert!(!log.is_empty(), "{who} logged");
        assert!(!log.contains('\u{1b}'), "{who}'s log has ANSI codes:\n{log}");
    }
}

/// `fedvol clusters show C` describes one cluster as its agent serves it: state,
/// provisioners with status and access policies, zones with free capacity after fedvol's
/// commits; an unknown cluster is an error naming the known ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_show_describes_one_cluster() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let _big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 3, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let mut ok = false;
    for _ in 0..50 {
        let o = fedvol(&nats, &["submit", &wf, "--request-id", "show-1"]);
        if o.status.code() == Some(0) {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "the submit is committed");
    let o = fedvol(&nats, &["clusters", "show", "big"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert_fits_100("clusters show", &out);
    assert!(out.starts_with("cluster big\n  alive"), "{out}");
    assert!(out.contains("committed workflows 1"), "{out}");
    let prov = out
        .lines()
        .find(|l| l.contains("│ scratch "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(prov.contains("hostpath") && prov.contains("ready"), "{prov}");
    // Three hosts of 8 cores, one 8-core job committed: 16 of 24 cores free.
    let zone = out
        .lines()
        .find(|l| l.contains("│ z1 "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(zone.contains("3/3") && zone.contains("16/24"), "{zone}");
    let o = fedvol(&nats, &["clusters", "show", "big", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(doc["info"]["name"], "big");
    assert_eq!(doc["agent"]["inventory"]["provisioners"][0]["name"], "scratch");
    let o = fedvol(&nats, &["clusters", "show", "nope"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("no cluster named `nope`") && err.contains("known: big"),
        "{err}"
    );
}

/// `fedvol why-not` explains the decision as it was made (the stored record: the
/// stage that rejected the host, and how its cluster lost the cluster choice), puts today's
/// re-plan beside it saying whether the cluster's inventory changed since, and refuses names
/// the cluster or the decision does not have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_not_explains_the_decision_as_it_was_made() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 3, d, "all")).await;
    let _none = AgentProc::start(&nats, 200, |d| slots_inventory("none", 2, d, "[physics]")).await;
    // Both alive and restored before the submits (a fresh agent answers `restoring` until then).
    fedvol_tests::cli::wait_ready_as(&nats, "alice", &["big", "none"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let mut doc = serde_json::Value::Null;
    for _ in 0..50 {
        let o = fedvol(&nats, &["submit", &wf, "--request-id", "wn-1", "-o", "json"]);
        if o.status.code() == Some(0) {
            doc = serde_json::from_slice(&o.stdout).unwrap();
            if doc["decision"]["clusters"].as_object().is_some_and(|c| c.len() == 2) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(doc["decision"]["chosen_cluster"], "big", "{doc:#}");
    let chosen = doc["decision"]["clusters"]["big"]["jobs"]["j"]["host"]
        .as_str()
        .unwrap()
        .to_string();
    let other = ["h0", "h1", "h2"].into_iter().find(|h| *h != chosen).unwrap();

    // A host the placement policy passed over: the record names the stage; today the same.
    let o = fedvol(&nats, &["why-not", "wn-1", "--cluster", "big", "--host", other]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert_fits_100("why-not", &out);
    let (decided, today) = out.split_once("\ntoday").unwrap_or_else(|| panic!("{out}"));
    assert!(
        decided.starts_with("as decided (the stored decision; cluster big on inventory "),
        "{out}"
    );
    assert!(decided.contains("[host.choice] for j"), "{out}");
    assert!(today.contains("the decision's;"), "same inventory: {out}");
    // The chosen host: chosen, per the record.
    let (out, _) = text(&fedvol(
        &nats,
        &["why-not", "wn-1", "--cluster", "big", "--host", &chosen],
    ));
    assert!(
        out.contains(&format!("host {chosen}: chosen in cluster big for job j")),
        "{out}"
    );
    // The losing cluster's provisioner: the stage, and how the cluster lost the choice.
    let (out, _) = text(&fedvol(
        &nats,
        &["why-not", "wn-1", "--cluster", "none", "--provisioner", "scratch"],
    ));
    assert!(out.contains("[provisioner.permission] for scratch"), "{out}");
    assert!(out.contains("cluster none [cluster.feasible]"), "{out}");
    // Names nobody has are errors, not "not rejected".
    let o = fedvol(&nats, &["why-not", "wn-1", "--cluster", "big", "--host", "h99"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("cluster big has no host `h99`"), "{:?}", text(&o));
    let o = fedvol(&nats, &["why-not", "wn-1", "--cluster", "elsewhere", "--host", "h0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o)
            .1
            .contains("`elsewhere` took no part in decision `wn-1` (clusters: big, none)"),
        "{:?}",
        text(&o)
    );

    // The cluster changes (a fourth host): today's answer says it is no longer the decision's.
    let inv = big.inventory();
    let more = std::fs::read_to_string(&inv).unwrap()
        + "      - {name: h3, capacity: {cpu: 8, memory: 32GiB, instances: 4}}\n";
    std::fs::write(&inv, more).unwrap();
    big.proc.signal(nix::sys::signal::Signal::SIGHUP);
    let mut changed = String::new();
    for _ in 0..100 {
        let (out, err) = text(&fedvol(
            &nats,
            &["why-not", "wn-1", "--cluster", "big", "--host", other],
        ));
        // Wrapped at 100 columns: compare with the line breaks taken out.
        changed = format!("{out}{err}").split_whitespace().collect::<Vec<_>>().join(" ");
        if changed.contains("the cluster changed since") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        changed.contains("the cluster changed since"),
        "{changed}\n{}",
        big.proc.log()
    );
    assert!(
        changed.contains("[host.choice] for j"),
        "the record still says how it lost: {changed}"
    );
}
