//! Sealed plan files: the seal, the policy checked field by field, repeated members, bounds.

use super::*;
use crate::pods::config::PodInputs;
use crate::pods::facts::Basis;
use crate::pods::ledger::{Ledger, PyNum};

const MADE: f64 = 1_795_953_600.0;
const NOW: f64 = MADE + 100.0;

fn policy() -> PodConfig {
    PodInputs::default().validate().unwrap()
}

fn file(key: Option<&SealKey>) -> PlanFile {
    let target = Target {
        name: "p".into(),
        uid: "u1".into(),
        first: PyNum::Int(1_795_000_000),
        basis: Basis::FinishedAt,
        end: PyNum::Float(1_795_000_000.5),
        resource_version: "42".into(),
        archive_bytes: 900,
    };
    let plan = PodPlan {
        now: MADE,
        decisions: vec![],
        targets: vec![target],
        held: 1,
        deferred: 2,
        ledger: Ledger::default(),
    };
    PlanFile::seal(&plan, &policy(), MADE, DEFAULT_TTL_SECONDS, key)
}

fn key(text: &str) -> SealKey {
    SealKey::new(text.as_bytes()).unwrap()
}

/// Re-seals `doc` as anyone can: the unkeyed digest recomputed.
fn reseal(mut doc: Value, key: Option<&SealKey>) -> String {
    doc["digest"] = Value::String(seal_of(&doc, key));
    doc.to_string()
}

fn open(text: &str, policy: &PodConfig, key: Option<&SealKey>) -> Result<(), PlanFileError> {
    PlanFile::open(text.as_bytes(), policy, key, NOW).map(|_| ())
}

#[test]
fn a_sealed_plan_opens_unchanged() {
    for k in [None, Some(key("0123456789abcdef-approvers"))] {
        let f = file(k.as_ref());
        let opened = PlanFile::open(f.to_json().as_bytes(), &policy(), k.as_ref(), NOW);
        assert_eq!(opened, Ok(f.clone()));
        assert_eq!(f.targets[0].first, PyNum::Int(1_795_000_000));
    }
}

#[test]
fn an_edit_breaks_the_seal() {
    let text = file(None).to_json();
    for (from, to) in [("\"u1\"", "\"u2\""), ("\"42\"", "\"43\"")] {
        assert_eq!(
            open(&text.replace(from, to), &policy(), None),
            Err(PlanFileError::Altered)
        );
    }
    assert!(matches!(
        open("{}", &policy(), None),
        Err(PlanFileError::Malformed(_))
    ));
}

/// A re-sealed plan with another policy is refused: apply's own flags are the policy.
#[test]
fn a_resealed_policy_is_refused_field_by_field() {
    let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
    let check = |key: &str, value: Value, field: &str| {
        let mut forged = doc.clone();
        forged["config"][key] = value;
        let result = open(&reseal(forged, None), &policy(), None);
        assert!(
            matches!(&result, Err(PlanFileError::Mismatch { field: f, .. }) if *f == field),
            "{key}: {result:?}"
        );
    };
    check("clusterId", "other".into(), "cluster_id");
    check("namespace", "batch".into(), "namespace");
    check("retentionSeconds", 1.into(), "retention_seconds");
    check("maxPods", 50.into(), "max_pods");
    check("maxInventory", 10_000.into(), "max_inventory");
    check("maxArchiveBytes", 1_048_576.into(), "max_archive_bytes");
    check("collectLabel", "example.com/any".into(), "collect_label");
    check("pinFinalizer", "example.com/keep".into(), "pin_finalizer");
    check("protectLabel", "keep=yes".into(), "protect_label");
    check(
        "excludeSelector",
        "team in (payments)".into(),
        "exclude_selector",
    );
    // A plan made with one exclude selector, applied with another.
    let mut with = doc.clone();
    with["config"]["excludeSelector"] = "team".into();
    let mut given = policy();
    given.exclude_selector = Some("team notin (a)".parse().unwrap());
    let result = open(&reseal(with, None), &given, None);
    assert!(
        matches!(&result, Err(PlanFileError::Mismatch { field: "exclude_selector", planned, given })
                if planned == "team" && given == "team notin (a)"),
        "{result:?}"
    );
    // A plan without the protect label (an older plan) is not a plan of this policy.
    let mut old = doc.clone();
    old["config"]
        .as_object_mut()
        .unwrap()
        .remove("protectLabel");
    let result = open(&reseal(old, None), &policy(), None);
    assert!(
        matches!(&result, Err(PlanFileError::Malformed(m)) if m.contains("protectLabel")),
        "{result:?}"
    );
}

