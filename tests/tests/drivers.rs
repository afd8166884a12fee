//! The agent's storage drivers against real things: directories on disk, a real nats-server and
//! the example out-of-tree provisioner running as its own process.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use fedvol_agent::drivers::{DriverError, Drivers, RetryPolicy};
use fedvol_common::model::Driver;
use fedvol_proto::Subjects;
use fedvol_tests::fixtures::{deadline_in, external, hostpath, new_volume, provisioner};
use fedvol_tests::{LogCapture, NatsServer, Spawned, wait_until};
use futures::StreamExt;

const CLUSTER: &str = "cluster-a";
const VENDOR: &str = "example.com/dirs";
const MIB: u128 = 1 << 20;

/// Short timings so that a test of retries takes well under a second or two.
fn quick(attempts: u32, attempt_timeout_ms: u64) -> RetryPolicy {
    RetryPolicy {
        attempts,
        first_backoff_ms: 50,
        max_backoff_ms: 200,
        attempt_timeout_ms,
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The example provisioner for `VENDOR` on `CLUSTER`, storing under `root`, ready to answer.
async fn example_provisioner(nats: &NatsServer, root: &Path, extra: &[&str]) -> Spawned {
    let mut args = vec![
        "--nats".to_string(),
        nats.url(),
        "--cluster".into(),
        CLUSTER.into(),
        "--name".into(),
        VENDOR.into(),
        "--root".into(),
        root.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut p = Spawned::bin("fedvol-example-provisioner", args);
    p.wait_for_log("listening", Duration::from_secs(10)).await;
    p
}

async fn drivers(nats: &NatsServer, retry: RetryPolicy) -> Drivers {
    Drivers::new(Some(nats.client().await), CLUSTER, Subjects::default(), retry)
}

#[tokio::test]
async fn hostpath_creates_repeats_and_deletes_a_real_directory() {
    let nats = NatsServer::start();
    let d = drivers(&nats, RetryPolicy::default()).await;
    let base = tempfile::tempdir().unwrap();
    let p = provisioner("local-dirs", hostpath(base.path()));
    let v = new_volume("pvc-00000000000000a1", "local-dirs", 4 * MIB);

    let first = d.provision(&p, &v, "req-1", deadline_in(5000)).await.unwrap();
    let dir = base.path().join("pvc-00000000000000a1");
    assert_eq!(first.source, dir.display().to_string());
    assert!(dir.is_dir());
    assert!(first.message.contains("created directory"), "{}", first.message);
    std::fs::write(dir.join("results.csv"), b"1,2,3\n").unwrap();

    // A retry of the same request: same answer, no second directory, the data is untouched.
    let again = d.provision(&p, &v, "req-1", deadline_in(5000)).await.unwrap();
    assert_eq!(again.source, first.source);
    assert!(again.message.contains("already existed"), "{}", again.message);
    assert_eq!(entries(base.path()), vec!["pvc-00000000000000a1"]);
    assert_eq!(std::fs::read(dir.join("results.csv")).unwrap(), b"1,2,3\n");
    assert!(d.free_bytes(&p).is_some_and(|f| f > 0));

    let msg = d
        .delete(&p, &v.name, Some(&first.source), "req-2", deadline_in(5000))
        .await
        .unwrap();
    assert!(msg.contains("removed"), "{msg}");
    assert!(!dir.exists());
    assert_eq!(entries(base.path()), Vec::<String>::new());
    // Deleting again is not an error: the asset is gone either way.
    let msg = d.delete(&p, &v.name, None, "req-2", deadline_in(5000)).await.unwrap();
    assert!(msg.contains("already gone"), "{msg}");

    // More than the file system holds is refused, and nothing is created.
    let huge = new_volume(
        "pvc-00000000000000a2",
        "local-dirs",
        d.free_bytes(&p).unwrap() + (1 << 50),
    );
    let e = d.provision(&p, &huge, "req-3", deadline_in(5000)).await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Refused(m) if m.contains("not enough free space")),
        "{e:?}"
    );
    assert_eq!(entries(base.path()), Vec::<String>::new());
}

#[tokio::test]
async fn nfs_without_a_mount_is_refused_with_the_fix() {
    let nats = NatsServer::start();
    let d = drivers(&nats, RetryPolicy::default()).await;
    let p = provisioner(
        "nfs-fast",
        Driver::Nfs {
            target: "nfs-fast:/export/nvme".into(),
            mount: None,
            version: None,
            options: None,
            sub_path: None,
        },
    );
    let v = new_volume("pvc-00000000000000b1", "nfs-fast", MIB);
    for e in [
        d.provision(&p, &v, "req-1", deadline_in(5000)).await.unwrap_err(),
        d.delete(&p, &v.name, None, "req-2", deadline_in(5000))
            .await
            .unwrap_err(),
    ] {
        let DriverError::Refused(m) = &e else {
            panic!("expected a refusal, got {e:?}")
        };
        assert!(m.contains("nfs-fast:/export/nvme is not mounted on the agent"), "{m}");
        assert!(m.contains("driver.mount"), "{m}");
    }
    assert_eq!(d.free_bytes(&p), None);
}

#[tokio::test]
async fn external_provisioner_that_fails_twice_succeeds_on_the_third_attempt() {
    let nats = NatsServer::start();
    let root = tempfile::tempdir().unwrap();
    let prov = example_provisioner(&nats, root.path(), &["--fail-first", "2"]).await;
    let d = drivers(&nats, quick(4, 300)).await;
    let p = provisioner("dirs", external(VENDOR, &[("mode", "0750")]));
    let v = new_volume("pvc-00000000000000c1", "dirs", MIB);

    let started = Instant::now();
    let c = d.provision(&p, &v, "req-c1", deadline_in(5000)).await.unwrap();
    let took = started.elapsed();
    let dir = root.path().join("pvc-00000000000000c1");
    assert!(c.message.contains("attempt 3 of 4"), "{}", c.message);
    assert_eq!(c.source, dir.display().to_string());
    assert!(dir.is_dir());
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777, 0o750);
    // Two attempts waited out their 300 ms; the backoffs were 50 and 100 ms.
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert_eq!(prov.log_count("dropping request"), 2, "{}", prov.log());
    assert_eq!(prov.log_count("provisioned"), 1, "{}", prov.log());

    // The same request again (say the agent restarted before recording it): no duplicate.
    let again = d.provision(&p, &v, "req-c1", deadline_in(5000)).await.unwrap();
    assert!(again.message.contains("attempt 1 of 4"), "{}", again.message);
    assert_eq!(again.source, c.source);
    assert_eq!(entries(root.path()), vec!["pvc-00000000000000c1"]);

    let msg = d
        .delete(&p, &v.name, Some(&c.source), "req-c2", deadline_in(5000))
        .await
        .unwrap();
    assert!(msg.contains("deleted pvc-00000000000000c1"), "{msg}");
    assert!(!dir.exists());
}

