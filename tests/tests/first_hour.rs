//! The first hour of a new user: `scripts/install` into a prefix, then `fedvol demo` and
//! `fedvol dev` from a directory outside the clone, with the installed binaries only; what
//! `fedvol dev` does when a process it started dies, when a second one starts, on SIGTERM, and
//! with `--metrics`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use fedvol_tests::bins::workspace_root;
use fedvol_tests::{Spawned, bin_path, wait_until};
use nix::sys::signal::Signal;

/// `scripts/install --prefix <tmp> --profile dev`, once per test process: the prefix.
fn installed() -> &'static Path {
    static PREFIX: OnceLock<tempfile::TempDir> = OnceLock::new();
    PREFIX
        .get_or_init(|| {
            // The binaries the tests run are the ones install copies: built by bin_path into
            // the same target directory, so install's build is a no-op or close to it.
            let bin = bin_path("fedvol");
            let target = bin.parent().unwrap().parent().unwrap().to_path_buf();
            let prefix = tempfile::tempdir().unwrap();
            let out = Command::new(workspace_root().join("scripts/install"))
                .args(["--prefix".as_ref(), prefix.path().as_os_str()])
                .args(["--profile", "dev"])
                .env("CARGO_TARGET_DIR", &target)
                .output()
                .unwrap();
            assert!(out.status.success(), "scripts/install: {}", text(&out));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains("== installed: fedvol "), "{}", text(&out));
            prefix
        })
        .path()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// PATH with the prefix's bin first and nothing of the workspace on it (nats-server stays).
fn path_with(prefix: &Path) -> std::ffi::OsString {
    let mut dirs = vec![prefix.join("bin")];
    let ws = workspace_root();
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p).filter(|d| !d.starts_with(&ws)));
    }
    std::env::join_paths(dirs).unwrap()
}

/// The installed `fedvol` with `args`, in `cwd`, with no `FEDVOL_*` setting inherited, the
/// context file at `ctx`, the CLI's state beside it (`cli-state`, shared by the test's runs as
/// by one user's), at 100 columns.
fn installed_fedvol(prefix: &Path, cwd: &Path, ctx: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(prefix.join("bin/fedvol"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            c.env_remove(&k);
        }
    }
    c.env("FEDVOL_CONTEXT", ctx)
        .env("FEDVOL_STATE_DIR", ctx.with_file_name("cli-state"))
        .env("PATH", path_with(prefix))
        .env("COLUMNS", "100")
        .current_dir(cwd)
        .args(args);
    c
}

fn run(prefix: &Path, cwd: &Path, ctx: &Path, args: &[&str]) -> Output {
    installed_fedvol(prefix, cwd, ctx, args).output().unwrap()
}

/// Starts the installed `fedvol dev <extra>` in `cwd` and waits until it says it runs.
async fn dev(prefix: &Path, cwd: &Path, ctx: &Path, extra: &[&str]) -> Spawned {
    let mut args = vec!["dev"];
    args.extend_from_slice(extra);
    let mut d = Spawned::start(installed_fedvol(prefix, cwd, ctx, &args));
    d.wait_for_log("if a process exits", Duration::from_secs(90)).await;
    d
}

fn lines_over_100(s: &str) -> Vec<&str> {
    s.lines().filter(|l| l.chars().count() > 100).collect()
}

#[test]
fn install_puts_binaries_man_pages_and_completions_under_the_prefix() {
    let p = installed();
    for b in [
        "fedvol",
        "fedvol-agent",
        "fedvol-coordinator",
        "fedvol-example-provisioner",
    ] {
        assert!(p.join("bin").join(b).is_file(), "{b} installed");
    }
    assert!(p.join("share/man/man1/fedvol.1").is_file());
    assert!(p.join("share/bash-completion/completions/fedvol").is_file());
    assert!(p.join("share/doc/fedvol/deploy/nats/single.conf").is_file());
    // Every program has a man page with the sections a man reader looks for.
    for page in ["fedvol.1", "fedvol-agent.1", "fedvol-coordinator.1"] {
        let text = std::fs::read_to_string(p.join("share/man/man1").join(page)).unwrap();
        for section in ["ENVIRONMENT", "EXIT STATUS", "EXAMPLES"] {
            assert!(text.contains(&format!(".SH \"{section}\"")), "{page} has {section}");
        }
    }
    let submit = std::fs::read_to_string(p.join("share/man/man1/fedvol-submit.1")).unwrap();
    assert!(submit.contains(".SH \"EXIT STATUS\"") && submit.contains("EX_USAGE"));
}

