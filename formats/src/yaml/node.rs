//! A YAML value tree that remembers where every node came from.
//!
//! Every [`Node`] carries a [`Span`] (1-based line and column of its first character), so
//! decoders can point a user at the exact place of a problem. Scalars are kept as text with
//! their quoting style; typing (int, bool, size) is done by the decoder that knows what the
//! field expects, never guessed from the text.

use std::fmt;

/// A position in a source file: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// Line number, counting from 1.
    pub line: usize,
    /// Column number, counting from 1.
    pub col: usize,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// How a scalar was written: plain scalars may be null/bool/number, quoted ones are strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarStyle {
    /// Unquoted (`foo`, `12`, `true`, `~`).
    Plain,
    /// Single- or double-quoted, or a block scalar (`|`, `>`): always a string.
    Quoted,
}

/// One YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub span: Span,
    /// The node's content.
    pub value: Value,
}

/// The content of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A scalar as written (without quotes), with its style.
    Scalar(String, ScalarStyle),
    /// A sequence of nodes.
    Seq(Vec<Node>),
    /// A mapping in file order; keys are scalars (a non-scalar key is a load error).
    Map(Vec<(Key, Node)>),
}

/// A mapping key: its text and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The key's text.
    pub name: String,
    /// Where the key starts.
    pub span: Span,
}

impl Node {
    /// True for a plain `~`, `null`, `Null`, `NULL` or empty plain scalar (YAML 1.2 core schema).
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar(s, ScalarStyle::Plain)
            if matches!(s.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The scalar text, if this node is a scalar.
    pub fn as_scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(s, _) => Some(s),
            _ => None,
        }
    }

    /// The entries, if this node is a mapping.
    pub fn as_map(&self) -> Option<&[(Key, Node)]> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The items, if this node is a sequence.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }

    /// Looks a key up in a mapping node (first match); `None` for other node kinds.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?.iter().find(|(k, _)| k.name == key).map(|(_, v)| v)
    }

    /// A short description of the node's kind for error messages ("a mapping", "a string"...).
    pub fn kind_name(&self) -> &'static str {
        match &self.value {
            Value::Map(_) => "a mapping",
            Value::Seq(_) => "a list",
            Value::Scalar(..) if self.is_null() => "null",
            Value::Scalar(_, ScalarStyle::Quoted) => "a string",
            Value::Scalar(s, ScalarStyle::Plain) => {
                if s.parse::<i64>().is_ok() || s.parse::<f64>().is_ok() {
                    "a number"
                } else if matches!(s.as_str(), "true" | "false" | "True" | "False" | "TRUE" | "FALSE") {
                    "a boolean"
                } else {
                    "a string"
                }
            }
        }
    }
}
