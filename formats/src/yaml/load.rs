//! Turns YAML (or JSON) text into [`Node`] trees, one per document, with positions.
//!
//! Built on yaml-rust2's event parser. Aliases (`*a`) are expanded by copying the anchored node,
//! under a budget ([`Limits::max_nodes`]) so that an "alias bomb" is refused instead of eating
//! memory, and nesting is capped at [`Limits::max_depth`].

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::node::{Key, Node, ScalarStyle, Span, Value};

/// Bounds on what one file may expand to. Exceeding one is a [`LoadError`], never a panic.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most nodes the whole stream may produce after alias expansion (default 2,000,000).
    pub max_nodes: usize,
    /// Deepest nesting of mappings and lists (default 64).
    pub max_depth: usize,
    /// Largest input in bytes (default 64 MiB).
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_nodes: 2_000_000,
            max_depth: 64,
            max_bytes: 64 << 20,
        }
    }
}

/// A YAML syntax error or a limit breach, with where it happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{span}: {message}")]
pub struct LoadError {
    /// Where the problem was found.
    pub span: Span,
    /// What went wrong, in words.
    pub message: String,
}

fn span_of(m: &Marker) -> Span {
    // yaml-rust2 reports 1-based lines and 0-based columns.
    Span {
        line: m.line(),
        col: m.col() + 1,
    }
}

enum Frame {
    Seq {
        span: Span,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        span: Span,
        anchor: usize,
        entries: Vec<(Key, Node)>,
        pending_key: Option<Key>,
    },
}

struct Builder {
    limits: Limits,
    stack: Vec<Frame>,
    docs: Vec<Node>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    error: Option<LoadError>,
}

fn count_nodes(n: &Node) -> usize {
    match &n.value {
        Value::Scalar(..) => 1,
        Value::Seq(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        Value::Map(entries) => 1 + entries.iter().map(|(_, v)| 1 + count_nodes(v)).sum::<usize>(),
    }
}

impl Builder {
    fn fail(&mut self, span: Span, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(LoadError {
                span,
                message: message.into(),
            });
        }
    }

    fn bump(&mut self, n: usize, span: Span) -> bool {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > self.limits.max_nodes {
            self.fail(
                span,
                format!(
                    "document expands to more than {} nodes (alias expansion limit); refusing it",
                    self.limits.max_nodes
                ),
            );
            return false;
        }
        true
    }

    fn push_value(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries, pending_key, ..
            }) => match pending_key.take() {
                Some(k) => entries.push((k, node)),
                None => match node.value {
                    Value::Scalar(s, _) => {
                        *pending_key = Some(Key {
                            name: s,
                            span: node.span,
                        })
                    }
                    _ => {
                        let span = node.span;
                        self.fail(span, "a mapping key must be a plain value, not a list or mapping");
                    }
                },
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        let span = span_of(&mark);
        match ev {
            Event::Scalar(text, style, anchor, _tag) => {
                if !self.bump(1, span) {
                    return;
                }
                let style = match style {
                    TScalarStyle::Plain => ScalarStyle::Plain,
                    _ => ScalarStyle::Quoted,
                };
                self.push_value(
                    Node {
                        span,
                        value: Value::Scalar(text, style),
                    },
                    anchor,
                );
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if !self.bump(1, span) {
                    return;
                }
                if self.stack.len() >= self.limits.max_depth {
                    self.fail(
                        span,
                        format!("nesting deeper than {} levels; refusing it", self.limits.max_depth),
                    );
                    return;
                }
                let frame = if matches!(ev, Event::SequenceStart(..)) {
                    Frame::Seq {
                        span,
                        anchor,
                        items: Vec::new(),
                    }
                } else {
                    Frame::Map {
                        span,
                        anchor,
                        entries: Vec::new(),
                        pending_key: None,
                    }
                };
                self.stack.push(frame);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else { return };
                let (node, anchor) = match frame {
                    Frame::Seq { span, anchor, items } => (
                        Node {
                            span,
                            value: Value::Seq(items),
                        },
                        anchor,
                    ),
                    Frame::Map {
                        span, anchor, entries, ..
                    } => (
                        Node {
                            span,
                            value: Value::Map(entries),
                        },
                        anchor,
                    ),
                };
                self.push_value(node, anchor);
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(mut node) => {
                    if !self.bump(count_nodes(&node), span) {
                        return;
                    }
                    node.span = span;
                    self.push_value(node, 0);
                }
                None => self.fail(span, "alias refers to an unknown anchor"),
            },
            Event::DocumentEnd => {
                // An empty document (`---` followed by nothing) yields no root node; record null.
            }
            Event::DocumentStart => {
                self.anchors.clear();
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd => {}
        }
    }
}

