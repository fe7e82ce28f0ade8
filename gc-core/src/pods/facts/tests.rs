//! Eligibility and anchor, clause by clause, against the reference flow's `eligible` and `anchor`.
//!
//! Each row starts from one eligible Pod and changes one thing. Facts are read both ways a Pod
//! arrives (its metadata and status texts, and streamed in a Pod list) and must agree.

use serde_json::{Value, json};

use super::*;
use crate::pods::ledger::PyNum;

const PIN: &str = "diagnostics.example.com/collector";
const RULES: Rules<'static> = Rules {
    namespace: "work",
    collect_label: "diagnostics.example.com/collect",
    pin: PIN,
    protect: None,
    exclude: None,
};
/// 2026-11-27T10:00:00Z
const DAY: f64 = 1_795_773_600.0;

fn term(finished: Value) -> Value {
    json!({"name": "c", "state": {"terminated": {"exitCode": 1, "finishedAt": finished}}})
}

fn state(state: Value) -> Value {
    json!({"name": "c", "state": state})
}

/// An eligible Pod: Failed, labelled, unowned, one container terminated at [`DAY`].
fn pod() -> Value {
    json!({
        "metadata": {
            "name": "p",
            "namespace": "work",
            "uid": "uid-p",
            "resourceVersion": "100",
            "labels": {"diagnostics.example.com/collect": "true"}
        },
        "status": {"phase": "Failed", "containerStatuses": [term(json!("2026-11-27T10:00:00Z"))]}
    })
}

