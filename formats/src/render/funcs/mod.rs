//! The sprig-style functions the CIQ catalog templates use that Go's `text/template` (and so
//! the `gotmpl` crate) lacks. Only those: a template calling any other function is refused
//! before rendering, naming the function and its file:line:col (see [`super::check`]).
//!
//! Each function follows its [sprig](https://masterminds.github.io/sprig/) definition, with one
//! deliberate difference: where sprig would turn a missing value (Go's `nil`) into `<nil>` or
//! `0`, fedvol's functions refuse it ("argument 1 is not set"), so a value no values file sets
//! never slips into a rendered workflow. Functions that test or carry a value take an unset one:
//! `default` and `empty` (as empty), `list`, `append` and `dict` (as an item), and Go's own
//! `not`, `and`, `or` and `if`. Errors name the function; the renderer adds the file, line and
//! column of the call.
//!
//! `randInt` and `now` are deterministic: they draw from the render seed (see
//! [`super::seed`]), so the same template and values always render the same text.

mod lists;
pub(super) mod logic;
mod math;
pub(super) mod random;
mod strings;

use gotmpl::{FuncMap, TemplateError, Value};

use super::seed::Rng;

/// The functions fedvol adds to Go's built-ins, sorted by name.
pub const NAMES: [&str; 28] = [
    "add",
    "append",
    "b64enc",
    "base",
    "default",
    "dict",
    "empty",
    "fail",
    "hasPrefix",
    "int",
    "join",
    "list",
    "lower",
    "max",
    "mul",
    "now",
    "randInt",
    "replace",
    "splitList",
    "sub",
    "substr",
    "toJson",
    "toString",
    "trim",
    "trimAll",
    "trimPrefix",
    "trimSuffix",
    "unixEpoch",
];

/// Go `text/template`'s own functions (`gotmpl` provides them).
pub const BUILTINS: [&str; 19] = [
    "and", "call", "eq", "ge", "gt", "html", "index", "js", "le", "len", "lt", "ne", "not", "or", "print", "printf",
    "println", "slice", "urlquery",
];

/// Every function of [`NAMES`], drawing random numbers from `rng`.
pub fn functions(rng: &Rng) -> FuncMap {
    let mut m = FuncMap::new();
    strings::register(&mut m);
    lists::register(&mut m);
    math::register(&mut m);
    logic::register(&mut m);
    random::register(&mut m, rng);
    m
}

/// Registers `f` under `name`.
fn add(m: &mut FuncMap, name: &str, f: impl Fn(&[Value]) -> gotmpl::Result<Value> + Send + Sync + 'static) {
    m.insert(name.to_string(), std::sync::Arc::new(f));
}

/// An error of function `name`: `name: message`.
fn err(name: &str, message: impl std::fmt::Display) -> TemplateError {
    TemplateError::Exec(format!("{name}: {message}"))
}

/// Checks that `name` got exactly `n` arguments.
fn arity(name: &str, args: &[Value], n: usize) -> gotmpl::Result<()> {
    if args.len() == n {
        Ok(())
    } else {
        Err(err(
            name,
            format!(
                "takes {n} argument{}, got {}",
                if n == 1 { "" } else { "s" },
                args.len()
            ),
        ))
    }
}

/// Checks that `name` got at least `n` arguments.
fn at_least(name: &str, args: &[Value], n: usize) -> gotmpl::Result<()> {
    if args.len() >= n {
        Ok(())
    } else {
        Err(err(name, format!("takes at least {n} arguments, got {}", args.len())))
    }
}

/// The error for an unset (nil) argument `i` (0-based) of `name`.
fn unset(name: &str, i: usize) -> TemplateError {
    err(
        name,
        format!(
            "argument {} is not set (no value: is it missing from the values files?)",
            i + 1
        ),
    )
}

/// Argument `i` of `name` as text; a string only, as sprig's `string` parameters are.
fn text<'a>(name: &str, args: &'a [Value], i: usize) -> gotmpl::Result<&'a str> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s),
        Some(Value::Nil) => Err(unset(name, i)),
        Some(v) => Err(err(
            name,
            format!("argument {} must be a string, got {} `{v}`", i + 1, v.type_name()),
        )),
        None => Err(err(name, format!("argument {} is missing", i + 1))),
    }
}

/// Go's `%v` of a value (sprig's `strval`): a string as it is, anything else as Go prints it.
/// A nil argument `i` of `name` is refused.
fn strval(name: &str, v: &Value, i: usize) -> gotmpl::Result<String> {
    match v {
        Value::String(s) => Ok(s.to_string()),
        Value::Nil => Err(unset(name, i)),
        other => Ok(other.to_string()),
    }
}

/// Sprig's `toInt64` (spf13/cast `ToInt64`): integers as they are, floats truncated, booleans
/// 1/0, strings parsed as Go integer literals (`"42"`, `"0x2a"`, `"3.0"`); the empty string is
/// 0 as in sprig. Unlike sprig (which silently gives 0), other text and nil are errors.
fn to_int(name: &str, v: &Value, i: usize) -> gotmpl::Result<i64> {
    match v {
        Value::Int(n) => Ok(*n),
        Value::Uint(n) => i64::try_from(*n).map_err(|_| err(name, format!("{n} does not fit an int64"))),
        Value::Float(f) if f.is_finite() => Ok(*f as i64),
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::String(s) => {
            parse_int(s).ok_or_else(|| err(name, format!("argument {} is `{s}`, not a whole number", i + 1)))
        }
        Value::Nil => Err(unset(name, i)),
        other => Err(err(
            name,
            format!("argument {} must be a number, got {}", i + 1, other.type_name()),
        )),
    }
}

/// A Go integer literal (`strconv.ParseInt(s, 0, 64)` after cast's `3.0` -> `3` clean-up).
fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return Some(0);
    }
    let s = match s.find('.') {
        Some(dot) if s[dot + 1..].bytes().all(|b| b == b'0') => &s[..dot],
        _ => s,
    };
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let body = body.replace('_', "");
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(h) = lower.strip_prefix("0x") {
        (16, h.to_string())
    } else if let Some(o) = lower.strip_prefix("0o") {
        (8, o.to_string())
    } else if let Some(b) = lower.strip_prefix("0b") {
        (2, b.to_string())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string())
    } else {
        (10, lower)
    };
    if digits.is_empty() {
        return None;
    }
    let v = i128::from_str_radix(&digits, radix).ok()?;
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

/// Sprig's `empty`: nil, false, 0, "" and empty lists and maps are empty; anything else is not.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Bool(b) => !b,
        Value::Int(n) => *n == 0,
        Value::Uint(n) => *n == 0,
        Value::Float(f) => *f == 0.0,
        Value::String(s) => s.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Function(_) => false,
    }
}

#[cfg(test)]
mod tests;
