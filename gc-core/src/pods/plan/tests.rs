//! The reference flow's `plan` step: retention, ordering, cap, ceilings, ledger carry and prune,
//! and the errors that refuse a whole plan.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::pods::config::PodInputs;
use crate::pods::inventory;

/// 2026-11-29T12:00:00Z
const NOW: f64 = 1_795_953_600.0;
/// Over two days before [`NOW`]: past the default retention.
const DAY: &str = "2026-11-27T10:00:00Z";
/// An hour before [`NOW`]: held.
const RECENT: &str = "2026-11-29T11:00:00Z";

fn term(finished: &str) -> Value {
    json!({"name": "main", "state": {"terminated": {"exitCode": 1, "finishedAt": finished}}})
}

/// An eligible Pod named `name` (uid `uid-name`) with these container statuses.
fn pod(name: &str, containers: Value) -> Value {
    json!({
        "metadata": {
            "labels": {"diagnostics.example.com/collect": "true"},
            "name": name,
            "namespace": "work",
            "resourceVersion": "100",
            "uid": format!("uid-{name}")
        },
        "status": {"containerStatuses": containers, "phase": "Failed"}
    })
}

/// An eligible Pod whose one container finished at `at`.
fn done(name: &str, at: &str) -> Value {
    pod(name, json!([term(at)]))
}

/// `p` with `metadata.key` set to `value`.
fn meta(mut p: Value, key: &str, value: Value) -> Value {
    p["metadata"][key] = value;
    p
}

/// The plan of `pods` (in the flow's inventory shape) with the ledger `ledger`, inputs edited by
/// `inputs` from namespace `work` and the defaults, at [`NOW`]: one line a decision in inventory
/// order, the counts, the targets in order and the next ledger; or the error.
fn check(pods: &[Value], ledger: &str, inputs: fn(&mut PodInputs), expect: &[&str]) {
    let mut given = PodInputs {
        namespace: "work".into(),
        ..PodInputs::default()
    };
    inputs(&mut given);
    let cfg = given.validate().expect("valid inputs");
    let text = json!({
        "size": pods.len(),
        "metadataItems": pods.iter().map(|p| &p["metadata"]).collect::<Vec<_>>(),
        "statusItems": pods.iter().map(|p| json!({"status": p["status"]})).collect::<Vec<_>>(),
    })
    .to_string();
    let inventory =
        inventory::read(text.as_bytes(), cfg.rules(), cfg.max_inventory + 1).expect("inventory");
    let previous = PreviousLedger::parse(ledger.as_bytes()).expect("ledger");
    let got = match plan_pods(&inventory, &previous, &cfg, NOW) {
        Ok(plan) => render(&plan),
        Err(e) => vec![format!("error: {e}")],
    };
    assert_eq!(got, expect, "pods {pods:?}, ledger {ledger}");
}

fn render(plan: &PodPlan) -> Vec<String> {
    let mut lines: Vec<String> = plan
        .decisions
        .iter()
        .map(|d| {
            let decision = match &d.decision {
                Decision::NotEligible { reason } => format!("not eligible: {reason}"),
                Decision::Held {
                    basis,
                    anchor,
                    until,
                } => format!("held {} {anchor} until {until:?}", basis.as_str()),
                Decision::Deferred { basis, anchor } => {
                    format!("deferred {} {anchor}", basis.as_str())
                }
                Decision::Targeted { basis, anchor } => {
                    format!("targeted {} {anchor}", basis.as_str())
                }
                Decision::Protected { basis, anchor } => {
                    format!("protected {} {anchor}", basis.as_str())
                }
                Decision::Excluded { basis, anchor } => {
                    format!("excluded {} {anchor}", basis.as_str())
                }
            };
            let name = d.name.as_deref().unwrap_or("-");
            format!("{name} {}: {decision}", d.uid.as_deref().unwrap_or("-"))
        })
        .collect();
    lines.push(format!("held {} deferred {}", plan.held, plan.deferred));
    for t in &plan.targets {
        lines.push(format!(
            "target {} {} first {} {} {} rv {}",
            t.uid,
            t.name,
            t.first,
            t.basis.as_str(),
            t.end,
            t.resource_version
        ));
    }
    lines.push(format!("ledger {}", plan.ledger.to_json()));
    lines
}

