//! Bad input and access policies at the `fedvol` command line: every problem is reported with
//! `file:line:col`, nothing is planned from invalid files (exit 1), and group permissions decide
//! between exit 0 and exit 2.

// Test support: a panic here is a failed test (unwrap/expect are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;

/// A hostpath provisioner with a misspelled `annotations` key (line 7, column 5).
const MISSPELLED: &str = "\
cluster: lab
provisioners:
  scratch:
    driver:
      type: hostpath
      path: /mnt/scratch
    anotations:
      tier: fast
    ephemeral: all
";

/// Three distinct errors: an unknown key, a bad enum value and a bad size.
const THREE_ERRORS: &str = "\
cluster: lab
provisioners:
  scratch:
    driver:
      type: hostpath
      path: /mnt/scratch
    anotations:
      tier: fast
    ephemeral: all
    status: BROKEN
volumes:
  - name: v1
    provisioner: scratch
    size: lots
";

/// A provisioner only the `physics` group may use for ephemeral volumes, and one host.
const PHYSICS_ONLY: &str = "\
cluster: lab
provisioners:
  scratch:
    driver:
      type: hostpath
      path: /mnt/scratch
    annotations:
      tier: fast
    ephemeral: [physics]
zones:
  z1:
    hosts:
      - name: h1
        capacity: { cpu: 8, memory: 32GiB, instances: 4 }
";

/// A workflow whose job mounts a `tier: fast` scratch volume.
const FAST_SCRATCH: &str = "\
version: v4
volumes:
  scratch:
    size: 1GiB
    annotations:
      tier: fast
jobs:
  run:
    image:
      uri: docker://alpine:3.20
    command: [\"true\"]
    mounts:
      /scratch: scratch
";

/// A workflow that mounts the undefined volume `missing` (line 12).
const UNDEFINED_MOUNT: &str = "\
version: v4
volumes:
  data:
    size: 1GiB
jobs:
  run:
    image:
      uri: docker://alpine:3.20
    command: [\"true\"]
    mounts:
      /data: data
      /other: missing
";

/// The `error: ` lines of stderr.
fn errors(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("error: ")).collect()
}

fn at(file: &str, (line, col): (usize, usize)) -> String {
    format!("error: {file}:{line}:{col}:")
}

#[test]
fn a_misspelled_key_is_reported_with_its_position_and_a_suggestion() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "inv.yaml", MISSPELLED);
    let run = fedvol_in(Some(tmp.path()), &["check", "inv.yaml"]);
    assert_eq!(run.code, 1, "{}", run.describe());
    let errs = errors(&run.stderr);
    assert_eq!(errs.len(), 1, "{}", run.describe());
    assert!(
        errs[0].starts_with(&at("inv.yaml", position_of(MISSPELLED, "anotations"))),
        "{}",
        run.describe()
    );
    assert!(errs[0].contains("anotations"), "{}", run.describe());
    assert!(errs[0].contains("did you mean `annotations`"), "{}", run.describe());
    assert!(!run.stdout.contains("ok  "), "{}", run.describe());

    // `fedvol plan` refuses the same inventory the same way and prints no decision.
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);
    let plan = fedvol_in(Some(tmp.path()), &["plan", "-o", "json", "-i", "inv.yaml", "wf.yaml"]);
    assert_eq!(plan.code, 1, "{}", plan.describe());
    assert!(plan.stdout.is_empty(), "{}", plan.describe());
    assert!(
        plan.stderr.contains("did you mean `annotations`"),
        "{}",
        plan.describe()
    );
}

