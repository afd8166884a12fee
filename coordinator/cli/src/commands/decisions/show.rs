//! `fedvol decisions show ID [--cluster C]`: one stored decision (a unique start of its id is
//! enough): the per-cluster table, then each cluster's failed stages with every reason;
//! `--cluster` asks that cluster's agent for its whole answer when the decision keeps a summary.

use fedvol_proto::decisions::StoredDecision;

use crate::cli::args::OutputArgs;
use crate::cli::ask::{get_whole, resolve_id, with_client};
use crate::cli::exit::{EXIT_OK, EXIT_USAGE};
use crate::cli::net::NetArgs;
use crate::cli::print::{fail, show_stored};
use crate::commands::{Leading, Run};

/// `fedvol decisions show`.
#[derive(Debug, clap::Args)]
pub struct Show {
    /// The decision's request id, or a unique start of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Show this cluster's whole answer (every listed rejection) when the decision stores it as
    /// a summary: asked of the cluster's agent, which keeps it 10 minutes after the plan.
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// What `decisions show --cluster C` says besides the decision: an error (exit 64, usage) when
/// `C` took no part in it, a note on stderr when its answer is still a summary (its agent keeps
/// the whole answer no longer).
fn whole_note(s: &StoredDecision, id: &str, cluster: &str) -> Result<(), u8> {
    match s.decision.clusters.get(cluster) {
        None => {
            let names: Vec<&str> = s.decision.clusters.keys().map(String::as_str).collect();
            eprintln!(
                "error: cluster `{}` took no part in decision {id} (its clusters: {})",
                fedvol_common::limits::printable(cluster),
                crate::render::outcomes::names(&names, false)
            );
            Err(EXIT_USAGE)
        }
        Some(c) if c.summarized => {
            eprintln!(
                "note: cluster {cluster}'s answer is shown as its summary: its agent keeps no whole answer for {id} any more (it keeps them 10 minutes after the plan, and none across a restart); `fedvol why-not {id} --cluster {cluster} --host H` asks the cluster again"
            );
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

impl Run for Show {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        let a = &self;
        with_client(&self.net, async |client| {
            let id = match resolve_id(client, &a.id).await {
                Ok(id) => id,
                Err(code) => return code,
            };
            match get_whole(client, &id, a.cluster.as_deref()).await {
                Ok(r) => {
                    if let (Some(c), Some(s)) = (&a.cluster, &r.stored)
                        && let Err(code) = whole_note(s, &id, c)
                    {
                        return code;
                    }
                    show_stored(&r, a.output.output, &format!("decision {id}")).map_or_else(|c| c, |_| EXIT_OK)
                }
                Err(e) => fail(&e),
            }
        })
    }
}
