//! The array forms read back as written, a decision of at most three clusters written as
//! before, the object forms of earlier releases still read, and damaged array forms refused by shape.

use indexmap::IndexMap;
use serde_json::{Value, json};

use super::form::Either;
use crate::decision::{
    Action, ChoiceStep, ClusterDecision, ClusterStatus, Decision, JobDecision, Mode, Reason, Rejection, StageTrace,
    VolumeDecision, codes,
};

fn reason(code: &str, message: &str) -> Reason {
    Reason {
        code: code.into(),
        message: message.into(),
    }
}

fn stage(stage: &str, considered: usize, passed: usize, counts: &[(&str, usize)]) -> StageTrace {
    StageTrace {
        stage: stage.into(),
        subject: "train".into(),
        considered,
        passed,
        rejected: Vec::new(),
        omitted: considered - passed,
        reason_counts: counts.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
    }
}

/// A summary using every optional part of the array forms.
fn summary(name: &str) -> ClusterDecision {
    let mut c = ClusterDecision::without_answer(ClusterStatus::Answered, 12.0, None);
    c.inventory_version = Some("0123456789abcdef".into());
    c.load = 0.375;
    c.soft_matched = 2;
    c.volumes.insert(
        "data".into(),
        VolumeDecision {
            mode: Mode::Automatic,
            provisioner: Some("nfs".into()),
            volume: Some(format!("pvc-{name}")),
            action: Some(Action::Provision),
            error: None,
            passed: Some(2),
            new_volume: None,
        },
    );
    c.volumes.insert(
        "scratch".into(),
        VolumeDecision {
            mode: Mode::Named,
            provisioner: None,
            volume: None,
            action: None,
            error: Some(reason("not_found", "no provisioner `x`")),
            passed: None,
            new_volume: None,
        },
    );
    c.jobs.insert(
        "one".into(),
        JobDecision {
            zone: Some("z".into()),
            host: Some("h1".into()),
            error: None,
            hosts: vec!["h1".into()],
            soft_matched: 1,
        },
    );
    c.jobs.insert(
        "many".into(),
        JobDecision {
            zone: Some("z".into()),
            host: Some("h1".into()),
            error: None,
            hosts: vec!["h1".into(), "h2".into()],
            soft_matched: 0,
        },
    );
    c.jobs.insert(
        "none".into(),
        JobDecision {
            error: Some(reason("no_zone", "no zone")),
            ..Default::default()
        },
    );
    c.trace = vec![
        stage("host.power", 10, 8, &[("powered_off", 2)]),
        stage("host.capacity", 8, 5, &[("insufficient", 3), ("devices", 1)]),
        StageTrace {
            omitted: 1,
            ..stage("host.network", 5, 3, &[("no_network", 1)])
        },
    ];
    c.holds_named_volume = true;
    c.resource_manager = Some("slurm".into());
    c.summarized = true;
    c
}

fn decision(clusters: IndexMap<String, ClusterDecision>) -> Decision {
    let names: Vec<String> = clusters.keys().cloned().collect();
    Decision {
        request_id: "r".into(),
        workflow: "w".into(),
        seed: 1,
        chosen_cluster: names.first().cloned(),
        choice: vec![
            ChoiceStep {
                rule: "feasible".into(),
                kept: names.clone(),
                dropped: Vec::new(),
            },
            ChoiceStep {
                rule: "workflow_order".into(),
                kept: names.clone(),
                dropped: Vec::new(),
            },
            ChoiceStep {
                rule: "least_loaded".into(),
                kept: names[..1].to_vec(),
                dropped: names[1..]
                    .iter()
                    .enumerate()
                    .map(|(i, n)| Rejection {
                        candidate: n.clone(),
                        reasons: if i == 0 {
                            vec![reason("a", "first"), reason("b", "second")]
                        } else if i == 1 {
                            vec![reason("infeasible", "nothing fits")]
                        } else {
                            vec![reason(codes::NOT_CHOSEN, "load 0.38 > 0.00 (a)")]
                        },
                    })
                    .collect(),
            },
        ],
        clusters,
        quota: Vec::new(),
        refused: None,
        drained: Default::default(),
    }
}

