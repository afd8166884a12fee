//! `fedvol plan`: run each given cluster's funnel locally plus the cross-cluster choice, and
//! print the decision document (docs/design.md §4). No network is involved.

use std::collections::BTreeSet;
use std::path::PathBuf;

use fedvol_common::funnel::{PlanRequest, seed_from_request_id, trace::fnv1a};
use fedvol_common::offline::plan_locally;
use fedvol_formats::load_inventory;

use super::{Leading, Run};
use crate::cli::args::OutputArgs;
use crate::cli::exit::{EXIT_BAD_INPUT, EXIT_NO_FIT, EXIT_OK};
use crate::cli::print::{print_diagnostics, print_notices};
use crate::render::{Output, table, yaml};

/// Arguments of `fedvol plan`.
#[derive(Debug, clap::Args)]
pub struct Plan {
    /// Cluster inventories, one per cluster: several after one flag (`-i a.yaml b.yaml`), the
    /// flag repeated, or a directory (its inventories, as `fedvol dev --clusters DIR` takes
    /// them). Kubernetes StorageClass/PV files work too, named one by one. When no WORKFLOW
    /// follows, the last file given here is the workflow.
    #[arg(short = 'i', long = "inventory", required = true, num_args = 1.., value_name = "FILE|DIR")]
    pub inventories: Vec<PathBuf>,
    /// The user the plan is for (provisioner access policies name users and groups).
    #[arg(short = 'u', long, env = "FEDVOL_USER", default_value = "anonymous")]
    pub user: String,
    /// A group of the user (repeat for several); used by provisioner access policies.
    #[arg(short = 'g', long = "group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// Seed for every random choice (default: derived from the request id).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Request id (default: derived from the workflow file's content, so plans are repeatable).
    #[arg(long)]
    pub request_id: Option<String>,
    /// Most rejected candidates listed per funnel stage (0 = all); counts per reason are always
    /// exact.
    #[arg(long, default_value_t = fedvol_common::funnel::trace::DEFAULT_TRACE_LIMIT)]
    pub trace_limit: usize,
    /// Cluster-choice options (`--prefer-cost`, `--cost-hours`).
    #[command(flatten)]
    pub choice: crate::cli::choice::ChoiceArgs,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Explain why a zone, host or provisioner was not chosen (after the decision).
    #[command(flatten)]
    pub explain: crate::cli::explain::ExplainArgs,
    /// Values files for a workflow that is a catalog template.
    #[command(flatten)]
    pub values: crate::cli::template::ValuesArgs,
    /// The workflow: a Fuzzfile (v1 or v4), a file of Kubernetes PersistentVolumeClaims, or a
    /// catalog template with `--values` (default: the last file after `-i`).
    #[arg(value_name = "WORKFLOW")]
    pub workflow: Option<PathBuf>,
}

impl Plan {
    /// The inventory paths and the workflow: `workflow` when given, else the last path after
    /// `-i` (`fedvol plan -i a.yaml b.yaml wf.yaml`), which must then be a file.
    ///
    /// Errors: a usage line when no workflow is left (only inventories given).
    pub fn files(&self) -> Result<(Vec<PathBuf>, PathBuf), String> {
        let mut inventories = self.inventories.clone();
        let workflow = match &self.workflow {
            Some(w) => w.clone(),
            None if inventories.len() >= 2 && !inventories.last().is_some_and(|p| p.is_dir()) => {
                inventories.pop().unwrap_or_default()
            }
            None => {
                return Err(
                    "no workflow given: fedvol plan -i INVENTORY|DIR... WORKFLOW (the workflow last)".to_string(),
                );
            }
        };
        Ok((inventories, workflow))
    }
}

impl Run for Plan {
    fn leading(&mut self) -> Leading<'_> {
        Leading::User(&mut self.user)
    }

    /// Runs `fedvol plan` as `a.user`; returns 0 when a cluster was chosen, 2 when none fits, 1 on
    /// bad input.
    fn run(self) -> u8 {
        let a = &self;
        let user = a.user.as_str();
        let (paths, workflow_path) = match a.files() {
            Ok(x) => x,
            Err(e) => {
                eprintln!("error: {e}");
                return crate::cli::exit::EXIT_USAGE;
            }
        };
        let (paths, errors) = crate::cli::inputs::inventories(&paths);
        let mut bad = !errors.is_empty();
        for e in &errors {
            eprintln!("error: {e}");
        }
        let mut inventories = Vec::new();
        let mut names = BTreeSet::new();
        for p in &paths {
            match load_inventory(p) {
                Ok(l) => {
                    print_notices(&l.notices);
                    if !names.insert(l.value.cluster.clone()) {
                        eprintln!(
                            "error: {}: cluster `{}` is given twice; each --inventory must be a different cluster",
                            p.display(),
                            l.value.cluster
                        );
                        bad = true;
                    }
                    inventories.push(l.value);
                }
                Err(d) => {
                    print_diagnostics(&d);
                    bad = true;
                }
            }
        }
        let input = crate::cli::template::load_workflow_input(&workflow_path, &a.values.values);
        let (Some(input), false) = (input, bad) else {
            return EXIT_BAD_INPUT;
        };
        let workflow = input.loaded.value;
        // The default id comes from the text planned: a template's rendered text, so other values
        // give another id (and seed).
        let request_id = a
            .request_id
            .clone()
            .unwrap_or_else(|| format!("plan-{:016x}", fnv1a(&input.source)));
        let seed = a.seed.unwrap_or_else(|| seed_from_request_id(&request_id));
        let req = PlanRequest::new(request_id, workflow, user)
            .with_groups(a.groups.clone())
            .with_seed(seed)
            .with_trace_limit(a.trace_limit)
            .with_choice(a.choice.options());
        let decision = plan_locally(&inventories, &req);
        // A --why-not-* name no inventory has is a bad argument: a usage error.
        let explained = match a.explain.explain(&inventories, &req) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("error: {e}");
                return crate::cli::exit::EXIT_USAGE;
            }
        };
        // With --why-not-*, the machine formats carry both: {"decision": ..., "why_not": [...]}.
        #[derive(serde::Serialize)]
        struct ExplainedPlan<'a> {
            decision: &'a fedvol_common::decision::Decision,
            why_not: &'a [crate::cli::explain::Explained],
        }
        let both = ExplainedPlan {
            decision: &decision,
            why_not: &explained,
        };
        let printed = match (a.output.output, a.explain.target().is_some()) {
            (Output::Table | Output::Wide, _) => Ok(table::render_labelled(
                &decision,
                "refused: ",
                a.output.output == Output::Wide,
            ) + &crate::cli::explain::render(&explained)),
            (Output::Json, false) => serde_json::to_string_pretty(&decision).map(|s| s + "\n"),
            (Output::Json, true) => serde_json::to_string_pretty(&both).map(|s| s + "\n"),
            (Output::Yaml, false) => yaml::render(&decision),
            (Output::Yaml, true) => yaml::render(&both),
        };
        match printed {
            Ok(s) => print!("{s}"),
            Err(e) => {
                eprintln!("error: cannot render the decision: {e}");
                return EXIT_BAD_INPUT;
            }
        }
        if decision.chosen_cluster.is_some() {
            EXIT_OK
        } else {
            EXIT_NO_FIT
        }
    }
}
