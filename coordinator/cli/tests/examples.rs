//! The example workflows (`deploy/examples/workflows`) planned against the three example
//! clusters: the outcomes their comments promise, derived from the seeds' rules, plus the
//! properties of `fedvol plan`'s output (determinism, seeds, YAML and table views, exit codes).

// Test support: a panic here is a failed test (unwrap/expect are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use fedvol_common::model::Inventory;
use fedvol_formats::load_inventory;
use serde_json::Value;

fn inventory(name: &str) -> Inventory {
    load_inventory(&cluster(name))
        .unwrap_or_else(|d| panic!("example {name}: {d}"))
        .value
}

/// Plans example `stem` as JSON, asserting exit 0, and returns the document.
fn plan_ok(stem: &str) -> Value {
    let run = plan_examples("json", &workflow(stem), &[]);
    assert_eq!(run.code, 0, "{}", run.describe());
    run.json()
}

fn example_stems() -> Vec<String> {
    let v: Vec<String> = files_in(&examples_dir().join("workflows"))
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_stem().expect("file name").to_string_lossy().into_owned())
        .collect();
    assert!(!v.is_empty(), "no example workflows");
    v
}

#[test]
fn every_example_file_passes_check() {
    let mut args: Vec<String> = vec!["check".into()];
    args.extend(clusters().iter().map(|p| p.display().to_string()));
    args.extend(example_stems().iter().map(|s| workflow(s).display().to_string()));
    let run = fedvol(&args);
    assert_eq!(run.code, 0, "{}", run.describe());
    for f in &args[1..] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(&format!("ok  {f}: "))),
            "one ok line per file: {f}\n{}",
            run.describe()
        );
    }
}

#[test]
fn scratch_fast_matches_tier_fast_everywhere_and_least_loaded_wins() {
    let doc = plan_ok("scratch-fast");
    let expected = [
        ("cluster-a", "fast-storage", "hostpath"),
        ("cluster-b", "fast-storage", "efs"),
        ("cluster-c", "fast-tier", "hostpath"),
    ];
    for (c, provisioner, driver) in expected {
        let cd = &doc["clusters"][c];
        assert_eq!(cd["feasible"], true, "{c}");
        let v = &cd["volumes"]["scratch"];
        assert_eq!(v["mode"], "automatic", "{c}: {v}");
        assert_eq!(v["provisioner"], provisioner, "{c}: {v}");
        assert_eq!(v["action"], "provision", "{c}: {v}");
        assert!(v["error"].is_null(), "{c}: {v}");
        // The provisioner really is the one with that driver in the cluster's inventory.
        let inv = inventory(c);
        let p = inv
            .provisioners
            .iter()
            .find(|p| p.name == provisioner)
            .expect("provisioner exists");
        assert_eq!(p.driver.kind(), driver, "{c}/{provisioner}");
        assert_eq!(p.annotations.get("tier").map(String::as_str), Some("fast"));
    }
    // All three are feasible, so the choice comes down to load: the least loaded one wins, and
    // it is the `least_loaded` step that decides.
    let loads: Vec<(f64, &str)> = CLUSTER_NAMES
        .iter()
        .map(|c| (doc["clusters"][c]["load"].as_f64().expect("load is reported"), *c))
        .collect();
    let least = loads
        .iter()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("three clusters")
        .1;
    assert_eq!(doc["chosen_cluster"], least);
    for rule in ["feasible", "workflow_order", "named_volume", "soft_constraints"] {
        let step = choice_step(&doc, rule);
        assert_eq!(strings(&step["kept"]).len(), 3, "{rule} keeps all three: {step}");
    }
    let step = choice_step(&doc, "least_loaded");
    assert_eq!(strings(&step["kept"]), vec![least.to_string()], "{step}");
    let mut d = dropped(step);
    d.sort();
    let mut others: Vec<String> = CLUSTER_NAMES
        .iter()
        .filter(|c| **c != least)
        .map(|c| c.to_string())
        .collect();
    others.sort();
    assert_eq!(d, others, "{step}");
}

