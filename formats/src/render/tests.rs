//! Tests of the renderer: the real catalog templates with their values files (third-party
//! inputs, `fedvol_testenv::real_inputs`), and one focused test per rule (positions, unknown functions, unset values, `fail`, determinism).

use std::path::PathBuf;

use super::*;
use crate::fuzzfile::parse_fuzzfile;
use crate::template::find_template;
use fedvol_common::model::VolumeSource;

/// Every real template with its values file: (template path, values path), sorted; `None`
/// (the test skipped) without the third-party inputs.
fn real_templates() -> Option<Vec<(PathBuf, PathBuf)>> {
    let inputs = fedvol_testenv::real_inputs()?;
    let mut out: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(inputs.join("fuzzfiles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| find_template(&std::fs::read_to_string(p).unwrap()).is_some())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let values = name.replace("__template.yaml", "__values.yaml");
            (p, inputs.join("catalog-values").join(values))
        })
        .collect();
    out.sort();
    Some(out)
}

/// Values from a plain mapping text.
fn values(yaml: &str) -> Values {
    Values::merge(&[parse_values_str("v.yaml", yaml).unwrap()]).unwrap()
}

fn ok(t: &str, v: &str) -> String {
    match render("t.yaml", t, &values(v)) {
        Ok(r) => r.text,
        Err(e) => panic!("{e}"),
    }
}

fn fails(t: &str, v: &str) -> RenderError {
    render("t.yaml", t, &values(v)).unwrap_err()
}

/// Real templates whose catalog defaults leave a required value empty: the template stops
/// itself with `fail`. (`coordinator/cli/tests/real_inputs.rs` plans them with the value given.)
const STOPS_ITSELF: [(&str, &str); 3] = [
    (
        "ciq-fuzzball-catalog__applications__nim_flux_webui__",
        "NgcApiKeySecret is required",
    ),
    (
        "ciq-fuzzball-catalog__applications__unsloth-studio__",
        "UserPassword is required",
    ),
    (
        "ciq-fuzzball-catalog__applications__vllm-server__",
        "ServerApiKey is required",
    ),
];

/// Real templates whose catalog defaults render a volume reference in the forms without a
/// persistent volume's name (`volume://<scope>/persistent`, or `ephemeral` with a name of its
/// own), which Fuzzball accepts (`volume://<scope>/<class>[/<name>]`): they parse, to a
/// volume selected automatically with no name. (fedvol refused them before.)
const REFERENCE_WITHOUT_NAME: [(&str, &str); 8] = [
    (
        "ciq-fuzzball-catalog-7b9d307__applications__boltz2_fixed_affinity_screen__",
        "`volume://user/persistent`",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__fine_tuning__",
        "`volume://user/ephemeral/scratch`",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__jupyter__",
        "`volume://user/persistent`",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__lammps_cpu__",
        "`volume://user/persistent`",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__nvidia_inference_microservice__",
        "`volume://account/persistent`",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__open-webui__",
        "`volume://user/persistent`",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__openfoam_motorbike__",
        "`volume://user/persistent`",
    ),
    (
        "ciq-fuzzball-catalog__applications__rclone-server__",
        "`volume://user/persistent`",
    ),
];

fn expected(table: &[(&'static str, &'static str)], t: &std::path::Path) -> Option<&'static str> {
    let name = t.file_name().unwrap().to_string_lossy().into_owned();
    table
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, m)| *m)
}

