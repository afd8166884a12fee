//! Bad input of every size and shape: each gets a clear error, nothing panics,
//! nothing changes, and the processes keep serving.
//!
//! - fedvol's own example inputs, and the real public inputs (third-party, found by
//!   `fedvol_testenv::real_inputs`; that test is skipped without them), mutated (proptest):
//!   parsing gives a value or diagnostics that name a file, line and column, never a panic.
//! - YAML alias bombs, deep nesting, huge files, wrong types, unknown versions: `fedvol check`
//!   exits 1 with one line per problem; an agent asked to reload such an inventory keeps the
//!   old one and its state.
//! - Fuzzed requests over NATS to a running agent and coordinator (mutations of real messages,
//!   garbage, deep nesting, wrong types, unknown versions, near-limit sizes): every malformed
//!   one is answered `bad_request`, state is unchanged, and both keep serving.
//! - Payloads over the server's `max_payload`: a clear error, and nothing stuck.
//!
//! `PROPTEST_CASES` sets the mutation cases (default 256); `FEDVOL_FUZZ_REQUESTS` the fuzzed
//! requests per endpoint (default 150).

use fedvol_tests::shipped::LoggedIn;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fedvol_common::funnel::why_not::Target;
use fedvol_formats::{classify, parse_inventory_str, parse_workflow_str};
use fedvol_proto::agent::{ActionMsg, AgentOp, PlanMsg, StatusReply, WhyNotMsg};
use fedvol_proto::coordinator::{CoordinatorOp, DecisionRef, ListReply, SubmitReply, WhyNotQuery};
use fedvol_proto::{Subjects, now_ms};
use fedvol_tests::checker::fetch_status;
use fedvol_tests::faultkit::{agent_on, coordinator_on};
use fedvol_tests::load::{CallError, Rng, call_raw, env_number, roomy_inventory, small_workflow, submit_msg};
use fedvol_tests::{NatsServer, bin_path};
use proptest::prelude::*;

/// One end-to-end test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The real third-party inputs' files (Fuzzfiles, Kubernetes manifests, catalog values), or
/// `None` after the running test is recorded as skipped (`fedvol_testenv::real_inputs`).
fn real_inputs() -> Option<Vec<PathBuf>> {
    let root = fedvol_testenv::real_inputs()?;
    let mut out = Vec::new();
    for dir in ["fuzzfiles", "k8s", "catalog-values"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            out.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
        }
    }
    out.sort();
    Some(out)
}

/// fedvol's own inputs: every example inventory and workflow under `deploy/examples/`, and the
/// deploy configurations written in YAML.
fn own_inputs() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&fedvol_tests::bins::workspace_root().join("deploy"), &mut out);
    out.sort();
    out
}

/// Bytes YAML and JSON give meaning to, and tokens worth dropping into a document.
const SIGNIFICANT: &[u8] = b"{}[]:,-'\"\n #&*!|>%@`\t?\\";
const TOKENS: [&str; 16] = [
    "&a ",
    "*a",
    "<<: *a",
    "!!binary ",
    "~",
    "null",
    "1e400",
    "-1",
    "0x1F",
    "\u{0}",
    "\u{feff}",
    "{{ x }}",
    "800EB",
    "99999999999999999999999999999999999999Ei",
    ": :",
    "- - -",
];

/// Damages `text` with `n` random edits: bytes replaced by significant ones, lines dropped,
/// repeated, swapped, re-indented, tokens inserted, or the end cut off.
fn mutate(text: &str, rng: &mut Rng, n: usize) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..n {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let i = rng.below(lines.len() as u64) as usize;
        match rng.below(8) {
            0 => {
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let at = rng.below(b.len() as u64) as usize;
                    b[at] = SIGNIFICANT[rng.below(SIGNIFICANT.len() as u64) as usize];
                }
                lines[i] = String::from_utf8_lossy(&b).into_owned();
            }
            1 => {
                lines.remove(i);
            }
            2 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            3 => {
                let j = rng.below(lines.len() as u64) as usize;
                lines.swap(i, j);
            }
            4 => lines[i] = format!("{}{}", " ".repeat(rng.below(3) as usize + 1), lines[i]),
            5 => lines[i] = lines[i].trim_start().to_string(),
            6 => {
                let t = TOKENS[rng.below(TOKENS.len() as u64) as usize];
                let at = lines[i].char_indices().map(|(k, _)| k).collect::<Vec<_>>();
                let k = if at.is_empty() {
                    0
                } else {
                    at[rng.below(at.len() as u64) as usize]
                };
                lines[i].insert_str(k, t);
            }
            _ => lines.truncate(i.max(1)),
        }
    }
    lines.join("\n")
}

