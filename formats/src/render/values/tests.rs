//! Tests of values files: both shapes, the merge, and every error's position.

use super::*;

fn file(label: &str, text: &str) -> ValuesFile {
    parse_values_str(label, text).unwrap_or_else(|d| panic!("{d}"))
}

fn errors(label: &str, text: &str) -> Vec<Diagnostic> {
    parse_values_str(label, text).unwrap_err().0
}

fn merged(files: &[(&str, &str)]) -> Values {
    let fs: Vec<ValuesFile> = files.iter().map(|(l, t)| file(l, t)).collect();
    Values::merge(&fs).unwrap_or_else(|d| panic!("{d}"))
}

fn data(v: &Values, name: &str) -> Data {
    v.get(name).unwrap_or_else(|| panic!("{name} is set")).data.clone()
}

const FORM: &str = "\
values:
  - name: \"Type\"
    display_name: \"Notebook type\"
    string_value: \"r\"
    options_input:
      options: [base, r, julia]
    display_category: \"Container\"
  - name: Cores
    uint_value: 4
  - name: Gpu
    bool_value: true
  - name: S3Secret
    secret_value:
      reference: \"\"
  - name: Timeout
    string_value: 5m0s
";

#[test]
fn a_catalog_form_maps_each_entry_to_its_typed_default() {
    let f = file("form.yaml", FORM);
    assert!(f.is_form);
    let v = Values::merge(&[f]).unwrap();
    assert_eq!(data(&v, "Type"), Data::String("r".into()));
    assert_eq!(data(&v, "Cores"), Data::Int(4));
    assert_eq!(data(&v, "Gpu"), Data::Bool(true));
    assert_eq!(data(&v, "S3Secret"), Data::String(String::new()));
    assert_eq!(data(&v, "Timeout"), Data::String("5m0s".into()));
    let t = v.get("Cores").unwrap();
    assert_eq!((t.file.as_str(), t.span.line), ("form.yaml", 8));
}

#[test]
fn every_real_values_file_is_a_readable_form() {
    let Some(inputs) = fedvol_testenv::real_inputs() else {
        return;
    };
    let dir = inputs.join("catalog-values");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let f = load_values(&p).unwrap_or_else(|d| panic!("{d}"));
        assert!(f.is_form, "{}", p.display());
        assert!(!f.entries.is_empty(), "{}", p.display());
        Values::merge(&[f]).unwrap_or_else(|d| panic!("{d}"));
        n += 1;
    }
    assert_eq!(n, 53);
}

#[test]
fn a_plain_mapping_takes_yaml_core_types() {
    let v = merged(&[(
        "p.yaml",
        "S: text\nQ: \"4\"\nI: 4\nH: 0x10\nF: 1.5\nB: false\nN: ~\nL: [a, 1]\nM: {k: v}\nV: 1.10.2\n",
    )]);
    assert_eq!(data(&v, "S"), Data::String("text".into()));
    assert_eq!(data(&v, "Q"), Data::String("4".into()));
    assert_eq!(data(&v, "I"), Data::Int(4));
    assert_eq!(data(&v, "H"), Data::Int(16));
    assert_eq!(data(&v, "F"), Data::Float(1.5));
    assert_eq!(data(&v, "B"), Data::Bool(false));
    assert_eq!(data(&v, "N"), Data::Null);
    assert_eq!(data(&v, "L"), Data::List(vec![Data::String("a".into()), Data::Int(1)]));
    assert_eq!(
        data(&v, "M"),
        Data::Map([("k".to_string(), Data::String("v".into()))].into_iter().collect())
    );
    assert_eq!(data(&v, "V"), Data::String("1.10.2".into()));
}

#[test]
fn later_files_override_earlier_keys_and_mappings_merge() {
    let v = merged(&[
        ("form.yaml", FORM),
        ("a.yaml", "Cores: 8\nM: {a: 1, b: {x: 1}}\nKeep: 1\n"),
        ("b.yaml", "Type: julia\nM: {b: {y: 2}, c: 3}\nTimeout: 1.5\n"),
    ]);
    assert_eq!(data(&v, "Cores"), Data::Int(8));
    assert_eq!(v.get("Cores").unwrap().file, "a.yaml");
    assert_eq!(data(&v, "Type"), Data::String("julia".into()));
    // A form's string_value takes an override's text as it is written.
    assert_eq!(data(&v, "Timeout"), Data::String("1.5".into()));
    assert_eq!(data(&v, "Keep"), Data::Int(1));
    let Data::Map(m) = data(&v, "M") else { panic!() };
    assert_eq!(m["a"], Data::Int(1));
    assert_eq!(m["c"], Data::Int(3));
    let Data::Map(b) = &m["b"] else { panic!() };
    assert_eq!(b.len(), 2, "nested mappings merge key by key: {b:?}");
    assert_eq!(v.files(), ["form.yaml", "a.yaml", "b.yaml"]);
}

