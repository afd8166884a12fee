//! One test per function, against the semantics its documentation gives: sprig
//! (<https://masterminds.github.io/sprig/>, functions `strings`, `lists`, `math`, `defaults`,
//! `date`, `encoding`) and Go (`strings`, `path`, `encoding/json`, `math/rand`).

use super::*;

fn call(name: &str, args: &[Value]) -> gotmpl::Result<Value> {
    let fns = functions(&Rng::new(7));
    let f = fns.get(name).unwrap_or_else(|| panic!("{name} is registered"));
    f(args)
}

fn s(x: &str) -> Value {
    Value::String(x.into())
}

fn ok(name: &str, args: &[Value]) -> Value {
    call(name, args).unwrap_or_else(|e| panic!("{name}{args:?}: {e}"))
}

fn fails(name: &str, args: &[Value]) -> String {
    match call(name, args) {
        Ok(v) => panic!("{name}{args:?} gave {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_listed_function_is_registered_and_no_other() {
    let fns = functions(&Rng::new(0));
    let names: Vec<&str> = fns.keys().map(String::as_str).collect();
    assert_eq!(names, NAMES.to_vec());
    for b in BUILTINS {
        assert!(!NAMES.contains(&b), "{b} is Go's own");
    }
}

#[test]
fn trim_removes_surrounding_white_space() {
    // sprig `trim`: "removes space from either side of a string" (strings.TrimSpace).
    assert_eq!(ok("trim", &[s("  a b \n\t")]), s("a b"));
    assert!(fails("trim", &[Value::Nil]).contains("trim: argument 1 is not set"));
    assert!(fails("trim", &[Value::Int(1)]).contains("must be a string"));
}

#[test]
fn trim_all_removes_the_given_characters_from_both_ends() {
    // sprig: `trimAll "$" "$5.00"` gives `5.00` (strings.Trim(s, cutset)).
    assert_eq!(ok("trimAll", &[s("$"), s("$5.00")]), s("5.00"));
    assert_eq!(ok("trimAll", &[s("/"), s("//a/b//")]), s("a/b"));
}

#[test]
fn trim_prefix_and_suffix_remove_one_occurrence() {
    // sprig: `trimPrefix "-" "-hello"` gives `hello`; `trimSuffix "-" "hello-"` gives `hello`.
    assert_eq!(ok("trimPrefix", &[s("-"), s("--hello")]), s("-hello"));
    assert_eq!(ok("trimPrefix", &[s("x"), s("hello")]), s("hello"));
    assert_eq!(ok("trimSuffix", &[s(".git"), s("repo.git")]), s("repo"));
}

#[test]
fn has_prefix_tests_the_start() {
    // sprig `hasPrefix "cat" "catch"` is true (strings.HasPrefix).
    assert_eq!(ok("hasPrefix", &[s("cat"), s("catch")]), Value::Bool(true));
    assert_eq!(ok("hasPrefix", &[s("volume://"), s("/data")]), Value::Bool(false));
}

#[test]
fn lower_lowercases() {
    // sprig `lower "HELLO"` gives `hello`.
    assert_eq!(ok("lower", &[s("HeLLo É")]), s("hello é"));
}

#[test]
fn replace_replaces_every_occurrence() {
    // sprig: `"I Am Henry VIII" | replace " " "-"` gives `I-Am-Henry-VIII`.
    assert_eq!(
        ok("replace", &[s(" "), s("-"), s("I Am Henry VIII")]),
        s("I-Am-Henry-VIII")
    );
}

#[test]
fn substr_cuts_bytes_like_sprig() {
    // sprig `substr 0 5 "hello world"` gives `hello`; a negative start means from 0, an end
    // past the string (or negative) means to the end.
    assert_eq!(
        ok("substr", &[Value::Int(0), Value::Int(5), s("hello world")]),
        s("hello")
    );
    assert_eq!(ok("substr", &[Value::Int(2), Value::Int(4), s("2024R2")]), s("24"));
    assert_eq!(ok("substr", &[Value::Int(-1), Value::Int(2), s("abc")]), s("ab"));
    assert_eq!(ok("substr", &[Value::Int(1), Value::Int(99), s("abc")]), s("bc"));
    // Go would panic on these; fedvol says why.
    assert!(fails("substr", &[Value::Int(5), Value::Int(2), s("abcdef")]).contains("cannot take bytes 5 to 2"));
    assert!(fails("substr", &[Value::Int(0), Value::Int(1), s("é")]).contains("UTF-8"));
}

#[test]
fn base_is_gos_path_base() {
    // Go path.Base: "Base returns the last element of path. Trailing slashes are removed before
    // extracting the last element. If the path is empty, Base returns ".". If the path consists
    // entirely of slashes, Base returns "/"."
    assert_eq!(ok("base", &[s("https://x/y/repo.git")]), s("repo.git"));
    assert_eq!(ok("base", &[s("a/b/")]), s("b"));
    assert_eq!(ok("base", &[s("")]), s("."));
    assert_eq!(ok("base", &[s("///")]), s("/"));
}

#[test]
fn split_list_is_strings_split() {
    // sprig `splitList "$" "foo$bar$baz"` gives `[foo bar baz]`; Go's strings.Split of "" is [""].
    assert_eq!(
        ok("splitList", &[s("$"), s("foo$bar$baz")]),
        Value::List(vec![s("foo"), s("bar"), s("baz")].into())
    );
    assert_eq!(ok("splitList", &[s(","), s("")]), Value::List(vec![s("")].into()));
    assert_eq!(
        ok("splitList", &[s(""), s("ab")]),
        Value::List(vec![s("a"), s("b")].into())
    );
}

#[test]
fn to_string_prints_like_go() {
    // sprig `toString`: "Convert to a string" (strval: a string as is, else fmt %v).
    assert_eq!(ok("toString", &[Value::Int(42)]), s("42"));
    assert_eq!(ok("toString", &[s("x")]), s("x"));
    assert_eq!(ok("toString", &[Value::Bool(true)]), s("true"));
    assert!(fails("toString", &[Value::Nil]).contains("not set"));
}

#[test]
fn b64enc_is_standard_padded_base64() {
    // sprig `b64enc`: base64.StdEncoding (RFC 4648 §4, with padding).
    assert_eq!(ok("b64enc", &[s("hello")]), s("aGVsbG8="));
    assert_eq!(ok("b64enc", &[s("")]), s(""));
}

#[test]
fn to_json_is_gos_json_marshal() {
    // sprig `toJson` = json.Marshal: "String values encode as JSON strings coerced to valid
    // UTF-8 ... <, >, & are escaped to \u003c, \u003e, \u0026"; map keys are sorted.
    assert_eq!(
        ok("toJson", &[s("say \"hi\" <b> & \\ \n")]),
        s(r#""say \"hi\" \u003cb\u003e \u0026 \\ \n""#)
    );
    let m: std::collections::BTreeMap<std::sync::Arc<str>, Value> = [
        ("b".into(), Value::Int(1)),
        ("a".into(), Value::List(vec![Value::Nil, Value::Float(1.0)].into())),
    ]
    .into_iter()
    .collect();
    assert_eq!(ok("toJson", &[Value::Map(m.into())]), s(r#"{"a":[null,1],"b":1}"#));
    assert_eq!(ok("toJson", &[Value::Float(1e21)]), s("1e+21"));
    assert_eq!(ok("toJson", &[Value::Float(0.5)]), s("0.5"));
}

#[test]
fn list_append_join_and_dict() {
    // sprig `list 1 2 3` is a list; `append $l 6` (= push) adds at the end; `join "_" $l`
    // joins the items as strings; `dict "k" "v"` makes a map.
    let l = ok("list", &[Value::Int(1), s("a")]);
    assert_eq!(l, Value::List(vec![Value::Int(1), s("a")].into()));
    let l2 = ok("append", &[l.clone(), Value::Bool(true)]);
    assert_eq!(l2, Value::List(vec![Value::Int(1), s("a"), Value::Bool(true)].into()));
    assert_eq!(ok("join", &[s("-"), l2]), s("1-a-true"));
    assert_eq!(
        ok("join", &[s("-"), Value::List(vec![s("a"), Value::Nil, s("b")].into())]),
        s("a-b")
    );
    assert_eq!(ok("join", &[s("-"), s("one")]), s("one"));
    assert!(fails("append", &[s("x"), s("y")]).contains("must be a list"));
    let d = ok("dict", &[s("antibody"), s("ABodyBuilder2"), s("odd")]);
    assert_eq!(d.field("antibody"), Some(&s("ABodyBuilder2")));
    assert_eq!(d.field("odd"), Some(&s("")), "a last key without a value maps to \"\"");
}

#[test]
fn integer_math() {
    // sprig `add 1 2 3` is 6, `sub 3 2` is 1, `mul 2 3` is 6, `max 1 2 3` is 3; arguments
    // go through toInt64, so "3" is 3.
    assert_eq!(ok("add", &[Value::Int(1), Value::Int(2), s("3")]), Value::Int(6));
    assert_eq!(ok("sub", &[Value::Int(3), Value::Int(5)]), Value::Int(-2));
    assert_eq!(
        ok("mul", &[Value::Int(2), Value::Int(3), Value::Int(4)]),
        Value::Int(24)
    );
    assert_eq!(ok("max", &[Value::Int(120), Value::Int(90)]), Value::Int(120));
    assert_eq!(ok("int", &[s("42")]), Value::Int(42));
    assert_eq!(ok("int", &[s("0x10")]), Value::Int(16));
    assert_eq!(ok("int", &[s("3.0")]), Value::Int(3));
    assert_eq!(ok("int", &[s("")]), Value::Int(0));
    assert_eq!(ok("int", &[Value::Float(2.9)]), Value::Int(2));
    assert!(fails("int", &[s("four")]).contains("not a whole number"));
    assert!(fails("add", &[Value::Int(i64::MAX), Value::Int(1)]).contains("overflow"));
    assert!(fails("add", &[Value::Int(1), Value::Nil]).contains("argument 2 is not set"));
}

#[test]
fn default_and_empty() {
    // sprig: "`default "foo" .Bar` ... if .Bar evaluates to a non-empty value, it is used; if
    // it is empty, foo is returned"; empty means nil, "", 0, false, and empty lists and maps.
    assert_eq!(ok("default", &[s("foo"), s("bar")]), s("bar"));
    for e in [
        Value::Nil,
        s(""),
        Value::Int(0),
        Value::Bool(false),
        Value::List(Vec::new().into()),
    ] {
        assert_eq!(ok("default", &[s("foo"), e.clone()]), s("foo"), "{e:?}");
        assert_eq!(ok("empty", std::slice::from_ref(&e)), Value::Bool(true), "{e:?}");
    }
    assert_eq!(ok("default", &[s("foo")]), s("foo"));
    assert_eq!(ok("empty", &[s(" ")]), Value::Bool(false));
}

#[test]
fn fail_raises_the_message() {
    // sprig `fail "Please accept the end user license agreement"` stops rendering with it.
    let e = fails("fail", &[s("RunName is required")]);
    assert_eq!(e, "execution error: fail: RunName is required");
}

#[test]
fn rand_int_is_in_range_and_follows_the_seed() {
    // sprig `randInt 12 30`: "returns a random integer value from min (inclusive) to max
    // (exclusive)". fedvol's is drawn from the render seed.
    let a = functions(&Rng::new(99));
    let b = functions(&Rng::new(99));
    let c = functions(&Rng::new(100));
    let mut differs = false;
    for _ in 0..100 {
        let args = [Value::Int(12), Value::Int(30)];
        let x = a["randInt"](&args).unwrap();
        assert_eq!(x, b["randInt"](&args).unwrap(), "same seed, same numbers");
        differs |= x != c["randInt"](&args).unwrap();
        let Value::Int(n) = x else { panic!("{x:?}") };
        assert!((12..30).contains(&n), "{n}");
    }
    assert!(differs, "another seed gives other numbers");
    assert!(fails("randInt", &[Value::Int(5), Value::Int(5)]).contains("min < max"));
}

#[test]
fn now_is_a_seeded_instant_and_unix_epoch_prints_its_seconds() {
    // sprig `now | unixEpoch`: "Returns the seconds since the unix epoch" as a string. fedvol's
    // `now` is not the wall clock but an instant drawn from the render seed.
    let f = functions(&Rng::new(3));
    let t = f["now"](&[]).unwrap();
    let Value::Int(secs) = t else { panic!("{t:?}") };
    assert!((random::NOW_FROM..random::NOW_FROM + random::NOW_SPAN as i64).contains(&secs));
    assert_eq!(f["unixEpoch"](&[t]).unwrap(), s(&secs.to_string()));
    assert_eq!(functions(&Rng::new(3))["now"](&[]).unwrap(), Value::Int(secs));
    assert!(fails("unixEpoch", &[s("x")]).contains("takes a time from `now`"));
}

#[test]
fn wrong_argument_counts_are_errors_naming_the_function() {
    assert_eq!(fails("trim", &[]), "execution error: trim: takes 1 argument, got 0");
    assert_eq!(
        fails("replace", &[s("a")]),
        "execution error: replace: takes 3 arguments, got 1"
    );
}