#[test]
fn every_error_of_a_file_is_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "inv.yaml", THREE_ERRORS);
    let run = fedvol_in(Some(tmp.path()), &["check", "inv.yaml"]);
    assert_eq!(run.code, 1, "{}", run.describe());
    let errs = errors(&run.stderr);
    assert_eq!(errs.len(), 3, "three distinct errors\n{}", run.describe());
    let expected = [
        (position_of(THREE_ERRORS, "anotations"), "anotations"),
        (position_of(THREE_ERRORS, "BROKEN"), "BROKEN"),
        (position_of(THREE_ERRORS, "lots"), "lots"),
    ];
    for (pos, word) in expected {
        assert!(
            errs.iter()
                .any(|e| e.starts_with(&at("inv.yaml", pos)) && e.contains(word)),
            "an error at {pos:?} about `{word}`\n{}",
            run.describe()
        );
    }
}

#[test]
fn a_mount_of_an_undefined_volume_is_refused_with_its_position() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "wf.yaml", UNDEFINED_MOUNT);
    let pos = position_of(UNDEFINED_MOUNT, "missing");
    let run = fedvol_in(Some(tmp.path()), &["check", "wf.yaml"]);
    assert_eq!(run.code, 1, "{}", run.describe());
    let errs = errors(&run.stderr);
    assert!(
        errs.iter()
            .any(|e| e.starts_with(&at("wf.yaml", pos)) && e.contains("`missing`")),
        "{}",
        run.describe()
    );

    let inv = cluster("cluster-a").display().to_string();
    let plan = fedvol_in(Some(tmp.path()), &["plan", "-o", "json", "-i", &inv, "wf.yaml"]);
    assert_eq!(plan.code, 1, "{}", plan.describe());
    assert!(plan.stdout.is_empty(), "{}", plan.describe());
    assert!(plan.stderr.contains(&at("wf.yaml", pos)), "{}", plan.describe());
}

/// `data-1` and `data_1` would both be exported to their jobs as `FEDVOL_VOLUME_DATA_1` (one
/// volume silently without its variable): `fedvol check` refuses the file at the second key's
/// line, naming both.
#[test]
fn volume_keys_whose_job_variables_collide_are_refused_by_check() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let text = "version: v4\nvolumes:\n  data-1: {size: 1MiB}\n  data_1: {size: 1MiB}\njobs:\n  j:\n    image: {uri: docker://a}\n    script: ls $FEDVOL_VOLUME_DATA_1\n    mounts: {/a: data-1, /b: data_1}\n";
    write(tmp.path(), "wf.yaml", text);
    let run = fedvol_in(Some(tmp.path()), &["check", "wf.yaml"]);
    assert_eq!(run.code, 1, "{}", run.describe());
    assert!(
        errors(&run.stderr).iter().any(|e| e.starts_with(&at("wf.yaml", (4, 3)))
            && e.contains("`data-1` (line 3) and `data_1`")
            && e.contains("FEDVOL_VOLUME_DATA_1")),
        "{}",
        run.describe()
    );
}

#[test]
fn the_same_cluster_twice_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "lab.yaml", PHYSICS_ONLY);
    write(tmp.path(), "lab-copy.yaml", PHYSICS_ONLY);
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);
    let run = fedvol_in(
        Some(tmp.path()),
        &["plan", "-o", "json", "-i", "lab.yaml", "-i", "lab-copy.yaml", "wf.yaml"],
    );
    assert_eq!(run.code, 1, "{}", run.describe());
    assert!(run.stdout.is_empty(), "no decision is printed\n{}", run.describe());
    let errs = errors(&run.stderr);
    assert!(
        errs.iter()
            .any(|e| e.contains("lab-copy.yaml") && e.contains("`lab`") && e.contains("twice")),
        "the error names the file, the cluster and says it is given twice\n{}",
        run.describe()
    );
}

