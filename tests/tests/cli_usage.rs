//! The `fedvol` command line as a new user meets it: exit codes, where NATS options
//! may go, the context file `fedvol dev` leaves for later commands, completions and man pages.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use fedvol_tests::bins::workspace_root;
use fedvol_tests::{Spawned, bin_path, wait_until};
use nix::sys::signal::Signal;

/// `fedvol <args>` with no `FEDVOL_*` setting inherited and the context file at `context`;
/// the CLI's state beside it (`cli-state`), shared by the test's runs as by one user's.
fn fedvol(context: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(bin_path("fedvol"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            c.env_remove(&k);
        }
    }
    c.env("FEDVOL_CONTEXT", context)
        .env("FEDVOL_STATE_DIR", context.with_file_name("cli-state"))
        .current_dir(workspace_root())
        .args(args)
        .output()
        .expect("fedvol runs")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn usage_errors_exit_64_so_that_2_only_means_nothing_fits() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = dir.path().join("dev.env");
    // sysexits(3) EX_USAGE for every command line clap refuses.
    for args in [
        &[][..],
        &["frobnicate"],
        &["plan"],
        &["submit"],
        &["decisions", "list", "--bogus"],
        &["submit", "wf.yaml", "-o", "xml"],
    ] {
        let o = fedvol(&ctx, args);
        assert_eq!(o.status.code(), Some(64), "fedvol {args:?}: {}", text(&o));
    }
    for args in [&["--help"][..], &["--version"], &["plan", "--help"]] {
        let o = fedvol(&ctx, args);
        assert_eq!(o.status.code(), Some(0), "fedvol {args:?}: {}", text(&o));
    }
    // Valid input that fits nowhere is 2; an unreadable file is 1.
    let inv = workspace_root().join("deploy/examples/clusters/cluster-a.yaml");
    let wf = dir.path().join("wf.yaml");
    std::fs::write(
        &wf,
        "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 100000}, memory: {size: 1GiB}}\n",
    )
    .unwrap();
    let (inv, wf) = (inv.display().to_string(), wf.display().to_string());
    let o = fedvol(&ctx, &["plan", "-i", &inv, &wf]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = fedvol(&ctx, &["plan", "-i", &inv, "/nonexistent/wf.yaml"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn nats_options_are_listed_only_by_the_commands_that_use_them() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = dir.path().join("dev.env");
    for offline in ["plan", "check", "render", "dev"] {
        let help = stdout(&fedvol(&ctx, &[offline, "--help"]));
        assert!(
            !help.contains("--nats <URL>") && !help.contains("--nats-user"),
            "fedvol {offline} --help lists NATS options:\n{help}"
        );
    }
    for online in [
        &["submit"][..],
        &["decisions", "show"],
        &["why-not"],
        &["clusters"],
        &["complete"],
    ] {
        let mut args = online.to_vec();
        args.push("--help");
        let help = stdout(&fedvol(&ctx, &args));
        assert!(
            help.contains("--nats <URL>") && help.contains("--user"),
            "fedvol {online:?} --help:\n{help}"
        );
    }
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_definition() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = dir.path().join("dev.env");
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef fedvol"),
        ("fish", "complete -c fedvol"),
    ] {
        let o = fedvol(&ctx, &["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}: {script}");
        for sub in ["why-not", "decisions", "submit", "request-id"] {
            assert!(script.contains(sub), "{shell} completes {sub}");
        }
    }
    // `completion` (singular) is the same command, not a suggestion of `complete`.
    let o = fedvol(&ctx, &["completion", "bash"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let man = dir.path().join("man");
    let o = fedvol(&ctx, &["man", "--out", &man.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for page in [
        "fedvol.1",
        "fedvol-submit.1",
        "fedvol-decisions-list.1",
        "fedvol-why-not.1",
    ] {
        let t = std::fs::read_to_string(man.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(t.contains(".SH NAME") && t.contains(".TH"), "{page}: {t}");
    }
    let page = std::fs::read_to_string(man.join("fedvol-submit.1")).unwrap();
    assert!(page.contains("dry\\-run"), "options are documented: {page}");
}

/// `fedvol dev` leaves its URL for later commands: no `--nats`, no export; the
/// options may also come before the subcommand, as in earlier releases; the file goes when
/// `fedvol dev` stops, and a stale one is ignored with a note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_find_the_federation_fedvol_dev_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = dir.path().join("fedvol").join("dev.env");
    let mut dev = Command::new(bin_path("fedvol"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            dev.env_remove(&k);
        }
    }
    dev.env("FEDVOL_CONTEXT", &ctx)
        .env("FEDVOL_STATE_DIR", ctx.with_file_name("cli-state"))
        .current_dir(workspace_root())
        .arg("dev");
    let mut dev = Spawned::start(dev);
    dev.wait_for_log("fedvol federation running", Duration::from_secs(60))
        .await;
    assert!(ctx.exists(), "{}", dev.log());
    let saved = std::fs::read_to_string(&ctx).unwrap();
    assert!(saved.contains("FEDVOL_NATS_URL=nats://127.0.0.1:"), "{saved}");
    assert!(
        dev.log().contains(&ctx.display().to_string()),
        "dev says where: {}",
        dev.log()
    );

    let mut listed = false;
    for _ in 0..100 {
        let o = fedvol(&ctx, &["clusters"]);
        if o.status.success()
            && ["cluster-a", "cluster-b", "cluster-c"]
                .iter()
                .all(|c| stdout(&o).contains(c))
        {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed, "fedvol clusters reaches the dev federation without --nats");
    let url = saved
        .lines()
        .find_map(|l| l.strip_prefix("FEDVOL_NATS_URL="))
        .unwrap()
        .to_string();
    // Options before the subcommand still work, and win over the context file.
    let before = fedvol(&ctx, &["--nats", &url, "-u", "alice", "clusters", "-o", "json"]);
    let after = fedvol(&ctx, &["clusters", "-o", "json", "--nats", &url, "-u", "alice"]);
    assert_eq!(before.status.code(), Some(0), "{}", text(&before));
    assert_eq!(after.status.code(), Some(0), "{}", text(&after));
    let o = fedvol(&ctx, &["--nats", "nats://127.0.0.1:1", "clusters"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "an explicit URL beats the context: {}",
        text(&o)
    );

    dev.signal(Signal::SIGTERM);
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || !ctx.exists()).await,
        "the context file is removed when fedvol dev stops: {}",
        dev.log()
    );
    assert!(
        dev.terminate(Duration::from_secs(30)).is_some(),
        "fedvol dev stops on SIGTERM: {}",
        dev.log()
    );
    // A file left by a `fedvol dev` that no longer runs is ignored, with a note, and the
    // error says how to start or point at a federation.
    std::fs::create_dir_all(ctx.parent().unwrap()).unwrap();
    std::fs::write(
        &ctx,
        format!("FEDVOL_NATS_URL={url}\nFEDVOL_DEV_PID={}\n", u32::MAX - 1),
    )
    .unwrap();
    let o = fedvol(&ctx, &["clusters", "--timeout-ms", "2000"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("no longer running"), "{t}");
    assert!(t.contains("fedvol dev") && t.contains("FEDVOL_NATS_URL"), "{t}");
}

/// A newcomer follows `fedvol dev`'s hints as printed: the submit it suggests and then the
/// complete it suggests work together (one user in both, so `complete` is not refused
/// `not_owner`); it says where its sandbox puts volumes; the agents log each volume's
/// requested size (never `0B`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fedvol_devs_hints_work_as_printed_and_it_says_where_volumes_go() {
    // `fedvol dev` runs the daemons found beside it: built now, as they are.
    bin_path("fedvol-agent");
    bin_path("fedvol-coordinator");
    let dir = tempfile::tempdir().unwrap();
    let ctx = dir.path().join("fedvol").join("dev.env");
    let mut dev = Command::new(bin_path("fedvol"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            dev.env_remove(&k);
        }
    }
    dev.env("FEDVOL_CONTEXT", &ctx)
        .env("COLUMNS", "100")
        .current_dir(workspace_root())
        .arg("dev");
    let mut dev = Spawned::start(dev);
    dev.wait_for_log("Ctrl-C stops everything", Duration::from_secs(60))
        .await;
    let banner = dev.log();
    let state_dir = banner
        .lines()
        .find_map(|l| l.trim().strip_prefix("state directory"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no state directory line: {banner}"))
        .to_string();
    assert!(
        banner.contains("sandboxed") && banner.contains(&format!("{state_dir}/storage/<cluster>/")),
        "dev says where its sandbox puts volumes: {banner}"
    );
    // At 100 columns (a line naming an example file's path may be longer: it is copied whole).
    for l in banner.lines().filter(|l| !l.contains("/examples/")) {
        assert!(l.chars().count() <= 100, "a line past 100 columns: {l}\n{banner}");
    }
    let hint = |verb: &str| -> Vec<String> {
        let line = banner
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("fedvol {verb} ")))
            .unwrap_or_else(|| panic!("no `fedvol {verb}` hint: {banner}"));
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        let end = words.iter().position(|w| w == "#").unwrap_or(words.len());
        words[1..end].to_vec()
    };
    let submit = hint("submit");
    let args: Vec<&str> = submit.iter().map(String::as_str).collect();
    let mut o = fedvol(&ctx, &args);
    for _ in 0..50 {
        if o.status.code() == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        o = fedvol(&ctx, &args);
    }
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    let id = stdout(&o)
        .split_whitespace()
        .skip_while(|w| *w != "request:")
        .nth(1)
        .unwrap_or_else(|| panic!("no request id: {}", text(&o)))
        .to_string();
    let complete: Vec<String> = hint("complete")
        .into_iter()
        .map(|w| if w == "<ID>" { id.clone() } else { w })
        .collect();
    let args: Vec<&str> = complete.iter().map(String::as_str).collect();
    let o = fedvol(&ctx, &args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    assert!(stdout(&o).contains("completed on"), "{}", text(&o));
    // The workflow's volume is 10GB: the agents log that, not the sandbox's unchecked 0B.
    let logs: String = std::fs::read_dir(&state_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("agent-")))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert!(logs.contains("capacity=10GB"), "{logs}");
    assert!(
        !logs.contains("capacity=0B") && !logs.contains(" for 0B"),
        "a size logged as 0B: {logs}"
    );
    // Stopped as a service manager stops it, it stops what it started: no daemon of its state
    // directory is left running. (Dropped right after SIGTERM, the harness's SIGKILL once cut
    // its shutdown short and left its nats-server and agents running.)
    let stopped = dev.terminate(Duration::from_secs(30));
    assert!(stopped.is_some(), "fedvol dev did not stop on SIGTERM: {}", dev.log());
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&state_dir))
        .collect();
    assert!(left.is_empty(), "left running after fedvol dev stopped: {left:?}");
}