#[test]
fn work_archive_goes_where_my_archive_lives() {
    let doc = plan_ok("work-archive");
    assert_eq!(doc["chosen_cluster"], "cluster-a");
    let a = &doc["clusters"]["cluster-a"];
    let results = &a["volumes"]["results"];
    assert_eq!(results["mode"], "by_name", "{results}");
    assert_eq!(results["action"], "existing", "{results}");
    assert_eq!(results["volume"], "my-archive", "{results}");
    assert_eq!(results["provisioner"], "archive-storage", "{results}");
    let workspace = &a["volumes"]["workspace"];
    assert_eq!(workspace["mode"], "automatic", "{workspace}");
    assert_eq!(workspace["action"], "provision", "{workspace}");
    assert_eq!(workspace["provisioner"], "work-storage", "{workspace}");
    for c in ["cluster-b", "cluster-c"] {
        let cd = &doc["clusters"][c];
        assert_eq!(cd["feasible"], false, "{c}");
        assert!(
            !cd["volumes"]["results"]["error"].is_null(),
            "{c}: {}",
            cd["volumes"]["results"]
        );
    }
    assert_eq!(dropped(choice_step(&doc, "feasible")), vec!["cluster-b", "cluster-c"]);
}

#[test]
fn named_project_data_uses_my_nfs_on_cluster_b_only() {
    let doc = plan_ok("named-project-data");
    assert_eq!(doc["chosen_cluster"], "cluster-b");
    let v = &doc["clusters"]["cluster-b"]["volumes"]["data"];
    assert_eq!(v["mode"], "named", "{v}");
    assert_eq!(v["provisioner"], "my-nfs", "{v}");
    assert_eq!(v["volume"], "project-data", "{v}");
    assert_eq!(v["action"], "existing", "{v}");
    for c in ["cluster-a", "cluster-c"] {
        let cd = &doc["clusters"][c];
        assert_eq!(cd["feasible"], false, "{c}");
        assert_eq!(cd["volumes"]["data"]["error"]["code"], "no_such_provisioner", "{c}");
    }
}

#[test]
fn gpu_soft_constraints_prefers_h100_on_cluster_b() {
    let doc = plan_ok("gpu-soft-constraints");
    assert_eq!(doc["chosen_cluster"], "cluster-b");
    // cluster-a also fits (its a100 host satisfies the hard `gpu`), but meets no soft constraint.
    assert_eq!(doc["clusters"]["cluster-a"]["feasible"], true);
    let step = choice_step(&doc, "soft_constraints");
    assert_eq!(strings(&step["kept"]), vec!["cluster-b"], "{step}");
    assert_eq!(dropped(step), vec!["cluster-a"], "{step}");

    let job = &doc["clusters"]["cluster-b"]["jobs"]["train"];
    let host = job["host"].as_str().expect("train is placed");
    let inv = inventory("cluster-b");
    let h = inv
        .zones
        .iter()
        .flat_map(|z| z.hosts.iter())
        .find(|h| h.name == host)
        .expect("the host exists in cluster-b");
    assert!(
        h.tags.iter().any(|t| t.to_string() == "gpu:h100"),
        "train runs on a gpu:h100 host, got {host} with {:?}",
        h.tags
    );

    // cluster-c: its only GPU host lacks the memory (128GiB asked, 88GiB free).
    let c = &doc["clusters"]["cluster-c"];
    assert_eq!(c["feasible"], false);
    assert!(!c["jobs"]["train"]["error"].is_null(), "{}", c["jobs"]["train"]);
    let cap = trace_entries(c, "host.capacity", "train");
    assert_eq!(cap.len(), 1, "{}", c["trace"]);
    assert_eq!(cap[0]["passed"], 0, "{}", cap[0]);
    let reasons: Vec<&Value> = cap[0]["rejected"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["reasons"].as_array().into_iter().flatten())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r["message"].as_str().is_some_and(|m| m.starts_with("memory"))),
        "a memory reason: {}",
        cap[0]
    );
}