#[test]
fn a_missing_file_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);
    write(tmp.path(), "lab.yaml", PHYSICS_ONLY);
    let runs = [
        fedvol_in(Some(tmp.path()), &["check", "no-such-file.yaml"]),
        fedvol_in(Some(tmp.path()), &["plan", "-i", "no-such-file.yaml", "wf.yaml"]),
        fedvol_in(Some(tmp.path()), &["plan", "-i", "lab.yaml", "no-such-file.yaml"]),
    ];
    for run in &runs {
        assert_eq!(run.code, 1, "{}", run.describe());
        assert!(
            errors(&run.stderr)
                .iter()
                .any(|e| e.starts_with("error: no-such-file.yaml:")),
            "{}",
            run.describe()
        );
        assert!(
            run.stdout.is_empty() || !run.stdout.contains("chosen"),
            "{}",
            run.describe()
        );
    }
}

#[test]
fn a_missing_file_is_reported_at_the_same_position_by_check_and_plan() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);
    let check = fedvol_in(Some(tmp.path()), &["check", "no-such-file.yaml"]);
    let plan = fedvol_in(Some(tmp.path()), &["plan", "-i", "no-such-file.yaml", "wf.yaml"]);
    for run in [&check, &plan] {
        assert!(
            run.stderr.contains("error: no-such-file.yaml:1:1:"),
            "positions are 1-based\n{}",
            run.describe()
        );
    }
}

#[test]
fn check_prints_ok_per_valid_file_and_fails_if_any_is_invalid() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "good.yaml", PHYSICS_ONLY);
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);
    write(tmp.path(), "bad.yaml", MISSPELLED);
    let all_good = fedvol_in(Some(tmp.path()), &["check", "good.yaml", "wf.yaml"]);
    assert_eq!(all_good.code, 0, "{}", all_good.describe());
    for f in ["good.yaml", "wf.yaml"] {
        assert!(
            all_good.stdout.lines().any(|l| l.starts_with(&format!("ok  {f}: "))),
            "{}",
            all_good.describe()
        );
    }
    let mixed = fedvol_in(Some(tmp.path()), &["check", "good.yaml", "bad.yaml", "wf.yaml"]);
    assert_eq!(mixed.code, 1, "{}", mixed.describe());
    assert!(mixed.stdout.contains("ok  good.yaml: "), "{}", mixed.describe());
    assert!(mixed.stdout.contains("ok  wf.yaml: "), "{}", mixed.describe());
    assert!(!mixed.stdout.contains("ok  bad.yaml"), "{}", mixed.describe());
    assert!(mixed.stderr.contains("error: bad.yaml:"), "{}", mixed.describe());
}

fn plan_as(dir: &Path, groups: &[&str]) -> Run {
    let mut args = vec!["plan", "-o", "json", "-i", "lab.yaml", "-u", "alice"];
    for g in groups {
        args.push("-g");
        args.push(g);
    }
    args.push("wf.yaml");
    fedvol_in(Some(dir), &args)
}

#[test]
fn group_permissions_decide_whether_the_volume_can_be_provisioned() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "lab.yaml", PHYSICS_ONLY);
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);

    let denied = plan_as(tmp.path(), &["chemistry"]);
    assert_eq!(denied.code, 2, "{}", denied.describe());
    let doc = denied.json();
    assert!(doc["chosen_cluster"].is_null(), "{}", denied.describe());
    let lab = &doc["clusters"]["lab"];
    assert_eq!(lab["feasible"], false);
    assert!(!lab["volumes"]["scratch"]["error"].is_null(), "{}", lab["volumes"]);
    assert!(
        reason_codes_for(lab, "scratch").contains(&"permission_denied".to_string()),
        "the trace says provisioner `scratch` was rejected with permission_denied: {}",
        lab["trace"]
    );
    let perm = trace_entries(lab, "provisioner.permission", "scratch");
    assert_eq!(perm.len(), 1, "{}", lab["trace"]);
    assert_eq!(perm[0]["passed"], 0, "{}", perm[0]);

    let no_groups = plan_as(tmp.path(), &[]);
    assert_eq!(no_groups.code, 2, "no groups, no permission\n{}", no_groups.describe());

    let allowed = plan_as(tmp.path(), &["chemistry", "physics"]);
    assert_eq!(allowed.code, 0, "{}", allowed.describe());
    let doc = allowed.json();
    assert_eq!(doc["chosen_cluster"], "lab");
    let v = &doc["clusters"]["lab"]["volumes"]["scratch"];
    assert_eq!(v["provisioner"], "scratch", "{v}");
    assert_eq!(v["action"], "provision", "{v}");
    assert!(v["error"].is_null(), "{v}");
    assert_eq!(doc["clusters"]["lab"]["jobs"]["run"]["host"], "h1");

    let only_physics = plan_as(tmp.path(), &["physics"]);
    assert_eq!(only_physics.code, 0, "{}", only_physics.describe());
}

