//! `fedvol ui` in a real browser: a live federation (nats-server, a coordinator, agents for
//! clusters `east` and `west`), a few workflows submitted, the web view started on a free
//! loopback port, and headless Chromium loading its pages. The checks read the DOM Chromium
//! produced (scripts run); screenshots go to the test's temporary directory and, when
//! `FEDVOL_UI_SCREENSHOTS=DIR` is set, are copied there.
//!
//! Without Chromium the test says so and passes (CI installs Debian's `chromium`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fedvol_tests::browser::Chromium;
use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::{NatsServer, Spawned, bin_path};

use fedvol_tests::cli::fedvol_as as fedvol;

fn submit(nats: &NatsServer, user: &str, wf: &Path, id: &str, extra: &[&str]) {
    let wf = wf.display().to_string();
    let mut args = vec!["submit", wf.as_str(), "--request-id", id];
    args.extend_from_slice(extra);
    let o = fedvol(nats, user, &args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "submit {id}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One job of 8 cores on a 1 MiB scratch volume of provisioner `scratch`.
const WORKFLOW: &str = "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";

/// The text of the element whose opening tag contains `marker`, up to its first closing
/// `</tr>` (a table row of the dumped DOM).
fn row_with<'d>(dom: &'d str, marker: &str) -> &'d str {
    let start = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the page:\n{dom}"));
    let rest = &dom[start..];
    &rest[..rest.find("</tr>").unwrap_or(rest.len())]
}

