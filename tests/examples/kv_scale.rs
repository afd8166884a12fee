//! How the decision bucket's writes scale with its size on this nats-server, fedvol aside:
//! a bucket made as the coordinator makes it (file storage, 16 revisions per key, direct get),
//! logged in as the coordinator's bucket identity `coordinator-kv` under the shipped
//! `single.conf` (`LOGIN=<user>`: another shipped user), N keys of S bytes each written
//! with `create` then one `update` (a submit's two writes), `in_flight` at once, with a watch
//! of the whole bucket taking every entry (the coordinator's index; `NO_WATCH=1`: none;
//! `GET_FIRST=1`: each key read before it is created). Prints the time per thousand keys.
//!
//! It found why recording ~7,000 decisions timed the bucket's writes out: when the bucket was
//! reached as `coordinator`, whose permissions have `allow_responses`, nats-server 2.9 kept a
//! reply-permission entry for each watch delivery and walked them all on every delivery
//! (deploy/nats/README.md, "Two identities for the coordinator"). On this 2-core machine,
//! `30000 2000 64`: 154 s with it (0.8 s per 1,000 keys at first, 10 s at the end), 5.4 s
//! without; without the watch, 3.6 s.
//!
//! `cargo run --release -p fedvol-tests --example kv_scale -- 30000 2000 64`

use std::time::Instant;

use futures::StreamExt;

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("numbers")).collect();
    let (n, size, in_flight) = (
        args.first().copied().unwrap_or(10_000),
        args.get(1).copied().unwrap_or(40_000),
        args.get(2).copied().unwrap_or(64),
    );
    let nats = fedvol_tests::NatsServer::start();
    // As the coordinator's bucket identity, under the shipped permissions (its one bucket).
    let login = std::env::var("LOGIN").unwrap_or_else(|_| "coordinator-kv".into());
    let client = fedvol_tests::kit::client(&nats.url(), &login, "_INBOX").await;
    let js = async_nats::jetstream::new(client.clone());
    use async_nats::jetstream::stream::{Config, DiscardPolicy, StorageType};
    js.get_or_create_stream(Config {
        name: "KV_fedvol_decisions".into(),
        subjects: vec!["$KV.fedvol_decisions.>".into()],
        max_messages_per_subject: 16,
        storage: StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .unwrap();
    let kv = js.get_key_value("fedvol_decisions").await.unwrap();
    let watch = std::env::var("NO_WATCH").is_err();
    let watcher = watch.then(|| {
        let kv = kv.clone();
        tokio::spawn(async move {
            let mut w = kv.watch_with_history(">").await.unwrap();
            let mut seen = 0u64;
            while let Some(e) = w.next().await {
                match e {
                    Ok(_) => seen += 1,
                    Err(e) => eprintln!("watch error after {seen}: {e}"),
                }
            }
        })
    });
    let body = bytes::Bytes::from(vec![b'x'; size]);
    let get_first = std::env::var("GET_FIRST").is_ok();
    let t0 = Instant::now();
    let mut lap = Instant::now();
    let mut done = 0usize;
    let mut failed = 0usize;
    let mut writes = futures::stream::iter(0..n)
        .map(|i| {
            let kv = kv.clone();
            let body = body.clone();
            async move {
                let get_first = get_first;
                let key = format!("k{i}");
                if get_first {
                    // As a submit looks its request id up before creating it.
                    kv.entry(&key).await.map_err(|e| e.to_string())?;
                }
                let rev = kv.create(&key, body.clone()).await.map_err(|e| e.to_string())?;
                kv.update(&key, body, rev).await.map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            }
        })
        .buffer_unordered(in_flight);
    while let Some(r) = writes.next().await {
        done += 1;
        if let Err(e) = r {
            failed += 1;
            if failed < 5 {
                eprintln!("write failed: {e}");
            }
        }
        if done.is_multiple_of(1000) {
            println!(
                "{done:>6} keys: last 1000 in {:>6.2} s (failed so far {failed})",
                lap.elapsed().as_secs_f64()
            );
            lap = Instant::now();
        }
    }
    println!(
        "{n} keys of {size} B, {in_flight} in flight, watch {watch}: {:.1} s, {failed} failed",
        t0.elapsed().as_secs_f64()
    );
    if let Some(w) = watcher {
        w.abort();
    }
}
