//! `fedvol decisions watch`: the latest state of every decision, then every change as it
//! happens, until Ctrl-C: aligned lines (`table`), whole lines (`wide`) or one JSON object per
//! change; a coordinator that is busy or restarting is asked again, saying so once.

use fedvol_proto::coordinator::{self as api};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::now_ms;

use crate::cli::args::OutputArgs;
use crate::cli::ask::with_client;
use crate::cli::exit::EXIT_BAD_INPUT;
use crate::cli::net::NetArgs;
use crate::client::Client;
use crate::commands::{Leading, Run};
use crate::render::Output;
use crate::render::stored::job_line;

/// `fedvol decisions watch`.
#[derive(Debug, clap::Args)]
pub struct Watch {
    /// Output format: lines cut to fit 100 columns (`table`), in full (`wide`), or one JSON
    /// object per change (`json`; `yaml` prints the same as JSON lines).
    #[command(flatten)]
    pub output: OutputArgs,
    /// NATS connection and identity (listed last in `--help`, under their own heading).
    #[command(flatten)]
    pub net: NetArgs,
}

impl Run for Watch {
    fn leading(&mut self) -> Leading<'_> {
        Leading::Net(&mut self.net)
    }

    fn run(self) -> u8 {
        with_client(&self.net, async |client| watch(client, self.output.output).await)
    }
}

