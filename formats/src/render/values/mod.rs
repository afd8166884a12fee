//! Values files: the data a catalog template reads as `.Name`.
//!
//! Two shapes are read (see [`parse_values_str`]):
//!
//! - **A catalog form** (the `values.yaml` beside each CIQ catalog template): a mapping whose
//!   only key is `values`, a list of entries. Each entry has a `name` and exactly one default:
//!   `string_value` (text), `uint_value` (a whole number >= 0), `bool_value` (`true`/`false`)
//!   or `secret_value: {reference: ...}` (the reference, as text). `display_name`,
//!   `display_category` and `description` are for people and ignored; `options_input:
//!   {options: [...]}` restricts a `string_value` to the listed choices. The rule: the entry
//!   `{name: Cores, uint_value: 4}` becomes `.Cores` = 4 (an integer), `{name: Volume,
//!   string_value: x}` becomes `.Volume` = "x", a secret becomes its reference string.
//! - **A plain mapping** (helm style, for your own overrides): `Name: value` pairs. Scalars
//!   take YAML's core types (`4` an integer, `true` a boolean, `4GiB` and anything quoted a
//!   string, `~` null); lists and mappings are kept as lists and maps.
//!
//! Several files merge in order ([`Values::merge`]): a later file's key replaces an earlier
//! one's, and two mappings under the same key merge key by key (as helm does). When a catalog
//! form declares a name, every file's value for it must fit the declaration: a plain override
//! of a `uint_value` must be a whole number (`Cores: 8`), of a `bool_value` a boolean, of a
//! `string_value` any scalar (taken as its text, so `Version: 1.10` stays "1.10"), and one of
//! the `options_input` choices when the form lists them.

mod form;
mod plain;

use std::collections::BTreeMap;
use std::path::Path;

use crate::files::read_text;
use crate::yaml::{Diagnostic, Diagnostics, Limits, Node, Span, closest, load_documents};

/// A value a template can read: the data model of Go templates over YAML.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// No value (YAML `~`); a template sees Go's `nil`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction or an exponent.
    Float(f64),
    /// Text.
    String(String),
    /// A list, in file order.
    List(Vec<Data>),
    /// A mapping; templates iterate it in key order, as Go does.
    Map(BTreeMap<String, Data>),
}

impl Data {
    /// Appends an unambiguous encoding of the value to `out` (type tags and lengths), used to
    /// derive the render seed: equal values give equal bytes, different values different ones.
    pub fn encode(&self, out: &mut Vec<u8>) {
        fn text(out: &mut Vec<u8>, s: &str) {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        match self {
            Data::Null => out.push(b'n'),
            Data::Bool(b) => out.extend_from_slice(if *b { b"t" } else { b"f" }),
            Data::Int(i) => {
                out.push(b'i');
                out.extend_from_slice(&i.to_le_bytes());
            }
            Data::Float(x) => {
                out.push(b'x');
                out.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            Data::String(s) => {
                out.push(b's');
                text(out, s);
            }
            Data::List(items) => {
                out.push(b'l');
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for i in items {
                    i.encode(out);
                }
            }
            Data::Map(m) => {
                out.push(b'm');
                out.extend_from_slice(&(m.len() as u64).to_le_bytes());
                for (k, v) in m {
                    text(out, k);
                    v.encode(out);
                }
            }
        }
    }
}

/// The kind of value a catalog form entry declares (its `*_value` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormKind {
    /// `string_value`: text.
    String,
    /// `uint_value`: a whole number >= 0.
    Uint,
    /// `bool_value`: `true` or `false`.
    Bool,
    /// `secret_value: {reference: ...}`: the reference, as text.
    Secret,
}

impl FormKind {
    /// The form key that declares this kind (`string_value`, ...).
    pub fn key(self) -> &'static str {
        match self {
            FormKind::String => "string_value",
            FormKind::Uint => "uint_value",
            FormKind::Bool => "bool_value",
            FormKind::Secret => "secret_value",
        }
    }
}