#[tokio::test]
async fn unknown_parameter_is_refused_at_once_and_secrets_stay_out_of_the_logs() {
    let nats = NatsServer::start();
    let root = tempfile::tempdir().unwrap();
    let prov = example_provisioner(&nats, root.path(), &[]).await;
    let d = drivers(&nats, quick(4, 2000)).await;
    let p = provisioner(
        "dirs-fancy",
        external(
            VENDOR,
            &[("mode", "0750"), ("compression", "zstd"), ("apiKey", "hunter2-s3cr3t")],
        ),
    );
    let v = new_volume("pvc-00000000000000d1", "dirs-fancy", MIB);

    let logs = LogCapture::start();
    let started = Instant::now();
    let e = d.provision(&p, &v, "req-d1", deadline_in(5000)).await.unwrap_err();
    let took = started.elapsed();
    let DriverError::Refused(m) = &e else {
        panic!("expected a refusal, got {e:?}")
    };
    assert!(m.contains("unknown parameter(s): apiKey, compression"), "{m}");
    assert!(m.starts_with(VENDOR), "{m}");
    // Refusals are final: one request reached the provisioner, and no backoff was slept.
    assert_eq!(prov.log_count("refused"), 1, "{}", prov.log());
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert_eq!(entries(root.path()), Vec::<String>::new());

    let text = logs.text();
    assert!(text.contains("req-d1") && text.contains("apiKey"), "{text}");
    // Values are redacted unless their key is a known non-secret one
    // (`mode` is; `compression` is not known to fedvol, so its value is not shown either).
    assert!(
        text.contains("\"mode\": \"0750\""),
        "known non-secret parameters are logged: {text}"
    );
    assert!(
        !text.contains("zstd"),
        "an unknown parameter's value was logged: {text}"
    );
    assert!(!text.contains("hunter2"), "a secret parameter value was logged: {text}");
    assert!(!e.to_string().contains("hunter2"));

    // A malformed mode is refused the same way.
    let p = provisioner("dirs-bad", external(VENDOR, &[("mode", "rwx")]));
    let e = d.provision(&p, &v, "req-d2", deadline_in(5000)).await.unwrap_err();
    assert!(matches!(&e, DriverError::Refused(m) if m.contains("octal")), "{e:?}");
}

