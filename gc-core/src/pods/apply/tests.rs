//! The apply protocol against an in-memory cluster with Kubernetes' finalizer, precondition and
//! JSON-patch semantics, with a fault injected at every call: an error, a refusal, a crash, a
//! write whose response is lost, or someone else changing the Pod (or its archive or receipt)
//! just before the call. After a second, clean run (recover, plan afresh, apply): no Pod was
//! removed without a verified archive and receipt of its state at deletion, no pin remains, no
//! Pod that someone else made ineligible was deleted, every untouched target is collected.
//!
//! The focused tables below each pin one guard of `apply.rs`; each fails when that guard is
//! removed (see docs/mutation-testing.md).

use crate::lease::Held;
use crate::testing::{GO_ON, block_on};
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::*;
use crate::pods::ledger::PreviousLedger;
use crate::testing::pods::*;

fn ports(fake: &Fake) -> Ports<'_, Fake, Fake, Fake, Fake> {
    ports_as(fake, false, &GO_ON)
}

/// The ports of a live run (or a dry run) whose lock is lost once the fake's flag is set, asked
/// to stop by `stopping`.
fn ports_as<'f>(
    fake: &'f Fake,
    dry_run: bool,
    stopping: &'f AtomicBool,
) -> Ports<'f, Fake, Fake, Fake, Fake> {
    Ports {
        cluster: fake,
        store: fake,
        sink: fake,
        clock: fake,
        held: Held::new(&fake.1, stopping, dry_run),
        concurrency: crate::pipeline::DEFAULT_CONCURRENCY,
    }
}

/// Recovery, then apply of `targets`.
fn run(fake: &Fake, cfg: &PodConfig, targets: &[Target], dry_run: bool) -> Vec<TargetResult> {
    let ports = ports_as(fake, dry_run, &GO_ON);
    block_on(async {
        let mut results = recover(&ports, cfg).await.unwrap_or_default();
        results.extend(apply(&ports, cfg, targets).await);
        results
    })
}

/// Apply of `targets` alone.
fn apply_only(fake: &Fake, cfg: &PodConfig, targets: &[Target]) -> Vec<TargetResult> {
    block_on(apply(&ports(fake), cfg, targets))
}

/// Recovery alone.
fn recover_only(fake: &Fake, cfg: &PodConfig) -> Vec<TargetResult> {
    block_on(recover(&ports(fake), cfg)).unwrap()
}

/// `run pods`: recovery, then a fresh plan, then apply.
fn run_pods(fake: &Fake, cfg: &PodConfig) -> Vec<TargetResult> {
    let mut results = block_on(recover(&ports(fake), cfg)).unwrap_or_default();
    let targets = plan(fake, cfg);
    results.extend(block_on(apply(&ports(fake), cfg, &targets)));
    results
}

/// The number of the `nth` call (from 0) logged as `op` on `subject`, in a clean run of a
/// fresh `make()` world.
fn call_number(make: fn() -> Fake, op: &str, nth: usize) -> usize {
    call_number_in(make, &config(), op, nth, |fake, cfg, targets| {
        run(fake, cfg, targets, false);
    })
}

/// The number of the `nth` call logged as `op` when `go` runs on a fresh `make()` world.
fn call_number_in(
    make: fn() -> Fake,
    cfg: &PodConfig,
    op: &str,
    nth: usize,
    go: impl Fn(&Fake, &PodConfig, &[Target]),
) -> usize {
    let fake = make();
    let targets = plan(&fake, cfg);
    go(&fake, cfg, &targets);
    let log = fake.w().log.clone();
    log.iter()
        .enumerate()
        .filter(|(_, l)| l.as_str() == op)
        .nth(nth)
        .unwrap_or_else(|| panic!("no call {op:?} #{nth} in {log:#?}"))
        .0
        + 1
}

#[test]
fn a_clean_run_collects_every_target_and_nothing_else() {
    let (fake, cfg) = (world(), config());
    let targets = plan(&fake, &cfg);
    assert_eq!(targets.len(), 4);
    let decoys: Vec<Value> = ["decoy-unlabelled", "decoy-recent"]
        .map(|n| fake.w().pods[n].clone())
        .into();
    let results = run(&fake, &cfg, &targets, false);
    assert!(
        results
            .iter()
            .all(|r| matches!(r.outcome, TargetOutcome::Collected { .. })),
        "{results:#?}"
    );
    let w = fake.w();
    assert_eq!(
        w.pods.keys().collect::<Vec<_>>(),
        ["decoy-recent", "decoy-unlabelled"]
    );
    assert_eq!(
        vec![
            w.pods["decoy-unlabelled"].clone(),
            w.pods["decoy-recent"].clone()
        ],
        decoys
    );
    assert_eq!(invariants(&w), Ok(()));
    assert_eq!(w.receipts.len(), 4);
    for r in w.receipts.values() {
        let doc: Value = serde_json::from_slice(&w.archives[&r.uri]).unwrap();
        assert_eq!(doc["metadata"]["uid"], r.uid.as_str());
        assert_eq!(doc["metadata"]["finalizers"], json!([PIN]));
        assert_eq!(doc["retentionBasis"], "finishedAt");
    }
}