#[test]
fn every_real_template_renders_with_its_values_into_a_valid_fuzzfile() {
    let Some(all) = real_templates() else { return };
    assert_eq!(
        all.len(),
        53,
        "templated real Fuzzfiles (update when real-inputs changes)"
    );
    let (mut parsed, mut stopped, mut without_name) = (0, 0, 0);
    for (t, v) in &all {
        let label = t.display().to_string();
        let r = match (render_file(t, std::slice::from_ref(v)), expected(&STOPS_ITSELF, t)) {
            (Ok(r), None) => r,
            (Err(RenderError::Failed { message, .. }), Some(want)) => {
                assert_eq!(message, want, "{label}");
                stopped += 1;
                continue;
            }
            (other, _) => panic!("{label}: {other:?}"),
        };
        assert_eq!(find_template(&r.text), None, "{label}: an action is left");
        let again = render_file(t, std::slice::from_ref(v)).unwrap();
        assert_eq!(again, r, "{label}: rendering is deterministic");
        let w = parse_fuzzfile(&label, "wf", &r.text).unwrap_or_else(|d| panic!("{label}: {d}"));
        parsed += 1;
        if let Some(want) = expected(&REFERENCE_WITHOUT_NAME, t) {
            let reference = want.trim_matches('`');
            let v = w
                .volumes
                .iter()
                .find_map(|v| match &v.source {
                    VolumeSource::Fuzzball(fb) if fb.reference.as_deref() == Some(reference) => Some(fb),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{label}: no volume with reference {reference}"));
            let class = if reference.contains("/persistent") {
                "persistent"
            } else {
                "ephemeral"
            };
            assert_eq!((v.use_.as_deref(), v.name.as_deref()), (Some(class), None), "{label}");
            without_name += 1;
        }
    }
    assert_eq!((parsed, stopped, without_name), (50, 3, 8));
}

#[test]
fn go_template_syntax_the_catalog_uses() {
    let t = "{{- $x := .A }}\n{{- $n := 0 -}}\nx: {{ $x }}\n{{- if eq .A \"a\" }}\ny: 1\n{{- else if .B }}\ny: 2\n{{- else }}\ny: 3\n{{- end }}\n{{- range $i, $v := .L }}\n- {{ $i }}={{ $v }}\n{{- $n = $v }}\n{{- end }}\nn: {{ $n }} {{ len .L }} {{ index .L 1 }} {{ printf \"%s-%d\" .A 7 }}\n{{- /* a comment */}}\nz: {{ and .A .B }} {{ or .B .A }} {{ not .B }}\n";
    let out = ok(t, "A: a\nB: false\nL: [p, q]\n");
    // Go keeps the line break after `{{- /* ... */}}` (only `-}}` trims the text after it).
    assert_eq!(out, "x: a\ny: 1\n- 0=p\n- 1=q\nn: q 2 q a-7\nz: false a true\n");
}

#[test]
fn values_are_typed_for_the_template() {
    // A catalog form: uint_value is a number, bool_value a boolean, secret_value its reference.
    let form = "values:\n  - name: Cores\n    uint_value: 4\n  - name: Gpu\n    bool_value: false\n  - name: S3\n    secret_value:\n      reference: secret://user/s3\n  - name: Mem\n    string_value: 8GiB\n";
    let v = Values::merge(&[parse_values_str("f.yaml", form).unwrap()]).unwrap();
    let r = render(
        "t.yaml",
        "{{ add .Cores 1 }} {{ if .Gpu }}gpu{{ else }}cpu{{ end }} {{ .S3 }} {{ .Mem }}",
        &v,
    )
    .unwrap();
    assert_eq!(r.text, "5 cpu secret://user/s3 8GiB");
}

#[test]
fn an_unknown_function_is_refused_before_rendering_with_its_position() {
    let e = fails("a: 1\nb: {{ .X | upperx }}\nc: {{ quote .X }}\n", "X: x");
    let RenderError::UnknownFunctions { file, calls } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(file, "t.yaml");
    assert_eq!(calls.len(), 2, "every unknown call is reported");
    assert_eq!(calls[0].name, "upperx");
    assert_eq!(calls[0].span, Span { line: 2, col: 12 });
    assert_eq!(calls[1].name, "quote");
    assert_eq!(calls[1].span, Span { line: 3, col: 7 });
    let text = e.to_string();
    assert!(
        text.starts_with("t.yaml:2:12: the template calls function `upperx`"),
        "{text}"
    );
    assert!(text.contains("does not provide"), "{text}");
    let d = e.diagnostics();
    assert_eq!(d.0.len(), 2);
    assert_eq!((d.0[1].line, d.0[1].col), (3, 7));
}

#[test]
fn a_syntax_error_names_file_line_and_column() {
    let e = fails("a: 1\nb: {{ if .X }}\n", "X: 1");
    assert_eq!(
        e.to_string(),
        "t.yaml:2:4: template syntax: unexpected EOF: this {{if}} has no {{end}}"
    );
    // A stray `{{end}}` is refused, not taken as the end of the file.
    let e = fails("a: 1\n{{- end }}\nb: 2\n", "X: 1");
    let RenderError::Syntax { span, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*span, Span { line: 2, col: 1 });
    let e = fails("a: 1\nb: {{ .X \n", "X: 1");
    assert_eq!(
        e.to_string(),
        "t.yaml:2:4: template syntax: unclosed action: this `{{` has no `}}`"
    );
    // gotmpl's own parse errors keep their position.
    let e = fails("a: 1\nb: {{ .X ) }}\n", "X: 1");
    let RenderError::Syntax { file, span, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(file, "t.yaml");
    assert_eq!(span.line, 2, "{e}");
}

#[test]
fn printing_an_unset_value_is_an_error_naming_it_and_the_line() {
    let e = fails("a: {{ .A }}\nb: {{ .Missing }}\n", "A: 1");
    assert_eq!(
        e,
        RenderError::Unset {
            file: "t.yaml".into(),
            span: Span { line: 2, col: 4 },
            names: vec!["Missing".into()],
            values_files: vec!["v.yaml".into()],
        }
    );
    assert_eq!(
        e.to_string(),
        "t.yaml:2:4: the template prints `.Missing`, which is set by no values file (v.yaml)"
    );
}

#[test]
fn an_unset_value_is_false_in_if_and_empty_for_default() {
    // As in Go (a missing map key is nil: false) and sprig (`default` replaces empty values);
    // the catalog's cesm template guards `.PersistentVolumeName` this way.
    let t = "{{- if .Missing }}\nname: {{ .Missing }}\n{{- else }}\nuse: ephemeral\n{{- end }}\nx: {{ .Missing | default \"d\" }} {{ empty .Missing }}\n";
    assert_eq!(ok(t, "A: 1"), "\nuse: ephemeral\nx: d true\n");
}

#[test]
fn an_unset_value_given_to_a_function_is_an_error_naming_it() {
    let e = fails("a: 1\nb: {{ trim .Volume }}\n", "A: 1");
    let RenderError::Exec { span, message, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*span, Span { line: 2, col: 4 });
    assert!(message.contains("trim: argument 1 is not set"), "{message}");
    assert!(message.contains("`.Volume` is set by no values file"), "{message}");
}

#[test]
fn fail_stops_rendering_with_the_templates_message_and_position() {
    let t = "a: 1\n{{- if not .RunName }}\n{{- fail \"RunName is required\" }}\n{{- end }}\n";
    let e = fails(t, "RunName: \"\"");
    assert_eq!(
        e,
        RenderError::Failed {
            file: "t.yaml".into(),
            span: Span { line: 3, col: 1 },
            message: "RunName is required".into(),
        }
    );
    assert_eq!(ok(t, "RunName: r"), "a: 1\n");
}

#[test]
fn run_time_errors_point_at_the_failing_action_inside_loops() {
    let t = "{{- range $v := .L }}\nx: {{ $v }}\ny: {{ substr 4 5 $v }}\n{{- end }}\n";
    let e = fails(t, "L: [abcdefghij, abc]");
    let RenderError::Exec { span, message, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*span, Span { line: 3, col: 4 });
    assert!(message.contains("substr"), "{message}");
}

#[test]
fn random_functions_are_seeded_by_file_name_and_values() {
    let t = "{{ randInt 0 1000000000 }} {{ now | unixEpoch }}";
    let v = values("A: 1");
    let a = render("dir/t.yaml", t, &v).unwrap();
    assert_eq!(
        a,
        render("other/dir/t.yaml", t, &v).unwrap(),
        "the directory does not matter"
    );
    assert_ne!(a.text, render("u.yaml", t, &v).unwrap().text, "the file name does");
    assert_ne!(
        a.text,
        render("t.yaml", t, &values("A: 2")).unwrap().text,
        "the values do"
    );
    let now: i64 = a.text.split(' ').nth(1).unwrap().parse().unwrap();
    assert!((funcs::random::NOW_FROM..funcs::random::NOW_FROM + funcs::random::NOW_SPAN as i64).contains(&now));
    assert_eq!(a.seed, seed::seed("t.yaml", &v));
}

#[test]
fn output_is_capped() {
    let v = Values::default();
    let e = render(
        "t.yaml",
        "{{ range 2000000 }}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{{ end }}",
        &v,
    )
    .unwrap_err();
    assert!(
        matches!(e, RenderError::TooLarge { .. } | RenderError::Exec { .. }),
        "{e:?}"
    );
}

#[test]
fn render_file_reports_every_bad_values_file() {
    let dir = std::env::temp_dir().join(format!("fedvol-render-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = dir.join("t.yaml");
    std::fs::write(&t, "a: {{ .A }}\n").unwrap();
    let bad1 = dir.join("bad1.yaml");
    std::fs::write(&bad1, "values:\n  - name: A\n    uint_value: -1\n").unwrap();
    let bad2 = dir.join("bad2.yaml");
    std::fs::write(&bad2, "- a\n").unwrap();
    let e = render_file(&t, &[bad1.clone(), bad2.clone(), dir.join("absent.yaml")]).unwrap_err();
    let RenderError::Input(d) = &e else { panic!("{e:?}") };
    assert_eq!(d.0.len(), 3, "{e}");
    assert_eq!(
        (d.0[0].file.as_str(), d.0[0].line),
        (bad1.display().to_string().as_str(), 3)
    );
    assert!(d.0[0].message.contains("whole number"), "{e}");
    assert_eq!(d.0[1].file, bad2.display().to_string());
    assert!(d.0[2].message.contains("cannot read"), "{e}");
    let good = dir.join("good.yaml");
    std::fs::write(&good, "A: 7\n").unwrap();
    assert_eq!(render_file(&t, &[good]).unwrap().text, "a: 7\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn span_at_moves_back_to_the_action() {
    let t = "a: 1\nb: {{- if .X }}y{{ end }}\n";
    let kw = t.find("if").unwrap();
    assert_eq!(span_at(t, kw), Span { line: 2, col: 4 });
    assert_eq!(span_at(t, 0), Span { line: 1, col: 1 });
    assert_eq!(span_at("é {{x}}", 3), Span { line: 1, col: 3 });
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Any text made of template pieces renders or fails with a positioned error; never a
    /// panic, and an error's line is a line of the template.
    #[test]
    fn arbitrary_templates_never_panic(pieces in proptest::collection::vec(proptest::sample::select(vec![
        "{{", "}}", "{{-", "-}}", " ", "\n", "if", "else", "end", "range", "with", "$x", ":=", "=",
        ".A", ".L", ".Missing", "|", "(", ")", "\"s\"", "`r`", "1", "-1", "/*", "*/", "trim",
        "substr", "index", "len", "printf", "default", "fail", "randInt", "splitList", "add",
        "list", "dict", "join", "toJson", "text", "é", "}", "{",
    ]), 0..40)) {
        let text: String = pieces.concat();
        let v = values("A: a\nL: [1, 2]\n");
        if let Err(e) = render("t.yaml", &text, &v) {
            let lines = text.split('\n').count();
            for d in e.diagnostics().0 {
                proptest::prop_assert!(d.line >= 1 && d.line <= lines, "{d} in {text:?}");
            }
        }
    }
}