#[test]
fn retention_holds_until_the_exact_boundary() {
    check(
        &[
            done("exactly-due", "2026-11-29T11:00:00Z"),
            done("one-second-short", "2026-11-29T11:00:01Z"),
            done("a-millisecond-short", "2026-11-29T11:00:00.001Z"),
        ],
        "{}",
        |i| i.retention_seconds = 3600,
        &[
            "exactly-due uid-exactly-due: targeted finishedAt 1795950000.0",
            "one-second-short uid-one-second-short: held finishedAt 1795950001.0 until 1795953601.0",
            "a-millisecond-short uid-a-millisecond-short: held finishedAt 1795950000.001 until 1795953600.001",
            "held 2 deferred 0",
            r#"target uid-exactly-due "exactly-due" first 1795953600.0 finishedAt 1795950000.0 rv 100"#,
            r#"ledger {"uid-exactly-due": {"first": 1795953600.0, "name": "exactly-due"}, "uid-one-second-short": {"first": 1795953600.0, "name": "one-second-short"}, "uid-a-millisecond-short": {"first": 1795953600.0, "name": "a-millisecond-short"}}"#,
        ],
    );
    // The default retention (a day), from a first observation in the ledger.
    check(
        &[pod("due", json!([])), pod("short", json!([]))],
        r#"{"uid-due": {"first": 1795867200, "name": "due"}, "uid-short": {"first": 1795867201, "name": "short"}}"#,
        |_| {},
        &[
            "due uid-due: targeted observedFailed 1795867200",
            "short uid-short: held observedFailed 1795867201 until 1795953601.0",
            "held 1 deferred 0",
            r#"target uid-due "due" first 1795867200 observedFailed 1795867200 rv 100"#,
            r#"ledger {"uid-due": {"first": 1795867200, "name": "due"}, "uid-short": {"first": 1795867201, "name": "short"}}"#,
        ],
    );
}

