//! Real third-party inputs (`real-inputs/` of `fedvol_testenv::third_party`: `FEDVOL_REAL_INPUTS`,
//! else `../shared` beside the clone; each test that reads them is skipped without them), taken
//! unmodified: public Fuzzfiles (most of
//! them catalog templates, refused alone and planned with their values files) and Kubernetes
//! storage manifests. The file lists are derived by scanning the directories, so new inputs are
//! covered without touching this file.

// Test support: a panic here is a failed test (unwrap/expect are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use fedvol_common::model::AccessMode;
use fedvol_formats::load_inventory;
use yaml_rust2::Yaml;

/// The real Fuzzfiles, or `None` (the test skipped) without the third-party inputs.
fn fuzzfiles() -> Option<Vec<PathBuf>> {
    let dir = real_inputs()?.join("fuzzfiles");
    let v = files_in(&dir);
    assert!(!v.is_empty(), "no Fuzzfiles found under {}", dir.display());
    Some(v)
}

/// The real Kubernetes manifests, or `None` (the test skipped) without the third-party inputs.
fn k8s_files() -> Option<Vec<PathBuf>> {
    let dir = real_inputs()?.join("k8s");
    let v = files_in(&dir);
    assert!(!v.is_empty(), "no Kubernetes manifests found under {}", dir.display());
    Some(v)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// The first Go template action of `text` as 1-based (line, column in characters): a `{{`
/// outside a whole-line `#` comment that some later `}}` closes. `None` for plain YAML.
fn first_template_action(text: &str) -> Option<(usize, usize)> {
    let last_close = text.rfind("}}")?;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        if line.trim_start().starts_with('#') {
            continue;
        }
        if let Some(at) = line.find("{{")
            && start + at + 2 <= last_close
        {
            return Some((i + 1, line[..at].chars().count() + 1));
        }
    }
    None
}

/// Finds `error: <label>:<line>:<col>:` lines on stderr and returns their positions.
fn error_positions(stderr: &str, label: &str) -> Vec<(usize, usize)> {
    let prefix = format!("error: {label}:");
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let mut it = rest.splitn(3, ':');
            let line = it.next()?.parse().ok()?;
            let col = it.next()?.parse().ok()?;
            Some((line, col))
        })
        .collect()
}

#[test]
fn templates_alone_are_refused_naming_values_and_plain_fuzzfiles_plan() {
    let (mut templates, mut plain) = (0, 0);
    let Some(files) = fuzzfiles() else { return };
    for f in files {
        let text = read(&f);
        let label = f.display().to_string();
        match first_template_action(&text) {
            Some((line, col)) => {
                templates += 1;
                let check = fedvol(&["check", &label]);
                let mut plan_args = vec!["plan".to_string()];
                for c in clusters() {
                    plan_args.push("-i".into());
                    plan_args.push(c.display().to_string());
                }
                plan_args.push(label.clone());
                let plan = fedvol(&plan_args);
                for run in [&check, &plan] {
                    assert_eq!(
                        run.code,
                        1,
                        "an unrendered template must be refused\n{}",
                        run.describe()
                    );
                    assert!(
                        run.stderr.contains("unrendered template"),
                        "the error must say the file is an unrendered template\n{}",
                        run.describe()
                    );
                    assert!(
                        run.stderr.contains("`--values VALUES.yaml`") && run.stderr.contains("`fedvol render "),
                        "the error must name --values and fedvol render\n{}",
                        run.describe()
                    );
                    let positions = error_positions(&run.stderr, &label);
                    assert!(
                        positions.contains(&(line, col)),
                        "the error must point at the first template action {line}:{col}; got {positions:?}\n{}",
                        run.describe()
                    );
                    assert!(
                        run.stdout.trim().is_empty(),
                        "nothing is printed for a refused file\n{}",
                        run.describe()
                    );
                }
                // The position really is a `{{` of the file.
                let at: String = text
                    .lines()
                    .nth(line - 1)
                    .expect("line exists")
                    .chars()
                    .skip(col - 1)
                    .take(2)
                    .collect();
                assert_eq!(at, "{{", "{label}:{line}:{col}");
            }
            None => {
                plain += 1;
                let check = fedvol(&["check", &label]);
                assert_eq!(
                    check.code,
                    0,
                    "a real Fuzzfile must pass `fedvol check`\n{}",
                    check.describe()
                );
                assert!(
                    check.stdout.starts_with(&format!("ok  {label}: ")),
                    "check prints an ok line\n{}",
                    check.describe()
                );
                assert_fuzzfile_plans(&f, &text);
            }
        }
    }
    assert!(templates > 0, "the real inputs hold unrendered catalog templates");
    assert!(plain > 0, "the real inputs hold plain Fuzzfiles");
}