#[test]
fn a_decision_with_summaries_reads_back_as_it_was_written() {
    let mut clusters = IndexMap::new();
    let mut full = summary("a");
    full.summarized = false;
    full.trace[0].rejected = vec![Rejection {
        candidate: "h9".into(),
        reasons: vec![reason("powered_off", "h9 is off")],
    }];
    full.trace[0].omitted = 1;
    clusters.insert("a".to_string(), full);
    for n in ["b", "c", "d", "e"] {
        clusters.insert(n.to_string(), summary(n));
    }
    clusters["c"].elapsed_ms = 12.3456;
    clusters["d"].cost = None;
    clusters["d"].resource_manager = None;
    clusters["d"].holds_named_volume = false;
    let d = decision(clusters);
    let text = serde_json::to_string(&d).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["clusters"]["a"].is_object(), "a full answer stays an object");
    assert!(v["clusters"]["b"].is_array(), "{}", v["clusters"]["b"]);
    // The summary without the optional tail ends with its stage records.
    assert_eq!(v["clusters"]["d"].as_array().map(Vec::len), Some(9));
    assert_eq!(
        v["clusters"]["b"][8][0],
        json!(["host.power", "train", 10, 8, "powered_off"])
    );
    assert_eq!(v["choice"][1].get("kept"), None, "a step that dropped nothing");
    assert_eq!(v["choice"][2]["dropped"][2], json!(["d", "load 0.38 > 0.00 (a)"]));
    assert_eq!(
        v["choice"][2]["dropped"][3],
        json!("e"),
        "the same reasons as the one before"
    );
    let mut back: Decision = serde_json::from_str(&text).unwrap();
    assert_eq!(back.clusters["c"].elapsed_ms, 12.35, "rounded to 0.01 ms");
    back.clusters["c"].elapsed_ms = 12.3456;
    assert_eq!(back, d);
}

#[test]
fn a_small_decision_is_written_as_before() {
    let mut clusters = IndexMap::new();
    for n in ["a", "b"] {
        let mut c = summary(n);
        c.summarized = false;
        clusters.insert(n.to_string(), c);
    }
    let d = decision(clusters);
    let v = serde_json::to_value(&d).unwrap();
    // What the derived form of these types writes: objects everywhere, every `kept`.
    assert!(v["clusters"]["a"]["trace"][0].is_object());
    assert!(v["clusters"]["a"]["jobs"]["one"].is_object());
    assert!(v["choice"][1]["kept"].is_array());
    assert_eq!(
        v["choice"][2]["dropped"][0],
        json!({"candidate": "b", "reasons": [{"code": "a", "message": "first"}, {"code": "b", "message": "second"}]})
    );
    assert_eq!(serde_json::from_value::<Decision>(v).unwrap(), d);
}

/// A decision's drains are written only when there are some (a decision without is written as
/// before), read back whole, and ignored by readers that do not know them.
#[test]
fn a_decisions_drains_round_trip_and_are_absent_when_none() {
    let mut clusters = IndexMap::new();
    for n in ["a", "b", "c", "d"] {
        clusters.insert(n.to_string(), summary(n));
    }
    let mut d = decision(clusters);
    let v = serde_json::to_value(&d).unwrap();
    assert!(v.get("drained").is_none(), "{v}");
    d.drained.insert(
        "b".into(),
        crate::drain::Drain {
            by: "ops".into(),
            at_ms: 7,
            reason: "disk swap".into(),
        },
    );
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(
        v["drained"],
        json!({"b": {"by": "ops", "at_ms": 7, "reason": "disk swap"}})
    );
    assert_eq!(serde_json::from_value::<Decision>(v.clone()).unwrap(), d);
    // A reader of an earlier release: the same document without the field it does not know.
    #[derive(serde::Deserialize)]
    struct Earlier {
        request_id: String,
    }
    assert_eq!(serde_json::from_value::<Earlier>(v).unwrap().request_id, "r");
}

