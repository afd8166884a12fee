//! Strict, error-collecting decoding of [`Node`] trees into typed values.
//!
//! A decoder walks the tree with a [`Ctx`], which collects every problem as a [`Diagnostic`]
//! (file, line, column, field path, message, optional "did you mean" hint) instead of stopping at
//! the first. Mappings are read through a [`MapReader`]: each key the decoder asks for becomes
//! "known"; on [`MapReader::finish`] any other key in the file is reported as unknown, with the
//! closest known key as a hint. Typed readers never guess: `"10"` quoted is a string, `10` plain
//! is a number, and a field that wants a number says so when given anything else.

use std::collections::BTreeMap;
use std::fmt;

use fedvol_common::suggest::closest;

use super::node::{Key, Node, ScalarStyle, Span, Value};

/// One problem found in an input file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// The file, as the user named it.
    pub file: String,
    /// Where in the file (1-based).
    pub line: usize,
    /// Column (1-based).
    pub col: usize,
    /// Dotted path of the field, e.g. `volumes.scratch.size` (empty for the document itself).
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
    /// A suggestion such as "did you mean `annotations`?".
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.col)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " ({h})")?;
        }
        Ok(())
    }
}

/// Every problem found in one or more files; the error type of all format parsers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Joins a parent field path and a child key: `join("a.b", "c") == "a.b.c"`.
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Decoding context for one file: its name and the diagnostics collected so far.
#[derive(Debug)]
pub struct Ctx {
    file: String,
    diags: Vec<Diagnostic>,
}

impl Ctx {
    /// A context for the file named `file` (as the user gave it).
    pub fn new(file: impl Into<String>) -> Self {
        Ctx {
            file: file.into(),
            diags: Vec::new(),
        }
    }

    /// The file name this context reports against.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Records a problem at `span` for `field`.
    pub fn error(&mut self, span: Span, field: &str, message: impl Into<String>) {
        self.diags.push(Diagnostic {
            file: self.file.clone(),
            line: span.line,
            col: span.col,
            field: field.to_string(),
            message: message.into(),
            hint: None,
        });
    }

    /// Records a problem with a hint.
    pub fn error_hint(&mut self, span: Span, field: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.error(span, field, message);
        if let Some(d) = self.diags.last_mut() {
            d.hint = Some(hint.into());
        }
    }

    /// True when no problem has been recorded.
    pub fn is_ok(&self) -> bool {
        self.diags.is_empty()
    }

    /// How many problems have been recorded.
    pub fn error_count(&self) -> usize {
        self.diags.len()
    }

    /// Ends decoding: `Ok(value)` when nothing was recorded, else every diagnostic.
    pub fn finish<T>(self, value: T) -> Result<T, Diagnostics> {
        if self.diags.is_empty() {
            Ok(value)
        } else {
            Err(Diagnostics(self.diags))
        }
    }

    /// Takes the diagnostics collected so far (for merging several files' results).
    pub fn into_diagnostics(self) -> Vec<Diagnostic> {
        self.diags
    }