/// The catalog values file of a real template (`X__template.yaml` -> `X__values.yaml`).
fn values_of(template: &Path) -> PathBuf {
    let name = template
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace("__template.yaml", "__values.yaml");
    // <inputs>/fuzzfiles/X__template.yaml -> <inputs>/catalog-values/X__values.yaml
    template
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("catalog-values")
        .join(name)
}

/// This crate's override values for a real template whose catalog defaults do not render a
/// plannable Fuzzfile (each file says why), if it has one.
fn override_of(template: &Path) -> Option<PathBuf> {
    let name = template
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace("__template.yaml", ".yaml");
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/catalog-overrides")).join(name);
    p.is_file().then_some(p)
}

/// Templates whose rendered workflow fits none of the three example clusters (exit 2), and why.
const NO_FIT: [(&str, &str); 9] = [
    (
        "ciq-fuzzball-catalog-7b9d307__applications__lammps_cpu__",
        "run-lammps needs 2 hosts in one zone (cluster-c has 1 that fits); a and b let nobody create the volume",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__lammps_gpu__",
        "asks for GPU model T4 by annotation; no example host has it",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__open-webui__",
        "ollama needs more than cluster-c's hosts have free; a and b let nobody create the volume",
    ),
    (
        "ciq-fuzzball-catalog-7b9d307__applications__wrf__",
        "real and wrf need more hosts in one zone than any example zone has",
    ),
    (
        "ciq-fuzzball-catalog__applications__lammps_gpu__",
        "asks for GPU model T4 by annotation",
    ),
    (
        "ciq-fuzzball-catalog__applications__llm_client_server__",
        "asks for GPU model NVIDIA L4 by annotation",
    ),
    (
        "ciq-fuzzball-catalog__applications__unsloth-studio__",
        "asks for a GPU model by annotation",
    ),
    (
        "ciq-fuzzball-catalog__applications__vllm-server__",
        "asks for GPU model NVIDIA L40S by annotation",
    ),
    (
        "ciq-fuzzball-catalog__applications__wrf__",
        "real and wrf need more hosts in one zone than any example zone has",
    ),
];

/// `--values V` for each of `values`.
fn values_args(values: &[PathBuf]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| ["--values".to_string(), v.display().to_string()])
        .collect()
}

/// `fedvol plan -o json` of a template against the example clusters with `values`.
fn plan_template(template: &Path, values: &[PathBuf]) -> Run {
    let extra = values_args(values);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    plan_json(&clusters(), template, &extra)
}

#[test]
fn every_catalog_template_plans_with_its_values() {
    let (mut planned, mut overridden, mut no_fit) = (0, 0, 0);
    let Some(files) = fuzzfiles() else { return };
    for f in files {
        if first_template_action(&read(&f)).is_none() {
            continue;
        }
        let label = f.display().to_string();
        let mut values = vec![values_of(&f)];
        assert!(values[0].is_file(), "{label} has a values file");
        if let Some(o) = override_of(&f) {
            overridden += 1;
            // With the catalog defaults alone it is refused, with positions and the reason.
            let run = plan_template(&f, &values);
            assert_eq!(run.code, 1, "{}", run.describe());
            assert!(run.stdout.is_empty(), "{}", run.describe());
            let stopped =
                run.stderr.contains(&format!("error: {label}:")) && run.stderr.contains("stopped with `fail`");
            assert!(stopped, "{}", run.describe());
            values.push(o);
        }
        let mut render_args = vec!["render".to_string(), label.clone()];
        render_args.extend(values_args(&values));
        let rendered = fedvol(&render_args);
        assert_eq!(rendered.code, 0, "{}", rendered.describe());
        let run = plan_template(&f, &values);
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let expected = if NO_FIT.iter().any(|(p, _)| name.starts_with(p)) {
            no_fit += 1;
            2
        } else {
            0
        };
        assert_eq!(run.code, expected, "{}", run.describe());
        assert_decision(&f, &rendered.stdout, &run);
        planned += 1;
    }
    assert_eq!((planned, overridden, no_fit), (53, 3, NO_FIT.len()));
}