/// Parses `text` every way fedvol reads files and checks every error is a clear diagnostic.
fn parse_every_way(label: &str, text: &str) {
    let _ = classify(label, text);
    for r in [
        parse_workflow_str(label, "w", text).map(|_| ()),
        parse_inventory_str(label, text, None).map(|_| ()),
    ] {
        if let Err(d) = r {
            assert!(!d.0.is_empty(), "an error has diagnostics");
            for diag in &d.0 {
                let shown = diag.to_string();
                assert!(shown.starts_with(label), "names the file: {shown}");
                assert!(!diag.message.trim().is_empty(), "says what is wrong: {shown}");
            }
        }
    }
}

/// Damages one of `files` (the `pick`-th, modulo their number) with `n` random edits seeded by
/// `seed`, and parses it every way.
fn damage_one(files: &[PathBuf], pick: u64, seed: u64, n: usize) {
    let path = &files[(pick % files.len() as u64) as usize];
    let text = std::fs::read_to_string(path).unwrap();
    let mut rng = Rng::new(seed);
    let damaged = mutate(&text, &mut rng, n);
    let label = path.file_name().unwrap().to_string_lossy().into_owned();
    parse_every_way(&label, &damaged);
}

proptest! {
    /// fedvol's own inputs (the example inventories and workflows, the deploy files), damaged
    /// with one to six random edits.
    #[test]
    fn mutated_own_inputs_give_values_or_clear_errors(pick in any::<u64>(), seed in any::<u64>(), n in 1usize..7) {
        let files = own_inputs();
        prop_assert!(files.len() >= 10, "deploy/ holds the examples: {files:?}");
        damage_one(&files, pick, seed, n);
    }
}