async fn watch(client: &Client, o: Output) -> u8 {
    use crate::feed::{DecisionFeed, FeedEvent};
    // The latest revision of every decision first, then every change as it happens, asked of
    // the coordinators (`changes`). The first answer must come; later failures (a coordinator
    // or NATS restarting) are said once and asked again.
    // A coordinator too busy to take the watch (`overloaded`) is ridden out: asked again after
    // a growing pause, saying so.
    let mut feed = DecisionFeed::new();
    let mut backoff = crate::feed::Backoff::new();
    loop {
        match feed.fill(client).await {
            Ok(()) => break,
            Err(e) if e.is_overloaded() => {
                let pause = backoff.next_pause();
                eprint!("{}", busy(&e, pause));
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        }
    }
    backoff.reset();
    let mut failing = false;
    // The state each decision was last seen in, to say what changed.
    let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    // A committed decision whose complete is unanswered reads `completing`, short enough
    // for the CHANGE column (`committed → completing`, `completing → completed`).
    let words = |s: &api::DecisionSummary| {
        if s.state == DecisionState::Committed && s.completing_since_ms.is_some() {
            "completing".to_string()
        } else {
            crate::render::words::listed_state(s)
        }
    };
    let table_view = matches!(o, Output::Table | Output::Wide);
    let mut page = WatchPage::default();
    loop {
        let event = feed.next(client).await;
        if event.is_ok() {
            failing = false;
            backoff.reset();
        }
        match event {
            Ok(FeedEvent::Put {
                key, summary, clusters, ..
            }) => {
                let at = crate::render::words::utc(summary.updated_ms);
                let state = words(&summary);
                let change = match seen.insert(key.clone(), state.clone()) {
                    None => "new".to_string(),
                    Some(before) if before == state => "updated".to_string(),
                    Some(before) => format!("{before} → {state}"),
                };
                let workflow = fedvol_common::limits::printable(&summary.workflow);
                let cluster = fedvol_common::limits::printable(summary.chosen_cluster.as_deref().unwrap_or("none"));
                let cluster = cluster.as_str();
                let dry = if summary.dry_run { " (dry run)" } else { "" };
                let why = watch_reason(&summary, &clusters);
                match o {
                    Output::Json | Output::Yaml => println!(
                        "{}",
                        serde_json::json!({
                            "time": at, "request_id": key, "workflow": workflow, "state": summary.state.as_str(),
                            "failure": summary.failure, "dry_run": summary.dry_run,
                            "chosen_cluster": summary.chosen_cluster,
                            "change": change, "jobs": summary.jobs, "reason": why,
                        })
                    ),
                    Output::Wide => println!("{at}  {key}  {workflow}  {state}{dry}  cluster {cluster}  ({change})"),
                    // Aligned columns: the time of day (the date on a line of its own when it
                    // changes), what changed, the cluster, then the request id, whole.
                    Output::Table => {
                        let what = match change.as_str() {
                            "new" | "updated" => format!("{change} {state}"),
                            _ => change.clone(),
                        };
                        let line = WatchLine {
                            time: at.split_once('T').map_or(at.as_str(), |(_, t)| t.trim_end_matches('Z')),
                            what: &what,
                            cluster,
                            id: &key,
                            workflow: &workflow,
                            dry_run: summary.dry_run,
                        };
                        print!("{}", page.heading(&at));
                        println!("{}", line.render(crate::render::layout::width()));
                    }
                }
                if table_view && let Some(why) = &why {
                    print!(
                        "{}",
                        crate::render::layout::para(
                            "          why: ",
                            "               ",
                            &fedvol_common::limits::printable(why)
                        )
                    );
                }
                // The jobs a cluster runs for it: each with its Slurm id, state, exit code and
                // times, indented under the decision's line.
                if table_view {
                    for j in &summary.jobs {
                        print!(
                            "{}",
                            crate::render::layout::para("          ", "            ", &job_line(j))
                        );
                    }
                }
            }
            Ok(FeedEvent::Unreadable { key, error, .. }) => println!("{key}  (unreadable value: {error})"),
            Ok(FeedEvent::Removed { key, .. }) => {
                let at = crate::render::words::utc(now_ms());
                match o {
                    Output::Table => {
                        let time = at.split_once('T').map_or(at.as_str(), |(_, t)| t.trim_end_matches('Z'));
                        print!("{}", page.heading(&at));
                        println!("{time}  {:<WATCH_WHAT$}  {:<WATCH_CLUSTER$}  {key}", "removed", "-");
                    }
                    _ => println!("{at}  {key}  removed"),
                }
                seen.remove(&key);
            }
            Err(e) if e.is_overloaded() => {
                let pause = backoff.next_pause();
                eprint!("{}", busy(&e, pause));
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                if !failing {
                    eprintln!("note: {e}; asking again every second");
                    failing = true;
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}

/// What a watch refused `overloaded` tells its user on stderr: the coordinator's reason
/// (without the failure's framing) and when it asks again, wrapped to the terminal's width.
fn busy(e: &crate::feed::FeedError, pause: std::time::Duration) -> String {
    let why = match e {
        crate::feed::FeedError::Refused { message, .. } => format!("the coordinator is busy ({message})"),
        other => other.to_string(),
    };
    crate::render::layout::para(
        "note: ",
        "  ",
        &format!("{why}; asking again in {:.1}s", pause.as_secs_f64()),
    )
}

/// Why a decision shown by `decisions watch` failed or waits: its summary's `reason` (failed
/// jobs, a refusal, a failed commit), else, for a failed decision no cluster took, what its
/// clusters answered; `None` for any other.
fn watch_reason(s: &api::DecisionSummary, clusters: &api::ClusterCounts) -> Option<String> {
    if let Some(r) = &s.reason {
        return Some(r.clone());
    }
    if s.state != DecisionState::Failed || s.chosen_cluster.is_some() {
        return None;
    }
    let silent = clusters.asked.saturating_sub(clusters.answered);
    let mut text = format!(
        "no cluster can place it: {} of {} answered, {} could place it",
        clusters.answered, clusters.asked, clusters.feasible
    );
    if silent > 0 {
        text.push_str(&format!(
            "; {silent} did not answer (`fedvol decisions show ID` says which)"
        ));
    }
    Some(text)
}

/// Width of `decisions watch`'s CHANGE column (`committed → completed` and its like).
const WATCH_WHAT: usize = 22;

/// Width of `decisions watch`'s CLUSTER column; a longer name is cut with `…` (`-o wide` has it
/// whole).
const WATCH_CLUSTER: usize = 12;

/// The lines `decisions watch` prints above its rows: the column names once, then the date
/// (UTC) whenever it differs from the row before's.
#[derive(Default)]
struct WatchPage {
    started: bool,
    date: String,
}

impl WatchPage {
    /// What comes before a row stamped `at` (RFC 3339, UTC): nothing, or the header and/or the
    /// date line.
    fn heading(&mut self, at: &str) -> String {
        let mut out = String::new();
        if !self.started {
            self.started = true;
            out.push_str(&format!(
                "{:<8}  {:<WATCH_WHAT$}  {:<WATCH_CLUSTER$}  REQUEST ID\n",
                "TIME", "CHANGE", "CLUSTER"
            ));
        }
        let date = at.split_once('T').map_or("", |(d, _)| d);
        if date != self.date {
            self.date = date.to_string();
            out.push_str(&format!("{date} (UTC)\n"));
        }
        out
    }
}

/// One row of `fedvol decisions watch` (table view).
struct WatchLine<'a> {
    /// The time of day, `HH:MM:SS` (UTC).
    time: &'a str,
    what: &'a str,
    cluster: &'a str,
    id: &'a str,
    workflow: &'a str,
    dry_run: bool,
}

impl WatchLine<'_> {
    /// The row: time, what changed and cluster in columns of fixed width (cut with `…`), then
    /// the request id whole (ids stay copyable and unambiguous whatever is stored later), then
    /// `(dry run)` and, when the id does not start with it, the workflow's name, cut to fit
    /// `width` (left out where not even 8 characters of it fit).
    fn render(&self, width: usize) -> String {
        use crate::render::layout::truncate;
        let mut line = format!(
            "{:<8}  {:<WATCH_WHAT$}  {:<WATCH_CLUSTER$}  {}",
            self.time,
            truncate(self.what, WATCH_WHAT),
            truncate(self.cluster, WATCH_CLUSTER),
            self.id
        );
        if self.dry_run {
            line.push_str("  (dry run)");
        }
        // Request ids made by fedvol start with the workflow's name; a chosen one may not.
        let stem = fedvol_proto::coordinator::request_id_for(self.workflow, "");
        if !self.id.starts_with(stem.trim_end_matches('-')) || stem.is_empty() {
            // Only where it fits (at least 8 characters of it, or all of a shorter name): the
            // id is never pushed past the width for it (`-o wide` has every name).
            let room = width.saturating_sub(line.chars().count() + "  workflow ".len());
            if room >= self.workflow.chars().count().min(8) {
                line.push_str(&format!("  workflow {}", truncate(self.workflow, room)));
            }
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::{WatchLine, WatchPage};

    /// Rows of `decisions watch` line up whatever their ids and names, and every id is shown
    /// whole: a start that is unique now may be shared by a later id.
    #[test]
    fn watch_rows_are_aligned_and_keep_every_id_whole() {
        let row = |what: &'static str, cluster: &'static str, id: &'static str, workflow: &'static str| WatchLine {
            time: "23:00:00",
            what,
            cluster,
            id,
            workflow,
            dry_run: false,
        };
        let rows = [
            row(
                "new committed",
                "cluster-a",
                "gpu-soft-constraints-vsmvA1b2c3d4e5f6g7h8",
                "gpu-soft-constraints",
            ),
            row(
                "committed → completed",
                "cluster-b",
                "mpi-spread-ppQ8KANJ8stpBDwKaaaaa",
                "mpi-spread",
            ),
            row("new failed", "none", "x-1", "train"),
            row(
                "new committed",
                "a-cluster-with-a-long-name",
                "scratch-fast-Q",
                "scratch-fast",
            ),
        ];
        let lines: Vec<String> = rows.iter().map(|r| r.render(100)).collect();
        let at = |l: &str, id: &str| l.find(id).map(|i| l[..i].chars().count());
        let col = at(&lines[0], rows[0].id).unwrap();
        for (l, r) in lines.iter().zip(&rows) {
            assert_eq!(
                at(l, r.id),
                Some(col),
                "the id column is aligned:\n{}",
                lines.join("\n")
            );
            assert!(l.chars().count() <= 100, "{l}");
        }
        assert!(
            lines[1].contains("committed → completed") && lines[1].contains(" cluster-b "),
            "{}",
            lines[1]
        );
        assert!(lines[3].contains("a-cluster-w…"), "{}", lines[3]);
        // An id that does not name its workflow is followed by the workflow's name, where it fits.
        assert!(lines[2].ends_with("x-1  workflow train"), "{}", lines[2]);
        let long = row(
            "new committed",
            "big",
            "a-rather-long-request-id-for-the-prefix-test-0001",
            "wf",
        )
        .render(100);
        assert!(long.ends_with("-0001"), "{long}");
        assert!(!lines[0].contains("workflow gpu"), "{}", lines[0]);
        let mut page = WatchPage::default();
        let first = page.heading("2026-11-25T23:00:00Z");
        assert!(
            first.starts_with("TIME      CHANGE") && first.ends_with("2026-11-25 (UTC)\n"),
            "{first}"
        );
        assert_eq!(page.heading("2026-11-25T23:59:59Z"), "");
        assert_eq!(page.heading("2026-11-26T00:00:01Z"), "2026-11-26 (UTC)\n");
        let header = first.lines().next().unwrap();
        assert_eq!(header.find("REQUEST ID"), Some(col), "{header}\n{}", lines[0]);
    }
}