/// What bash completes for the words `words` (the last one being completed), with the
/// installed script and the federation of the context file `ctx`.
fn bash_completes(prefix: &Path, ctx: &Path, words: &[&str]) -> Vec<String> {
    let script = format!(
        "source <(fedvol completions bash)\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_fedvol_names\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
        words.len() - 1
    );
    let o = Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("PATH", path_with(prefix))
        .env("FEDVOL_CONTEXT", ctx)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    stdout(&o)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn installed_demo_runs_from_a_directory_outside_the_clone() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let o = run(prefix, cwd.path(), &ctx, &["demo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("7 workflows submitted, 7 committed and completed"),
        "{}",
        text(&o)
    );
    assert!(out.contains("chosen cluster: cluster-b"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_dev_prints_hints_that_work_from_the_users_directory() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("ctx").join("dev.env");
    let mut d = dev(prefix, cwd.path(), &ctx, &[]).await;
    let log = d.log();
    assert!(
        lines_over_100(&log).is_empty(),
        "100 columns: {:?}",
        lines_over_100(&log)
    );
    // The submit hint names the example by an absolute path; run it as printed.
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with("fedvol submit "))
        .unwrap_or_else(|| panic!("a submit hint: {log}"));
    // Its last word (before it: the user and groups the README uses too).
    let file = PathBuf::from(line.split_whitespace().last().unwrap_or_default());
    assert!(file.is_absolute() && file.is_file(), "{line}");
    let o = run(prefix, cwd.path(), &ctx, &["submit", &file.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("chosen cluster:"),
        "{}",
        text(&o)
    );
    let o = run(prefix, cwd.path(), &ctx, &["decisions", "list"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("scratch-fast"),
        "{}",
        text(&o)
    );
    // `--clusters DIR` overrides the built-in inventories.
    assert!(log.contains("of the example clusters"), "{log}");
    d.signal(Signal::SIGTERM);
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || d
            .try_status()
            .is_some())
        .await,
        "{}",
        d.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_clusters_dir_overrides_the_built_in_examples() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let mine = cwd.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    let a = std::fs::read_to_string(workspace_root().join("deploy/examples/clusters/cluster-a.yaml")).unwrap();
    std::fs::write(
        mine.join("only.yaml"),
        a.replace("cluster: cluster-a", "cluster: only-one"),
    )
    .unwrap();
    let mut d = dev(prefix, cwd.path(), &ctx, &["--clusters", "mine"]).await;
    let log = d.log();
    assert!(log.contains("clusters only-one"), "{log}");
    assert!(!log.contains("cluster-b"), "{log}");
    d.signal(Signal::SIGTERM);
    wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
        d.try_status().is_some()
    })
    .await;
}

/// Stops a `fedvol dev` with SIGTERM and waits for it to exit.
async fn stop(d: &mut Spawned) {
    d.signal(Signal::SIGTERM);
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || d
            .try_status()
            .is_some())
        .await,
        "fedvol dev stops on SIGTERM: {}",
        d.log()
    );
}

/// The example workflow `name` as `fedvol dev` wrote it (the path its hint prints).
fn example(d: &Spawned, name: &str) -> String {
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with("fedvol submit "))
        .unwrap_or_else(|| panic!("a submit hint: {log}"));
    let hint = PathBuf::from(line.split_whitespace().last().unwrap_or_default());
    hint.with_file_name(format!("{name}.yaml")).display().to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Request ids at 100 columns: whole while they fit, else the shortest unique start, which
