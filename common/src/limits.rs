//! Input limits (docs/design.md §7: bad input of any size gets a clear error and changes nothing).
//!
//! The same checks run where a file is parsed (positioned diagnostics) and where a body
//! arrives over NATS (the coordinator's submit, the agent's plan), since a client need not use
//! fedvol's parser. Bounds that Kubernetes also enforces use Kubernetes' numbers, so every
//! manifest the API server accepts is accepted here.

use std::collections::BTreeMap;

use crate::model::{Inventory, Origin, VolumeSource, Workflow};

/// Longest name in bytes: workflows, volumes, jobs, projects, provisioners, zones, hosts,
/// clusters and users (a DNS subdomain's bound).
pub const MAX_NAME_BYTES: usize = 253;
/// Most volumes in one workflow.
pub const MAX_WORKFLOW_VOLUMES: usize = 1000;
/// Most jobs (jobs and services together) in one workflow.
pub const MAX_WORKFLOW_JOBS: usize = 1000;
/// Longest annotation key in bytes: a Kubernetes qualified name's maximum (a 253-byte DNS
/// prefix, `/`, a 63-byte name).
pub const MAX_ANNOTATION_KEY_BYTES: usize = 317;
/// Most bytes of all annotations (keys plus values) of one object, Kubernetes' own limit
/// (256 KiB).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// Most provisioners (and storage classes) in one inventory.
pub const MAX_PROVISIONERS: usize = 10_000;
/// Most persistent volumes in one inventory.
pub const MAX_VOLUMES: usize = 100_000;
/// Most zones in one inventory.
pub const MAX_ZONES: usize = 10_000;
/// Most hosts in one inventory (all zones together).
pub const MAX_HOSTS: usize = 100_000;
/// Most projects in one inventory.
pub const MAX_PROJECTS: usize = 10_000;

/// One limit a value breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file of the offending item when it is not the main file read (an `include:`d
    /// manifest); empty otherwise.
    pub file: String,
    /// 1-based line of the offending item in its file, when known (0 otherwise).
    pub line: usize,
    /// Field path (`volumes.scratch.annotations`).
    pub field: String,
    /// What is wrong and what the limit is.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// True for a NATS subject token as fedvol uses them for cluster and user names: 1 to
/// [`MAX_NAME_BYTES`] ASCII letters, digits, `-` and `_`.
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_BYTES && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// A user name that is not a subject token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "user name `{0}` is not valid: use 1 to {MAX_NAME_BYTES} letters, digits, `-` and `_` (it is a NATS subject token, and must equal your NATS user)"
)]
pub struct InvalidUser(
    /// The name, cut to 80 characters.
    pub String,
);

/// Checks a user name (the identity token of `<prefix>.coordinator.<op>.<user>`).
///
/// Errors: [`InvalidUser`], naming the user (cut to 80 characters) and the allowed characters.
pub fn check_user(user: &str) -> Result<(), InvalidUser> {
    if is_token(user) {
        return Ok(());
    }
    Err(InvalidUser(user.chars().take(80).collect()))
}

