//! `fedvol dev` (a local federation until Ctrl-C) and `fedvol demo` (the same federation, every
//! example workflow submitted, shown, completed, then everything torn down).

use std::path::{Path, PathBuf};
use std::time::Duration;

use fedvol_formats::load_workflow;
use fedvol_proto::NoArgs;
use fedvol_proto::coordinator::{self as api, DecisionRef, SubmitMsg, SubmitReply};

use super::{Leading, Run};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::client::Client;
use crate::devfed::DevFederation;
use crate::render::stored::stored_table;

/// Options of `fedvol dev` and `fedvol demo`.
#[derive(Debug, clap::Args)]
pub struct Dev {
    /// The nats-server program (default: `nats-server` on PATH).
    #[arg(long, value_name = "PATH")]
    pub nats_server: Option<PathBuf>,
    /// Directory of cluster inventories: one agent per inventory (default: the example
    /// clusters cluster-a, cluster-b and cluster-c built into fedvol, written to the run's
    /// state directory).
    #[arg(long, value_name = "DIR")]
    pub clusters: Option<PathBuf>,
    /// Where fedvol-agent and fedvol-coordinator are (default: next to this fedvol, else PATH).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Start the coordinator and every agent with a metrics listener (`/metrics`, `/healthz`,
    /// `/readyz`) on a free loopback port, and print the endpoints.
    #[arg(long)]
    pub metrics: bool,
    /// Also run a local Slurm (munged, slurmctld, two slurmd on loopback) and one more agent,
    /// cluster `slurm-local`, whose zones and hosts are that Slurm's partitions and nodes and
    /// which runs the jobs committed there with sbatch (needs Debian's slurmctld, slurmd and
    /// munge; run as root).
    #[arg(long)]
    pub slurm: bool,
}

/// Options of `fedvol demo`.
#[derive(Debug, clap::Args)]
pub struct Demo {
    /// The federation.
    #[command(flatten)]
    pub dev: Dev,
    /// Directory of workflows to submit, in name order (default: the example workflows built
    /// into fedvol, written to the run's state directory).
    #[arg(long, value_name = "DIR")]
    pub workflows: Option<PathBuf>,
}

fn start(a: &Dev) -> Result<DevFederation, u8> {
    match &a.clusters {
        Some(d) => eprintln!("starting a local federation from {} ...", d.display()),
        None => eprintln!("starting a local federation of the example clusters ..."),
    }
    let opts = crate::devfed::DevOptions {
        nats_server: a.nats_server.as_deref(),
        clusters_dir: a.clusters.as_deref(),
        bin_dir: a.bin_dir.as_deref(),
        slurm: a.slurm,
        metrics: a.metrics,
    };
    DevFederation::start(&opts, |line| eprintln!("  {line}")).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_BAD_INPUT
    })
}

async fn client(url: &str) -> Result<Client, u8> {
    let auth = fedvol_proto::nats::NatsAuth {
        url: url.to_string(),
        ..Default::default()
    };
    Client::connect(&auth, fedvol_proto::DEFAULT_PREFIX, "demo", Duration::from_secs(30))
        .await
        .map_err(|e| {
            eprintln!("error: {e}");
            EXIT_BAD_INPUT
        })
}

/// Waits until the coordinator lists every cluster as alive (10 s at most).
async fn await_clusters(c: &Client, want: &[String]) -> bool {
    for _ in 0..100 {
        if let Ok(Ok(r)) = c.call::<api::Clusters>(&NoArgs {}).await
            && want.iter().all(|w| r.clusters.iter().any(|x| &x.name == w && x.alive))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Connects to the local federation and waits until the coordinator lists every cluster;
/// when it does not within 10 s, that is an error (`required`) or a warning.
async fn connected(url: &str, clusters: &[String], required: bool) -> Result<Client, u8> {
    let c = client(url).await?;
    if !await_clusters(&c, clusters).await {
        if required {
            eprintln!("error: the coordinator does not see every cluster");
            return Err(EXIT_BAD_INPUT);
        }
        eprintln!("warning: the coordinator does not list every cluster yet");
    }
    Ok(c)
}

/// SIGTERM and SIGINT (Ctrl-C), watched; an error line and the exit code when they cannot be.
fn stop_signals() -> Result<(tokio::signal::unix::Signal, tokio::signal::unix::Signal), u8> {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(t), Ok(i)) => Ok((t, i)),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: cannot watch for Ctrl-C and SIGTERM: {e}");
            Err(EXIT_BAD_INPUT)
        }
    }
}

