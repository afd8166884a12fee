//! `fedvol decisions count`: how many stored decisions are in each state, in all and per
//! chosen cluster, counted by the coordinators (the `count` operation).

use fedvol_proto::NoArgs;
use fedvol_proto::coordinator::{self as api, CountReply};
use fedvol_proto::decisions::DecisionState;

use crate::cli::args::OutputArgs;
use crate::cli::ask::{ask, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::net::NetArgs;
use crate::cli::print::print_doc;
use crate::commands::{Leading, Run};
use crate::render::layout::{bordered, fill};

/// `fedvol decisions count`.
#[derive(Debug, clap::Args)]
pub struct Count {
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// The states in the table's column order (a decision's life: planned, then committed, then
/// one of its ends; queued beside failed, as both wait for room or a retry).
const STATES: [DecisionState; 6] = [
    DecisionState::Planned,
    DecisionState::Queued,
    DecisionState::Committed,
    DecisionState::Completed,
    DecisionState::Cancelled,
    DecisionState::Failed,
];

/// The table of `decisions count`: one row per chosen cluster (by name), `(none)` for the
/// decisions no cluster was chosen for, and `all`; one column per state, then TOTAL. A line
/// under it says how many are kept dry runs, when any are.
pub fn count_table(r: &CountReply) -> String {
    let mut header = vec!["CLUSTER"];
    header.extend(STATES.iter().map(|s| s.as_str()));
    header.push("total");
    let header: Vec<String> = header.iter().map(|h| h.to_uppercase()).collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let row = |name: &str, counts: &std::collections::BTreeMap<String, u64>| {
        let mut cells = vec![fedvol_common::limits::printable(name)];
        cells.extend(
            STATES
                .iter()
                .map(|s| counts.get(s.as_str()).copied().unwrap_or(0).to_string()),
        );
        cells.push(counts.values().sum::<u64>().to_string());
        cells
    };
    let mut rows: Vec<Vec<String>> = r.clusters.iter().map(|(c, counts)| row(c, counts)).collect();
    if !r.unplaced.is_empty() {
        rows.push(row("(none)", &r.unplaced));
    }
    rows.push(row("all", &r.states));
    let mut t = bordered(&header);
    fill(&mut t, &header, rows);
    let mut text = format!("{t}\n");
    if r.dry_runs > 0 {
        text.push_str(&format!(
            "{} of them kept dry runs (nothing held or committed)\n",
            r.dry_runs
        ));
    }
    text
}

impl Run for Count {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        let o = self.output.output;
        with_client(&self.net, async |client| {
            match ask::<api::Count>(client, &NoArgs {}, "decisions count").await {
                Ok(r) => {
                    let ok = print_doc(o, &r, || {
                        if r.total == 0 {
                            "no decisions stored\n".to_string()
                        } else {
                            count_table(&r)
                        }
                    });
                    if ok { EXIT_OK } else { EXIT_BAD_INPUT }
                }
                Err(code) => code,
            }
        })
    }
}
