//! The submit path as a time line: where a submit's time goes inside the coordinator, read from
//! the coordinator's own Prometheus histograms (`/metrics`) before and after a measured window.
//! The difference of each histogram's `_sum` and `_count` gives its mean per submit over the
//! window: the whole submit as the coordinator served it, the fan-out and gather
//! (`plan_duration`), the two writes to the decision bucket (`kv_write_duration{op="create"}`,
//! the `planned` record; `{op="update"}`, the outcome), the commit on the chosen cluster
//! (`commit_duration`), and the rest (the request id's lookup when there is one, admission,
//! choosing, encoding, answering). Each `fedvol-agent` process's `/metrics` adds the agents'
//! own view: a plan (`cluster_plan`) and the commit as the agent served them, from arrival to
//! answer (the coordinator's commit less the agent's is NATS and the coordinator's own work).
//! The driver's own p50 adds the client's leg.

use std::net::SocketAddr;

/// The histograms read, each as (label shown, metric name with its labels).
const PHASES: [(&str, &str); 5] = [
    (
        "submit",
        "fedvol_coordinator_request_duration_seconds{endpoint=\"submit\"}",
    ),
    ("plan (fan-out, gather)", "fedvol_coordinator_plan_duration_seconds"),
    (
        "store planned (create)",
        "fedvol_coordinator_kv_write_duration_seconds{op=\"create\"}",
    ),
    ("commit (chosen cluster)", "fedvol_coordinator_commit_duration_seconds"),
    (
        "store outcome (update)",
        "fedvol_coordinator_kv_write_duration_seconds{op=\"update\"}",
    ),
];

/// The agents' histograms read, the same way: (label shown, metric). Summed over the agents.
const AGENT_PHASES: [(&str, &str); 2] = [
    (
        "agents' plan (each)",
        "fedvol_agent_request_duration_seconds{endpoint=\"cluster_plan\"}",
    ),
    (
        "agent's commit",
        "fedvol_agent_request_duration_seconds{endpoint=\"commit\"}",
    ),
];

/// One reading of every phase: (sum in seconds, count) in the order of [`PHASES`], then of
/// [`AGENT_PHASES`] summed over the agents read.
#[derive(Debug, Clone, Default)]
pub struct Reading(Vec<(f64, f64)>);

/// The sum of the samples of `name` in the exposition `text` whose labels include `label`
/// (`key="value"`; empty: any).
fn sample(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => r.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            labels
                .split(',')
                .any(|l| label.is_empty() || l == label)
                .then(|| value.trim().parse::<f64>().ok())?
        })
        .sum()
}

/// Every phase's (sum, count) in the exposition `text`.
pub fn parse(text: &str) -> Reading {
    parse_of(&PHASES, text)
}

fn parse_of(phases: &[(&str, &str)], text: &str) -> Reading {
    Reading(
        phases
            .iter()
            .map(|(_, metric)| {
                let (name, label) = metric
                    .split_once('{')
                    .map_or((*metric, ""), |(n, l)| (n, l.trim_end_matches('}')));
                let of = |suffix: &str| sample(text, &format!("{name}{suffix}"), label);
                (of("_sum"), of("_count"))
            })
            .collect(),
    )
}

async fn metrics(addr: SocketAddr) -> Result<String, String> {
    let (status, body) = crate::http::get(addr, "/metrics").await?;
    if status != 200 {
        return Err(format!("/metrics of {addr} answered {status}"));
    }
    Ok(body)
}

/// Reads the coordinator's histograms at `coordinator`, and the agents' at `agents` (summed).
///
/// Errors: a `/metrics` did not answer 200 (a sentence).
pub async fn read(coordinator: SocketAddr, agents: &[SocketAddr]) -> Result<Reading, String> {
    let mut all = parse(&metrics(coordinator).await?).0;
    let mut summed = vec![(0.0, 0.0); AGENT_PHASES.len()];
    for a in agents {
        for (acc, (s, c)) in summed.iter_mut().zip(parse_of(&AGENT_PHASES, &metrics(*a).await?).0) {
            acc.0 += s;
            acc.1 += c;
        }
    }
    all.extend(summed);
    Ok(Reading(all))
}

