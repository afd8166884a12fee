//! Tests of the Fuzzfile parser: real public files (third-party inputs,
//! `fedvol_testenv::real_inputs`, skipped without them), and one focused test per rule.

use super::*;
use crate::yaml::Diagnostic;
use fedvol_common::model::{AccessMode, AccessModes, FuzzballVolume, JobKind, VolumeSource};

/// Every real Fuzzfile of the third-party inputs: (file name, text), sorted by name; `None`
/// (the test skipped) without them.
fn real_files() -> Option<Vec<(String, String)>> {
    let dir = fedvol_testenv::real_inputs()?.join("fuzzfiles");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    Some(out)
}

fn parse(text: &str) -> Result<Workflow, Diagnostics> {
    parse_fuzzfile("wf.yaml", "wf", text)
}

fn ok(text: &str) -> Workflow {
    match parse(text) {
        Ok(w) => w,
        Err(d) => panic!("expected the workflow to parse, got:\n{d}"),
    }
}

fn errs(text: &str) -> Vec<Diagnostic> {
    match parse(text) {
        Ok(w) => panic!("expected errors, got {w:#?}"),
        Err(d) => d.0,
    }
}

/// The one diagnostic whose message contains `needle` (fails if none or several).
fn find<'a>(ds: &'a [Diagnostic], needle: &str) -> &'a Diagnostic {
    let hits: Vec<&Diagnostic> = ds.iter().filter(|d| d.message.contains(needle)).collect();
    assert_eq!(
        hits.len(),
        1,
        "expected one diagnostic containing {needle:?}, got: {ds:#?}"
    );
    hits[0]
}

fn fuzz(w: &Workflow, key: &str) -> FuzzballVolume {
    let v = w
        .volumes
        .iter()
        .find(|v| v.key == key)
        .unwrap_or_else(|| panic!("no volume {key}"));
    match &v.source {
        VolumeSource::Fuzzball(f) => f.clone(),
        other => panic!("not a Fuzzfile volume: {other:?}"),
    }
}

fn job<'a>(w: &'a Workflow, name: &str) -> &'a fedvol_common::model::Job {
    w.jobs
        .iter()
        .find(|j| j.name == name)
        .unwrap_or_else(|| panic!("no job {name}"))
}

fn mounts(w: &Workflow, name: &str) -> Vec<(String, String)> {
    job(w, name)
        .mounts
        .iter()
        .map(|m| (m.volume.clone(), m.path.clone()))
        .collect()
}

fn pair(v: &str, p: &str) -> (String, String) {
    (v.to_string(), p.to_string())
}

const RWO: AccessModes = AccessModes(1);

fn rwx() -> AccessModes {
    AccessModes::of(&[AccessMode::ReadWriteMany])
}

// ---------------------------------------------------------------- real files

#[test]
fn every_plain_real_fuzzfile_parses() {
    let Some(files) = real_files() else { return };
    let plain: Vec<_> = files.into_iter().filter(|(_, t)| !t.contains("{{")).collect();
    assert_eq!(
        plain.len(),
        10,
        "plain real Fuzzfiles (update when real-inputs changes)"
    );
    for (name, text) in &plain {
        if let Err(d) = parse_fuzzfile(name, name, text) {
            panic!("{name} must parse unmodified:\n{d}");
        }
    }
}

#[test]
fn real_files_mean_what_they_say() {
    let Some(files) = real_files() else { return };
    let get = |suffix: &str| {
        let (name, text) = files.iter().find(|(n, _)| n.ends_with(suffix)).unwrap();
        parse_fuzzfile(name, suffix, text).unwrap()
    };
    let blast = get("__blast__blast.yaml");
    assert_eq!(blast.format, WorkflowFormat::FuzzfileV1);
    let vol = fuzz(&blast, "blast-volume");
    assert_eq!(vol.use_.as_deref(), Some("ephemeral"));
    assert_eq!(
        vol.name, None,
        "v1 `name:` (a copy of the key) is ignored beside a reference"
    );
    assert_eq!(vol.reference.as_deref(), Some("volume://user/ephemeral"));
    assert_eq!(blast.volumes[0].access_modes, rwx(), "five jobs share the volume");
    assert_eq!(blast.volumes[0].line, 3);
    let names: Vec<&str> = blast.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "create-dirs",
            "retrieve-query-sequence",
            "retrieve-database-sequences",
            "make-blast-database",
            "run-blast"
        ]
    );
    let run = job(&blast, "run-blast");
    assert_eq!(run.resources.cpu, 8);
    assert_eq!(run.resources.memory.0, 30 << 30);
    assert_eq!(run.depends_on, ["make-blast-database"]);
    assert_eq!(run.image.as_deref(), Some("docker://ncbi/blast:2.12.0"));
    assert_eq!(mounts(&blast, "run-blast"), [pair("blast-volume", "/data")]);

    let mpi = get("__mpich-hello-world.fz.yaml");
    assert_eq!(job(&mpi, "mpi-hello-world").nodes, 2);
    assert_eq!(job(&mpi, "mpi-hello-world").resources.memory.0, 1_000_000_000);

    let lammps = get("__lammps-gpu-ngc.yaml");
    assert_eq!(
        job(&lammps, "run-lammps").resources.devices.get("nvidia.com/gpu"),
        Some(&1)
    );
    assert_eq!(lammps.volumes[0].access_modes, RWO, "one single-node job");

    let jupyter = get("__jupyter-notebook.yaml");
    assert!(job(&jupyter, "jupyter").resources.exclusive);
}