impl Run for Dev {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Unused
    }

    /// Runs `fedvol dev`: the federation until Ctrl-C or SIGTERM (both stop every process and
    /// remove the state directory), or until a process it started exits: that one is named with
    /// its pid and exit status, the others are stopped, the logs kept, and the exit status is 1
    /// (a compose tool's `--abort-on-container-exit`: a half federation is not left running).
    fn run(self) -> u8 {
        let a = &self;
        crate::cli::net::block_on(async {
            // Watched before anything starts: a signal that comes while the federation starts is
            // kept, and stops it as soon as it has started.
            let (mut term, mut int) = match stop_signals() {
                Ok(both) => both,
                Err(code) => return code,
            };
            let mut fed = match start(a) {
                Ok(f) => f,
                Err(c) => return c,
            };
            let url = fed.url.clone();
            let clusters = fed.clusters.clone();
            if let Err(code) = connected(&url, &clusters, false).await {
                return code;
            }
            let context = crate::cli::context::write(&url);
            print_banner(a, &fed, &context);
            let ended = tokio::select! {
                biased;
                _ = term.recv() => None,
                _ = int.recv() => None,
                e = first_exit(&mut fed) => Some(e),
            };
            if let Ok(w) = &context {
                crate::cli::context::release(w);
            }
            let code = match ended {
                None => EXIT_OK,
                Some(e) => {
                    report_exit(&e);
                    let kept = fed.keep_dir();
                    eprintln!(
                        "fedvol dev stops every process when one exits; the logs are kept in {}",
                        kept.display()
                    );
                    EXIT_BAD_INPUT
                }
            };
            eprintln!("stopping ...");
            fed.stop();
            code
        })
    }
}