/// The time line between two readings: each phase's mean in ms per occurrence and how many
/// occurred, then what the coordinator spent outside them. Empty when no submit was served.
pub fn render(before: &Reading, after: &Reading) -> String {
    let means: Vec<(f64, f64)> = before
        .0
        .iter()
        .zip(&after.0)
        .map(|((s0, c0), (s1, c1))| {
            let n = c1 - c0;
            (if n > 0.0 { (s1 - s0) * 1000.0 / n } else { 0.0 }, n)
        })
        .collect();
    let Some(&(total, submits)) = means.first() else {
        return String::new();
    };
    if submits <= 0.0 {
        return String::new();
    }
    let mut out = format!(
        "submit time line (the coordinator's histograms, mean over {submits:.0} submits): {total:.2} ms in all\n"
    );
    let mut inside = 0.0;
    for ((label, _), (mean, n)) in PHASES.iter().zip(&means).skip(1).take(PHASES.len() - 1) {
        // A phase that not every submit has (a failed plan stores no outcome) is weighted by
        // how often it occurred.
        let per_submit = mean * n / submits;
        inside += per_submit;
        out.push_str(&format!(
            "  {label:<26} {per_submit:>7.2} ms  ({n:.0} × {mean:.2} ms)\n"
        ));
    }
    out.push_str(&format!(
        "  {:<26} {:>7.2} ms  (lookup, admission, choice, encoding, answer)\n",
        "the rest",
        total - inside
    ));
    // The agents' own view: each plan as an agent served it, and the commit on the chosen
    // cluster (the coordinator's commit less this is NATS and the coordinator's own work).
    for ((label, _), (mean, n)) in AGENT_PHASES.iter().zip(means.iter().skip(PHASES.len())) {
        if *n > 0.0 {
            out.push_str(&format!(
                "  {label:<26} {mean:>7.2} ms  ({n:.0} served, in the agents)\n"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_line_is_the_difference_of_two_readings() {
        let text = |s: f64, c: f64| {
            format!(
                "fedvol_coordinator_request_duration_seconds_sum{{endpoint=\"submit\"}} {}\n\
                 fedvol_coordinator_request_duration_seconds_count{{endpoint=\"submit\"}} {c}\n\
                 fedvol_coordinator_request_duration_seconds_sum{{endpoint=\"list\"}} 99\n\
                 fedvol_coordinator_plan_duration_seconds_sum {}\n\
                 fedvol_coordinator_plan_duration_seconds_count {c}\n\
                 fedvol_coordinator_kv_write_duration_seconds_sum{{op=\"create\"}} {}\n\
                 fedvol_coordinator_kv_write_duration_seconds_count{{op=\"create\"}} {c}\n\
                 fedvol_agent_request_duration_seconds_sum{{cluster=\"c00\",endpoint=\"commit\"}} {}\n\
                 fedvol_agent_request_duration_seconds_count{{cluster=\"c00\",endpoint=\"commit\"}} {c}\n",
                s * 0.010,
                s * 0.004,
                s * 0.001,
                s * 0.002
            )
        };
        let reading = |s: f64, c: f64| {
            let t = text(s, c);
            let mut r = parse(&t);
            r.0.extend(parse_of(&AGENT_PHASES, &t).0);
            r
        };
        let shown = render(&reading(10.0, 10.0), &reading(30.0, 30.0));
        let words = shown.split_whitespace().collect::<Vec<_>>().join(" ");
        for line in [
            "mean over 20 submits): 10.00 ms in all",
            "plan (fan-out, gather) 4.00 ms (20 × 4.00 ms)",
            "store planned (create) 1.00 ms",
            "commit (chosen cluster) 0.00 ms (0 × 0.00 ms)",
            "the rest 5.00 ms",
            "agent's commit 2.00 ms (20 served, in the agents)",
        ] {
            assert!(words.contains(line), "{line:?} in\n{shown}");
        }
        assert!(!words.contains("agents' plan"), "no plan served, none shown:\n{shown}");
        assert!(render(&reading(1.0, 1.0), &reading(1.0, 1.0)).is_empty());
    }
}
