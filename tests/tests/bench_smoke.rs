//! CI's short form of the benchmark: `fedvol-bench smoke` (1 cluster, 100 hosts, a few hundred
//! ms per mode) must run; it fails only when something cannot run or every request of a mode
//! failed, never on speed.

use std::process::Command;

#[test]
fn the_benchmark_smoke_form_runs() {
    let out = tempfile::tempdir().expect("a temporary directory");
    let run = Command::new(env!("CARGO_BIN_EXE_fedvol-bench"))
        .arg("smoke")
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("fedvol-bench runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        run.status.success(),
        "fedvol-bench smoke failed ({}):\n{text}",
        run.status
    );
    for mode in ["plan", "submit", "raw"] {
        assert!(text.contains(&format!("│ {mode}")), "no {mode} row:\n{text}");
    }
    for file in ["results.jsonl", "tables.md", "smoke.svg"] {
        assert!(out.path().join(file).is_file(), "{file} missing:\n{text}");
    }
    let jsonl = std::fs::read_to_string(out.path().join("results.jsonl")).expect("the results");
    let result: serde_json::Value = serde_json::from_str(jsonl.lines().next().expect("one result")).expect("JSON");
    assert_eq!(result["config"]["clusters"], 1);
    assert_eq!(result["modes"].as_array().map(Vec::len), Some(3));
}

#[test]
fn bad_arguments_are_refused_without_a_panic() {
    for args in [
        &["run", "--clusters", "0"][..],
        &["run", "--secs", "-1"],
        &["run", "--mode", "nope"],
        &["sweep", "--hosts", "ten"],
        &["frobnicate"],
    ] {
        let run = Command::new(env!("CARGO_BIN_EXE_fedvol-bench"))
            .args(args)
            .output()
            .expect("fedvol-bench runs");
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
