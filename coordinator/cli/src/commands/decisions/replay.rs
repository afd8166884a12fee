//! `fedvol decisions replay ID`: the coordinators run a stored request again with its seed and
//! say whether the answer is identical, and else what differs.

use fedvol_proto::coordinator::{self as api, DecisionRef};

use crate::cli::args::IdArgs;
use crate::cli::ask::{ask, resolve_id, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::print::print_doc;
use crate::commands::{Leading, Run};

/// `fedvol decisions replay`.
#[derive(Debug, clap::Args)]
pub struct Replay {
    /// The decision.
    #[command(flatten)]
    pub id: IdArgs,
}

impl Run for Replay {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.id.net)
    }

    fn run(self) -> u8 {
        let a = &self.id;
        with_client(&a.net, async |client| {
            let id = match resolve_id(client, &a.id).await {
                Ok(id) => id,
                Err(code) => return code,
            };
            let q = DecisionRef {
                request_id: id.clone(),
                cancel: false,
                whole: None,
            };
            match ask::<api::Replay>(client, &q, &format!("replay of {id}")).await {
                Ok(r) => {
                    let ok = print_doc(a.output.output, &r, || {
                        let mut s = if r.identical {
                            format!("replay of {id}: identical\n")
                        } else {
                            format!("replay of {id}: different\n")
                        };
                        for d in &r.differences {
                            s.push_str(&format!("  - {d}\n"));
                        }
                        s
                    });
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            }
        })
    }
}
