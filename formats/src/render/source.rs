//! The template source as Go's lexer sees it, for two checks `gotmpl` 0.6 gets wrong:
//!
//! - **Block structure.** `gotmpl` accepts an `{{if}}`, `{{range}}`, `{{with}}`, `{{define}}`
//!   or `{{block}}` left open at the end of the file, and a stray top-level `{{end}}` silently
//!   ends the template there (the rest of the file is dropped). Go refuses both ("unexpected
//!   EOF", "unexpected {{end}}"); so does [`check_blocks`], with the position.
//! - **Comments.** `gotmpl` trims the whitespace after `{{- /* ... */}}` as if the comment
//!   closed with `-}}`; Go trims only on the side that has a marker. [`neutralize_comments`]
//!   rewrites each comment `/* ... */` into the empty string literal `""` padded to the same
//!   length (line breaks kept), so every byte offset and line stays where it was and the
//!   action prints nothing, trimming exactly as its markers say.

use crate::yaml::Span;

/// One action of the source: `{{` ... `}}`, as byte offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// Offset of the opening `{{`.
    pub start: usize,
    /// Offset just past the closing `}}` (the text length for an unclosed action).
    pub end: usize,
    /// Offsets of each comment's `/*` and just past its `*/`.
    pub comments: Vec<(usize, usize)>,
    /// The first word of the action (`if`, `end`, `.Name`, `$x`...), after any trim marker.
    pub keyword: String,
}

/// Every action of `text`, in order. Inside an action, `}}` in a string literal (`"..."`,
/// `` `...` ``, `'.'`) or a comment does not close it.
pub fn actions(text: &str) -> Vec<Action> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(rel) = text.get(i..).and_then(|t| t.find("{{")) {
        let start = i + rel;
        let mut j = start + 2;
        // A trim marker is `-` followed by white space.
        if b.get(j) == Some(&b'-') && b.get(j + 1).is_some_and(|c| c.is_ascii_whitespace()) {
            j += 1;
        }
        while b.get(j).is_some_and(|c| c.is_ascii_whitespace()) {
            j += 1;
        }
        let word_end = (j..b.len())
            .find(|&k| !(b[k].is_ascii_alphanumeric() || b[k] == b'_' || b[k] == b'.' || b[k] == b'$'))
            .unwrap_or(b.len());
        let keyword = text.get(j..word_end).unwrap_or("").to_string();
        let mut comments = Vec::new();
        let mut k = start + 2;
        let end = loop {
            match b.get(k) {
                None => break b.len(),
                Some(b'}') if b.get(k + 1) == Some(&b'}') => break k + 2,
                Some(b'/') if b.get(k + 1) == Some(&b'*') => {
                    let close = text
                        .get(k + 2..)
                        .and_then(|t| t.find("*/"))
                        .map_or(b.len(), |r| k + 2 + r + 2);
                    comments.push((k, close));
                    k = close;
                }
                Some(&q @ (b'"' | b'\'')) => {
                    k += 1;
                    while let Some(&c) = b.get(k) {
                        k += 1;
                        if c == b'\\' {
                            k += 1;
                        } else if c == q || c == b'\n' {
                            break;
                        }
                    }
                }
                Some(b'`') => {
                    k = text
                        .get(k + 1..)
                        .and_then(|t| t.find('`'))
                        .map_or(b.len(), |r| k + 1 + r + 1);
                }
                Some(_) => k += 1,
            }
        };
        out.push(Action {
            start,
            end,
            comments,
            keyword,
        });
        i = end.max(start + 2);
    }
    out
}

/// A block-structure error: Go's message and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError {
    /// Where the offending action starts.
    pub span: Span,
    /// What is wrong.
    pub message: String,
}

