//! `fedvol demo` end to end: a real local federation from deploy/examples, every example
//! workflow decided, printed, completed, and everything torn down.

use fedvol_tests::shipped::LoggedIn;
use std::process::Command;

use fedvol_tests::bin_path;
use fedvol_tests::bins::workspace_root;

#[test]
fn demo_decides_prints_completes_every_example_and_tears_down() {
    let fedvol = bin_path("fedvol");
    // The demo finds fedvol-agent and fedvol-coordinator next to fedvol: make sure they are built.
    bin_path("fedvol-agent");
    bin_path("fedvol-coordinator");
    let out = Command::new(&fedvol)
        .arg("demo")
        .current_dir(workspace_root())
        .env_remove("FEDVOL_NATS_URL")
        .output()
        .expect("fedvol demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");

    let workflows = std::fs::read_dir(workspace_root().join("deploy/examples/workflows"))
        .unwrap()
        .count();
    assert!(
        stdout.contains(&format!(
            "{workflows} workflows submitted, {workflows} committed and completed"
        )),
        "{stdout}"
    );
    // Progress while starting, one line per process.
    for p in [
        "nats-server",
        "coordinator",
        "agent cluster-a",
        "agent cluster-b",
        "agent cluster-c",
    ] {
        assert!(stderr.contains(p), "progress line for {p}: {stderr}");
    }
    // The seeds' rules, visible in the printed decisions.
    let section = |name: &str| {
        let start = stdout
            .find(&format!("workflows/{name}.yaml"))
            .unwrap_or_else(|| panic!("{name} submitted"));
        let rest = &stdout[start..];
        rest[..rest[1..].find("=== ").map_or(rest.len(), |i| i + 1)].to_string()
    };
    assert!(section("named-project-data").contains("chosen cluster: cluster-b"));
    assert!(section("work-archive").contains("chosen cluster: cluster-a"));
    let claim = section("claim-standard");
    assert!(
        claim.contains("chosen cluster: cluster-c") && claim.contains("pv-medium"),
        "{claim}"
    );
    assert!(section("gpu-soft-constraints").contains("soft constraints matched 0 < 1"));
    // Why the others lost is printed.
    assert!(stdout.contains("why not:") && stdout.contains("cluster choice:"));
    // Reclaim policies at completion: Delete removes provisioned volumes, Retain keeps pv-medium.
    assert!(stdout.contains("pv-medium retained"), "{stdout}");
    assert!(stdout.contains(" deleted ("), "{stdout}");

    // Torn down: the temporary directory is gone.
    let marker = "state directory  ";
    let line = stderr
        .lines()
        .find(|l| l.contains(marker))
        .expect("the state directory's progress line");
    let rest = &line[line.find(marker).unwrap() + marker.len()..];
    let tmp = std::path::PathBuf::from(rest.split(' ').next().unwrap());
    assert!(!tmp.exists(), "{} removed", tmp.display());
    assert!(stderr.contains("tearing down"));
}

#[test]
fn dev_without_nats_server_says_how_to_install_it() {
    let out = Command::new(bin_path("fedvol"))
        .args(["dev", "--nats-server", "/nonexistent/nats-server"])
        .current_dir(workspace_root())
        .logged_in()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("apt-get install nats-server"), "{stderr}");
}