/// The seal covers the parsed document, where the last of two members of one name wins; a
/// reader sees the first. A member given twice anywhere refuses the file before its seal
/// is checked, so a valid seal cannot hide a second reading.
#[test]
fn a_member_given_twice_is_refused() {
    let approvers = key("0123456789abcdef-approvers");
    for k in [None, Some(&approvers)] {
        let text = file(k).to_json();
        assert!(open(&text, &policy(), k).is_ok());
        let refused = |edited: String, path: &str, member: &str| {
            assert_ne!(edited, text, "{member}: the edit did not apply");
            let result = open(&edited, &policy(), k);
            let twice = format!("member {member:?} given twice");
            assert!(
                matches!(&result, Err(PlanFileError::Malformed(m))
                        if m.starts_with(path) && m.contains(&twice)),
                "{member}: {result:?}"
            );
        };
        // An empty target list read first, the real one last.
        refused(
            text.replacen('{', r#"{"targets": [], "deferred": 0,"#, 1),
            "member",
            "targets",
        );
        // The same, its name escaped.
        refused(
            text.replacen('{', r#"{"tar\u0067ets": [],"#, 1),
            "member",
            "targets",
        );
        // Inside a target, and inside the policy.
        refused(
            text.replacen(r#""uid": "u1""#, r#""uid": "u2", "uid": "u1""#, 1),
            "targets[0]: member",
            "uid",
        );
        refused(
            text.replacen(
                r#""namespace": "default""#,
                r#""namespace": "batch", "namespace": "default""#,
                1,
            ),
            "config: member",
            "namespace",
        );
        // The seal itself, twice.
        let digest = file(k).digest;
        refused(
            text.replacen(
                &format!(r#""digest": "{digest}""#),
                &format!(r#""digest": "sha256:00", "digest": "{digest}""#),
                1,
            ),
            "member",
            "digest",
        );
    }
}

/// Members of one name in different objects are not repeats; a plan of many targets opens.
#[test]
fn many_targets_open_with_their_members_once_each() {
    let mut policy = policy();
    policy.max_pods = 5_000;
    let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
    let mut many = doc.clone();
    many["config"]["maxPods"] = 5_000.into();
    many["targets"] = (0..5_000)
        .map(|i| {
            let mut t = doc["targets"][0].clone();
            t["uid"] = format!("u{i}").into();
            t["name"] = format!("p{i}").into();
            t
        })
        .collect();
    let opened = open(&reseal(many, None), &policy, None);
    assert_eq!(opened, Ok(()));
}

#[test]
fn values_read_from_the_file_are_bounded() {
    let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
    let check = |edit: &dyn Fn(&mut Value), expect: &str| {
        let mut forged = doc.clone();
        edit(&mut forged);
        let result = open(&reseal(forged, None), &policy(), None);
        let Err(e) = &result else {
            panic!("accepted: {expect}");
        };
        assert!(e.to_string().contains(expect), "{e} does not say {expect}");
    };
    check(
        &|d| d["expiresAt"] = json(MADE + 31.0 * 365.0 * 86_400.0),
        "lifetime",
    );
    check(&|d| d["expiresAt"] = json(MADE - 1.0), "lifetime");
    check(&|d| d["createdAt"] = json(NOW + 3600.0), "lifetime");
    check(
        &|d| d["targets"][0]["name"] = "../etc".into(),
        "targets[0].name",
    );
    check(&|d| d["targets"][0]["name"] = 7.into(), "targets[0].name");
    check(&|d| d["targets"][0]["uid"] = "".into(), "targets[0].uid");
    check(&|d| d["targets"][0]["uid"] = "a/b".into(), "targets[0].uid");
    check(
        &|d| d["targets"][0]["resourceVersion"] = "".into(),
        "resourceVersion",
    );
    check(
        &|d| d["targets"][0]["end"] = json(NOW + 10.0),
        "targets[0].end",
    );
    check(
        &|d| d["targets"][0]["first"] = json(-1.0),
        "targets[0].first",
    );
    check(
        &|d| d["targets"][0]["archiveBytes"] = 10_000_000.into(),
        "archiveBytes",
    );
    check(
        &|d| {
            let t = d["targets"][0].clone();
            d["targets"] = Value::Array(vec![t.clone(), t]);
        },
        "listed twice",
    );
    check(
        &|d| {
            let t = d["targets"][0].clone();
            let many: Vec<Value> = (0..6)
                .map(|i| {
                    let mut t = t.clone();
                    t["uid"] = format!("u{i}").into();
                    t["name"] = format!("p{i}").into();
                    t
                })
                .collect();
            d["targets"] = Value::Array(many);
        },
        "more than max_pods",
    );
    check(&|d| d["config"]["maxPods"] = 0.into(), "max_pods");
    check(&|d| d["extra"] = true.into(), "unknown field");
}

fn json(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

#[test]
fn expired_and_future_plans_are_refused() {
    let f = file(None);
    let text = f.to_json();
    for now in [f.expires_at, MADE - SKEW_SECONDS - 1.0] {
        let refused = PlanFile::open(text.as_bytes(), &policy(), None, now);
        assert!(matches!(refused, Err(PlanFileError::Expired { .. })));
        // Instants as dates.
        let message = refused.unwrap_err().to_string();
        assert!(
            message.starts_with("the plan is valid from 2026-11-29T12:00:00Z to "),
            "{message}"
        );
    }
}

#[test]
fn only_holders_of_the_key_can_seal() {
    let approvers = key("0123456789abcdef-approvers");
    let keyed = file(Some(&approvers)).to_json();
    assert!(keyed.contains("hmac-sha256:"));
    // Without the key, a keyed plan is refused; with another key, it is altered.
    assert!(matches!(
        open(&keyed, &policy(), None),
        Err(PlanFileError::Seal(_))
    ));
    assert_eq!(
        open(&keyed, &policy(), Some(&key("another-key-of-16-bytes"))),
        Err(PlanFileError::Altered)
    );
    // An unkeyed (or re-sealed without the key) plan is refused when apply has the key.
    let doc: Value = serde_json::from_str(&keyed).unwrap();
    assert!(matches!(
        open(&reseal(doc.clone(), None), &policy(), Some(&approvers)),
        Err(PlanFileError::Seal(_))
    ));
    // An edit under a keyed seal is detected.
    let mut edited = doc;
    edited["targets"][0]["resourceVersion"] = "43".into();
    assert_eq!(
        open(&edited.to_string(), &policy(), Some(&approvers)),
        Err(PlanFileError::Altered)
    );
    assert_eq!(
        SealKey::new(b"short\n").unwrap_err(),
        PlanFileError::WeakKey(5)
    );
}

/// Every bound read from the file holds exactly at its limit and refuses one past it.
#[test]
fn bounds_hold_at_their_limits() {
    let doc: Value = serde_json::from_str(&file(None).to_json()).unwrap();
    let policy = policy();
    let targets = |n: usize| {
        let t = doc["targets"][0].clone();
        let many: Vec<Value> = (0..n)
            .map(|i| {
                let mut t = t.clone();
                t["uid"] = format!("u{i}").into();
                t["name"] = format!("p{i}").into();
                t
            })
            .collect();
        Value::Array(many)
    };
    let max_bytes = policy.max_archive_bytes;
    // (what, the edit, accepted)
    type Edit<'a> = Box<dyn Fn(&mut Value) + 'a>;
    let cases: Vec<(&str, Edit, bool)> = vec![
        (
            "max_pods targets",
            Box::new(|d| d["targets"] = targets(policy.max_pods)),
            true,
        ),
        (
            "one more",
            Box::new(|d| d["targets"] = targets(policy.max_pods + 1)),
            false,
        ),
        (
            "rv of 64",
            Box::new(|d| d["targets"][0]["resourceVersion"] = "7".repeat(64).into()),
            true,
        ),
        (
            "rv of 65",
            Box::new(|d| d["targets"][0]["resourceVersion"] = "7".repeat(65).into()),
            false,
        ),
        (
            "rv with a space",
            Box::new(|d| d["targets"][0]["resourceVersion"] = "4 2".into()),
            false,
        ),
        (
            "rv with a control",
            Box::new(|d| d["targets"][0]["resourceVersion"] = "4\n".into()),
            false,
        ),
        (
            "first at creation",
            Box::new(|d| d["targets"][0]["first"] = json(MADE)),
            true,
        ),
        (
            "first after creation",
            Box::new(|d| d["targets"][0]["first"] = json(MADE + 1.0)),
            false,
        ),
        (
            "first at zero",
            Box::new(|d| d["targets"][0]["first"] = json(0.0)),
            false,
        ),
        (
            "end at zero",
            Box::new(|d| d["targets"][0]["end"] = json(0.0)),
            false,
        ),
        (
            "archive at the ceiling",
            Box::new(move |d| d["targets"][0]["archiveBytes"] = max_bytes.into()),
            true,
        ),
        (
            "archive over it",
            Box::new(move |d| d["targets"][0]["archiveBytes"] = (max_bytes + 1).into()),
            false,
        ),
        (
            "a lifetime of 24 h",
            Box::new(|d| d["expiresAt"] = json(MADE + 86_400.0)),
            true,
        ),
        (
            "24 h and a second",
            Box::new(|d| d["expiresAt"] = json(MADE + 86_401.0)),
            false,
        ),
        (
            "no lifetime",
            Box::new(|d| d["expiresAt"] = json(MADE)),
            false,
        ),
    ];
    for (what, edit, accepted) in cases {
        let mut forged = doc.clone();
        edit(&mut forged);
        let result = open(&reseal(forged, None), &policy, None);
        assert_eq!(result.is_ok(), accepted, "{what}: {result:?}");
    }
    // A plan with no lifetime is refused even within the clock skew before its creation.
    let mut forged = doc.clone();
    forged["expiresAt"] = json(MADE);
    let result = PlanFile::open(reseal(forged, None).as_bytes(), &policy, None, MADE - 1.0);
    assert!(
        matches!(&result, Err(PlanFileError::Malformed(m)) if m.contains("lifetime")),
        "{result:?}"
    );
    // Opened at the edges of its life: from 300 s before its creation (clock skew) until
    // just before it expires.
    let f = file(None);
    let text = f.to_json();
    for (now, accepted) in [
        (MADE - SKEW_SECONDS, true),
        (MADE - SKEW_SECONDS - 0.5, false),
        (f.expires_at - 0.5, true),
        (f.expires_at, false),
    ] {
        let result = PlanFile::open(text.as_bytes(), &policy, None, now);
        assert_eq!(result.is_ok(), accepted, "at {now}: {result:?}");
    }
}

/// A key never shows in logs or errors.
#[test]
fn a_seal_key_is_not_printed() {
    let k = key("0123456789abcdef-approvers");
    assert_eq!(format!("{k:?}"), "SealKey(..)");
    assert_eq!(SealKey::new(b"0123456789abcdef\n").map(|_| ()), Ok(()));
    assert_eq!(
        SealKey::new(b"0123456789abcde").unwrap_err(),
        PlanFileError::WeakKey(15)
    );
}

#[test]
fn ttl_is_bounded() {
    assert_eq!(check_ttl(3600), Ok(3600));
    assert_eq!(check_ttl(86_400), Ok(86_400));
    for bad in [0, -1, 86_401, 1_000_000_000] {
        assert!(check_ttl(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_approver_is_sealed_with_the_plan() {
    let key = key("a key of sixteen bytes");
    let approved = file(Some(&key)).approved("jane@example.com", Some(&key));
    let text = approved.to_json();
    let opened = PlanFile::open(text.as_bytes(), &policy(), Some(&key), NOW).unwrap();
    assert_eq!(opened.approved_by.as_deref(), Some("jane@example.com"));
    // Another name written in its place breaks the seal.
    let edited = text.replace("jane@example.com", "mallory@example.com");
    assert!(matches!(
        PlanFile::open(edited.as_bytes(), &policy(), Some(&key), NOW),
        Err(PlanFileError::Seal(_) | PlanFileError::Altered)
    ));
    // A plan sealed before any approval reads as it did, with no approver.
    let plain = file(Some(&key)).to_json();
    assert!(!plain.contains("approvedBy"));
    let opened = PlanFile::open(plain.as_bytes(), &policy(), Some(&key), NOW).unwrap();
    assert_eq!(opened.approved_by, None);
}