/// What a catalog form says about one value: its kind, its allowed choices (empty: any) and
/// where the form declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    /// The declared kind.
    pub kind: FormKind,
    /// `options_input.options`: the allowed values of a string (empty when unrestricted).
    pub options: Vec<String>,
    /// The form file, as the user named it.
    pub file: String,
    /// Where the entry's `name` stands in that file.
    pub span: Span,
}

/// How one values file sets one name.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    /// A catalog form entry: its typed default and its declaration.
    Form(Data, Declaration),
    /// A plain mapping's value, typed when the files are merged (a form may declare its kind).
    Plain(Node),
}

/// One name set by a values file, with where it is set.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The name the template reads as `.Name`.
    pub name: String,
    /// Where the name is set (the form entry's `name`, or the plain mapping's key).
    pub span: Span,
    /// The value.
    pub setting: Setting,
}

/// One values file, read but not yet merged.
#[derive(Debug, Clone, PartialEq)]
pub struct ValuesFile {
    /// The file as the user named it.
    pub label: String,
    /// True for a catalog form, false for a plain mapping.
    pub is_form: bool,
    /// The names it sets, in file order.
    pub entries: Vec<Entry>,
}

/// Reads a values file from `path` ([`parse_values_str`]). Errors: unreadable, oversized or
/// non-UTF-8 files, and every problem of the content, each with file, line and column.
pub fn load_values(path: &Path) -> Result<ValuesFile, Diagnostics> {
    let text = read_text(path)?;
    parse_values_str(&path.display().to_string(), &text)
}

/// Parses a values file's text; `label` names it in messages. A mapping whose only key is
/// `values`, holding a list, is a catalog form; any other mapping is plain; an empty file sets
/// nothing. Errors (every one, each positioned): invalid YAML, more than one document, a
/// top level that is not a mapping, and every form problem (unknown or duplicate keys, a
/// missing `name`, no or several `*_value`s, a value of the wrong type, a `string_value` that
/// is not one of its `options_input` choices, a name set twice).
pub fn parse_values_str(label: &str, text: &str) -> Result<ValuesFile, Diagnostics> {
    let docs = load_documents(text, Limits::default()).map_err(|e| {
        one(
            label,
            e.span,
            "",
            format!("invalid YAML in a values file: {}", e.message),
            None,
        )
    })?;
    let doc = match docs.as_slice() {
        [] => {
            return Ok(ValuesFile {
                label: label.to_string(),
                is_form: false,
                entries: Vec::new(),
            });
        }
        [d] => d,
        [_, second, ..] => {
            return Err(one(
                label,
                second.span,
                "",
                "a values file holds one YAML document; this is a second one".into(),
                None,
            ));
        }
    };
    if doc.is_null() {
        return Ok(ValuesFile {
            label: label.to_string(),
            is_form: false,
            entries: Vec::new(),
        });
    }
    let Some(map) = doc.as_map() else {
        return Err(one(
            label,
            doc.span,
            "",
            format!(
                "expected a mapping of values (`Name: value`) or a catalog form (`values:` list), found {}",
                doc.kind_name()
            ),
            None,
        ));
    };
    let is_form = map.iter().any(|(k, v)| k.name == "values" && v.as_seq().is_some());
    if is_form {
        form::read_form(label, doc)
    } else {
        plain::read_plain(label, map)
    }
}

fn one(file: &str, span: Span, field: &str, message: String, hint: Option<String>) -> Diagnostics {
    Diagnostics(vec![Diagnostic {
        file: file.to_string(),
        line: span.line,
        col: span.col,
        field: field.to_string(),
        message,
        hint,
    }])
}

/// One value after merging: what the template reads and which file set it.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The value.
    pub data: Data,
    /// The file that set it last, as the user named it.
    pub file: String,
    /// Where that file sets it.
    pub span: Span,
}

/// The merged values of one or more files: the data a template's `.Name` reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Values {
    values: BTreeMap<String, Value>,
    files: Vec<String>,
}