/// Plans a plain real Fuzzfile against the three example clusters and checks the decision.
fn assert_fuzzfile_plans(f: &Path, text: &str) {
    let run = plan_json(&clusters(), f, &[]);
    assert!(
        run.code == 0 || run.code == 2,
        "a valid Fuzzfile plans (exit 0 or 2), never bad input\n{}",
        run.describe()
    );
    assert_decision(f, text, &run);
}

/// Checks the decision document of `run`, a plan of the Fuzzfile `text` (read from `f` or
/// rendered from it): every example cluster answered and decided every volume of the text; exit
/// 0 names a feasible cluster, exit 2 none.
fn assert_decision(f: &Path, text: &str, run: &Run) {
    let docs = yaml_docs(text);
    let volume_keys: Vec<String> = {
        let mut v: Vec<String> = match &docs[0]["volumes"] {
            Yaml::Hash(h) => h.keys().filter_map(|k| k.as_str().map(str::to_string)).collect(),
            _ => Vec::new(),
        };
        v.sort();
        v
    };
    let doc = run.json();
    assert_eq!(keys(&doc["clusters"]), CLUSTER_NAMES.to_vec(), "{}", run.describe());
    for name in CLUSTER_NAMES {
        let c = &doc["clusters"][name];
        assert_eq!(c["status"], "answered", "{name}\n{}", run.describe());
        assert_eq!(
            keys(&c["volumes"]),
            volume_keys,
            "{name} must decide every volume of {}",
            f.display()
        );
        for (vname, v) in c["volumes"].as_object().expect("volumes object") {
            let mode = v["mode"].as_str().unwrap_or_default();
            assert!(
                ["named", "by_name", "automatic", "claim"].contains(&mode),
                "{name}/{vname}: mode {mode}"
            );
            assert!(
                v["error"].is_null() != v["action"].is_null(),
                "{name}/{vname}: a volume has either an action or an error: {v}"
            );
        }
    }
    match run.code {
        0 => {
            let chosen = doc["chosen_cluster"].as_str().expect("exit 0 names a cluster");
            assert_eq!(doc["clusters"][chosen]["feasible"], true, "{}", run.describe());
        }
        _ => assert!(doc["chosen_cluster"].is_null(), "{}", run.describe()),
    }
}

/// One PersistentVolumeClaim of a manifest, read by the test itself.
struct ClaimDoc {
    name: String,
    class: Option<String>,
    volume_name: Option<String>,
}

/// The Kubernetes documents of a manifest, by kind.
#[derive(Default)]
struct Manifest {
    claims: Vec<ClaimDoc>,
    classes: Vec<String>,
    volumes: Vec<String>,
}

fn manifest(text: &str) -> Manifest {
    let mut m = Manifest::default();
    for d in yaml_docs(text) {
        let name = d["metadata"]["name"].as_str().unwrap_or_default().to_string();
        match d["kind"].as_str() {
            Some("PersistentVolumeClaim") => m.claims.push(ClaimDoc {
                name,
                class: d["spec"]["storageClassName"].as_str().map(str::to_string),
                volume_name: d["spec"]["volumeName"].as_str().map(str::to_string),
            }),
            Some("StorageClass") => m.classes.push(name),
            Some("PersistentVolume") => m.volumes.push(name),
            _ => {}
        }
    }
    m
}

#[test]
fn every_kubernetes_manifest_passes_check() {
    let Some(files) = k8s_files() else { return };
    for f in files {
        let label = f.display().to_string();
        let run = fedvol(&["check", &label]);
        assert_eq!(
            run.code,
            0,
            "a real Kubernetes manifest must pass `fedvol check`\n{}",
            run.describe()
        );
        assert!(run.stdout.starts_with(&format!("ok  {label}: ")), "{}", run.describe());
    }
}