#[test]
fn a_target_protected_or_excluded_now_is_never_touched_whatever_the_plan_says() {
    let fake = world();
    // Targets planned before the labels came (as a forged plan would name them, at the Pods'
    // current resourceVersions).
    let cfg = crate::pods::config::PodInputs {
        namespace: "work".into(),
        max_pods: 10,
        exclude_selector: Some("team in (payments)".into()),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let mut targets = plan(&fake, &cfg);
    {
        let mut w = fake.w();
        w.pods.get_mut("target-0").unwrap()["metadata"]["labels"]["gc.example.com/protect"] =
            json!("true");
        w.pods.get_mut("target-1").unwrap()["metadata"]["labels"]["team"] = json!("payments");
    }
    for t in &mut targets {
        let name = t.name.as_str().unwrap().to_owned();
        t.resource_version = fake.w().pods[&name]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    let before: Vec<Value> = ["target-0", "target-1"]
        .map(|n| fake.w().pods[n].clone())
        .into();
    let results = apply_only(&fake, &cfg, &targets);
    let reason = |name: &str| {
        results
            .iter()
            .find(|r| r.name == name)
            .map(|r| match &r.outcome {
                TargetOutcome::Skipped { step, reason } => format!("{step:?}: {reason}"),
                other => short(other),
            })
    };
    assert_eq!(
        reason("target-0").as_deref(),
        Some("Reread: protected: never collected")
    );
    assert_eq!(
        reason("target-1").as_deref(),
        Some("Reread: excluded: never collected")
    );
    assert_eq!(outcome_of(&results, "target-2"), "Collected");
    let w = fake.w();
    let after: Vec<Value> = ["target-0", "target-1"].map(|n| w.pods[n].clone()).into();
    assert_eq!(after, before, "not pinned, not archived, not deleted");
    assert!(!w.receipts.contains_key("uid-target-0") && !w.receipts.contains_key("uid-target-1"));
}

#[test]
fn dry_run_writes_nothing_and_reports_what_would_happen() {
    for make in [world, leftovers] {
        let (fake, cfg) = (make(), config());
        let targets = plan(&fake, &cfg);
        let before = fake.w().pods.clone();
        let results = run(&fake, &cfg, &targets, true);
        assert!(
            results.iter().all(|r| matches!(
                r.outcome,
                TargetOutcome::WouldCollect { .. } | TargetOutcome::Released { .. }
            )),
            "{results:#?}"
        );
        let w = fake.w();
        assert_eq!(w.pods, before);
        assert!(w.archives.is_empty() && w.receipts.is_empty());
        assert_eq!(w.writes, vec![]);
    }
}

/// Every call of a clean run, for every fault and every change by someone else, in a fresh
/// namespace: then a clean `run pods`; the invariants hold.
#[test]
fn every_fault_at_every_call_is_recovered() {
    let matrix = fault_matrix(world);
    assert!(matrix >= 14 * 50, "only {matrix} cases");
}

/// The same in a namespace that a stopped run left pinned Pods in (recovery under faults).
#[test]
fn every_fault_at_every_call_with_pins_left_is_recovered() {
    let matrix = fault_matrix(leftovers);
    assert!(matrix >= 14 * 45, "only {matrix} cases");
}

/// Runs every fault at every call of a clean run of `make()`; the number of cases.
fn fault_matrix(make: fn() -> Fake) -> usize {
    let cfg = config();
    let mut matrix = 0;
    {
        let calls = {
            let fake = make();
            let targets = plan(&fake, &cfg);
            run(&fake, &cfg, &targets, false);
            fake.w().calls
        };
        let faults = FAULTS
            .into_iter()
            .chain(CHANGES.into_iter().map(Fault::Meddle));
        for fault in faults {
            for at in 1..=calls {
                let fake = make();
                let targets = plan(&fake, &cfg);
                fake.w().fault = Some((at, fault));
                let first = run(&fake, &cfg, &targets, false);
                fake.w().fault = None;
                // The next run recovers first, then plans afresh (as `run pods` does).
                let second = run_pods(&fake, &cfg);
                let w = fake.w();
                let call = w.log.get(at - 1).cloned().unwrap_or_default();
                if let Err(e) = invariants(&w) {
                    panic!(
                        "{fault:?} at call {at} ({call}): {e}\nfirst: {first:#?}\nsecond: {second:#?}"
                    );
                }
                matrix += 1;
            }
        }
    }
    matrix
}

/// An outcome in short: its kind and step (`"Changed Pin"`, `"Collected"`).
fn short(o: &TargetOutcome) -> String {
    match o {
        TargetOutcome::Collected { .. } => "Collected".into(),
        TargetOutcome::WouldCollect { .. } => "WouldCollect".into(),
        TargetOutcome::Skipped { step, .. } => format!("Skipped {step:?}"),
        TargetOutcome::Changed { step, .. } => format!("Changed {step:?}"),
        TargetOutcome::TooLarge { .. } => "TooLarge".into(),
        TargetOutcome::Released { .. } => "Released".into(),
        TargetOutcome::NotStarted { .. } => "NotStarted".into(),
        TargetOutcome::Failed { step, .. } => format!("Failed {step:?}"),
    }
}

/// The outcome of `name` in `results`, in short; `"-"` when it has none.
fn outcome_of(results: &[TargetResult], name: &str) -> String {
    results
        .iter()
        .find(|r| r.name == name)
        .map_or_else(|| "-".into(), |r| short(&r.outcome))
}

/// What became of a Pod: `"gone"`, or its finalizers and whether it is being deleted.
fn state_of(w: &World, name: &str) -> String {
    match w.pods.get(name) {
        None => "gone".into(),
        Some(p) => {
            let f: Vec<String> = finalizers(p)
                .iter()
                .map(|f| {
                    if f == PIN {
                        "pin".into()
                    } else {
                        "other".into()
                    }
                })
                .collect();
            let deleting = if is_deleting(p) { " deleting" } else { "" };
            format!("[{}]{deleting}", f.join(","))
        }
    }
}

/// A lost run lock: nothing is written once the stop flag is set, whenever it is set (before
/// the run, or after any call of it), in a fresh namespace and one with pins left.
#[test]
fn a_lost_run_lock_writes_nothing_more() {
    let cfg = config();
    for make in [world as fn() -> Fake, leftovers] {
        let calls = {
            let fake = make();
            let targets = plan(&fake, &cfg);
            run(&fake, &cfg, &targets, false);
            fake.w().calls
        };
        for after in 0..=calls {
            let fake = make();
            let targets = plan(&fake, &cfg);
            fake.w().stop_after = Some(after);
            fake.1.store(after == 0, Ordering::SeqCst);
            let results = run(&fake, &cfg, &targets, false);
            let w = fake.w();
            let late: Vec<_> = w.writes.iter().filter(|(_, _, stopped)| *stopped).collect();
            assert_eq!(
                late,
                Vec::<&(usize, String, bool)>::new(),
                "stop after call {after}: {results:#?}"
            );
            if after == 0 {
                assert!(w.writes.is_empty(), "{:?}", w.writes);
                assert!(
                    results
                        .iter()
                        .all(|r| short(&r.outcome).starts_with("Failed")),
                    "{results:#?}"
                );
            }
            drop(w);
            // The next run holds the lock again.
            fake.w().stop_after = None;
            fake.1.store(false, Ordering::SeqCst);
            let second = run_pods(&fake, &cfg);
            assert_eq!(
                invariants(&fake.w()),
                Ok(()),
                "stop after {after}: {second:#?}"
            );
        }
    }
}

/// One Pod, `target-0`, as `pod` makes it.
fn one() -> Fake {
    with_pods(vec![pod("target-0", true, OLD)])
}

/// The archive's size once `target-0` of `one()` is pinned.
fn pinned_size(cfg: &PodConfig) -> usize {
    let fake = one();
    let targets = plan(&fake, cfg);
    match &run(&fake, cfg, &targets, false)[0].outcome {
        TargetOutcome::Collected { bytes, .. } => *bytes,
        other => panic!("{other:?}"),
    }
}

/// The plan passes a Pod whose archive fits the ceiling unpinned; pinned, it is over: the pin
/// is released (fenced), nothing archived or deleted. At exactly the ceiling it is collected.
#[test]
fn too_large_after_pinning_releases_the_pin() {
    let pinned = pinned_size(&config());
    let planned = plan(&one(), &config())[0].archive_bytes;
    assert!(planned < pinned, "{planned} {pinned}");
    // (ceiling, fault at the release, outcome, the Pod after, after recovery)
    let cases: [(usize, Option<Fault>, &str, &str, &str); 5] = [
        (planned, None, "TooLarge", "[]", "[]"),
        (pinned - 1, None, "TooLarge", "[]", "[]"),
        (
            planned,
            Some(Fault::TestFailed),
            "Changed Release",
            "[pin]",
            "[]",
        ),
        (planned, Some(Fault::Lost), "Failed Release", "[]", "[]"),
        (pinned, None, "Collected", "gone", "gone"),
    ];
    for (max, fault, outcome, after, second) in cases {
        let mut cfg = config();
        cfg.max_archive_bytes = max;
        let fake = one();
        let targets = plan(&fake, &cfg);
        let release = call_number_in(one, &cfg, "patch target-0", 1, |f, c, t| {
            apply_only(f, c, t);
        });
        fake.w().fault = fault.map(|f| (release, f));
        let results = apply_only(&fake, &cfg, &targets);
        let case = format!("{max} {fault:?}: {results:#?}");
        let w = fake.w();
        assert_eq!(short(&results[0].outcome), outcome, "{case}");
        assert_eq!(state_of(&w, "target-0"), after, "{case}");
        if outcome == "TooLarge" {
            assert!(w.archives.is_empty() && w.receipts.is_empty(), "{case}");
        }
        drop(w);
        fake.w().fault = None;
        recover_only(&fake, &cfg);
        assert_eq!(state_of(&fake.w(), "target-0"), second, "{case}");
    }
}

/// Dry run of a too-large Pod: reported, nothing written.
#[test]
fn too_large_in_a_dry_run_writes_nothing() {
    let mut cfg = config();
    cfg.max_archive_bytes = plan(&one(), &cfg)[0].archive_bytes;
    let fake = one();
    let targets = plan(&fake, &cfg);
    let results = block_on(apply(&ports_as(&fake, true, &GO_ON), &cfg, &targets));
    assert_eq!(short(&results[0].outcome), "TooLarge");
    assert_eq!(fake.w().writes, vec![]);
    assert_eq!(state_of(&fake.w(), "p"), "gone");
    assert_eq!(state_of(&fake.w(), "target-0"), "[]");
}

/// Recovery of each kind of pin a stopped run can leave: a Pod being deleted and still
/// eligible is archived (as it is now) and released; any other pin is released, never anyone
/// else's finalizer.
#[test]
fn recovery_finishes_or_releases_every_pin() {
    let owned = {
        let mut p = left("p", true, &[PIN], true);
        p["metadata"]["ownerReferences"] = json!([{"kind": "Job", "name": "j", "uid": "o"}]);
        p
    };
    let recent = {
        let mut p = left("p", true, &[PIN], true);
        p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] =
            json!("2026-11-29T11:59:00Z");
        p
    };
    let protected = {
        let mut p = left("p", true, &[PIN], true);
        p["metadata"]["labels"][PROTECT] = json!("true");
        p
    };
    // (the Pod, its outcome, the Pod after, archived)
    let cases: [(Value, &str, &str, bool); 11] = [
        (left("p", false, &[PIN], false), "Released", "[]", false),
        (left("p", false, &[PIN], true), "Released", "gone", false),
        (left("p", true, &[PIN], false), "Released", "[]", false),
        (left("p", true, &[PIN], true), "Collected", "gone", true),
        // Retention does not hold a Pod that is going anyway.
        (recent, "Collected", "gone", true),
        (owned, "Released", "gone", false),
        // Protected since: never archived, and not held.
        (protected, "Released", "gone", false),
        (
            left("p", true, &[OTHER, PIN], false),
            "Released",
            "[other]",
            false,
        ),
        (
            left("p", true, &[PIN, OTHER], true),
            "Released",
            "[other] deleting",
            false,
        ),
        (
            left("p", false, &[PIN, OTHER], true),
            "Released",
            "[other] deleting",
            false,
        ),
        (
            left("p", true, &[OTHER], true),
            "-",
            "[other] deleting",
            false,
        ),
    ];
    for (pod, outcome, after, archived) in cases {
        let case = format!("{pod}");
        let fake = with_pods(vec![pod]);
        let results = recover_only(&fake, &config());
        let w = fake.w();
        assert_eq!(outcome_of(&results, "p"), outcome, "{case}: {results:#?}");
        assert_eq!(state_of(&w, "p"), after, "{case}");
        assert_eq!(w.receipts.contains_key("uid-p"), archived, "{case}");
        assert_eq!(w.violations, Vec::<String>::new(), "{case}");
        if archived {
            let r = &w.receipts["uid-p"];
            let doc: Value = serde_json::from_slice(&w.archives[&r.uri]).unwrap();
            assert_eq!(doc["metadata"]["uid"], "uid-p", "{case}");
            assert_eq!(doc["metadata"]["finalizers"], json!([PIN]), "{case}");
            assert!(!doc["metadata"]["deletionTimestamp"].is_null(), "{case}");
            assert_eq!(doc["retentionBasis"], "finishedAt", "{case}");
        }
    }
}

/// When a run cannot collect (its sink or store unusable, or the namespace outside the
/// selection), every pin is released, fenced, and nothing is archived; with `keep_deleting`, a
/// pinned Pod being deleted keeps its pin (its archive is owed) and fails at the archive step,
/// without it (a namespace outside the selection) it is released too. Someone else's finalizer stays; a dry run and a halted run
/// write nothing.
#[test]
fn release_pins_releases_every_pin_but_on_a_pod_being_deleted_when_asked() {
    let pods = || {
        vec![
            left("pinned", true, &[PIN], false),
            left("deleting", true, &[PIN], true),
            left("shared", false, &[OTHER, PIN], false),
            left("theirs", true, &[OTHER], false),
        ]
    };
    let release = |fake: &Fake, dry_run: bool, keep_deleting: bool| {
        let why = "the sink is down";
        block_on(release_pins(
            fake,
            &config(),
            Held::new(&fake.1, &GO_ON, dry_run),
            why,
            keep_deleting,
        ))
        .unwrap()
    };
    for keep_deleting in [true, false] {
        let fake = with_pods(pods());
        let results = release(&fake, false, keep_deleting);
        let w = fake.w();
        let case = format!("keep_deleting {keep_deleting}: {results:#?}");
        assert_eq!(outcome_of(&results, "pinned"), "Released", "{case}");
        assert_eq!(state_of(&w, "pinned"), "[]", "{case}");
        assert_eq!(outcome_of(&results, "shared"), "Released", "{case}");
        assert_eq!(state_of(&w, "shared"), "[other]", "{case}");
        assert_eq!(outcome_of(&results, "theirs"), "-", "{case}");
        assert_eq!(state_of(&w, "theirs"), "[other]", "{case}");
        let (outcome, after) = if keep_deleting {
            ("Failed Archive", "[pin] deleting")
        } else {
            ("Released", "gone")
        };
        assert_eq!(outcome_of(&results, "deleting"), outcome, "{case}");
        assert_eq!(state_of(&w, "deleting"), after, "{case}");
        if let Some(r) = results.iter().find(|r| r.name == "pinned") {
            let TargetOutcome::Released { reason } = &r.outcome else {
                panic!("{case}")
            };
            assert_eq!(reason, "pin released without an archive: the sink is down");
        }
        assert!(w.archives.is_empty() && w.receipts.is_empty(), "{case}");
        // Outside the selection the namespace is no longer collected: the delete someone asked
        // for goes ahead without an archive (the in-memory server flags that removal).
        let removed: Vec<&str> = w.violations.iter().map(|v| &v[..20]).collect();
        let expected: &[&str] = if keep_deleting {
            &[]
        } else {
            &["removed uid-deleting"]
        };
        assert_eq!(removed, expected, "{case}");
    }
    for halted in [false, true] {
        let fake = with_pods(pods());
        fake.1.store(halted, std::sync::atomic::Ordering::SeqCst);
        let results = release(&fake, !halted, false);
        let w = fake.w();
        assert!(w.writes.is_empty(), "{:?} {results:#?}", w.writes);
        assert_eq!(state_of(&w, "pinned"), "[pin]");
        assert_eq!(state_of(&w, "deleting"), "[pin] deleting");
    }
}

/// A release that meets a change (a controller annotates the Pod just before it) is tried again
/// at what a new list reads, so the pin does not outlive the run; a Pod that keeps changing is
/// `Changed` after three passes, left for the next run.
#[test]
fn release_pins_tries_a_changed_pod_again() {
    fn pinned() -> Fake {
        with_pods(vec![left("pinned", true, &[PIN], false)])
    }
    let cfg = config();
    let release = |fake: &Fake| {
        block_on(release_pins(
            fake,
            &cfg,
            Held::new(&fake.1, &GO_ON, false),
            "outside",
            false,
        ))
        .unwrap()
    };
    let first = call_number_in(pinned, &cfg, "patch pinned", 0, |f, _, _| {
        release(f);
    });
    let fake = pinned();
    fake.w().fault = Some((first, Fault::Meddle(Change::Annotate)));
    let results = release(&fake);
    assert_eq!(outcome_of(&results, "pinned"), "Released", "{results:#?}");
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(state_of(&fake.w(), "pinned"), "[]");
}

/// At each write, a failed `test` op or precondition (409, 422 from a test) ends the target as
/// `Changed`; a validation error (any other 422) or a timeout as `Failed`; nothing more is
/// written to that Pod; the next run finishes it.
#[test]
fn a_refused_write_is_changed_a_validation_error_is_failed() {
    // (world, recovery alone, the write and which of its kind, its Pod, its step)
    type Write = (
        fn() -> Fake,
        bool,
        &'static str,
        usize,
        &'static str,
        &'static str,
    );
    let writes: [Write; 7] = [
        (world, false, "patch target-0", 0, "target-0", "Pin"),
        (world, false, "delete target-0", 0, "target-0", "Delete"),
        (world, false, "patch target-0", 1, "target-0", "Release"),
        (
            leftovers,
            true,
            "patch target-pinned",
            0,
            "target-pinned",
            "Release",
        ),
        (
            leftovers,
            true,
            "patch kept-foreign",
            0,
            "kept-foreign",
            "Release",
        ),
        (
            leftovers,
            true,
            "delete target-deleting",
            0,
            "target-deleting",
            "Delete",
        ),
        (
            leftovers,
            true,
            "patch target-deleting",
            0,
            "target-deleting",
            "Release",
        ),
    ];
    let cfg = config();
    for (make, recovery, op, nth, name, step) in writes {
        let at = call_number(make, op, nth);
        for (fault, kind) in [
            (Fault::TestFailed, "Changed"),
            (Fault::Conflict, "Changed"),
            (Fault::Invalid, "Failed"),
            (Fault::Error, "Failed"),
        ] {
            let fake = make();
            let targets = plan(&fake, &cfg);
            fake.w().fault = Some((at, fault));
            let results = if recovery {
                recover_only(&fake, &cfg)
            } else {
                run(&fake, &cfg, &targets, false)
            };
            let case = format!("{fault:?} at {op} #{nth}: {results:#?}");
            assert_eq!(
                outcome_of(&results, name),
                format!("{kind} {step}"),
                "{case}"
            );
            let w = fake.w();
            let later = w
                .writes
                .iter()
                .filter(|(call, what, _)| *call > at && what.ends_with(&format!(" {name}")))
                .count();
            assert_eq!(later, 0, "{case}");
            drop(w);
            fake.w().fault = None;
            run_pods(&fake, &cfg);
            assert_eq!(invariants(&fake.w()), Ok(()), "{case}");
        }
    }
}

/// A fault and the call it hits, or none.
type At = Option<(usize, Fault)>;

/// Someone else's `change` to `target-0` just before the `nth` call logged as `op`.
fn meddle_at(op: &str, nth: usize, change: Change) -> At {
    Some((call_number(one, op, nth), Fault::Meddle(change)))
}

/// Each fence on its own: someone else changes the Pod (or its archive or receipt) just before
/// one step; that step notices, and the Pod is not deleted (nor written to, when the change came
/// before the pin). The calls of a clean run of `target-0`: 1 list pins, 2 get (re-read),
/// 3 patch (pin), 4 get (read back), 5 write archive, 6 read archive, 7 put receipt, 8 get
/// (fence), 9 get receipt, 10 read archive, 11 delete, 12 get (read back), 13 patch (release),
/// 14 get (gone?).
#[test]
fn each_fence_stops_a_change_by_someone_else() {
    use Change::*;
    // (what, the change and where, outcome, the Pod after the run, written to)
    let cases: [(&str, At, &str, &str, bool); 27] = [
        ("clean", None, "Collected", "gone", true),
        // Re-read: the resourceVersion the plan reviewed.
        (
            "status before the re-read",
            meddle_at("get target-0", 0, Status),
            "Changed Reread",
            "[]",
            false,
        ),
        (
            "relabelled before the re-read",
            meddle_at("get target-0", 0, Relabel),
            "Changed Reread",
            "[]",
            false,
        ),
        (
            "protected before the re-read",
            meddle_at("get target-0", 0, Protect),
            "Changed Reread",
            "[]",
            false,
        ),
        (
            "replaced before the re-read",
            meddle_at("get target-0", 0, Replace),
            "Skipped Reread",
            "[]",
            false,
        ),
        // The pin patch's test ops: the change between the re-read and the pin.
        (
            "status before the pin",
            meddle_at("patch target-0", 0, Status),
            "Changed Pin",
            "[]",
            false,
        ),
        (
            "finalizer before the pin",
            meddle_at("patch target-0", 0, Finalizer),
            "Changed Pin",
            "[other]",
            false,
        ),
        (
            "relabelled before the pin",
            meddle_at("patch target-0", 0, Relabel),
            "Changed Pin",
            "[]",
            false,
        ),
        (
            "replaced before the pin",
            meddle_at("patch target-0", 0, Replace),
            "Changed Pin",
            "[]",
            false,
        ),
        // The pin's read-back.
        (
            "relabelled after the pin",
            meddle_at("get target-0", 1, Relabel),
            "Changed Pin",
            "[]",
            true,
        ),
        // Labels changed after the pin: the Pod archived and deleted carries the labels it was
        // judged by, so it is left alone and the pin released at once.
        (
            "protected after the pin",
            meddle_at("get target-0", 1, Protect),
            "Changed Pin",
            "[]",
            true,
        ),
        // An annotation (a controller replying to the pin) changes nothing judged.
        (
            "annotated after the pin",
            meddle_at("get target-0", 1, Annotate),
            "Collected",
            "gone",
            true,
        ),
        (
            "finalizer after the pin",
            meddle_at("get target-0", 1, Finalizer),
            "Failed Pin",
            "[pin,other]",
            true,
        ),
        (
            "unpinned after the pin",
            meddle_at("get target-0", 1, Unpin),
            "Failed Pin",
            "[]",
            true,
        ),
        (
            "replaced after the pin",
            meddle_at("get target-0", 1, Replace),
            "Failed Pin",
            "[]",
            true,
        ),
        // The pre-delete fence.
        (
            "status before the fence",
            meddle_at("get target-0", 2, Status),
            "Skipped Fence",
            "[pin]",
            true,
        ),
        (
            "relabelled before the fence",
            meddle_at("get target-0", 2, Relabel),
            "Changed Fence",
            "[]",
            true,
        ),
        (
            "protected before the fence",
            meddle_at("get target-0", 2, Protect),
            "Changed Fence",
            "[]",
            true,
        ),
        (
            "annotated before the fence",
            meddle_at("get target-0", 2, Annotate),
            "Collected",
            "gone",
            true,
        ),
        (
            "finalizer before the fence",
            meddle_at("get target-0", 2, Finalizer),
            "Failed Fence",
            "[pin,other]",
            true,
        ),
        (
            "receipt before the fence",
            meddle_at("get target-0", 2, Receipt),
            "Failed Fence",
            "[pin]",
            true,
        ),
        (
            "archive before the fence",
            meddle_at("get target-0", 2, Archive),
            "Failed Fence",
            "[pin]",
            true,
        ),
        (
            "unpinned before the fence",
            meddle_at("get target-0", 2, Unpin),
            "Failed Fence",
            "[]",
            true,
        ),
        // After the delete: the Pod is going; nothing else is written to another Pod.
        (
            "replaced after the delete",
            meddle_at("get target-0", 3, Replace),
            "Failed Delete",
            "[]",
            true,
        ),
        // The delete's read-back: released now, the Pod would go with a stale archive.
        (
            "status after the delete",
            meddle_at("get target-0", 3, Status),
            "Skipped Delete",
            "[pin] deleting",
            true,
        ),
        (
            "replaced after the release",
            meddle_at("get target-0", 4, Replace),
            "Collected",
            "[]",
            true,
        ),
        (
            "lingering after the release",
            None,
            "Failed VerifyGone",
            "[] deleting",
            true,
        ),
    ];
    let cfg = config();
    for (what, fault, outcome, after, written) in cases {
        let fake = one();
        let targets = plan(&fake, &cfg);
        fake.w().fault = fault;
        fake.w().linger = what.starts_with("lingering");
        let results = run(&fake, &cfg, &targets, false);
        let w = fake.w();
        let case = format!("{what}: {results:#?}");
        assert_eq!(outcome_of(&results, "target-0"), outcome, "{case}");
        assert_eq!(state_of(&w, "target-0"), after, "{case}");
        assert_eq!(!w.writes.is_empty(), written, "{case}: {:?}", w.writes);
        assert_eq!(w.violations, Vec::<String>::new(), "{case}");
        drop(w);
        if fake.w().linger {
            // The server finishes the graceful deletion.
            fake.w().remove("target-0");
        }
        fake.w().fault = None;
        run_pods(&fake, &cfg);
        assert_eq!(invariants(&fake.w()), Ok(()), "{case}");
    }
}

/// Gone is checked at once after the release, then after waits that double, for at most
/// `SETTLE_SECONDS` in all: a Pod the server removes a little later is collected without waiting
/// the whole bound; one that stays fails after exactly the bound.
#[test]
fn verify_gone_waits_with_backoff_up_to_the_bound() {
    let cfg = config();
    for (gone_after, outcome, slept) in [
        (Some(0.0), "Collected", 0.0),
        (Some(0.05), "Collected", 0.05),
        (Some(0.3), "Collected", 0.35),
        (Some(1.9), "Collected", SETTLE_SECONDS),
        (None, "Failed VerifyGone", SETTLE_SECONDS),
    ] {
        let fake = one();
        let targets = plan(&fake, &cfg);
        fake.w().linger = gone_after != Some(0.0);
        fake.w().gone_after_sleeping = gone_after;
        let results = apply_only(&fake, &cfg, &targets);
        let w = fake.w();
        assert_eq!(
            short(&results[0].outcome),
            outcome,
            "{gone_after:?}: {results:#?}"
        );
        assert!(
            (w.slept - slept).abs() < 1e-9,
            "{gone_after:?}: slept {}",
            w.slept
        );
    }
}

/// Retention is checked again at apply, against apply's clock (a plan made by a clock that runs
/// ahead): a target whose anchor is not yet `retention` old is left alone; one exactly that old
/// is collected.
#[test]
fn retention_is_checked_again_at_apply() {
    let cfg = config();
    let anchor = plan(&one(), &cfg)[0].end.seconds();
    let retention = f64::from(cfg.retention_seconds);
    for (now, outcome, after) in [
        (anchor + retention, "Collected", "gone"),
        (anchor + retention + 1.0, "Collected", "gone"),
        (anchor + retention - 1.0, "Skipped Reread", "[]"),
        (anchor + 1.0, "Skipped Reread", "[]"),
        (anchor - DAY, "Skipped Reread", "[]"),
    ] {
        let fake = one();
        let targets = plan(&fake, &cfg);
        fake.w().now = now;
        let results = apply_only(&fake, &cfg, &targets);
        let w = fake.w();
        assert_eq!(
            short(&results[0].outcome),
            outcome,
            "now {now}: {results:#?}"
        );
        assert_eq!(state_of(&w, "target-0"), after, "now {now}");
        assert_eq!(w.writes.is_empty(), after != "gone", "now {now}");
    }
}

/// A Pod without `finishedAt` is held from its first observation: a plan file cannot move it
/// earlier than recorded (the store's ledger, a ledger file apply was given: the latest wins),
/// nor supply one nothing records (then retention runs from the apply).
#[test]
fn a_plan_cannot_move_the_first_observation_earlier_than_recorded() {
    let cfg = config();
    let unfinished = || {
        let mut p = pod("target-0", true, OLD);
        p["status"]["containerStatuses"][0]["state"]["terminated"]
            .as_object_mut()
            .unwrap()
            .remove("finishedAt");
        with_pods(vec![p])
    };
    let ledger = |first: f64| {
        PreviousLedger::parse(
            json!({"uid-target-0": {"first": first, "name": "target-0"}})
                .to_string()
                .as_bytes(),
        )
        .unwrap()
    };
    // A plan (forged, or older than the records) naming target-0 first observed at `first`.
    let target = |fake: &Fake, first: f64| Target {
        name: json!("target-0"),
        uid: "uid-target-0".into(),
        first: PyNum::Float(first),
        basis: Basis::ObservedFailed,
        end: PyNum::Float(first),
        resource_version: fake.w().pods["target-0"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned(),
        archive_bytes: 0,
    };
    let (old, recent) = (NOW - 10.0 * DAY, NOW - 60.0);
    // (the plan's first observation, the store's, the file's, the outcome)
    for (planned, stored, file, outcome) in [
        (old, Some(recent), None, "Skipped Reread"),
        (old, Some(old), None, "Collected"),
        (old, None, Some(old), "Collected"),
        (old, None, Some(recent), "Skipped Reread"),
        (old, Some(old), Some(recent), "Skipped Reread"),
        (old, Some(recent), Some(old), "Skipped Reread"),
        // Recorded nowhere: the plan's value is not taken.
        (old, None, None, "Skipped Reread"),
        // Recorded earlier than the plan says does not shorten the hold either.
        (recent, Some(old), Some(old), "Skipped Reread"),
    ] {
        let fake = unfinished();
        assert!(
            plan(&fake, &cfg).is_empty(),
            "a first observation now is held"
        );
        fake.w().now = NOW;
        let targets = [target(&fake, planned)];
        if let Some(first) = stored {
            fake.w().ledger = ledger(first);
        }
        let file = file.map(ledger);
        let stopping = AtomicBool::new(false);
        let results = block_on(apply_until(
            &ports_as(&fake, false, &stopping),
            &cfg,
            &targets,
            file.as_ref(),
        ));
        let case = format!("plan {planned}, store {stored:?}, file {file:?}: {results:#?}");
        assert_eq!(short(&results[0].outcome), outcome, "{case}");
        if outcome != "Collected" {
            assert!(fake.w().writes.is_empty(), "{case}");
        }
    }
    // Nor earlier than the Pod's creation, whatever every record says; a creation before the
    // first observation moves nothing.
    for (created, first, outcome) in [
        ("2026-11-29T11:59:00Z", old, "Skipped Reread"),
        (OLD, old, "Collected"),
        (OLD, recent, "Skipped Reread"),
    ] {
        let fake = unfinished();
        fake.w().pods.get_mut("target-0").unwrap()["metadata"]["creationTimestamp"] =
            json!(created);
        fake.w().ledger = ledger(first);
        fake.w().now = NOW;
        let results = apply_only(&fake, &cfg, &[target(&fake, first)]);
        assert_eq!(
            short(&results[0].outcome),
            outcome,
            "created {created}: {results:#?}"
        );
    }
}

/// A target that apply's own policy does not find eligible (a plan made under another label, or
/// of a Pod that was never a target) is skipped at the re-read, before any write, even at the
/// planned resourceVersion.
#[test]
fn a_target_not_eligible_under_apply_policy_is_not_written() {
    let cfg = config();
    let owned = {
        let mut p = pod("target-0", true, OLD);
        p["metadata"]["ownerReferences"] = json!([{"kind": "Job", "name": "j", "uid": "o"}]);
        p
    };
    let running = {
        let mut p = pod("target-0", true, OLD);
        p["status"]["containerStatuses"][0]["state"] = json!({"running": {}});
        p
    };
    let planned = plan(&one(), &cfg);
    for (what, p) in [
        ("unlabelled", pod("target-0", false, OLD)),
        ("owned", owned),
        ("running", running),
        ("foreign finalizer", left("target-0", true, &[OTHER], false)),
    ] {
        let fake = with_pods(vec![p]);
        let results = apply_only(&fake, &cfg, &planned);
        let w = fake.w();
        assert_eq!(
            short(&results[0].outcome),
            "Skipped Reread",
            "{what}: {results:#?}"
        );
        assert_eq!(w.writes, vec![], "{what}");
    }
}

/// Recovery finishing a Pod: it binds no resourceVersion and no retention (the Pod is going),
/// but re-checks eligibility at every step; someone else's change between its steps is caught.
#[test]
fn recovery_rechecks_a_pod_it_finishes() {
    use Change::*;
    let make = || with_pods(vec![left("p", true, &[PIN], true)]);
    let at = |op: &str, nth: usize| {
        let fake = make();
        recover_only(&fake, &config());
        let log = fake.w().log.clone();
        1 + log
            .iter()
            .enumerate()
            .filter(|(_, l)| l.as_str() == op)
            .nth(nth)
            .unwrap_or_else(|| panic!("{op} {nth}: {log:?}"))
            .0
    };
    // Calls: 1 list, 2 get (finish), 3 get (re-read), 4 write, 5 read, 6 receipt, 7 get
    // (fence), 8 get receipt, 9 read, 10 delete, 11 get, 12 patch (release), 13 get.
    let cases: [(&str, At, &str, &str); 8] = [
        ("clean", None, "Collected", "gone"),
        (
            "status before the finish",
            Some((at("get p", 0), Fault::Meddle(Status))),
            "Collected",
            "gone",
        ),
        (
            "replaced before the finish",
            Some((at("get p", 0), Fault::Meddle(Replace))),
            "Skipped Reread",
            "[]",
        ),
        (
            "relabelled before the re-read",
            Some((at("get p", 1), Fault::Meddle(Relabel))),
            "Skipped Reread",
            "[pin] deleting",
        ),
        (
            "replaced before the re-read",
            Some((at("get p", 1), Fault::Meddle(Replace))),
            "Skipped Reread",
            "[]",
        ),
        (
            "relabelled before the fence",
            Some((at("get p", 2), Fault::Meddle(Relabel))),
            "Changed Fence",
            "[pin] deleting",
        ),
        (
            "status before the fence",
            Some((at("get p", 2), Fault::Meddle(Status))),
            "Skipped Fence",
            "[pin] deleting",
        ),
        (
            "status after the delete",
            Some((at("get p", 3), Fault::Meddle(Status))),
            "Skipped Delete",
            "[pin] deleting",
        ),
    ];
    for (what, fault, outcome, after) in cases {
        let fake = make();
        fake.w().fault = fault;
        let results = recover_only(&fake, &config());
        let case = format!("{what}: {results:#?}");
        assert_eq!(outcome_of(&results, "p"), outcome, "{case}");
        assert_eq!(state_of(&fake.w(), "p"), after, "{case}");
        assert_eq!(fake.w().violations, Vec::<String>::new(), "{case}");
        if after == "[]" {
            // Replaced: nothing was written to the new Pod.
            assert_eq!(fake.w().writes, vec![], "{case}");
        }
        // The next recovery finishes or releases it.
        fake.w().fault = None;
        recover_only(&fake, &config());
        assert_eq!(invariants(&fake.w()), Ok(()), "{case}");
        assert!(
            fake.w().pods.values().all(|p| uid_of(p) != "uid-p"),
            "{case}"
        );
    }
}

/// The patches start with their `test` ops, exactly: uid, resourceVersion and phase (and, for
/// the release, the whole finalizer list), then the one change.
#[test]
fn patches_start_with_their_test_ops() {
    let tests = |uid: &str, rv: &str| {
        vec![
            json!({"op": "test", "path": "/metadata/uid", "value": uid}),
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}),
            json!({"op": "test", "path": "/status/phase", "value": "Failed"}),
        ]
    };
    let parse = |b: Vec<u8>| serde_json::from_slice::<Value>(&b).unwrap();
    let mut pin = tests("u-1", "7");
    pin.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [PIN]}));
    assert_eq!(parse(pin_patch("u-1", "7", PIN)), json!(pin));
    for (list, at) in [
        (vec![json!(PIN)], Some(0)),
        (vec![json!(OTHER), json!(PIN)], Some(1)),
        (vec![json!(OTHER)], None),
    ] {
        let mut release = tests("u-2", "9");
        release.push(json!({"op": "test", "path": "/metadata/finalizers", "value": list}));
        if let Some(i) = at {
            release.push(json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")}));
        }
        assert_eq!(parse(release_patch("u-2", "9", &list, PIN)), json!(release));
    }
}