/// Real public Fuzzfiles, Kubernetes manifests and catalog values (third-party inputs; skipped
/// without them), damaged with one to six random edits, as many cases as proptest's
/// configuration gives (`PROPTEST_CASES`).
#[test]
fn mutated_real_inputs_give_values_or_clear_errors() {
    let Some(files) = real_inputs() else { return };
    assert!(
        files.len() > 100,
        "the real inputs are incomplete: {} files",
        files.len()
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::default());
    runner
        .run(&(any::<u64>(), any::<u64>(), 1usize..7), |(pick, seed, n)| {
            damage_one(&files, pick, seed, n);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The billion-laughs document: each level 9 aliases of the previous one.
fn alias_bomb(levels: usize) -> String {
    let names: Vec<String> = (0..levels).map(|i| format!("l{i}")).collect();
    let mut t = format!(
        "version: v4\n{}: &{} [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
        names[0], names[0]
    );
    for i in 1..levels {
        let refs = vec![format!("*{}", names[i - 1]); 9].join(", ");
        t.push_str(&format!("{}: &{} [{refs}]\n", names[i], names[i]));
    }
    t
}

/// The same with merge keys: each level merges 9 copies of the previous mapping.
fn merge_bomb(levels: usize) -> String {
    let mut t = String::from("cluster: c\nm0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9}\n");
    for i in 1..levels {
        let keys: Vec<String> = (0..9).map(|k| format!("k{k}: *m{}", i - 1)).collect();
        t.push_str(&format!("m{i}: &m{i} {{{}}}\n", keys.join(", ")));
    }
    t
}

/// Bad files and what `fedvol check` must say about each.
fn bad_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let deep_flow = format!("version: v4\nvolumes: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let deep_block = format!(
        "version: v4\nvolumes:\n{}",
        (0..300)
            .map(|i| format!("{}a:\n", "  ".repeat(i + 1)))
            .collect::<String>()
    );
    let files: Vec<(&str, String, &str)> = vec![
        ("bomb.yaml", alias_bomb(10), "alias expansion limit"),
        ("merge-bomb.yaml", merge_bomb(9), "alias expansion limit"),
        ("deep-flow.yaml", deep_flow, "recursion limit"),
        ("deep-block.yaml", deep_block, "nesting deeper than 64"),
        (
            "v9.yaml",
            "version: v9\nvolumes:\n  s: {size: 1GiB}\n".into(),
            "expected one of v1, v4",
        ),
        (
            "types.yaml",
            "cluster: [a]\nzones: {z1: {hosts: [{name: h, capacity: {cpu: lots, memory: 1Gi}}]}}\n".into(),
            "expected a whole number",
        ),
        (
            "wf-types.yaml",
            "version: v4\nvolumes: 5\njobs: {j: {image: 3}}\n".into(),
            "expected a mapping",
        ),
        (
            "size.yaml",
            "version: v4\nvolumes:\n  s: {size: 99999999999999999999999999999999999999999Ei}\n".into(),
            "size",
        ),
        // Regression: the YAML parser stopped at a NUL, so the rest was silently ignored and
        // this file passed as an empty workflow.
        (
            "binary.yaml",
            "version: v4\n\u{0}\u{1}\u{2}: [\n".into(),
            "control character U+0000",
        ),
        (
            "template.yaml",
            "version: v1\njobs:\n  j:\n    image: {uri: \"{{ .Values.image }}\"}\n".into(),
            "unrendered template",
        ),
    ];
    let mut out = Vec::new();
    for (name, text, expect) in files {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        out.push((p, expect));
    }
    // Over the 64 MiB limit.
    let huge = dir.join("huge.yaml");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(65 << 20).unwrap();
    out.push((huge, "larger than the limit of 64 MiB"));
    out
}

#[test]
fn bombs_deep_nesting_huge_files_wrong_types_and_unknown_versions_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (path, expect) in bad_files(dir.path()) {
        let started = Instant::now();
        let out = std::process::Command::new(bin_path("fedvol"))
            .arg("check")
            .arg(&path)
            .logged_in()
            .output()
            .unwrap();
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = path.file_name().unwrap().to_string_lossy();
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(expect), "{name}: expected {expect:?} in:\n{stderr}");
        assert!(
            stderr.lines().all(|l| l.starts_with("error: ") && l.contains(&*name)),
            "{name}: one `error: file:line:col: ...` line per problem:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert!(took < Duration::from_secs(20), "{name}: took {took:?}");
        eprintln!(
            "{name}: {:.2} s: {}",
            took.as_secs_f64(),
            stderr.lines().next().unwrap_or("")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_keeps_its_inventory_and_state_when_asked_to_reload_bad_files() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let agent = agent_on(&nats.url(), 200, &[], |d| roomy_inventory("r", 2, 8, d)).await;
    let coord = coordinator_on(&nats.url(), &["--deadline-ms", "800", "--discovery-ms", "300"]).await;
    let client = nats.client().await;
    let r: SubmitReply = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
        &client,
        "alice",
        &submit_msg("before", &small_workflow("w", 1), false),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let before = fetch_status(&client, "r").await.unwrap();
    assert_eq!(before.committed, ["before"]);
    let good = std::fs::read_to_string(agent.inventory()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (path, expect) in bad_files(dir.path()) {
        let mut log = fedvol_tests::faultkit::LogTail::new(agent.proc.log_path());
        std::fs::copy(&path, agent.inventory()).unwrap();
        agent.proc.signal(nix::sys::signal::Signal::SIGHUP);
        let line = log
            .next_line_with(
                &["inventory reload refused", "inventory reloaded"],
                Duration::from_secs(30),
            )
            .await
            .expect("the agent reacts to SIGHUP");
        let name = path.file_name().unwrap().to_string_lossy();
        assert!(line.contains("refused"), "{name}: {line}");
        let _ = expect;
        let now = fetch_status(&client, "r").await.unwrap();
        assert_eq!(now.inventory_version, before.inventory_version, "{name}");
        assert_eq!(now.committed, before.committed, "{name}");
        assert_eq!(now.host_use, before.host_use, "{name}");
    }
    std::fs::write(agent.inventory(), good).unwrap();
    // Still serving: a new submit commits.
    let r: SubmitReply = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
        &client,
        "alice",
        &submit_msg("after", &small_workflow("w", 1), false),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(!agent.proc.log().contains("panicked"));
    assert!(!coord.proc.log().contains("panicked"));
}

/// Bodies for an endpoint: `base` damaged at random, plus the classics.
fn fuzzed_bodies(base: &[u8], rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(base).into_owned();
    let mut out: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{}".to_vec(),
        br#"[1, "r", 99999999999999]"#.to_vec(),
        br#"{"v": 2}"#.to_vec(),
        br#"{"v": "1"}"#.to_vec(),
        br#"{"v": 1.5}"#.to_vec(),
        br#"{"v": -1}"#.to_vec(),
        br#"{"v": 1e400}"#.to_vec(),
        br#"{"v": 1, "request_id": 5, "request": [], "workflow": "x", "deadline_ms": "soon"}"#.to_vec(),
        vec![0xff, 0xfe, 0x00, 0x7b],
        format!("{{\"v\":1,\"x\":{}{}}}", "[".repeat(50_000), "]".repeat(50_000)).into_bytes(),
        format!("{{\"v\":1,\"request_id\":\"{}\"}}", "x".repeat(900_000)).into_bytes(),
        text.replace("\"v\":1", "\"v\":99").into_bytes(),
    ];
    while out.len() < n {
        let edits = 1 + rng.below(4) as usize;
        let mut b = text.clone().into_bytes();
        for _ in 0..edits {
            if b.is_empty() {
                break;
            }
            let at = rng.below(b.len() as u64) as usize;
            match rng.below(4) {
                0 => b[at] = SIGNIFICANT[rng.below(SIGNIFICANT.len() as u64) as usize],
                1 => b[at] = rng.below(256) as u8,
                2 => b.truncate(at.max(1)),
                _ => {
                    let t = TOKENS[rng.below(TOKENS.len() as u64) as usize];
                    b.splice(at..at, t.bytes());
                }
            }
        }
        out.push(b);
    }
    out
}

/// True when `body` is a well-formed message the endpoint would act on (decoded like the
/// processes do: a JSON object with `v` 1 that reads as `T`).
fn well_formed<T: serde::de::DeserializeOwned>(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .is_some_and(|v| v.get("v") == Some(&serde_json::json!(1)))
        && serde_json::from_slice::<T>(body).is_ok()
}

/// Sends each body to `subject`; every malformed one must be answered with an error body
/// whose code is `bad_request`. Returns (malformed answered, well-formed answered, well-formed
/// dropped) and the well-formed messages (a damaged key is an unknown field, ignored, so a
/// damaged message may still be a valid one: `"dry_rXn": true` is a real submit).
async fn fuzz_endpoint<T: serde::de::DeserializeOwned>(
    client: &async_nats::Client,
    subject: &str,
    bodies: Vec<Vec<u8>>,
) -> ((usize, usize, usize), Vec<(T, Option<serde_json::Value>)>) {
    let mut counts = (0, 0, 0);
    let mut valid = Vec::new();
    for body in bodies {
        let good = well_formed::<T>(&body);
        let message = if good {
            serde_json::from_slice::<T>(&body).ok()
        } else {
            None
        };
        let shown = String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
        match call_raw(client, subject, body, Duration::from_secs(10)).await {
            Ok(answer) => {
                let v: serde_json::Value = serde_json::from_slice(&answer)
                    .unwrap_or_else(|e| panic!("{subject}: an unreadable answer to {shown:?}: {e}"));
                if good {
                    counts.1 += 1;
                    if let Some(m) = message {
                        valid.push((m, Some(v)));
                    }
                } else {
                    let code = v["error"]["code"].as_str().unwrap_or_default();
                    assert_eq!(code, "bad_request", "{subject}: {shown:?} got {v}");
                    let msg = v["error"]["message"].as_str().unwrap_or_default();
                    assert!(!msg.is_empty(), "{subject}: the error says what is wrong");
                    counts.0 += 1;
                }
            }
            Err(CallError::TimedOut(..)) if good => {
                counts.2 += 1;
                if let Some(m) = message {
                    valid.push((m, None));
                }
            }
            Err(e) => panic!("{subject}: no answer to {shown:?}: {e}"),
        }
    }
    (counts, valid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_requests_get_errors_change_nothing_and_everyone_keeps_serving() {
    let _serial = SERIAL.lock().await;
    let n = env_number("FEDVOL_FUZZ_REQUESTS", 150) as usize;
    let (mut rng, seed) = Rng::from_env("FEDVOL_FAULT_SEED");
    eprintln!("fuzzing {n} requests per endpoint, FEDVOL_FAULT_SEED={seed}");
    let nats = NatsServer::start();
    let agent = agent_on(&nats.url(), 200, &["--hold-ttl-ms", "2000"], |d| {
        roomy_inventory("f", 2, 8, d)
    })
    .await;
    let coord = coordinator_on(&nats.url(), &["--deadline-ms", "800", "--discovery-ms", "300"]).await;
    let client = nats.client().await;
    let wf = small_workflow("fz", 1);
    let r: SubmitReply = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
        &client,
        "alice",
        &submit_msg("kept", &wf, false),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let before = fetch_status(&client, "f").await.unwrap();
    let list_before: ListReply = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::List>(
        &client,
        "alice",
        &fedvol_proto::NoArgs {},
        Duration::from_secs(10),
    )
    .await
    .unwrap();

    let s = Subjects::default();
    let request = fedvol_common::funnel::PlanRequest::new("fz-plan", wf.clone(), "u")
        .with_groups(["physics"])
        .with_seed(1)
        .with_trace_limit(5);
    let deadline = now_ms() + 3_600_000;
    let plan = fedvol_tests::versioned_body(&PlanMsg {
        request: request.clone(),
        deadline_ms: deadline,
        reserve: false,
        ttl_ms: 0,
        summary: false,
        dry_run: false,
    });
    let action = fedvol_tests::versioned_body(&ActionMsg::new("fz-none", deadline));
    let why = fedvol_tests::versioned_body(&WhyNotMsg {
        request,
        deadline_ms: deadline,
        target: Target {
            zone: Some("z1".into()),
            ..Target::default()
        },
    });
    let mut totals = Vec::new();
    totals.push((
        "agent plan",
        fuzz_endpoint::<PlanMsg>(
            &client,
            &s.cluster("f", AgentOp::Plan),
            fuzzed_bodies(&plan, &mut rng, n),
        )
        .await
        .0,
    ));
    for op in [AgentOp::Commit, AgentOp::Release, AgentOp::Complete] {
        let c = fuzz_endpoint::<ActionMsg>(&client, &s.cluster("f", op), fuzzed_bodies(&action, &mut rng, n))
            .await
            .0;
        totals.push((op.name(), c));
    }
    totals.push((
        "agent why_not",
        fuzz_endpoint::<WhyNotMsg>(
            &client,
            &s.cluster("f", AgentOp::WhyNot),
            fuzzed_bodies(&why, &mut rng, n),
        )
        .await
        .0,
    ));

    // The coordinator, with a dry-run submit as the base (a damaged `dry_run` key makes some
    // real submits: those may commit, and the checker covers them).
    let mut dry = submit_msg("fz-sub", &wf, true);
    dry.timeout_ms = 300;
    let submit = fedvol_tests::versioned_body(&dry);
    let dref = fedvol_tests::versioned_body(&DecisionRef {
        request_id: "fz-none".into(),
        cancel: false,
        whole: None,
    });
    let wq = fedvol_tests::versioned_body(&WhyNotQuery {
        request_id: "kept".into(),
        cluster: "f".into(),
        target: Target::default(),
    });
    let (counts, submits) = fuzz_endpoint::<fedvol_proto::coordinator::SubmitMsg>(
        &client,
        &s.coordinator(fedvol_proto::coordinator::CoordinatorOp::Submit, "alice"),
        fuzzed_bodies(&submit, &mut rng, n),
    )
    .await;
    totals.push(("coordinator submit", counts));
    // A real submit's id is the one its answer names: a damaged body may leave `request_id`
    // empty, and the coordinator then makes a fresh one.
    let real_submits: std::collections::BTreeSet<String> = submits
        .iter()
        .filter(|(m, _)| !m.dry_run)
        .flat_map(|(m, answer)| {
            let answered = answer
                .as_ref()
                .and_then(|v| v["stored"]["request"]["request_id"].as_str())
                .map(str::to_string);
            [Some(m.request_id.clone()), answered].into_iter().flatten()
        })
        .filter(|id| !id.is_empty())
        .collect();
    for op in [CoordinatorOp::Get, CoordinatorOp::Complete, CoordinatorOp::Replay] {
        let c = fuzz_endpoint::<DecisionRef>(&client, &s.coordinator(op, "alice"), fuzzed_bodies(&dref, &mut rng, n))
            .await
            .0;
        totals.push((op.name(), c));
    }
    totals.push((
        "coordinator why_not",
        fuzz_endpoint::<WhyNotQuery>(
            &client,
            &s.coordinator(fedvol_proto::coordinator::CoordinatorOp::WhyNot, "alice"),
            fuzzed_bodies(&wq, &mut rng, n),
        )
        .await
        .0,
    ));
    for (what, (bad, good, dropped)) in &totals {
        eprintln!("{what}: {bad} malformed answered bad_request, {good} well-formed answered, {dropped} dropped");
    }
    eprintln!("well-formed real submits among the damaged ones: {real_submits:?}");

    // Nothing changed but what well-formed real submits did: the agent's commits, holds and
    // capacity, the stored decisions other than dry runs; and the checker finds the store and
    // the agent in agreement.
    let after: StatusReply = fetch_status(&client, "f").await.unwrap();
    let new_commits: Vec<&String> = after
        .committed
        .iter()
        .filter(|c| !before.committed.contains(c))
        .collect();
    assert!(
        new_commits.iter().all(|c| real_submits.contains(*c)),
        "{new_commits:?} vs {real_submits:?}"
    );
    assert!(before.committed.iter().all(|c| after.committed.contains(c)));
    if new_commits.is_empty() {
        assert_eq!(after.host_use, before.host_use, "{after:?}");
    }
    let list_after: ListReply = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::List>(
        &client,
        "alice",
        &fedvol_proto::NoArgs {},
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let real = |l: &ListReply| {
        l.decisions
            .iter()
            .filter(|d| d.state != fedvol_proto::decisions::DecisionState::Planned)
            .filter(|d| !real_submits.contains(&d.request_id))
            .map(|d| (d.request_id.clone(), d.state))
            .collect::<Vec<_>>()
    };
    assert_eq!(real(&list_after), real(&list_before));
    let mut ids: std::collections::BTreeSet<String> = real_submits.clone();
    ids.insert("kept".into());
    let load = fedvol_tests::load::LoadResult {
        attempts: Vec::new(),
        acked: std::collections::BTreeMap::from([(
            "kept".to_string(),
            fedvol_tests::load::Acked {
                cluster: "f".into(),
                completed: false,
            },
        )]),
        ids,
        started: Instant::now(),
        elapsed: Duration::ZERO,
    };
    let report = fedvol_tests::faultkit::final_check(
        &client,
        &[("f".to_string(), agent.inventory())],
        &load,
        Duration::from_secs(35),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert_eq!(report.holds, 0, "every fuzzed hold lapsed");
    // Both still serve.
    let r: SubmitReply = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
        &client,
        "alice",
        &submit_msg("after-fuzz", &wf, false),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    for (who, log) in [("agent", agent.proc.log()), ("coordinator", coord.proc.log())] {
        assert!(!log.contains("panicked"), "{who}:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_over_the_servers_limit_get_a_clear_error() {
    let _serial = SERIAL.lock().await;
    // A 64 KiB limit, so a few hundred volumes exceed it.
    let nats = NatsServer::shipped_with(fedvol_tests::shipped::Shipped::Single, "max_payload: 65536");
    let agent = agent_on(&nats.url(), 200, &[], |d| roomy_inventory("p", 2, 8, d)).await;
    let _coord = coordinator_on(&nats.url(), &["--deadline-ms", "800", "--discovery-ms", "300"]).await;
    let client = nats.client().await;
    let big_workflow = |volumes: usize, pad: usize| {
        let mut t = String::from("version: v4\nvolumes:\n");
        let padding = "padding-".repeat(pad);
        for i in 0..volumes {
            t.push_str(&format!(
                "  v{i}: {{size: 1MiB, annotations: {{tier: fast, note: {padding}{i}}}}}\n"
            ));
        }
        t
    };

    // The CLI: the submit (900 volumes, under the workflow limit of 1000, about 400 KB) is
    // refused locally with one clear line.
    let wf = agent.dir.path().join("big.yaml");
    std::fs::write(&wf, big_workflow(900, 40)).unwrap();
    let out = std::process::Command::new(bin_path("fedvol"))
        .args([
            "--nats",
            &nats.url(),
            "-u",
            "alice",
            "submit",
            &wf.display().to_string(),
        ])
        .logged_in()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("CLI over the limit: {}", stderr.trim());
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.to_lowercase().contains("payload"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    // Just under the limit for the submit, over it for the plan broadcast or the agent's
    // answer (both carry more than the submit): a clear error or a decision, never a hang.
    for volumes in [150, 250, 320] {
        let wf = parse_workflow_str("w.yaml", "big", &big_workflow(volumes, 2))
            .unwrap()
            .value;
        let body = fedvol_tests::versioned_body(&submit_msg(&format!("big-{volumes}"), &wf, false));
        let started = Instant::now();
        let r = call_raw(
            &client,
            &Subjects::default().coordinator(fedvol_proto::coordinator::CoordinatorOp::Submit, "alice"),
            body.clone(),
            Duration::from_secs(20),
        )
        .await;
        let took = started.elapsed();
        match r {
            Ok(answer) => {
                let reply: SubmitReply = serde_json::from_slice(&answer).unwrap();
                // Regression: an agent answer over the limit was never sent, so the cluster
                // was reported timed out (then suspect) although it had answered.
                if let Some(s) = &reply.stored {
                    let slot = &s.decision.clusters["p"];
                    match slot.status {
                        fedvol_common::decision::ClusterStatus::Answered => {}
                        fedvol_common::decision::ClusterStatus::Error => assert_eq!(
                            slot.error.as_ref().map(|e| e.code.as_str()),
                            Some("reply_too_large"),
                            "{slot:?}"
                        ),
                        other => panic!("{volumes} volumes: p is {other:?}: {:?}", slot.error),
                    }
                }
                let what = match (&reply.error, &reply.stored) {
                    (Some(e), _) => format!("error {}: {}", e.code, e.message),
                    (None, Some(s)) => format!(
                        "{:?}, {}",
                        s.state,
                        s.decision
                            .clusters
                            .iter()
                            .map(|(c, d)| format!(
                                "{c}: {:?} {}",
                                d.status,
                                d.error.as_ref().map(|e| e.message.as_str()).unwrap_or("")
                            ))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                    (None, None) => panic!("an empty answer"),
                };
                eprintln!("{volumes} volumes ({} bytes): {what} in {took:?}", body.len());
            }
            Err(e) => {
                eprintln!("{volumes} volumes ({} bytes): {e} in {took:?}", body.len());
                assert!(body.len() > 65536, "a submit under the limit is answered: {e}");
            }
        }
    }
    // Everyone still serves.
    let r: SubmitReply = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
        &client,
        "alice",
        &submit_msg("small", &small_workflow("w", 1), false),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
}
