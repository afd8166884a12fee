//! List and map functions: `list`, `append`, `join`, `dict`.

use std::collections::BTreeMap;
use std::sync::Arc;

use gotmpl::{FuncMap, Value};

use super::{add, arity, err, strval, text};

pub(super) fn register(m: &mut FuncMap) {
    // sprig `list a b ...`: a list of the arguments, in order.
    add(m, "list", |a| Ok(Value::List(a.iter().cloned().collect())));
    // sprig `append list v` (= `push`): a new list, `list` with `v` added at the end.
    add(m, "append", |a| {
        arity("append", a, 2)?;
        match &a[0] {
            Value::List(l) => {
                let mut v: Vec<Value> = l.iter().cloned().collect();
                v.push(a[1].clone());
                Ok(Value::List(v.into()))
            }
            other => Err(err(
                "append",
                format!("cannot append to a {}; argument 1 must be a list", other.type_name()),
            )),
        }
    });
    add(m, "join", |a| {
        arity("join", a, 2)?;
        let sep = text("join", a, 0)?;
        Ok(Value::String(join(sep, &a[1])?.into()))
    });
    add(m, "dict", |a| Ok(Value::Map(Arc::new(dict(a)?))));
}

/// Sprig's `join sep v`: the items of list `v` as text (`strval`), nil items skipped, joined by
/// `sep`; a value that is not a list is joined as a list of one.
pub(super) fn join(sep: &str, v: &Value) -> gotmpl::Result<String> {
    let parts: Vec<String> = match v {
        Value::List(items) => items
            .iter()
            .filter(|x| !matches!(x, Value::Nil))
            .map(|x| strval("join", x, 1))
            .collect::<gotmpl::Result<_>>()?,
        other => vec![strval("join", other, 1)?],
    };
    Ok(parts.join(sep))
}

/// Sprig's `dict k1 v1 k2 v2 ...`: a map; keys are taken as text (`strval`); a last key without
/// a value maps to "".
pub(super) fn dict(a: &[Value]) -> gotmpl::Result<BTreeMap<Arc<str>, Value>> {
    let mut m = BTreeMap::new();
    for (i, pair) in a.chunks(2).enumerate() {
        let key = strval("dict", &pair[0], 2 * i)?;
        let value = pair.get(1).cloned().unwrap_or_else(|| Value::String("".into()));
        m.insert(Arc::from(key.as_str()), value);
    }
    Ok(m)
}
