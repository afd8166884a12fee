//! `fedvol what-if`: the recorded decisions planned again by the coordinators on today's
//! federation with hypothetical changes (a cluster drained, removed, added, or with another
//! inventory), holding and committing nothing (the `what_if` operation, docs/design.md §2.7).
//! Inventory files are read and checked here, as `fedvol check` reads them, and sent as data:
//! a bad one is reported with its file, line and field, and nothing is asked.

use std::path::{Path, PathBuf};

use fedvol_common::model::Inventory;
use fedvol_formats::load_inventory;
use fedvol_proto::coordinator::{self as api, WhatIfChanges, WhatIfQuery};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::now_ms;

use crate::cli::args::OutputArgs;
use crate::cli::ask::{ask, with_client};
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_OK};
use crate::cli::net::NetArgs;
use crate::cli::print::{print_diagnostics, print_doc, print_notices};
use crate::commands::decisions::list::parse_age_ms;
use crate::commands::{Leading, Run};
use crate::render::Output;
use crate::render::what_if::what_if_table;

/// `fedvol what-if`.
#[derive(Debug, clap::Args)]
pub struct WhatIf {
    /// Only decisions changed within this long: `90s`, `15m`, `2h`, `7d` (default 7d; `0s`:
    /// every one).
    #[arg(long, value_name = "AGE", value_parser = parse_age_ms)]
    pub since: Option<u64>,
    /// Only decisions of this project (`default` for workflows that name none).
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// Only decisions made for this user (`-u` is who asks).
    #[arg(long = "for-user", value_name = "USER")]
    pub for_user: Option<String>,
    /// Only decisions in this state (repeat for several; default: committed, completed,
    /// failed and queued).
    #[arg(long, value_enum, value_name = "STATE")]
    pub state: Vec<State>,
    /// Only workflows whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub workflow: Option<String>,
    /// The cluster takes no new work (repeatable).
    #[arg(long, value_name = "CLUSTER")]
    pub drain: Vec<String>,
    /// The cluster is gone (repeatable).
    #[arg(long = "remove-cluster", value_name = "CLUSTER")]
    pub remove_cluster: Vec<String>,
    /// The cluster's inventory replaced by this file (its `cluster:` must be CLUSTER); fedvol's
    /// live commits there still count, on hosts of the same zone and name (repeatable).
    #[arg(long, value_name = "CLUSTER=FILE", value_parser = parse_replacement)]
    pub inventory: Vec<(String, PathBuf)>,
    /// A new cluster with this inventory and no commits (repeatable).
    #[arg(long = "add-cluster", value_name = "FILE")]
    pub add_cluster: Vec<PathBuf>,
    /// Another policy: a file of the coordinator's policy keys (`quotas`, `priorityClasses`,
    /// `defaultPriorityClass`, `queue`, as in coordinator.yaml and nothing else). Each decision
    /// is checked against its quotas beside today's live use.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output format (`-o wide`: every decision, every volume and job).
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

/// The states `--state` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum State {
    /// Being planned or committed (kept dry runs too).
    Planned,
    /// Committed on its cluster.
    Committed,
    /// Ended by `fedvol complete`.
    Completed,
    /// Failed: nothing fits, refused by policy, a failed commit or job.
    Failed,
    /// Waiting for capacity.
    Queued,
    /// Ended by `fedvol cancel`.
    Cancelled,
}

impl State {
    fn stored(self) -> DecisionState {
        match self {
            State::Planned => DecisionState::Planned,
            State::Committed => DecisionState::Committed,
            State::Completed => DecisionState::Completed,
            State::Failed => DecisionState::Failed,
            State::Queued => DecisionState::Queued,
            State::Cancelled => DecisionState::Cancelled,
        }
    }
}

/// `CLUSTER=FILE`.
fn parse_replacement(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((c, f)) if !c.is_empty() && !f.is_empty() => Ok((c.to_string(), PathBuf::from(f))),
        _ => Err(format!("`{s}` is not CLUSTER=FILE (e.g. cluster-a=cluster-a.yaml)")),
    }
}

/// Reads and checks the inventory at `path` (its problems printed with file, line and
/// field); `expect` is the cluster it must describe, when one is named.
fn read(path: &Path, expect: Option<&str>) -> Option<Inventory> {
    let inv = match load_inventory(path) {
        Ok(l) => {
            print_notices(&l.notices);
            l.value
        }
        Err(d) => {
            print_diagnostics(&d);
            return None;
        }
    };
    let problems = fedvol_common::limits::inventory_problems(&inv);
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("error: {}: {p}", path.display());
        }
        return None;
    }
    if let Some(c) = expect
        && inv.cluster != c
    {
        eprintln!(
            "error: {}: field `cluster` is `{}`, but --inventory names cluster `{c}` (give {c}={} only for an inventory of {c})",
            path.display(),
            inv.cluster,
            path.display()
        );
        return None;
    }
    Some(inv)
}

impl WhatIf {
    /// The changes, every file read and checked; `None` when one is bad (each problem printed).
    fn changes(&self) -> Option<WhatIfChanges> {
        let mut ok = true;
        let mut inventories = Vec::new();
        for (c, f) in &self.inventory {
            match read(f, Some(c)) {
                Some(i) => inventories.push(i),
                None => ok = false,
            }
        }
        let mut add = Vec::new();
        for f in &self.add_cluster {
            match read(f, None) {
                Some(i) => add.push(i),
                None => ok = false,
            }
        }
        let mut policy = None;
        if let Some(f) = &self.policy {
            match fedvol_formats::policy::load_policy(f) {
                Ok(p) => policy = Some(p),
                Err(d) => {
                    print_diagnostics(&d);
                    ok = false;
                }
            }
        }
        ok.then(|| WhatIfChanges {
            drain: self.drain.clone(),
            remove: self.remove_cluster.clone(),
            inventories,
            add,
            policy,
        })
    }
}

impl Run for WhatIf {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    /// Exit 0 with the report; 1 on a bad file or flag value, or an error of the coordinators.
    fn run(self) -> u8 {
        let Some(changes) = self.changes() else {
            return EXIT_BAD_INPUT;
        };
        let o = self.output.output;
        let q = WhatIfQuery {
            deadline_ms: now_ms() + self.net.timeout_ms,
            since_ms: self.since,
            user: self.for_user.clone(),
            project: self.project.clone(),
            workflow: self.workflow.clone(),
            states: self.state.iter().map(|s| s.stored()).collect(),
            changes,
        };
        with_client(&self.net, async |client| ask_and_print(client, &q, o).await)
    }
}

/// Asks the coordinators for the what-if `q` and prints its report in `o`; the exit code (0,
/// or the coordinators' error's). Also `fedvol clusters drain C --what-if`.
pub async fn ask_and_print(client: &crate::client::Client, q: &WhatIfQuery, o: Output) -> u8 {
    match ask::<api::WhatIf>(client, q, "what-if").await {
        Ok(r) => {
            if print_doc(o, &r, || what_if_table(&r, o == Output::Wide)) {
                EXIT_OK
            } else {
                EXIT_BAD_INPUT
            }
        }
        Err(code) => code,
    }
}