#[test]
fn summaries_written_as_objects_still_read() {
    // A summary as the object form writes it (records of the release before the array form).
    let mut c = summary("b");
    c.resource_manager = None;
    let object = json!({
        "status": "answered", "elapsed_ms": 12.0, "inventory_version": "0123456789abcdef",
        "feasible": false, "volumes": serde_json::to_value(&c.volumes).unwrap(),
        "jobs": serde_json::to_value(&c.jobs).unwrap(),
        "trace": serde_json::to_value(&c.trace).unwrap(), "soft_matched": 2, "load": 0.375,
        "holds_named_volume": true, "summarized": true
    });
    let d = json!({"request_id": "r", "workflow": "w", "seed": 1, "chosen_cluster": null,
                   "clusters": {"b": object}, "choice": []});
    let read: Decision = serde_json::from_value(d).unwrap();
    assert_eq!(read.clusters["b"], c);
}

#[test]
fn a_damaged_array_form_is_an_error_naming_the_shape() {
    let bad = json!({"request_id": "r", "workflow": "w", "seed": 1, "chosen_cluster": null,
                     "clusters": {"b": ["answered", 1.0]}, "choice": []});
    let e = serde_json::from_value::<Decision>(bad).unwrap_err().to_string();
    assert!(e.contains("[status, elapsed_ms"), "{e}");
    let alone = json!({"request_id": "r", "workflow": "w", "seed": 1, "chosen_cluster": null,
                       "clusters": {}, "choice": [{"rule": "feasible", "kept": [], "dropped": ["b"]}]});
    let e = serde_json::from_value::<Decision>(alone).unwrap_err().to_string();
    assert!(e.contains("must follow one with its reasons"), "{e}");
    let extra = json!(["host.power", "j", 1, 0, "x", 1, 2]);
    let e = serde_json::from_value::<Vec<Either<StageTrace>>>(json!([extra]))
        .err()
        .map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("[stage, subject")));
}

#[test]
fn maps_and_lists_of_records_read_as_indexmap_and_vec_read_them() {
    // The direct readers (`EitherMap`, `EitherList`) must accept, order and refuse exactly what
    // a map or vector of `Either`s did: a duplicated name keeps its first place and last
    // record, both forms mix, and a wrong shape is the same error.
    let pick = |p: &str| json!(["automatic", p, null, "provision"]);
    let object = serde_json::to_value(VolumeDecision {
        mode: Mode::Named,
        provisioner: Some("o".into()),
        volume: Some("v".into()),
        action: Some(Action::Existing),
        error: None,
        passed: None,
        new_volume: None,
    })
    .unwrap();
    let inputs = [
        format!(r#"{{"a":{},"b":{},"a":{}}}"#, pick("p1"), object, pick("p3")),
        "{}".to_string(),
        format!(r#"{{"z":{},"y":{}}}"#, pick("p"), pick("q")),
        "[]".to_string(),
        r#"{"a":["automatic"]}"#.to_string(),
        r#"{"a":3}"#.to_string(),
    ];
    for input in &inputs {
        let before = serde_json::from_str::<IndexMap<String, Either<VolumeDecision>>>(input)
            .map(|m| m.into_iter().map(|(k, e)| (k, e.0)).collect::<IndexMap<_, _>>())
            .map_err(|e| e.to_string());
        let now = serde_json::from_str::<super::form::EitherMap<VolumeDecision>>(input)
            .map(|m| m.0)
            .map_err(|e| e.to_string());
        assert_eq!(now, before, "{input}");
        if let Ok(m) = &now {
            assert!(m.iter().eq(before.as_ref().unwrap().iter()), "{input}: the order");
        }
    }
    let stages = [
        json!([
            ["host.power", "j", 3, 1, "x"],
            stage("zone.hard_constraints", 2, 1, &[("y", 1)])
        ])
        .to_string(),
        "[]".to_string(),
        "{}".to_string(),
        r#"[["host.power"]]"#.to_string(),
    ];
    for input in &stages {
        let before = serde_json::from_str::<Vec<Either<StageTrace>>>(input)
            .map(|v| v.into_iter().map(|e| e.0).collect::<Vec<_>>())
            .map_err(|e| e.to_string());
        let now = serde_json::from_str::<super::form::EitherList<StageTrace>>(input)
            .map(|v| v.0)
            .map_err(|e| e.to_string());
        assert_eq!(now, before, "{input}");
    }
}