fn meta(p: &mut Value) -> &mut serde_json::Map<String, Value> {
    p["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

fn status(p: &mut Value) -> &mut serde_json::Map<String, Value> {
    p["status"].as_object_mut().expect("status is an object")
}

/// The Pod's facts from its metadata and status texts, checked equal to the streamed ones.
fn facts(pod: &Value) -> Result<PodFacts, BadField> {
    let metadata = pod.get("metadata").unwrap_or(&Value::Null).to_string();
    let status = pod.get("status").map(Value::to_string);
    let direct = PodFacts {
        meta: MetaFacts::read(&metadata, RULES),
        status: StatusFacts::read(status.as_deref())?,
    };
    let list = json!({"items": [pod]}).to_string();
    let streamed = crate::pods::inventory::read(list.as_bytes(), RULES, 10).expect("a Pod list");
    assert_eq!(
        streamed.pods,
        std::slice::from_ref(&direct),
        "streamed facts of {pod}"
    );
    Ok(direct)
}

fn bad_text(b: &BadField) -> String {
    format!("bad {}: {}", b.field, b.problem)
}

/// An edit of the eligible Pod, and what `eligible` makes of the result.
type Row = (fn(&mut Value), &'static str);

/// The flow's `eligible` as text: `eligible`, the `Ineligible` reason, or `bad field: problem`.
fn check(edit: fn(&mut Value), expect: &str) {
    let mut p = pod();
    edit(&mut p);
    let got = match facts(&p) {
        Err(b) => bad_text(&b),
        Ok(f) => match assess(&f) {
            Err(b) => bad_text(&b),
            Ok(Ok(_)) => "eligible".into(),
            Ok(Err(reason)) => format!("{reason:?}"),
        },
    };
    assert_eq!(got, expect, "pod {p}");
}

#[test]
fn eligibility_clauses() {
    let table: &[Row] = &[
        (|_| {}, "eligible"),
        // namespace
        (
            |p| p["metadata"]["namespace"] = json!("elsewhere"),
            "OtherNamespace",
        ),
        (|p| _ = meta(p).remove("namespace"), "OtherNamespace"),
        (
            |p| p["metadata"]["namespace"] = json!(["work"]),
            "OtherNamespace",
        ),
        // ... checked before anything else the flow would raise on
        (
            |p| {
                p["metadata"]["namespace"] = json!("elsewhere");
                p["status"]["containerStatuses"] = json!(["oops"]);
                p["metadata"]["labels"] = json!(["x"]);
            },
            "OtherNamespace",
        ),
        // phase
        (
            |p| p["status"]["phase"] = json!("Running"),
            r#"NotFailed { phase: Some("Running") }"#,
        ),
        (
            |p| p["status"]["phase"] = json!("Succeeded"),
            r#"NotFailed { phase: Some("Succeeded") }"#,
        ),
        (
            |p| p["status"]["phase"] = json!("failed"),
            r#"NotFailed { phase: Some("failed") }"#,
        ),
        (
            |p| _ = status(p).remove("phase"),
            "NotFailed { phase: None }",
        ),
        (
            |p| p["status"]["phase"] = json!(1),
            "NotFailed { phase: None }",
        ),
        (
            |p| _ = p.as_object_mut().map(|o| o.remove("status")),
            "NotFailed { phase: None }",
        ),
        (|p| p["status"] = json!(null), "NotFailed { phase: None }"),
        (|p| p["status"] = json!({}), "NotFailed { phase: None }"),
        // a truthy status that is not an object: `status.get` raises
        (
            |p| p["status"] = json!("Failed"),
            "bad status: not an object",
        ),
        (|p| p["status"] = json!([1]), "bad status: not an object"),
        // uid and resourceVersion
        (|p| _ = meta(p).remove("uid"), "NoUid"),
        (|p| p["metadata"]["uid"] = json!(""), "NoUid"),
        (|p| p["metadata"]["uid"] = json!(null), "NoUid"),
        (|p| p["metadata"]["uid"] = json!(0), "NoUid"),
        (
            |p| _ = meta(p).remove("resourceVersion"),
            "NoResourceVersion",
        ),
        (
            |p| p["metadata"]["resourceVersion"] = json!(""),
            "NoResourceVersion",
        ),
        // uid before resourceVersion
        (
            |p| {
                meta(p).remove("uid");
                meta(p).remove("resourceVersion");
            },
            "NoUid",
        ),
        // label
        (|p| _ = meta(p).remove("labels"), "NotLabelled"),
        (|p| p["metadata"]["labels"] = json!({}), "NotLabelled"),
        (|p| p["metadata"]["labels"] = json!(null), "NotLabelled"),
        (|p| p["metadata"]["labels"] = json!([]), "NotLabelled"),
        (
            |p| p["metadata"]["labels"]["diagnostics.example.com/collect"] = json!("false"),
            "NotLabelled",
        ),
        (
            |p| p["metadata"]["labels"]["diagnostics.example.com/collect"] = json!("True"),
            "NotLabelled",
        ),
        (
            |p| p["metadata"]["labels"]["diagnostics.example.com/collect"] = json!(true),
            "NotLabelled",
        ),
        (
            |p| p["metadata"]["labels"] = json!({"other/collect": "true"}),
            "NotLabelled",
        ),
        (
            |p| p["metadata"]["labels"] = json!(["x"]),
            "bad metadata.labels: not an object",
        ),
        (
            |p| p["metadata"]["labels"] = json!("diagnostics.example.com/collect"),
            "bad metadata.labels: not an object",
        ),
        // ownerReferences
        (
            |p| p["metadata"]["ownerReferences"] = json!([{"kind": "Job", "name": "j"}]),
            "Owned",
        ),
        (|p| p["metadata"]["ownerReferences"] = json!([]), "eligible"),
        (
            |p| p["metadata"]["ownerReferences"] = json!(null),
            "eligible",
        ),
        // label before owner
        (
            |p| {
                p["metadata"]["ownerReferences"] = json!([{"kind": "Job"}]);
                p["metadata"]["labels"] = json!({});
            },
            "NotLabelled",
        ),
        // mirror annotation: its presence, whatever its value
        (
            |p| p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"}),
            "Mirror",
        ),
        (
            |p| p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": ""}),
            "Mirror",
        ),
        (
            |p| p["metadata"]["annotations"] = json!({"note": "kubernetes.io/config.mirror"}),
            "eligible",
        ),
        (|p| p["metadata"]["annotations"] = json!(null), "eligible"),
        // Python's `in` on a list or a string
        (
            |p| p["metadata"]["annotations"] = json!(["kubernetes.io/config.mirror"]),
            "Mirror",
        ),
        (|p| p["metadata"]["annotations"] = json!(["x"]), "eligible"),
        (
            |p| p["metadata"]["annotations"] = json!(5),
            "bad metadata.annotations: not an object",
        ),
        // owner before mirror
        (
            |p| {
                p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
                p["metadata"]["ownerReferences"] = json!([{"kind": "Node"}]);
            },
            "Owned",
        ),
        // finalizers: none, exactly the pin, other, pin and other
        (|p| p["metadata"]["finalizers"] = json!([]), "eligible"),
        (|p| p["metadata"]["finalizers"] = json!(null), "eligible"),
        (|p| p["metadata"]["finalizers"] = json!([PIN]), "eligible"),
        (
            |p| p["metadata"]["finalizers"] = json!(["example.com/other"]),
            "ForeignFinalizers",
        ),
        (
            |p| p["metadata"]["finalizers"] = json!([PIN, "example.com/other"]),
            "ForeignFinalizers",
        ),
        (
            |p| p["metadata"]["finalizers"] = json!(["example.com/other", PIN]),
            "ForeignFinalizers",
        ),
        (
            |p| p["metadata"]["finalizers"] = json!([PIN, PIN]),
            "ForeignFinalizers",
        ),
        (
            |p| p["metadata"]["finalizers"] = json!(PIN),
            "ForeignFinalizers",
        ),
        // mirror before finalizers
        (
            |p| {
                p["metadata"]["finalizers"] = json!(["example.com/other"]);
                p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
            },
            "Mirror",
        ),
        // deletionTimestamp: only with the pin
        (
            |p| p["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:59:00Z"),
            "DeletingUnpinned",
        ),
        (
            |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:59:00Z");
                p["metadata"]["finalizers"] = json!([]);
            },
            "DeletingUnpinned",
        ),
        (
            |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:59:00Z");
                p["metadata"]["finalizers"] = json!([PIN]);
            },
            "eligible",
        ),
        (
            |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:59:00Z");
                p["metadata"]["finalizers"] = json!([PIN, "example.com/other"]);
            },
            "ForeignFinalizers",
        ),
        (
            |p| p["metadata"]["deletionTimestamp"] = json!(""),
            "eligible",
        ),
        // running or waiting containers, in each of the three lists
        (
            |p| p["status"]["containerStatuses"][0] = state(json!({"running": {}})),
            r#"ContainerActive { field: "containerStatuses", index: 0, state: "running" }"#,
        ),
        (
            |p| {
                let waiting = state(json!({"waiting": {"reason": "CrashLoopBackOff"}}));
                p["status"]["containerStatuses"] = json!([term(json!("x")), waiting]);
            },
            r#"ContainerActive { field: "containerStatuses", index: 1, state: "waiting" }"#,
        ),
        (
            |p| p["status"]["initContainerStatuses"] = json!([state(json!({"running": {}}))]),
            r#"ContainerActive { field: "initContainerStatuses", index: 0, state: "running" }"#,
        ),
        (
            |p| p["status"]["initContainerStatuses"] = json!([state(json!({"waiting": {}}))]),
            r#"ContainerActive { field: "initContainerStatuses", index: 0, state: "waiting" }"#,
        ),
        (
            |p| {
                p["status"]["ephemeralContainerStatuses"] = json!([
                    state(json!({"terminated": {}})),
                    state(json!({"running": {}}))
                ]);
            },
            r#"ContainerActive { field: "ephemeralContainerStatuses", index: 1, state: "running" }"#,
        ),
        (
            |p| {
                p["status"]["ephemeralContainerStatuses"] = json!([state(json!({"waiting": {}}))]);
            },
            r#"ContainerActive { field: "ephemeralContainerStatuses", index: 0, state: "waiting" }"#,
        ),
        // running is looked for before waiting; the lists in the flow's order
        (
            |p| {
                p["status"]["containerStatuses"][0] = state(json!({"waiting": {}, "running": {}}));
            },
            r#"ContainerActive { field: "containerStatuses", index: 0, state: "running" }"#,
        ),
        (
            |p| {
                p["status"]["ephemeralContainerStatuses"] = json!([state(json!({"running": {}}))]);
                p["status"]["initContainerStatuses"] = json!([state(json!({"waiting": {}}))]);
            },
            r#"ContainerActive { field: "initContainerStatuses", index: 0, state: "waiting" }"#,
        ),
        // the key is enough, whatever its value
        (
            |p| p["status"]["containerStatuses"][0] = state(json!({"running": null})),
            r#"ContainerActive { field: "containerStatuses", index: 0, state: "running" }"#,
        ),
        // Python's `in` on a state that is a string or a list
        (
            |p| p["status"]["containerStatuses"][0] = state(json!("running")),
            r#"ContainerActive { field: "containerStatuses", index: 0, state: "running" }"#,
        ),
        (
            |p| p["status"]["containerStatuses"][0] = state(json!(["waiting"])),
            r#"ContainerActive { field: "containerStatuses", index: 0, state: "waiting" }"#,
        ),
        (
            |p| p["status"]["containerStatuses"][0] = state(json!(7)),
            "bad status.containerStatuses[0].state: not an object",
        ),
        // terminated, empty or absent states are not active
        (
            |p| p["status"]["containerStatuses"][0] = state(json!({})),
            "eligible",
        ),
        (
            |p| p["status"]["containerStatuses"][0] = json!({"name": "c"}),
            "eligible",
        ),
        (|p| p["status"]["containerStatuses"] = json!([]), "eligible"),
        (
            |p| p["status"]["containerStatuses"] = json!(null),
            "eligible",
        ),
        // malformed container status, in each list
        (
            |p| p["status"]["containerStatuses"] = json!(["oops"]),
            "bad status.containerStatuses[0]: malformed container status (not an object)",
        ),
        (
            |p| p["status"]["initContainerStatuses"] = json!([{}, null]),
            "bad status.initContainerStatuses[1]: malformed container status (not an object)",
        ),
        (
            |p| p["status"]["ephemeralContainerStatuses"] = json!([[]]),
            "bad status.ephemeralContainerStatuses[0]: malformed container status (not an object)",
        ),
        (
            |p| p["status"]["containerStatuses"] = json!("oops"),
            "bad status.containerStatuses: not a list",
        ),
        // the flow stops at the first active container: a later malformed one is never read
        (
            |p| p["status"]["containerStatuses"] = json!([state(json!({"running": {}})), "oops"]),
            r#"ContainerActive { field: "containerStatuses", index: 0, state: "running" }"#,
        ),
        (
            |p| p["status"]["containerStatuses"] = json!(["oops", state(json!({"running": {}}))]),
            "bad status.containerStatuses[0]: malformed container status (not an object)",
        ),
        // the container clause comes last
        (
            |p| {
                p["status"]["containerStatuses"] = json!(["oops"]);
                p["metadata"]["finalizers"] = json!(["example.com/other"]);
            },
            "ForeignFinalizers",
        ),
        // metadata that is not an object
        (
            |p| p["metadata"] = json!(null),
            "bad metadata: not an object",
        ),
        (|p| p["metadata"] = json!([]), "bad metadata: not an object"),
    ];
    for &(edit, expect) in table {
        check(edit, expect);
    }
}

