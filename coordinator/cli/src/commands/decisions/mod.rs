//! `fedvol decisions list | show | watch | replay | count`: the stored decisions, one command each.

pub mod count;
pub mod list;
pub mod replay;
pub mod show;
pub mod watch;

super::commands! {
    /// `fedvol decisions ...`.
    #[derive(Debug, clap::Subcommand)]
    pub enum Decisions {
        /// Stored decisions, newest first.
        List(list::List),
        /// One decision: per-cluster table, then each cluster's failed stages with every reason.
        Show(show::Show),
        /// Print the latest state of every decision, then every change as it happens (Ctrl-C to stop).
        Watch(watch::Watch),
        /// Re-run a stored request with its seed and say whether the answer is identical.
        Replay(replay::Replay),
        /// How many stored decisions are in each state, in all and per chosen cluster.
        Count(count::Count),
    }
}