#[test]
fn every_real_template_is_refused_with_the_template_diagnostic() {
    let Some(files) = real_files() else { return };
    let templates: Vec<_> = files.into_iter().filter(|(_, t)| t.contains("{{")).collect();
    assert_eq!(
        templates.len(),
        53,
        "templated real Fuzzfiles (update when real-inputs changes)"
    );
    for (name, text) in &templates {
        let d = parse_fuzzfile(name, name, text).expect_err(name).0;
        assert_eq!(d.len(), 1, "{name}: one diagnostic, got {d:#?}");
        let d = &d[0];
        assert_eq!(d.file, *name);
        assert!(d.message.contains("unrendered template"), "{name}: {}", d.message);
        assert!(d.message.contains("values"), "{name}: {}", d.message);
        let line = text.lines().nth(d.line - 1).unwrap();
        let rest: String = line.chars().skip(d.col - 1).collect();
        assert!(
            rest.starts_with("{{"),
            "{name}:{}:{} is not at a `{{{{`: {line}",
            d.line,
            d.col
        );
    }
}

/// A crude stand-in for rendering a Go template: removes actions that stand alone on their
/// lines (`{{- if .X }}`, `{{ end }}`, `{{- $v := ... }}`, also when spanning lines) and
/// replaces the others with a placeholder (`/tmp` where the action starts a mapping key, else
/// `1`).
fn crude_render(text: &str) -> String {
    let mut t = text.to_string();
    while let Some(a) = t.find("{{") {
        let Some(len) = t[a..].find("}}") else { break };
        let b = a + len + 2;
        let line_start = t[..a].rfind('\n').map_or(0, |i| i + 1);
        let line_end = t[b..].find('\n').map_or(t.len(), |i| b + i + 1);
        let alone = t[line_start..a].trim().is_empty() && t[b..line_end].trim().is_empty();
        if alone {
            t.replace_range(line_start..line_end, "");
        } else {
            let key = t[line_start..a].trim().is_empty() && t[b..].starts_with(':');
            t.replace_range(a..b, if key { "/tmp" } else { "1" });
        }
    }
    t
}

/// Schema coverage against real use: once their template actions are stubbed out, the
/// catalog templates use no key the parser does not know and no value of the wrong shape.
/// (Placeholder values do trip value checks, which is expected and not asserted here.)
#[test]
fn crudely_rendered_templates_use_only_known_keys_and_shapes() {
    let Some(files) = real_files() else { return };
    let mut loaded = 0;
    for (name, text) in files.iter().filter(|(_, t)| t.contains("{{")) {
        let rendered = crude_render(text);
        assert_eq!(find_template(&rendered), None, "{name}");
        let Ok(docs) = load_documents(&rendered, Limits::default()) else {
            continue;
        };
        loaded += 1;
        let mut ctx = Ctx::new(name.clone());
        assert!(decode_fuzzfile(&mut ctx, "x", &docs[0]).is_some(), "{name}");
        for d in ctx.into_diagnostics() {
            for bad in [
                "unknown field",
                "expected a mapping",
                "expected a list",
                "missing required",
            ] {
                assert!(!d.message.contains(bad), "{d}");
            }
        }
    }
    assert!(loaded >= 50, "only {loaded} crudely rendered templates loaded as YAML");
}

// ---------------------------------------------------------------- templates, YAML, documents

#[test]
fn template_diagnostic_points_at_first_action() {
    let d = errs("version: v4\nvolumes:\n  data:\n    use: {{ .Provisioner }}\n");
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].line, d[0].col), (4, 10));
    assert!(
        d[0].to_string()
            .starts_with("wf.yaml:4:10: this file is an unrendered template"),
        "{}",
        d[0]
    );
}

#[test]
fn yaml_errors_and_document_count_are_positioned() {
    let d = errs("version: v4\njobs: [a, b\n");
    assert_eq!(d.len(), 1);
    assert!(d[0].message.starts_with("not valid YAML"), "{}", d[0]);
    assert!(d[0].line >= 2);

    let d = errs("version: v4\n---\nversion: v4\n");
    let m = find(&d, "one YAML document");
    assert_eq!(m.line, 3);

    let d = errs("");
    find(&d, "empty");
    let d = errs("- version: v4\n");
    find(&d, "expected a mapping, found a list");
}

// ---------------------------------------------------------------- version

#[test]
fn version_is_required_and_checked() {
    let d = errs("jobs: {}\n");
    find(&d, "missing required field `version`");
    let d = errs("version: v2\n");
    let m = find(&d, "expected one of v1, v4");
    assert_eq!((m.line, m.col, m.field.as_str()), (1, 10, "version"));
    assert_eq!(ok("version: v4\n").format, WorkflowFormat::FuzzfileV4);
    assert_eq!(ok("version: \"v1\"\n").format, WorkflowFormat::FuzzfileV1);
}

#[test]
fn jobs_may_be_absent() {
    let w = ok("version: v4\nvolumes:\n  scratch:\n    use: ephemeral\n    size: 10GB\n");
    assert!(w.jobs.is_empty());
    assert_eq!(w.name, "wf");
    let v = fuzz(&w, "scratch");
    assert_eq!(v.use_.as_deref(), Some("ephemeral"));
    assert_eq!(v.size.map(|s| s.0), Some(10_000_000_000));
    assert_eq!(w.volumes[0].access_modes, RWO, "mounted by nobody");
}

// ---------------------------------------------------------------- mounts

#[test]
fn v1_mount_form() {
    let w = ok(
        "version: v1\nvolumes:\n  data:\n    reference: volume://user/ephemeral\njobs:\n  a:\n    mounts:\n      data:\n        location: /data\n",
    );
    assert_eq!(mounts(&w, "a"), [pair("data", "/data")]);
}

#[test]
fn v4_mapping_and_scalar_mount_forms() {
    let w = ok(
        "version: v4\nvolumes:\n  data: {use: ephemeral}\n  home: {name: homes}\njobs:\n  a:\n    mounts:\n      /data:\n        volume: data\n      /home/user: home\n",
    );
    assert_eq!(mounts(&w, "a"), [pair("data", "/data"), pair("home", "/home/user")]);
    assert_eq!(fuzz(&w, "home").name.as_deref(), Some("homes"));
}

