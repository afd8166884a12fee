//! The cluster-choice options `fedvol plan` and `fedvol submit` share:
//! `--prefer-cost` runs the `cost` rule (cheapest estimated cluster first), `--cost-hours H`
//! sets the hours counted when no job of the workflow declares `policy.timeout.execute`.

use fedvol_common::choice::{ChoiceOptions, check_hours};

/// `--prefer-cost` and `--cost-hours`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ChoiceArgs {
    /// Prefer the cluster with the lowest estimated cost (the `cost` step, after soft
    /// constraints and before least loaded): storage by the provisioners' costPerGbHour, hosts by
    /// the zones' hostCostPerHour, for the jobs' declared timeouts.
    #[arg(long)]
    pub prefer_cost: bool,
    /// With --prefer-cost: hours counted when no job declares a timeout (default: the
    /// coordinator's defaultHours for submit, 1 for plan).
    #[arg(long, value_name = "HOURS", requires = "prefer_cost", value_parser = parse_hours)]
    pub cost_hours: Option<f64>,
}

impl ChoiceArgs {
    /// The options to send: `None` without `--prefer-cost` (the coordinator's configuration
    /// applies to a submit; `fedvol plan` runs without the `cost` step).
    pub fn options(&self) -> Option<ChoiceOptions> {
        self.prefer_cost.then_some(ChoiceOptions {
            cost: true,
            default_hours: self.cost_hours,
        })
    }
}

/// Parses `--cost-hours`: a number > 0 and at most [`fedvol_common::choice::MAX_HOURS`].
fn parse_hours(s: &str) -> Result<f64, String> {
    let h: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of hours"))?;
    check_hours(h)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_are_checked() {
        assert_eq!(parse_hours("2.5"), Ok(2.5));
        assert!(parse_hours("0").unwrap_err().contains("> 0"));
        assert!(parse_hours("-1").is_err());
        assert!(parse_hours("inf").is_err());
        assert!(parse_hours("two").unwrap_err().contains("not a number"));
    }
}