#[tokio::test]
async fn nobody_listening_fails_after_every_attempt_quickly() {
    let nats = NatsServer::start();
    let d = drivers(&nats, quick(4, 1000)).await;
    let p = provisioner("dirs", external(VENDOR, &[]));
    let v = new_volume("pvc-00000000000000e1", "dirs", MIB);

    let started = Instant::now();
    let e = d.provision(&p, &v, "req-e1", deadline_in(5000)).await.unwrap_err();
    let took = started.elapsed();
    let DriverError::Failed(m) = &e else {
        panic!("expected a failure, got {e:?}")
    };
    assert!(m.contains("4 attempt(s) of 4"), "{m}");
    assert!(m.contains("no responders"), "{m}");
    assert!(
        m.contains("fedvol.v1.provisioner.cluster-a.example_com_dirs.provision"),
        "{m}"
    );
    // No responders is reported by the server at once: only the backoffs (50+100+200 ms) count.
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(2000),
        "{took:?}"
    );
    // Nobody could have received it, so no cleanup was attempted.
    assert!(!m.contains("cleanup"), "{m}");

    let e = d
        .delete(&p, &v.name, None, "req-e2", deadline_in(5000))
        .await
        .unwrap_err();
    assert!(matches!(&e, DriverError::Failed(m) if m.contains("to delete")), "{e:?}");
}

#[tokio::test]
async fn provisioner_that_never_answers_fails_within_the_deadline_and_leaves_nothing() {
    let nats = NatsServer::start();
    let root = tempfile::tempdir().unwrap();
    // Drops every request: subscribed, so the server reports no "no responders", but silent.
    let prov = example_provisioner(&nats, root.path(), &["--fail-first", "1000000"]).await;
    let d = drivers(&nats, quick(3, 250)).await;
    let p = provisioner("dirs", external(VENDOR, &[]));
    let v = new_volume("pvc-00000000000000f1", "dirs", MIB);

    let started = Instant::now();
    let e = d.provision(&p, &v, "req-f1", deadline_in(4000)).await.unwrap_err();
    let took = started.elapsed();
    let DriverError::Failed(m) = &e else {
        panic!("expected a failure, got {e:?}")
    };
    assert!(m.contains("3 attempt(s) of 3"), "{m}");
    assert!(m.contains("no answer within 250 ms"), "{m}");
    assert!(m.contains("cleanup delete was sent"), "{m}");
    assert!(
        took >= Duration::from_millis(750) && took < Duration::from_millis(2500),
        "{took:?}"
    );
    // Three provision requests and the cleanup delete reached it; nothing exists.
    let provisioner_saw_all = wait_until(Duration::from_secs(3), Duration::from_millis(20), || {
        prov.log_count("dropping request") == 4
    })
    .await;
    assert!(provisioner_saw_all, "{}", prov.log());
    assert_eq!(entries(root.path()), Vec::<String>::new());
}