#[test]
fn mpi_spread_places_two_ranks_on_distinct_hosts_of_one_zone() {
    let doc = plan_ok("mpi-spread");
    let mut feasible = 0;
    for c in CLUSTER_NAMES {
        let cd = &doc["clusters"][c];
        if cd["feasible"] != true {
            continue;
        }
        feasible += 1;
        let job = &cd["jobs"]["solve"];
        let zone = job["zone"].as_str().expect("zone");
        let hosts = strings(&job["hosts"]);
        assert_eq!(hosts.len(), 2, "{c}: {job}");
        assert_ne!(hosts[0], hosts[1], "{c}: {job}");
        let inv = inventory(c);
        let z = inv.zones.iter().find(|z| z.name == zone).expect("zone exists");
        for h in &hosts {
            assert!(z.hosts.iter().any(|x| &x.name == h), "{c}: {h} is not in zone {zone}");
        }
        assert_eq!(cd["volumes"]["shared"]["action"], "provision", "{c}");
    }
    assert!(feasible > 0);
    let chosen = doc["chosen_cluster"].as_str().expect("a cluster is chosen");
    assert_eq!(doc["clusters"][chosen]["feasible"], true);

    // cluster-a has no `tier: standard` provisioner: the annotation stage rejects every one.
    let inv = inventory("cluster-a");
    assert!(
        inv.provisioners
            .iter()
            .all(|p| p.annotations.get("tier").map(String::as_str) != Some("standard"))
    );
    let a = &doc["clusters"]["cluster-a"];
    assert_eq!(a["feasible"], false);
    assert_eq!(
        a["volumes"]["shared"]["error"]["code"], "no_provisioner",
        "{}",
        a["volumes"]
    );
    let ann = trace_entries(a, "provisioner.annotations", "shared");
    assert_eq!(ann.len(), 1);
    assert_eq!(ann[0]["passed"], 0, "{}", ann[0]);
    assert_eq!(
        ann[0]["rejected"].as_array().map(Vec::len),
        Some(inv.provisioners.len()),
        "{}",
        ann[0]
    );
}

#[test]
fn claim_standard_binds_pv_medium_through_the_default_class() {
    let doc = plan_ok("claim-standard");
    assert_eq!(doc["chosen_cluster"], "cluster-c");
    let v = &doc["clusters"]["cluster-c"]["volumes"]["training-data"];
    assert_eq!(v["mode"], "claim", "{v}");
    assert_eq!(v["provisioner"], "standard", "{v}");
    assert_eq!(v["action"], "bind", "{v}");
    assert_eq!(v["volume"], "pv-medium", "{v}");
}

#[test]
fn claim_gold_selector_binds_pv_large_rwx() {
    let doc = plan_ok("claim-gold-selector");
    assert_eq!(doc["chosen_cluster"], "cluster-c");
    let v = &doc["clusters"]["cluster-c"]["volumes"]["shared-gold"];
    assert_eq!(v["mode"], "claim", "{v}");
    assert_eq!(v["action"], "bind", "{v}");
    assert_eq!(v["volume"], "pv-large-rwx", "{v}");
}

#[test]
fn the_same_plan_twice_prints_identical_json() {
    for stem in example_stems() {
        let first = plan_examples("json", &workflow(&stem), &[]);
        let second = plan_examples("json", &workflow(&stem), &[]);
        assert_eq!(first.code, second.code, "{stem}");
        // Only the measured `elapsed_ms` may differ; every other byte is the same.
        assert_eq!(
            mask_elapsed_text(&first.stdout),
            mask_elapsed_text(&second.stdout),
            "{stem}: two plans differ"
        );
        assert!(
            first.stdout.contains("\"elapsed_ms\": "),
            "{stem}: elapsed_ms is reported"
        );
    }
}

/// Every differing leaf of two JSON values, as `/`-joined paths.
fn diff_paths(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let ks: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in ks {
                diff_paths(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    format!("{at}/{k}"),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_paths(p, q, format!("{at}/{i}"), out);
            }
        }
        _ if a != b => out.push(at),
        _ => {}
    }
}

