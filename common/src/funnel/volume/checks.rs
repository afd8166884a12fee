//! The per-provisioner checks of Fuzzball "Annotations and Selection", each pushing **every** reason a provisioner fails:
//! status READY, exact annotation match, and group permission for an operation. Shared by the
//! named, by-name, automatic, claim and provisioning stages.

use std::collections::BTreeMap;

use crate::decision::{Reason, codes};
use crate::model::{Operation, Provisioner, ProvisionerStatus};
use crate::rule::ReasonSink;

/// Fuzzball "Annotations and Selection" "status check": pushes `not_ready` unless the provisioner is READY.
pub fn status(p: &Provisioner, out: &mut impl ReasonSink) {
    if p.status != ProvisionerStatus::Ready {
        out.push_reason(Reason::new(
            codes::NOT_READY,
            format!(
                "provisioner `{}` is {}, only READY provisioners are used",
                p.name,
                p.status.as_str()
            ),
        ));
    }
}

/// Fuzzball "Annotations and Selection" "annotation match": every requested key must be present on the provisioner with an
/// identical value (exact strings, no patterns); extra provisioner annotations are ignored; no
/// requested annotations always match. Pushes one reason per failing key:
/// `annotation_missing` or `annotation_mismatch` (naming both values).
pub fn annotations(wanted: &BTreeMap<String, String>, have: &BTreeMap<String, String>, out: &mut impl ReasonSink) {
    for (k, want) in wanted {
        match have.get(k) {
            Some(v) if v == want => {}
            Some(v) => out.push_reason(Reason::new(
                codes::ANNOTATION_MISMATCH,
                format!("annotation {k}={v}, volume wants {k}={want}"),
            )),
            None => out.push_reason(Reason::new(
                codes::ANNOTATION_MISSING,
                format!("annotation `{k}` missing, volume wants {k}={want}"),
            )),
        }
    }
}

/// Fuzzball "Annotations and Selection" "group permission check" for `op` (default-deny; `create` implies `access` and
/// `ephemeral`): pushes `permission_denied` naming the policies consulted and the user's groups.
pub fn permission(p: &Provisioner, op: Operation, user: &str, groups: &[String], out: &mut impl ReasonSink) {
    if p.permissions.allows(op, user, groups) {
        return;
    }
    let mut policies = format!("`{}` allows {}", op.as_str(), p.permissions.policy(op).describe());
    if op != Operation::Create {
        policies.push_str(&format!(", `create` allows {}", p.permissions.create.describe()));
    }
    let yours = if groups.is_empty() {
        "none".to_string()
    } else {
        groups.join(", ")
    };
    out.push_reason(Reason::new(
        codes::PERMISSION_DENIED,
        format!(
            "provisioner `{}` does not grant `{}` to user `{user}` or your groups [{yours}]: {policies}",
            p.name,
            op.as_str()
        ),
    ));
}