/// Waits until a process of `fed` exits (asked every 200 ms).
async fn first_exit(fed: &mut DevFederation) -> crate::devfed::Exited {
    loop {
        if let Some(e) = fed.exited() {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Says which process exited, how, and the last lines of its log.
fn report_exit(e: &crate::devfed::Exited) {
    eprintln!("\nerror: {} (pid {}) exited: {}", e.name, e.pid, e.status);
    let log = std::fs::read_to_string(&e.log).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    if !lines.is_empty() {
        eprintln!("  last lines of {}:", e.log.display());
        for l in &lines[lines.len().saturating_sub(5)..] {
            eprintln!("    {}", crate::render::layout::truncate(l, 96));
        }
    }
}

/// What `fedvol dev` prints once everything runs: where things are and what to try.
fn print_banner(a: &Dev, fed: &DevFederation, context: &std::io::Result<crate::cli::context::Written>) {
    let url = &fed.url;
    println!("\nfedvol federation running: clusters {}", fed.clusters.join(", "));
    println!("NATS: {url}   (logs and state in {})", fed.dir.path().display());
    match context {
        Ok(w) => {
            println!(
                "fedvol commands in any terminal use it: URL saved in {}",
                w.default.display()
            );
            println!("  (this run's own copy, kept while it runs: {})", w.run.display());
        }
        Err(e) => println!("cannot save the URL for other terminals ({e}): export FEDVOL_NATS_URL={url}"),
    }
    if !fed.metrics.is_empty() {
        println!("\nmetrics (Prometheus text; /healthz and /readyz beside each):");
        for (who, endpoint) in &fed.metrics {
            println!("  {who:<18} {endpoint}");
        }
    }
    let examples = &fed.examples;
    let builtin = a.clusters.is_none();
    if builtin {
        println!(
            "example inventories and workflows: {}",
            examples.clusters.parent().unwrap_or(&examples.clusters).display()
        );
    }
    // One user throughout, as in the README: a decision may be completed only by its owner.
    println!("\ntry, in another terminal (as user alice, in group researchers):");
    println!("  fedvol clusters");
    println!(
        "  fedvol submit -u alice -g researchers {}",
        examples.workflows.join("scratch-fast.yaml").display()
    );
    println!("  fedvol decisions list");
    println!("  fedvol decisions show <ID>        # the start of an id is enough when unique");
    match fed.clusters.first() {
        Some(c) if builtin => {
            println!("  fedvol why-not <ID> --cluster {c}   # why {c} lost (--host a-east-2: why not it)");
        }
        Some(c) => println!("  fedvol why-not <ID> --cluster {c}   # why {c} lost"),
        None => {}
    }
    println!("  fedvol complete -u alice <ID>");
    if let Some(conf) = fed.slurm_conf() {
        println!(
            "\nSlurm ({}'s zones and hosts, read every second; it runs the jobs committed there):",
            crate::devfed::SLURM_CLUSTER
        );
        println!("  # each job runs as the Unix account of its user's name (sudo -u), and its volumes");
        println!("  # belong to that account; a user without one is refused there with the reason");
        for line in crate::devslurm::account_lines(crate::devslurm::DEV_USERS) {
            println!("  #   {line}");
        }
        println!("  export SLURM_CONF={}", conf.display());
        println!("  sinfo; scontrol show node");
        println!("  scontrol update nodename=n2 state=drain reason=try   # n2 leaves the next plan");
        println!("  sbatch -w n1 -c 2 --mem=1000 --wrap 'sleep 300'     # n1's free capacity shrinks");
        println!(
            "  fedvol submit -u alice -g researchers --follow {}",
            examples.slurm_workflow.display()
        );
        println!("  # committed, its job pending, running, then completed (about 10 s)");
        if let Some(out) = fed.slurm_jobs_output() {
            println!("  ls {}/alice/*   # the jobs' output, as alice", out.display());
        }
        if let Some(v) = fed.slurm_volumes() {
            println!("  ls -l {}   # volumes, each its user's", v.display());
        }
    }
    println!(
        "\nCtrl-C stops everything and removes {} (so does SIGTERM);",
        fed.dir.path().display()
    );
    println!("if a process exits, fedvol dev names it and stops the rest, keeping the logs");
}

fn workflow_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"));
    v.sort();
    v
}

impl Run for Demo {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Unused
    }

    /// Runs `fedvol demo`: every example workflow submitted, shown, completed; then tear-down.
    /// Exit 0 when every workflow was decided and every committed one completed.
    fn run(self) -> u8 {
        let a = &self;
        if let Some(d) = &a.workflows
            && workflow_files(d).is_empty()
        {
            eprintln!("error: no workflows (*.yaml) in {}", d.display());
            return EXIT_BAD_INPUT;
        }
        crate::cli::net::block_on(async {
            // The daemons run in their own process group (devfed): Ctrl-C and SIGTERM reach the
            // demo alone, which tears everything down.
            let (mut term, mut int) = match stop_signals() {
                Ok(both) => both,
                Err(code) => return code,
            };
            let mut fed = match start(&a.dev) {
                Ok(f) => f,
                Err(c) => return c,
            };
            let files = workflow_files(a.workflows.as_deref().unwrap_or(&fed.examples.workflows));
            let code = tokio::select! {
                biased;
                _ = term.recv() => EXIT_BAD_INPUT,
                _ = int.recv() => EXIT_BAD_INPUT,
                code = run_demo(&fed.url, &fed.clusters, &files) => code,
            };
            eprintln!("tearing down the federation ...");
            fed.stop();
            code
        })
    }
}

/// Submits, prints and completes every workflow of `files` on the federation at `url`.
async fn run_demo(url: &str, clusters: &[String], files: &[PathBuf]) -> u8 {
    {
        let c = match connected(url, clusters, true).await {
            Ok(c) => c,
            Err(code) => return code,
        };
        let mut ok = true;
        let mut committed = Vec::new();
        for (n, f) in files.iter().enumerate() {
            println!("\n=== [{}/{}] fedvol submit {}", n + 1, files.len(), f.display());
            let wf = match load_workflow(f) {
                Ok(l) => l.value,
                Err(d) => {
                    eprintln!("error: {d}");
                    ok = false;
                    continue;
                }
            };
            let msg = SubmitMsg {
                priority: None,
                wait_for_capacity: false,
                request_id: format!("demo-{}", wf.name),
                workflow: wf,
                dry_run: false,
                seed: None,
                groups: vec!["researchers".into(), "physics".into()],
                timeout_ms: 0,
                trace_limit: None,
                keep: false,
                choice: None,
            };
            match c
                .call::<api::Submit>(&msg)
                .await
                .map(|r| r.unwrap_or_else(|f| SubmitReply::error(f.error)))
            {
                Ok(SubmitReply { stored: Some(s), .. }) => {
                    print!("{}", stored_table(&s, false));
                    if s.decision.chosen_cluster.is_some() {
                        committed.push(s.decision.request_id.clone());
                    }
                }
                Ok(r) => {
                    eprintln!("error: no decision: {:?}", r.error);
                    ok = false;
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ok = false;
                }
            }
        }
        println!("\n=== completing {} committed workflows", committed.len());
        for id in &committed {
            let q = DecisionRef {
                request_id: id.clone(),
                cancel: false,
                whole: None,
            };
            match c
                .call::<api::Complete>(&q)
                .await
                .map(|r| r.unwrap_or_else(|f| SubmitReply::error(f.error)))
            {
                Ok(SubmitReply { stored: Some(s), .. }) => {
                    let cluster = s.decision.chosen_cluster.clone().unwrap_or_default();
                    let vols: Vec<String> = s
                        .completion
                        .as_ref()
                        .map(|r| {
                            r.volumes
                                .iter()
                                .map(|v| format!("{} {} ({})", v.volume, v.outcome, v.key))
                                .collect()
                        })
                        .unwrap_or_default();
                    println!(
                        "  {id} on {cluster}: {}",
                        if vols.is_empty() {
                            "nothing to reclaim".to_string()
                        } else {
                            vols.join(", ")
                        }
                    );
                }
                Ok(r) => {
                    eprintln!("error: complete {id}: {:?}", r.error);
                    ok = false;
                }
                Err(e) => {
                    eprintln!("error: complete {id}: {e}");
                    ok = false;
                }
            }
        }
        println!(
            "\n{} workflows submitted, {} committed and completed",
            files.len(),
            committed.len()
        );
        if ok { EXIT_OK } else { EXIT_BAD_INPUT }
    }
}
