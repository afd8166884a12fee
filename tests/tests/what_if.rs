//! `fedvol what-if` against a live federation of the three example clusters (nats-server from
//! `deploy/nats/single.conf`, a coordinator and one agent per example inventory as real
//! processes, as `fedvol dev` runs them), with decisions recorded by `fedvol submit` as two
//! users: the baseline changes nothing; a drain moves each decision where `fedvol plan` offline,
//! without that inventory, puts it (or refuses it with the reason the plan gives); an access
//! policy narrowed moves exactly the workflows of the users it excludes; bad input changes
//! nothing and says what is wrong.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use fedvol_tests::NatsServer;
use fedvol_tests::cli::{fedvol_as, shown};
use fedvol_tests::federation::{AgentProc, CoordinatorProc, example_inventory};
use serde_json::Value;

const CLUSTERS: [&str; 3] = ["cluster-a", "cluster-b", "cluster-c"];

/// Every line of `out` is at most 100 characters.
fn assert_fits_100(what: &str, out: &str) {
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{what}: a line of {} characters:\n{l}\n{out}",
            l.chars().count()
        );
    }
}

/// The example workflow `stem`, its text changed by `edit`, written as `<dir>/<name>.yaml`.
fn workflow(dir: &Path, stem: &str, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(
        fedvol_tests::bins::workspace_root().join(format!("deploy/examples/workflows/{stem}.yaml")),
    )
    .unwrap();
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, edit(text)).unwrap();
    p
}

/// `fedvol what-if <args> -o json` as alice: exit 0 and the document.
fn what_if(nats: &NatsServer, args: &[&str]) -> Value {
    let mut all = vec!["what-if"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let o = fedvol_as(nats, "alice", &all);
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown(&o)))
}

/// The per-decision entries of a what-if document, by request id.
fn by_id(doc: &Value) -> std::collections::BTreeMap<String, Value> {
    doc["report"]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["request_id"].as_str().unwrap().to_string(), d.clone()))
        .collect()
}

/// What a plan's cluster slot gives each volume and job, in the what-if's terms.
fn picks(slot: &Value) -> (Value, Value) {
    let volumes: serde_json::Map<String, Value> = slot["volumes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let mut m = serde_json::Map::new();
            for f in ["provisioner", "volume", "action"] {
                if !v[f].is_null() {
                    m.insert(f.into(), v[f].clone());
                }
            }
            (k.clone(), Value::Object(m))
        })
        .collect();
    let jobs: serde_json::Map<String, Value> = slot["jobs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, j)| {
            let hosts = match j["hosts"].as_array() {
                Some(h) if !h.is_empty() => Value::Array(h.clone()),
                _ => Value::Array(j["host"].as_str().map(|h| vec![Value::from(h)]).unwrap_or_default()),
            };
            (k.clone(), serde_json::json!({"zone": j["zone"], "hosts": hosts}))
        })
        .collect();
    (Value::Object(volumes), Value::Object(jobs))
}

struct Recorded {
    id: &'static str,
    user: &'static str,
    group: &'static str,
    workflow: PathBuf,
}

/// `fedvol plan` offline of `r` on `inventories` with the seed its decision was made with:
/// exit code and decision document.
fn plan_offline(nats: &NatsServer, r: &Recorded, inventories: &[PathBuf]) -> (Option<i32>, Value) {
    let o = fedvol_as(nats, r.user, &["decisions", "show", r.id, "-o", "json"]);
    let shown_doc: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown(&o)));
    let seed = shown_doc["decision"]["seed"].as_u64().unwrap().to_string();
    let mut args = vec![
        "plan",
        "-g",
        r.group,
        "--seed",
        &seed,
        "--request-id",
        r.id,
        "-o",
        "json",
        "-i",
    ];
    let inv: Vec<String> = inventories.iter().map(|p| p.display().to_string()).collect();
    args.extend(inv.iter().map(String::as_str));
    let wf = r.workflow.display().to_string();
    args.push(&wf);
    let o = fedvol_as(nats, r.user, &args);
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown(&o)));
    (o.status.code(), doc)
}

