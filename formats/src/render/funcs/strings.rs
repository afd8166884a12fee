//! String functions: `trim`, `trimAll`, `trimPrefix`, `trimSuffix`, `hasPrefix`, `lower`,
//! `replace`, `substr`, `base`, `splitList`, `toString`, `b64enc`, `toJson`. Argument order is
//! sprig's: the string operated on comes last, so it can be piped (`.X | trimPrefix "/"`).

use std::sync::Arc;

use base64::Engine;
use gotmpl::{FuncMap, Value};

use super::{add, arity, err, strval, text, to_int};

fn string(s: impl Into<Arc<str>>) -> Value {
    Value::String(s.into())
}

pub(super) fn register(m: &mut FuncMap) {
    // sprig `trim`: strings.TrimSpace(s).
    add(m, "trim", |a| {
        arity("trim", a, 1)?;
        Ok(string(text("trim", a, 0)?.trim()))
    });
    // sprig `trimAll cutset s`: strings.Trim(s, cutset), every leading and trailing character
    // found in cutset removed.
    add(m, "trimAll", |a| {
        arity("trimAll", a, 2)?;
        let cut = text("trimAll", a, 0)?;
        Ok(string(text("trimAll", a, 1)?.trim_matches(|c| cut.contains(c))))
    });
    // sprig `trimPrefix prefix s`: strings.TrimPrefix(s, prefix), once.
    add(m, "trimPrefix", |a| {
        arity("trimPrefix", a, 2)?;
        let (p, s) = (text("trimPrefix", a, 0)?, text("trimPrefix", a, 1)?);
        Ok(string(s.strip_prefix(p).unwrap_or(s)))
    });
    // sprig `trimSuffix suffix s`: strings.TrimSuffix(s, suffix), once.
    add(m, "trimSuffix", |a| {
        arity("trimSuffix", a, 2)?;
        let (p, s) = (text("trimSuffix", a, 0)?, text("trimSuffix", a, 1)?);
        Ok(string(s.strip_suffix(p).unwrap_or(s)))
    });
    // sprig `hasPrefix prefix s`: strings.HasPrefix(s, prefix).
    add(m, "hasPrefix", |a| {
        arity("hasPrefix", a, 2)?;
        let (p, s) = (text("hasPrefix", a, 0)?, text("hasPrefix", a, 1)?);
        Ok(Value::Bool(s.starts_with(p)))
    });
    // sprig `lower`: strings.ToLower(s).
    add(m, "lower", |a| {
        arity("lower", a, 1)?;
        Ok(string(text("lower", a, 0)?.to_lowercase()))
    });
    // sprig `replace old new s`: strings.Replace(s, old, new, -1), every occurrence.
    add(m, "replace", |a| {
        arity("replace", a, 3)?;
        let (old, new, s) = (text("replace", a, 0)?, text("replace", a, 1)?, text("replace", a, 2)?);
        Ok(string(s.replace(old, new)))
    });
    add(m, "substr", |a| {
        arity("substr", a, 3)?;
        let start = to_int("substr", &a[0], 0)?;
        let end = to_int("substr", &a[1], 1)?;
        Ok(string(substr(start, end, text("substr", a, 2)?)?))
    });
    add(m, "base", |a| {
        arity("base", a, 1)?;
        Ok(string(base(text("base", a, 0)?)))
    });
    add(m, "splitList", |a| {
        arity("splitList", a, 2)?;
        let (sep, s) = (text("splitList", a, 0)?, text("splitList", a, 1)?);
        Ok(Value::List(split_list(sep, s).into_iter().map(string).collect()))
    });
    // sprig `toString`: strval(v), a string as it is and anything else as Go's `%v` prints it.
    add(m, "toString", |a| {
        arity("toString", a, 1)?;
        Ok(string(strval("toString", &a[0], 0)?))
    });
    // sprig `b64enc`: base64.StdEncoding (padded) of the string's bytes.
    add(m, "b64enc", |a| {
        arity("b64enc", a, 1)?;
        Ok(string(
            base64::engine::general_purpose::STANDARD.encode(text("b64enc", a, 0)?),
        ))
    });
    add(m, "toJson", |a| {
        arity("toJson", a, 1)?;
        let mut out = String::new();
        to_json(&a[0], &mut out)?;
        Ok(string(out))
    });
}

/// Sprig's `substr start end s` on bytes, as Go slices strings: a negative start means from the
/// beginning (`s[:end]`); a negative end, or one past the string, means to the end
/// (`s[start:]`); otherwise `s[start:end]`. Where Go would panic (start past end or past the
/// string, a cut inside a UTF-8 character) this is an error.
pub(super) fn substr(start: i64, end: i64, s: &str) -> gotmpl::Result<&str> {
    let len = s.len() as i64;
    let (from, to) = if start < 0 {
        (0, end)
    } else if end < 0 || end > len {
        (start, len)
    } else {
        (start, end)
    };
    if from > to || to > len || to < 0 {
        return Err(err(
            "substr",
            format!("cannot take bytes {start} to {end} of a string of {len} bytes"),
        ));
    }
    s.get(from as usize..to as usize)
        .ok_or_else(|| err("substr", format!("bytes {from} to {to} cut a UTF-8 character in two")))
}

/// Go's `path.Base`: the last slash-separated element, trailing slashes ignored; `"."` for an
/// empty path and `"/"` for a path of slashes only.
pub(super) fn base(p: &str) -> &str {
    if p.is_empty() {
        return ".";
    }
    let trimmed = p.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    match trimmed.rfind('/') {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}

/// Go's `strings.Split(s, sep)`: the pieces between separators (one empty piece for an empty
/// string); an empty separator splits after each UTF-8 character.
pub(super) fn split_list<'a>(sep: &str, s: &'a str) -> Vec<&'a str> {
    if sep.is_empty() {
        return s.char_indices().map(|(i, c)| &s[i..i + c.len_utf8()]).collect();
    }
    s.split(sep).collect()
}

/// Go's `json.Marshal` as sprig's `toJson` uses it: map keys sorted; strings escaped as Go
/// does (`<`, `>`, `&`, U+2028 and U+2029 as `\u....`); whole floats without a fraction.
pub(super) fn to_json(v: &Value, out: &mut String) -> gotmpl::Result<()> {
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(n) => out.push_str(&n.to_string()),
        Value::Uint(n) => out.push_str(&n.to_string()),
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(err("toJson", format!("unsupported value: {f}")));
            }
            out.push_str(&go_float(*f));
        }
        Value::String(s) => json_string(s, out),
        Value::List(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                to_json(x, out)?;
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(k, out);
                out.push(':');
                to_json(x, out)?;
            }
            out.push('}');
        }
        Value::Function(_) => return Err(err("toJson", "unsupported type: func")),
    }
    Ok(())
}

/// Go's JSON float: `strconv.FormatFloat(f, 'f', -1, 64)` for 1e-6 <= |f| < 1e21, else the
/// shortest `e` form with a signed exponent (`1e+21`, `1e-7`).
fn go_float(f: f64) -> String {
    let a = f.abs();
    if a == 0.0 || (1e-6..1e21).contains(&a) {
        format!("{f}")
    } else {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => s,
        }
    }
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}