/// every command taking an id accepts; an ambiguous start is an error listing the candidates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_at_100_columns_can_be_copied() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let mut d = dev(prefix, cwd.path(), &ctx, &[]).await;
    let wf = example(&d, "gpu-soft-constraints");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let o = run(prefix, cwd.path(), &ctx, &["submit", &wf, "-o", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        ids.push(o_json(&o)["decision"]["request_id"].as_str().unwrap().to_string());
    }
    let mut watch = Spawned::start(installed_fedvol(prefix, cwd.path(), &ctx, &["decisions", "watch"]));
    let o = run(prefix, cwd.path(), &ctx, &["decisions", "list"]);
    let list = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(lines_over_100(&list).is_empty(), "{list}");
    assert!(!list.contains('…'), "no id or name cut: {list}");
    // Each row's REQUEST cell is distinct and names its own decision.
    let cells: Vec<String> = list
        .lines()
        .filter_map(|l| l.trim_start_matches('│').split_whitespace().next())
        .filter(|c| c.starts_with("gpu-soft-constraints-"))
        .map(str::to_string)
        .collect();
    assert_eq!(cells.len(), 3, "{list}");
    for cell in &cells {
        assert_eq!(cells.iter().filter(|c| *c == cell).count(), 1, "{list}");
        let id = ids.iter().find(|i| i.starts_with(cell.as_str())).unwrap();
        let o = run(prefix, cwd.path(), &ctx, &["decisions", "show", cell]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(stdout(&o).contains(id.as_str()), "{}", text(&o));
        let o = run(
            prefix,
            cwd.path(),
            &ctx,
            &["why-not", cell, "--cluster", "cluster-a", "-o", "json"],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    if cells.iter().any(|c| !ids.contains(c)) {
        assert!(list.contains("unique start"), "the shortening is said: {list}");
    }
    // At 200 columns the ids are whole.
    let o = installed_fedvol(prefix, cwd.path(), &ctx, &["decisions", "list"])
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    for id in &ids {
        assert!(stdout(&o).contains(id.as_str()), "{}", text(&o));
    }
    // An ambiguous start: an error naming every candidate.
    let o = run(
        prefix,
        cwd.path(),
        &ctx,
        &["decisions", "show", "gpu-soft-constraints-"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for id in &ids {
        assert!(err.contains(id.as_str()), "{err}");
    }
    // `decisions watch`: one distinct line per decision, within 100 columns.
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
            watch.log_count("gpu-soft-constraints-") >= 3
        })
        .await,
        "{}",
        watch.log()
    );
    let w = watch.log();
    assert!(lines_over_100(&w).is_empty(), "{w}");
    let lines: Vec<&str> = w.lines().filter(|l| l.contains("gpu-soft-constraints-")).collect();
    for l in &lines {
        let id = l
            .split_whitespace()
            .find(|t| t.starts_with("gpu-soft-constraints-"))
            .unwrap();
        assert_eq!(ids.iter().filter(|i| i.starts_with(id)).count(), 1, "{w}");
    }
    watch.kill();
    stop(&mut d).await;
}

fn o_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// `fedvol why-not ID --cluster C` alone says why C lost, leading with the reason; an unknown
/// cluster is an error naming the clusters that took part; usage errors exit 64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_not_with_only_a_cluster_says_why_it_lost() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let mut d = dev(prefix, cwd.path(), &ctx, &[]).await;
    let o = run(
        prefix,
        cwd.path(),
        &ctx,
        &["submit", &example(&d, "named-project-data"), "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let id = o_json(&o)["decision"]["request_id"].as_str().unwrap().to_string();
    // cluster-c has no provisioner the workflow names: it cannot take it.
    let o = run(prefix, cwd.path(), &ctx, &["why-not", &id, "--cluster", "cluster-c"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = stdout(&o);
    assert!(lines_over_100(&out).is_empty(), "{out}");
    let second = out.lines().nth(1).unwrap_or_default();
    assert!(
        second.contains("cluster cluster-c cannot take the workflow: volume data:"),
        "the reason leads: {out}"
    );
    assert!(out.contains("no_such_provisioner"), "{out}");
    // gpu-soft-constraints: every cluster can take it; the losers lost on soft constraints.
    let o = run(
        prefix,
        cwd.path(),
        &ctx,
        &["submit", &example(&d, "gpu-soft-constraints"), "-o", "json"],
    );
    let gpu = o_json(&o)["decision"].clone();
    let chosen = gpu["chosen_cluster"].as_str().unwrap().to_string();
    let loser = ["cluster-a", "cluster-b", "cluster-c"]
        .into_iter()
        .find(|c| *c != chosen)
        .unwrap();
    let gid = gpu["request_id"].as_str().unwrap();
    let o = run(prefix, cwd.path(), &ctx, &["why-not", &gid[..24], "--cluster", loser]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        stdout(&o).contains(&format!(
            "cluster {loser} could take the whole workflow; it lost the cluster choice at"
        )),
        "{}",
        text(&o)
    );
    let o = run(
        prefix,
        cwd.path(),
        &ctx,
        &["why-not", gid, "--cluster", chosen.as_str(), "-o", "json"],
    );
    assert_eq!(o_json(&o)["record"]["summary"], format!("cluster {chosen} was chosen"));
    // Bash completes cluster names and request ids from the federation.
    assert_eq!(
        bash_completes(prefix, &ctx, &["fedvol", "why-not", "x", "--cluster", "cluster-"]),
        ["cluster-a", "cluster-b", "cluster-c"]
    );
    assert_eq!(
        bash_completes(prefix, &ctx, &["fedvol", "complete", "named"]),
        std::slice::from_ref(&id)
    );
    assert_eq!(
        bash_completes(prefix, &ctx, &["fedvol", "decisions", "show", "gpu"]),
        [gid.to_string()]
    );
    // An unknown cluster: exit 1, naming those that took part.
    let o = run(prefix, cwd.path(), &ctx, &["why-not", &id, "--cluster", "cluster-x"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cluster-x") && err.contains("cluster-a, cluster-b, cluster-c"),
        "{err}"
    );
    // Usage errors: 64.
    for args in [
        &["why-not", id.as_str()][..],
        &["why-not"],
        &["why-not", &id, "--cluster"],
        &["plan", "-i", "x.yaml", "wf.yaml", "--why-not-cluster", "cluster-a"],
    ] {
        let o = run(prefix, cwd.path(), &ctx, args);
        assert_eq!(o.status.code(), Some(64), "fedvol {args:?}: {}", text(&o));
    }
    stop(&mut d).await;
}

/// The pid `fedvol dev` printed for `what` (`coordinator      ready  pid N`).
fn pid_of(log: &str, what: &str) -> i32 {
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with(what) && l.contains(" pid "))
        .unwrap_or_else(|| panic!("a progress line for {what}: {log}"));
    let after = &line[line.find(" pid ").unwrap() + 5..];
    after.split_whitespace().next().unwrap().parse().unwrap()
}

fn exists(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// `fedvol dev --metrics` prints each daemon's endpoint, which serves; a killed coordinator is
/// named with its pid and exit status, the rest is stopped, the logs are kept, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_names_a_process_that_exits_and_stops_the_rest() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let mut d = dev(prefix, cwd.path(), &ctx, &["--metrics"]).await;
    let log = d.log();
    assert!(lines_over_100(&log).is_empty(), "{:?}", lines_over_100(&log));
    let endpoints: Vec<(String, String)> = log
        .lines()
        .skip_while(|l| !l.starts_with("metrics ("))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let (who, url) = l.trim().rsplit_once(' ').unwrap();
            (who.trim().to_string(), url.to_string())
        })
        .collect();
    let names: Vec<&str> = endpoints.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        names,
        ["coordinator", "agent cluster-a", "agent cluster-b", "agent cluster-c"],
        "{log}"
    );
    for (who, url) in &endpoints {
        let rest = url.strip_prefix("http://").unwrap();
        let (addr, path) = rest.split_once('/').unwrap();
        let (status, body) = fedvol_tests::http::get(addr.parse().unwrap(), &format!("/{path}"))
            .await
            .unwrap_or_else(|e| panic!("{who} {url}: {e}"));
        assert_eq!(status, 200, "{who} {url}");
        assert!(body.contains("fedvol_"), "{who}: {body}");
    }
    let coordinator = pid_of(&log, "coordinator");
    let agent = pid_of(&log, "agent cluster-a");
    let nats = pid_of(&log, "nats-server");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(coordinator), Signal::SIGKILL).unwrap();
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || d
            .try_status()
            .is_some())
        .await,
        "fedvol dev stops when its coordinator dies: {}",
        d.log()
    );
    assert_eq!(d.try_status().unwrap().code(), Some(1), "{}", d.log());
    let log = d.log();
    assert!(
        log.contains(&format!(
            "error: coordinator (pid {coordinator}) exited: signal: 9 (SIGKILL)"
        )),
        "{log}"
    );
    assert!(!exists(agent) && !exists(nats), "the others are stopped: {log}");
    let kept = log
        .lines()
        .find_map(|l| {
            l.split_once("the logs are kept in ")
                .map(|(_, p)| PathBuf::from(p.trim()))
        })
        .unwrap_or_else(|| panic!("{log}"));
    assert!(kept.join("coordinator.log").is_file(), "{log}");
    assert!(!ctx.exists(), "the context goes with the run");
    std::fs::remove_dir_all(kept).unwrap();
}

