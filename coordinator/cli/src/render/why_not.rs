//! The human view of a why-not explanation ([`fedvol_common::funnel::why_not`]), the same for
//! `fedvol why-not` (asked of a cluster's agent) and `fedvol plan --why-not-*` (offline).

use fedvol_common::funnel::why_not::Blocker;

/// The summary line, then each blocking stage with every reason and its hint:
///
/// ```text
/// host node-1: blocked at host.capacity for train (needs 64 GiB memory, 32 GiB free)
///   cluster-c/node-1 [host.capacity] for train:
///     - needs 64 GiB memory, 32 GiB free (capacity)
///     hint: ...
/// ```
/// Lines are wrapped to the terminal's width ([`super::layout::para`]).
pub fn render(summary: &str, blockers: &[Blocker]) -> String {
    let mut s = super::layout::para("", "  ", summary);
    for b in blockers {
        s.push_str(&blocker(
            &format!("{} [{}] for {}:", b.candidate, b.stage, b.subject),
            b,
        ));
    }
    s
}

/// One blocker under `heading`: each reason with its code, then its hint when it has one.
fn blocker(heading: &str, b: &Blocker) -> String {
    use super::layout::para;
    let mut s = para("  ", "      ", heading);
    for reason in &b.reasons {
        s.push_str(&para(
            "    - ",
            "      ",
            &format!("{} ({})", reason.message, reason.code),
        ));
    }
    if let Some(h) = &b.hint {
        s.push_str(&para("    hint: ", "      ", h));
    }
    s
}

/// `fedvol why-not`: the decision as it was made (the stored record), then
/// today's re-plan, saying whether it ran on the inventory the decision was made on.
pub fn render_reply(r: &fedvol_proto::agent::WhyNotReply) -> String {
    use super::layout::para;
    let mut s = String::new();
    let Some(rec) = &r.record else {
        // An answer without the record (an earlier coordinator): today's re-plan only.
        return render(&r.summary, &r.blockers);
    };
    let version = rec.inventory_version.as_deref().unwrap_or("unknown");
    s.push_str(&format!(
        "as decided (the stored decision; cluster {} on inventory {version}):\n",
        r.cluster
    ));
    s.push_str(&para("  ", "    ", &rec.summary));
    for b in &rec.blockers {
        s.push_str(&blocker(
            &format!("{} [{}] for {}:", b.candidate, b.stage, b.subject),
            b,
        ));
    }
    if let Some(b) = &rec.cluster_choice {
        s.push_str(&blocker(&format!("cluster {} [{}]:", b.candidate, b.stage), b));
    }
    if !rec.unlisted_stages.is_empty() {
        s.push_str(&para(
            "  ",
            "    ",
            &format!(
                "the record lists a few rejections per stage (--trace-limit); these stages omitted some without naming it: {}",
                rec.unlisted_stages.join(", ")
            ),
        ));
    }
    s.push('\n');
    let same = r.inventory_version.is_some() && r.inventory_version == rec.inventory_version;
    let heading = match (&r.inventory_version, same) {
        (None, _) => "today:".to_string(),
        (Some(v), true) => {
            format!("today (re-planned on inventory {v}, the decision's; holds and commits may have changed since):")
        }
        (Some(v), false) => format!(
            "today (re-planned on inventory {v}; the decision's was {version}: the cluster changed since, so this is not the decision's answer):"
        ),
    };
    let key = |b: &fedvol_common::funnel::why_not::Blocker| {
        (
            b.stage.clone(),
            b.candidate.clone(),
            b.subject.clone(),
            b.reasons.clone(),
        )
    };
    let unchanged = same
        && !r.blockers.is_empty()
        && r.blockers.iter().map(key).collect::<Vec<_>>() == rec.blockers.iter().map(key).collect::<Vec<_>>();
    if unchanged {
        s.push_str(&para(
            "",
            "  ",
            &format!("{heading} the same stages reject it, for the same reasons"),
        ));
        return s;
    }
    s.push_str(&para("", "  ", &heading));
    for line in render(&r.summary, &r.blockers).lines() {
        s.push_str(&format!("  {line}\n"));
    }
    s
}