/// True for the characters YAML allows in a stream (YAML 1.2 `c-printable`: tab, line feed,
/// carriage return, and every other character but the C0 and C1 controls, DEL, U+FFFE and
/// U+FFFF; NEL U+0085 is allowed).
fn printable(c: char) -> bool {
    match c {
        '\t' | '\n' | '\r' | '\u{85}' => true,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}' => false,
        _ => true,
    }
}

/// The first character YAML does not allow, with its position (1-based line and column).
fn first_unprintable(text: &str) -> Option<(char, Span)> {
    let (mut line, mut col) = (1, 1);
    for c in text.chars() {
        if !printable(c) {
            return Some((c, Span { line, col }));
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    None
}

/// Parses every document in `text` into a [`Node`] tree.
///
/// Empty documents (a bare `---`) are skipped. Errors: a YAML syntax error, an alias to an
/// unknown anchor, a non-scalar mapping key, a breach of `limits`, or a character YAML does not
/// allow (a control character such as NUL, which the parser would otherwise take as the end of
/// the text, silently dropping the rest); each names line and column.
pub fn load_documents(text: &str, limits: Limits) -> Result<Vec<Node>, LoadError> {
    if text.len() > limits.max_bytes {
        return Err(LoadError {
            span: Span { line: 1, col: 1 },
            message: format!(
                "file is {} bytes, more than the limit of {} bytes",
                text.len(),
                limits.max_bytes
            ),
        });
    }
    if let Some((c, span)) = first_unprintable(text) {
        return Err(LoadError {
            span,
            message: format!(
                "control character U+{:04X} is not allowed in YAML (binary data or a damaged file?)",
                u32::from(c)
            ),
        });
    }
    let mut b = Builder {
        limits,
        stack: Vec::new(),
        docs: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        error: None,
    };
    let mut parser = Parser::new_from_str(text);
    let res = parser.load(&mut b, true);
    if let Some(e) = b.error {
        return Err(e);
    }
    if let Err(e) = res {
        return Err(LoadError {
            span: span_of(e.marker()),
            message: e.info().to_string(),
        });
    }
    Ok(b.docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let docs = load_documents("a: 1\nb:\n  c: x\n", Limits::default()).unwrap();
        let root = &docs[0];
        let b = root.get("b").unwrap();
        let (k, v) = &b.as_map().unwrap()[0];
        assert_eq!(k.span, Span { line: 3, col: 3 });
        assert_eq!(v.as_scalar(), Some("x"));
        assert_eq!(v.span, Span { line: 3, col: 6 });
    }

    #[test]
    fn multi_document_and_quoting() {
        let docs = load_documents("---\na: '1'\n---\nb: 1\n", Limits::default()).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(
            docs[0].get("a").unwrap().value,
            Value::Scalar("1".into(), ScalarStyle::Quoted)
        );
    }

    #[test]
    fn alias_bomb_is_refused() {
        let mut s = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            s.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n",
                p = i - 1
            ));
        }
        let err = load_documents(&s, Limits::default()).unwrap_err();
        assert!(err.message.contains("alias expansion limit"), "{err}");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let s = "[".repeat(100) + &"]".repeat(100);
        let err = load_documents(&s, Limits::default()).unwrap_err();
        assert!(err.message.contains("nesting"), "{err}");
        // Far deeper input is stopped by the parser's own recursion guard: still an error.
        let s = "[".repeat(100_000);
        assert!(load_documents(&s, Limits::default()).is_err());
    }

    #[test]
    fn syntax_error_has_position() {
        let err = load_documents("a: [1, 2\nb: 3\n", Limits::default()).unwrap_err();
        assert!(err.span.line >= 1);
    }

    /// Regression: a NUL ended the parse silently, so everything after it was
    /// ignored and a damaged file passed as valid.
    #[test]
    fn control_characters_are_refused_with_their_position() {
        let err = load_documents("version: v4\n\u{0}volumes: [\n", Limits::default()).unwrap_err();
        assert_eq!(err.span, Span { line: 2, col: 1 });
        assert!(err.message.contains("U+0000"), "{err}");
        let err = load_documents("a: 1\nb: x\u{1}y\n", Limits::default()).unwrap_err();
        assert_eq!(err.span, Span { line: 2, col: 5 });
        for bad in ["\u{7f}", "\u{9b}", "\u{fffe}", "\u{1b}[0m"] {
            assert!(
                load_documents(&format!("a: {bad}"), Limits::default()).is_err(),
                "{bad:?}"
            );
        }
        for fine in ["a: \"tab\there\"\r\n", "a: é ✓ \u{85}", "\u{feff}a: 1"] {
            assert!(load_documents(fine, Limits::default()).is_ok(), "{fine:?}");
        }
    }

    #[test]
    fn json_is_yaml() {
        let docs = load_documents("{\"a\": {\"b\": [1, 2]}}", Limits::default()).unwrap();
        assert_eq!(docs[0].get("a").unwrap().get("b").unwrap().as_seq().unwrap().len(), 2);
    }
}
