//! `fedvol-soak`: mixed load against a local federation for N minutes, reporting memory over
//! time.
//!
//! It starts a real nats-server (JetStream, monitoring on a loopback port), two coordinators
//! and `--clusters` agents as separate processes, then runs `--submitters` clients that submit
//! (every third one a dry run) and complete what committed, plus:
//!
//! - a client whose submits time out on its side after a few milliseconds (its inbox must be
//!   dropped: the server's subscription count must not grow);
//! - every `--freeze-every` seconds one agent frozen with SIGSTOP for 3 s, so the
//!   coordinators' gathers time out on it (their per-gather inboxes must not leak either).
//!
//! Every `--sample-secs` it prints one line: elapsed time, decisions per second, the server's
//! subscriptions and connections (`/varz`), and the resident memory (VmRSS from
//! `/proc/<pid>/status`) and CPU use over the interval (`/proc/<pid>/stat`, % of one core) of
//! nats-server, each coordinator and each agent. At the end it
//! compares memory and subscriptions after warm-up with the end, runs the checker on everything
//! the clients were told, and exits 0 when the checker is clean and no leak signal showed
//! (1 otherwise; 2 when it could not start).
//!
//! ```sh
//! cargo build --release --workspace
//! target/release/fedvol-soak --minutes 10
//! ```
//!
//! The fedvol binaries are taken from the directory of this executable (or `FEDVOL_BIN_DIR`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fedvol_tests::NatsServer;
use fedvol_tests::checker::Report;
use fedvol_tests::faultkit::{agent_on, coordinator_on, final_check, inventories};
use fedvol_tests::federation::AgentProc;
use fedvol_tests::load::{Load, LoadSpec, call_raw, roomy_inventory, small_workflow, submit_msg};

struct Args {
    seconds: u64,
    submitters: usize,
    clusters: usize,
    sample_secs: u64,
    freeze_every: u64,
}

const USAGE: &str = "usage: fedvol-soak [--minutes N | --seconds N] [--submitters N] [--clusters N] [--sample-secs N] [--freeze-every SECS (0: never)]";

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 300,
        submitters: 4,
        clusters: 3,
        sample_secs: 10,
        freeze_every: 60,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.into());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: `{value}` is not a whole number\n{USAGE}"))?;
        match flag.as_str() {
            "--minutes" => a.seconds = n * 60,
            "--seconds" => a.seconds = n,
            "--submitters" => a.submitters = n.max(1) as usize,
            "--clusters" => a.clusters = n.clamp(1, 26) as usize,
            "--sample-secs" => a.sample_secs = n.max(1),
            "--freeze-every" => a.freeze_every = n,
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    Ok(a)
}

/// VmRSS of `pid`, KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time used by `pid` so far (user + system), in clock ticks (1/100 s on Linux).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// `subscriptions` and `connections` of the server's `/varz` on `port`.
fn varz(port: u16) -> Option<(u64, u64)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /varz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let json = &body[body.find('{')?..];
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    Some((v["subscriptions"].as_u64()?, v["connections"].as_u64()?))
}