fn run(nats: &NatsServer, user: &str, args: &[&str]) -> Output {
    let o = fedvol_as(nats, user, args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", shown(&o));
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_replays_drains_and_narrows_the_example_federation() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(
        &nats,
        &["--deadline-ms", "1500", "--discovery-ms", "300", "--operator", "ops"],
    )
    .await;
    let mut agents = Vec::new();
    for c in CLUSTERS {
        agents.push(AgentProc::start(&nats, 100, |dir| example_inventory(c, dir)).await);
    }
    let inventory = |c: &str| agents[CLUSTERS.iter().position(|x| *x == c).unwrap()].inventory();
    let dir = tempfile::tempdir().unwrap();
    // scratch-fast preferring cluster-b; gpu-soft-constraints (an H100 is a soft constraint:
    // cluster-b); the same with the H100 hard (only cluster-b has one); one too big for any.
    let prefer_b = workflow(dir.path(), "scratch-fast", "scratch-b", |t| {
        t + "clusters: [cluster-b]\n"
    });
    let gpu = workflow(dir.path(), "gpu-soft-constraints", "gpu", |t| t);
    let h100 = workflow(dir.path(), "gpu-soft-constraints", "h100", |t| {
        t.replace("gpu:h100:soft", "gpu:h100")
    });
    let huge = workflow(dir.path(), "scratch-fast", "huge", |t| {
        t.replace("cores: 4", "cores: 100000")
    });
    let recorded = [
        Recorded {
            id: "s-alice-1",
            user: "alice",
            group: "researchers",
            workflow: prefer_b.clone(),
        },
        Recorded {
            id: "s-alice-2",
            user: "alice",
            group: "researchers",
            workflow: prefer_b.clone(),
        },
        Recorded {
            id: "g-alice-1",
            user: "alice",
            group: "researchers",
            workflow: gpu.clone(),
        },
        Recorded {
            id: "h-alice-1",
            user: "alice",
            group: "researchers",
            workflow: h100,
        },
        Recorded {
            id: "s-bob-1",
            user: "bob",
            group: "physics",
            workflow: prefer_b,
        },
        Recorded {
            id: "g-bob-1",
            user: "bob",
            group: "physics",
            workflow: gpu,
        },
    ];
    for (i, r) in recorded.iter().enumerate() {
        let wf = r.workflow.display().to_string();
        let args = ["submit", "-g", r.group, &wf, "--request-id", r.id, "-o", "json"];
        // The first submit may meet clusters still restoring (exit 75): asked again.
        let mut o = fedvol_as(&nats, r.user, &args);
        for _ in 0..50 {
            if i > 0 || o.status.code() != Some(75) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            o = fedvol_as(&nats, r.user, &args);
        }
        assert_eq!(o.status.code(), Some(0), "{}: {}", r.id, shown(&o));
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["decision"]["chosen_cluster"], "cluster-b", "{}: {doc:#}", r.id);
    }
    run(&nats, "alice", &["complete", "s-alice-2"]);
    let wf = huge.display().to_string();
    let o = fedvol_as(
        &nats,
        "alice",
        &["submit", "-g", "researchers", &wf, "--request-id", "huge-1"],
    );
    assert_eq!(o.status.code(), Some(2), "nothing fits: {}", shown(&o));

    // The baseline: today's federation alone moves nothing, committed work included (each is
    // planned on its own cluster without its own allocation and volume).
    let base = what_if(&nats, &[]);
    let r = &base["report"];
    assert_eq!(r["planned"], 7, "{base:#}");
    assert_eq!(
        (&r["changed"], &r["drift"], &r["placed_otherwise"]),
        (&0.into(), &0.into(), &0.into()),
        "{base:#}"
    );
    for (id, d) in by_id(&base) {
        assert_eq!(
            d["would_be"], d["was"],
            "{id}: the same cluster, volumes, zones and hosts"
        );
    }
    assert_eq!(r["clusters"]["cluster-b"]["was"], 6, "{base:#}");
    let table = String::from_utf8(run(&nats, "alice", &["what-if"]).stdout).unwrap();
    assert_fits_100("what-if", &table);
    assert!(table.contains("changed: 0 of 7"), "{table}");

    // Drain cluster-b, the cluster every placed decision chose: each moves where a plan
    // offline without cluster-b puts it (cluster-a and cluster-c hold no commits, so their files
    // are their state), or is refused with the reasons that plan gives.
    let drained = what_if(&nats, &["--drain", "cluster-b"]);
    assert_eq!(drained["changes"], serde_json::json!(["drain cluster-b"]));
    let decisions = by_id(&drained);
    let without_b = [inventory("cluster-a"), inventory("cluster-c")];
    let mut moved = 0;
    for rec in &recorded {
        let d = &decisions[rec.id];
        let (code, plan) = plan_offline(&nats, rec, &without_b);
        match code {
            Some(0) => {
                let chosen = plan["chosen_cluster"].as_str().unwrap();
                assert_eq!(d["transition"], "moves", "{}: {d:#}", rec.id);
                assert_eq!(d["would_be"]["cluster"], chosen, "{}: {d:#}\n{plan:#}", rec.id);
                let (volumes, jobs) = picks(&plan["clusters"][chosen]);
                assert_eq!(d["would_be"]["volumes"], volumes, "{}", rec.id);
                assert_eq!(d["would_be"]["jobs"], jobs, "{}", rec.id);
                moved += 1;
            }
            Some(2) => {
                // A coordinator refuses a workflow only drained clusters can place
                // `clusters_drained`; the other clusters' reasons are those of the plan.
                assert_eq!(d["transition"], "placed_to_refused", "{}: {d:#}", rec.id);
                assert_eq!(d["would_be"]["refused"]["code"], "clusters_drained", "{d:#}");
                let why = d["would_be"]["refused"]["message"].as_str().unwrap();
                assert!(
                    why.contains("fits only on drained clusters: cluster-b (drained by this what-if)"),
                    "{why}"
                );
                for c in ["cluster-a", "cluster-c"] {
                    let slot = &plan["clusters"][c];
                    let first = ["volumes", "jobs"]
                        .iter()
                        .find_map(|kind| {
                            slot[kind].as_object().unwrap().iter().find_map(|(k, x)| {
                                let what = kind.trim_end_matches('s');
                                x["error"]["code"]
                                    .as_str()
                                    .map(|code| format!("{c}: {what} {k}: {code}"))
                            })
                        })
                        .unwrap();
                    assert!(why.contains(&first), "{}: `{first}` in {why}", rec.id);
                }
            }
            other => panic!("{}: plan exit {other:?}: {plan:#}", rec.id),
        }
    }
    assert_eq!(moved, 5, "every decision but the H100 one finds another cluster");
    assert_eq!(decisions["h-alice-1"]["transition"], "placed_to_refused");
    assert_eq!(decisions["huge-1"]["transition"], "stays", "refused before and after");
    let b = &drained["report"]["clusters"]["cluster-b"];
    assert_eq!(
        (&b["moved_out"], &b["to_refused"], &b["change"]),
        (&5.into(), &1.into(), &"drained".into())
    );
    let table = String::from_utf8(run(&nats, "alice", &["what-if", "--drain", "cluster-b"]).stdout).unwrap();
    assert_fits_100("what-if --drain", &table);
    assert!(
        table.contains("changed: 6 of 7") && table.contains("moves cluster-b →"),
        "{table}"
    );
    // Removing it moves the same decisions to the same clusters.
    let removed = by_id(&what_if(&nats, &["--remove-cluster", "cluster-b"]));
    for (id, d) in &decisions {
        assert_eq!(removed[id]["would_be"]["cluster"], d["would_be"]["cluster"], "{id}");
    }

    // Narrow the access policy of cluster-b's fast-storage to group physics: exactly the
    // workflows of alice (researchers) that used it move; bob's stay.
    let b_text = std::fs::read_to_string(inventory("cluster-b")).unwrap();
    let at = b_text.find("fileSystemId: fs-12345678").unwrap();
    let narrowed = format!(
        "{}{}",
        &b_text[..at],
        b_text[at..].replacen("ephemeral: all", "ephemeral: [physics]", 1)
    );
    let narrowed_path = inventory("cluster-b").with_file_name("narrowed.yaml");
    std::fs::write(&narrowed_path, narrowed).unwrap();
    let arg = format!("cluster-b={}", narrowed_path.display());
    let doc = what_if(&nats, &["--inventory", &arg]);
    let changed: Vec<String> = by_id(&doc)
        .into_iter()
        .filter(|(_, d)| d["transition"] != "stays")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(changed, ["g-alice-1", "h-alice-1", "s-alice-1", "s-alice-2"], "{doc:#}");
    for (id, d) in by_id(&doc) {
        if id.starts_with("s-alice") || id.starts_with("g-alice") {
            assert_eq!(
                d["was"]["volumes"].as_object().unwrap().values().next().unwrap()["provisioner"],
                "fast-storage"
            );
        }
        if d["user"] == "bob" {
            assert_eq!(d["would_be"], d["was"], "{id}");
        }
    }
    assert_eq!(doc["report"]["projects"]["default"]["planned"], 7);

    // Bad input changes nothing and says what is wrong: a misspelt field (file, line, field),
    // an inventory of another cluster, an unknown cluster.
    let listed = || String::from_utf8(run(&nats, "alice", &["decisions", "list", "-o", "json"]).stdout).unwrap();
    let before = listed();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, b_text.replacen("ephemeral: all", "ephemerl: all", 1)).unwrap();
    let arg = format!("cluster-b={}", bad.display());
    let o = fedvol_as(&nats, "alice", &["what-if", "--inventory", &arg]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    assert!(
        err.contains("bad.yaml:") && err.contains("ephemerl") && err.contains("did you mean `ephemeral`"),
        "{err}"
    );
    let arg = format!("cluster-a={}", inventory("cluster-b").display());
    let o = fedvol_as(&nats, "alice", &["what-if", "--inventory", &arg]);
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("field `cluster` is `cluster-b`"),
        "{}",
        shown(&o)
    );
    let o = fedvol_as(&nats, "alice", &["what-if", "--drain", "cluster-z"]);
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("no cluster named `cluster-z` is known (known: cluster-a, cluster-b, cluster-c)"),
        "{}",
        shown(&o)
    );
    assert_eq!(listed(), before, "no decision changed");

    // A crowd: four users' what-ifs at once. A coordinator plans one at a time; each answer is
    // the whole report or says another one is running (ask again), never a partial one.
    let server = &nats;
    let outs: Vec<Output> = std::thread::scope(|s| {
        let hs: Vec<_> = ["alice", "bob", "alice", "bob"]
            .into_iter()
            .map(|u| s.spawn(move || fedvol_as(server, u, &["what-if", "--drain", "cluster-b"])))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut answered = 0;
    for o in &outs {
        let text = String::from_utf8_lossy(&o.stdout);
        match o.status.code() {
            Some(0) => {
                assert!(text.contains("changed: 6 of 7"), "{}", shown(o));
                answered += 1;
            }
            _ => assert!(
                String::from_utf8_lossy(&o.stderr).contains("another what-if is running on this coordinator"),
                "{}",
                shown(o)
            ),
        }
    }
    assert!(answered >= 1, "at least the first is answered");

    // `fedvol clusters drain --what-if` is that what-if, and drains nothing.
    let o = run(&nats, "alice", &["clusters", "drain", "cluster-b", "--what-if"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert_fits_100("clusters drain --what-if", &text);
    assert!(
        text.contains("changed: 6 of 7") && text.contains("moves cluster-b →"),
        "{text}"
    );
    let clusters = String::from_utf8(run(&nats, "alice", &["clusters", "-o", "json"]).stdout).unwrap();
    assert!(!clusters.contains("\"drain\""), "nothing drained: {clusters}");
    let o = fedvol_as(&nats, "alice", &["clusters", "drain", "cluster-b"]);
    assert_eq!(o.status.code(), Some(64), "a real drain needs --reason: {}", shown(&o));

    // An operator's drain in force: today's federation already drains cluster-b, so the
    // baseline says the drain alone moves its work (drift), each cluster's note says whose
    // drain it is, and a what-if --drain of it changes nothing more.
    run(
        &nats,
        "ops",
        &["clusters", "drain", "cluster-b", "--reason", "disk swap in rack 4"],
    );
    let base = what_if(&nats, &[]);
    let r = &base["report"];
    assert_eq!(
        (&r["changed"], &r["drift"], &r["by_change"]),
        (&6.into(), &6.into(), &0.into()),
        "{base:#}"
    );
    let note = base["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cluster-b")
        .and_then(|c| c["note"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        note.contains("drained by ops at") && note.contains("disk swap in rack 4"),
        "{base:#}"
    );
    let again = what_if(&nats, &["--drain", "cluster-b"]);
    assert_eq!(again["report"]["by_change"], 0, "{again:#}");
    assert!(
        again["changes"][0]
            .as_str()
            .unwrap()
            .starts_with("drain cluster-b: no change, drained by ops"),
        "{again:#}"
    );
    let hypothetical = by_id(&drained);
    for (id, d) in by_id(&again) {
        assert_eq!(
            d["would_be"]["cluster"], hypothetical[&id]["would_be"]["cluster"],
            "{id}: the operator's drain moves what the what-if's drain moved"
        );
    }
    run(&nats, "ops", &["clusters", "undrain", "cluster-b"]);
    assert_eq!(
        what_if(&nats, &[])["report"]["changed"],
        0,
        "undrained: the baseline again"
    );

    // Another policy: a quota of 1 core on group researchers (alice's) refuses each of alice's
    // decisions `quota_exceeded` beside today's live use; bob's (physics) stay. The coordinator
    // runs without quotas, so today's verdict passes them all.
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "quotas:\n  - {group: researchers, cpu: 1}\n").unwrap();
    let policy_arg = policy.display().to_string();
    let doc = what_if(&nats, &["--policy", &policy_arg]);
    let r = &doc["report"];
    let decisions = by_id(&doc);
    let alice: Vec<&String> = decisions
        .keys()
        .filter(|id| decisions[*id]["user"] == "alice")
        .collect();
    for id in &alice {
        let d = &decisions[*id];
        assert_eq!(d["would_be"]["refused"]["code"], "quota_exceeded", "{id}: {d:#}");
        assert!(
            d["would_be"]["refused"]["message"]
                .as_str()
                .unwrap()
                .contains("group researchers: cpu"),
            "{d:#}"
        );
        assert_eq!(d["quota_changed"], true, "{id}");
    }
    for (id, d) in &decisions {
        if d["user"] == "bob" {
            assert_eq!(d["transition"], "stays", "{id}");
            assert!(d.get("quota_changed").is_none(), "{id}");
        }
    }
    assert_eq!(alice.len(), 5, "s-alice-1, s-alice-2, g-alice-1, h-alice-1, huge-1");
    assert_eq!(
        (&r["quota_changed"], &r["changed"], &r["by_change"]),
        (&5.into(), &4.into(), &4.into()),
        "huge-1 was refused already (nothing fits): refused still, for another reason\n{doc:#}"
    );
    let q = &doc["quotas"][0];
    assert_eq!(
        (&q["scope"], &q["name"]),
        (&"group".into(), &"researchers".into()),
        "{doc:#}"
    );
    assert_eq!((&q["refused"], &q["refused_today"]), (&5.into(), &0.into()));
    assert!(
        q["used"]["cpu"].as_u64().unwrap() > 1,
        "alice's live commits hold cores: {q}"
    );
    let table = String::from_utf8(run(&nats, "alice", &["what-if", "--policy", &policy_arg]).stdout).unwrap();
    assert_fits_100("what-if --policy", &table);
    assert!(
        table.contains("group researchers") && table.contains("5 decisions get another verdict"),
        "{table}"
    );
    // A coordinator.yaml's other keys are not policy: refused with the file, line and key.
    std::fs::write(&policy, "deadlineMs: 5\nquotas:\n  - {group: researchers, cpu: 1}\n").unwrap();
    let o = fedvol_as(&nats, "alice", &["what-if", "--policy", &policy_arg]);
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("policy.yaml:1:1") && err.contains("deadlineMs"), "{err}");
}