/// Two `fedvol dev` runs: each keeps its own context file, the newest is the default, and when
/// it ends the older one is the default again; SIGTERM removes everything a run made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dev_runs_keep_their_own_contexts() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("ctx").join("dev.env");
    let mut first = dev(prefix, cwd.path(), &ctx, &[]).await;
    let mut second = dev(prefix, cwd.path(), &ctx, &[]).await;
    let (p1, p2) = (first.pid(), second.pid());
    let run1 = cwd.path().join(format!("ctx/dev.env.{p1}"));
    let run2 = cwd.path().join(format!("ctx/dev.env.{p2}"));
    assert!(run1.is_file() && run2.is_file());
    let default = std::fs::read_to_string(&ctx).unwrap();
    assert!(
        default.contains(&format!("FEDVOL_DEV_PID={p2}")),
        "the newest is the default: {default}"
    );
    let url = |f: &Path| {
        std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("FEDVOL_NATS_URL=").map(str::to_string))
            .unwrap()
    };
    let (url1, url2) = (url(&run1), url(&run2));
    assert_ne!(url1, url2);
    // The first run stays reachable through its own file.
    let o = run(prefix, cwd.path(), &run1, &["clusters", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let state2 = {
        let log = second.log();
        let line = log.lines().find(|l| l.contains("state directory")).unwrap().to_string();
        PathBuf::from(line.split_whitespace().nth(2).unwrap())
    };
    assert!(state2.is_dir());
    stop(&mut second).await;
    assert_eq!(second.try_status().unwrap().code(), Some(0), "{}", second.log());
    assert!(
        !run2.exists() && !state2.exists(),
        "SIGTERM cleans up: {}",
        second.log()
    );
    assert_eq!(url(&ctx), url1, "the first run is the default again");
    let o = run(prefix, cwd.path(), &ctx, &["clusters"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    stop(&mut first).await;
    assert!(!ctx.exists() && !run1.exists(), "no context is left");
}

/// A commit the provisioner refuses: the agent counts it `refused` (not `ok`), the coordinator
/// counts a commit failure for the cluster; the failed decision leads with the reason, says no
/// volume was created, wraps at 100 columns and prints no retry notice (its outcome is known);
/// completing it is one short error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_commit_is_counted_and_explained_first() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let clusters = cwd.path().join("clusters");
    std::fs::create_dir_all(&clusters).unwrap();
    // cluster-a with its fast tier served by an out-of-tree provisioner nobody runs.
    let a = std::fs::read_to_string(workspace_root().join("deploy/examples/clusters/cluster-a.yaml")).unwrap();
    let hostpath = "    driver:\n      type: hostpath\n      path: /mnt/nvme\n      local: true\n";
    assert!(a.contains(hostpath));
    let ext = a
        .replacen(
            hostpath,
            "    driver:\n      type: external\n      provisioner: example.com/nobody\n",
            1,
        )
        .replace("cluster: cluster-a", "cluster: ext");
    std::fs::write(clusters.join("ext.yaml"), ext).unwrap();
    let mut d = dev(prefix, cwd.path(), &ctx, &["--clusters", "clusters", "--metrics"]).await;
    let log = d.log();
    let endpoint = |who: &str| {
        let line = log
            .lines()
            .find(|l| l.trim_start().starts_with(who) && l.contains("http://"))
            .unwrap();
        let url = line.split_whitespace().last().unwrap();
        url.trim_start_matches("http://")
            .trim_end_matches("/metrics")
            .parse::<std::net::SocketAddr>()
            .unwrap()
    };
    let (agent, coordinator) = (endpoint("agent ext"), endpoint("coordinator"));
    let o = run(prefix, cwd.path(), &ctx, &["submit", &example(&d, "scratch-fast")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = stdout(&o);
    assert!(lines_over_100(&out).is_empty(), "{:?}", lines_over_100(&out));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[2], "chosen cluster: none: the commit failed", "{out}");
    assert!(
        lines[3].starts_with("  on ext: commit failed: provisioning_failed: volume `scratch`"),
        "{out}"
    );
    assert!(out.contains("(would") && out.contains("no volume was created"), "{out}");
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("request id:"),
        "{}",
        text(&o)
    );
    let (_, metrics) = fedvol_tests::http::get(agent, "/metrics").await.unwrap();
    assert!(
        metrics.contains(r#"fedvol_agent_requests_total{cluster="ext",endpoint="commit",outcome="refused"} 1"#)
            && metrics.contains(r#"fedvol_agent_requests_total{cluster="ext",endpoint="commit",outcome="ok"} 0"#),
        "{metrics}"
    );
    let (_, metrics) = fedvol_tests::http::get(coordinator, "/metrics").await.unwrap();
    assert!(
        metrics.contains(r#"fedvol_coordinator_commit_failures_total{cluster="ext",code="provisioning_failed"} 1"#),
        "{metrics}"
    );
    // Completing it: the error, briefly.
    let id = out
        .lines()
        .find_map(|l| l.split("request: ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    let o = run(prefix, cwd.path(), &ctx, &["complete", &id]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.lines().count() <= 4 && err.contains("not_committed"), "{err}");
    // A dry run and a success print no retry notice either.
    let o = run(
        prefix,
        cwd.path(),
        &ctx,
        &["submit", "--dry-run", &example(&d, "scratch-fast")],
    );
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("request id:"),
        "{}",
        text(&o)
    );
    stop(&mut d).await;
}