#[test]
fn kubernetes_claims_are_planned_as_workflows() {
    let mut planned = 0;
    let Some(files) = k8s_files() else { return };
    for f in files {
        let m = manifest(&read(&f));
        if m.claims.is_empty() {
            continue;
        }
        planned += 1;
        let mut inventories = vec![cluster("cluster-c")];
        let mut own_cluster = None;
        if !m.classes.is_empty() || !m.volumes.is_empty() {
            inventories.push(f.clone());
            let inv = load_inventory(&f).unwrap_or_else(|d| panic!("{} as an inventory: {d}", f.display()));
            own_cluster = Some(inv.value.cluster);
        }
        let run = plan_json(&inventories, &f, &[]);
        assert!(
            run.code == 0 || run.code == 2,
            "a file of claims plans (exit 0 or 2)\n{}",
            run.describe()
        );
        let doc = run.json();
        let mut expected_clusters: Vec<String> = vec!["cluster-c".into()];
        expected_clusters.extend(own_cluster.clone());
        expected_clusters.sort();
        assert_eq!(keys(&doc["clusters"]), expected_clusters, "{}", run.describe());
        let mut claim_names: Vec<String> = m.claims.iter().map(|c| c.name.clone()).collect();
        claim_names.sort();
        for cname in &expected_clusters {
            let c = &doc["clusters"][cname];
            assert_eq!(
                keys(&c["volumes"]),
                claim_names,
                "{cname}: one volume decision per claim\n{}",
                run.describe()
            );
            for claim in &m.claims {
                assert_eq!(c["volumes"][&claim.name]["mode"], "claim", "{cname}/{}", claim.name);
            }
        }
        // A claim whose class or volume is defined in the same file is satisfied by that file.
        if let Some(own) = &own_cluster {
            let mut all_satisfiable = true;
            for claim in &m.claims {
                let by_class = claim.class.as_ref().is_some_and(|k| m.classes.contains(k));
                let by_volume = claim.volume_name.as_ref().is_some_and(|v| m.volumes.contains(v));
                if !(by_class || by_volume) {
                    all_satisfiable = false;
                    continue;
                }
                let v = &doc["clusters"][own]["volumes"][&claim.name];
                assert!(v["error"].is_null(), "{own}/{}: {v}\n{}", claim.name, run.describe());
                let want = if by_volume { "bind" } else { "provision" };
                assert_eq!(v["action"], want, "{own}/{}: {v}", claim.name);
                if let Some(pv) = claim.volume_name.as_ref().filter(|_| by_volume) {
                    assert_eq!(v["volume"], pv.as_str(), "{own}/{}: {v}", claim.name);
                }
            }
            if all_satisfiable {
                assert_eq!(run.code, 0, "{}", run.describe());
            }
        }
        match run.code {
            0 => assert!(doc["chosen_cluster"].is_string(), "{}", run.describe()),
            _ => assert!(doc["chosen_cluster"].is_null(), "{}", run.describe()),
        }
    }
    assert!(planned > 0, "the real inputs hold PersistentVolumeClaims");
}

fn long_name(m: AccessMode) -> &'static str {
    AccessMode::ALL
        .iter()
        .find(|(x, ..)| *x == m)
        .map(|(_, long, _)| *long)
        .expect("every access mode has a name")
}

