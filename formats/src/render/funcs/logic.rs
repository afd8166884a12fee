//! `default`, `empty` and `fail`.

use gotmpl::{FuncMap, TemplateError, Value};

use super::{add, arity, at_least, is_empty, strval};

/// The prefix of the error `fail` raises; the renderer turns it into
/// [`RenderError::Failed`](crate::render::RenderError::Failed).
pub(in crate::render) const FAIL_PREFIX: &str = "fail: ";

pub(super) fn register(m: &mut FuncMap) {
    // sprig `default d v`: v unless it is empty (nil, false, 0, "", empty list or map), else d.
    // With no v (`default d` fed nothing) it is d.
    add(m, "default", |a| {
        at_least("default", a, 1)?;
        match a.get(1) {
            Some(v) if !is_empty(v) => Ok(v.clone()),
            _ => Ok(a[0].clone()),
        }
    });
    // sprig `empty v`: true for nil, false, 0, "", and empty lists and maps.
    add(m, "empty", |a| {
        arity("empty", a, 1)?;
        Ok(Value::Bool(is_empty(&a[0])))
    });
    // sprig `fail msg`: stops rendering with the error `msg`.
    add(m, "fail", |a| {
        arity("fail", a, 1)?;
        Err(TemplateError::Exec(format!(
            "{FAIL_PREFIX}{}",
            strval("fail", &a[0], 0)?
        )))
    });
}
