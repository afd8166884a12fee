//! `fedvol clusters [show C | drain C --reason TEXT | drain C --what-if | undrain C]`: the
//! clusters the coordinators know, in one table (alive or restoring, suspect, last seen,
//! inventory version, load, holds, replicas, drained; then which are restoring, degraded or
//! drained, and why), one cluster in detail, or an operator's drain of a cluster and its end
//! (the `drain` and `undrain` operations, on the operators' subjects); `drain --what-if` asks the
//! `what_if` operation instead and drains nothing.

use fedvol_proto::coordinator::{self as api};
use fedvol_proto::{NoArgs, now_ms};

use crate::cli::args::OutputArgs;
use crate::cli::ask::{ask, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::net::NetArgs;
use crate::cli::print::print_doc;
use crate::commands::{Leading, Run};
use crate::render::layout::{bordered, para};
use crate::render::words::{ago, utc};

/// `fedvol clusters [show C]`.
#[derive(Debug, clap::Args)]
pub struct Clusters {
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Without a subcommand: every cluster in one table.
    #[command(subcommand)]
    pub cmd: Option<ClustersCmd>,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// `fedvol clusters` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClustersCmd {
    /// One cluster in detail: state, provisioners with status and access policies, zones with
    /// priority, placement policy and free capacity, inventory version.
    Show(ClusterShow),
    /// Operators only: drain a cluster. It still answers plans, but no coordinator chooses it
    /// for new work; what is committed there runs on and completes.
    Drain(ClusterDrainArgs),
    /// Operators only: end a cluster's drain; it is chosen for new work again.
    Undrain(ClusterUndrain),
}

/// `fedvol clusters drain C --reason TEXT`.
#[derive(Debug, clap::Args)]
pub struct ClusterDrainArgs {
    /// The cluster.
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Why (one line, at most 300 characters): shown with the drain everywhere. Needed unless
    /// `--what-if`.
    #[arg(long, value_name = "TEXT", value_parser = reason, required_unless_present = "what_if")]
    pub reason: Option<String>,
    /// Drain nothing: print what the drain would do to the recorded decisions of the last 7
    /// days (`fedvol what-if --drain CLUSTER`; anyone may ask).
    #[arg(long, conflicts_with = "before_join")]
    pub what_if: bool,
    /// Drain a cluster no coordinator knows yet: it takes no new work from the moment it
    /// joins. Without it, an unknown name is an error (a typo never leaves the cluster
    /// meant undrained).
    #[arg(long)]
    pub before_join: bool,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `fedvol clusters undrain C`.
#[derive(Debug, clap::Args)]
pub struct ClusterUndrain {
    /// The cluster.
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--reason`, checked as the coordinators check it ([`fedvol_common::drain::check_reason`]).
fn reason(text: &str) -> Result<String, String> {
    fedvol_common::drain::check_reason(text).map(|()| text.trim().to_string())
}

/// What `drain` and `undrain` say in a terminal (wrapped to the terminal's width).
fn drain_text(r: &api::DrainReply, now: u64) -> String {
    let c = &r.cluster;
    let when = |at: u64| format!("{} ({})", utc(at), ago(at, now));
    let line = |text: String| para("", "  ", &text);
    let note = |text: &str| para("  ", "  ", text);
    match (&r.drain, &r.ended, r.changed) {
        (Some(d), _, true) => {
            let mut text = line(format!(
                "cluster {c} drained by {} at {}: {}",
                d.by,
                when(d.at_ms),
                d.reason
            ));
            text.push_str(&note(
                "it still answers plans, but no coordinator chooses it for new work; what is committed there runs on and completes (`fedvol clusters undrain` ends the drain)",
            ));
            if !r.known {
                text.push_str(&note(&format!(
                    "no coordinator knows {c} yet: it takes no new work from the moment it joins"
                )));
            }
            text
        }
        (Some(d), _, false) => line(format!(
            "cluster {c} was already drained by {} at {}: {}; unchanged",
            d.by,
            when(d.at_ms),
            d.reason
        )),
        (None, Some(d), true) => {
            let mut text = line(format!(
                "cluster {c} undrained (it was drained by {} at {}: {})",
                d.by,
                when(d.at_ms),
                d.reason
            ));
            text.push_str(&note(
                "it is chosen for new work again; queued workflows may now be placed there",
            ));
            text
        }
        (None, _, _) => line(format!("cluster {c} was not drained; unchanged")),
    }
}

/// The lines under the table for the drained clusters, known or not.
fn drained_lines(r: &api::ClustersReply, now: u64) -> String {
    let line = |name: &str, d: &fedvol_common::drain::Drain, unknown: bool| {
        para(
            "",
            "  ",
            &format!(
                "{name}{} is drained by {} {} ({}): {}; it takes no new work",
                if unknown { " (not known yet)" } else { "" },
                d.by,
                ago(d.at_ms, now),
                utc(d.at_ms),
                d.reason
            ),
        )
    };
    let mut text = String::new();
    for c in &r.clusters {
        if let Some(d) = &c.drain {
            text.push_str(&line(&c.name, d, false));
        }
    }
    for d in &r.drained_unknown {
        text.push_str(&line(&d.cluster, &d.drain, true));
    }
    text
}

/// `fedvol clusters show C`.
#[derive(Debug, clap::Args)]
pub struct ClusterShow {
    /// The cluster.
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

impl Run for Clusters {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        let (a, o) = (&self, &self.output);
        with_client(&self.net, async |client| {
            if let Some(ClustersCmd::Drain(d)) = &a.cmd
                && d.what_if
            {
                let q = api::WhatIfQuery {
                    deadline_ms: now_ms() + a.net.timeout_ms,
                    since_ms: None,
                    user: None,
                    project: None,
                    workflow: None,
                    states: Vec::new(),
                    changes: api::WhatIfChanges {
                        drain: vec![d.cluster.clone()],
                        ..Default::default()
                    },
                };
                return super::what_if::ask_and_print(client, &q, d.output.output).await;
            }
            if let Some(ClustersCmd::Drain(d)) = &a.cmd {
                let q = api::DrainMsg {
                    cluster: d.cluster.clone(),
                    reason: d.reason.clone().unwrap_or_default(),
                    before_join: d.before_join,
                };
                return match ask::<api::Drain>(client, &q, &format!("drain {}", d.cluster)).await {
                    Ok(r) => {
                        let ok = print_doc(d.output.output, &r, || drain_text(&r, now_ms()));
                        if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                    }
                    Err(code) => code,
                };
            }
            if let Some(ClustersCmd::Undrain(u)) = &a.cmd {
                let q = api::ClusterRef {
                    cluster: u.cluster.clone(),
                };
                return match ask::<api::Undrain>(client, &q, &format!("undrain {}", u.cluster)).await {
                    Ok(r) => {
                        let ok = print_doc(u.output.output, &r, || drain_text(&r, now_ms()));
                        if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                    }
                    Err(code) => code,
                };
            }
            if let Some(ClustersCmd::Show(s)) = &a.cmd {
                let q = api::ClusterRef {
                    cluster: s.cluster.clone(),
                };
                return match ask::<api::Cluster>(client, &q, &format!("cluster {}", s.cluster)).await {
                    Ok(r) => {
                        let ok = print_doc(s.output.output, &r, || crate::render::cluster::render(&r, now_ms()));
                        if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                    }
                    Err(code) => code,
                };
            }
            match ask::<api::Clusters>(client, &NoArgs {}, "clusters").await {
                Ok(r) => {
                    let ok = print_doc(o.output, &r, || {
                        let mut t = bordered(&[
                            "CLUSTER",
                            "ALIVE",
                            "SUSPECT",
                            "LAST SEEN",
                            "INVENTORY",
                            "LOAD",
                            "HOLDS",
                            "REPLICAS",
                            "DRAINED",
                        ]);
                        for c in &r.clusters {
                            t.add_row(vec![
                                c.name.clone(),
                                match (c.alive, c.restoring) {
                                    (true, true) => "restoring".into(),
                                    (true, false) => "yes".into(),
                                    (false, _) => "no".into(),
                                },
                                if c.suspect { "yes".into() } else { "no".into() },
                                ago(c.last_seen_ms, now_ms()),
                                c.inventory_version.clone(),
                                format!("{:.2}", c.load),
                                c.holds.to_string(),
                                c.instances.len().to_string(),
                                if c.drain.is_some() { "yes".into() } else { "no".into() },
                            ]);
                        }
                        let mut text = format!("{t}\n");
                        for c in r.clusters.iter().filter(|c| c.alive && c.restoring) {
                            text.push_str(&format!(
                                "{} is restoring: its agent started on a fresh state and admits no new work until the coordinators restored the commits they stored for it (a submit waits for it within its deadline)\n",
                                c.name
                            ));
                        }
                        for c in &r.clusters {
                            if let Some(why) = &c.degraded {
                                let why: String =
                                    why.chars().map(|ch| if ch.is_control() { '?' } else { ch }).collect();
                                text.push_str(&format!("{} is degraded: {why}\n", c.name));
                            }
                        }
                        text.push_str(&drained_lines(&r, now_ms()));
                        text
                    });
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            }
        })
    }
}
