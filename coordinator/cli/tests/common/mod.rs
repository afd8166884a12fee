//! Shared helpers for the `fedvol` CLI integration tests: running the real binary, locating the
//! example clusters/workflows and the real third-party inputs, and small JSON/YAML utilities.
//!
//! Every test crate includes this module but uses only part of it.

// Test support: a panic here is a failed test (unwrap/expect are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The three example cluster names, in the order [`clusters`] returns their files.
pub const CLUSTER_NAMES: [&str; 3] = ["cluster-a", "cluster-b", "cluster-c"];

/// One finished `fedvol` run.
#[derive(Debug)]
pub struct Run {
    /// Process exit code (`-1` when killed by a signal).
    pub code: i32,
    /// Everything printed on stdout.
    pub stdout: String,
    /// Everything printed on stderr.
    pub stderr: String,
    /// The command line, for failure messages.
    pub cmdline: String,
}

impl Run {
    /// Parses stdout as JSON, failing the test with the whole run when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout of `{}` is not JSON ({e}):\n{}", self.cmdline, self.describe()))
    }

    /// The run as text for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "$ {}\nexit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmdline,
            self.code,
            truncate(&self.stdout, 4000),
            truncate(&self.stderr, 4000)
        )
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &s[..end], s.len() - end)
}

/// Runs the real `fedvol` binary with `args` in `dir` (the test process's directory if `None`).
pub fn fedvol_in<S: AsRef<std::ffi::OsStr>>(dir: Option<&Path>, args: &[S]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fedvol"));
    cmd.args(args);
    // The output format must come from the flags, never from the caller's environment.
    cmd.env_remove("FEDVOL_OUTPUT").env_remove("FEDVOL_USER");
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().expect("the fedvol binary runs");
    let cmdline = std::iter::once("fedvol".to_string())
        .chain(args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        cmdline,
    }
}

/// Runs the real `fedvol` binary with `args` in the test process's directory.
pub fn fedvol<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    fedvol_in(None, args)
}

/// `deploy/examples` of this workspace.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/examples"))
}

/// The three example cluster inventories (cluster-a, cluster-b, cluster-c).
pub fn clusters() -> [PathBuf; 3] {
    let d = examples_dir().join("clusters");
    CLUSTER_NAMES.map(|c| d.join(format!("{c}.yaml")))
}

/// One example cluster inventory by cluster name.
pub fn cluster(name: &str) -> PathBuf {
    examples_dir().join("clusters").join(format!("{name}.yaml"))
}

/// An example workflow by file stem (e.g. `scratch-fast`).
pub fn workflow(stem: &str) -> PathBuf {
    examples_dir().join("workflows").join(format!("{stem}.yaml"))
}

/// The real third-party inputs (Fuzzfiles, catalog values, Kubernetes manifests), or `None`
/// after the running test is recorded as skipped ([`fedvol_testenv::real_inputs`]).
pub fn real_inputs() -> Option<PathBuf> {
    fedvol_testenv::real_inputs()
}

/// Every regular file directly in `dir`, sorted by name. Fails the test when `dir` is missing.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// `fedvol plan -o json -i INV... [extra...] WORKFLOW`.
pub fn plan_json(inventories: &[PathBuf], workflow: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<String> = vec!["plan".into(), "-o".into(), "json".into()];
    for i in inventories {
        args.push("-i".into());
        args.push(i.display().to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(workflow.display().to_string());
    fedvol(&args)
}

/// `fedvol plan` of `workflow` against the three example clusters, with `-o FORMAT` and `extra`.
pub fn plan_examples(format: &str, workflow: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<String> = vec!["plan".into(), "-o".into(), format.into()];
    for i in clusters() {
        args.push("-i".into());
        args.push(i.display().to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(workflow.display().to_string());
    fedvol(&args)
}

/// The keys of a JSON object, sorted (empty for non-objects).
pub fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    k.sort();
    k
}

/// A JSON array of strings as a `Vec<String>` (empty for anything else).
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The `choice` step named `rule` of a decision document.
pub fn choice_step<'a>(doc: &'a Value, rule: &str) -> &'a Value {
    doc["choice"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["rule"] == rule))
        .unwrap_or_else(|| panic!("no choice step `{rule}` in {}", doc["choice"]))
}

/// The candidates a `choice` step dropped.
pub fn dropped(step: &Value) -> Vec<String> {
    step["dropped"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| d["candidate"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The trace entries of one cluster for `subject` at `stage`.
pub fn trace_entries<'a>(cluster: &'a Value, stage: &str, subject: &str) -> Vec<&'a Value> {
    cluster["trace"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|t| t["stage"] == stage && t["subject"] == subject)
                .collect()
        })
        .unwrap_or_default()
}

/// Every reason code recorded anywhere in a cluster's trace for candidate `candidate`.
pub fn reason_codes_for(cluster: &Value, candidate: &str) -> Vec<String> {
    let mut out = Vec::new();
    for t in cluster["trace"].as_array().into_iter().flatten() {
        for r in t["rejected"].as_array().into_iter().flatten() {
            if r["candidate"] == candidate {
                for reason in r["reasons"].as_array().into_iter().flatten() {
                    if let Some(c) = reason["code"].as_str() {
                        out.push(c.to_string());
                    }
                }
            }
        }
    }
    out
}

/// Removes every `elapsed_ms` member (a wall-clock measurement, the only field of a decision
/// that legitimately differs between two identical runs).
pub fn strip_elapsed(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("elapsed_ms");
            for x in o.values_mut() {
                strip_elapsed(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_elapsed),
        _ => {}
    }
}

/// Replaces the number after every `"elapsed_ms": ` in pretty JSON text with `0`, leaving every
/// other byte as printed.
pub fn mask_elapsed_text(s: &str) -> String {
    const KEY: &str = "\"elapsed_ms\": ";
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(KEY) {
        out.push_str(&rest[..i + KEY.len()]);
        rest = &rest[i + KEY.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+')))
            .unwrap_or(rest.len());
        out.push('0');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Converts a parsed YAML value to JSON. Integers beyond i64 (which the YAML side reads as
/// "real" text) become exact u64 numbers when they are whole numbers.
pub fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(s) => {
            if let Ok(u) = s.parse::<u64>() {
                Value::from(u)
            } else {
                let f: f64 = s.parse().unwrap_or_else(|_| panic!("YAML real `{s}` is not a number"));
                Value::from(f)
            }
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        other => panic!("non-string YAML key {other:?}"),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        other => panic!("unexpected YAML node {other:?}"),
    }
}

/// Parses every document of a YAML text (test-side reading of inputs, independent of fedvol).
pub fn yaml_docs(text: &str) -> Vec<yaml_rust2::Yaml> {
    yaml_rust2::YamlLoader::load_from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}"))
}

/// 1-based (line, column) of the first occurrence of `needle` in `text`, columns in characters.
pub fn position_of(text: &str, needle: &str) -> (usize, usize) {
    for (i, line) in text.lines().enumerate() {
        if let Some(at) = line.find(needle) {
            return (i + 1, line[..at].chars().count() + 1);
        }
    }
    panic!("`{needle}` not found in:\n{text}");
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write test file");
    p
}