/// Offline `fedvol plan --why-not-*` explains a candidate from the inventory files, by the same
/// funnel logic an agent's `why_not` runs: the permission stage that rejected
/// provisioner `scratch` for a user without group `physics`, in the table and in JSON.
#[test]
fn plan_explains_why_a_candidate_was_not_chosen() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "lab.yaml", PHYSICS_ONLY);
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);
    let table = fedvol_in(
        Some(tmp.path()),
        &[
            "plan",
            "-i",
            "lab.yaml",
            "-g",
            "chemistry",
            "--why-not-provisioner",
            "scratch",
            "wf.yaml",
        ],
    );
    assert_eq!(table.code, 2, "{}", table.describe());
    assert!(
        table.stdout.contains("why not, in cluster lab:"),
        "{}",
        table.describe()
    );
    assert!(
        table
            .stdout
            .contains("provisioner scratch: blocked at provisioner.permission for scratch"),
        "{}",
        table.describe()
    );
    assert!(table.stdout.contains("(permission_denied)"), "{}", table.describe());

    let json = fedvol_in(
        Some(tmp.path()),
        &[
            "plan",
            "-o",
            "json",
            "-i",
            "lab.yaml",
            "-g",
            "chemistry",
            "--why-not-provisioner",
            "scratch",
            "wf.yaml",
        ],
    );
    let doc = json.json();
    assert!(doc["decision"]["chosen_cluster"].is_null(), "{}", json.describe());
    let why = &doc["why_not"][0];
    assert_eq!(why["cluster"], "lab");
    assert_eq!(why["blockers"][0]["stage"], "provisioner.permission", "{why}");
    assert_eq!(why["blockers"][0]["reasons"][0]["code"], "permission_denied", "{why}");

    // A cluster that is not among the inventories is a usage error (64) naming the known ones.
    let unknown = fedvol_in(
        Some(tmp.path()),
        &[
            "plan",
            "-i",
            "lab.yaml",
            "--why-not-zone",
            "z1",
            "--why-not-cluster",
            "nope",
            "wf.yaml",
        ],
    );
    assert_eq!(unknown.code, 64, "{}", unknown.describe());
    assert!(
        unknown
            .stderr
            .contains("`nope` is not one of the inventories' clusters (lab)"),
        "{}",
        unknown.describe()
    );
}

/// Every job is placed, with or without volumes (Cloud Assembly's provisioning funnel places
/// every compute resource by its constraints and the zone limits): a 100,000-core job that
/// mounts nothing makes the workflow infeasible (exit 2), where it was reported feasible.
#[test]
fn a_job_without_volumes_that_fits_nowhere_makes_the_workflow_infeasible() {
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "lab.yaml", PHYSICS_ONLY);
    write(
        tmp.path(),
        "wf.yaml",
        "version: v4\njobs:\n  huge:\n    image: {uri: docker://alpine}\n    resource: {cpu: {cores: 100000}}\n",
    );
    let run = plan_as(tmp.path(), &["physics"]);
    assert_eq!(run.code, 2, "{}", run.describe());
    let doc = run.json();
    let lab = &doc["clusters"]["lab"];
    assert_eq!(lab["feasible"], false, "{lab}");
    assert_eq!(lab["jobs"]["huge"]["error"]["code"], "no_zone", "{lab}");
    let capacity = trace_entries(lab, "host.capacity", "huge");
    assert_eq!(capacity.len(), 1, "{}", lab["trace"]);
    assert_eq!(capacity[0]["passed"], 0, "{}", capacity[0]);
    assert_eq!(capacity[0]["reason_counts"]["insufficient"], 1, "{}", capacity[0]);
}

