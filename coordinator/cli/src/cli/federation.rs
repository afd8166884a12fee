//! The federation commands: `submit`, `decisions {list,show,watch,replay}`, `why-not`,
//! `complete`, `clusters`. Each sends one request to the coordinators and prints the answer
//! (`-o table|json|yaml`). Exit codes (docs/design.md §4): 0 done / a cluster was chosen, 2 nothing
//! fits, 1 bad input or no answer.


use comfy_table::Table;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use fedvol_common::funnel::why_not::Target;
use fedvol_proto::coordinator::{self as api, DecisionRef, SubmitReply, WhyNotQuery};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::{Code, NoArgs, now_ms};

use super::args::{IdArgs, OutputArgs};
use super::ask::{as_submit_reply, ask, get, resolve_id};
use super::exit::{EXIT_BAD_INPUT, EXIT_OK};
use super::follow::follow_jobs;
use super::net::{NetArgs, block_on};
use super::print::{fail, print_doc, show_stored};
use crate::client::Client;
use crate::render::Output;
use crate::render::stored::completed_text;

/// `fedvol why-not`.
#[derive(Debug, clap::Args)]
pub struct WhyNotArgs {
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

fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header.to_vec());
    t
}

fn ago(ms: u64) -> String {
    crate::render::words::ago(ms, now_ms())
}

/// Runs `fedvol why-not`.
pub fn why_not(a: &WhyNotArgs) -> u8 {
    let net = &a.net;
    let mut q = WhyNotQuery {
        request_id: a.id.clone(),
        cluster: a.cluster.clone(),
        target: Target {
            zone: a.zone.clone(),
            host: a.host.clone(),
            provisioner: a.provisioner.clone(),
        },
    };
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        match resolve_id(&client, &a.id).await {
            Ok(id) => q.request_id = id,
            Err(code) => return code,
        }
        match ask::<api::WhyNot>(&client, &q, &format!("why-not {}", q.request_id)).await {
            Ok(r) => {
                let ok = print_doc(a.output.output, &r, || crate::render::why_not::render_reply(&r));
                if ok { EXIT_OK } else { EXIT_BAD_INPUT }
            }
            Err(code) => code,
        }
    })
}

/// Runs `fedvol complete` (`cancel` false) or `fedvol cancel` (true: the workflow's batch jobs
/// are cancelled on its cluster first, then it is completed).
pub fn complete(a: &IdArgs, cancel: bool) -> u8 {
    let net = &a.net;
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        let id = match resolve_id(&client, &a.id).await {
            Ok(id) => id,
            Err(code) => return code,
        };
        let msg = DecisionRef {
            request_id: id.clone(),
            cancel,
            whole: None,
        };
        let answer = client.call::<api::Complete>(&msg).await.map(as_submit_reply);
        let not_owner = matches!(&answer, Ok(SubmitReply { error: Some(e), .. }) if e.code == Code::NotOwner);
        let hint = if not_owner {
            owner_hint(&client, &id, if cancel { "cancel" } else { "complete" }).await
        } else {
            String::new()
        };
        // Completed (or found failed): no plain submit is to resume it.
        if let Ok(r) = &answer
            && r.stored.as_ref().is_some_and(|s| {
                matches!(
                    s.state,
                    DecisionState::Completed | DecisionState::Failed | DecisionState::Cancelled
                )
            })
            && let Err(e) = super::pending::forget_request(&id)
        {
            eprintln!("note: {e}");
        }
        let table_view = matches!(a.output.output, Output::Table | Output::Wide);
        match answer {
            // Cancelled, but Slurm still ends the jobs (COMPLETING): the volumes are reclaimed
            // once they ended; follow the decision to its end.
            Ok(SubmitReply {
                error: Some(e),
                stored: Some(s),
                ..
            }) if cancel && table_view && e.code == fedvol_proto::Code::JobsRunning => {
                eprint!(
                    "{}",
                    crate::render::layout::para("note: ", "  ", &fedvol_common::limits::printable(&e.message))
                );
                follow_jobs(&client, &id, s, true).await
            }
            // Refused (a failed or queued decision, one already completed elsewhere...): the
            // error, briefly; `decisions show` has the decision.
            Ok(SubmitReply {
                error: Some(e), stored, ..
            }) if table_view => {
                let state = stored
                    .as_ref()
                    .map(|s| format!(" (the decision is {})", crate::render::words::state(s.state)))
                    .unwrap_or_default();
                eprint!(
                    "{}",
                    crate::render::layout::para(
                        "error: ",
                        "  ",
                        &format!(
                            "complete {id}: {} ({}){state}; fedvol decisions show {id} prints it",
                            fedvol_common::limits::printable(&e.message),
                            e.code
                        )
                    )
                );
                eprint!("{hint}");
                EXIT_BAD_INPUT
            }
            // The table view says what completing did; `decisions show` has the decision.
            Ok(r) if table_view && r.error.is_none() => match &r.stored {
                Some(s) => {
                    print!("{}", completed_text(&id, s));
                    EXIT_OK
                }
                None => show_stored(&r, a.output.output, &format!("complete {id}")).map_or_else(|c| c, |_| EXIT_OK),
            },
            Ok(r) => {
                let code = show_stored(&r, a.output.output, &format!("complete {id}")).map_or_else(|c| c, |_| EXIT_OK);
                eprint!("{hint}");
                code
            }
            Err(e) => fail(&e),
        }
    })
}