#[test]
fn wrong_mount_form_for_the_version_says_which_form_is_expected() {
    // v4 forms in a v1 file.
    let d = errs(
        "version: v1\nvolumes:\n  data: {}\njobs:\n  a:\n    mounts:\n      /data: data\n  b:\n    mounts:\n      /data:\n        volume: data\n",
    );
    assert_eq!(d.len(), 2, "{d:#?}");
    assert!(
        d.iter().all(|x| x
            .message
            .contains("version v1 expects `<volume>: {location: <absolute path>}`")),
        "{d:#?}"
    );
    assert_eq!(
        (d[0].line, d[0].col, d[0].field.as_str()),
        (7, 14, "jobs.a.mounts./data")
    );
    assert!(
        d[1].message
            .starts_with("`<path>: {volume: <volume>}` is the v4 mount form"),
        "{}",
        d[1]
    );
    assert_eq!((d[1].line, d[1].col), (10, 7));
    // v1 form in a v4 file.
    let d = errs("version: v4\nvolumes:\n  data: {}\njobs:\n  a:\n    mounts:\n      data:\n        location: /data\n");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].message.contains("is the v1 mount form"), "{}", d[0]);
    assert!(
        d[0].message
            .contains("version v4 expects `<absolute path>: {volume: <volume>}` or `<absolute path>: <volume>`")
    );
    assert_eq!((d[0].line, d[0].col), (7, 7));
    // A v4 key that is not a path.
    let d = errs("version: v4\nvolumes:\n  data: {}\njobs:\n  a:\n    mounts:\n      data: data\n");
    find(&d, "mount key `data` is not an absolute path");
}

#[test]
fn mount_paths_must_be_absolute_and_distinct() {
    let d = errs(
        "version: v1\nvolumes:\n  a: {}\n  b: {}\njobs:\n  j:\n    mounts:\n      a: {location: data}\n      b: {location: /x}\n      c: {location: /x}\n",
    );
    find(&d, "expected an absolute path");
    let m = find(&d, "path `/x` is already used by the mount of volume `b`");
    assert_eq!(m.line, 10);
    // The dangling `c` is not reported twice: the duplicate path was reported instead.
    assert_eq!(d.len(), 2, "{d:#?}");
}

// ---------------------------------------------------------------- defaults

