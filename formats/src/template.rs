//! Detection of unrendered Go templates (`{{ ... }}`).
//!
//! Most public Fuzzfiles (CIQ's application catalog) are Go `text/template` sources that become
//! YAML only once rendered with their values file. Fed to a YAML parser as they are, they fail
//! with confusing errors (`{{.Volume}}` reads as a flow mapping used as a key) or, worse, parse
//! into nonsense. fedvol therefore looks for a template action before parsing and refuses the
//! file with one clear message instead, naming `--values` and `fedvol render`
//! ([`crate::render`] renders templates with their values files).

use crate::yaml::Span;

/// The position (1-based line and column, columns counted in characters) of the first Go
/// template action in `text`: a `{{` that is closed by a later `}}` (Go allows actions to span
/// lines). `None` when the text holds no action.
///
/// Whole-line YAML comments (`# ...`) are skipped: they cannot change what the YAML means, so a
/// rendered file that merely documents a template in a comment is not refused. A `{{` anywhere
/// else counts, including inside quoted or block scalars: in an unrendered template those are
/// rendered too, and YAML itself never needs `{{` outside a string.
pub fn find_template(text: &str) -> Option<Span> {
    // A `{{` opens an action when some `}}` follows it; the last `}}` decides that in O(1).
    let last_close = text.rfind("}}")?;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        if line.trim_start().starts_with('#') {
            continue;
        }
        let mut from = 0;
        while let Some(pos) = line[from..].find("{{") {
            let at = from + pos;
            if start + at + 2 <= last_close {
                let col = line[..at].chars().count() + 1;
                return Some(Span { line: i + 1, col });
            }
            from = at + 2;
        }
    }
    None
}

/// The one diagnostic fedvol gives for an unrendered template in `file`, at `span` (its first
/// `{{`): it names the problem and the two ways to render it, `--values` (on `fedvol check`,
/// `plan` and `submit`) and `fedvol render` (see [`crate::render`]).
pub fn unrendered_template(file: &str, span: Span) -> crate::yaml::Diagnostic {
    crate::yaml::Diagnostic {
        file: file.to_string(),
        line: span.line,
        col: span.col,
        field: String::new(),
        message: "this file is an unrendered template (a Go template `{{ }}` action is here); give its values \
                  with `--values VALUES.yaml`, or render it with `fedvol render FILE --values VALUES.yaml`"
            .to_string(),
        hint: Some(
            "a catalog application's values file is the `values.yaml` beside its `template.yaml`; several \
             `--values` merge, later files overriding earlier keys"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_first_action_with_position() {
        let t = "# Copyright\nversion: v4\nvolumes:\n  data:\n    reference: {{ .Volume }}\n  x: {{.Y}}\n";
        assert_eq!(find_template(t), Some(Span { line: 5, col: 16 }));
    }

    #[test]
    fn trim_markers_and_multiline_actions_count() {
        assert_eq!(
            find_template("{{- $x := 1 }}\nversion: v4\n"),
            Some(Span { line: 1, col: 1 })
        );
        assert_eq!(
            find_template("a: 1\nb: {{ if\n .X }}y{{ end }}\n"),
            Some(Span { line: 2, col: 4 })
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        assert_eq!(find_template("é: «{{.X}}»\n"), Some(Span { line: 1, col: 5 }));
    }

    #[test]
    fn plain_yaml_and_comments_are_not_templates() {
        assert_eq!(find_template("version: v1\njobs:\n  a: {}\n"), None);
        assert_eq!(find_template("# render with {{ .Values }} first\nversion: v4\n"), None);
        assert_eq!(find_template("  # {{ nested comment }}\nversion: v4\n"), None);
        // Unclosed braces are not an action.
        assert_eq!(find_template("a: '{{ not closed'\n"), None);
        // Flow mappings never produce `{{` next to each other in valid fedvol YAML.
        assert_eq!(find_template("a: {b: {c: 1}}\n"), None);
    }

    #[test]
    fn action_inside_block_scalar_counts() {
        let t = "version: v4\njobs:\n  a:\n    script: |\n      echo {{.Name}}\n";
        assert_eq!(find_template(t), Some(Span { line: 5, col: 12 }));
    }
}
