//! `fedvol-bench`: the federated fan-out benchmark.
//!
//! It starts nats-server, a coordinator and N agents as real processes on generated
//! inventories ([`inventory`]: H hosts, P provisioners, V existing volumes per cluster), then
//! drives a closed loop ([`driver`]) with a fixed number of requests in flight in three modes:
//!
//! - `plan`: a dry-run submit of the benchmark workflow ([`workflow`]): fan-out to every
//!   cluster, gather, cluster choice, the decision answered (a dry run is not stored unless
//!   it asks to be kept);
//! - `submit`: the same, then the decision stored (`planned`), the commit on the chosen cluster
//!   (which plans again under its lock; a real hostpath `mkdir`), and the decision stored
//!   again (decisions are not completed: the hosts are big enough, see [`inventory`]);
//! - `raw`: the limit of the transport ([`raw`]): a scatter-gather with the coordinator's real
//!   plan-broadcast body to N trivial responders through the same server, collecting N answers
//!   as large as real agent answers.
//!
//! For each it prints throughput, latency p50/p90/p99/max, errors by kind, CPU time per request
//! of every process and their peak RSS ([`procs`], [`report`]), and the ratio fedvol/raw.
//! `sweep` runs the benchmark grid (clusters 1, 4, 16, 64 × hosts 100, 1k, 10k × 1 and 64 in
//! flight) and writes `bench-results/` (`results.jsonl`, `tables.md`, SVG plots, [`plot`]);
//! `smoke` is CI's short form ([`run::smoke`]). `what-if` records many decisions and times
//! `fedvol what-if` on them ([`what_if`]).
//!
//! **Multi-agent mode.** Up to 8 clusters every agent is its own `fedvol-agent` process. Above
//! 8, by default, the agents run in 2 processes of `fedvol-bench agents` (a hidden subcommand),
//! each hosting half of the clusters: one tokio runtime, and per cluster exactly what
//! `fedvol-agent` runs (`fedvol_agent::run::run`), each with its own NATS connection, queue
//! group, heartbeat and redb state ([`agents`]). `--agent-processes N` overrides the grouping
//! (N = clusters forces one process per cluster). The raw responders are grouped the same way.
//!
//! The fedvol binaries are those of the benchmark's own cargo profile ([`crate::bin_path`]:
//! `cargo run --release -p fedvol-tests --bin fedvol-bench` uses `target/release/`), logging
//! at `warn`.

pub mod agents;
pub mod driver;
pub mod fedvol;
pub mod idle;
pub mod inventory;
pub mod plot;
pub mod procs;
pub mod raw;
pub mod report;
pub mod run;
pub mod timeline;
pub mod what_if;
pub mod workflow;