/// The flow's `anchor(status, first)` of an eligible Pod as text: `basis anchor`, or the error.
fn check_anchor(containers: Value, first: PyNum, expect: &str) {
    let mut p = pod();
    match containers {
        Value::Object(lists) => status(&mut p).extend(lists),
        list => p["status"]["containerStatuses"] = list,
    }
    let facts = facts(&p).expect("facts");
    let eligible = assess(&facts).expect("no bad field").expect("eligible");
    let got = match eligible.anchor(first) {
        Ok((anchor, basis)) => format!("{} {anchor}", basis.as_str()),
        Err(b) => bad_text(&b),
    };
    assert_eq!(got, expect, "pod {p}");
}

#[test]
fn anchor_bases() {
    let first = PyNum::Int(1_795_700_000);
    let table = [
        // every container terminated with finishedAt: the latest, over all three lists
        (
            json!([term(json!("2026-11-27T10:00:00Z"))]),
            "finishedAt 1795773600.0",
        ),
        (
            json!([
                term(json!("2026-11-27T10:00:00Z")),
                term(json!("2026-11-27T11:00:00.250Z"))
            ]),
            "finishedAt 1795777200.25",
        ),
        (
            json!([
                term(json!("2026-11-27T11:00:00.250Z")),
                term(json!("2026-11-27T10:00:00Z"))
            ]),
            "finishedAt 1795777200.25",
        ),
        (
            json!({
                "containerStatuses": [term(json!("2026-11-27T10:00:00Z"))],
                "initContainerStatuses": [term(json!("2026-11-27T12:00:00Z"))],
            }),
            "finishedAt 1795780800.0",
        ),
        (
            json!({
                "containerStatuses": [term(json!("2026-11-27T10:00:00Z"))],
                "ephemeralContainerStatuses": [term(json!("2026-11-27T10:00:01Z"))],
            }),
            "finishedAt 1795773601.0",
        ),
        // offsets: the same instant written three ways
        (
            json!([term(json!("2026-11-27T12:00:00+02:00"))]),
            "finishedAt 1795773600.0",
        ),
        (
            json!([term(json!("2026-11-27T04:30:00-05:30"))]),
            "finishedAt 1795773600.0",
        ),
        (
            json!([term(json!("2026-11-27T10:00:00+00:00"))]),
            "finishedAt 1795773600.0",
        ),
        // any container without finishedAt: the first observation, its type kept
        (
            json!([
                term(json!("2026-11-27T10:00:00Z")),
                state(json!({"terminated": {}}))
            ]),
            "observedFailed 1795700000",
        ),
        (
            json!([term(json!("2026-11-27T10:00:00Z")), term(json!(""))]),
            "observedFailed 1795700000",
        ),
        (
            json!([term(json!("2026-11-27T10:00:00Z")), term(json!(null))]),
            "observedFailed 1795700000",
        ),
        (
            json!([state(json!({"terminated": "yes"}))]),
            "observedFailed 1795700000",
        ),
        (json!([state(json!({}))]), "observedFailed 1795700000"),
        (json!([{"name": "c"}]), "observedFailed 1795700000"),
        (
            json!({
                "containerStatuses": [term(json!("2026-11-27T10:00:00Z"))],
                "initContainerStatuses": [state(json!({}))],
            }),
            "observedFailed 1795700000",
        ),
        // no containers at all
        (json!([]), "observedFailed 1795700000"),
        (json!(null), "observedFailed 1795700000"),
        // timestamps the flow's `stamp` refuses, even after a container without one
        (
            json!([term(json!("2026-11-27T10:00:00"))]),
            r#"bad status.containerStatuses[0].state.terminated.finishedAt: timestamp has no time zone: "2026-11-27T10:00:00""#,
        ),
        (
            json!([state(json!({})), term(json!("2026-11-27T10:00:00"))]),
            r#"bad status.containerStatuses[1].state.terminated.finishedAt: timestamp has no time zone: "2026-11-27T10:00:00""#,
        ),
        (
            json!([term(json!("yesterday"))]),
            r#"bad status.containerStatuses[0].state.terminated.finishedAt: not an ISO 8601 timestamp: "yesterday""#,
        ),
        (
            json!([term(json!(1_795_773_600))]),
            "bad status.containerStatuses[0].state.terminated.finishedAt: missing timestamp (not a string)",
        ),
        // `c.get('state', {})` is `None` for a null state, and `None.get` raises
        (
            json!([state(json!(null))]),
            "bad status.containerStatuses[0].state: not an object",
        ),
    ];
    for (containers, expect) in table {
        check_anchor(containers, first, expect);
    }
    // The first observation is returned as given: float, int or bool.
    check_anchor(
        json!([]),
        PyNum::Float(1_795_700_000.5),
        "observedFailed 1795700000.5",
    );
    check_anchor(json!([]), PyNum::Bool(true), "observedFailed true");
    // `finished_at` agrees with the anchor.
    let facts = facts(&pod()).expect("facts");
    let eligible = assess(&facts).expect("readable").expect("eligible");
    assert_eq!(eligible.finished_at(), Ok(Some(DAY)));
}

