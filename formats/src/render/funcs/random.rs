//! The functions of chance and time, made deterministic: `randInt`, `now`, `unixEpoch`.
//!
//! Both draw from the render's [`Rng`] (seeded from the template's file name and the values,
//! see [`crate::render::seed`]): the same inputs render the same numbers, so a
//! decision taken on a rendered template can be replayed.

use gotmpl::{FuncMap, Value};

use super::{add, arity, err, to_int};
use crate::render::seed::Rng;

/// The earliest instant `now` gives: 2023-11-14T22:13:20Z (Unix time 1,700,000,000).
pub(in crate::render) const NOW_FROM: i64 = 1_700_000_000;
/// `now` falls within this many seconds after [`NOW_FROM`] (about 3 years).
pub(in crate::render) const NOW_SPAN: u64 = 100_000_000;

pub(super) fn register(m: &mut FuncMap, rng: &Rng) {
    // sprig `randInt min max`: rand.Intn(max-min) + min, a number in [min, max). Here the next
    // number of the render's seeded generator.
    let r = rng.clone();
    add(m, "randInt", move |a| {
        arity("randInt", a, 2)?;
        let (lo, hi) = (to_int("randInt", &a[0], 0)?, to_int("randInt", &a[1], 1)?);
        let span = i128::from(hi) - i128::from(lo);
        if span <= 0 {
            return Err(err("randInt", format!("needs min < max, got {lo} and {hi}")));
        }
        let pick = r.below(u64::try_from(span).map_err(|_| err("randInt", "range too large"))?);
        let v = i128::from(lo) + i128::from(pick);
        Ok(Value::Int(
            i64::try_from(v).map_err(|_| err("randInt", "range too large"))?,
        ))
    });
    // sprig `now`: the current time. Here NOT the wall clock: an instant (whole seconds since
    // 1970) drawn from the render's generator, between 2023-11-14 and early 2027, so names
    // built from it differ between inputs but never between renders of the same input.
    let r = rng.clone();
    add(m, "now", move |a| {
        arity("now", a, 0)?;
        Ok(Value::Int(NOW_FROM + r.below(NOW_SPAN) as i64))
    });
    // sprig `unixEpoch t`: t's Unix time in seconds, as a string. Takes what `now` gives.
    add(m, "unixEpoch", |a| {
        arity("unixEpoch", a, 1)?;
        match &a[0] {
            Value::Int(t) => Ok(Value::String(t.to_string().into())),
            other => Err(err(
                "unixEpoch",
                format!("takes a time from `now`, got {} `{other}`", other.type_name()),
            )),
        }
    });
}