/// Folds several reasons into the one error a decision carries: the first reason's code and
/// every message joined by `; `. An empty list gives a generic `no_provisioner` reason.
pub fn combine(reasons: &[Reason]) -> Reason {
    match reasons {
        [] => Reason::new(codes::NO_PROVISIONER, "no candidate passed"),
        [one] => one.clone(),
        [first, ..] => Reason::new(
            &first.code,
            reasons
                .iter()
                .map(|r| r.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::model::AccessPolicy;

    fn codes_of(out: &[Reason]) -> Vec<&str> {
        out.iter().map(|r| r.code.as_str()).collect()
    }

    /// Fuzzball "Annotations and Selection"'s annotation table, all five rows.
    #[test]
    fn annotation_table_of_seed_000() {
        type Pairs = &'static [(&'static str, &'static str)];
        let rows: [(Pairs, Pairs, bool); 5] = [
            (&[("tier", "fast")], &[("tier", "fast"), ("region", "us-west")], true),
            (&[("tier", "fast")], &[("tier", "slow")], false),
            (&[("tier", "fast")], &[("region", "us-west")], false),
            (&[], &[("tier", "fast"), ("region", "us-west")], true),
            (&[("tier", "fast"), ("region", "us-west")], &[("tier", "fast")], false),
        ];
        let expected_codes: [&[&str]; 5] = [
            &[],
            &[codes::ANNOTATION_MISMATCH],
            &[codes::ANNOTATION_MISSING],
            &[],
            &[codes::ANNOTATION_MISSING],
        ];
        for (i, (wanted, have, matches)) in rows.iter().enumerate() {
            let mut out = Vec::new();
            annotations(&ann(wanted), &ann(have), &mut out);
            assert_eq!(out.is_empty(), *matches, "row {i}");
            assert_eq!(codes_of(&out), expected_codes[i], "row {i}");
        }
    }

    #[test]
    fn every_failing_annotation_key_is_reported_with_both_values() {
        let mut out = Vec::new();
        annotations(
            &ann(&[("tier", "fast"), ("region", "us-west"), ("purpose", "work")]),
            &ann(&[("tier", "slow"), ("purpose", "work")]),
            &mut out,
        );
        assert_eq!(codes_of(&out), [codes::ANNOTATION_MISSING, codes::ANNOTATION_MISMATCH]);
        assert!(out[1].message.contains("tier=slow") && out[1].message.contains("tier=fast"));
        assert!(out[0].message.contains("region"));
    }

    #[test]
    fn matching_is_exact_strings() {
        let mut out = Vec::new();
        annotations(&ann(&[("tier", "fast")]), &ann(&[("tier", "Fast")]), &mut out);
        annotations(&ann(&[("tier", "fast")]), &ann(&[("tier", "fast ")]), &mut out);
        annotations(&ann(&[("tier", "fast")]), &ann(&[("Tier", "fast")]), &mut out);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn status_only_ready_passes() {
        for (s, ok) in [
            (ProvisionerStatus::Ready, true),
            (ProvisionerStatus::Disabled, false),
            (ProvisionerStatus::Error, false),
            (ProvisionerStatus::Provisioning, false),
        ] {
            let mut out = Vec::new();
            status(&prov("p", nfs()).status(s).build(), &mut out);
            assert_eq!(out.is_empty(), ok, "{s:?}");
        }
    }

    #[test]
    fn permission_is_default_deny_and_create_implies_the_others() {
        let g = vec!["physics".to_string()];
        let nobody = prov("p", nfs()).build();
        for op in [Operation::Access, Operation::Ephemeral, Operation::Create] {
            let mut out = Vec::new();
            permission(&nobody, op, "u", &g, &mut out);
            assert_eq!(codes_of(&out), [codes::PERMISSION_DENIED]);
            assert!(out[0].message.contains("nobody"));
        }
        let creators = prov("p", nfs())
            .create(AccessPolicy::Groups(["physics".to_string()].into()))
            .build();
        for op in [Operation::Access, Operation::Ephemeral, Operation::Create] {
            let mut out = Vec::new();
            permission(&creators, op, "u", &g, &mut out);
            assert!(out.is_empty(), "{op:?}");
        }
        let mut out = Vec::new();
        permission(&creators, Operation::Ephemeral, "u", &["chem".to_string()], &mut out);
        assert!(out[0].message.contains("groups [physics]") && out[0].message.contains("[chem]"));
        let ephemeral_only = prov("p", nfs()).ephemeral_all().build();
        let mut out = Vec::new();
        permission(&ephemeral_only, Operation::Create, "u", &g, &mut out);
        permission(&ephemeral_only, Operation::Access, "u", &g, &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn combine_keeps_first_code_and_all_messages() {
        let r = combine(&[Reason::new("a", "one"), Reason::new("b", "two")]);
        assert_eq!((r.code.as_str(), r.message.as_str()), ("a", "one; two"));
    }
}
