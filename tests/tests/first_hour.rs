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
/// context file at `ctx`, at 100 columns.
fn installed_fedvol(prefix: &Path, cwd: &Path, ctx: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(prefix.join("bin/fedvol"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            c.env_remove(&k);
        }
    }
    c.env("FEDVOL_CONTEXT", ctx)
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
    d.wait_for_log("Ctrl-C stops everything", Duration::from_secs(90)).await;
    d
}

fn lines_over_100(s: &str) -> Vec<&str> {
    s.lines().filter(|l| l.chars().count() > 100).collect()
}

#[test]
fn install_puts_binaries_man_pages_and_completions_under_the_prefix() {
    let p = installed();
    for b in ["fedvol", "fedvol-agent", "fedvol-coordinator", "fedvol-example-provisioner"] {
        assert!(p.join("bin").join(b).is_file(), "{b} installed");
    }
    assert!(p.join("share/man/man1/fedvol.1").is_file());
    assert!(p.join("share/bash-completion/completions/fedvol").is_file());
    assert!(p.join("share/doc/fedvol/deploy/nats/single.conf").is_file());
}

#[test]
fn installed_demo_runs_from_a_directory_outside_the_clone() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let o = run(prefix, cwd.path(), &ctx, &["demo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("7 workflows submitted, 7 committed and completed"), "{}", text(&o));
    assert!(out.contains("chosen cluster: cluster-b"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_dev_prints_hints_that_work_from_the_users_directory() {
    let prefix = installed();
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("ctx").join("dev.env");
    let mut d = dev(prefix, cwd.path(), &ctx, &[]).await;
    let log = d.log();
    assert!(lines_over_100(&log).is_empty(), "100 columns: {log}");
    // The submit hint names the example by an absolute path; run it as printed.
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with("fedvol submit "))
        .unwrap_or_else(|| panic!("a submit hint: {log}"));
    let file = PathBuf::from(line.trim_start().trim_start_matches("fedvol submit ").trim());
    assert!(file.is_absolute() && file.is_file(), "{line}");
    let o = run(prefix, cwd.path(), &ctx, &["submit", &file.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("chosen cluster:"), "{}", text(&o));
    let o = run(prefix, cwd.path(), &ctx, &["decisions", "list"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("scratch-fast"), "{}", text(&o));
    // `--clusters DIR` overrides the built-in inventories.
    assert!(log.contains("of the example clusters"), "{log}");
    d.signal(Signal::SIGTERM);
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || d.try_status().is_some()).await,
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
    std::fs::write(mine.join("only.yaml"), a.replace("cluster: cluster-a", "cluster: only-one")).unwrap();
    let mut d = dev(prefix, cwd.path(), &ctx, &["--clusters", "mine"]).await;
    let log = d.log();
    assert!(log.contains("clusters only-one"), "{log}");
    assert!(!log.contains("cluster-b"), "{log}");
    d.signal(Signal::SIGTERM);
    wait_until(Duration::from_secs(30), Duration::from_millis(100), || d.try_status().is_some()).await;
}