#[tokio::test]
async fn the_deadline_cuts_retries_short() {
    let nats = NatsServer::start();
    let client = nats.client().await;
    // A subscriber that reads every request and never answers.
    let subject = Subjects::default().provisioner(CLUSTER, VENDOR, fedvol_proto::provisioner::ProvisionerOp::Provision);
    let mut silent = client.subscribe(subject).await.unwrap();
    client.flush().await.unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    let swallow = tokio::spawn(async move {
        while silent.next().await.is_some() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let d = Drivers::new(Some(client), CLUSTER, Subjects::default(), quick(10, 300));
    let p = provisioner("dirs", external(VENDOR, &[]));
    let v = new_volume("pvc-0000000000000101", "dirs", MIB);

    let started = Instant::now();
    let e = d.provision(&p, &v, "req-g1", deadline_in(800)).await.unwrap_err();
    let took = started.elapsed();
    let DriverError::Failed(m) = &e else {
        panic!("expected a failure, got {e:?}")
    };
    // Cut by the external driver's retry loop or by the agent's bound on every driver call
    // (bounded driver calls), whichever sees the deadline first.
    assert!(m.contains("deadline"), "{m}");
    assert!(
        took < Duration::from_millis(1500),
        "retries ran past the deadline: {took:?}"
    );
    // 300 ms attempts with 50/100 ms pauses fit 2 or 3 into 800 ms, never 10.
    let made: usize = m
        .split(" attempt(s) of 10")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no attempt count in {m}"));
    assert!((2..=3).contains(&made), "{m}");
    // Every attempt the message names reached the subscriber (the cleanup delete goes to
    // another subject).
    let all_seen = wait_until(Duration::from_secs(2), Duration::from_millis(10), || {
        seen.load(std::sync::atomic::Ordering::SeqCst) == made
    })
    .await;
    assert!(
        all_seen,
        "{} requests seen, {made} reported",
        seen.load(std::sync::atomic::Ordering::SeqCst)
    );
    swallow.abort();
}

#[tokio::test]
async fn a_request_already_past_its_deadline_is_not_sent() {
    let nats = NatsServer::start();
    let root = tempfile::tempdir().unwrap();
    let prov = example_provisioner(&nats, root.path(), &[]).await;
    let d = drivers(&nats, quick(4, 300)).await;
    let p = provisioner("dirs", external(VENDOR, &[]));
    let v = new_volume("pvc-0000000000000121", "dirs", MIB);
    let past = fedvol_proto::now_ms() - 1;
    let e = d.provision(&p, &v, "req-i1", past).await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Failed(m) if m.contains("deadline had passed")),
        "{e:?}"
    );
    // Give a stray request time to arrive: none may.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(prov.log_count("provisioned"), 0, "{}", prov.log());
    assert_eq!(entries(root.path()), Vec::<String>::new());
}

#[tokio::test]
async fn a_late_answer_is_cleaned_up() {
    let nats = NatsServer::start();
    let root = tempfile::tempdir().unwrap();
    // Creates the directory, then answers 400 ms later: after the agent stopped waiting.
    let prov = example_provisioner(&nats, root.path(), &["--delay-ms", "400"]).await;
    let d = drivers(&nats, quick(2, 150)).await;
    let p = provisioner("dirs", external(VENDOR, &[]));
    let v = new_volume("pvc-0000000000000111", "dirs", MIB);

    let e = d.provision(&p, &v, "req-h1", deadline_in(3000)).await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Failed(m) if m.contains("cleanup delete was sent")),
        "{e:?}"
    );
    // The provisioner works through both attempts and then the cleanup delete.
    let cleaned = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        prov.log_count("deleted") == 1
    })
    .await;
    assert!(cleaned, "{}", prov.log());
    assert!(
        prov.log().contains("removed=true"),
        "the late directory existed and was removed: {}",
        prov.log()
    );
    assert_eq!(entries(root.path()), Vec::<String>::new());
}

/// The example provisioner stops on SIGTERM even when its NATS server is gone (the
/// client reconnects forever; stopping must not wait for it).
#[tokio::test]
async fn the_example_provisioner_stops_on_sigterm_with_nats_gone() {
    let mut nats = NatsServer::start();
    let root = tempfile::tempdir().unwrap();
    let mut p = example_provisioner(&nats, root.path(), &[]).await;
    nats.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = p.terminate(Duration::from_secs(5));
    assert!(
        status.is_some_and(|s| s.success()),
        "exited cleanly within 5 s of SIGTERM: {status:?}\n{}",
        p.log()
    );
}