/// The funnel card of `cluster` in a decision page's DOM.
fn card<'d>(dom: &'d str, cluster: &str) -> &'d str {
    let marker = format!("data-cluster=\"{cluster}\"><h3>");
    let start = dom
        .find(&marker)
        .unwrap_or_else(|| panic!("no funnel card for {cluster}:\n{dom}"));
    let rest = &dom[start..];
    &rest[..rest.find("</table>").unwrap_or(rest.len())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_shows_decisions_funnels_and_clusters_in_a_real_browser() {
    let Some(browser) = Chromium::find() else {
        fedvol_testenv::skip(
            fedvol_testenv::Missing::Tool,
            "no chromium on PATH (install Debian's `chromium`, as .ci/run does); the web view was not tested in a browser",
        );
        return;
    };
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    // `east` lets everybody use its scratch provisioner; `west` only the group `physics`.
    let _east = AgentProc::start(&nats, 200, |d| slots_inventory("east", 2, d, "all")).await;
    let _west = AgentProc::start(&nats, 200, |d| slots_inventory("west", 3, d, "[physics]")).await;
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train-small.yaml");
    let infer = dir.path().join("infer-batch.yaml");
    let live = dir.path().join("live-one.yaml");
    for f in [&train, &infer, &live] {
        std::fs::write(f, WORKFLOW).unwrap();
    }

    // Both known, alive and restored (a fresh agent answers `restoring` until then).
    fedvol_tests::cli::wait_ready_as(&nats, "alice", &["east", "west"]).await;

    // alice's workflow fits only `east` (west denies her its provisioner); bob, in `physics`,
    // fits both.
    submit(&nats, "alice", &train, "ui-train", &[]);
    submit(&nats, "bob", &infer, "ui-infer", &["-g", "physics"]);

    let url = nats.url();
    let mut cmd = Command::new(bin_path("fedvol"));
    cmd.args(["--nats", url.as_str(), "-u", "alice", "ui", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info,fedvol_cli::ui=debug");
    let mut ui = Spawned::start(cmd);
    ui.wait_for_log("serving the read-only view on http://", Duration::from_secs(20))
        .await;
    let log = ui.log();
    let base = log
        .split("view on ")
        .nth(1)
        .and_then(|s| s.split('/').nth(2))
        .map(|host| format!("http://{host}"))
        .expect("the address in the ui's output");
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    // The list: both decisions, who submitted them, their state and cluster.
    let list = browser.dump_dom(&format!("{base}/decisions"));
    let r = row_with(&list, "id=\"d-ui-train\"");
    assert!(
        r.contains("train-small") && r.contains("alice") && r.contains("committed") && r.contains("east"),
        "{r}"
    );
    assert!(r.contains("2/2 answered · 1 feasible"), "{r}");
    let r = row_with(&list, "id=\"d-ui-infer\"");
    assert!(
        r.contains("infer-batch") && r.contains("bob") && r.contains("2 feasible"),
        "{r}"
    );
    assert!(
        list.contains("href=\"/decisions/ui-train\""),
        "rows link to their decision"
    );

    // Filters, as query parameters.
    let bobs = browser.dump_dom(&format!("{base}/decisions?user=bob"));
    assert!(bobs.contains("d-ui-infer") && !bobs.contains("d-ui-train"), "{bobs}");
    let wf = browser.dump_dom(&format!("{base}/decisions?workflow=TRAIN&state=committed&cluster=east"));
    assert!(wf.contains("d-ui-train") && !wf.contains("d-ui-infer"), "{wf}");
    let none = browser.dump_dom(&format!("{base}/decisions?state=failed"));
    assert!(none.contains("No decision matches these filters."), "{none}");

    // The decision page: the chosen cluster, the per-cluster table with why `west` lost, the
    // funnel of both clusters with the counts of each stage, the rejected candidate's reason,
    // the cluster choice.
    let page = browser.dump_dom(&format!("{base}/decisions/ui-train"));
    assert!(page.contains("train-small"), "{page}");
    let chosen = &page[page.find("id=\"chosen\"").expect("the chosen cluster")..];
    assert!(
        chosen.starts_with("id=\"chosen\"><strong>east</strong>"),
        "{chosen:.200}"
    );
    let west_row = row_with(&page, "<tr data-cluster=\"west\">");
    assert!(
        west_row.contains("answered") && west_row.contains("feasible") && west_row.contains("permission"),
        "why west lost: {west_row}"
    );
    let east_row = row_with(&page, "<tr data-cluster=\"east\">");
    assert!(
        east_row.contains("scratch → scratch/") && east_row.contains("j → z1/h"),
        "east's volume and job: {east_row}"
    );
    let west = card(&page, "west");
    assert!(west.contains("data-stage=\"provisioner.permission\""), "{west}");
    let perm = row_with(west, "data-stage=\"provisioner.permission\"");
    assert!(perm.contains("0/1"), "west's permission stage passed 0 of 1: {perm}");
    let why = row_with(west, "data-rejected-by=\"provisioner.permission\"");
    assert!(
        why.contains("<details>")
            && why.contains("1 rejected: 1 permission denied")
            && why.contains("scratch</span>: "),
        "the rejected provisioner with its reason, on demand: {why}"
    );
    let east = card(&page, "east");
    assert!(east.contains("chosen"), "{east:.300}");
    assert!(
        row_with(east, "data-stage=\"provisioner.permission\"").contains("1/1"),
        "{east}"
    );
    assert!(
        east.contains("data-stage=\"host.capacity\""),
        "host stages are drawn: {east}"
    );
    assert!(page.contains("data-rule=\"feasible\""), "the choice steps");
    let step = row_with(&page, "data-rule=\"feasible\"");
    assert!(step.contains("dropped <strong>west</strong>"), "{step}");

    // A decision that does not exist: a clear page, not a blank one.
    let missing = browser.dump_dom(&format!("{base}/decisions/no-such-id"));
    assert!(missing.contains("no decision is stored under request id"), "{missing}");

    // Status codes a script or a proxy would read.
    let probe = base.clone();
    let codes = tokio::task::spawn_blocking(move || {
        ["/decisions/no-such-id", "/decisions/bad%20id", "/nowhere", "/clusters"]
            .map(|p| fedvol_tests::browser::http_get(&format!("{probe}{p}")).0)
    })
    .await
    .unwrap();
    assert_eq!(
        codes,
        [404, 404, 404, 200],
        "unknown, impossible id, no such page, a page"
    );

    // The clusters page.
    let clusters = browser.dump_dom(&format!("{base}/clusters"));
    for c in ["east", "west"] {
        let r = row_with(&clusters, &format!("<tr data-cluster=\"{c}\">"));
        assert!(r.contains(">alive<"), "{c} is alive: {r}");
        assert!(r.contains("Z</span>"), "{c} was seen at a UTC time: {r}");
    }

    // Screenshots of each page.
    let shots = dir.path().join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    for (name, path) in [
        ("ui-decisions.png", "/decisions".to_string()),
        ("ui-decision.png", "/decisions/ui-train".to_string()),
        ("ui-clusters.png", "/clusters".to_string()),
        ("ui-decision-both-feasible.png", "/decisions/ui-infer".to_string()),
    ] {
        browser.screenshot(&format!("{base}{path}"), &shots.join(name), 1280, 900);
    }
    // The whole decision page, funnels and choice included.
    browser.screenshot(
        &format!("{base}/decisions/ui-train"),
        &shots.join("ui-decision-full.png"),
        1280,
        1700,
    );
    if let Some(out) = std::env::var_os("FEDVOL_UI_SCREENSHOTS") {
        std::fs::create_dir_all(&out).unwrap();
        for e in std::fs::read_dir(&shots).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), Path::new(&out).join(e.file_name())).unwrap();
        }
        eprintln!("screenshots copied to {}", Path::new(&out).display());
    }

    // Live updates: a browser showing alice's decisions gets her new one without a reload,
    // and not bob's. The page is dumped when its event stream ends, which the test makes
    // happen by stopping the view once the update has been sent.
    let connected = "live updates: a browser connected";
    let before = ui.log_count(connected);
    let watching = browser.dump_dom_after_streams(&format!("{base}/decisions?user=alice"), 2000);
    assert!(
        fedvol_tests::wait_until(Duration::from_secs(30), Duration::from_millis(20), || ui
            .log_count(connected)
            > before)
        .await,
        "the browser opened the live updates; the view's output:\n{}",
        ui.log()
    );
    submit(&nats, "bob", &live, "ui-live-bob", &["-g", "physics"]);
    submit(&nats, "alice", &live, "ui-live", &[]);
    ui.wait_for_log("live update sent key=ui-live revision", Duration::from_secs(10))
        .await;
    ui.kill();
    let dom = tokio::task::spawn_blocking(move || watching.join().expect("the browser thread"))
        .await
        .unwrap();
    let r = row_with(&dom, "id=\"d-ui-live\"");
    assert!(r.contains("live-one") && r.contains("alice"), "{r}");
    assert!(!dom.contains("d-ui-live-bob"), "bob's decision is filtered out: {dom}");
    assert!(dom.contains("d-ui-train"), "the rows already there stay");
    assert!(dom.contains("data-live=\"open\""), "the script opened the event stream");
}