#[test]
fn the_seed_changes_only_seeded_choices() {
    // scratch-fast on cluster-b: zones b-central and b-gpu tie on priority and soft
    // constraints, so the zone is a seeded draw (and b-gpu picks hosts at random, DEFAULT).
    let wf = workflow("scratch-fast");
    let base_run = plan_examples("json", &wf, &["--seed", "0"]);
    assert_eq!(base_run.code, 0, "{}", base_run.describe());
    let mut base = base_run.json();
    assert_eq!(base["seed"].as_u64(), Some(0));
    strip_elapsed(&mut base);
    let mut placements = BTreeSet::new();
    for seed in 0u64..10 {
        let run = plan_examples("json", &wf, &["--seed", &seed.to_string()]);
        assert_eq!(run.code, 0, "{}", run.describe());
        let mut doc = run.json();
        assert_eq!(doc["seed"].as_u64(), Some(seed), "the seed field reflects --seed");
        assert_eq!(
            doc["request_id"], base["request_id"],
            "--seed does not change the request id"
        );
        strip_elapsed(&mut doc);
        let b = &doc["clusters"]["cluster-b"];
        placements.insert((
            b["jobs"]["simulate"]["zone"].as_str().unwrap_or_default().to_string(),
            b["jobs"]["simulate"]["host"].as_str().unwrap_or_default().to_string(),
        ));
        let mut paths = Vec::new();
        diff_paths(&base, &doc, String::new(), &mut paths);
        for p in &paths {
            let seed_field = p == "/seed";
            let b_placement = p.starts_with("/clusters/cluster-b/jobs/")
                || p.starts_with("/clusters/cluster-b/allocations/")
                || p.starts_with("/clusters/cluster-b/volumes/scratch/new_volume/host");
            let b_zone_draw = p.starts_with("/clusters/cluster-b/trace/") && {
                let idx: usize = p.split('/').nth(4).and_then(|s| s.parse().ok()).expect("trace index");
                // The zone draw, and the chosen zone's host choice that follows from it.
                let stage = &doc["clusters"]["cluster-b"]["trace"][idx]["stage"];
                stage == "zone.choice" || stage == "host.choice"
            };
            assert!(
                seed_field || b_placement || b_zone_draw,
                "seed {seed} changed {p}, which no seeded choice decides"
            );
        }
        // The tie on cluster-b is recorded as a seeded draw.
        let zc = trace_entries(b, "zone.choice", "simulate");
        assert!(
            zc.iter().any(|t| t["rejected"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|r| r["reasons"].as_array().into_iter().flatten())
                .any(|r| r["code"] == "seeded_draw")),
            "seed {seed}: {zc:?}"
        );
    }
    assert!(
        placements.len() > 1,
        "ten seeds always gave the same placement on cluster-b: {placements:?}"
    );

    // Without --seed, the seed is derived from the request id.
    let a = plan_examples("json", &wf, &["--request-id", "r-1"]).json();
    let a2 = plan_examples("json", &wf, &["--request-id", "r-1"]).json();
    let b = plan_examples("json", &wf, &["--request-id", "r-2"]).json();
    assert_eq!(a["request_id"], "r-1");
    assert_eq!(a["seed"], a2["seed"]);
    assert_ne!(a["seed"], b["seed"]);
}

#[test]
fn yaml_output_is_the_same_document() {
    for stem in example_stems() {
        let json_run = plan_examples("json", &workflow(&stem), &[]);
        let yaml_run = plan_examples("yaml", &workflow(&stem), &[]);
        assert_eq!(json_run.code, yaml_run.code, "{stem}");
        let docs = yaml_docs(&yaml_run.stdout);
        assert_eq!(docs.len(), 1, "{stem}: one YAML document\n{}", yaml_run.describe());
        let mut from_yaml = yaml_to_json(&docs[0]);
        let mut from_json = json_run.json();
        assert_eq!(from_yaml["chosen_cluster"], from_json["chosen_cluster"], "{stem}");
        strip_elapsed(&mut from_yaml);
        strip_elapsed(&mut from_json);
        assert_eq!(from_yaml, from_json, "{stem}: YAML and JSON views differ");
    }
}

/// The table's section for one cluster: from its `cluster NAME (` line to the next section.
fn section<'a>(table: &'a str, cluster: &str) -> &'a str {
    let start = table
        .find(&format!("\ncluster {cluster} ("))
        .unwrap_or_else(|| panic!("no section for {cluster}:\n{table}"));
    let rest = &table[start + 1..];
    let end = rest[1..].find("\ncluster ").map(|i| i + 1).unwrap_or(rest.len());
    &rest[..end]
}