struct Sample {
    at: Duration,
    rss: Vec<Option<u64>>,
    cpu: Vec<Option<f64>>,
    subs: u64,
    conns: u64,
    rate: f64,
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    if std::env::var_os("FEDVOL_BIN_DIR").is_none()
        && let Some(dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(PathBuf::from))
    {
        // SAFETY: nothing else runs yet (no runtime, no other thread), so nothing reads the
        // environment concurrently.
        unsafe { std::env::set_var("FEDVOL_BIN_DIR", &dir) };
    }
    let dir = PathBuf::from(std::env::var_os("FEDVOL_BIN_DIR").unwrap_or_default());
    for bin in ["fedvol-agent", "fedvol-coordinator"] {
        if !dir.join(bin).is_file() {
            eprintln!(
                "fedvol-soak: {bin} not found in {}: build the workspace first (`cargo build --release --workspace`) or set FEDVOL_BIN_DIR",
                dir.display()
            );
            return std::process::ExitCode::from(2);
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fedvol-soak: cannot start the runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let clean = rt.block_on(soak(args));
    std::process::ExitCode::from(if clean { 0 } else { 1 })
}

async fn soak(args: Args) -> bool {
    let http = fedvol_tests::nats::free_port();
    let nats = NatsServer::shipped_with(
        fedvol_tests::shipped::Shipped::Single,
        &format!("http: 127.0.0.1:{http}"),
    );
    let url = nats.url();
    let names: Vec<String> = (0..args.clusters)
        .map(|i| format!("{}", (b'a' + i as u8) as char))
        .collect();
    let mut agents: Vec<AgentProc> = Vec::new();
    for n in &names {
        agents.push(agent_on(&url, 500, &[], |d| roomy_inventory(n, 8, 64, d)).await);
    }
    let coord_args = [
        "--deadline-ms",
        "1000",
        "--commit-timeout-ms",
        "3000",
        "--discovery-ms",
        "300",
    ];
    let coords = [
        coordinator_on(&url, &coord_args).await,
        coordinator_on(&url, &coord_args).await,
    ];
    let mut clients = Vec::new();
    for _ in 0..args.submitters.min(4) {
        clients.push(nats.client().await);
    }
    let named: Vec<&str> = names.iter().map(String::as_str).collect();
    fedvol_tests::faultkit::wait_ready(&clients[0], &named).await;
    println!(
        "fedvol-soak: {} s, {} submitters, {} clusters, nats {url} (monitoring 127.0.0.1:{http})",
        args.seconds, args.submitters, args.clusters
    );

    let mut spec = LoadSpec::new(args.submitters, "soak", small_workflow("soak", 1));
    spec.dry_run_every = 3;
    spec.complete_every = 1;
    spec.answer_wait = Duration::from_secs(10);
    spec.retry_for = Duration::from_secs(60);
    spec.pause = Duration::from_millis(5);
    let load = Load::start(&clients, spec);

    // Requests abandoned by their client after 5 ms: the coordinators still answer, to an inbox
    // that is gone.
    let stop = Arc::new(AtomicBool::new(false));
    let abandoned = Arc::new(AtomicU64::new(0));
    let impatient = {
        let (client, stop, abandoned) = (nats.client().await, stop.clone(), abandoned.clone());
        tokio::spawn(async move {
            let wf = small_workflow("impatient", 1);
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let body = serde_json::to_vec(&submit_msg(&format!("impatient-{n}"), &wf, true)).unwrap_or_default();
                let subject = fedvol_proto::Subjects::default()
                    .coordinator(fedvol_proto::coordinator::CoordinatorOp::Submit, "impatient");
                if call_raw(&client, &subject, body, Duration::from_millis(5))
                    .await
                    .is_err()
                {
                    abandoned.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let started = Instant::now();
    let end = started + Duration::from_secs(args.seconds);
    let mut samples: Vec<Sample> = Vec::new();
    let mut freezes = 0;
    let mut next_freeze = started + Duration::from_secs(args.freeze_every.max(1));
    let mut last_count = 0usize;
    let mut last_at = Instant::now();
    let mut last_ticks: Vec<Option<u64>> = Vec::new();
    let labels: Vec<String> = ["nats".to_string(), "coord0".into(), "coord1".into()]
        .into_iter()
        .chain(names.iter().map(|n| format!("agent-{n}")))
        .collect();
    println!(
        "{:>7} {:>8} {:>6} {:>5}  {}",
        "t(s)",
        "dec/s",
        "subs",
        "conns",
        labels
            .iter()
            .map(|l| format!("{:>18}", format!("{l} rss cpu")))
            .collect::<String>()
    );
    while Instant::now() < end {
        let until = (Instant::now() + Duration::from_secs(args.sample_secs)).min(end);
        while Instant::now() < until {
            if args.freeze_every > 0 && Instant::now() >= next_freeze {
                let victim = &agents[freezes % agents.len()];
                victim.proc.signal(nix::sys::signal::Signal::SIGSTOP);
                tokio::time::sleep(Duration::from_secs(3)).await;
                victim.proc.signal(nix::sys::signal::Signal::SIGCONT);
                freezes += 1;
                next_freeze = Instant::now() + Duration::from_secs(args.freeze_every);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let decided = load.count(|a| {
            a.op == "submit"
                && matches!(
                    a.outcome,
                    fedvol_tests::load::Outcome::Committed(_)
                        | fedvol_tests::load::Outcome::Failed
                        | fedvol_tests::load::Outcome::Planned
                )
        });
        let secs = last_at.elapsed().as_secs_f64();
        let rate = (decided - last_count) as f64 / secs;
        last_count = decided;
        last_at = Instant::now();
        let mut pids = vec![nats.pid()];
        pids.extend(coords.iter().map(|c| Some(c.proc.pid())));
        pids.extend(agents.iter().map(|a| Some(a.proc.pid())));
        let rss: Vec<Option<u64>> = pids.iter().map(|p| p.and_then(rss_kib)).collect();
        let ticks: Vec<Option<u64>> = pids.iter().map(|p| p.and_then(cpu_ticks)).collect();
        let cpu: Vec<Option<f64>> = ticks
            .iter()
            .enumerate()
            .map(|(i, t)| match (t, last_ticks.get(i).copied().flatten()) {
                (Some(now), Some(before)) => Some(now.saturating_sub(before) as f64 / secs),
                _ => None,
            })
            .collect();
        last_ticks = ticks;
        let (subs, conns) = varz(http).unwrap_or((0, 0));
        let s = Sample {
            at: started.elapsed(),
            rss,
            cpu,
            subs,
            conns,
            rate,
        };
        println!(
            "{:>7.0} {:>8.1} {:>6} {:>5}  {}",
            s.at.as_secs_f64(),
            s.rate,
            s.subs,
            s.conns,
            s.rss
                .iter()
                .zip(&s.cpu)
                .map(|(r, c)| format!(
                    "{:>8} MiB {:>4}%",
                    r.map(|k| format!("{:.1}", k as f64 / 1024.0)).unwrap_or("-".into()),
                    c.map(|c| format!("{c:.0}")).unwrap_or("-".into())
                ))
                .collect::<String>()
        );
        samples.push(s);
    }
    stop.store(true, Ordering::SeqCst);
    let _ = impatient.await;
    let result = load.stop().await;
    println!("load: {}", result.summary());
    println!(
        "abandoned by their client after 5 ms: {}; agents frozen: {freezes} times",
        abandoned.load(Ordering::SeqCst)
    );

    // Memory and subscriptions: after warm-up (the first quarter) against the end.
    let mut leak = false;
    if samples.len() >= 4 {
        let warm = &samples[samples.len() / 4];
        let last = &samples[samples.len() - 1];
        println!(
            "from {:.0} s to {:.0} s (after warm-up to the end):",
            warm.at.as_secs_f64(),
            last.at.as_secs_f64()
        );
        for (i, label) in labels.iter().enumerate() {
            if let (Some(a), Some(b)) = (warm.rss[i], last.rss[i]) {
                let growth = b as f64 - a as f64;
                println!(
                    "  {label:>10}: {:.1} MiB -> {:.1} MiB ({:+.1} MiB, {:+.0}%)",
                    a as f64 / 1024.0,
                    b as f64 / 1024.0,
                    growth / 1024.0,
                    100.0 * growth / a as f64
                );
            }
        }
        println!(
            "  server subscriptions: {} -> {} (connections {} -> {})",
            warm.subs, last.subs, warm.conns, last.conns
        );
        // A leaked inbox per timed-out request would add thousands of subscriptions.
        if last.subs > warm.subs + 50 {
            println!(
                "LEAK SIGNAL: the server's subscriptions grew by {}",
                last.subs - warm.subs
            );
            leak = true;
        }
    }
    let pairs: Vec<(&str, &AgentProc)> = names.iter().map(String::as_str).zip(agents.iter()).collect();
    let report: Report = final_check(&clients[0], &inventories(&pairs), &result, Duration::from_secs(30)).await;
    println!("checker: {report}");
    report.is_clean() && !leak
}