/// The labels the protect label and the exclude selector read: decoded (escapes too) for a Pod
/// that carries the collect label, not kept for any other.
#[test]
fn labels_are_kept_only_for_pods_that_opt_in() {
    let protect = crate::selector::LabelPair::parse("gc.example.com/protect=true").unwrap();
    let exclude = crate::selector::Selector::parse("team in (b),!n").unwrap();
    let rules = Rules {
        protect: Some(&protect),
        exclude: Some(&exclude),
        ..RULES
    };
    let labels = |text: &str| {
        MetaFacts::read(text, rules)
            .map(|m| m.labels().clone())
            .unwrap()
    };
    let kept = labels(
        r#"{"namespace": "work", "labels": {"diagnostics.example.com/collect": "true",
            "gc.example.com\/protect": "tr\u0075e", "n": 1, "team": "a", "team": "b"}}"#,
    );
    // Only the labels the protect label and the selector read: not the collect label.
    let want: Labels = [
        ("gc.example.com/protect", "true"),
        ("n", "1"),
        ("team", "b"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    assert_eq!(kept, want);
    assert!(labels(r#"{"labels": {"gc.example.com/protect": "true"}}"#).is_empty());
    assert!(
        labels(r#"{"labels": {"diagnostics.example.com/collect": "false", "a": "b"}}"#).is_empty()
    );
    assert!(labels(r#"{"namespace": "work"}"#).is_empty());
    // Without a protect label or a selector, no label is kept at all.
    let none = MetaFacts::read(
        r#"{"labels": {"diagnostics.example.com/collect": "true", "gc.example.com/protect": "true"}}"#,
        RULES,
    )
    .unwrap();
    assert!(none.labels().is_empty());
}
