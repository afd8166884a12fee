//! Security against real processes on the shipped `deploy/nats/secure.conf` (and its
//! leaf variant), copied and pointed at loopback like `deploy_nats.rs` does:
//!
//! - agents and users are confined to their own subjects and their own reply inboxes, every
//!   refused attempt is refused by the server and logged (`Violation`);
//! - a user's groups come from the directory: a workflow on a provisioner the user's groups may
//!   not use is refused with `permission_denied`; only a decision's owner may complete it;
//! - a driver secret planted in a referenced file and an environment variable never appears in
//!   any decision, event, reply, log line, stored state or server log of a full run;
//! - oversized bodies and answers, and invalid user names, get clear errors.
//!
//! Tests run one at a time: each starts a server and several processes, and the machine may
//! have two cores.

use fedvol_tests::shipped::LoggedIn;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use fedvol_tests::federation::slots_inventory;
use fedvol_tests::kit::{
    Kit, SLOT_WORKFLOW, agent_as, client, command, coordinator_as, fedvol_as, inbox_prefix, output_text as text,
    password, server_logged, silent, wait_clusters_as,
};
use fedvol_tests::{NatsServer, Spawned, bin_path};
use futures::StreamExt;

/// One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const WORKFLOW: &str = SLOT_WORKFLOW;

// ---------------------------------------------------------------------------------------------
// Helpers

/// `deploy/nats/secure.conf`, copied and pointed at a free loopback port and a fresh store.
fn secure_server(kit: &Kit) -> NatsServer {
    kit.loopback_server("secure.conf")
}

