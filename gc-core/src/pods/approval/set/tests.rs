//! Plans of several namespaces: each section checked against apply's policy in its namespace.

use super::*;
use crate::pods::config::PodInputs;
use crate::pods::facts::Basis;
use crate::pods::ledger::{Ledger, PyNum};

const MADE: f64 = 1_795_953_600.0;
const NOW: f64 = MADE + 100.0;

fn policy(namespace: &str) -> PodConfig {
    PodInputs {
        namespace: namespace.into(),
        ..PodInputs::default()
    }
    .validate()
    .unwrap()
}

fn plan(uid: &str) -> PodPlan {
    PodPlan {
        now: MADE,
        decisions: vec![],
        targets: vec![Target {
            name: format!("p-{uid}").into(),
            uid: uid.into(),
            first: PyNum::Int(1_795_000_000),
            basis: Basis::FinishedAt,
            end: PyNum::Float(1_795_000_000.5),
            resource_version: "42".into(),
            archive_bytes: 900,
        }],
        held: 0,
        deferred: 0,
        ledger: Ledger::default(),
    }
}

fn set(key: Option<&SealKey>) -> PlanSet {
    PlanSet::seal(
        &[(policy("a"), plan("u1")), (policy("b"), plan("u2"))],
        MADE,
        3600,
        key,
    )
}

fn named(names: &'static [&'static str]) -> impl Fn(&str) -> Option<PodConfig> {
    move |ns| names.contains(&ns).then(|| policy(ns))
}

#[test]
fn every_section_comes_back_checked_against_its_namespace() {
    let text = set(None).to_json();
    let files = open_plans(text.as_bytes(), named(&["a", "b", "c"]), None, NOW).unwrap();
    let covered: Vec<_> = files.iter().map(|f| f.config.namespace.as_str()).collect();
    assert_eq!(covered, ["a", "b"]);
    assert_eq!(files[1].targets[0].uid, "u2");
    let key = SealKey::new(b"0123456789abcdef").unwrap();
    let keyed = set(Some(&key)).to_json();
    assert!(open_plans(keyed.as_bytes(), named(&["a", "b"]), Some(&key), NOW).is_ok());
    assert_eq!(
        open_plans(keyed.as_bytes(), named(&["a", "b"]), None, NOW),
        Err(PlanFileError::Seal(
            "the plan is sealed with a key: give apply the same key (--seal-key-file or GC_SEAL_KEY)"
        ))
    );
}

#[test]
fn a_namespace_apply_does_not_name_refuses_the_file() {
    let text = set(None).to_json();
    let err = open_plans(text.as_bytes(), named(&["a"]), None, NOW).unwrap_err();
    assert!(
        matches!(&err, PlanFileError::Mismatch { field: "namespace", planned, .. } if planned == "b"),
        "{err}"
    );
    // A one-namespace plan too.
    let one = PlanFile::seal(&plan("u1"), &policy("b"), MADE, 3600, None).to_json();
    assert!(open_plans(one.as_bytes(), named(&["a"]), None, NOW).is_err());
    assert_eq!(
        open_plans(one.as_bytes(), named(&["a", "b"]), None, NOW)
            .unwrap()
            .len(),
        1
    );
}

/// A member given twice anywhere in a plan set refuses it before its seal is checked.
#[test]
fn a_member_given_twice_is_refused() {
    let key = SealKey::new(b"0123456789abcdef").unwrap();
    for k in [None, Some(&key)] {
        let text = set(k).to_json();
        assert!(open_plans(text.as_bytes(), named(&["a", "b"]), k, NOW).is_ok());
        for (edited, path, member) in [
            (
                text.replacen('{', r#"{"sections": [],"#, 1),
                "member",
                "sections",
            ),
            (
                text.replacen(r#""uid": "u2""#, r#""uid": "u3", "uid": "u2""#, 1),
                "sections[1].targets[0]: member",
                "uid",
            ),
            (
                text.replacen(
                    r#""namespace": "a""#,
                    r#""namespace": "c", "namespace": "a""#,
                    1,
                ),
                "sections[0].config: member",
                "namespace",
            ),
        ] {
            assert_ne!(edited, text, "{member}: the edit did not apply");
            let result = open_plans(edited.as_bytes(), named(&["a", "b", "c"]), k, NOW);
            let twice = format!("member {member:?} given twice");
            assert!(
                matches!(&result, Err(PlanFileError::Malformed(m))
                        if m.starts_with(path) && m.contains(&twice)),
                "{member}: {result:?}"
            );
        }
        // A one-namespace plan given to the same door.
        let one = PlanFile::seal(&plan("u1"), &policy("a"), MADE, 3600, k).to_json();
        let edited = one.replacen('{', r#"{"targets": [], "deferred": 0,"#, 1);
        let result = open_plans(edited.as_bytes(), named(&["a"]), k, NOW);
        let twice = r#"member "targets" given twice"#;
        assert!(
            matches!(&result, Err(PlanFileError::Malformed(m)) if m.contains(twice)),
            "{result:?}"
        );
    }
}

#[test]
fn edits_expiry_and_repeats_are_refused() {
    let mut doc: Value = serde_json::from_str(&set(None).to_json()).unwrap();
    doc["sections"][1]["config"]["namespace"] = "c".into();
    let edited = serde_json::to_vec(&doc).unwrap();
    assert_eq!(
        open_plans(&edited, named(&["a", "b", "c"]), None, NOW),
        Err(PlanFileError::Altered)
    );
    let text = set(None).to_json();
    assert!(matches!(
        open_plans(text.as_bytes(), named(&["a", "b"]), None, MADE + 7200.0),
        Err(PlanFileError::Expired { .. })
    ));
    let twice = PlanSet::seal(
        &[(policy("a"), plan("u1")), (policy("a"), plan("u2"))],
        MADE,
        3600,
        None,
    )
    .to_json();
    let err = open_plans(twice.as_bytes(), named(&["a"]), None, NOW).unwrap_err();
    assert!(err.to_string().contains("listed twice"), "{err}");
    // A section checked as a plan is: a target over the policy's archive ceiling.
    let mut doc: Value = serde_json::from_str(&set(None).to_json()).unwrap();
    doc["sections"][0]["targets"][0]["archiveBytes"] = 10_000_000.into();
    doc["digest"] = Value::String(String::new());
    let resealed = seal_of(&doc, None);
    doc["digest"] = resealed.into();
    let err = open_plans(
        &serde_json::to_vec(&doc).unwrap(),
        named(&["a", "b"]),
        None,
        NOW,
    )
    .unwrap_err();
    assert!(err.to_string().contains("sections[0]"), "{err}");
}
