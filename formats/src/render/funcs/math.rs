//! Integer functions: `add`, `sub`, `mul`, `max`, `int`. Arguments are converted with sprig's
//! `toInt64` ([`to_int`]); results are 64-bit integers and overflow is an error (Go wraps).

use gotmpl::{FuncMap, Value};

use super::{add, arity, at_least, err, to_int};

pub(super) fn register(m: &mut FuncMap) {
    // sprig `add a b ...`: the sum of every argument.
    add(m, "add", |a| {
        let mut sum: i64 = 0;
        for (i, v) in a.iter().enumerate() {
            sum = sum
                .checked_add(to_int("add", v, i)?)
                .ok_or_else(|| err("add", "overflow"))?;
        }
        Ok(Value::Int(sum))
    });
    // sprig `sub a b`: a - b.
    add(m, "sub", |a| {
        arity("sub", a, 2)?;
        let (x, y) = (to_int("sub", &a[0], 0)?, to_int("sub", &a[1], 1)?);
        Ok(Value::Int(x.checked_sub(y).ok_or_else(|| err("sub", "overflow"))?))
    });
    // sprig `mul a b ...`: the product of every argument.
    add(m, "mul", |a| {
        at_least("mul", a, 1)?;
        let mut p: i64 = 1;
        for (i, v) in a.iter().enumerate() {
            p = p
                .checked_mul(to_int("mul", v, i)?)
                .ok_or_else(|| err("mul", "overflow"))?;
        }
        Ok(Value::Int(p))
    });
    // sprig `max a b ...`: the largest argument.
    add(m, "max", |a| {
        at_least("max", a, 1)?;
        let mut best = to_int("max", &a[0], 0)?;
        for (i, v) in a.iter().enumerate().skip(1) {
            best = best.max(to_int("max", v, i)?);
        }
        Ok(Value::Int(best))
    });
    // sprig `int v`: v as an integer (toInt).
    add(m, "int", |a| {
        arity("int", a, 1)?;
        Ok(Value::Int(to_int("int", &a[0], 0)?))
    });
}