fn name_problem(line: usize, field: &str, what: &str, name: &str) -> Option<Problem> {
    let problem = |message: String| Problem {
        file: String::new(),
        line,
        field: printable(field),
        message,
    };
    if name.len() > MAX_NAME_BYTES {
        return Some(problem(format!(
            "{what} name of {} bytes is longer than the limit of {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    // A name with a NUL or a newline breaks log lines and tables, and one with a bidirectional
    // control or an invisible character shows as another name (Unicode TR #36 §2.1 "Bidirectional
    // text spoofing", TR #39 §3.1 identifier profiles exclude Default_Ignorable_Code_Point):
    // names are visible text.
    let (at, c) = name.chars().enumerate().find(|(_, c)| !visible(*c))?;
    Some(problem(format!(
        "{what} name `{}` contains {} at character {}; names are visible text (no control, bidirectional-control or invisible characters: Unicode TR #36, TR #39)",
        printable(name),
        describe(c),
        at + 1
    )))
}

/// True for a character a name may hold: not a control (C0, C1: general category Cc), not a
/// line or paragraph separator (U+2028, U+2029), not a bidirectional control and not another
/// Default_Ignorable_Code_Point (see [`is_hidden`]).
pub fn visible(c: char) -> bool {
    !(c.is_control() || is_hidden(c))
}

/// True for the characters that are not shown, or that reorder or break the text around them:
/// the bidirectional controls of Unicode TR #36 §2.1 and UAX #9 (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069), zero-width characters (U+200B–U+200D, U+2060, U+FEFF), every
/// other Default_Ignorable_Code_Point of Unicode's DerivedCoreProperties.txt (soft hyphen,
/// variation selectors, Hangul fillers, tags...), and the line and paragraph separators U+2028
/// and U+2029 (a line break in a log line or a table).
pub fn is_hidden(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// `U+202E (right-to-left override, a bidirectional control)` and the like: the code point and
/// what it is, for messages.
pub fn describe(c: char) -> String {
    let what = match u32::from(c) {
        0x061C => "arabic letter mark, a bidirectional control",
        0x200E => "left-to-right mark, a bidirectional control",
        0x200F => "right-to-left mark, a bidirectional control",
        0x202A => "left-to-right embedding, a bidirectional control",
        0x202B => "right-to-left embedding, a bidirectional control",
        0x202C => "pop directional formatting, a bidirectional control",
        0x202D => "left-to-right override, a bidirectional control",
        0x202E => "right-to-left override, a bidirectional control",
        0x2066 => "left-to-right isolate, a bidirectional control",
        0x2067 => "right-to-left isolate, a bidirectional control",
        0x2068 => "first strong isolate, a bidirectional control",
        0x2069 => "pop directional isolate, a bidirectional control",
        0x200B => "zero width space, invisible",
        0x200C => "zero width non-joiner, invisible",
        0x200D => "zero width joiner, invisible",
        0x2060 => "word joiner, invisible",
        0xFEFF => "zero width no-break space, invisible",
        0x2028 => "line separator",
        0x2029 => "paragraph separator",
        _ if c.is_control() => "a control character",
        _ => "a default-ignorable (invisible) character",
    };
    format!("U+{:04X} ({what})", u32::from(c))
}

/// `text` with every character that is not [visible](visible) written as an escape (`\n`,
/// `\u{1b}`, `\u{202e}`), for logs, tables, pages and messages: a name or any other text a user
/// gave never breaks a line, drives a terminal (ESC sequences) or reorders what is printed
/// around it (bidirectional controls, Unicode TR #36 §2.1). Text stored before names were
/// checked is shown this way too.
pub fn printable(text: &str) -> String {
    if text.chars().all(visible) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if visible(c) {
                c.to_string()
            } else {
                c.escape_default().to_string()
            }
        })
        .collect()
}

/// `text` (a whole rendered table or page, many lines) with every character that is not
/// [visible](visible) escaped as [`printable`] does, but its line feeds and tabs kept: what a
/// name stored before names were checked may hold never reaches a terminal or a page raw.
pub fn printable_lines(text: &str) -> String {
    if text.chars().all(|c| visible(c) || c == '\n' || c == '\t') {
        return text.to_string();
    }
    text.split('\n')
        .map(|line| line.split('\t').map(printable).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Problems of one annotation map: keys over [`MAX_ANNOTATION_KEY_BYTES`], and all keys plus
/// values over [`MAX_ANNOTATIONS_BYTES`].
pub fn annotation_problems(line: usize, field: &str, annotations: &BTreeMap<String, String>) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations {
        total = total.saturating_add(k.len()).saturating_add(v.len());
        if k.len() > MAX_ANNOTATION_KEY_BYTES {
            out.push(Problem {
                file: String::new(),
                line,
                field: field.to_string(),
                message: format!(
                    "annotation key `{}…` is {} bytes, longer than the limit of {MAX_ANNOTATION_KEY_BYTES}",
                    k.chars().take(40).collect::<String>(),
                    k.len()
                ),
            });
        }
    }
    if total > MAX_ANNOTATIONS_BYTES {
        out.push(Problem {
            file: String::new(),
            line,
            field: field.to_string(),
            message: format!(
                "annotations total {total} bytes (keys and values), more than the limit of {MAX_ANNOTATIONS_BYTES}"
            ),
        });
    }
    out
}

fn count_problem(line: usize, field: &str, what: &str, n: usize, max: usize) -> Option<Problem> {
    (n > max).then(|| Problem {
        file: String::new(),
        line,
        field: field.to_string(),
        message: format!("{n} {what}, more than the limit of {max}"),
    })
}

/// Every limit `w` breaks: volume and job counts, name lengths (workflow, volumes, jobs,
/// project, named provisioners and volumes, preferred clusters) and annotation sizes. Lines
/// come from the volume and job positions the parser recorded.
pub fn workflow_problems(w: &Workflow) -> Vec<Problem> {
    let mut out = Vec::new();
    let first_line = |i: usize, lines: &[usize]| lines.get(i).copied().unwrap_or(0);
    let vlines: Vec<usize> = w.volumes.iter().map(|v| v.line).collect();
    let jlines: Vec<usize> = w.jobs.iter().map(|j| j.line).collect();
    out.extend(count_problem(
        first_line(MAX_WORKFLOW_VOLUMES, &vlines),
        "volumes",
        "volumes",
        w.volumes.len(),
        MAX_WORKFLOW_VOLUMES,
    ));
    out.extend(count_problem(
        first_line(MAX_WORKFLOW_JOBS, &jlines),
        "jobs",
        "jobs and services",
        w.jobs.len(),
        MAX_WORKFLOW_JOBS,
    ));
    out.extend(name_problem(0, "", "workflow", &w.name));
    if let Some(p) = &w.project {
        out.extend(name_problem(0, "project", "project", p));
    }
    for c in &w.clusters {
        out.extend(name_problem(0, "clusters", "cluster", c));
    }
    out.extend(annotation_problems(0, "annotations", &w.annotations));
    for v in w.volumes.iter().take(MAX_WORKFLOW_VOLUMES + 1) {
        let field = format!("volumes.{}", v.key.chars().take(64).collect::<String>());
        out.extend(name_problem(v.line, &field, "volume", &v.key));
        match &v.source {
            VolumeSource::Fuzzball(f) => {
                for n in [&f.use_, &f.name].into_iter().flatten() {
                    out.extend(name_problem(v.line, &field, "provisioner or volume", n));
                }
                out.extend(annotation_problems(
                    v.line,
                    &format!("{field}.annotations"),
                    &f.annotations,
                ));
            }
            VolumeSource::Claim(c) => {
                for n in [&c.name, &c.namespace] {
                    out.extend(name_problem(v.line, &field, "claim", n));
                }
            }
        }
    }
    for j in w.jobs.iter().take(MAX_WORKFLOW_JOBS + 1) {
        let field = format!("jobs.{}", j.name.chars().take(64).collect::<String>());
        out.extend(name_problem(j.line, &field, "job", &j.name));
        out.extend(annotation_problems(
            j.line,
            &format!("{field}.resource.annotations"),
            &j.resources.annotations,
        ));
    }
    out
}

/// Every limit `inv` breaks: counts of provisioners, volumes, zones, hosts and projects, the
/// cluster name (a token of at most [`MAX_NAME_BYTES`]) and annotation sizes of provisioners
/// and volumes. Lines are the offending item's `origin` line where the model keeps one.
pub fn inventory_problems(inv: &Inventory) -> Vec<Problem> {
    let mut out = Vec::new();
    if !is_token(&inv.cluster) {
        out.push(Problem {
            file: String::new(),
            line: 0,
            field: "cluster".into(),
            message: format!(
                "cluster name of {} bytes is not a NATS subject token of at most {MAX_NAME_BYTES} letters, digits, `-` and `_`",
                inv.cluster.len()
            ),
        });
    }
    let line_of_provisioner = |i: usize| inv.provisioners.get(i).map_or(0, |p| p.origin.line);
    let line_of_volume = |i: usize| inv.volumes.get(i).map_or(0, |v| v.origin.line);
    let line_of_zone = |i: usize| inv.zones.get(i).map_or(0, |z| z.origin.line);
    out.extend(count_problem(
        line_of_provisioner(MAX_PROVISIONERS),
        "provisioners",
        "provisioners",
        inv.provisioners.len(),
        MAX_PROVISIONERS,
    ));
    out.extend(count_problem(
        line_of_volume(MAX_VOLUMES),
        "volumes",
        "persistent volumes",
        inv.volumes.len(),
        MAX_VOLUMES,
    ));
    out.extend(count_problem(
        line_of_zone(MAX_ZONES),
        "zones",
        "zones",
        inv.zones.len(),
        MAX_ZONES,
    ));
    out.extend(count_problem(
        0,
        "projects",
        "projects",
        inv.projects.len(),
        MAX_PROJECTS,
    ));
    let hosts: usize = inv.zones.iter().map(|z| z.hosts.len()).sum();
    out.extend(count_problem(0, "zones.*.hosts", "hosts", hosts, MAX_HOSTS));
    for p in inv.provisioners.iter().take(MAX_PROVISIONERS + 1) {
        out.extend(annotations_of("provisioners", &p.name, &p.origin, &p.annotations));
    }
    for v in inv.volumes.iter().take(MAX_VOLUMES + 1) {
        out.extend(annotations_of("volumes", &v.name, &v.origin, &v.annotations));
    }
    out
}

/// [`annotation_problems`] of the inventory entry `name` listed under `list` (`provisioners`,
/// `volumes`), placed at its line in its own file (an entry may come from an included file).
fn annotations_of(list: &str, name: &str, origin: &Origin, annotations: &BTreeMap<String, String>) -> Vec<Problem> {
    let mut out = annotation_problems(origin.line, &format!("{list}.{name}.annotations"), annotations);
    for p in &mut out {
        p.file = origin.file.clone();
    }
    out
}

/// The problems as one line each, for a wire error message.
pub fn join_problems(problems: &[Problem]) -> String {
    problems.iter().map(Problem::to_string).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_user_names() {
        assert!(is_token("cluster-a_1"));
        for bad in ["", "a.b", "a b", "a*", ">", "é", &"x".repeat(254)] {
            assert!(!is_token(bad), "{bad:?}");
        }
        assert!(check_user("alice").is_ok());
        let e = check_user("alice.smith").unwrap_err().to_string();
        assert!(
            e.contains("`alice.smith` is not valid") && e.contains("letters, digits"),
            "{e}"
        );
    }

    #[test]
    fn annotation_total_follows_kubernetes() {
        let mut a = BTreeMap::new();
        a.insert("big".to_string(), "x".repeat(MAX_ANNOTATIONS_BYTES - 3));
        assert!(annotation_problems(1, "a", &a).is_empty(), "exactly the limit passes");
        a.insert("more".to_string(), "y".into());
        let p = annotation_problems(1, "a", &a);
        assert!(p[0].message.contains("more than the limit of 262144"), "{p:?}");
    }
}