/// Every "why not, on <clusters>:" group of the table view that names `cluster` (a
/// reason shared by several clusters is said once, under all their names), concatenated.
fn why_not_of(table: &str, cluster: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in table.lines() {
        if let Some(names) = line.strip_prefix("why not, on ").and_then(|l| l.strip_suffix(':')) {
            inside = names.replace(" and ", ", ").split(", ").any(|n| n == cluster);
            continue;
        }
        if line.is_empty() || line.starts_with("cluster choice:") {
            inside = false;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// True for a kube-scheduler style line `... N/M <candidates> available: ...` with N < M.
fn is_why_not_line(line: &str) -> bool {
    let Some(i) = line.find(" available:") else {
        return false;
    };
    let words: Vec<&str> = line[..i].split_whitespace().collect();
    let [.., ratio, _what] = words.as_slice() else {
        return false;
    };
    let Some((n, m)) = ratio.split_once('/') else {
        return false;
    };
    match (n.parse::<u64>(), m.parse::<u64>()) {
        (Ok(n), Ok(m)) => n < m,
        _ => false,
    }
}

#[test]
fn table_output_shows_the_choice_and_why_not() {
    for stem in ["work-archive", "gpu-soft-constraints", "mpi-spread"] {
        let json = plan_examples("json", &workflow(stem), &[]).json();
        let run = plan_examples("table", &workflow(stem), &[]);
        assert_eq!(run.code, 0, "{}", run.describe());
        let chosen = json["chosen_cluster"].as_str().expect("chosen");
        assert!(
            run.stdout.contains(&format!("chosen cluster: {chosen}")),
            "{}",
            run.describe()
        );
        for c in CLUSTER_NAMES {
            // Details are printed for the chosen cluster and the infeasible ones only.
            let has_section = run.stdout.contains(&format!("\ncluster {c} ("));
            let detailed = c == chosen || json["clusters"][c]["feasible"] == false;
            assert_eq!(has_section, detailed, "{stem}/{c}:\n{}", run.stdout);
            if detailed {
                let _ = section(&run.stdout, c);
            }
            let s = why_not_of(&run.stdout, c);
            if json["clusters"][c]["feasible"] == true {
                assert!(s.is_empty(), "{stem}/{c} is feasible:\n{s}");
            } else {
                assert!(!s.is_empty(), "{stem}/{c}:\n{}", run.stdout);
                assert!(
                    s.lines().any(is_why_not_line),
                    "{stem}/{c}: a `N/M ... available:` line\n{s}"
                );
            }
        }
    }
    // The default output is the table.
    let run = fedvol(&[
        "plan".to_string(),
        "-i".into(),
        cluster("cluster-a").display().to_string(),
        workflow("work-archive").display().to_string(),
    ]);
    assert_eq!(run.code, 0, "{}", run.describe());
    assert!(run.stdout.contains("chosen cluster: cluster-a"), "{}", run.describe());
}

#[test]
fn nothing_fits_exits_2_and_still_prints_the_decision() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let wf = write(
        tmp.path(),
        "nowhere.yaml",
        "version: v4\nvolumes:\n  data:\n    size: 1GiB\n    annotations:\n      tier: nonexistent\njobs:\n  run:\n    image:\n      uri: docker://alpine:3.20\n    command: [\"true\"]\n    mounts:\n      /data: data\n",
    );
    let run = plan_examples("json", &wf, &[]);
    assert_eq!(run.code, 2, "{}", run.describe());
    let doc = run.json();
    assert!(doc["chosen_cluster"].is_null(), "{}", run.describe());
    assert_eq!(keys(&doc["clusters"]), CLUSTER_NAMES.to_vec());
    for c in CLUSTER_NAMES {
        let cd = &doc["clusters"][c];
        assert_eq!(cd["feasible"], false, "{c}");
        assert_eq!(cd["volumes"]["data"]["error"]["code"], "no_provisioner", "{c}");
        let ann = trace_entries(cd, "provisioner.annotations", "data");
        assert_eq!(ann.len(), 1, "{c}");
        assert_eq!(ann[0]["passed"], 0, "{c}: {}", ann[0]);
    }
    let table = plan_examples("table", &wf, &[]);
    assert_eq!(table.code, 2, "{}", table.describe());
    assert!(table.stdout.contains("chosen cluster: none"), "{}", table.describe());
    assert_eq!(table.stdout.matches("why not:").count(), 3, "{}", table.describe());
}