#[test]
fn targets_by_anchor_then_uid_up_to_the_cap() {
    check(
        &[
            meta(done("c", DAY), "uid", json!("uid-c")),
            meta(done("a", DAY), "uid", json!("uid-a")),
            meta(done("b", DAY), "uid", json!("uid-b")),
            meta(done("older", "2026-11-26T10:00:00Z"), "uid", json!("uid-z")),
            meta(done("d", DAY), "uid", json!("uid-d")),
            done("held", RECENT),
        ],
        "{}",
        |i| i.max_pods = 3,
        &[
            "c uid-c: deferred finishedAt 1795773600.0",
            "a uid-a: targeted finishedAt 1795773600.0",
            "b uid-b: targeted finishedAt 1795773600.0",
            "older uid-z: targeted finishedAt 1795687200.0",
            "d uid-d: deferred finishedAt 1795773600.0",
            "held uid-held: held finishedAt 1795950000.0 until 1796036400.0",
            "held 1 deferred 2",
            r#"target uid-z "older" first 1795953600.0 finishedAt 1795687200.0 rv 100"#,
            r#"target uid-a "a" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"target uid-b "b" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"ledger {"uid-c": {"first": 1795953600.0, "name": "c"}, "uid-a": {"first": 1795953600.0, "name": "a"}, "uid-b": {"first": 1795953600.0, "name": "b"}, "uid-z": {"first": 1795953600.0, "name": "older"}, "uid-d": {"first": 1795953600.0, "name": "d"}, "uid-held": {"first": 1795953600.0, "name": "held"}}"#,
        ],
    );
    // Anchors compare as numbers: an int first observation ties a float finishedAt (uid decides),
    // and `true` is 1.
    check(
        &[
            pod("int", json!([])),
            done("float", DAY),
            pod("earlier", json!([])),
            pod("bool", json!([])),
        ],
        r#"{"uid-bool": {"first": true, "name": "bool"}, "uid-earlier": {"first": 1795773599, "name": "earlier"}, "uid-int": {"first": 1795773600, "name": "int"}}"#,
        |i| i.max_pods = 3,
        &[
            "int uid-int: deferred observedFailed 1795773600",
            "float uid-float: targeted finishedAt 1795773600.0",
            "earlier uid-earlier: targeted observedFailed 1795773599",
            "bool uid-bool: targeted observedFailed true",
            "held 0 deferred 1",
            r#"target uid-bool "bool" first true observedFailed true rv 100"#,
            r#"target uid-earlier "earlier" first 1795773599 observedFailed 1795773599 rv 100"#,
            r#"target uid-float "float" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"ledger {"uid-int": {"first": 1795773600, "name": "int"}, "uid-float": {"first": 1795953600.0, "name": "float"}, "uid-earlier": {"first": 1795773599, "name": "earlier"}, "uid-bool": {"first": true, "name": "bool"}}"#,
        ],
    );
    // A repeated uid is two candidates and one ledger entry (the last name), as in the flow.
    check(
        &[
            done("one", DAY),
            meta(done("two", DAY), "uid", json!("uid-one")),
        ],
        "{}",
        |_| {},
        &[
            "one uid-one: targeted finishedAt 1795773600.0",
            "two uid-one: targeted finishedAt 1795773600.0",
            "held 0 deferred 0",
            r#"target uid-one "one" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"target uid-one "two" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"ledger {"uid-one": {"first": 1795953600.0, "name": "two"}}"#,
        ],
    );
    check(&[], "{}", |_| {}, &["held 0 deferred 0", "ledger {}"]);
}

#[test]
fn ledger_carries_the_first_observation_and_prunes_the_rest() {
    check(
        &[
            pod("kept-int", json!([])),
            pod("kept-float", json!([])),
            pod("new-one", json!([])),
            meta(pod("now-ineligible", json!([])), "labels", json!({})),
            pod("entry-without-first", json!([])),
        ],
        r#"{"uid-kept-int": {"first": 1795000000, "name": "kept-int"}, "uid-kept-float": {"first": 1795900000.25, "name": "old-name"}, "uid-gone": {"first": 1790000000, "name": "gone"}, "uid-now-ineligible": {"first": 1790000000, "name": "now-ineligible"}, "uid-entry-without-first": {"name": "x"}}"#,
        |_| {},
        &[
            "kept-int uid-kept-int: targeted observedFailed 1795000000",
            "kept-float uid-kept-float: held observedFailed 1795900000.25 until 1795986400.25",
            "new-one uid-new-one: held observedFailed 1795953600.0 until 1796040000.0",
            r#"now-ineligible uid-now-ineligible: not eligible: collect label is not "true""#,
            "entry-without-first uid-entry-without-first: held observedFailed 1795953600.0 until 1796040000.0",
            "held 3 deferred 0",
            r#"target uid-kept-int "kept-int" first 1795000000 observedFailed 1795000000 rv 100"#,
            r#"ledger {"uid-kept-int": {"first": 1795000000, "name": "kept-int"}, "uid-kept-float": {"first": 1795900000.25, "name": "kept-float"}, "uid-new-one": {"first": 1795953600.0, "name": "new-one"}, "uid-entry-without-first": {"first": 1795953600.0, "name": "entry-without-first"}}"#,
        ],
    );
}