/// Where a directory or several files make sense they are taken, as `fedvol dev --clusters DIR`
/// takes a directory: `fedvol check DIR` checks each of its files; `fedvol plan -i` takes
/// several inventories after one flag (`-i a.yaml b.yaml wf.yaml`: the last file is the
/// workflow) or a directory of inventories (its other files are skipped, each with a note).
#[test]
fn directories_and_several_files_are_taken_where_they_make_sense() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(tmp.path().join("clusters")).unwrap();
    write(&tmp.path().join("clusters"), "lab.yaml", PHYSICS_ONLY);
    write(
        &tmp.path().join("clusters"),
        "lab2.yaml",
        &PHYSICS_ONLY.replace("cluster: lab", "cluster: lab2"),
    );
    write(tmp.path(), "wf.yaml", FAST_SCRATCH);

    let run = fedvol_in(Some(tmp.path()), &["check", "clusters", "wf.yaml"]);
    assert_eq!(run.code, 0, "{}", run.describe());
    for f in ["clusters/lab.yaml", "clusters/lab2.yaml", "wf.yaml"] {
        assert!(run.stdout.contains(&format!("ok  {f}: ")), "{f}: {}", run.describe());
    }
    // A bad file in the directory fails the check, named with its position.
    write(&tmp.path().join("clusters"), "typo.yaml", MISSPELLED);
    let run = fedvol_in(Some(tmp.path()), &["check", "clusters"]);
    assert_eq!(run.code, 1, "{}", run.describe());
    assert!(
        run.stderr.contains("error: clusters/typo.yaml:7:5:"),
        "{}",
        run.describe()
    );
    std::fs::remove_file(tmp.path().join("clusters/typo.yaml")).unwrap();
    // An empty directory is an error saying what was looked for.
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let run = fedvol_in(Some(tmp.path()), &["check", "empty"]);
    assert_eq!(run.code, 1, "{}", run.describe());
    assert!(
        run.stderr
            .contains("error: empty: no *.yaml, *.yml or *.json file in this directory"),
        "{}",
        run.describe()
    );

    let both = |run: &Run| {
        assert_ne!(run.code, 64, "accepted: {}", run.describe());
        assert_ne!(run.code, 1, "accepted: {}", run.describe());
        let d = run.json();
        let clusters = d["clusters"].as_object().unwrap();
        assert!(
            clusters.contains_key("lab") && clusters.contains_key("lab2") && clusters.len() == 2,
            "{}",
            run.describe()
        );
    };
    both(&fedvol_in(
        Some(tmp.path()),
        &[
            "plan",
            "-o",
            "json",
            "-i",
            "clusters/lab.yaml",
            "clusters/lab2.yaml",
            "wf.yaml",
        ],
    ));
    both(&fedvol_in(
        Some(tmp.path()),
        &["plan", "-o", "json", "-i", "clusters", "wf.yaml"],
    ));
    both(&fedvol_in(
        Some(tmp.path()),
        &[
            "plan",
            "-o",
            "json",
            "wf.yaml",
            "-i",
            "clusters/lab.yaml",
            "-i",
            "clusters/lab2.yaml",
        ],
    ));
    // A directory holding a workflow too: the workflow is skipped, with a note.
    write(&tmp.path().join("clusters"), "wf.yaml", FAST_SCRATCH);
    let run = fedvol_in(Some(tmp.path()), &["plan", "-o", "json", "-i", "clusters", "wf.yaml"]);
    both(&run);
    assert!(
        run.stderr
            .contains("note: clusters/wf.yaml is not a cluster inventory (a workflow): skipped"),
        "{}",
        run.describe()
    );
    // Inventories and no workflow: a usage error naming what is missing.
    let run = fedvol_in(Some(tmp.path()), &["plan", "-i", "clusters/lab.yaml"]);
    assert_eq!(run.code, 64, "{}", run.describe());
    assert!(run.stderr.contains("no workflow"), "{}", run.describe());
}