impl Values {
    /// Merges `files` in order (later keys replace earlier ones; mappings merge key by key) and
    /// checks every value against the catalog forms' declarations (the last form to declare a
    /// name decides its kind). Errors: a value that does not fit its declaration (wrong type, not
    /// one of the options), naming the file and line of the value and of the declaration.
    pub fn merge(files: &[ValuesFile]) -> Result<Values, Diagnostics> {
        let mut declared: BTreeMap<&str, &Declaration> = BTreeMap::new();
        for f in files {
            for e in &f.entries {
                if let Setting::Form(_, d) = &e.setting {
                    declared.insert(&e.name, d);
                }
            }
        }
        let mut diags = Vec::new();
        let mut values: BTreeMap<String, Value> = BTreeMap::new();
        for f in files {
            for e in &f.entries {
                let decl = declared.get(e.name.as_str()).copied();
                let data = match &e.setting {
                    Setting::Form(d, _) => d.clone(),
                    Setting::Plain(node) => match decl {
                        Some(d) => match plain::typed(node, d) {
                            Ok(v) => v,
                            Err(msg) => {
                                diags.push(Diagnostic {
                                    file: f.label.clone(),
                                    line: node.span.line,
                                    col: node.span.col,
                                    field: e.name.clone(),
                                    message: msg,
                                    hint: Some(format!(
                                        "`{}` is declared as {} in {}:{}",
                                        e.name,
                                        d.kind.key(),
                                        d.file,
                                        d.span
                                    )),
                                });
                                continue;
                            }
                        },
                        None => plain::core(node),
                    },
                };
                let merged = match (values.remove(&e.name), data) {
                    (
                        Some(Value {
                            data: Data::Map(old), ..
                        }),
                        Data::Map(new),
                    ) => Data::Map(deep_merge(old, new)),
                    (_, d) => d,
                };
                values.insert(
                    e.name.clone(),
                    Value {
                        data: merged,
                        file: f.label.clone(),
                        span: e.span,
                    },
                );
            }
        }
        for (name, d) in &declared {
            let Some(v) = values.get(*name) else { continue };
            if let Data::String(s) = &v.data
                && !d.options.is_empty()
                && !d.options.iter().any(|o| o == s)
            {
                let hint = match closest(s, d.options.iter().map(String::as_str)) {
                    Some(c) => format!("did you mean `{c}`? (options_input of {}:{})", d.file, d.span),
                    None => format!("the options_input of {}:{}", d.file, d.span),
                };
                diags.push(Diagnostic {
                    file: v.file.clone(),
                    line: v.span.line,
                    col: v.span.col,
                    field: (*name).to_string(),
                    message: format!("expected one of {}, found `{s}`", d.options.join(", ")),
                    hint: Some(hint),
                });
            }
        }
        if !diags.is_empty() {
            return Err(Diagnostics(diags));
        }
        Ok(Values {
            values,
            files: files.iter().map(|f| f.label.clone()).collect(),
        })
    }

    /// The value of `name`, if some file sets it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// Every name and value, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The values files merged, as the user named them, in order.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// An unambiguous encoding of every name and value (not of the files they came from), for
    /// the render seed.
    pub fn encode(&self) -> Vec<u8> {
        let map: BTreeMap<String, Data> = self.values.iter().map(|(k, v)| (k.clone(), v.data.clone())).collect();
        let mut out = Vec::new();
        Data::Map(map).encode(&mut out);
        out
    }
}

/// Helm's merge: keys of `new` replace those of `old`, except that two mappings merge.
fn deep_merge(mut old: BTreeMap<String, Data>, new: BTreeMap<String, Data>) -> BTreeMap<String, Data> {
    for (k, v) in new {
        let merged = match (old.remove(&k), v) {
            (Some(Data::Map(a)), Data::Map(b)) => Data::Map(deep_merge(a, b)),
            (_, v) => v,
        };
        old.insert(k, merged);
    }
    old
}

#[cfg(test)]
mod tests;
