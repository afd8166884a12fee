//! `fedvol dev` (a local federation until Ctrl-C) and `fedvol demo` (the same federation, every
//! example workflow submitted, shown, completed, then everything torn down).

use std::path::{Path, PathBuf};
use std::time::Duration;

use fedvol_formats::load_workflow;
use fedvol_proto::NoArgs;
use fedvol_proto::coordinator::{self as api, DecisionRef, SubmitMsg, SubmitReply};

use super::federation::stored_table;
use super::{EXIT_BAD_INPUT, EXIT_OK};
use crate::client::Client;
use crate::devfed::DevFederation;

/// Options of `fedvol dev` and `fedvol demo`.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
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
    /// Also run a local Slurm (munged, slurmctld, two slurmd on loopback) and one more agent,
    /// cluster `slurm-local`, whose zones and hosts are that Slurm's partitions and nodes
    /// (needs Debian's slurmctld, slurmd and munge; run as root).
    #[arg(long)]
    pub slurm: bool,
}

/// Options of `fedvol demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The federation.
    #[command(flatten)]
    pub dev: DevArgs,
    /// Directory of workflows to submit, in name order (default: the example workflows built
    /// into fedvol, written to the run's state directory).
    #[arg(long, value_name = "DIR")]
    pub workflows: Option<PathBuf>,
}

fn start(a: &DevArgs) -> Result<DevFederation, u8> {
    match &a.clusters {
        Some(d) => eprintln!("starting a local federation from {} ...", d.display()),
        None => eprintln!("starting a local federation of the example clusters ..."),
    }
    let opts = crate::devfed::DevOptions {
        nats_server: a.nats_server.as_deref(),
        clusters_dir: a.clusters.as_deref(),
        bin_dir: a.bin_dir.as_deref(),
        slurm: a.slurm,
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

/// Runs `fedvol dev`: the federation until Ctrl-C.
pub fn dev(a: &DevArgs) -> u8 {
    let mut fed = match start(a) {
        Ok(f) => f,
        Err(c) => return c,
    };
    let url = fed.url.clone();
    let clusters = fed.clusters.clone();
    let code = super::net::block_on(async {
        if let Err(code) = connected(&url, &clusters, false).await {
            return code;
        }
        let context = super::context::write(&url);
        println!("\nfedvol federation running: clusters {}", clusters.join(", "));
        println!("NATS: {url}   (logs and state in {})", fed.dir.path().display());
        match &context {
            Ok(p) => println!(
                "fedvol commands in any terminal use it (URL saved in {}, removed at exit)",
                p.display()
            ),
            Err(e) => println!("cannot save the URL for other terminals ({e}): export FEDVOL_NATS_URL={url}"),
        }
        let examples = &fed.examples;
        let builtin = a.clusters.is_none();
        if builtin {
            println!(
                "example inventories and workflows: {}",
                examples.clusters.parent().unwrap_or(&examples.clusters).display()
            );
        }
        println!("\ntry, in another terminal:");
        println!("  fedvol clusters");
        println!("  fedvol submit {}", examples.workflows.join("scratch-fast.yaml").display());
        println!("  fedvol decisions list");
        println!("  fedvol decisions show <ID>        # the start of an id is enough when unique");
        if builtin {
            println!("  fedvol why-not <ID> --cluster cluster-a --host a-east-2");
        } else if let Some(c) = clusters.first() {
            println!("  fedvol why-not <ID> --cluster {c}");
        }
        println!("  fedvol complete <ID>");
        if let Some(conf) = fed.slurm_conf() {
            println!(
                "\nSlurm ({}'s zones and hosts, read every second):",
                crate::devfed::SLURM_CLUSTER
            );
            println!("  export SLURM_CONF={}", conf.display());
            println!("  sinfo; scontrol show node");
            println!("  scontrol update nodename=n2 state=drain reason=try   # n2 leaves the next plan");
            println!("  sbatch -w n1 -c 2 --mem=1000 --wrap 'sleep 300'     # n1's free capacity shrinks");
            println!("  fedvol submit {}", examples.slurm_workflow.display());
            println!("  # then decisions show: the sbatch --partition/--nodelist to run it with");
        }
        println!("\nCtrl-C stops everything and removes {}", fed.dir.path().display());
        wait_for_stop().await;
        if let Ok(p) = &context {
            super::context::remove_if_ours(p);
        }
        EXIT_OK
    });
    eprintln!("stopping ...");
    fed.stop();
    code
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM.
async fn wait_for_stop() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn workflow_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"));
    v.sort();
    v
}

/// Runs `fedvol demo`: every example workflow submitted, shown, completed; then tear-down.
/// Exit 0 when every workflow was decided and every committed one completed.
pub fn demo(a: &DemoArgs) -> u8 {
    if let Some(d) = &a.workflows
        && workflow_files(d).is_empty()
    {
        eprintln!("error: no workflows (*.yaml) in {}", d.display());
        return EXIT_BAD_INPUT;
    }
    let mut fed = match start(&a.dev) {
        Ok(f) => f,
        Err(c) => return c,
    };
    let files = workflow_files(a.workflows.as_deref().unwrap_or(&fed.examples.workflows));
    let url = fed.url.clone();
    let clusters = fed.clusters.clone();
    let code = super::net::block_on(async {
        let c = match connected(&url, &clusters, true).await {
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
                    print!("{}", stored_table(&s));
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
            let q = DecisionRef { request_id: id.clone() };
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
    });
    eprintln!("tearing down the federation ...");
    fed.stop();
    code
}
