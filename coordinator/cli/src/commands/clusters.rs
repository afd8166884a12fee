//! `fedvol clusters [show C]`: the clusters the coordinators know, in one table (alive or
//! restoring, suspect, last seen, inventory version, load, holds, replicas; then which are
//! restoring or degraded, and why), or one cluster in detail.

use fedvol_proto::coordinator::{self as api};
use fedvol_proto::{NoArgs, now_ms};

use crate::cli::args::OutputArgs;
use crate::cli::ask::{ask, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::net::NetArgs;
use crate::cli::print::print_doc;
use crate::commands::{Leading, Run};
use crate::render::layout::bordered;
use crate::render::words::ago;

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
                        text
                    });
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            }
        })
    }
}