#[test]
fn first_observation_and_anchor_must_be_in_the_past() {
    let p = || vec![pod("p", json!([]))];
    let first = "pod #0 \"p\" (uid uid-p): ledger.first: invalid observation timestamp";
    let rows = [
        (
            r#"{"uid-p": {"first": 1900000000}}"#,
            format!("{first} 1900000000: not in (0, now]"),
        ),
        (
            r#"{"uid-p": {"first": 1795953600.5}}"#,
            format!("{first} 1795953600.5: not in (0, now]"),
        ),
        (
            r#"{"uid-p": {"first": 0}}"#,
            format!("{first} 0: not in (0, now]"),
        ),
        (
            r#"{"uid-p": {"first": -1.5}}"#,
            format!("{first} -1.5: not in (0, now]"),
        ),
        (
            r#"{"uid-p": {"first": false}}"#,
            format!("{first} false: not in (0, now]"),
        ),
        (
            r#"{"uid-p": {"first": "yesterday"}}"#,
            format!("{first} \"yesterday\""),
        ),
        (r#"{"uid-p": {"first": null}}"#, format!("{first} null")),
        (
            r#"{"uid-p": 5}"#,
            "pod #0 \"p\" (uid uid-p): ledger: entry is not an object: 5".into(),
        ),
    ];
    for (ledger, expect) in rows {
        check(&p(), ledger, |_| {}, &[&format!("error: {expect}")]);
    }
    // Exactly now is allowed, and held.
    check(
        &p(),
        r#"{"uid-p": {"first": 1795953600}}"#,
        |_| {},
        &[
            "p uid-p: held observedFailed 1795953600 until 1796040000.0",
            "held 1 deferred 0",
            r#"ledger {"uid-p": {"first": 1795953600, "name": "p"}}"#,
        ],
    );
    let terminal = "pod #0 \"f\" (uid uid-f): status: invalid terminal timestamp";
    check(
        &[done("f", "2026-11-29T12:00:00.001Z")],
        "{}",
        |_| {},
        &[&format!(
            "error: {terminal} 1795953600.001 (finishedAt): not in (0, now]"
        )],
    );
    check(
        &[done("f", "1970-01-01T00:00:00Z")],
        "{}",
        |_| {},
        &[&format!(
            "error: {terminal} 0.0 (finishedAt): not in (0, now]"
        )],
    );
    check(
        &[done("f", "2026-11-29T12:00:00Z")],
        "{}",
        |_| {},
        &[
            "f uid-f: held finishedAt 1795953600.0 until 1796040000.0",
            "held 1 deferred 0",
            r#"ledger {"uid-f": {"first": 1795953600.0, "name": "f"}}"#,
        ],
    );
}

/// A copy of `v` with every object's keys in order, as `sort_keys=True` writes them.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let m: BTreeMap<_, _> = m.iter().map(|(k, v)| (k.clone(), sorted(v))).collect();
            Value::Object(m.into_iter().collect())
        }
        Value::Array(xs) => Value::Array(xs.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `p` with the labels `labels` added to the collect label.
fn labelled(p: Value, labels: Value) -> Value {
    let mut all = p["metadata"]["labels"].clone();
    for (k, v) in labels.as_object().unwrap() {
        all[k] = v.clone();
    }
    meta(p, "labels", all)
}

#[test]
fn protected_and_excluded_pods_are_never_targets_and_count_nowhere() {
    let protect = json!({"gc.example.com/protect": "true"});
    let payments = json!({"team": "payments"});
    // Four due Pods, a cap of two: the oldest two would be targets; one is protected, one
    // excluded, so the next two are targeted and nothing is deferred. A held protected Pod is
    // protected, not held; an over-ceiling excluded Pod does not fail the plan. All stay in the
    // ledger.
    check(
        &[
            labelled(done("oldest", "2026-11-20T10:00:00Z"), protect.clone()),
            labelled(done("older", "2026-11-21T10:00:00Z"), payments.clone()),
            done("a", "2026-11-22T10:00:00Z"),
            done("b", "2026-11-23T10:00:00Z"),
            labelled(done("young", RECENT), protect.clone()),
            labelled(
                meta(
                    labelled(done("huge", DAY), payments.clone()),
                    "annotations",
                    json!({"note": "x".repeat(3000)}),
                ),
                json!({}),
            ),
            // Other values of the labels spare nothing.
            labelled(
                done("c", DAY),
                json!({"gc.example.com/protect": "false", "team": "search"}),
            ),
        ],
        "{}",
        |i| {
            i.max_pods = 2;
            i.max_archive_bytes = 1024;
            i.exclude_selector = Some("team in (payments)".into());
        },
        &[
            "oldest uid-oldest: protected finishedAt 1795168800.0",
            "older uid-older: excluded finishedAt 1795255200.0",
            "a uid-a: targeted finishedAt 1795341600.0",
            "b uid-b: targeted finishedAt 1795428000.0",
            "young uid-young: protected finishedAt 1795950000.0",
            "huge uid-huge: excluded finishedAt 1795773600.0",
            "c uid-c: deferred finishedAt 1795773600.0",
            "held 0 deferred 1",
            r#"target uid-a "a" first 1795953600.0 finishedAt 1795341600.0 rv 100"#,
            r#"target uid-b "b" first 1795953600.0 finishedAt 1795428000.0 rv 100"#,
            r#"ledger {"uid-oldest": {"first": 1795953600.0, "name": "oldest"}, "uid-older": {"first": 1795953600.0, "name": "older"}, "uid-a": {"first": 1795953600.0, "name": "a"}, "uid-b": {"first": 1795953600.0, "name": "b"}, "uid-young": {"first": 1795953600.0, "name": "young"}, "uid-huge": {"first": 1795953600.0, "name": "huge"}, "uid-c": {"first": 1795953600.0, "name": "c"}}"#,
        ],
    );
    // Without the exclude selector, the excluded Pods are ordinary; a custom protect label
    // replaces the default one; protection comes before exclusion.
    check(
        &[
            labelled(done("oldest", "2026-11-20T10:00:00Z"), protect.clone()),
            labelled(done("older", "2026-11-21T10:00:00Z"), payments.clone()),
            labelled(
                done("kept", DAY),
                json!({"keep": "yes", "team": "payments"}),
            ),
        ],
        "{}",
        |i| i.protect_label = "keep=yes".into(),
        &[
            "oldest uid-oldest: targeted finishedAt 1795168800.0",
            "older uid-older: targeted finishedAt 1795255200.0",
            "kept uid-kept: protected finishedAt 1795773600.0",
            "held 0 deferred 0",
            r#"target uid-oldest "oldest" first 1795953600.0 finishedAt 1795168800.0 rv 100"#,
            r#"target uid-older "older" first 1795953600.0 finishedAt 1795255200.0 rv 100"#,
            r#"ledger {"uid-oldest": {"first": 1795953600.0, "name": "oldest"}, "uid-older": {"first": 1795953600.0, "name": "older"}, "uid-kept": {"first": 1795953600.0, "name": "kept"}}"#,
        ],
    );
    // A Pod that is not eligible stays not eligible, whatever its labels; `!key` selectors
    // match Pods without the label; bad data in a spared Pod still fails the plan.
    check(
        &[
            labelled(
                meta(done("owned", DAY), "ownerReferences", json!([{}])),
                protect,
            ),
            done("plain", DAY),
            labelled(done("canary", DAY), json!({"canary": ""})),
        ],
        "{}",
        |i| i.exclude_selector = Some("!canary".into()),
        &[
            "owned uid-owned: not eligible: has ownerReferences",
            "plain uid-plain: excluded finishedAt 1795773600.0",
            "canary uid-canary: targeted finishedAt 1795773600.0",
            "held 0 deferred 0",
            r#"target uid-canary "canary" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"ledger {"uid-plain": {"first": 1795953600.0, "name": "plain"}, "uid-canary": {"first": 1795953600.0, "name": "canary"}}"#,
        ],
    );
    check(
        &[labelled(done("bad", "2026-11-27T10:00:00"), payments)],
        "{}",
        |i| i.exclude_selector = Some("team".into()),
        &[
            "error: pod #0 \"bad\" (uid uid-bad): status.containerStatuses[0].state.terminated.finishedAt: timestamp has no time zone: \"2026-11-27T10:00:00\"",
        ],
    );
}

#[test]
fn archive_ceiling_is_the_canonical_archive_and_names_the_pod() {
    let big = meta(
        done("big", DAY),
        "annotations",
        json!({"note": "x".repeat(1500)}),
    );
    // The archive as the flow's `prepare_archive` writes it (ASCII only, so serde_json's compact
    // text is Python's).
    let archive = json!({
        "anchor": 1_795_773_600.0,
        "metadata": big["metadata"],
        "retentionBasis": "finishedAt",
        "status": big["status"],
    });
    let len = serde_json::to_string(&sorted(&archive))
        .expect("json")
        .len();
    assert_eq!(len, 1856, "the canonical archive's length");
    let big = || big.clone();
    // At the ceiling: targeted.
    check(
        &[big()],
        "{}",
        |i| i.max_archive_bytes = 1856,
        &[
            "big uid-big: targeted finishedAt 1795773600.0",
            "held 0 deferred 0",
            r#"target uid-big "big" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"ledger {"uid-big": {"first": 1795953600.0, "name": "big"}}"#,
        ],
    );
    let over = "error: pod #1 \"big\" (uid uid-big): diagnostic archive ceiling exceeded: 1856 bytes, max_archive_bytes is 1855";
    // One byte over: the whole plan fails, even when the cap would have deferred the Pod.
    check(
        &[done("small", "2026-11-20T10:00:00Z"), big()],
        "{}",
        |i| {
            i.max_archive_bytes = 1855;
            i.max_pods = 1;
        },
        &[over],
    );
    // A held Pod is never measured.
    check(
        &[meta(
            done("held-big", RECENT),
            "annotations",
            json!({"note": "x".repeat(3000)}),
        )],
        "{}",
        |i| i.max_archive_bytes = 1024,
        &[
            "held-big uid-held-big: held finishedAt 1795950000.0 until 1796036400.0",
            "held 1 deferred 0",
            r#"ledger {"uid-held-big": {"first": 1795953600.0, "name": "held-big"}}"#,
        ],
    );
}

#[test]
fn inventory_ceiling_counts_every_pod() {
    let pods = |n: usize| -> Vec<Value> { (0..n).map(|i| done(&format!("p{i}"), DAY)).collect() };
    check(
        &pods(3),
        "{}",
        |i| {
            i.max_pods = 1;
            i.max_inventory = 2;
        },
        &["error: inventory ceiling exceeded: 3 pods, max_inventory is 2"],
    );
    // Checked before any Pod is looked at.
    let mut bad = pods(3);
    bad[0]["status"]["containerStatuses"] = json!(["oops"]);
    check(
        &bad,
        "{}",
        |i| {
            i.max_pods = 1;
            i.max_inventory = 2;
        },
        &["error: inventory ceiling exceeded: 3 pods, max_inventory is 2"],
    );
    check(
        &pods(2),
        "{}",
        |i| {
            i.max_pods = 1;
            i.max_inventory = 2;
        },
        &[
            "p0 uid-p0: targeted finishedAt 1795773600.0",
            "p1 uid-p1: deferred finishedAt 1795773600.0",
            "held 0 deferred 1",
            r#"target uid-p0 "p0" first 1795953600.0 finishedAt 1795773600.0 rv 100"#,
            r#"ledger {"uid-p0": {"first": 1795953600.0, "name": "p0"}, "uid-p1": {"first": 1795953600.0, "name": "p1"}}"#,
        ],
    );
}

#[test]
fn bad_data_fails_the_plan_only_where_the_flow_looks() {
    let malformed = json!(["oops"]);
    check(
        &[done("a", DAY), pod("b", malformed.clone())],
        "{}",
        |_| {},
        &[
            "error: pod #1 \"b\" (uid uid-b): status.containerStatuses[0]: malformed container status (not an object)",
        ],
    );
    check(
        &[
            meta(pod("elsewhere", malformed), "namespace", json!("other")),
            pod("active-first", json!([{"state": {"running": {}}}, "oops"])),
        ],
        "{}",
        |_| {},
        &[
            "elsewhere uid-elsewhere: not eligible: in another namespace",
            "active-first uid-active-first: not eligible: status.containerStatuses[0] is running",
            "held 0 deferred 0",
            "ledger {}",
        ],
    );
    let mut nameless = done("x", DAY);
    nameless["metadata"]
        .as_object_mut()
        .expect("object")
        .remove("name");
    check(
        &[nameless],
        "{}",
        |_| {},
        &["error: pod #0 (uid uid-x): metadata.name: missing"],
    );
    check(
        &[meta(done("n", DAY), "uid", json!(7))],
        "{}",
        |_| {},
        &["error: pod #0 \"n\": metadata.uid: not a string"],
    );
    check(
        &[done("naive", "2026-11-27T10:00:00")],
        "{}",
        |_| {},
        &[
            "error: pod #0 \"naive\" (uid uid-naive): status.containerStatuses[0].state.terminated.finishedAt: timestamp has no time zone: \"2026-11-27T10:00:00\"",
        ],
    );
}

/// Why each Pod is spared, as the plan's summaries count them: the protect label and the exclude
/// selector, and nothing else (a target, a held, deferred or ineligible Pod is not spared).
#[test]
fn only_protected_and_excluded_pods_say_they_are_spared() {
    let pods = [
        labelled(
            done("protected", DAY),
            json!({"gc.example.com/protect": "true"}),
        ),
        labelled(done("excluded", DAY), json!({"team": "payments"})),
        done("targeted", "2026-11-20T10:00:00Z"),
        done("deferred", DAY),
        done("held", RECENT),
        meta(done("owned", DAY), "ownerReferences", json!([{}])),
    ];
    let cfg = PodInputs {
        namespace: "work".into(),
        max_pods: 1,
        exclude_selector: Some("team in (payments)".into()),
        ..PodInputs::default()
    }
    .validate()
    .expect("valid inputs");
    let text = json!({
        "size": pods.len(),
        "metadataItems": pods.iter().map(|p| &p["metadata"]).collect::<Vec<_>>(),
        "statusItems": pods.iter().map(|p| json!({"status": p["status"]})).collect::<Vec<_>>(),
    })
    .to_string();
    let inventory =
        inventory::read(text.as_bytes(), cfg.rules(), cfg.max_inventory + 1).expect("inventory");
    let plan = plan_pods(&inventory, &PreviousLedger::default(), &cfg, NOW).expect("plan");
    let spared: Vec<(&str, Option<Spared>)> = (plan.decisions.iter())
        .map(|d| (d.name.as_deref().unwrap(), d.decision.spared()))
        .collect();
    assert_eq!(
        spared,
        [
            ("protected", Some(Spared::Protected)),
            ("excluded", Some(Spared::Excluded)),
            ("targeted", None),
            ("deferred", None),
            ("held", None),
            ("owned", None),
        ]
    );
    // Each decision is the one its name says: the cap of one took the oldest.
    let kinds: Vec<&str> = (plan.decisions.iter())
        .map(|d| match d.decision {
            Decision::NotEligible { .. } => "not eligible",
            Decision::Held { .. } => "held",
            Decision::Deferred { .. } => "deferred",
            Decision::Targeted { .. } => "targeted",
            Decision::Protected { .. } => "protected",
            Decision::Excluded { .. } => "excluded",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "protected",
            "excluded",
            "targeted",
            "deferred",
            "held",
            "not eligible"
        ]
    );
}