/// A catalog-style template and form written for this test (the real catalog's are third-party
/// inputs, `real_inputs.rs`): `fedvol render` prints the rendered YAML, a later values file
/// overrides the form's default, the same inputs render the same text while other values draw
/// another random value (the draw is seeded by the values), `check` takes the same arguments,
/// and a bad override is refused naming its file, line and what was expected.
#[test]
fn render_prints_a_template_rendered_with_its_form_and_overrides() {
    let tmp = tempfile::tempdir().unwrap();
    let t = write(
        tmp.path(),
        "hello__template.yaml",
        "# written for this test\nversion: v4\njobs:\n  hello:\n    image:\n      uri: \"docker://alpine:latest\"\n    command:\n      - /bin/sh\n      - '-c'\n      - {{ .Script }}\n    env:\n      - TOKEN={{ randInt 1 1000000000000 | toString | b64enc }}\n    resource:\n      cpu:\n        cores: {{ .Cores }}\n      memory:\n        size: 1GiB\n",
    );
    let form = write(
        tmp.path(),
        "hello__values.yaml",
        "values:\n  - name: Cores\n    display_name: \"Cores\"\n    uint_value: 1\n  - name: Script\n    string_value: echo hello\n",
    );
    let render = |extra: &[&Path]| {
        let mut a = vec!["render".to_string(), t.display().to_string()];
        for v in std::iter::once(&form.as_path()).chain(extra) {
            a.push("--values".into());
            a.push(v.display().to_string());
        }
        fedvol(&a)
    };
    let run = render(&[]);
    assert_eq!(run.code, 0, "{}", run.describe());
    assert!(run.stderr.is_empty(), "{}", run.describe());
    let token = |text: &str| {
        text.lines()
            .find(|l| l.contains("TOKEN="))
            .expect("the token line")
            .to_string()
    };
    let first = run.stdout.clone();
    let expected = format!(
        "# written for this test\nversion: v4\njobs:\n  hello:\n    image:\n      uri: \"docker://alpine:latest\"\n    command:\n      - /bin/sh\n      - '-c'\n      - echo hello\n    env:\n{}\n    resource:\n      cpu:\n        cores: 1\n      memory:\n        size: 1GiB\n",
        token(&first)
    );
    assert_eq!(first, expected, "{}", run.describe());
    assert_eq!(render(&[]).stdout, first, "the same inputs render the same text");

    let more = write(tmp.path(), "more.yaml", "Cores: 3\nScript: echo hi\n");
    let run = render(&[&more]);
    assert_eq!(run.code, 0, "{}", run.describe());
    assert!(
        run.stdout.contains("cores: 3\n") && run.stdout.contains("- echo hi\n"),
        "{}",
        run.describe()
    );
    assert_ne!(token(&run.stdout), token(&first), "other values, another seed");
    let check = fedvol(&[
        "check",
        &t.display().to_string(),
        "--values",
        &form.display().to_string(),
        "--values",
        &more.display().to_string(),
    ]);
    assert_eq!(check.code, 0, "{}", check.describe());
    assert_eq!(
        check.stdout,
        format!(
            "ok  {}: workflow hello__template (0 volumes, 1 job), rendered with 2 values files\n",
            t.display()
        )
    );

    let bad = write(tmp.path(), "bad.yaml", "Script: ok\nCores: many\n");
    let run = render(&[&bad]);
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