    /// Opens a mapping for strict reading. A null node reads as an empty mapping; anything else
    /// that is not a mapping is an error naming what was found ("expected a mapping, found a
    /// string `prep`") and gives `None`. [`Ctx::map_shaped`] also says what the mapping holds.
    pub fn map<'n>(&mut self, node: &'n Node, field: &str) -> Option<MapReader<'n>> {
        self.map_shaped(node, field, "")
    }

    /// [`Ctx::map`], with the expected shape in the error's hint when the node is not a
    /// mapping: `shape` is an example in YAML, e.g. ``"`- name: prep` with an optional `status:
    /// finished|running` (docs/formats.md)"`` (empty: no hint).
    pub fn map_shaped<'n>(&mut self, node: &'n Node, field: &str, shape: &str) -> Option<MapReader<'n>> {
        match &node.value {
            Value::Map(entries) => Some(MapReader::new(entries, node.span, field)),
            _ if node.is_null() => Some(MapReader::new(&[], node.span, field)),
            _ => {
                let message = format!("expected a mapping, found {}", found(node));
                if shape.is_empty() {
                    self.error(node.span, field, message);
                } else {
                    self.error_hint(node.span, field, message, format!("expected shape: {shape}"));
                }
                None
            }
        }
    }

    /// Reads a list; a null node is an empty list; a non-list is an error.
    pub fn seq<'n>(&mut self, node: &'n Node, field: &str) -> Option<&'n [Node]> {
        self.seq_shaped(node, field, "")
    }

    /// [`Ctx::seq`], with the expected shape in the error's hint when the node is not a list
    /// (as [`Ctx::map_shaped`]; empty: no hint).
    pub fn seq_shaped<'n>(&mut self, node: &'n Node, field: &str, shape: &str) -> Option<&'n [Node]> {
        match &node.value {
            Value::Seq(items) => Some(items),
            _ if node.is_null() => Some(&[]),
            _ => {
                let message = format!("expected a list, found {}", found(node));
                if shape.is_empty() {
                    self.error(node.span, field, message);
                } else {
                    self.error_hint(node.span, field, message, format!("expected shape: {shape}"));
                }
                None
            }
        }
    }

    /// Reads a string. Plain scalars are accepted as text too (`tier: fast`, `version: 1`), since
    /// YAML authors rarely quote; lists, mappings and null are errors.
    pub fn string(&mut self, node: &Node, field: &str) -> Option<String> {
        match &node.value {
            Value::Scalar(s, _) if !node.is_null() => Some(s.clone()),
            _ => {
                self.error(
                    node.span,
                    field,
                    format!("expected a string, found {}", node.kind_name()),
                );
                None
            }
        }
    }

    /// Reads a non-empty string.
    pub fn nonempty_string(&mut self, node: &Node, field: &str) -> Option<String> {
        let s = self.string(node, field)?;
        if s.trim().is_empty() {
            self.error(node.span, field, "expected a non-empty string");
            return None;
        }
        Some(s)
    }

    /// Reads a boolean: plain `true`/`false` (any case). Quoted `"true"` is an error.
    pub fn bool(&mut self, node: &Node, field: &str) -> Option<bool> {
        if let Value::Scalar(s, ScalarStyle::Plain) = &node.value {
            match s.to_ascii_lowercase().as_str() {
                "true" => return Some(true),
                "false" => return Some(false),
                _ => {}
            }
        }
        self.error(
            node.span,
            field,
            format!("expected true or false, found {}", describe(node)),
        );
        None
    }

    /// Reads a whole number in `min..=max`. Plain integers only (`12`, `-3`, `0x10` is refused).
    pub fn int(&mut self, node: &Node, field: &str, min: i128, max: i128) -> Option<i128> {
        if let Value::Scalar(s, ScalarStyle::Plain) = &node.value
            && let Ok(v) = s.replace('_', "").parse::<i128>()
        {
            if v < min || v > max {
                self.error(
                    node.span,
                    field,
                    format!("expected a whole number from {min} to {max}, found {v}"),
                );
                return None;
            }
            return Some(v);
        }
        self.error(
            node.span,
            field,
            format!("expected a whole number, found {}", describe(node)),
        );
        None
    }

    /// Reads a whole number >= 0 that fits in u64.
    pub fn u64(&mut self, node: &Node, field: &str) -> Option<u64> {
        self.int(node, field, 0, u64::MAX as i128).map(|v| v as u64)
    }

    /// Reads one of `choices` (compared case-insensitively); returns the canonical spelling.
    pub fn one_of(&mut self, node: &Node, field: &str, choices: &[&'static str]) -> Option<&'static str> {
        let s = self.string(node, field)?;
        if let Some(c) = choices.iter().find(|c| c.eq_ignore_ascii_case(&s)) {
            return Some(c);
        }
        let msg = format!("expected one of {}, found `{s}`", choices.join(", "));
        match closest(&s, choices.iter().copied()) {
            Some(c) => self.error_hint(node.span, field, msg, format!("did you mean `{c}`?")),
            None => self.error(node.span, field, msg),
        }
        None
    }

    /// Reads a list of strings.
    pub fn string_list(&mut self, node: &Node, field: &str) -> Option<Vec<String>> {
        let items = self.seq(node, field)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.string(item, &format!("{field}[{i}]")) {
                Some(s) => out.push(s),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Reads a mapping of string to string (annotations, labels, parameters). Plain scalar
    /// values are taken as their text (`replicas: 3` gives `"3"`), as Kubernetes tools do.
    pub fn string_map(&mut self, node: &Node, field: &str) -> Option<BTreeMap<String, String>> {
        let mut r = self.map(node, field)?;
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, v) in r.rest() {
            match self.string(v, &join(field, &k.name)) {
                Some(s) => {
                    out.insert(k.name.clone(), s);
                }
                None => ok = false,
            }
        }
        r.finish(self);
        ok.then_some(out)
    }
}

/// What a node is, for "expected a mapping, found ..." messages: its kind, then its value when
/// it is a short scalar (`a string `prep``, `a list`) that cannot be a secret (no word of
/// [`fedvol_common::secrets::SECRET_WORDS`], no [embedded
/// secret](fedvol_common::secrets::embedded_secret)).
fn found(node: &Node) -> String {
    match &node.value {
        Value::Scalar(s, _)
            if !node.is_null()
                && s.chars().count() <= 40
                && !s.contains('\n')
                && !fedvol_common::secrets::looks_secret(s)
                && fedvol_common::secrets::embedded_secret(s).is_none() =>
        {
            format!("{} `{s}`", node.kind_name())
        }
        _ => node.kind_name().to_string(),
    }
}

/// Describes a node for "found ..." messages: the value for short scalars, else its kind.
pub fn describe(node: &Node) -> String {
    match &node.value {
        Value::Scalar(s, _) if !node.is_null() && s.len() <= 40 => format!("`{s}`"),
        _ => node.kind_name().to_string(),
    }
}

/// Strict reader over one mapping. Ask for each field with [`MapReader::take`]; then call
/// [`MapReader::finish`] to report keys nobody asked for and duplicate keys.
#[derive(Debug)]
pub struct MapReader<'n> {
    entries: &'n [(Key, Node)],
    span: Span,
    field: String,
    known: Vec<&'static str>,
    used: Vec<bool>,
    open: bool,
}

impl<'n> MapReader<'n> {
    fn new(entries: &'n [(Key, Node)], span: Span, field: &str) -> Self {
        MapReader {
            entries,
            span,
            field: field.to_string(),
            known: Vec::new(),
            used: vec![false; entries.len()],
            open: false,
        }
    }

    /// Where the mapping starts.
    pub fn span(&self) -> Span {
        self.span
    }

    /// The mapping's own field path.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The field path of one of this mapping's keys.
    pub fn path(&self, key: &str) -> String {
        join(&self.field, key)
    }

    /// Declares `key` known and returns its value if present (null values count as absent).
    pub fn take(&mut self, key: &'static str) -> Option<&'n Node> {
        self.known.push(key);
        let mut found = None;
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if k.name == key {
                self.used[i] = true;
                if found.is_none() && !v.is_null() {
                    found = Some(v);
                }
            }
        }
        found
    }

    /// Like [`MapReader::take`], also accepting `alias` (e.g. a camelCase JSON spelling).
    pub fn take_either(&mut self, key: &'static str, alias: &'static str) -> Option<&'n Node> {
        let a = self.take(key);
        let b = self.take(alias);
        a.or(b)
    }

    /// Like [`MapReader::take`], but records an error when the key is missing.
    pub fn require(&mut self, ctx: &mut Ctx, key: &'static str) -> Option<&'n Node> {
        let v = self.take(key);
        if v.is_none() {
            ctx.error(self.span, &self.field, format!("missing required field `{key}`"));
        }
        v
    }

    /// Declares keys that are accepted and knowingly ignored.
    pub fn ignore(&mut self, keys: &[&'static str]) {
        for k in keys {
            self.take(k);
        }
    }

    /// True when the mapping has `key` (even with a null value).
    pub fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k.name == key)
    }

    /// All entries not yet taken, marking them used: for mappings whose keys are names chosen by
    /// the user (volumes, jobs, annotations). Duplicates are still reported by `finish`.
    pub fn rest(&mut self) -> Vec<(&'n Key, &'n Node)> {
        self.open = true;
        let mut out = Vec::new();
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if !self.used[i] {
                self.used[i] = true;
                out.push((k, v));
            }
        }
        out
    }

    /// Reports unknown keys (with a "did you mean" hint from the known ones) and duplicate keys.
    pub fn finish(self, ctx: &mut Ctx) {
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::with_capacity(self.entries.len());
        for (i, (k, _)) in self.entries.iter().enumerate() {
            if !seen.insert(k.name.as_str()) {
                ctx.error(k.span, &join(&self.field, &k.name), "duplicate key");
            }
            if !self.used[i] && !self.open {
                let msg = if self.known.is_empty() {
                    format!("unknown field `{}`: this mapping takes no fields", k.name)
                } else {
                    format!("unknown field `{}`; expected one of: {}", k.name, self.known.join(", "))
                };
                match closest(&k.name, self.known.iter().copied()) {
                    Some(c) => ctx.error_hint(k.span, &join(&self.field, &k.name), msg, format!("did you mean `{c}`?")),
                    None => ctx.error(k.span, &join(&self.field, &k.name), msg),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::load::{Limits, load_documents};

    #[test]
    fn unknown_key_gets_hint_and_position() {
        let doc = &load_documents("size: 10GB\nanotations:\n  tier: fast\n", Limits::default()).unwrap()[0];
        let mut ctx = Ctx::new("wf.yaml");
        let mut r = ctx.map(doc, "volumes.scratch").unwrap();
        r.take("size");
        r.take("annotations");
        r.finish(&mut ctx);
        let err = ctx.finish(()).unwrap_err();
        assert_eq!(err.0.len(), 1);
        let d = &err.0[0];
        assert_eq!((d.line, d.col), (2, 1));
        assert_eq!(d.field, "volumes.scratch.anotations");
        assert_eq!(d.hint.as_deref(), Some("did you mean `annotations`?"));
        assert!(
            d.to_string()
                .starts_with("wf.yaml:2:1: volumes.scratch.anotations: unknown field")
        );
    }

    #[test]
    fn all_errors_are_collected() {
        let doc = &load_documents("a: x\nb: [1]\nc: 3\nzz: 1\n", Limits::default()).unwrap()[0];
        let mut ctx = Ctx::new("f");
        let mut r = ctx.map(doc, "").unwrap();
        let a = r.take("a").unwrap();
        let b = r.take("b").unwrap();
        ctx.int(a, "a", 0, 10);
        ctx.string(b, "b");
        r.take("c");
        r.finish(&mut ctx);
        assert_eq!(ctx.error_count(), 3);
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let doc = &load_documents("a: 1\na: 2\n", Limits::default()).unwrap()[0];
        let mut ctx = Ctx::new("f");
        let mut r = ctx.map(doc, "").unwrap();
        r.take("a");
        r.finish(&mut ctx);
        assert_eq!(ctx.error_count(), 1);
    }
}
