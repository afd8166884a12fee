//! `fedvol why-not ID --cluster C [--zone Z | --host H | --provisioner P]`: asked of cluster
//! C's agent through the coordinators: why C lost the decision (C alone: what it could not
//! place, or the cluster-choice step that dropped it), or why it did not choose a zone, host or
//! provisioner, every blocker with its reason.

use fedvol_common::funnel::why_not::Target;
use fedvol_proto::coordinator::{self as api, WhyNotQuery};

use crate::cli::args::OutputArgs;
use crate::cli::ask::{ask, resolve_id, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::net::NetArgs;
use crate::cli::print::print_doc;
use crate::commands::{Leading, Run};
use crate::render::why_not::render_reply;

/// `fedvol why-not`.
#[derive(Debug, clap::Args)]
pub struct WhyNot {
    /// The decision's request id, or a unique start of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The cluster to ask. Alone, it explains why that cluster lost: what it could not place,
    /// or the cluster-choice step that dropped it.
    #[arg(long)]
    pub cluster: String,
    /// A zone of that cluster.
    #[arg(long)]
    pub zone: Option<String>,
    /// A host of that cluster.
    #[arg(long)]
    pub host: Option<String>,
    /// A provisioner of that cluster.
    #[arg(long)]
    pub provisioner: Option<String>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

impl Run for WhyNot {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        let a = &self;
        let mut q = WhyNotQuery {
            request_id: a.id.clone(),
            cluster: a.cluster.clone(),
            target: Target {
                zone: a.zone.clone(),
                host: a.host.clone(),
                provisioner: a.provisioner.clone(),
            },
        };
        with_client(&self.net, async |client| {
            match resolve_id(client, &a.id).await {
                Ok(id) => q.request_id = id,
                Err(code) => return code,
            }
            match ask::<api::WhyNot>(client, &q, &format!("why-not {}", q.request_id)).await {
                Ok(r) => {
                    let ok = print_doc(a.output.output, &r, || render_reply(&r));
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            }
        })
    }
}