/// The line after a `not_owner` refusal of `fedvol <verb> ID`: the command that runs as the
/// decision's owner (`hint: run it as its owner: fedvol complete -u alice ID`), the owner read
/// from the decision (anyone may read one); a generic `-u OWNER` when it cannot be.
async fn owner_hint(client: &Client, id: &str, verb: &str) -> String {
    let owner = match get(client, id).await {
        Ok(SubmitReply { stored: Some(s), .. }) if !s.request.user.is_empty() => Some(s.request.user),
        _ => None,
    };
    // The command stays on one line to be copied (the refusal above names the owner).
    let text = match owner {
        Some(u) => format!(
            "run it as its owner: fedvol {verb} -u {} {id}",
            fedvol_common::limits::printable(&u)
        ),
        None => format!("run it as the user who submitted it: fedvol {verb} -u OWNER {id}"),
    };
    crate::render::layout::para("hint: ", "  ", &text)
}

/// `fedvol clusters [show C]`.
#[derive(Debug, clap::Args)]
pub struct ClustersArgs {
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
    Show(ClusterShowArgs),
}

/// `fedvol clusters show C`.
#[derive(Debug, clap::Args)]
pub struct ClusterShowArgs {
    /// The cluster.
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `fedvol clusters`.
pub fn clusters(a: &ClustersArgs) -> u8 {
    let (net, o) = (&a.net, &a.output);
    block_on(async {
        let client = match net.connect().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        if let Some(ClustersCmd::Show(s)) = &a.cmd {
            let q = api::ClusterRef {
                cluster: s.cluster.clone(),
            };
            return match ask::<api::Cluster>(&client, &q, &format!("cluster {}", s.cluster)).await {
                Ok(r) => {
                    let ok = print_doc(s.output.output, &r, || crate::render::cluster::render(&r, now_ms()));
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            };
        }
        match ask::<api::Clusters>(&client, &NoArgs {}, "clusters").await {
            Ok(r) => {
                let ok = print_doc(o.output, &r, || {
                    let mut t = new_table(&[
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
                            ago(c.last_seen_ms),
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
                            let why: String = why.chars().map(|ch| if ch.is_control() { '?' } else { ch }).collect();
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

impl crate::commands::Run for WhyNotArgs {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        why_not(&self)
    }
}

/// `fedvol complete`.
#[derive(Debug, clap::Args)]
pub struct Complete {
    /// The decision.
    #[command(flatten)]
    pub id: IdArgs,
}

impl crate::commands::Run for Complete {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.id.net)
    }

    fn run(self) -> u8 {
        complete(&self.id, false)
    }
}

/// `fedvol cancel`.
#[derive(Debug, clap::Args)]
pub struct Cancel {
    /// The decision.
    #[command(flatten)]
    pub id: IdArgs,
}

impl crate::commands::Run for Cancel {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.id.net)
    }

    fn run(self) -> u8 {
        complete(&self.id, true)
    }
}

impl crate::commands::Run for ClustersArgs {
    fn leading(&mut self) -> crate::commands::Leading<'_> {
        crate::commands::Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        clusters(&self)
    }
}
