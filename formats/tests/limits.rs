//! Tests of input limits on parsed workflows (`fedvol_common::limits`). They live in this crate because the core crate does
//! not depend on the file readers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fedvol_common::limits::*;
use fedvol_common::model::Workflow;
use fedvol_formats::parse_workflow_str;

fn workflow(text: &str) -> Workflow {
    parse_workflow_str("w.yaml", "w", text).unwrap().value
}

/// A name with a NUL and a newline, sent over NATS by a client that does not
/// use fedvol's parser, broke log lines and was printed raw; every name is checked.
#[test]
fn control_characters_in_names_are_refused_and_escaped_in_messages() {
    let mut w =
        workflow("version: v4\nvolumes:\n  a: {size: 1GiB}\njobs:\n  j: {image: {uri: docker://x}, mounts: {/a: a}}\n");
    w.name = "evil\0name\nINFO forged line".into();
    w.jobs[0].name = "j\u{1b}[31m".into();
    let problems = workflow_problems(&w);
    assert_eq!(problems.len(), 2, "{problems:?}");
    let text = join_problems(&problems);
    assert!(text.contains("U+0000") && text.contains("U+001B"), "{text}");
    assert!(!text.chars().any(char::is_control), "messages are printable: {text:?}");
    assert_eq!(printable("a\nb\0"), "a\\nb\\u{0}");
    assert_eq!(printable("plain"), "plain");
}

/// Unicode TR #36 §2.1 (bidirectional text spoofing) and TR #39 §3.1 (identifiers exclude
/// Default_Ignorable_Code_Point): a name with a bidirectional control or an invisible
/// character is refused naming the code point; every such character is escaped when printed.
#[test]
fn bidi_controls_and_invisible_characters_in_names_are_refused_and_escaped() {
    for c in [
        '\u{202A}',
        '\u{202E}',
        '\u{2066}',
        '\u{2069}',
        '\u{200E}',
        '\u{200F}',
        '\u{061C}',
        '\u{200B}',
        '\u{200D}',
        '\u{2060}',
        '\u{FEFF}',
        '\u{00AD}',
        '\u{FE0F}',
        '\u{E0041}',
        '\u{2028}',
        '\u{85}',
    ] {
        assert!(!visible(c), "{:04X}", u32::from(c));
        let mut w = workflow(
            "version: v4\nvolumes:\n  a: {size: 1GiB}\njobs:\n  j: {image: {uri: docker://x}, mounts: {/a: a}}\n",
        );
        w.jobs[0].name = format!("train{c}gpj.exe");
        let problems = workflow_problems(&w);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let text = problems[0].to_string();
        assert!(text.contains(&format!("U+{:04X}", u32::from(c))), "{text}");
        assert!(text.contains("at character 6"), "{text}");
        assert!(text.chars().all(visible), "the message is visible text: {text:?}");
    }
    let p = workflow_problems(&{
        let mut w = workflow(
            "version: v4\nvolumes:\n  a: {size: 1GiB}\njobs:\n  j: {image: {uri: docker://x}, mounts: {/a: a}}\n",
        );
        w.name = "invoice\u{202E}fdp.exe".into();
        w
    });
    assert!(
        p[0].message
            .contains("U+202E (right-to-left override, a bidirectional control)"),
        "{p:?}"
    );
    assert_eq!(printable("a\u{202E}b\u{200B}c"), "a\\u{202e}b\\u{200b}c");
    assert_eq!(printable_lines("a\u{202E}\n\tb\r\n"), "a\\u{202e}\n\tb\\r\n");
    for ok in ["données", "日本語", "naïve-job_1", "Ωmega"] {
        assert!(ok.chars().all(visible), "{ok}");
        assert_eq!(printable(ok), ok);
    }
}

#[test]
fn a_workflow_over_the_counts_and_lengths_is_reported_per_item() {
    let mut w =
        workflow("version: v4\nvolumes:\n  a: {size: 1GiB}\njobs:\n  j: {image: {uri: docker://x}, mounts: {/a: a}}\n");
    assert!(workflow_problems(&w).is_empty());
    let v = w.volumes[0].clone();
    w.volumes = (0..MAX_WORKFLOW_VOLUMES + 1)
        .map(|i| {
            let mut v = v.clone();
            v.key = format!("v{i}");
            v.line = i + 3;
            v
        })
        .collect();
    let j = w.jobs[0].clone();
    w.jobs = vec![j.clone(); MAX_WORKFLOW_JOBS + 1];
    w.jobs[0].name = "n".repeat(MAX_NAME_BYTES + 1);
    w.annotations
        .insert("k".repeat(MAX_ANNOTATION_KEY_BYTES + 1), "v".into());
    let p = workflow_problems(&w);
    let text = join_problems(&p);
    assert!(text.contains("1001 volumes, more than the limit of 1000"), "{text}");
    assert_eq!(
        p[0].line,
        MAX_WORKFLOW_VOLUMES + 3,
        "positioned at the first volume over"
    );
    assert!(text.contains("1001 jobs and services"), "{text}");
    assert!(text.contains("job name of 254 bytes"), "{text}");
    assert!(text.contains("annotation key"), "{text}");
}