/// Pins are found on every page of the metadata list; an expired continue token restarts the
/// list (no Pod twice), three times at most, then the list fails and recovery with it.
#[test]
fn pins_are_found_on_every_page() {
    let cfg = config();
    let pods = || {
        let mut pods: Vec<Value> = (0..5)
            .map(|i| left(&format!("kept-{i}"), false, &[PIN], false))
            .collect();
        pods.push(pod("a-unpinned", true, OLD));
        pods.push(left("b-foreign", true, &[OTHER], false));
        with_pods(pods)
    };
    for expire in 0..=4 {
        let fake = pods();
        fake.w().page = 2;
        fake.w().expire = expire;
        let found = block_on(pinned_pods(&fake, &cfg));
        if expire > 3 {
            assert_eq!(found, Err(ClusterError::Expired));
            fake.w().expire = expire;
            assert!(block_on(recover(&ports(&fake), &cfg)).is_err());
            continue;
        }
        let names: Vec<String> = found.unwrap().into_iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            ["kept-0", "kept-1", "kept-2", "kept-3", "kept-4"],
            "{expire}"
        );
    }
    let fake = pods();
    fake.w().page = 3;
    let first = &block_on(pinned_pods(&fake, &cfg)).unwrap()[0];
    assert_eq!(
        first,
        &PinnedPod {
            name: "kept-0".into(),
            uid: "uid-kept-0".into(),
            resource_version: "1".into(),
            finalizers: vec![json!(PIN)],
            deleting: false,
        }
    );
}