/// Checks that every action is closed by `}}`, every `if`/`range`/`with`/`define`/`block` by
/// an `end`, that no `end` or `else` stands outside a block, and that `else` only follows
/// `if`, `range` or `with`.
pub fn check_blocks(text: &str) -> Result<(), BlockError> {
    let mut open: Vec<(&str, usize)> = Vec::new();
    for a in actions(text) {
        let err = |message: String| BlockError {
            span: span(text, a.start),
            message,
        };
        if !text.get(..a.end).is_some_and(|t| t.ends_with("}}")) || a.end < a.start + 4 {
            return Err(err("unclosed action: this `{{` has no `}}`".into()));
        }
        match a.keyword.as_str() {
            "if" | "range" | "with" | "define" | "block" => {
                let k = match a.keyword.as_str() {
                    "if" => "if",
                    "range" => "range",
                    "with" => "with",
                    "define" => "define",
                    _ => "block",
                };
                open.push((k, a.start));
            }
            // The guard pops the block an `end` closes; with none open, the `end` is stray.
            "end" if open.pop().is_none() => {
                return Err(err(
                    "unexpected {{end}}: no {{if}}, {{range}}, {{with}} or {{define}} is open".into(),
                ));
            }
            "else" => match open.last() {
                Some(("if" | "range" | "with", _)) => {}
                Some((k, _)) => return Err(err(format!("unexpected {{{{else}}}} in {{{{{k}}}}}"))),
                None => {
                    return Err(err(
                        "unexpected {{else}}: no {{if}}, {{range}} or {{with}} is open".into()
                    ));
                }
            },
            _ => {}
        }
    }
    match open.last() {
        Some((k, at)) => Err(BlockError {
            span: span(text, *at),
            message: format!("unexpected EOF: this {{{{{k}}}}} has no {{{{end}}}}"),
        }),
        None => Ok(()),
    }
}

/// `text` with every comment `/* ... */` inside an action replaced by `""` and spaces (line
/// breaks kept): the same length, offsets and lines, and an action that prints nothing.
pub fn neutralize_comments(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for a in actions(text) {
        for (from, to) in a.comments {
            let to = to.min(bytes.len());
            for (n, byte) in bytes.iter_mut().enumerate().take(to).skip(from) {
                if *byte != b'\n' {
                    *byte = if n < from + 2 { b'"' } else { b' ' };
                }
            }
        }
    }
    // Only ASCII bytes replaced whole runs of bytes (every byte of a multi-byte character is
    // inside the comment), so the result is UTF-8; fall back to the text if not.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_string())
}

/// The line and column (in characters) of byte `offset`.
pub fn span(text: &str, offset: usize) -> Span {
    let before = text.get(..offset.min(text.len())).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Span {
        line: before.matches('\n').count() + 1,
        col: before[line_start..].chars().count() + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_skip_strings_and_comments() {
        let t = "a {{ printf \"}}\" `}}` }} b {{- /* }} */}} c {{-3}}";
        let a = actions(t);
        assert_eq!(a.len(), 3);
        assert_eq!(&t[a[0].start..a[0].end], "{{ printf \"}}\" `}}` }}");
        assert_eq!(a[0].keyword, "printf");
        assert_eq!(&t[a[1].start..a[1].end], "{{- /* }} */}}");
        assert_eq!(a[1].comments.len(), 1);
        assert_eq!(a[2].keyword, "", "`{{-3}}` is the number -3, not a trim marker");
    }

    #[test]
    fn blocks_must_be_closed_and_ends_must_match() {
        assert_eq!(
            check_blocks("{{if .A}}x{{else if .B}}y{{else}}z{{end}}{{range .L}}{{end}}"),
            Ok(())
        );
        let e = check_blocks("a\n{{ if .X }}\nb\n").unwrap_err();
        assert_eq!(e.span, Span { line: 2, col: 1 });
        assert!(e.message.contains("unexpected EOF"), "{}", e.message);
        let e = check_blocks("a\nb {{- end }}\nrest\n").unwrap_err();
        assert_eq!(e.span, Span { line: 2, col: 3 });
        assert!(e.message.contains("unexpected {{end}}"), "{}", e.message);
        let e = check_blocks("{{ else }}").unwrap_err();
        assert!(e.message.contains("unexpected {{else}}"), "{}", e.message);
        let e = check_blocks("{{ define \"x\" }}{{ else }}{{ end }}").unwrap_err();
        assert!(e.message.contains("in {{define}}"), "{}", e.message);
        let e = check_blocks("a\nb: {{ .X\n").unwrap_err();
        assert_eq!(
            (e.span, e.message.starts_with("unclosed action")),
            (Span { line: 2, col: 4 }, true)
        );
        // Keywords inside strings or comments do not count.
        assert_eq!(check_blocks("{{ \"{{ if\" }}{{/* {{end}} */}}"), Ok(()));
    }

    #[test]
    fn comments_become_empty_strings_of_the_same_length() {
        let t = "a\n{{- /* x\né */}}\nb";
        let n = neutralize_comments(t);
        assert_eq!(n.len(), t.len());
        assert_eq!(n, "a\n{{- \"\"  \n     }}\nb");
    }
}
