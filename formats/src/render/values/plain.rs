//! Reading a plain values mapping (`Name: value`) and typing its YAML nodes.

use std::collections::BTreeMap;

use super::{Data, Declaration, Entry, FormKind, Setting, ValuesFile};
use crate::yaml::decode::describe;
use crate::yaml::{Diagnostic, Diagnostics, Key, Node, ScalarStyle, Value as YamlValue};

/// Reads a plain mapping: each key sets one name. Duplicate keys are errors.
pub(super) fn read_plain(label: &str, map: &[(Key, Node)]) -> Result<ValuesFile, Diagnostics> {
    let mut diags = Vec::new();
    let mut first: BTreeMap<&str, usize> = BTreeMap::new();
    let mut entries = Vec::new();
    for (k, v) in map {
        if let Some(line) = first.get(k.name.as_str()) {
            diags.push(Diagnostic {
                file: label.to_string(),
                line: k.span.line,
                col: k.span.col,
                field: k.name.clone(),
                message: format!("duplicate key (first at line {line})"),
                hint: None,
            });
            continue;
        }
        first.insert(&k.name, k.span.line);
        entries.push(Entry {
            name: k.name.clone(),
            span: k.span,
            setting: Setting::Plain(v.clone()),
        });
    }
    if !diags.is_empty() {
        return Err(Diagnostics(diags));
    }
    Ok(ValuesFile {
        label: label.to_string(),
        is_form: false,
        entries,
    })
}

/// A node typed by YAML 1.2's core schema: plain `~`/`null`/empty is null, `true`/`false` a
/// boolean, decimal (or `0x`/`0o`) digits an integer, a decimal with a fraction or exponent a
/// float (`.inf`, `.nan` too); anything else, and anything quoted, a string. Lists and mappings
/// are typed item by item.
pub(super) fn core(node: &Node) -> Data {
    match &node.value {
        YamlValue::Seq(items) => Data::List(items.iter().map(core).collect()),
        YamlValue::Map(entries) => Data::Map(entries.iter().map(|(k, v)| (k.name.clone(), core(v))).collect()),
        YamlValue::Scalar(s, ScalarStyle::Quoted) => Data::String(s.clone()),
        YamlValue::Scalar(s, ScalarStyle::Plain) => core_scalar(s),
    }
}

fn core_scalar(s: &str) -> Data {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Data::Null,
        "true" | "True" | "TRUE" => return Data::Bool(true),
        "false" | "False" | "FALSE" => return Data::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Data::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Data::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Data::Float(f64::NAN),
        _ => {}
    }
    if let Some(i) = core_int(s) {
        return Data::Int(i);
    }
    let float_like =
        s.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) && s.bytes().any(|b| b.is_ascii_digit());
    if float_like && let Ok(f) = s.parse::<f64>() {
        return Data::Float(f);
    }
    Data::String(s.to_string())
}

/// `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+` (YAML 1.2 core) that fit an i64.
fn core_int(s: &str) -> Option<i64> {
    if let Some(h) = s.strip_prefix("0x") {
        return i64::from_str_radix(h, 16).ok().filter(|_| !h.is_empty());
    }
    if let Some(o) = s.strip_prefix("0o") {
        return i64::from_str_radix(o, 8).ok().filter(|_| !o.is_empty());
    }
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// A plain file's node for a name a catalog form declares, typed by the declaration. Errors
/// say what the declaration expects and what was found.
pub(super) fn typed(node: &Node, decl: &Declaration) -> Result<Data, String> {
    let scalar = match &node.value {
        YamlValue::Scalar(s, style) if !node.is_null() => Some((s.as_str(), *style)),
        _ => None,
    };
    match (decl.kind, scalar) {
        (FormKind::String | FormKind::Secret, Some((s, _))) => Ok(Data::String(s.to_string())),
        (FormKind::Uint, Some((s, ScalarStyle::Plain))) => match s.replace('_', "").parse::<i64>() {
            Ok(v) if v >= 0 => Ok(Data::Int(v)),
            _ => Err(format!("expected a whole number >= 0, found {}", describe(node))),
        },
        (FormKind::Bool, Some((s, ScalarStyle::Plain))) if s.eq_ignore_ascii_case("true") => Ok(Data::Bool(true)),
        (FormKind::Bool, Some((s, ScalarStyle::Plain))) if s.eq_ignore_ascii_case("false") => Ok(Data::Bool(false)),
        (FormKind::Bool, _) => Err(format!("expected true or false, found {}", describe(node))),
        (FormKind::Uint, _) => Err(format!("expected a whole number >= 0, found {}", describe(node))),
        (FormKind::String | FormKind::Secret, None) => Err(format!("expected a string, found {}", describe(node))),
    }
}
