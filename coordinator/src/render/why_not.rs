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
    use super::layout::para;
    let mut s = para("", "  ", summary);
    for b in blockers {
        s.push_str(&para(
            "  ",
            "      ",
            &format!("{} [{}] for {}:", b.candidate, b.stage, b.subject),
        ));
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
    }
    s
}