#[test]
fn kubernetes_storage_classes_and_volumes_serve_as_inventories() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut class_files, mut pv_files) = (0, 0);
    let Some(files) = k8s_files() else { return };
    for f in files {
        let m = manifest(&read(&f));
        if !m.claims.is_empty() || (m.classes.is_empty() && m.volumes.is_empty()) {
            continue;
        }
        let inv = load_inventory(&f)
            .unwrap_or_else(|d| panic!("{} as an inventory: {d}", f.display()))
            .value;
        let (claim, expect_provisioner, expect_action, expect_volume) = if let Some(class) =
            inv.provisioners.iter().find(|p| p.from_storage_class)
        {
            class_files += 1;
            assert_eq!(
                Some(&class.name),
                m.classes.first(),
                "the first StorageClass of {}",
                f.display()
            );
            let claim = format!(
                "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: probe\nspec:\n  storageClassName: {}\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n",
                class.name
            );
            (claim, Some(class.name.clone()), "provision", None)
        } else {
            pv_files += 1;
            let pv = inv
                .volumes
                .first()
                .unwrap_or_else(|| panic!("{}: no PV read", f.display()));
            assert_eq!(Some(&pv.name), m.volumes.first(), "the first PV of {}", f.display());
            let class = pv.provisioner.clone().unwrap_or_default();
            let modes: Vec<&str> = pv.access_modes.modes().into_iter().map(long_name).collect();
            let claim = format!(
                "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: probe\nspec:\n  storageClassName: \"{class}\"\n  accessModes: [{}]\n  resources:\n    requests:\n      storage: \"{}\"\n",
                modes.join(", "),
                pv.capacity.bytes()
            );
            (claim, None, "bind", Some(pv.name.clone()))
        };
        let claim_path = write(tmp.path(), "probe-claim.yaml", &claim);
        let run = plan_json(std::slice::from_ref(&f), &claim_path, &[]);
        assert_eq!(run.code, 0, "{}\nclaim:\n{claim}\n{}", f.display(), run.describe());
        let doc = run.json();
        assert_eq!(doc["chosen_cluster"], inv.cluster.as_str(), "{}", run.describe());
        let v = &doc["clusters"][&inv.cluster]["volumes"]["probe"];
        assert_eq!(v["mode"], "claim", "{v}");
        assert_eq!(v["action"], expect_action, "{}: {v}", f.display());
        assert!(v["error"].is_null(), "{}: {v}", f.display());
        if let Some(p) = &expect_provisioner {
            assert_eq!(v["provisioner"], p.as_str(), "{}: {v}", f.display());
        }
        if let Some(pv) = &expect_volume {
            assert_eq!(v["volume"], pv.as_str(), "{}: {v}", f.display());
        }
    }
    assert!(class_files > 0, "the real inputs hold StorageClass files");
    assert!(pv_files > 0, "the real inputs hold PersistentVolume files");
}

/// A real catalog template by application (`ciq-fuzzball-catalog__applications__APP__...`).
/// A real catalog template by application (`ciq-fuzzball-catalog__applications__APP__...`), or
/// `None` (the test skipped) without the third-party inputs.
fn catalog_template(app: &str) -> Option<PathBuf> {
    Some(
        real_inputs()?
            .join("fuzzfiles")
            .join(format!("ciq-fuzzball-catalog__applications__{app}__template.yaml")),
    )
}

#[test]
fn render_prints_the_rendered_yaml() {
    let Some(t) = catalog_template("hello_world") else {
        return;
    };
    let v = values_of(&t);
    let run = fedvol(&["render", &t.display().to_string(), "--values", &v.display().to_string()]);
    assert_eq!(run.code, 0, "{}", run.describe());
    assert_eq!(
        run.stdout,
        "# Copyright 2025 CIQ, Inc. All rights reserved.
version: v4
jobs:
  helloworld:
    image:
      uri: \"docker://alpine:latest\"
    policy:
      retry:
        attempts: 1
      timeout:
        execute: \"5m0s\"
    command:
      - /bin/sh
      - '-c'
      - echo \"Hello, world! Hostname ${HOSTNAME}\"
    resource:
      cpu:
        cores: 1
        affinity: NUMA
      memory:
        size: 1GiB
",
        "{}",
        run.describe()
    );
    assert!(run.stderr.is_empty(), "{}", run.describe());

    // A later values file overrides the form's default; the result still checks.
    let tmp = tempfile::tempdir().unwrap();
    let o = write(tmp.path(), "more.yaml", "Cores: 3\nScript: echo hi\n");
    let args = |extra: &Path| {
        vec![
            "render".to_string(),
            t.display().to_string(),
            "--values".into(),
            v.display().to_string(),
            "--values".into(),
            extra.display().to_string(),
        ]
    };
    let run = fedvol(&args(&o));
    assert_eq!(run.code, 0, "{}", run.describe());
    assert!(
        run.stdout.contains("cores: 3\n") && run.stdout.contains("- echo hi\n"),
        "{}",
        run.describe()
    );
    let check = fedvol(&[
        "check",
        &t.display().to_string(),
        "--values",
        &v.display().to_string(),
        "--values",
        &o.display().to_string(),
    ]);
    assert_eq!(check.code, 0, "{}", check.describe());
    assert_eq!(
        check.stdout,
        format!(
            "ok  {}: workflow ciq-fuzzball-catalog__applications__hello_world__template (0 volumes, 1 job), rendered with 2 values files\n",
            t.display()
        )
    );

    // A bad override is refused naming its file, line and what was expected.
    let bad = write(tmp.path(), "bad.yaml", "Script: ok\nCores: many\n");
    let run = fedvol(&args(&bad));
    assert_eq!(run.code, 1, "{}", run.describe());
    assert!(run.stdout.is_empty(), "{}", run.describe());
    assert!(
        run.stderr.starts_with(&format!(
            "error: {}:2:8: Cores: expected a whole number >= 0, found `many`",
            bad.display()
        )),
        "{}",
        run.describe()
    );
}

