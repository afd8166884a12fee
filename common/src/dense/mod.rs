//! The compact wire form of a summarized answer (docs/design.md §4, "Summarized answers").
//!
//! A decision of 1,000 clusters keeps about 997 summaries; written as objects, each is about
//! 1.2 KB and the decision does not fit NATS's default 1 MiB payload. In a decision's
//! `clusters`, a summarized answer ([`crate::decision::ClusterDecision::summarized`]) is
//! written as a JSON array, and so are the records inside it, each in a fixed order with
//! trailing absent values left out:
//!
//! - a summary: `[status, elapsed_ms, inventory_version, feasible, load, soft_matched,
//!   volumes, jobs, trace]`, then `holds_named_volume`, `error`, `resource_manager` and `cost`
//!   up to the last that is set; `elapsed_ms` rounded to 0.01 ms;
//! - a stage record: `[stage, subject, considered, passed, reason_counts]`, and a sixth
//!   element `omitted` only when it is not `considered - passed`;
//! - a volume pick: `[mode, provisioner, volume, action]`, then `passed` and `error` when set;
//! - a job pick: `[zone, host, soft_matched]`, then `hosts` when it is not just `[host]`, then
//!   `error` when set;
//! - in a decision holding summaries, a choice step's dropped cluster with one reason:
//!   `[candidate, code, message]` (`[candidate, message]` for the code `not_chosen`, and the
//!   name alone when its reasons are those of the cluster before it in the list), and a step after the first that dropped nothing has no
//!   `kept` (it kept what the step before kept).
//!
//! A stage record whose rejected candidates all failed with one reason code writes its
//! `reason_counts` as that code alone (`"insufficient"` for `{"insufficient": considered -
//! passed}`).
//!
//! Readers take either form for every one of these records, so a full answer, a summary and
//! every record of earlier releases read into the same types. The writers are used only for
//! summaries, so a decision of at most three clusters is written exactly as before.
//!
//! This module owns the layout; `crate::decision` owns the types and knows nothing of it:
//! - `form`: the array form's machinery (the `Dense` trait, writers, a record read in either
//!   form, the element readers);
//! - `records`: the array forms of a cluster's answer, its stage records, volume and job picks,
//!   and a dropped cluster; [`write_answer`] and [`read_answer`] for an answer on its own (an
//!   agent's plan reply);
//! - `decision`: the decision document's serde (its clusters, its choice steps compact when it
//!   holds summaries) and a choice step's reader.

mod decision;
mod form;
mod records;
#[cfg(test)]
mod tests;

pub use records::{read_answer, write_answer};