#[test]
fn an_override_must_fit_the_forms_declaration() {
    let fs = [
        file("form.yaml", FORM),
        file("o.yaml", "Cores: four\nGpu: \"yes\"\nType: python\nS3Secret: [a]\n"),
    ];
    let d = Values::merge(&fs).unwrap_err().0;
    let got: Vec<(String, usize, String)> = d.iter().map(|x| (x.field.clone(), x.line, x.message.clone())).collect();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(
        got[0],
        ("Cores".into(), 1, "expected a whole number >= 0, found `four`".into())
    );
    assert_eq!(d[0].file, "o.yaml");
    assert!(
        d[0].hint
            .as_deref()
            .unwrap()
            .contains("declared as uint_value in form.yaml:8"),
        "{:?}",
        d[0].hint
    );
    assert_eq!(got[1].2, "expected true or false, found `yes`");
    assert_eq!(got[2].2, "expected a string, found a list");
    assert_eq!(got[3].0, "Type");
    assert_eq!(got[3].2, "expected one of base, r, julia, found `python`");
}

#[test]
fn form_errors_are_positioned_and_all_reported() {
    let d = errors(
        "f.yaml",
        "values:\n  - name: A\n    uint_value: 2\n  - display_name: x\n    string_value: y\n  - name: B\n    string_value: a\n    bool_value: true\n  - name: C\n  - name: D\n    strng_value: x\n  - name: A\n    string_value: again\n  - name: E\n    uint_value: -2\n",
    );
    let msgs: Vec<String> = d
        .iter()
        .map(|x| format!("{}:{} {}", x.line, x.field, x.message))
        .collect();
    let has = |needle: &str| assert!(msgs.iter().any(|m| m.contains(needle)), "{needle} in {msgs:#?}");
    has("15:values[6].uint_value expected a whole number from 0");
    has("4:values[1] missing required field `name`");
    has("8:values[2].bool_value a form entry has one default");
    has("9:values[3] a form entry needs a default");
    has("11:values[4].strng_value unknown field `strng_value`");
    has("12:values[5].name `A` is set twice in this form (first at line 2)");
    let typo = d.iter().find(|x| x.field.ends_with("strng_value")).unwrap();
    assert_eq!(typo.hint.as_deref(), Some("did you mean `string_value`?"));
    // The option check runs on merge (an override may fix the value).
    let f = file(
        "g.yaml",
        "values:\n  - name: E\n    string_value: z\n    options_input:\n      options: [x, y]\n",
    );
    let d = Values::merge(&[f]).unwrap_err().0;
    assert_eq!(
        (d[0].line, d[0].message.as_str()),
        (2, "expected one of x, y, found `z`")
    );
}

#[test]
fn file_shape_errors() {
    let d = errors("v.yaml", "- a\n- b\n");
    assert!(
        d[0].message.contains("expected a mapping of values"),
        "{}",
        d[0].message
    );
    let d = errors("v.yaml", "a: 1\n---\nb: 2\n");
    assert_eq!(d[0].line, 3);
    assert!(d[0].message.contains("one YAML document"), "{}", d[0].message);
    let d = errors("v.yaml", "a: [1\n");
    assert!(
        d[0].message.starts_with("invalid YAML in a values file"),
        "{}",
        d[0].message
    );
    let d = errors("v.yaml", "a: 1\na: 2\n");
    assert_eq!(
        (d[0].line, d[0].message.as_str()),
        (2, "duplicate key (first at line 1)")
    );
    let d = errors("v.yaml", "values:\n  - name: A\n    string_value: x\nother: 1\n");
    assert!(d[0].message.contains("unknown field `other`"), "{}", d[0].message);
    assert!(file("v.yaml", "").entries.is_empty());
    assert!(file("v.yaml", "# nothing\n").entries.is_empty());
}

#[test]
fn encode_is_stable_and_distinguishes_types() {
    let a = merged(&[("a.yaml", "X: 1\n")]);
    let b = merged(&[("b.yaml", "X: \"1\"\n")]);
    assert_eq!(
        a.encode(),
        merged(&[("c.yaml", "X: 1\n")]).encode(),
        "the file name does not count"
    );
    assert_ne!(a.encode(), b.encode());
}