/// Which outcomes fail the run: a failed step, and an archive over the ceiling.
#[test]
fn failures_are_failed_steps_and_too_large_archives() {
    let step = Step::Pin;
    for (o, failure) in [
        (failed(step, "x"), true),
        (TargetOutcome::TooLarge { bytes: 2, max: 1 }, true),
        (skipped(step, "x"), false),
        (
            TargetOutcome::Changed {
                step,
                message: "x".into(),
            },
            false,
        ),
        (TargetOutcome::Released { reason: "x".into() }, false),
        (
            TargetOutcome::Collected {
                uri: "u".into(),
                sha256: "s".into(),
                bytes: 1,
            },
            false,
        ),
        (
            TargetOutcome::WouldCollect {
                sha256: "s".into(),
                bytes: 1,
            },
            false,
        ),
    ] {
        assert_eq!(o.is_failure(), failure, "{o:?}");
    }
}

/// Recovery releases with the resourceVersion and finalizers it read last, not those of the
/// list: a change between the list and its read does not leave the pin.
#[test]
fn recovery_releases_with_what_it_read_last() {
    // (the Pod, the change before recovery reads it, the Pod after)
    let cases = [
        (left("p", true, &[PIN], true), Change::Relabel, "gone"),
        (
            left("p", false, &[PIN, OTHER], true),
            Change::Unhold,
            "gone",
        ),
        (
            left("p", false, &[PIN, OTHER], true),
            Change::Status,
            "[other] deleting",
        ),
    ];
    for (p, change, after) in cases {
        let case = format!("{change:?} {p}");
        let fake = with_pods(vec![p]);
        fake.w().fault = Some((2, Fault::Meddle(change)));
        let results = recover_only(&fake, &config());
        assert_eq!(fake.w().log[1], "get p", "{case}");
        assert_eq!(
            outcome_of(&results, "p"),
            "Released",
            "{case}: {results:#?}"
        );
        assert_eq!(state_of(&fake.w(), "p"), after, "{case}");
        assert_eq!(invariants(&fake.w()), Ok(()), "{case}");
    }
}

/// Asked to stop (a process told to stop), an apply starts no target and fails none, so the run
/// is not a failure; a lost lock as well still fails what is left.
#[test]
fn asked_to_stop_starts_no_target_and_fails_none_unless_the_lock_is_lost() {
    let cfg = config();
    for lost in [false, true] {
        let fake = world();
        let targets = plan(&fake, &cfg);
        assert!(targets.len() > 1);
        fake.1.store(lost, Ordering::SeqCst);
        let stopping = AtomicBool::new(true);
        let results = block_on(apply_until(
            &ports_as(&fake, false, &stopping),
            &cfg,
            &targets,
            None,
        ));
        let outcomes: Vec<String> = results.iter().map(|r| short(&r.outcome)).collect();
        let expected = if lost { "Failed" } else { "NotStarted" };
        assert!(
            outcomes.iter().all(|o| o.starts_with(expected)),
            "lost {lost}: {results:#?}"
        );
        assert!(
            fake.w().writes.is_empty(),
            "lost {lost}: {:?}",
            fake.w().writes
        );
        assert_eq!(results.len(), targets.len());
    }
}