#[test]
fn render_is_repeatable_and_seeded_by_the_values() {
    // filebrowser draws a password with `randInt 1 1000000000000 | toString | b64enc`.
    let Some(t) = catalog_template("filebrowser") else {
        return;
    };
    let v = values_of(&t);
    let render = |extra: &[&str]| {
        let mut a = vec![
            "render".to_string(),
            t.display().to_string(),
            "--values".into(),
            v.display().to_string(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        let run = fedvol(&a);
        assert_eq!(run.code, 0, "{}", run.describe());
        run.stdout
    };
    let password = |text: &str| {
        text.lines()
            .find(|l| l.contains("--lockPassword"))
            .expect("the password line")
            .to_string()
    };
    let first = render(&[]);
    assert_eq!(first, render(&[]), "the same inputs render the same text");
    let tmp = tempfile::tempdir().unwrap();
    let o = write(tmp.path(), "o.yaml", "Unused: 1\n");
    let other = render(&["--values", &o.display().to_string()]);
    assert_ne!(password(&first), password(&other), "other values, another seed");
}

#[test]
fn render_errors_name_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let v = write(tmp.path(), "v.yaml", "Name: x\n");
    let vs = v.display().to_string();
    let cases: [(&str, &str); 4] = [
        (
            "version: v4\njobs:\n  a:\n    image: {{ .Name | quote }}\n",
            "4:23: the template calls function `quote`",
        ),
        (
            "version: v4\njobs:\n  a: {{ .Missing }}\n",
            "3:6: the template prints `.Missing`, which is set by no values file",
        ),
        (
            "version: v4\n{{- if .Name }}\njobs: {}\n",
            "2:1: template syntax: unexpected EOF",
        ),
        (
            "version: v4\n{{ fail (printf \"no %s\" .Name) }}\n",
            "2:1: the template stopped with `fail`: no x",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let t = write(tmp.path(), &format!("t{i}.yaml"), text);
        let run = fedvol(&["render", &t.display().to_string(), "--values", &vs]);
        assert_eq!(run.code, 1, "{}", run.describe());
        assert!(run.stdout.is_empty(), "{}", run.describe());
        assert!(
            run.stderr.starts_with(&format!("error: {}:{want}", t.display())),
            "{}",
            run.describe()
        );
    }
    // A rendered text the strict parser refuses: its lines are the rendered text's.
    // Template line 7 is rendered line 6 (the `if`/`end` lines go).
    let t = write(
        tmp.path(),
        "bad.yaml",
        "{{- if .Name }}\n# named\n{{- end }}\nversion: v4\njobs:\n  a:\n    imag: {{ .Name }}\n",
    );
    let run = fedvol(&["check", &t.display().to_string(), "--values", &vs]);
    assert_eq!(run.code, 1, "{}", run.describe());
    assert!(
        run.stderr.starts_with(&format!(
            "error: {} (rendered):6:5: jobs.a.imag: unknown field",
            t.display()
        )),
        "{}",
        run.describe()
    );
    assert!(
        run.stderr.contains("line numbers refer to the rendered text"),
        "{}",
        run.describe()
    );
}

#[test]
fn render_help_lists_every_function_a_template_may_call() {
    use fedvol_formats::render::funcs::{BUILTINS, NAMES};
    let run = fedvol(&["render", "--help"]);
    assert_eq!(run.code, 0, "{}", run.describe());
    let words: std::collections::BTreeSet<&str> = run.stdout.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    for f in NAMES.iter().chain(BUILTINS.iter()) {
        assert!(words.contains(f), "`fedvol render --help` lists `{f}`\n{}", run.stdout);
    }
}