#[test]
fn defaults_mounts_and_resource_are_inherited() {
    let w = ok(r#"version: v4
volumes:
  shared: {use: ephemeral}
  home: {use: ephemeral}
  svc: {use: ephemeral}
  own: {use: ephemeral}
defaults:
  mounts:
    /shared: shared
  resource:
    cpu: {cores: 2}
    memory: {size: 2GiB}
  job:
    mounts:
      /home: home
    resource:
      cpu: {cores: 4}
  service:
    mounts:
      /svc: svc
jobs:
  plain: {}
  custom:
    mounts:
      /home: own
    resource:
      cpu: {cores: 16}
services:
  web: {}
"#);
    assert_eq!(mounts(&w, "plain"), [pair("home", "/home"), pair("shared", "/shared")]);
    assert_eq!(
        job(&w, "plain").resources.cpu,
        4,
        "defaults.job.resource before defaults.resource"
    );
    assert_eq!(
        job(&w, "plain").resources.memory.0,
        0,
        "the whole resource comes from one level"
    );
    // The job's own `/home` wins over the inherited one (same key).
    assert_eq!(mounts(&w, "custom"), [pair("own", "/home"), pair("shared", "/shared")]);
    assert_eq!(job(&w, "custom").resources.cpu, 16);
    assert_eq!(mounts(&w, "web"), [pair("svc", "/svc"), pair("shared", "/shared")]);
    assert_eq!(
        job(&w, "web").resources.cpu,
        2,
        "services fall back to defaults.resource"
    );
    assert_eq!(job(&w, "web").resources.memory.0, 2 << 30);
    // `shared` is mounted by all three: ReadWriteMany; `svc` by the service only.
    let modes = |k: &str| w.volumes.iter().find(|v| v.key == k).unwrap().access_modes;
    assert_eq!(modes("shared"), rwx());
    assert_eq!(
        modes("home"),
        RWO,
        "only `plain` inherits it: `custom` mounts `own` at /home instead"
    );
    assert_eq!(modes("svc"), RWO);
    assert_eq!(modes("own"), RWO);
}

#[test]
fn v1_defaults_merge_by_volume_key() {
    let w = ok(
        "version: v1\nvolumes:\n  d: {}\ndefaults:\n  job:\n    mounts:\n      d: {location: /data}\njobs:\n  a:\n    mounts:\n      d: {location: /elsewhere}\n  b: {}\n",
    );
    assert_eq!(mounts(&w, "a"), [pair("d", "/elsewhere")]);
    assert_eq!(mounts(&w, "b"), [pair("d", "/data")]);
}

#[test]
fn no_resource_anywhere_means_one_core() {
    let w = ok("version: v4\njobs:\n  a: {}\n");
    let r = &job(&w, "a").resources;
    assert_eq!((r.cpu, r.memory.0, r.exclusive), (1, 0, false));
    assert_eq!(job(&w, "a").nodes, 1);
}

#[test]
fn defaults_fields_are_checked() {
    let d = errs("version: v4\ndefaults:\n  service:\n    policy: {}\n  jobs: {}\n");
    let m = find(&d, "unknown field `policy`");
    assert_eq!(m.field, "defaults.service.policy");
    let m = find(&d, "unknown field `jobs`");
    assert_eq!(m.hint.as_deref(), Some("did you mean `job`?"));
}

// ---------------------------------------------------------------- resource

#[test]
fn resource_sizes_devices_and_by_core() {
    let w = ok(r#"version: v4
jobs:
  a:
    resource:
      cpu: {cores: 4, affinity: numa, threads: false, sockets: 1}
      memory: {size: 512MIB, by-core: true}
      devices: {nvidia.com/gpu: 2, cerebras.net/wse2: 1}
      exclusive: true
      annotations: {nvidia.com/gpu.model: NVIDIA H100}
  b:
    resource:
      memory: {size: 0.5GiB}
  c:
    resource:
      memory: {size: 1000, byCore: false}
  d:
    resource:
      memory: {size: 1GB}
"#);
    let a = &job(&w, "a").resources;
    assert_eq!(a.cpu, 4);
    assert_eq!(a.memory.0, 4 * 512 * 1024 * 1024, "by-core multiplies by the cores");
    assert_eq!(a.devices.get("nvidia.com/gpu"), Some(&2));
    assert_eq!(a.devices.get("cerebras.net/wse2"), Some(&1));
    assert!(a.exclusive);
    assert_eq!(
        a.annotations.get("nvidia.com/gpu.model").map(String::as_str),
        Some("NVIDIA H100")
    );
    assert_eq!(job(&w, "b").resources.memory.0, 512 << 20);
    assert_eq!(job(&w, "b").resources.cpu, 1);
    assert_eq!(job(&w, "c").resources.memory.0, 1000, "no unit means bytes");
    assert_eq!(job(&w, "d").resources.memory.0, 1_000_000_000, "GB is decimal");
}

#[test]
fn by_core_camel_case_alias_multiplies_too() {
    let w =
        ok("version: v4\njobs:\n  a:\n    resource:\n      cpu: {cores: 3}\n      memory: {size: 1GB, byCore: true}\n");
    assert_eq!(job(&w, "a").resources.memory.0, 3_000_000_000);
    let d = errs("version: v4\njobs:\n  a:\n    resource:\n      memory: {size: 1GB, by-core: true, byCore: true}\n");
    find(&d, "`byCore` is another spelling of `by-core`");
}

#[test]
fn resource_values_are_checked() {
    let d = errs(
        r#"version: v4
jobs:
  a:
    resource:
      cpu: {cores: 0, affinity: THREAD}
      memory: {size: 10 parsecs}
      devices: {nvidia.com/gpu: one}
      exclusive: "yes"
"#,
    );
    assert_eq!(find(&d, "from 1 to").field, "jobs.a.resource.cpu.cores");
    assert_eq!(find(&d, "expected one of NUMA, SOCKET, CORE").line, 5);
    assert_eq!(find(&d, "unknown unit `parsecs`").line, 6);
    assert_eq!(
        find(&d, "expected a whole number, found `one`").field,
        "jobs.a.resource.devices.nvidia.com/gpu"
    );
    assert_eq!(find(&d, "expected true or false").line, 8);
    assert_eq!(d.len(), 5, "{d:#?}");
}

// ---------------------------------------------------------------- volumes

#[test]
fn v1_references_translate_to_v4_meaning() {
    let w = ok(r#"version: v1
volumes:
  scratch:
    name: scratch
    reference: volume://user/ephemeral
    type: EPHEMERAL
    path: /old
  models:
    name: models
    reference: volume://group/persistent/ollama-models
"#);
    let s = fuzz(&w, "scratch");
    assert_eq!((s.use_.as_deref(), s.name.as_deref()), (Some("ephemeral"), None));
    assert_eq!(s.reference.as_deref(), Some("volume://user/ephemeral"));
    let m = fuzz(&w, "models");
    assert_eq!(
        (m.use_.as_deref(), m.name.as_deref()),
        (Some("persistent"), Some("ollama-models"))
    );
    assert_eq!(m.reference.as_deref(), Some("volume://group/persistent/ollama-models"));
    assert_eq!(w.volumes[1].line, 8);
}

#[test]
fn bad_references_say_what_is_expected() {
    let d = errs(
        "version: v1\nvolumes:\n  a:\n    reference: volume://user/scratch\n  b:\n    reference: volume://user/ephemeral\n    use: fast\n",
    );
    let m = find(&d, "is not a volume reference");
    assert!(m.message.contains("volume://<scope>/<class>[/<name>]"), "{m}");
    assert!(m.message.contains("`ephemeral` or `persistent`"), "{m}");
    assert_eq!((m.line, m.col, m.field.as_str()), (4, 16, "volumes.a.reference"));
    assert_eq!(find(&d, "keep one").line, 7);
}

#[test]
fn v4_volume_fields() {
    let w = ok(r#"version: v4
volumes:
  fast:
    use: fast-storage
    size: 1TiB
    annotations:
      tier: fast
    ingress:
      - source: {uri: "s3://bucket/in", secret: "secret://user/s3"}
        destination: {uri: "file://in"}
    egress:
      - source: {uri: "file://out"}
        destination: {uri: "s3://bucket/out", secret: "secret://user/s3"}
        policy: {retry: {attempts: 2}}
"#);
    let f = fuzz(&w, "fast");
    assert_eq!(f.use_.as_deref(), Some("fast-storage"));
    assert_eq!(f.size.map(|s| s.0), Some(1 << 40));
    assert_eq!(f.annotations.get("tier").map(String::as_str), Some("fast"));
    assert_eq!(f.reference, None);
}

/// A URI with a password in its user-info is an inline secret: credentials go in `secret:`
/// by reference (Fuzzball's URI object). Refused at its position, never repeated. An image
/// digest after `@` is not user-info.
#[test]
fn uris_with_credentials_are_refused_without_repeating_them() {
    let d = errs(
        r#"version: v4
volumes:
  a:
    ingress:
      - source: {uri: "https://bob:s3cr3t@data.example/in.tar"}
        destination: {uri: "file://in.tar"}
jobs:
  j:
    image: {uri: "docker://bob:s3cr3t@registry.example/app:1"}
    command: [true]
    mounts: {/a: a}
"#,
    );
    let text = format!("{d:?}");
    assert!(!text.contains("s3cr3t"), "{text}");
    let e = &d
        .iter()
        .find(|x| x.field == "volumes.a.ingress[0].source.uri")
        .expect("the source's uri");
    assert_eq!(e.line, 5, "{d:#?}");
    assert!(e.message.contains("the URI holds credentials"), "{d:#?}");
    assert!(e.hint.as_deref().unwrap_or("").contains("secret: secret://"), "{d:#?}");
    let e = &d
        .iter()
        .find(|x| x.field == "jobs.j.image.uri")
        .expect("the image's uri");
    assert_eq!(e.line, 9, "{d:#?}");
    assert_eq!(d.len(), 2, "{d:#?}");
    let digest = "docker://alpine:3.20@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    ok(&format!(
        "version: v4\njobs:\n  j:\n    image: {{uri: \"{digest}\"}}\n    command: [true]\n"
    ));
}

/// A newcomer's `depends-on: [prep]` (or `depends-on: prep`, or a job given as a string) is
/// refused naming the field, what was found and the shape expected, with an example.
#[test]
fn wrong_shapes_name_the_field_what_was_found_and_the_shape_expected() {
    let d = errs(
        r#"version: v4
jobs:
  prep: {image: {uri: docker://alpine}, command: [true]}
  train:
    image: {uri: docker://alpine}
    command: [true]
    depends-on: [prep]
  eval:
    image: {uri: docker://alpine}
    command: [true]
    depends-on: prep
  report: docker://alpine
"#,
    );
    let at = |field: &str| {
        d.iter()
            .find(|x| x.field == field)
            .unwrap_or_else(|| panic!("{field}: {d:#?}"))
    };
    let e = at("jobs.train.depends-on[0]");
    assert_eq!((e.line, e.col), (7, 18), "{d:#?}");
    assert_eq!(e.message, "expected a mapping, found a string `prep`");
    let hint = e.hint.as_deref().unwrap_or("");
    assert!(
        hint.contains("`- name: <job>`") && hint.contains("status: running"),
        "{hint}"
    );
    let e = at("jobs.eval.depends-on");
    assert_eq!(e.message, "expected a list, found a string `prep`");
    assert!(
        e.hint.as_deref().unwrap_or("").contains("depends-on: [{name: prep}]"),
        "{e:?}"
    );
    let e = at("jobs.report");
    assert!(e.message.starts_with("expected a mapping, found a string"), "{e:?}");
    assert!(e.hint.as_deref().unwrap_or("").contains("a job: `image:"), "{e:?}");
}

#[test]
fn volume_field_shapes_are_checked() {
    let d = errs(
        r#"version: v4
volumes:
  a:
    size: lots
    annotations: [tier]
    ingress:
      - source: {uri: "s3://x", secret: "s3-token", cache: sometimes}
  b: just-a-string
"#,
    );
    assert_eq!(find(&d, "`lots` is not a size").line, 4);
    assert_eq!(
        find(&d, "expected a mapping, found a list").field,
        "volumes.a.annotations"
    );
    assert_eq!(
        find(&d, "not a secret reference").field,
        "volumes.a.ingress[0].source.secret"
    );
    assert_eq!(find(&d, "expected one of once, changed, never").line, 7);
    assert_eq!(
        find(&d, "missing required field `destination`").field,
        "volumes.a.ingress[0]"
    );
    assert_eq!(find(&d, "expected a mapping, found a string").field, "volumes.b");
    assert_eq!(d.len(), 6, "{d:#?}");
}

// ---------------------------------------------------------------- unknown keys, many errors

#[test]
fn unknown_keys_get_a_hint_and_a_position() {
    let d = errs("version: v4\njobs:\n  a:\n    image: {uri: docker://alpine}\n    resorce:\n      cpu: {cores: 1}\n");
    assert_eq!(d.len(), 1, "{d:#?}");
    let m = &d[0];
    assert_eq!((m.line, m.col, m.field.as_str()), (5, 5, "jobs.a.resorce"));
    assert_eq!(m.hint.as_deref(), Some("did you mean `resource`?"));
    assert!(
        m.to_string()
            .starts_with("wf.yaml:5:5: jobs.a.resorce: unknown field `resorce`"),
        "{m}"
    );
}

#[test]
fn every_error_in_a_file_is_reported_at_once() {
    let d = errs(
        r#"version: v4
volums: {}
volumes:
  a: {use: ephemeral, sise: 1GB}
jobs:
  j:
    mounts:
      /a: b
    resource:
      cpu: {cores: many}
    depends-on:
      - name: k
services:
  s:
    persist: maybe
"#,
    );
    let fields: Vec<&str> = d.iter().map(|x| x.field.as_str()).collect();
    for want in [
        "volums",
        "volumes.a.sise",
        "jobs.j.mounts./a",
        "jobs.j.resource.cpu.cores",
        "jobs.j.depends-on",
        "services.s.persist",
    ] {
        assert!(fields.contains(&want), "missing {want} in {fields:?}");
    }
    assert_eq!(d.len(), 6, "{d:#?}");
}

#[test]
fn duplicate_keys_are_reported_once_and_the_first_entry_is_kept() {
    let d = errs("version: v4\njobs:\n  a: {}\n  a: {}\n");
    let m = find(&d, "duplicate key");
    assert_eq!((m.line, m.field.as_str()), (4, "jobs.a"));
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = errs("version: v4\nvolumes: {x: {}, y: {}}\njobs:\n  a:\n    mounts:\n      /d: x\n      /d: y\n");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!((d[0].line, d[0].message.as_str()), (7, "duplicate key"));
}

// ---------------------------------------------------------------- dangling references

#[test]
fn dangling_references_are_errors_where_they_are_written() {
    let d = errs(
        r#"version: v4
volumes:
  data: {use: ephemeral}
defaults:
  mounts:
    /cache: cache
jobs:
  a:
    mounts:
      /d: dta
    depends-on:
      - name: prep
        status: FINISHED
    requires: [b, nobody]
    affinity:
      with: [ghost]
      apart-from: [b]
  b: {}
"#,
    );
    let m = find(&d, "volume `dta`");
    assert_eq!((m.line, m.col, m.field.as_str()), (10, 11, "jobs.a.mounts./d"));
    assert_eq!(m.hint.as_deref(), Some("did you mean `data`?"));
    let m = find(&d, "volume `cache`");
    assert_eq!((m.line, m.field.as_str()), (6, "defaults.mounts./cache"));
    let m = find(&d, "`prep` is not a job or service");
    assert_eq!((m.line, m.col, m.field.as_str()), (12, 15, "jobs.a.depends-on"));
    assert_eq!(find(&d, "`nobody` is not a job or service").field, "jobs.a.requires");
    assert_eq!(
        find(&d, "`ghost` is not a job or service").field,
        "jobs.a.affinity.with"
    );
    assert_eq!(d.len(), 5, "{d:#?}");
}

#[test]
fn dependencies_resolve_across_jobs_and_services() {
    let w = ok(r#"version: v4
jobs:
  client:
    depends-on:
      - {name: server, status: running}
      - {name: setup, status: Finished, description: data ready}
    requires: [setup-only]
  setup-only: {}
  setup:
    requires: [server]
services:
  server: {}
"#);
    assert_eq!(job(&w, "client").depends_on, ["server", "setup"]);
    assert_eq!(job(&w, "setup").depends_on, ["server"]);
    let names: Vec<(&str, JobKind)> = w.jobs.iter().map(|j| (j.name.as_str(), j.kind)).collect();
    assert_eq!(
        names,
        [
            ("client", JobKind::Job),
            ("setup-only", JobKind::Job),
            ("setup", JobKind::Job),
            ("server", JobKind::Service)
        ]
    );
    assert_eq!(w.jobs.iter().map(|j| j.line).collect::<Vec<_>>(), [3, 8, 9, 12]);
}

#[test]
fn bad_dependencies_are_reported() {
    let d = errs(
        r#"version: v4
jobs:
  a:
    depends-on:
      - {name: b, status: RUNNING}
      - {name: a}
      - {name: s, status: DONE}
      - {name: s, status: running}
  b: {}
  c: {}
services:
  s: {}
  c: {}
"#,
    );
    find(&d, "status RUNNING applies only to services");
    find(&d, "`a` refers to itself");
    find(&d, "expected one of FINISHED, RUNNING");
    assert_eq!(find(&d, "name of both a job and a service").line, 13);
    assert_eq!(d.len(), 4, "{d:#?}");
}

// ---------------------------------------------------------------- wrong types

#[test]
fn wrong_types_are_reported_with_what_was_expected() {
    let d = errs(
        r#"version: v4
jobs:
  a:
    image: docker://alpine
    command: echo hi
    env: [NOEQUALS]
    cwd: relative/dir
    multinode: {nodes: "2", implementation: openmpi, procsPerNode: 0}
    task-array: {start: 5, end: 1, concurrency: 500}
    policy: {timeout: {execute: 10 minutes}, restart: always}
    network: {isolated: true, exposeTcp: [80, 70000]}
    preemptible: 1
"#,
    );
    assert_eq!(find(&d, "expected a mapping, found a string").field, "jobs.a.image");
    assert_eq!(find(&d, "expected a list, found a string").field, "jobs.a.command");
    assert_eq!(find(&d, "`NAME=value`").field, "jobs.a.env[0]");
    assert_eq!(find(&d, "absolute path").field, "jobs.a.cwd");
    assert_eq!(
        find(&d, "expected a whole number, found `2`").field,
        "jobs.a.multinode.nodes"
    );
    assert_eq!(
        find(&d, "expected a whole number from 1 to 9223372036854775807, found 0").field,
        "jobs.a.multinode.procs-per-node"
    );
    assert_eq!(find(&d, "before start").field, "jobs.a.task-array.end");
    assert_eq!(find(&d, "from 1 to 200").field, "jobs.a.task-array.concurrency");
    assert_eq!(find(&d, "Go duration").field, "jobs.a.policy.timeout.execute");
    assert_eq!(find(&d, "on-node-fault, never").field, "jobs.a.policy.restart");
    assert_eq!(find(&d, "from 1 to 65535").field, "jobs.a.network.expose-tcp[1]");
    assert_eq!(
        find(&d, "expected true or false, found `1`").field,
        "jobs.a.preemptible"
    );
    assert_eq!(d.len(), 12, "{d:#?}");
}

#[test]
fn service_fields_are_checked_and_policy_is_accepted_on_services() {
    let w = ok(r#"version: v4
services:
  web:
    persist: true
    image: {uri: docker://nginx, secret: secret://user/pull}
    network:
      ports: [{name: http, port: 8080, protocol: tcp}]
      endpoints: [{name: site, port-name: http, protocol: https, type: subdomain, scope: public}]
      host: false
    readiness-probe:
      http-get: {path: /, port: 8080, scheme: http, http-headers: [{name: X, value: y}]}
      initial-delay-seconds: 5
      period-seconds: 10
    autoscaler:
      replicas: {min: 1, max: 3}
      metrics: {enabled: true, path: /metrics, port: 9090, interval: 30s, includes: [rps]}
      scale-up: {triggers: [{metrics-query: "rps > 10", cooldown-period: 1m, services: [web]}]}
      scale-down: {metrics-query: "rps < 1", drain-period: 30s}
    dynamic-config: {path: /etc/conf, services: [web], script: "echo"}
    policy:
      timeout: {execute: 1h}
"#);
    assert_eq!(w.jobs[0].kind, JobKind::Service);
    let d = errs(
        r#"version: v4
services:
  web:
    network:
      ports: [{name: http, port: 8080}]
      endpoints: [{name: site, port-name: htp}]
    readiness-probe:
      initial-delay-seconds: 5
    task-array: {start: 1, end: 2}
    autoscaler:
      replicas: {min: 3, max: 1}
"#,
    );
    assert_eq!(
        find(&d, "endpoint names port `htp`").hint.as_deref(),
        Some("did you mean `http`?")
    );
    find(&d, "exactly one of exec, http-get, tcp-socket, grpc; found none");
    assert_eq!(find(&d, "unknown field `task-array`").field, "services.web.task-array");
    find(&d, "below min");
    assert_eq!(d.len(), 4, "{d:#?}");
}

#[test]
fn top_level_fields_are_checked() {
    let w = ok(
        "version: v4\nannotations: {topology: rack}\nfiles:\n  a.py: |\n    print(1)\npreemptible: true\ncompleted: {status: done}\n",
    );
    assert_eq!(w.annotations.get("topology").map(String::as_str), Some("rack"));
    let d = errs("version: v4\nannotations: [a]\nfiles: {a: [1]}\npreemptible: yes\n");
    assert_eq!(d.len(), 3, "{d:#?}");
}

// ---------------------------------------------------------------- fedvol additions

#[test]
fn placement_additions_are_parsed() {
    let w = ok(r#"version: v4
project: science
clusters: [east, west]
jobs:
  train:
    constraints: ["gpu:a100", "!maintenance", "ssd:soft"]
    affinity:
      with: [cache]
      apart-from: [other]
    networks: [infiniband]
  other: {}
services:
  cache: {}
"#);
    assert_eq!(w.project.as_deref(), Some("science"));
    assert_eq!(w.clusters, ["east", "west"]);
    let t = job(&w, "train");
    assert_eq!(
        t.constraints.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        ["gpu:a100", "!maintenance", "ssd:soft"]
    );
    assert_eq!(t.constraints[2].strength, fedvol_common::model::Strength::Soft);
    assert_eq!(t.affinity.with, ["cache"]);
    assert_eq!(t.affinity.apart_from, ["other"]);
    assert_eq!(t.networks, ["infiniband"]);
}

#[test]
fn bad_additions_are_positioned() {
    let d = errs(
        r#"version: v4
project: [a]
clusters: [east, east]
jobs:
  a:
    constraints: ["gpu", ":soft"]
    affinity: {with: [b], apart-from: [b], near: [b]}
    networks: net0
  b: {}
"#,
    );
    assert_eq!(find(&d, "expected a string, found a list").field, "project");
    assert_eq!(find(&d, "listed twice").line, 3);
    let m = find(&d, "not a constraint");
    assert_eq!((m.line, m.col, m.field.as_str()), (6, 26, "jobs.a.constraints[1]"));
    find(&d, "also listed under `with`");
    assert_eq!(find(&d, "unknown field `near`").field, "jobs.a.affinity.near");
    assert_eq!(find(&d, "expected a list, found a string").field, "jobs.a.networks");
    assert_eq!(d.len(), 6, "{d:#?}");
}

// ---------------------------------------------------------------- access modes

#[test]
fn access_modes_follow_how_many_hosts_mount_the_volume() {
    let w = ok(r#"version: v4
volumes:
  solo: {}
  multi: {}
  pair: {}
  idle: {}
jobs:
  one:
    mounts: {/solo: solo, /pair: pair}
  mpi:
    multinode: {nodes: 4, implementation: openmpi}
    mounts: {/m: multi}
  two:
    mounts:
      /pair: {volume: pair}
"#);
    let modes: Vec<(&str, AccessModes)> = w.volumes.iter().map(|v| (v.key.as_str(), v.access_modes)).collect();
    assert_eq!(modes, [("solo", RWO), ("multi", rwx()), ("pair", rwx()), ("idle", RWO)]);
    assert_eq!(job(&w, "mpi").nodes, 4);
}

#[test]
fn decode_fuzzfile_reports_into_the_callers_context() {
    let docs = load_documents("version: v4\njobs:\n  a: {bogus: 1}\n", Limits::default()).unwrap();
    let mut ctx = Ctx::new("other.yaml");
    let w = decode_fuzzfile(&mut ctx, "named", &docs[0]).expect("usable document");
    assert_eq!(w.name, "named");
    assert_eq!(ctx.error_count(), 1);
    let docs = load_documents("version: 9\n", Limits::default()).unwrap();
    let mut ctx = Ctx::new("other.yaml");
    assert!(
        decode_fuzzfile(&mut ctx, "named", &docs[0]).is_none(),
        "no usable version"
    );
}

#[test]
fn json_fuzzfiles_and_camel_case_aliases_are_accepted() {
    let w = ok(r#"{"version": "v4",
 "volumes": {"x": {"use": "ephemeral"}},
 "jobs": {"a": {
   "image": {"uri": "oras://r/i.sif", "decryptionSecret": "secret://user/key"},
   "mounts": {"/d": "x"},
   "multinode": {"nodes": 2, "implementation": "mpich", "procsPerNode": 4},
   "network": {"isolated": false, "exposeTcp": [22], "exposeUdp": [53]},
   "resource": {"cpu": {"cores": 2}, "memory": {"size": "1GiB", "byCore": true}}}}}"#);
    let a = job(&w, "a");
    assert_eq!(a.nodes, 2);
    assert_eq!(a.resources.memory.0, 2 << 30);
    assert_eq!(w.volumes[0].access_modes, rwx(), "mounted by a multinode job");
    let d = errs(r#"{"version": "v4", "jobs": {"a": {"multinode": {"procs-per-node": 1, "procsPerNode": 1}}}}"#);
    assert_eq!(find(&d, "another spelling").field, "jobs.a.multinode.procsPerNode");
}

#[test]
fn without_a_valid_version_other_problems_are_still_reported() {
    let d = errs(
        "version: v5\nvolumes:\n  data: {}\njobs:\n  a:\n    mounts:\n      data: {location: /data}\n      dta: {location: /dta}\n  b:\n    mounts:\n      /x: data\n    cwd: x\n",
    );
    find(&d, "expected one of v1, v4");
    assert_eq!(find(&d, "volume `dta`").line, 8);
    find(&d, "absolute path");
    assert_eq!(
        d.len(),
        3,
        "both mount forms are read when the version is unknown: {d:#?}"
    );
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = r#"version: v4
volumes:
  data: {use: ephemeral, size: 0.5GiB, annotations: {tier: fast}}
defaults:
  job:
    mounts: {/data: data}
    resource: {cpu: {cores: 2}, memory: {size: 1GB, by-core: true}}
jobs:
  a:
    depends-on: [{name: s, status: RUNNING}]
    affinity: {with: [s]}
    constraints: ["gpu:soft"]
services:
  s: {mounts: {/x: {volume: data}}}
"#;

    #[test]
    fn sample_is_valid() {
        let w = ok(SAMPLE);
        assert_eq!(w.volumes[0].access_modes, rwx());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any text gets an answer (a workflow or diagnostics), never a panic.
        #[test]
        fn arbitrary_text(text in "[ a-z0-9:{}\\[\\],\\-/.!#\"'|>\\n]{0,200}") {
            let _ = parse_fuzzfile("p.yaml", "p", &text);
        }

        /// A valid file with a slice cut out or a byte replaced still never panics, and every
        /// diagnostic has a real position.
        #[test]
        fn damaged_sample(start in 0usize..SAMPLE.len(), len in 0usize..40, byte in 32u8..127) {
            let mut t = SAMPLE.to_string();
            let end = (start + len).min(t.len());
            t.replace_range(start..end, "");
            if start < t.len() {
                t.replace_range(start..start + 1, &(byte as char).to_string());
            }
            if let Err(d) = parse_fuzzfile("p.yaml", "p", &t) {
                prop_assert!(d.0.iter().all(|x| x.line >= 1 && x.col >= 1));
            }
        }
    }
}

/// `policy.timeout.execute` is kept as the job's `timeout_ms` in the spellings real
/// files use (`10m0s`, `2h0s`, `24h0m0s`, `30m`, `1.5h`), jobs inherit `defaults.job`'s, a
/// service keeps its own, and the workflow's declared duration is its longest dependency chain.
#[test]
fn job_timeouts_are_kept_and_give_the_declared_duration() {
    let w = ok(r#"version: v4
defaults:
  job:
    policy: {timeout: {execute: 30m}}
jobs:
  fetch:
    image: {uri: docker://alpine}
    policy: {timeout: {execute: 10m0s}}
  train:
    image: {uri: docker://alpine}
    policy: {timeout: {execute: 2h0s}}
    depends-on: [{name: fetch}]
  report:
    image: {uri: docker://alpine}
    depends-on: [{name: train}]
  side:
    image: {uri: docker://alpine}
    policy: {timeout: {execute: 1.5h}}
services:
  web:
    image: {uri: docker://nginx}
    policy: {timeout: {execute: 24h0m0s}}
  db:
    image: {uri: docker://postgres}
"#);
    assert_eq!(job(&w, "fetch").timeout_ms, Some(600_000));
    assert_eq!(job(&w, "train").timeout_ms, Some(7_200_000));
    assert_eq!(job(&w, "report").timeout_ms, Some(1_800_000), "from defaults.job");
    assert_eq!(job(&w, "side").timeout_ms, Some(5_400_000));
    assert_eq!(job(&w, "web").timeout_ms, Some(86_400_000));
    assert_eq!(job(&w, "db").timeout_ms, None, "defaults.job is not for services");
    // The service runs 24 h, longer than fetch -> train -> report (2 h 40 m).
    assert_eq!(w.declared_duration_ms(), Some(86_400_000));

    let chain = ok(r#"version: v4
jobs:
  a: {image: {uri: docker://alpine}, policy: {timeout: {execute: 1h}}}
  b: {image: {uri: docker://alpine}, depends-on: [{name: a}]}
  c: {image: {uri: docker://alpine}, policy: {timeout: {execute: 30m}}, depends-on: [{name: b}, {name: d}]}
  d: {image: {uri: docker://alpine}, policy: {timeout: {execute: 2h}}}
"#);
    // d (2 h) then c (30 m) is longer than a (1 h), b (0), c.
    assert_eq!(chain.declared_duration_ms(), Some(9_000_000));
    let none = ok("version: v4\njobs:\n  a: {image: {uri: docker://alpine}}\n");
    assert_eq!(none.declared_duration_ms(), None);
    // Sub-millisecond timeouts round up; a bad one is still an error at its position.
    let tiny = ok("version: v4\njobs:\n  a: {image: {uri: docker://alpine}, policy: {timeout: {execute: 1us}}}\n");
    assert_eq!(tiny.jobs[0].timeout_ms, Some(1));
    // Go's own spelling of a duration (`time.Duration.String`), as Fuzzball writes them.
    let go = ok("version: v1\njobs:\n  a: {image: {uri: docker://alpine}, policy: {timeout: {execute: 10m0s}}}\n");
    assert_eq!(go.jobs[0].timeout_ms, Some(600_000));
    let d = errs("version: v4\njobs:\n  a: {image: {uri: docker://alpine}, policy: {timeout: {execute: 10 min}}}\n");
    assert_eq!(find(&d, "Go duration").field, "jobs.a.policy.timeout.execute");
}

/// The real Fuzzfile that sets `policy.timeout.execute` without a template keeps it.
#[test]
fn the_real_printer_example_keeps_its_timeout() {
    let Some(inputs) = fedvol_testenv::real_inputs() else {
        return;
    };
    let text =
        std::fs::read_to_string(inputs.join("fuzzfiles/fuzzball-workflow-examples__printer__printer.yaml")).unwrap();
    let w = ok(&text);
    assert_eq!(job(&w, "printer").timeout_ms, Some(600_000), "execute: 10m0s");
    assert_eq!(w.declared_duration_ms(), Some(600_000));
}

/// Volume keys `data-1` and `data_1` are both exported to jobs as `FEDVOL_VOLUME_DATA_1`: the
/// first volume silently had no variable. The second key is refused at its line, naming both.
#[test]
fn volume_keys_whose_job_variables_collide_are_refused_at_the_second() {
    let text = "version: v4\nvolumes:\n  data-1: {size: 1MiB}\n  other: {size: 1MiB}\n  data_1: {size: 1MiB}\n";
    let ds = errs(text);
    let d = find(&ds, "FEDVOL_VOLUME_DATA_1");
    assert_eq!((d.line, d.field.as_str()), (5, "volumes.data_1"));
    assert!(d.message.contains("`data-1` (line 3) and `data_1`"), "{}", d.message);
    ok("version: v4\nvolumes:\n  data-1: {size: 1MiB}\n  data-2: {size: 1MiB}\n");
}