/// `fedvol -u <user> <args>` logged in as NATS user `login` with `login`'s private inbox.
fn fedvol(url: &str, login: &str, user: &str, args: &[&str]) -> Output {
    fedvol_as(url, login, user, true, args)
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// A coordinator logged in as `coordinator` with its private inbox and the shipped directory.
async fn coordinator(url: &str, env: &[(&str, &str)]) -> Spawned {
    coordinator_as(url, true, &[], env).await
}

/// An agent of `cluster` logged in as `agent-<cluster>` with its private inbox, on the
/// inventory `inventory` (written to `<dir>/inventory.yaml`).
async fn agent(url: &str, cluster: &str, dir: &Path, inventory: &str, env: &[(&str, &str)]) -> Spawned {
    agent_as(url, cluster, true, dir, inventory, env).await
}

/// An agent of `cluster` with two 8-core hosts whose scratch provisioner group `physics` may
/// use, its files under `dir`.
async fn physics_agent(url: &str, cluster: &str, dir: &Path) -> Spawned {
    agent(url, cluster, dir, &slots_inventory(cluster, 2, dir, "[physics]"), &[]).await
}

/// Waits until `fedvol clusters` (as alice) lists every cluster of `names` as alive.
async fn wait_clusters(url: &str, names: &[&str]) {
    wait_clusters_as(url, true, names).await
}

/// Asserts the server logged a `what` ("Publish Violation", "Subscription Violation") of
/// `user` on `subject`.
async fn violation(server: &NatsServer, what: &str, user: &str, subject: &str) {
    let u = format!("User \"{user}\"");
    let s = format!("\"{subject}\"");
    assert!(
        server_logged(server, &[what, &u, &s]).await,
        "no {what} of {user} on {subject} in the server log:\n{}",
        server.log()
    );
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

// ---------------------------------------------------------------------------------------------
// Confinement on secure.conf

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_conf_confines_agents_and_users_to_their_own_subjects_and_inboxes() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let (da, db) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    let mut coord = coordinator(&url, &[]).await;
    let _a = physics_agent(&url, "cluster-a", &da).await;
    let _b = physics_agent(&url, "cluster-b", &db).await;
    wait_clusters(&url, &["cluster-a", "cluster-b"]).await;

    // The federation works with private inboxes only: alice (physics) submits, watches (a
    // JetStream consumer delivering to her own inbox) and nothing is refused.
    let wf = write(dir.path(), "wf.yaml", WORKFLOW);
    let wf = wf.display().to_string();
    let o = fedvol(
        &url,
        "alice",
        "alice",
        &["submit", &wf, "--request-id", "sec-1", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["state"], "committed", "{}", text(&o));
    let mut watch = Spawned::start({
        let mut c = command("fedvol", &url, "alice", true);
        c.args(["-u", "alice", "decisions", "watch"]);
        c
    });
    watch.wait_for_log("sec-1", Duration::from_secs(10)).await;
    for args in [vec!["decisions", "list"], vec!["decisions", "replay", "sec-1"]] {
        let o = fedvol(&url, "alice", "alice", &args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    // The web view reads with the same credentials and private inbox: the list (the bucket's
    // watch), a decision and the clusters (coordinator calls).
    let mut ui = Spawned::start({
        let mut c = command("fedvol", &url, "alice", true);
        c.args(["-u", "alice", "ui", "--listen", "127.0.0.1:0"]);
        c
    });
    ui.wait_for_log("view on http://", Duration::from_secs(10)).await;
    let base = ui
        .log()
        .split("view on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .map(|s| s.trim_end_matches('/').to_string())
        .expect("the view's address");
    let ui_base = base.clone();
    let pages = tokio::task::spawn_blocking(move || {
        ["/decisions", "/decisions/sec-1", "/clusters"]
            .map(|p| fedvol_tests::browser::http_get(&format!("{ui_base}{p}")))
    })
    .await
    .unwrap();
    for ((status, body), what) in pages.iter().zip(["sec-1", "data-stage=", "cluster-b"]) {
        assert_eq!(*status, 200, "{body}");
        assert!(body.contains(what), "{what} in {body}");
    }
    drop(ui);
    assert!(
        !nats.log().contains("Violation"),
        "secure.conf refused something fedvol needs:\n{}",
        nats.log()
    );

    // A user whose groups lack the provisioner's permission is refused with that reason, even
    // when claiming the right group: with a directory, `-g` is ignored, and the CLI says so
    //.
    let o = fedvol(
        &url,
        "bob",
        "bob",
        &["submit", &wf, "--request-id", "sec-bob", "-o", "json", "-g", "physics"],
    );
    assert_eq!(o.status.code(), Some(2), "nothing fits for bob: {}", text(&o));
    assert!(
        text(&o).contains("note: -g was ignored: the coordinator takes your groups from its user directory ([chem])"),
        "{}",
        text(&o)
    );
    let doc = json(&o);
    assert_eq!(doc["state"], "failed", "{doc:#}");
    for c in ["cluster-a", "cluster-b"] {
        let err = &doc["decision"]["clusters"][c]["volumes"]["scratch"]["error"];
        let trace = doc["decision"]["clusters"][c]["trace"].to_string();
        assert!(
            trace.contains("permission_denied") && err.to_string().contains("permission"),
            "{c}: bob (chem) may not use scratch (physics): {doc:#}"
        );
    }
    // ...and bob cannot complete alice's decision (nor take over its request id).
    let o = fedvol(&url, "bob", "bob", &["complete", "sec-1", "-o", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("not_owner") || text(&o).contains("belongs to user `alice`"),
        "{}",
        text(&o)
    );
    let o = fedvol(&url, "bob", "bob", &["submit", &wf, "--request-id", "sec-1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("belongs to another user"), "{}", text(&o));
    let o = fedvol(&url, "alice", "alice", &["decisions", "show", "sec-1", "-o", "json"]);
    assert_eq!(json(&o)["state"], "committed", "bob changed nothing");

    // alice cannot submit as bob: the server refuses the request, it is logged, and the CLI
    // says so as soon as the server does, not after its timeout.
    let t0 = Instant::now();
    let o = fedvol(&url, "alice", "bob", &["--timeout-ms", "30000", "clusters"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("the NATS server refused this request") && text(&o).contains("-u must be your NATS user"),
        "{}",
        text(&o)
    );
    assert!(t0.elapsed() < Duration::from_secs(20), "at once, not at the timeout");
    // Identity in one flag: `-u alice` with the password in the environment is
    // enough; the NATS user and the private inbox `_INBOX_alice` follow from it.
    let bare = || {
        let mut c = Command::new(bin_path("fedvol"));
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("FEDVOL_") {
                c.env_remove(&k);
            }
        }
        c.env("FEDVOL_NATS_PASSWORD", password("alice"));
        c
    };
    let o = bare()
        .args(["clusters", "--nats", &url, "-u", "alice"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // An inbox the permissions do not allow is refused at once, saying what to do.
    let o = bare()
        .args([
            "clusters",
            "--nats",
            &url,
            "-u",
            "alice",
            "--nats-inbox-prefix",
            "_INBOX",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("pass --nats-inbox-prefix with the one your NATS permissions allow"),
        "{}",
        text(&o)
    );
    violation(
        &nats,
        "Publish Violation",
        "alice",
        "fedvol.v1.coordinator.clusters.bob",
    )
    .await;
    // A user name that is no subject token never leaves the CLI.
    let o = fedvol(&url, "alice", "alice.smith", &["clusters"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("user name `alice.smith` is not valid"),
        "{}",
        text(&o)
    );

    // alice: no agent subject, no plan broadcast, nobody else's inbox (read or write), and
    // not the shared `_INBOX.>` either.
    let alice = client(&url, "alice", &inbox_prefix("alice")).await;
    let mut bobs = alice.subscribe("_INBOX_bob.>").await.unwrap();
    let mut coords = alice.subscribe("_INBOX_coordinator.>").await.unwrap();
    let mut shared = alice.subscribe("_INBOX.>").await.unwrap();
    for s in [
        "fedvol.v1.cluster.cluster-a.status",
        "fedvol.v1.plan",
        "_INBOX_bob.forged",
    ] {
        alice.publish(s, "{\"v\":1}".into()).await.unwrap();
    }
    alice.flush().await.unwrap();
    // bob and the coordinator work meanwhile: alice sees none of their replies.
    let o = fedvol(&url, "bob", "bob", &["clusters"]);
    assert!(o.status.success(), "{}", text(&o));
    for (name, sub) in [
        ("bob's", &mut bobs),
        ("the coordinator's", &mut coords),
        ("any", &mut shared),
    ] {
        assert!(silent(sub, Duration::from_millis(300)).await, "alice read {name} inbox");
    }
    for s in ["_INBOX_bob.>", "_INBOX_coordinator.>", "_INBOX.>"] {
        violation(&nats, "Subscription Violation", "alice", s).await;
    }
    for s in [
        "fedvol.v1.cluster.cluster-a.status",
        "fedvol.v1.plan",
        "_INBOX_bob.forged",
    ] {
        violation(&nats, "Publish Violation", "alice", s).await;
    }

    // agent-cluster-a: cannot take cluster-b's requests, read the coordinator's inbox, write
    // into it unasked, or speak for cluster-b.
    let agent_a = client(&url, "agent-cluster-a", &inbox_prefix("agent-cluster-a")).await;
    let mut b_requests = agent_a
        .queue_subscribe("fedvol.v1.cluster.cluster-b.>", "agent.cluster-b".into())
        .await
        .unwrap();
    let mut b_in_a_queue = agent_a
        .queue_subscribe("fedvol.v1.cluster.cluster-b.>", "agent.cluster-a".into())
        .await
        .unwrap();
    let mut coord_inbox = agent_a.subscribe("_INBOX_coordinator.>").await.unwrap();
    agent_a
        .publish("_INBOX_coordinator.forged", "{\"v\":1}".into())
        .await
        .unwrap();
    agent_a
        .publish("fedvol.v1.heartbeat.cluster-b", "spoof".into())
        .await
        .unwrap();
    // Its own heartbeat subject, naming another cluster in the body: the coordinator ignores it.
    let spoof = serde_json::json!({"v": 1, "cluster": "cluster-z", "instance": "x", "inventory_version": "x",
        "holds": 0, "load": 0.0, "sent_ms": fedvol_proto::now_ms(), "interval_ms": 300});
    agent_a
        .publish(
            "fedvol.v1.heartbeat.cluster-a",
            serde_json::to_vec(&spoof).unwrap().into(),
        )
        .await
        .unwrap();
    agent_a.flush().await.unwrap();
    // The coordinator identity asks cluster-b: cluster-b's agent answers, agent-a sees nothing.
    let co = client(&url, "coordinator", &inbox_prefix("coordinator")).await;
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        co.request("fedvol.v1.cluster.cluster-b.status", "{\"v\":1}".into()),
    )
    .await
    .expect("cluster-b answers in time")
    .expect("cluster-b answers");
    let status: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(status["cluster"], "cluster-b", "{status}");
    for (what, sub) in [
        ("cluster-b's queue group", &mut b_requests),
        ("cluster-b's subjects in its own queue group", &mut b_in_a_queue),
        ("the coordinator's inbox", &mut coord_inbox),
    ] {
        assert!(silent(sub, Duration::from_millis(300)).await, "agent-a read {what}");
    }
    for s in ["fedvol.v1.cluster.cluster-b.>", "_INBOX_coordinator.>"] {
        violation(&nats, "Subscription Violation", "agent-cluster-a", s).await;
    }
    for s in ["_INBOX_coordinator.forged", "fedvol.v1.heartbeat.cluster-b"] {
        violation(&nats, "Publish Violation", "agent-cluster-a", s).await;
    }
    coord
        .wait_for_log(
            "a heartbeat naming another cluster than its subject: ignored",
            Duration::from_secs(5),
        )
        .await;
    let o = fedvol(&url, "alice", "alice", &["clusters", "-o", "json"]);
    assert!(!text(&o).contains("cluster-z"), "{}", text(&o));

    // Finally alice completes her own workflow.
    let o = fedvol(&url, "alice", "alice", &["complete", "sec-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    watch.wait_for_log("completed", Duration::from_secs(10)).await;
}

// ---------------------------------------------------------------------------------------------
// Speaking for another cluster

/// The body of a plan answer in cluster `named`'s name for request `id`: infeasible when
/// `feasible` is false, else "feasible" on a host of the attacker's choosing.
fn forged_answer(id: &str, named: &str, feasible: bool) -> bytes::Bytes {
    let jobs = if feasible {
        serde_json::json!({"j": {"zone": "z1", "host": "evil-host", "error": null}})
    } else {
        serde_json::json!({})
    };
    let body = serde_json::json!({
        "v": 1, "request_id": id, "cluster": named,
        "decision": {"status": "answered", "elapsed_ms": 0.1, "inventory_version": "forged",
            "feasible": feasible, "volumes": {}, "jobs": jobs, "trace": [], "load": 0.0}
    });
    serde_json::to_vec(&body).unwrap().into()
}

/// Agent-cluster-a's credentials (here in an attacker's hands, no real
/// agent a) answer every plan they receive in another cluster's name: cluster-b's (infeasible)
/// and an invented `cluster-zz` (feasible on `evil-host`); they also try to answer on the reply
/// subject meant for cluster-b, and answer the coordinator's discovery as `cluster-zz`.
/// cluster-b's real agent runs. Every decision is b's own answer, committed on b; the forged
/// answers are refused by the server (the reply subject of another cluster: `Publish
/// Violation`) or refused and logged by the coordinator (an answer naming another cluster
/// than the one asked); `cluster-zz` never stays in the registry (`fedvol clusters`) and never
/// appears in a decision once the coordinator found nobody serving it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_credential_cannot_answer_for_another_cluster() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();

    // The attacker, logged in as agent-cluster-a.
    let rogue = client(&url, "agent-cluster-a", &inbox_prefix("agent-cluster-a")).await;
    let heartbeats = fedvol_tests::faultkit::heartbeats(rogue.clone(), "cluster-a", "rogue", "forged", 300);
    let mut discovery = rogue.subscribe("$SRV.INFO.fedvol-agent").await.unwrap();
    let discovery = {
        let rogue = rogue.clone();
        tokio::spawn(async move {
            while let Some(m) = discovery.next().await {
                let info = serde_json::json!({"type": "io.nats.micro.v1.info_response", "name": "fedvol-agent",
                    "id": "rogue-zz", "description": "forged", "version": "0.0.0",
                    "metadata": {"cluster": "cluster-zz"}, "endpoints": []});
                if let Some(reply) = m.reply {
                    let _ = rogue.publish(reply, serde_json::to_vec(&info).unwrap().into()).await;
                }
            }
        })
    };
    let sibling_tries: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let mut plans = futures::stream::select(
        rogue
            .queue_subscribe("fedvol.v1.plan", "agent.cluster-a".into())
            .await
            .unwrap(),
        rogue
            .queue_subscribe("fedvol.v1.cluster.cluster-a.>", "agent.cluster-a".into())
            .await
            .unwrap(),
    );
    let forger = {
        let (rogue, tries) = (rogue.clone(), sibling_tries.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while let Some(m) = plans.next().await {
                let Some(reply) = m.reply.clone() else { continue };
                let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap_or_default();
                let id = body["request"]["request_id"].as_str().unwrap_or_default().to_string();
                let forged = if n % 2 == 0 {
                    forged_answer(&id, "cluster-b", false)
                } else {
                    forged_answer(&id, "cluster-zz", true)
                };
                n += 1;
                let _ = rogue.publish(reply.clone(), forged).await;
                // The reply subject meant for cluster-b, when the request carries a per-cluster
                // one (`<inbox>.cluster-a.<n>`).
                if let Some((stem, n)) = reply.rsplit_once('.')
                    && let Some(stem) = stem.strip_suffix(".cluster-a")
                {
                    let theirs = format!("{stem}.cluster-b.{n}");
                    tries.lock().unwrap().push(theirs.clone());
                    let _ = rogue.publish(theirs, forged_answer(&id, "cluster-b", false)).await;
                }
                let _ = rogue.flush().await;
            }
        })
    };
    rogue.flush().await.unwrap();

    let mut coord = coordinator(&url, &[]).await;
    let db = dir.path().join("b");
    let _b = physics_agent(&url, "cluster-b", &db).await;
    wait_clusters(&url, &["cluster-a", "cluster-b"]).await;

    let wf = write(dir.path(), "wf.yaml", WORKFLOW).display().to_string();
    for i in 0..2 {
        let id = format!("forge-{i}");
        let o = fedvol(
            &url,
            "alice",
            "alice",
            &["submit", &wf, "--request-id", &id, "-o", "json"],
        );
        let doc = json(&o);
        let clusters = &doc["decision"]["clusters"];
        assert!(
            clusters["cluster-b"]["inventory_version"]
                .as_str()
                .is_some_and(|v| v != "forged"),
            "{id}: cluster-b's slot is b's own answer: {doc:#}"
        );
        assert_eq!(clusters["cluster-b"]["feasible"], true, "{id}: {doc:#}");
        assert_eq!(o.status.code(), Some(0), "{id}: {}", text(&o));
        assert_eq!(doc["state"], "committed", "{id}: {doc:#}");
        assert_eq!(doc["decision"]["chosen_cluster"], "cluster-b", "{id}: {doc:#}");
        assert!(!doc.to_string().contains("evil-host"), "{id}: {doc:#}");
        if i > 0 {
            assert!(clusters.get("cluster-zz").is_none(), "{id}: {doc:#}");
        }
        // cluster-a's credentials answered, but in another cluster's name: its own slot says so.
        assert_eq!(clusters["cluster-a"]["status"], "error", "{id}: {doc:#}");
    }
    coord
        .wait_for_log(
            "a plan answer in another cluster's name: refused",
            Duration::from_secs(5),
        )
        .await;
    let tried = sibling_tries.lock().unwrap().clone();
    assert!(!tried.is_empty(), "the coordinator sends per-cluster reply subjects");
    for subject in &tried {
        violation(&nats, "Publish Violation", "agent-cluster-a", subject).await;
    }
    // The invented cluster is not in the registry.
    let o = fedvol(&url, "alice", "alice", &["clusters", "-o", "json"]);
    let names: Vec<String> = json(&o)["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(names, ["cluster-a", "cluster-b"], "{}", text(&o));
    // b committed both, once each.
    let co = client(&url, "coordinator", &inbox_prefix("coordinator")).await;
    let st = fedvol_tests::checker::fetch_status(&co, "cluster-b").await.unwrap();
    let mut committed = st.committed.clone();
    committed.sort();
    assert_eq!(committed, ["forge-0", "forge-1"]);
    heartbeats.abort();
    discovery.abort();
    forger.abort();
}

// ---------------------------------------------------------------------------------------------
// Secrets

const FILE_SECRET: &str = "s3cr3t-f1le-7f3a9c04d2";
const ENV_SECRET: &str = "s3cr3t-env-b41d2e90aa";
const ENV_VAR: &str = "FEDVOL_TEST_PROVISIONER_TOKEN";

/// Cluster-a's inventory: three external provisioners of the example provisioner, each with a
/// `token` reference (a file, an environment variable, a file holding the wrong token), one
/// per annotation `vault`, usable by physics; two 8-core hosts.
fn secret_inventory(token_file: &Path, wrong_file: &Path) -> String {
    let mut t = String::from("cluster: cluster-a\nprovisioners:\n");
    for (name, vendor, token, tag) in [
        (
            "vault-file",
            "example.com/tokened-file",
            format!("file:{}", token_file.display()),
            "file",
        ),
        ("vault-env", "example.com/tokened-env", format!("env:{ENV_VAR}"), "env"),
        (
            "vault-wrong",
            "example.com/tokened-file",
            format!("file:{}", wrong_file.display()),
            "wrong",
        ),
    ] {
        t.push_str(&format!(
            "  {name}:\n    driver:\n      type: external\n      provisioner: {vendor}\n      parameters: {{mode: \"0750\", token: \"{token}\"}}\n    annotations: {{vault: {tag}}}\n    ephemeral: [physics]\n    create: [physics]\n"
        ));
    }
    t.push_str("zones:\n  z1:\n    hosts:\n");
    for i in 0..2 {
        t.push_str(&format!(
            "      - {{name: h{i}, capacity: {{cpu: 8, memory: 32GiB, instances: 4}}}}\n"
        ));
    }
    t
}

fn secret_workflow(tags: &[&str]) -> String {
    let mut t = String::from("version: v4\nvolumes:\n");
    for tag in tags {
        t.push_str(&format!(
            "  v-{tag}:\n    size: 1MiB\n    annotations: {{vault: {tag}}}\n"
        ));
    }
    t.push_str("jobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {");
    let mounts: Vec<String> = tags.iter().map(|tag| format!("/{tag}: v-{tag}")).collect();
    t.push_str(&mounts.join(", "));
    t.push_str("}\n    resource: {cpu: {cores: 2}, memory: {size: 1GiB}}\n");
    t
}

/// An example provisioner `vendor` of cluster-a logged in as `provisioner-cluster-a`, checking
/// tokens against `expect` (a secret reference), volumes under `root`.
async fn provisioner(url: &str, vendor: &str, expect: &str, root: &Path) -> Spawned {
    std::fs::create_dir_all(root).unwrap();
    let mut cmd = command("fedvol-example-provisioner", url, "provisioner-cluster-a", false);
    cmd.args([
        "--cluster",
        "cluster-a",
        "--name",
        vendor,
        "--expect-token",
        expect,
        "--root",
    ])
    .arg(root)
    .env(ENV_VAR, ENV_SECRET)
    .env("RUST_LOG", "debug,async_nats=info");
    let mut p = Spawned::start(cmd);
    p.wait_for_log("listening", Duration::from_secs(30)).await;
    p
}

/// Every file under `dir`, recursively, as bytes (the agent's redb state included).
fn all_bytes(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            all_bytes(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_secrets_stay_references_and_never_appear_in_any_output() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let secrets_dir = tempfile::tempdir().unwrap();
    let token_file = write(secrets_dir.path(), "token", &format!("{FILE_SECRET}\n"));
    let expected_file = write(secrets_dir.path(), "expected", FILE_SECRET);
    let wrong_file = write(secrets_dir.path(), "wrong", "not-the-token");
    let env = [(ENV_VAR, ENV_SECRET)];

    // Every process has the environment secret in its environment: none may print it.
    let coord = coordinator(&url, &env).await;
    let da = dir.path().join("a");
    std::fs::create_dir_all(&da).unwrap();
    let agent_a = agent(
        &url,
        "cluster-a",
        &da,
        &secret_inventory(&token_file, &wrong_file),
        &env,
    )
    .await;
    let by_file = provisioner(
        &url,
        "example.com/tokened-file",
        &format!("file:{}", expected_file.display()),
        &dir.path().join("vols-file"),
    )
    .await;
    let by_env = provisioner(
        &url,
        "example.com/tokened-env",
        &format!("env:{ENV_VAR}"),
        &dir.path().join("vols-env"),
    )
    .await;
    wait_clusters(&url, &["cluster-a"]).await;
    let mut watch = Spawned::start({
        let mut c = command("fedvol", &url, "alice", true);
        c.args(["-u", "alice", "decisions", "watch"]).env(ENV_VAR, ENV_SECRET);
        c
    });
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut run = |args: &[&str]| -> Output {
        let o = fedvol(&url, "alice", "alice", args);
        outputs.push((format!("fedvol {args:?}"), text(&o)));
        o
    };

    // The provisioner really needs the secret: the wrong token is refused (without echo)...
    let wrong = write(dir.path(), "wrong.yaml", &secret_workflow(&["wrong"]));
    let o = run(&[
        "submit",
        &wrong.display().to_string(),
        "--request-id",
        "sec-wrong",
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is not the expected token"), "{}", text(&o));
    // ...and the right ones, from a file and from the environment, provision.
    let wf = write(dir.path(), "wf.yaml", &secret_workflow(&["file", "env"]));
    let wf = wf.display().to_string();
    let o = run(&["submit", &wf, "--request-id", "sec-ok", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["state"], "committed", "{}", text(&o));
    assert_eq!(std::fs::read_dir(dir.path().join("vols-file")).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(dir.path().join("vols-env")).unwrap().count(), 1);
    watch.wait_for_log("sec-ok", Duration::from_secs(10)).await;

    for args in [
        vec![
            "why-not",
            "sec-ok",
            "--cluster",
            "cluster-a",
            "--provisioner",
            "vault-wrong",
            "-o",
            "json",
        ],
        vec![
            "why-not",
            "sec-wrong",
            "--cluster",
            "cluster-a",
            "--provisioner",
            "vault-wrong",
        ],
        vec!["decisions", "show", "sec-ok", "-o", "json"],
        vec!["decisions", "show", "sec-wrong", "-o", "json"],
        vec!["decisions", "show", "sec-ok", "-o", "yaml"],
        vec!["decisions", "show", "sec-ok"],
        vec!["decisions", "list", "-o", "json"],
        vec!["decisions", "replay", "sec-ok", "-o", "json"],
        vec!["clusters", "-o", "json"],
    ] {
        let o = run(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    // The agent's status and inventory endpoints (coordinator identity): references only.
    let co = client(&url, "coordinator", &inbox_prefix("coordinator")).await;
    let mut replies = Vec::new();
    for op in ["status", "inventory"] {
        let m = tokio::time::timeout(
            Duration::from_secs(5),
            co.request(format!("fedvol.v1.cluster.cluster-a.{op}"), "{\"v\":1}".into()),
        )
        .await
        .expect("the agent answers in time")
        .expect("the agent answers");
        replies.push((op, String::from_utf8_lossy(&m.payload).into_owned()));
    }
    let inventory = &replies[1].1;
    assert!(
        inventory.contains(&format!("file:{}", token_file.display())) && inventory.contains(&format!("env:{ENV_VAR}")),
        "the inventory endpoint shows the references: {inventory}"
    );
    let o = run(&["complete", "sec-ok", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        std::fs::read_dir(dir.path().join("vols-file")).unwrap().count(),
        0,
        "deleted"
    );
    watch.wait_for_log("completed", Duration::from_secs(10)).await;
    let o = run(&["decisions", "show", "sec-ok", "-o", "json"]);
    assert_eq!(json(&o)["state"], "completed");

    // Every stored revision of every decision, straight from the bucket (as the coordinator's
    // bucket identity, the one with JetStream rights).
    let kv_login = client(&url, "coordinator-kv", &inbox_prefix("coordinator-kv")).await;
    let js = async_nats::jetstream::new(kv_login);
    let kv = js.get_key_value("fedvol_decisions").await.unwrap();
    let mut stored = Vec::new();
    for key in ["sec-ok", "sec-wrong"] {
        let mut h = kv.history(key).await.unwrap();
        while let Ok(Some(Ok(e))) = tokio::time::timeout(Duration::from_secs(2), h.next()).await {
            stored.push(String::from_utf8_lossy(&e.value).into_owned());
        }
    }
    assert!(
        stored.len() >= 4,
        "planned and final revisions of both: {}",
        stored.len()
    );
    assert!(
        stored
            .iter()
            .any(|s| s.contains("ProvisioningSucceeded") || s.contains("provisioned")),
        "{stored:?}"
    );

    // Grep everything: CLI outputs, replies, stored decisions, every process log, the server's
    // log and every file the agent and provisioners wrote.
    let mut corpus: Vec<(String, Vec<u8>)> = Vec::new();
    for (what, out) in outputs {
        corpus.push((what, out.into_bytes()));
    }
    for (op, body) in replies {
        corpus.push((format!("agent {op} reply"), body.into_bytes()));
    }
    for (i, s) in stored.into_iter().enumerate() {
        corpus.push((format!("stored revision {i}"), s.into_bytes()));
    }
    for (name, p) in [
        ("coordinator log", &coord),
        ("agent log", &agent_a),
        ("file provisioner log", &by_file),
        ("env provisioner log", &by_env),
        ("watch output", &watch),
    ] {
        corpus.push((name.to_string(), p.log().into_bytes()));
    }
    corpus.push(("nats-server log".into(), nats.log().into_bytes()));
    let mut files = Vec::new();
    all_bytes(dir.path(), &mut files);
    for (p, b) in files {
        corpus.push((p.display().to_string(), b));
    }
    assert!(
        by_file.log().contains("provisioned") && by_env.log().contains("provisioned"),
        "both provisioners worked"
    );
    assert!(
        agent_a.log().contains("token"),
        "the agent logged the parameters (references)"
    );
    for (what, bytes) in &corpus {
        for secret in [FILE_SECRET, ENV_SECRET] {
            assert!(
                !contains(bytes, secret),
                "the secret {secret} leaked into {what}:\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The secure leaf topology

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_leaf_topology_runs_a_federation_with_private_inboxes() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let fed = kit
        .leaf_federation("leaf/secure-hub.conf", "leaf/secure-leaf-", true, Vec::new())
        .await;
    let (hub, leaves, dir) = (&fed.hub, &fed.leaves, &fed.dir);
    let hub_url = hub.url();
    let wf = write(dir.path(), "wf.yaml", WORKFLOW).display().to_string();
    let o = fedvol(
        &hub_url,
        "alice",
        "alice",
        &["submit", &wf, "--request-id", "leaf-1", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc = json(&o);
    for c in ["cluster-a", "cluster-b"] {
        assert_eq!(doc["decision"]["clusters"][c]["status"], "answered", "{doc:#}");
    }
    let o = fedvol(&hub_url, "alice", "alice", &["complete", "leaf-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for s in [hub, &leaves[0], &leaves[1]] {
        assert!(
            !s.log().contains("Violation"),
            "a permission refused fedvol traffic:\n{}",
            s.log()
        );
    }
    // On its leaf, agent-a may not read the coordinator's replies either.
    let agent_a = client(&leaves[0].url(), "agent-cluster-a", &inbox_prefix("agent-cluster-a")).await;
    let _sub = agent_a.subscribe("_INBOX_coordinator.>").await.unwrap();
    agent_a.flush().await.unwrap();
    violation(
        &leaves[0],
        "Subscription Violation",
        "agent-cluster-a",
        "_INBOX_coordinator.>",
    )
    .await;
    // Even leaf a's own hub login may answer a plan only in cluster-a's name (the
    // coordinator expects cluster-b's answer on `<inbox>.cluster-b.<n>`).
    let leaf_login = client(&hub_url, "leaf-cluster-a", "_INBOX_leaf-cluster-a").await;
    // cluster-a first: its refusal, if any, would be logged before cluster-b's.
    for s in ["_INBOX_coordinator.x.cluster-a.1", "_INBOX_coordinator.x.cluster-b.1"] {
        leaf_login.publish(s, "{\"v\":1}".into()).await.unwrap();
    }
    leaf_login.flush().await.unwrap();
    violation(
        hub,
        "Publish Violation",
        "leaf-cluster-a",
        "_INBOX_coordinator.x.cluster-b.1",
    )
    .await;
    assert!(
        !hub.log().contains("\"_INBOX_coordinator.x.cluster-a.1\""),
        "its own cluster's token is allowed:\n{}",
        hub.log()
    );
}

// ---------------------------------------------------------------------------------------------
// Limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_answers_and_bad_names_get_clear_errors() {
    let _serial = SERIAL.lock().await;
    // A server whose max_payload is small enough for a decision to overflow it.
    let nats = NatsServer::shipped_with(fedvol_tests::shipped::Shipped::Single, "max_payload: 8192");
    let url = nats.url();
    let mut coord = Spawned::start({
        let mut c = Command::new(bin_path("fedvol-coordinator"));
        c.args([
            "--nats",
            &url,
            "--deadline-ms",
            "2000",
            "--discovery-ms",
            "300",
            "--max-body-bytes",
            "7168",
        ]);
        c
    });
    coord.wait_for_log("coordinator ready", Duration::from_secs(30)).await;
    let dir = tempfile::tempdir().unwrap();
    let inv = write(dir.path(), "inv.yaml", &slots_inventory("c1", 2, dir.path(), "all"));
    let mut agent = Spawned::start({
        let mut c = Command::new(bin_path("fedvol-agent"));
        c.args([
            "--nats",
            &url,
            "--heartbeat-ms",
            "200",
            "--max-body-bytes",
            "7168",
            "--inventory",
        ])
        .arg(&inv)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        // The gate as shipped: the coordinator restores the new cluster on its first heartbeat.
        .arg("--init");
        c
    });
    agent.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    let cli = |args: &[&str]| -> Output {
        Command::new(bin_path("fedvol"))
            .args(["--nats", &url, "-u", "alice"])
            .args(args)
            .env_remove("FEDVOL_OUTPUT")
            .env_remove("FEDVOL_USER")
            .env_remove("FEDVOL_NATS_INBOX_PREFIX")
            .logged_in()
            .output()
            .unwrap()
    };
    let nc = nats.client().await;
    let ask = |subject: String, body: Vec<u8>| {
        let nc = nc.clone();
        async move {
            let m = tokio::time::timeout(Duration::from_secs(10), nc.request(subject, body.into()))
                .await
                .expect("an answer in time")
                .expect("an answer");
            serde_json::from_slice::<serde_json::Value>(&m.payload).unwrap()
        }
    };

    // The CLI refuses a request over the server's max_payload before sending it.
    let mut big = String::from("version: v4\nvolumes:\n");
    for i in 0..200 {
        big.push_str(&format!("  volume-with-a-long-name-{i:04}: {{size: 1MiB}}\n"));
    }
    let big = write(dir.path(), "big.yaml", &big);
    let o = cli(&["submit", &big.display().to_string()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("more than the NATS server's max_payload of 8192 bytes"),
        "{}",
        text(&o)
    );

    // Coordinator and agent refuse bodies over their maxBodyBytes, unread, saying so.
    let padded = |v: serde_json::Value| {
        let mut b = serde_json::to_vec(&v).unwrap();
        b.pop();
        b.extend_from_slice(format!(",\"pad\":\"{}\"}}", "x".repeat(7500)).as_bytes());
        b
    };
    let r = ask(
        "fedvol.v1.coordinator.get.alice".into(),
        padded(serde_json::json!({"v": 1, "request_id": "x"})),
    )
    .await;
    assert_eq!(r["error"]["code"], "bad_request", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("larger than this server's limit of 7168 bytes (maxBodyBytes)"),
        "{r}"
    );
    let r = ask(
        "fedvol.v1.cluster.c1.status".into(),
        padded(serde_json::json!({"v": 1})),
    )
    .await;
    assert_eq!(r["error"]["code"], "bad_request", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("limit of 7168 bytes"),
        "{r}"
    );

    // A user token that is not a valid user name, and a workflow over a limit sent raw.
    let r = ask("fedvol.v1.coordinator.clusters.al$ce".into(), Vec::new()).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("user name `al$ce` is not valid"),
        "{r}"
    );
    let wf = fedvol_formats::parse_workflow_str("w.yaml", "w", WORKFLOW)
        .unwrap()
        .value;
    let mut wf = serde_json::to_value(&wf).unwrap();
    wf["jobs"][0]["name"] = serde_json::Value::String("j".repeat(254));
    let r = ask(
        "fedvol.v1.coordinator.submit.alice".into(),
        serde_json::to_vec(&serde_json::json!({"v": 1, "workflow": wf})).unwrap(),
    )
    .await;
    assert_eq!(r["error"]["code"], "bad_request", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("job name of 254 bytes is longer than the limit of 253"),
        "{r}"
    );

    // An answer over max_payload comes back as an error instead of a silent timeout: a
    // workflow whose plan answer (every trace of every volume) outgrows 8 KiB.
    let mut many = String::from("version: v4\nvolumes:\n");
    for i in 0..30 {
        many.push_str(&format!("  v{i}: {{size: 1MiB, annotations: {{tier: fast}}}}\n"));
    }
    let many = write(dir.path(), "many.yaml", &many);
    let o = cli(&[
        "submit",
        &many.display().to_string(),
        "--dry-run",
        "--timeout-ms",
        "10000",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("the plan answer of cluster c1 is")
            && text(&o).contains("more than the NATS server's max_payload of 8192 bytes")
            && text(&o).contains("reply_too_large"),
        "{}",
        text(&o)
    );
}

// ---------------------------------------------------------------------------------------------
// Shared JetStream resources (NATS docs: JetStream, Consumers; Authorization)

/// The decision bucket's stream.
const DECISION_STREAM: &str = "KV_fedvol_decisions";

/// Creates up to `tries` ephemeral consumers on the decision bucket as `user`, each kept for a
/// year of inactivity (NATS docs: JetStream, Consumers, `inactive_threshold`), straight through
/// async-nats like any NATS client could. Returns how many the server created and the first
/// refusal. Under the shipped permissions a refused create is a `Publish Violation` the client
/// only sees as a timeout, so the loop stops at the first failure.
async fn hoard_consumers(url: &str, user: &str, tries: usize) -> (usize, Option<String>) {
    let nats = client(url, user, &inbox_prefix(user)).await;
    let mut js = async_nats::jetstream::new(nats);
    js.set_timeout(Duration::from_secs(2));
    let mut made = 0;
    for _ in 0..tries {
        let r = js
            .create_consumer_on_stream(
                async_nats::jetstream::consumer::push::Config {
                    deliver_subject: format!("{}.hoard.{made}", inbox_prefix(user)),
                    inactive_threshold: Duration::from_secs(365 * 24 * 3600),
                    ..Default::default()
                },
                DECISION_STREAM,
            )
            .await;
        match r {
            Ok(_) => made += 1,
            Err(e) => return (made, Some(e.to_string())),
        }
    }
    (made, None)
}

/// A user cannot lock everyone out of the decision store: under the shipped secure.conf alice
/// tries to fill the bucket's stream with consumers (its `max_consumers` is 256), her creates
/// are refused by her permissions, and afterwards bob's `decisions list` and `decisions watch`
/// work and a restarted coordinator's reconciler follows the bucket. Before users read the
/// bucket through the coordinator, alice created 252 consumers here and bob's list failed with
/// `maximum consumers limit reached (store_unavailable)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_cannot_hold_the_decision_buckets_consumers() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let da = dir.path().join("a");
    std::fs::create_dir_all(&da).unwrap();
    let coord = coordinator(&url, &[]).await;
    let _a = physics_agent(&url, "cluster-a", &da).await;
    wait_clusters(&url, &["cluster-a"]).await;
    let wf = write(dir.path(), "wf.yaml", WORKFLOW).display().to_string();
    let o = fedvol(&url, "alice", "alice", &["submit", &wf, "--request-id", "js-1"]);
    assert!(o.status.success(), "{}", text(&o));

    let started = Instant::now();
    let (made, refused) = hoard_consumers(&url, "alice", 300).await;
    eprintln!(
        "alice created {made} consumers in {:?}; then: {refused:?}",
        started.elapsed()
    );

    // The coordinator restarts (its lease lapses, the new one takes it and watches the bucket).
    drop(coord);
    let coord = coordinator(&url, &[]).await;
    let o = fedvol(&url, "alice", "alice", &["submit", &wf, "--request-id", "js-2"]);
    assert!(o.status.success(), "a submit after the restart: {}", text(&o));

    let o = fedvol(&url, "bob", "bob", &["decisions", "list"]);
    assert!(
        o.status.success() && text(&o).contains("js-1") && text(&o).contains("js-2"),
        "bob's decisions list: {}",
        text(&o)
    );
    let mut watch = Spawned::start({
        let mut c = command("fedvol", &url, "bob", true);
        c.args(["-u", "bob", "decisions", "watch"]);
        c
    });
    watch.wait_for_log("js-2", Duration::from_secs(15)).await;
    let o = fedvol(&url, "alice", "alice", &["complete", "js-2"]);
    assert!(o.status.success(), "{}", text(&o));
    watch
        .wait_for_log("committed → completed", Duration::from_secs(15))
        .await;
    let mut coord = coord;
    coord
        .wait_for_log(
            "reconciler: lease held; reconciling from the decision index",
            Duration::from_secs(30),
        )
        .await;
    assert!(
        !coord.log().contains("cannot watch the decision bucket"),
        "{}",
        coord.log()
    );

    // Alice got nothing: the create is refused by her permissions, and logged.
    assert_eq!(made, 0, "alice created consumers: {refused:?}");
    violation(
        &nats,
        "Publish Violation",
        "alice",
        "$JS.API.CONSUMER.CREATE.KV_fedvol_decisions",
    )
    .await;
}

/// After a nats-server restart under the shipped secure.conf, the coordinator's watch of the
/// decision bucket (its decisions index, which the reconciler reads too) comes back within the
/// permissions of its bucket login `coordinator-kv`: async-nats's ordered consumer, after a reconnect, deletes its old
/// consumer (`$JS.API.CONSUMER.DELETE.<stream>.<consumer>`) and creates the next one by name
/// with its filter (`$JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter>`; NATS docs:
/// JetStream, Consumers, the extended create subject). Before the coordinator was granted
/// those, the server logged Publish Violations of `coordinator` and the watches never came
/// back, so `decisions watch` saw nothing new after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinators_watches_survive_a_server_restart_within_its_permissions() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let mut nats = secure_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let da = dir.path().join("a");
    std::fs::create_dir_all(&da).unwrap();
    let mut coord = coordinator(&url, &[]).await;
    let _a = physics_agent(&url, "cluster-a", &da).await;
    wait_clusters(&url, &["cluster-a"]).await;
    let wf = write(dir.path(), "wf.yaml", WORKFLOW).display().to_string();
    let o = fedvol(&url, "alice", "alice", &["submit", &wf, "--request-id", "rs-1"]);
    assert!(o.status.success(), "{}", text(&o));
    coord
        .wait_for_log(
            "reconciler: lease held; reconciling from the decision index",
            Duration::from_secs(30),
        )
        .await;
    let mut watch = Spawned::start({
        let mut c = command("fedvol", &url, "bob", true);
        c.args(["-u", "bob", "decisions", "watch"]);
        c
    });
    watch.wait_for_log("rs-1", Duration::from_secs(15)).await;

    nats.restart();
    wait_clusters(&url, &["cluster-a"]).await;
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let o = fedvol(
            &url,
            "alice",
            "alice",
            &["submit", &wf, "--request-id", "rs-2", "-o", "json"],
        );
        if o.status.success() {
            assert_eq!(json(&o)["state"], "committed", "{}", text(&o));
            break;
        }
        assert!(
            Instant::now() < end,
            "no submit commits after the restart: {}",
            text(&o)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The watch sees the new decision (waited for without failing first, so that the
    // server's refusals, if any, are what the failure shows).
    let end = Instant::now() + Duration::from_secs(30);
    while !watch.log().contains("rs-2") && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Let the index's watch come back too (it is recreated on the reconnect).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = nats.log();
    // Either of the coordinator's identities (`coordinator`, `coordinator-kv`).
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Violation") && l.contains("User \"coordinator"))
        .collect();
    assert!(
        refused.is_empty(),
        "the coordinator was refused:\n{}",
        refused.join("\n")
    );
    assert!(
        watch.log().contains("rs-2"),
        "decisions watch after the restart:\n{}",
        watch.log()
    );
    let o = fedvol(&url, "bob", "bob", &["decisions", "list"]);
    assert!(o.status.success() && text(&o).contains("rs-2"), "{}", text(&o));
    assert!(!coord.log().contains("Permissions Violation"), "{}", coord.log());
}

/// A forged service-discovery answer is not a replica (NATS docs: Services, `$SRV.INFO`):
/// anyone who may subscribe to `$SRV.INFO.fedvol-agent` can answer it naming any cluster. Here
/// a raw client logged in as agent-cluster-b answers in cluster-a's name, a coordinator
/// starts (discovery runs at start-up), and `fedvol clusters` still lists cluster-a's one real
/// instance: replicas are counted only from heartbeats on `fedvol.v1.heartbeat.<cluster>`,
/// which only that cluster's agent may publish, and a discovered cluster is taken as real only
/// once its own subject answers (`fedvol.v1.cluster.<c>.status`). Before, cluster-a listed
/// three instances: its agent's heartbeat instance, its service id and the forged id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_discovery_answer_is_not_counted_as_a_replica() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let da = dir.path().join("a");
    std::fs::create_dir_all(&da).unwrap();
    let _a = physics_agent(&url, "cluster-a", &da).await;

    // agent-cluster-b's credentials answer discovery in cluster-a's name (one answer per
    // request: allow_responses grants no more; NATS docs: Authorization, allow_responses).
    let forger = client(&url, "agent-cluster-b", &inbox_prefix("agent-cluster-b")).await;
    let mut info = forger.subscribe("$SRV.INFO.fedvol-agent").await.unwrap();
    forger.flush().await.unwrap();
    let answering = tokio::spawn(async move {
        while let Some(m) = info.next().await {
            let Some(reply) = m.reply else { continue };
            let body = serde_json::json!({
                "type": "io.nats.micro.v1.info_response", "name": "fedvol-agent", "id": "forged-1",
                "description": "", "version": "0.1.0", "metadata": {"cluster": "cluster-a"},
                "endpoints": [],
            });
            let _ = forger.publish(reply, serde_json::to_vec(&body).unwrap().into()).await;
            let _ = forger.flush().await;
        }
    });

    let coord = coordinator(&url, &[]).await;
    assert!(coord.log().contains("discovery done"), "{}", coord.log());
    wait_clusters(&url, &["cluster-a"]).await;
    let o = fedvol(&url, "alice", "alice", &["clusters", "-o", "json"]);
    assert!(o.status.success(), "{}", text(&o));
    let doc = json(&o);
    let a = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cluster-a")
        .unwrap();
    let instances = a["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 1, "cluster-a's replicas: {doc:#}");
    assert!(
        !instances.iter().any(|i| i == "forged-1"),
        "the forged id is listed: {doc:#}"
    );
    answering.abort();
}

// ---------------------------------------------------------------------------------------------
// Secrets inside values

/// A password inside a driver parameter's value, whatever its key: a URL's user-info
/// (`scheme://user:password@host`, RFC 3986 §3.2.1) or a connection string's `Password=` pair
/// (ADO.NET connection string syntax; OWASP Secrets Management Cheat Sheet). `fedvol check`
/// refuses the file naming the field and its line, and never prints the secret.
#[test]
fn fedvol_check_refuses_a_password_inside_a_value_without_printing_it() {
    let dir = tempfile::tempdir().unwrap();
    let inv = write(
        dir.path(),
        "inv.yaml",
        "cluster: c\nprovisioners:\n  ext:\n    driver:\n      type: external\n      provisioner: example.com/dirs\n      parameters:\n        mode: \"0750\"\n        connectionString: \"Server=x;Password=hunter2\"\n        dsn: \"postgres://u:s3cr3t-pw@db/x\"\n",
    );
    let o = Command::new(bin_path("fedvol"))
        .arg("check")
        .arg(&inv)
        .env_remove("FEDVOL_OUTPUT")
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("inv.yaml:9:") && out.contains("provisioners.ext.driver.parameters.connectionString"),
        "{out}"
    );
    assert!(
        out.contains("inv.yaml:10:") && out.contains("provisioners.ext.driver.parameters.dsn"),
        "{out}"
    );
    assert!(!out.contains("hunter2") && !out.contains("s3cr3t-pw"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// Test tools build nothing

/// `fedvol-burst` copied alone into an empty directory (no `fedvol-agent` beside it) runs no
/// cargo (a `CARGO` that would leave a mark is never called), writes nothing, and says which
/// binary is missing and where it looked; `--bin-dir` at an empty directory says the same.
#[test]
fn fedvol_burst_runs_the_binaries_it_is_given_and_builds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let burst = dir.path().join("fedvol-burst");
    std::fs::copy(env!("CARGO_BIN_EXE_fedvol-burst"), &burst).unwrap();
    let mark = dir.path().join("cargo-ran");
    let fake_cargo = write(
        dir.path(),
        "fake-cargo",
        &format!("#!/bin/sh\ntouch '{}'\nexit 1\n", mark.display()),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake_cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let empty = tempfile::tempdir().unwrap();
    let given = empty.path().display().to_string();
    for extra in [vec![], vec!["--bin-dir", given.as_str()]] {
        let o = Command::new(&burst)
            .args([
                "--slots",
                "1",
                "--clusters",
                "1",
                "--submits",
                "1",
                "--coordinators",
                "1",
            ])
            .args(&extra)
            .env("CARGO", &fake_cargo)
            .env_remove("FEDVOL_BIN_DIR")
            .env_remove("FEDVOL_TEST_NO_BUILD")
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .unwrap();
        let out = text(&o);
        assert!(!mark.exists(), "fedvol-burst ran cargo: {out}");
        assert_eq!(o.status.code(), Some(2), "{out}");
        let looked = if extra.is_empty() {
            dir.path().display().to_string()
        } else {
            given.clone()
        };
        assert!(
            out.contains(&format!("fedvol-agent not found in {looked}")) && out.contains("--bin-dir"),
            "{out}"
        );
    }
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["fake-cargo", "fedvol-burst"], "nothing written beside it");
}

// ---------------------------------------------------------------------------------------------
// Log injection and spoofed names

/// True when `log` holds a raw ESC, CR, U+202E or U+200B, or a line `forged` starts.
fn forged(log: &str, forged: &str) -> bool {
    log.contains(['\u{1b}', '\r', '\u{202e}', '\u{200b}']) || log.lines().any(|l| l.starts_with(forged))
}

/// A request id with ESC, CR and LF (OWASP Logging Cheat Sheet: log injection, CWE-117), by the
/// CLI and raw over NATS (submit and get), is refused, and neither the answer nor the
/// coordinator's log holds the raw characters: they are shown as escapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_a_request_id_never_reach_the_coordinators_log_raw() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let coord = coordinator(&url, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = write(dir.path(), "wf.yaml", WORKFLOW);
    let bad = "\u{1b}[2J\r\nFAKE LINE INFO alice is admin";

    let o = fedvol(
        &url,
        "alice",
        "alice",
        &["submit", &wf.display().to_string(), "--request-id", bad],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("is not valid"), "{}", text(&o));
    assert!(
        !forged(&text(&o), "FAKE LINE"),
        "the CLI prints it escaped: {:?}",
        text(&o)
    );

    let nc = client(&url, "alice", &inbox_prefix("alice")).await;
    let parsed = fedvol_formats::parse_workflow_str("w.yaml", "w", WORKFLOW)
        .unwrap()
        .value;
    for (subject, body) in [
        (
            "fedvol.v1.coordinator.submit.alice",
            serde_json::json!({"v": 1, "request_id": bad, "workflow": parsed}),
        ),
        (
            "fedvol.v1.coordinator.get.alice",
            serde_json::json!({"v": 1, "request_id": bad}),
        ),
    ] {
        let m = tokio::time::timeout(
            Duration::from_secs(10),
            nc.request(subject, serde_json::to_vec(&body).unwrap().into()),
        )
        .await
        .expect("an answer in time")
        .expect("an answer");
        let r: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        assert!(r["error"]["code"].is_string(), "{subject}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(!forged(msg, "FAKE LINE"), "{subject}: {msg:?}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = coord.log();
    assert!(log.contains("FAKE LINE"), "the requests were logged:\n{log}");
    assert!(
        !forged(&log, "FAKE LINE"),
        "raw ESC/CR/LF of a request id in the coordinator's log:\n{log:?}"
    );
    assert!(log.contains("\\u{1b}[2J\\r\\nFAKE LINE"), "shown escaped:\n{log}");
}

/// Unicode TR #36 §2.1 (bidirectional text spoofing) and TR #39 (identifiers exclude
/// Default_Ignorable_Code_Point): names with U+202E or U+200B are refused at input, by
/// `fedvol check`/`submit` with the file, line, field and code point and by the coordinator for
/// a raw body; a decision stored before the rule is printed escaped by `decisions list/show`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_controls_and_invisible_characters_in_names_are_refused_and_printed_escaped() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let coord = coordinator(&url, &[]).await;
    let da = dir.path().join("a");
    let _a = agent(
        &url,
        "cluster-a",
        &da,
        &slots_inventory("cluster-a", 2, &da, "all"),
        &[],
    )
    .await;
    wait_clusters(&url, &["cluster-a"]).await;

    // At input: a volume name with a zero-width space, a workflow (file) name with U+202E.
    let zw = write(dir.path(), "zw.yaml", &WORKFLOW.replace("scratch", "scr\u{200b}atch"));
    let o = fedvol(&url, "alice", "alice", &["submit", &zw.display().to_string()]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("zw.yaml:3:")
            && out.contains("volumes.scr\\u{200b}atch")
            && out.contains("U+200B (zero width space"),
        "{out}"
    );
    assert!(!forged(&out, "-"), "{out:?}");
    let rlo = write(dir.path(), "invoice\u{202e}fdp.yaml", WORKFLOW);
    let o = Command::new(bin_path("fedvol"))
        .arg("check")
        .arg(&rlo)
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("U+202E (right-to-left override"), "{out}");
    let nc = client(&url, "alice", &inbox_prefix("alice")).await;
    let mut parsed = fedvol_formats::parse_workflow_str("w.yaml", "w", WORKFLOW)
        .unwrap()
        .value;
    parsed.name = "invoice\u{202e}fdp.exe".into();
    let body = serde_json::json!({"v": 1, "request_id": "spoof-raw", "workflow": parsed});
    let m = nc
        .request(
            "fedvol.v1.coordinator.submit.alice",
            serde_json::to_vec(&body).unwrap().into(),
        )
        .await
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
    assert_eq!(r["error"]["code"], "bad_request", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("U+202E"), "{r}");

    // Stored before the rule: a decision whose workflow name holds U+202E and ESC.
    let wf = write(dir.path(), "old.yaml", WORKFLOW);
    let o = fedvol(
        &url,
        "alice",
        "alice",
        &["submit", &wf.display().to_string(), "--request-id", "old-1"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let co = client(&url, "coordinator-kv", &inbox_prefix("coordinator-kv")).await;
    let kv = async_nats::jetstream::new(co)
        .get_key_value("fedvol_decisions")
        .await
        .unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&kv.get("old-1").await.unwrap().unwrap()).unwrap();
    let spoofed = "invoice\u{202e}fdp.exe\u{1b}[2J";
    v["decision"]["workflow"] = spoofed.into();
    v["request"]["workflow"]["name"] = spoofed.into();
    kv.put("old-1", serde_json::to_vec(&v).unwrap().into()).await.unwrap();
    for args in [
        vec!["decisions", "list"],
        vec!["decisions", "show", "old-1"],
        vec!["decisions", "list", "-o", "wide"],
    ] {
        let o = fedvol(&url, "alice", "alice", &args);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {out}");
        assert!(!forged(&out, "-"), "{args:?} printed a raw spoofing character: {out:?}");
        assert!(out.contains("invoice\\u{202e}"), "{args:?}: {out}");
    }
    drop(coord);
}

// ---------------------------------------------------------------------------------------------
// The web view

/// `fedvol ui` answers only under its own address (`127.0.0.1:<port>`, `localhost:<port>`) and
/// the names given with `--allowed-host`: a DNS-rebinding page's requests carry the attacker's
/// name in `Host` and are refused with 421 (OWASP, DNS rebinding). Every answer carries
/// Content-Security-Policy (`default-src 'self'`, `frame-ancestors 'none'`: MDN
/// Content-Security-Policy), `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff` and
/// `Referrer-Policy: no-referrer` (OWASP HTTP Headers Cheat Sheet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_refuses_foreign_host_headers_and_sends_security_headers() {
    let _serial = SERIAL.lock().await;
    let kit = Kit::copy();
    let nats = secure_server(&kit);
    let url = nats.url();
    let _coord = coordinator(&url, &[]).await;
    let mut ui = Spawned::start({
        let mut c = command("fedvol", &url, "alice", true);
        c.args([
            "-u",
            "alice",
            "ui",
            "--listen",
            "127.0.0.1:0",
            "--allowed-host",
            "view.example.org",
        ]);
        c
    });
    ui.wait_for_log("view on http://", Duration::from_secs(10)).await;
    let addr: std::net::SocketAddr = ui
        .log()
        .split("view on http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.parse().ok())
        .expect("the view's address");
    let port = addr.port();
    let headers = |head: &str| head.to_ascii_lowercase();
    for host in [
        addr.to_string(),
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        format!("view.example.org:{port}"),
    ] {
        for path in ["/decisions", "/clusters", "/live.js"] {
            let (status, head, body) = fedvol_tests::http::get_as(addr, path, &host).await.unwrap();
            assert_eq!(status, 200, "{host}{path}: {head}\n{body}");
            let h = headers(&head);
            for expected in [
                "content-security-policy: default-src 'self'",
                "frame-ancestors 'none'",
                "x-frame-options: deny",
                "x-content-type-options: nosniff",
                "referrer-policy: no-referrer",
            ] {
                assert!(h.contains(expected), "{host}{path}: no {expected} in\n{head}");
            }
            assert!(h.contains("script-src 'self';"), "no inline script may run: {head}");
        }
    }
    let (_, _, list) = fedvol_tests::http::get_as(addr, "/decisions", &addr.to_string())
        .await
        .unwrap();
    assert!(
        list.contains("<script src=\"/live.js\">"),
        "the script is a file of its own: {list}"
    );
    for host in [
        format!("attacker.example:{port}"),
        "attacker.example".to_string(),
        format!("127.0.0.2:{port}"),
        format!("view.example.org:{}", port.wrapping_add(1)),
        String::new(),
    ] {
        let (status, head, body) = fedvol_tests::http::get_as(addr, "/decisions", &host).await.unwrap();
        assert_eq!(status, 421, "Host {host:?} answered: {head}\n{body}");
        assert!(body.contains("--allowed-host"), "{body}");
        assert!(!body.contains("<table"), "no decisions: {body}");
        assert!(headers(&head).contains("x-frame-options: deny"), "{head}");
    }
}
