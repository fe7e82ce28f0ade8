//! One collection over fake ports: the deletes it sends, fenced, the audit records, the
//! stops (a lost lock, the caller's shutdown) and the kinds it scans.

use super::*;
use crate::lease::Held;
use crate::ports::{Page, RetainedVolume};
use crate::sessions::SessionInputs;
use crate::sessions::volumes::RETAINED_ANNOTATION;
use crate::testing::{
    Kept, SessionObjects as Fake, SessionTable as Db, block_on, session_config as cfg,
    session_object as object, session_objects as fake,
};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// The deletes of session e's Deployment and `Session`, with `dry_run`.
fn session_e(dry_run: bool) -> [(String, bool); 2] {
    [
        ("e-Deployment".to_owned(), dry_run),
        ("e-Session".to_owned(), dry_run),
    ]
}

/// A run's proof of its lock (lost once the first flag is set, asked to stop by the second),
/// or a dry run's.
fn go_on(flags: &[AtomicBool; 2], dry_run: bool) -> Held<'_> {
    Held::new(&flags[0], &flags[1], dry_run)
}

/// One run over `f` with a table holding sessions a to d, the flags of [`Held`] as given.
fn run_over(f: &Fake, dry_run: bool, lock_lost: bool, stopping: bool) -> SessionReport {
    run_keeping(f, &Kept::default(), dry_run, lock_lost, stopping)
}

/// [`run_over`], the manifests kept in `kept`.
fn run_keeping(
    f: &Fake,
    kept: &Kept,
    dry_run: bool,
    lock_lost: bool,
    stopping: bool,
) -> SessionReport {
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let flags = [AtomicBool::new(lock_lost), AtomicBool::new(stopping)];
    let keep = kept.keep();
    block_on(run(
        f,
        &db,
        keep,
        &cfg(),
        1_795_953_600.0,
        go_on(&flags, dry_run),
    ))
    .unwrap()
}

/// One run over `f` keeping to `kept`, its lock lost once `lost` is raised.
fn run_stopped(f: &Fake, kept: &Kept, lost: &AtomicBool) -> SessionReport {
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let stopping = AtomicBool::new(false);
    let stop = (lost, &stopping);
    block_on(run(
        f,
        &db,
        kept.keep(),
        &cfg(),
        1_795_953_600.0,
        Held::new(stop.0, stop.1, false),
    ))
    .unwrap()
}

/// One run over the fake cluster with a table holding sessions a to d.
fn run_once(dry_run: bool, lock_lost: bool) -> (Fake, SessionReport) {
    let f = fake(false);
    let report = run_over(&f, dry_run, lock_lost, false);
    (f, report)
}

/// The text of each delete's result.
fn results(report: &SessionReport) -> Vec<String> {
    report
        .records
        .iter()
        .filter_map(|r| Some(r.result.as_ref()?.to_string()))
        .collect()
}

#[test]
fn deletes_orphans_and_audits_every_decision() {
    let (f, report) = run_once(false, false);
    assert_eq!(*f.deleted.lock().unwrap(), session_e(false));
    assert_eq!(report.records.len(), 10);
    assert_eq!(report.lookups, 1);
    let line = serde_json::to_string(&report.records.iter().find(|r| r.result.is_some()).unwrap())
        .unwrap();
    assert!(
        line.contains(r#""decision":"delete""#)
            && line.contains(r#""session":"e""#)
            && line.contains(r#""dryRun":false"#),
        "{line}"
    );
}

#[test]
fn a_lost_lock_deletes_nothing_more_and_fails() {
    let lost = "failed: not deleted: the run lock was lost";
    // Lost, and (as a lost lock also stops the run) asked to stop: a failure either way.
    for stopping in [false, true] {
        let f = fake(false);
        let report = run_over(&f, false, true, stopping);
        assert!(f.deleted.lock().unwrap().is_empty());
        assert_eq!(report.failures, 2);
        assert_eq!(results(&report), [lost, lost]);
    }
}

#[test]
fn a_run_asked_to_stop_starts_no_other_delete_and_does_not_fail() {
    let not_started = "not started: the process is stopping; the next run judges it again";
    let f = fake(false);
    let report = run_over(&f, false, false, true);
    assert!(f.deleted.lock().unwrap().is_empty());
    assert_eq!(report.failures, 0);
    assert_eq!(results(&report), [not_started, not_started]);
    // Asked while deleting: the delete sent stands, the next is not started.
    let stopping = Arc::new(AtomicBool::new(false));
    let f = Fake {
        raise: Some(Arc::clone(&stopping)),
        ..fake(false)
    };
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let lost = AtomicBool::new(false);
    let stop = (&lost, &stopping);
    let kept = Kept::default();
    let report = block_on(run(
        &f,
        &db,
        kept.keep(),
        &cfg(),
        1_795_953_600.0,
        Held::new(stop.0, stop.1, false),
    ))
    .unwrap();
    assert_eq!(*f.deleted.lock().unwrap(), session_e(false)[..1]);
    assert_eq!(report.failures, 0);
    assert_eq!(results(&report), ["deleted", not_started]);
}

#[test]
fn only_a_failed_delete_is_a_failure() {
    let check = |result: DeleteResult, text: &str, failure: bool| {
        assert_eq!(result.to_string(), text);
        assert_eq!(result.is_failure(), failure, "{text}");
        assert_eq!(serde_json::to_value(&result).unwrap(), text);
    };
    check(DeleteResult::Deleted, "deleted", false);
    check(DeleteResult::WouldDelete, "would delete", false);
    check(
        DeleteResult::Changed,
        "changed: skipped, re-checked next run",
        false,
    );
    check(DeleteResult::Failed("503".into()), "failed: 503", true);
    check(
        DeleteResult::NotStarted("stopping".into()),
        "not started: stopping",
        false,
    );
}

#[test]
fn dry_run_sends_the_same_deletes_in_dry_run() {
    let (f, report) = run_once(true, false);
    assert_eq!(*f.deleted.lock().unwrap(), session_e(true));
    assert!(
        report
            .records
            .iter()
            .filter_map(|r| r.result.as_ref())
            .all(|r| *r == DeleteResult::WouldDelete)
    );
}

#[test]
fn a_database_error_or_an_empty_table_deletes_nothing() {
    let f = fake(false);
    let down = Db(
        Err(StoreError::Unavailable("connection refused".into())),
        Mutex::new(0),
    );
    let flags = Default::default();
    let kept = Kept::default();
    assert!(matches!(
        block_on(run(
            &f,
            &down,
            kept.keep(),
            &cfg(),
            1_795_953_600.0,
            go_on(&flags, false)
        )),
        Err(SessionRunError::Database(_))
    ));
    let empty = Db(Ok(vec![]), Mutex::new(0));
    let err = block_on(run(
        &f,
        &empty,
        kept.keep(),
        &cfg(),
        1_795_953_600.0,
        go_on(&flags, false),
    ))
    .unwrap_err();
    assert!(
        matches!(
            err,
            SessionRunError::Plan(SessionPlanError::MassDeletion { .. })
        ),
        "{err}"
    );
    assert!(f.deleted.lock().unwrap().is_empty());
}

#[test]
fn plan_judges_like_run_and_deletes_nothing() {
    let f = fake(false);
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let planned = block_on(plan(&f, &db, &cfg(), 1_795_953_600.0)).unwrap();
    let due: Vec<_> = planned.plan.deletes().map(|r| r.name.as_str()).collect();
    assert_eq!(due, ["e-Deployment", "e-Session"]);
    assert_eq!(planned.lookups, 1);
    assert!(f.deleted.lock().unwrap().is_empty());
}

#[test]
fn a_missing_definition_is_reported_not_fatal() {
    let f = fake(true);
    let report = run_over(&f, false, false, false);
    assert_eq!(report.missing_kinds, ["stream.space/v1alpha1 Session"]);
    assert_eq!(
        *f.deleted.lock().unwrap(),
        [("e-Deployment".to_owned(), false)]
    );
}

/// A cluster with StreamSpace's `Session` definition under both of its groups: each group's
/// objects are listed with their own `apiVersion` and deleted as that kind.
#[test]
fn sessions_of_both_groups_are_scanned_and_deleted_as_their_own_kind() {
    struct TwoGroups(Mutex<Vec<String>>);
    #[async_trait]
    impl ObjectCluster for TwoGroups {
        async fn list_metadata(
            &self,
            kind: &Kind,
            _: &str,
            _: &str,
            _: u32,
            _: Option<&str>,
        ) -> Result<Page, ClusterError> {
            let items = match (kind.group.as_str(), kind.kind.as_str()) {
                (group @ ("stream.space" | "stream.streamspace.io"), "Session") => {
                    let name = format!("gone-{group}");
                    vec![json!({"metadata": {
                        "name": name, "uid": format!("uid-{group}"), "resourceVersion": "1",
                        "creationTimestamp": "2026-11-01T00:00:00Z",
                        "labels": {"app": "streamspace-session", "session": "gone"},
                    }})]
                }
                _ => Vec::new(),
            };
            Ok(Page {
                text: json!({ "items": items }).to_string().into_bytes(),
                continue_token: None,
            })
        }
        async fn get_object(
            &self,
            kind: &Kind,
            _: &str,
            name: &str,
        ) -> Result<Option<Vec<u8>>, ClusterError> {
            let group = &kind.group;
            let object = json!({"metadata": {
                "name": name, "uid": format!("uid-{group}"), "resourceVersion": "1",
            }});
            Ok(Some(object.to_string().into_bytes()))
        }
        async fn delete_object(
            &self,
            kind: &Kind,
            _: &str,
            name: &str,
            _: &Preconditions,
            _: bool,
        ) -> Result<(), ClusterError> {
            self.0
                .lock()
                .unwrap()
                .push(format!("{}/{name}", kind.api_version()));
            Ok(())
        }
    }
    let cluster = TwoGroups(Mutex::new(Vec::new()));
    let cfg = SessionInputs {
        guard_floor: 10,
        override_guard: true,
        ..SessionInputs::default()
    }
    .validate()
    .unwrap();
    let db = Db(Ok(Vec::new()), Mutex::new(0));
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    let kept = Kept::default();
    let report = block_on(run(
        &cluster,
        &db,
        kept.keep(),
        &cfg,
        1_800_000_000.0,
        go_on(&flags, false),
    ))
    .unwrap();
    assert!(report.missing_kinds.is_empty());
    let versions: Vec<&str> = report
        .records
        .iter()
        .map(|r| r.judged.resource.api_version.as_str())
        .collect();
    assert_eq!(
        versions,
        ["stream.space/v1alpha1", "stream.streamspace.io/v1alpha1"]
    );
    assert_eq!(
        *cluster.0.lock().unwrap(),
        [
            "stream.space/v1alpha1/gone-stream.space",
            "stream.streamspace.io/v1alpha1/gone-stream.streamspace.io",
        ]
    );
}

/// A live delete is sent only after its manifest was archived, read back, verified and receipted;
/// the audit record names the archive.
#[test]
fn each_delete_follows_its_archive_and_receipt() {
    let (f, kept) = (fake(false), Kept::default());
    let report = run_keeping(&f, &kept, false, false, false);
    assert_eq!(*f.deleted.lock().unwrap(), session_e(false));
    let receipts = kept.receipts.lock().unwrap();
    let named: Vec<_> = receipts
        .iter()
        .map(|r| (r.name.as_str(), r.kind()))
        .collect();
    assert_eq!(
        named,
        [("e-Deployment", "Deployment"), ("e-Session", "Session")]
    );
    let archives = kept.archives.lock().unwrap();
    for r in receipts.iter() {
        let bytes = &archives[&r.uri];
        assert_eq!(r.mismatch(bytes), None);
        let doc: Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(doc["archivedFrom"]["uid"], r.uid.as_str());
        assert_eq!(doc["archivedFrom"]["session"], "e");
        assert_eq!(doc["manifest"]["metadata"]["labels"]["session"], "e");
        assert!(doc["manifest"]["metadata"].get("uid").is_none());
        let session = r.session.as_ref().unwrap();
        assert_eq!(
            (session.session.as_deref(), session.run_at.as_str()),
            (Some("e"), "2026-11-29T12:00:00Z")
        );
    }
    let uris: Vec<_> = report
        .records
        .iter()
        .filter_map(|r| r.archive.clone())
        .collect();
    let receipted: Vec<_> = receipts.iter().map(|r| r.uri.clone()).collect();
    assert_eq!(uris, receipted);
}

/// A dry run reads and builds every manifest, writes none, and deletes in dry run.
#[test]
fn a_dry_run_archives_nothing() {
    let (f, kept) = (fake(false), Kept::default());
    let report = run_keeping(&f, &kept, true, false, false);
    assert_eq!(*f.deleted.lock().unwrap(), session_e(true));
    assert!(kept.archives.lock().unwrap().is_empty());
    assert!(kept.receipts.lock().unwrap().is_empty());
    assert!(report.records.iter().all(|r| r.archive.is_none()));
}

/// No archive, no readable archive, or no receipt: no delete, and the run fails.
#[test]
fn no_verified_archive_and_receipt_no_delete() {
    for (kept, why) in [
        (
            Kept {
                refuse_archives: true,
                ..Kept::default()
            },
            "failed: not deleted: cannot archive its manifest: store unavailable: read-only",
        ),
        (
            Kept {
                tampered: true,
                ..Kept::default()
            },
            "does not match its receipt",
        ),
        (
            Kept {
                refuse_receipts: true,
                ..Kept::default()
            },
            "no receipt of archive mem://",
        ),
    ] {
        let f = fake(false);
        let report = run_keeping(&f, &kept, false, false, false);
        assert!(f.deleted.lock().unwrap().is_empty(), "{why}");
        let results = results(&report);
        assert!(results[0].contains(why), "{why}: {results:?}");
        // A store or sink found unavailable is not asked again: what follows is not started.
        if kept.tampered {
            assert_eq!(report.failures, 2, "{why}");
            assert!(results[1].contains(why), "{why}: {results:?}");
        } else {
            assert_eq!(report.failures, 1, "{why}");
            assert!(
                results[1].starts_with("not started: store unavailable: ")
                    && results[1].ends_with(", earlier in this run: the next run judges it again"),
                "{why}: {results:?}"
            );
        }
        if !kept.refuse_receipts {
            assert!(kept.receipts.lock().unwrap().is_empty(), "{why}");
        }
    }
}

/// An object that changed between its list and its archive is neither archived nor deleted: the
/// next run judges it again.
#[test]
fn an_object_changed_before_its_archive_is_left_alone() {
    let f = Fake {
        changed_to: Some("8"),
        ..fake(false)
    };
    let kept = Kept::default();
    let report = run_keeping(&f, &kept, false, false, false);
    assert!(f.deleted.lock().unwrap().is_empty());
    assert!(kept.archives.lock().unwrap().is_empty());
    assert_eq!(report.failures, 0);
    let changed = DeleteResult::Changed.to_string();
    assert_eq!(results(&report), [changed.clone(), changed]);
}

/// The objects to delete are read ahead by lists (a list per kind for many sessions), not by a
/// GET each; what is archived is what a GET reads, and where the list is not offered each
/// object is read by its GET, fenced the same way.
#[test]
fn objects_are_read_ahead_by_lists_as_a_get_reads_them() {
    let by_get = || Fake {
        whole_lists: false,
        ..fake(false)
    };
    let (ahead, read_one_by_one) = (fake(false), by_get());
    let (kept_ahead, kept_by_get) = (Kept::default(), Kept::default());
    let report = run_keeping(&ahead, &kept_ahead, false, false, false);
    let by_get_report = run_keeping(&read_one_by_one, &kept_by_get, false, false, false);
    assert!(ahead.gets.lock().unwrap().is_empty());
    assert_eq!(
        *read_one_by_one.gets.lock().unwrap(),
        ["e-Deployment", "e-Session"]
    );
    assert_eq!(results(&report), ["deleted", "deleted"]);
    assert_eq!(results(&report), results(&by_get_report));
    let archives = kept_ahead.archives.lock().unwrap().clone();
    assert_eq!(archives.len(), 2);
    assert_eq!(archives, *kept_by_get.archives.lock().unwrap());
    // Changed after its list: refused as read by its GET.
    let f = Fake {
        changed_to: Some("8"),
        ..by_get()
    };
    let report = run_keeping(&f, &Kept::default(), false, false, false);
    assert!(f.deleted.lock().unwrap().is_empty());
    let changed = DeleteResult::Changed.to_string();
    assert_eq!(results(&report), [changed.clone(), changed]);
}

/// The fake cluster with session e's claim too, bound to the volume `pv-e`.
fn with_claim() -> Fake {
    let f = fake(false);
    let (kind, mut claim) = object("PersistentVolumeClaim", "e");
    claim["spec"] = json!({"volumeName": "pv-e"});
    f.objects.lock().unwrap().push((kind, claim));
    f
}

/// A volume bound to claim `claim_uid`, with `policy`, in `phase`.
fn volume(name: &str, claim_uid: &str, policy: &str, phase: &str) -> Value {
    json!({
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"},
        "spec": {"claimRef": {"uid": claim_uid}, "persistentVolumeReclaimPolicy": policy},
        "status": {"phase": phase},
    })
}

/// `kept` holding `volumes`, as given.
fn kept_with(volumes: Vec<Value>, refuse_volume_patches: bool) -> Kept {
    let kept = Kept {
        refuse_volume_patches,
        ..Kept::default()
    };
    for v in volumes {
        // A volume carrying gc's record was kept by gc: its store holds the receipt.
        let record = v["metadata"]["annotations"][RETAINED_ANNOTATION].as_str();
        if record.is_some_and(|r| serde_json::from_str::<volumes::Retained>(r).is_ok()) {
            kept.receipt_of_keep(&v);
        }
        let name = v["metadata"]["name"].as_str().unwrap().to_owned();
        kept.volumes.lock().unwrap().insert(name, v);
    }
    kept
}

/// A claim's volume with policy `Delete` is set to `Retain` before the claim is deleted, its
/// policy recorded on it and in the claim's receipt; one already `Retain` is left alone.
#[test]
fn a_deleted_claims_volume_is_retained_first() {
    let claim_uid = "u-e-PersistentVolumeClaim";
    let f = with_claim();
    let kept = kept_with(vec![volume("pv-e", claim_uid, "Delete", "Bound")], false);
    let report = run_keeping(&f, &kept, false, false, false);
    assert_eq!(report.failures, 0, "{:?}", results(&report));
    assert!(
        f.deleted
            .lock()
            .unwrap()
            .iter()
            .any(|(n, _)| n == "e-PersistentVolumeClaim")
    );
    let pv = kept.volumes.lock().unwrap()["pv-e"].clone();
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(
        pv["metadata"]["labels"]["gc.example.com/retained"],
        "primary"
    );
    let record: crate::sessions::volumes::Retained = serde_json::from_str(
        pv["metadata"]["annotations"]["gc.example.com/retained"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            record.policy.as_str(),
            record.claim_uid.as_str(),
            record.session.as_deref()
        ),
        ("Delete", claim_uid, Some("e"))
    );
    let receipts = kept.receipts.lock().unwrap();
    let receipt = receipts.iter().find(|r| r.uid == claim_uid).unwrap();
    let retained = receipt.session.as_ref().unwrap().retained.clone().unwrap();
    assert_eq!(
        (retained.name.as_str(), retained.policy.as_str()),
        ("pv-e", "Delete")
    );

    // Already Retain: left as it is, the claim deleted.
    let f = with_claim();
    let untouched = volume("pv-e", claim_uid, "Retain", "Bound");
    let kept = kept_with(vec![untouched.clone()], false);
    let report = run_keeping(&f, &kept, false, false, false);
    assert_eq!(report.failures, 0);
    assert_eq!(kept.volumes.lock().unwrap()["pv-e"], untouched);
    let receipts = kept.receipts.lock().unwrap();
    let receipt = receipts.iter().find(|r| r.uid == claim_uid).unwrap();
    assert_eq!(receipt.session.as_ref().unwrap().retained, None);
}

/// A volume that cannot be retained (the patch refused) keeps its claim; a dry run retains
/// nothing.
#[test]
fn a_volume_not_retained_keeps_its_claim() {
    let claim_uid = "u-e-PersistentVolumeClaim";
    let bound = volume("pv-e", claim_uid, "Delete", "Bound");
    let f = with_claim();
    let kept = kept_with(vec![bound.clone()], true);
    let report = run_keeping(&f, &kept, false, false, false);
    assert!(
        !f.deleted
            .lock()
            .unwrap()
            .iter()
            .any(|(n, _)| n == "e-PersistentVolumeClaim")
    );
    assert_eq!(report.failures, 1);
    assert!(
        results(&report).iter().any(|r| r.starts_with(
            "failed: not deleted: cannot retain its volume pv-e: forbidden: cannot patch"
        )),
        "{:?}",
        results(&report)
    );
    assert_eq!(kept.volumes.lock().unwrap()["pv-e"], bound);

    let f = with_claim();
    let kept = kept_with(vec![bound.clone()], false);
    run_keeping(&f, &kept, true, false, false);
    assert_eq!(kept.volumes.lock().unwrap()["pv-e"], bound);
}

/// Volumes retained longer than the window get their policy back, whatever claims them now; younger
/// ones are held, and so is one a restore moved whose claim is not bound yet; one bound to a claim
/// gc's record does not name gets its policy back and loses gc's record at once (taken); each is
/// audited as its own decision.
#[test]
fn retained_volumes_get_their_policy_back_after_the_window() {
    let now = 1_795_953_600.0;
    let restored = |name: &str, days_ago: f64, claim_uid: &str, phase: &str, to: Option<&str>| {
        let record = crate::sessions::volumes::Retained {
            policy: "Delete".into(),
            namespace: "streamspace".into(),
            claim: format!("claim-{name}"),
            claim_uid: format!("claim-{name}"),
            session: Some("gone".into()),
            at: now - days_ago * 86_400.0,
            restored_to: to.map(str::to_owned),
            days: None,
            gone_at: None,
        };
        let mut v = volume(name, claim_uid, "Retain", phase);
        v["metadata"]["labels"] = json!({"gc.example.com/retained": "primary"});
        v["metadata"]["annotations"] =
            json!({"gc.example.com/retained": serde_json::to_string(&record).unwrap()});
        v
    };
    let retained = |name: &str, days_ago: f64, claim_uid: &str, phase: &str| {
        restored(name, days_ago, claim_uid, phase, None)
    };
    let kept = kept_with(
        vec![
            retained("old", 8.0, "claim-old", "Released"),
            retained("exact", 7.0, "claim-exact", "Released"),
            retained("young", 6.0, "claim-young", "Released"),
            retained("again", 8.0, "someone-else", "Bound"),
            retained("other-claim", 8.0, "someone-else", "Released"),
            retained("bound", 8.0, "claim-bound", "Bound"),
            // Moved by a restore to the claim created again: its policy goes back once that
            // claim is bound, whatever the window; not before, and not to another claim.
            restored("restored", 1.0, "new-claim", "Bound", Some("new-claim")),
            restored(
                "restoring",
                1.0,
                "new-claim",
                "Available",
                Some("new-claim"),
            ),
            restored("taken", 1.0, "someone-else", "Bound", Some("new-claim")),
        ],
        false,
    );
    // A dry run says what it would give back, and gives back nothing.
    let f = fake(false);
    let dry = run_keeping(&f, &kept, true, false, false);
    let would: Vec<String> = dry
        .records
        .iter()
        .filter(|r| r.judged.resource.kind == "PersistentVolume")
        .filter_map(|r| Some(format!("{} {}", r.judged.resource.name, r.result.as_ref()?)))
        .collect();
    assert_eq!(
        would,
        [
            "again would delete",
            "bound would delete",
            "exact would delete",
            "old would delete",
            "other-claim would delete",
            "restored would delete",
            "taken would delete",
        ]
    );
    assert_eq!(
        kept.volumes.lock().unwrap()["old"]["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
    let report = run_keeping(&f, &kept, false, false, false);
    let volumes: Vec<(String, &str, String)> = report
        .records
        .iter()
        .filter(|r| r.judged.resource.kind == "PersistentVolume")
        .map(|r| {
            let result = r
                .result
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            (
                r.judged.resource.name.clone(),
                r.judged.decision.name(),
                result,
            )
        })
        .collect();
    assert_eq!(
        volumes,
        [
            ("again".into(), "delete", "deleted".into()),
            ("bound".into(), "delete", "deleted".into()),
            ("exact".into(), "delete", "deleted".into()),
            ("old".into(), "delete", "deleted".into()),
            ("other-claim".into(), "delete", "deleted".into()),
            ("restored".into(), "delete", "deleted".into()),
            ("restoring".into(), "held", String::new()),
            ("taken".into(), "delete", "deleted".into()),
            ("young".into(), "held", String::new()),
        ]
    );
    let reason = |name: &str| {
        let r = report
            .records
            .iter()
            .find(|r| r.judged.resource.name == name);
        r.unwrap().judged.decision.reason().to_owned()
    };
    let restored_reason = reason("restored");
    assert!(
        restored_reason
            .contains("restored to claim uid new-claim, bound: reclaim policy Delete given back"),
        "{restored_reason}"
    );
    let restoring = reason("restoring");
    assert!(
        restoring.contains("restored to claim uid new-claim, not bound yet (phase \"Available\")"),
        "{restoring}"
    );
    for name in ["taken", "again"] {
        assert!(
            reason(name).contains("taken by claim /"),
            "{}",
            reason(name)
        );
    }
    assert!(
        reason("other-claim").contains("over --volume-retention 7d ago"),
        "{}",
        reason("other-claim")
    );
    let young = report
        .records
        .iter()
        .find(|r| r.judged.resource.name == "young")
        .unwrap();
    assert!(!young.judged.resource.deleting);
    let SessionDecision::Held { until, .. } = young.judged.decision else {
        panic!("{young:?}");
    };
    assert_eq!(until, now + 86_400.0);
    let volumes = kept.volumes.lock().unwrap();
    let old = &volumes["old"];
    assert_eq!(old["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert!(
        old["metadata"]["labels"]
            .get("gc.example.com/retained")
            .is_none(),
        "{old}"
    );
    assert!(
        old["metadata"]["annotations"]
            .get("gc.example.com/retained")
            .is_none()
    );
    assert_eq!(
        volumes["young"]["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
    assert_eq!(
        volumes["again"]["spec"]["persistentVolumeReclaimPolicy"],
        "Delete"
    );
    let restored = &volumes["restored"];
    assert_eq!(restored["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(restored["spec"]["claimRef"]["uid"], "new-claim");
    assert!(
        restored["metadata"]["labels"]
            .get("gc.example.com/retained")
            .is_none()
    );
    assert_eq!(
        volumes["restoring"]["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
    assert!(
        volumes["taken"]["metadata"]["annotations"]
            .get("gc.example.com/retained")
            .is_none()
    );
}

/// The lock lost right after a volume was retained: its receipt, naming the volume, was recorded
/// first, and the claim is not deleted; the volume stays kept for its claim, and the next run
/// takes it as kept (its receipt proves it) and deletes the claim.
#[test]
fn a_lock_lost_after_the_retain_leaves_the_claim_for_the_next_run() {
    let claim_uid = "u-e-PersistentVolumeClaim";
    let lost = Arc::new(AtomicBool::new(false));
    let kept = Kept {
        raise_on_volume_patch: Some(Arc::clone(&lost)),
        ..kept_with(vec![volume("pv-e", claim_uid, "Delete", "Bound")], false)
    };
    let f = with_claim();
    let report = run_stopped(&f, &kept, &lost);
    assert!(
        f.deleted.lock().unwrap().is_empty(),
        "{:?}",
        results(&report)
    );
    let receipts = kept.receipts.lock().unwrap().clone();
    let named: Vec<_> = receipts
        .iter()
        .filter_map(|r| r.session.as_ref()?.retained.as_ref())
        .collect();
    assert_eq!(
        named,
        [&RetainedVolume {
            name: "pv-e".into(),
            policy: "Delete".into()
        }]
    );
    let pv = kept.volumes.lock().unwrap()["pv-e"].clone();
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");

    // The next run, with that store: the volume is gc's already, the claim archived with it and
    // deleted.
    let kept = kept_with(vec![], false);
    kept.volumes.lock().unwrap().insert("pv-e".into(), pv);
    *kept.receipts.lock().unwrap() = receipts;
    let report = run_keeping(&f, &kept, false, false, false);
    assert_eq!(report.failures, 0, "{:?}", results(&report));
    assert!(
        f.deleted
            .lock()
            .unwrap()
            .iter()
            .any(|(n, _)| n == "e-PersistentVolumeClaim")
    );
    let receipts = kept.receipts.lock().unwrap();
    let receipt = receipts.iter().find(|r| r.uid == claim_uid).unwrap();
    let retained = receipt.session.as_ref().unwrap().retained.clone().unwrap();
    assert_eq!(
        (retained.name.as_str(), retained.policy.as_str()),
        ("pv-e", "Delete")
    );
}

/// A restore puts a claim back only on a volume still kept for the deleted claim: gc's label of
/// this cluster, its annotation naming that claim, claimed by it, and not bound to anything.
#[test]
fn a_volume_is_taken_back_only_as_it_was_kept() {
    use crate::sessions::volumes::{Retained, kept_for};
    let kept_volume = |claim_uid: &str, label: &str, noted: &str, phase: &str| {
        let record = Retained {
            policy: "Delete".into(),
            namespace: "streamspace".into(),
            claim: "c".into(),
            claim_uid: noted.into(),
            session: None,
            at: 0.0,
            restored_to: None,
            days: None,
            gone_at: None,
        };
        let mut v = volume("pv", claim_uid, "Retain", phase);
        v["metadata"]["labels"] = json!({"gc.example.com/retained": label});
        v["metadata"]["annotations"] =
            json!({"gc.example.com/retained": serde_json::to_string(&record).unwrap()});
        v
    };
    let check = |v: Value| {
        let kept = kept_with(vec![v], false);
        block_on(kept_for(&kept, "pv", "old", "primary"))
            .map(|(_, r)| r.policy)
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        check(kept_volume("old", "primary", "old", "Released")),
        Ok("Delete".into())
    );
    assert_eq!(
        check(kept_volume("old", "primary", "old", "Available")),
        Ok("Delete".into())
    );
    for (v, why) in [
        // Still bound to the deleted claim: not released yet (a restore waits for it).
        (
            kept_volume("old", "primary", "old", "Bound"),
            "still shows bound to the deleted claim (uid old): Kubernetes has not released it yet",
        ),
        (
            kept_volume("new", "primary", "old", "Released"),
            "is claimed by another claim",
        ),
        (
            kept_volume("old", "other", "old", "Released"),
            "no longer kept",
        ),
        (
            kept_volume("old", "primary", "older", "Released"),
            "kept by gc for another claim (uid older) now",
        ),
    ] {
        let error = check(v).unwrap_err();
        assert!(error.contains(why), "{error}");
    }
    let kept = kept_with(vec![kept_volume("old", "primary", "old", "Bound")], false);
    assert!(matches!(
        block_on(kept_for(&kept, "pv", "old", "primary")),
        Err(crate::sessions::volumes::NotKept::NotReleased(_))
    ));
    let gone = kept_with(Vec::new(), false);
    let error = block_on(kept_for(&gone, "pv", "old", "primary")).unwrap_err();
    assert_eq!(error.to_string(), "its volume pv is gone");
    // Restored to the claim `new`: taken back again only once that claim is gone (deleted
    // before it was bound), never while it stands, nor while whether it does cannot be told.
    let restored = |phase: &str| {
        let mut v = kept_volume("new", "primary", "old", phase);
        let note = &mut v["metadata"]["annotations"]["gc.example.com/retained"];
        let mut record: Value = serde_json::from_str(note.as_str().unwrap()).unwrap();
        record["restoredTo"] = json!("new");
        *note = json!(record.to_string());
        v["spec"]["claimRef"] = json!({"namespace": "streamspace", "name": "c", "uid": "new"});
        v
    };
    let with_claim = |v: Value, claim: Option<Option<&str>>| {
        let kept = kept_with(vec![v], false);
        let claims = claim.map(|uid| {
            let claim = uid.map(|uid| {
                (
                    "streamspace/c".to_owned(),
                    json!({"metadata": {"uid": uid}}),
                )
            });
            claim.into_iter().collect()
        });
        *kept.claims.lock().unwrap() = claims;
        block_on(kept_for(&kept, "pv", "old", "primary"))
            .map(|(_, r)| r.policy)
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        with_claim(restored("Released"), Some(None)),
        Ok("Delete".into())
    );
    assert_eq!(
        with_claim(restored("Released"), Some(Some("newer"))),
        Ok("Delete".into())
    );
    for (phase, claim) in [
        ("Released", Some(Some("new"))),
        ("Released", None),
        ("Bound", Some(None)),
        ("Pending", Some(Some("new"))),
    ] {
        let error = with_claim(restored(phase), claim).unwrap_err();
        assert!(
            error.contains("was restored already, to claim uid new"),
            "{phase} {claim:?}: {error}"
        );
    }
}

/// A restore moves the kept volume to the new claim (fenced on the old one) and, once that claim
/// is bound to it, gives the volume its policy back; not before, and a dry run changes nothing.
#[test]
fn a_kept_volume_is_moved_to_the_restored_claim_and_given_back_once_bound() {
    use crate::sessions::volumes::{ClaimedAgain, claimed_again, kept_for, rebind};
    let claim_uid = "u-e-PersistentVolumeClaim";
    let f = with_claim();
    let kept = kept_with(vec![volume("pv-e", claim_uid, "Delete", "Bound")], false);
    run_keeping(&f, &kept, false, false, false);
    kept.volumes.lock().unwrap().get_mut("pv-e").unwrap()["status"]["phase"] = "Released".into();

    let (pv, record) = block_on(kept_for(&kept, "pv-e", claim_uid, "primary")).unwrap();
    block_on(rebind(
        &kept,
        &pv,
        record.clone(),
        "e-home",
        "new-uid",
        5.0,
        true,
    ))
    .unwrap();
    assert_eq!(
        kept.volumes.lock().unwrap()["pv-e"]["spec"]["claimRef"]["uid"],
        claim_uid
    );
    block_on(rebind(
        &kept,
        &pv,
        record.clone(),
        "e-home",
        "new-uid",
        5.0,
        false,
    ))
    .unwrap();
    let moved = kept.volumes.lock().unwrap()["pv-e"].clone();
    assert_eq!(moved["spec"]["claimRef"]["uid"], "new-uid");
    assert_eq!(moved["spec"]["claimRef"]["name"], "e-home");
    // The same move again meets its fence (the volume is no longer the old claim's).
    let again = block_on(rebind(&kept, &pv, record, "e-home", "other", 5.0, false)).unwrap_err();
    assert!(
        again.starts_with("cannot bind its volume pv-e to the new claim"),
        "{again}"
    );

    let back = |dry_run| block_on(claimed_again(&kept, "pv-e", "new-uid", "primary", dry_run));
    let policy =
        || kept.volumes.lock().unwrap()["pv-e"]["spec"]["persistentVolumeReclaimPolicy"].clone();
    assert_eq!(back(false), Ok(ClaimedAgain::NotBound), "not bound yet");
    kept.volumes.lock().unwrap().get_mut("pv-e").unwrap()["status"]["phase"] = "Bound".into();
    assert_eq!(
        block_on(claimed_again(&kept, "pv-e", "other-uid", "primary", false)),
        Ok(ClaimedAgain::NotKept)
    );
    assert_eq!(back(true), Ok(ClaimedAgain::GivenBack));
    assert_eq!(policy(), "Retain", "a dry run gives nothing back");
    assert_eq!(back(false), Ok(ClaimedAgain::GivenBack));
    assert_eq!(policy(), "Delete");
    let pv = kept.volumes.lock().unwrap()["pv-e"].clone();
    assert!(
        pv["metadata"]["annotations"]
            .get("gc.example.com/retained")
            .is_none(),
        "{pv}"
    );
    assert_eq!(
        back(false),
        Ok(ClaimedAgain::NotKept),
        "nothing more to give back"
    );
    assert_eq!(
        block_on(claimed_again(&kept, "pv-gone", "new-uid", "primary", false)),
        Ok(ClaimedAgain::NotKept)
    );
}

/// The lock lost between the volume's read and its patch: the volume is not touched, and the
/// claim not deleted.
#[test]
fn a_lock_lost_before_the_retain_writes_nothing() {
    let claim_uid = "u-e-PersistentVolumeClaim";
    let lost = Arc::new(AtomicBool::new(false));
    let bound = volume("pv-e", claim_uid, "Delete", "Bound");
    let kept = Kept {
        raise_on_volume_read: Some(Arc::clone(&lost)),
        ..kept_with(vec![bound.clone()], false)
    };
    let f = with_claim();
    let report = run_stopped(&f, &kept, &lost);
    assert!(f.deleted.lock().unwrap().is_empty());
    assert_eq!(kept.volumes.lock().unwrap()["pv-e"], bound);
    assert_eq!(
        results(&report)[0],
        "failed: not deleted: the run lock was lost"
    );
}

const NOW: f64 = 1_795_953_600.0;
const DAY: f64 = 86_400.0;

/// One run over `f` keeping to `kept`, with `cfg`, at `now`.
fn run_at(f: &Fake, kept: &Kept, cfg: &SessionConfig, now: f64) -> SessionReport {
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    block_on(run(f, &db, kept.keep(), cfg, now, go_on(&flags, false))).unwrap()
}

/// The volume `name`, claimed by `claimed` in `phase`, as gc kept it at `at` for the claim
/// `claim_uid` of `namespace` (restored to `to`).
fn gc_kept(
    name: &str,
    (claimed, phase): (&str, &str),
    (claim_uid, namespace): (&str, &str),
    at: f64,
    to: Option<&str>,
) -> Value {
    let record = crate::sessions::volumes::Retained {
        policy: "Delete".into(),
        namespace: namespace.into(),
        claim: "e-home".into(),
        claim_uid: claim_uid.into(),
        session: Some("e".into()),
        at,
        restored_to: to.map(str::to_owned),
        days: None,
        gone_at: None,
    };
    let mut v = volume(name, claimed, "Retain", phase);
    v["metadata"]["labels"] = json!({"gc.example.com/retained": "primary"});
    v["metadata"]["annotations"] =
        json!({"gc.example.com/retained": serde_json::to_string(&record).unwrap()});
    v
}

/// gc's record on the volume `name` of `kept`.
fn record_on(kept: &Kept, name: &str) -> crate::sessions::volumes::Retained {
    let volumes = kept.volumes.lock().unwrap();
    let note = &volumes[name]["metadata"]["annotations"]["gc.example.com/retained"];
    serde_json::from_str(note.as_str().unwrap()).unwrap()
}

/// The decision and result of each volume's audit line: `name decision [result]`.
fn volume_lines(report: &SessionReport) -> Vec<String> {
    let volumes = report.records.iter();
    volumes
        .filter(|r| r.judged.resource.kind == "PersistentVolume")
        .map(|r| {
            let result = r
                .result
                .as_ref()
                .map(|r| format!(" {r}"))
                .unwrap_or_default();
            let (name, decision) = (&r.judged.resource.name, r.judged.decision.name());
            format!("{} {name} {decision}{result}", r.namespace)
        })
        .collect()
}

/// A claim a restore created, deleted again by a run (bound to its volume yet or not): its
/// volume is kept again, its record renewed for that claim with its window from now, and the
/// claim's receipt names it; the same run holds it, and it is given back only once the window
/// since this delete passed.
#[test]
fn a_restored_claim_deleted_again_is_kept_again() {
    let claim_uid = "u-e-PersistentVolumeClaim";
    for phase in ["Bound", "Pending", "Released"] {
        let f = with_claim();
        let restored = gc_kept(
            "pv-e",
            (claim_uid, phase),
            ("old-claim", "streamspace"),
            NOW - 3.0 * DAY,
            Some(claim_uid),
        );
        let kept = kept_with(vec![restored], false);
        let report = run_at(&f, &kept, &cfg(), NOW);
        assert_eq!(report.failures, 0, "{phase}: {:?}", results(&report));
        assert!(
            f.deleted
                .lock()
                .unwrap()
                .iter()
                .any(|(n, _)| n == "e-PersistentVolumeClaim"),
            "{phase}"
        );
        let receipts = kept.receipts.lock().unwrap().clone();
        let receipt = receipts.iter().find(|r| r.uid == claim_uid).unwrap();
        let retained = receipt.session.as_ref().unwrap().retained.clone();
        assert_eq!(
            retained,
            Some(RetainedVolume {
                name: "pv-e".into(),
                policy: "Delete".into()
            }),
            "{phase}: the receipt names the volume"
        );
        let record = record_on(&kept, "pv-e");
        assert_eq!(
            (record.claim_uid.as_str(), record.restored_to, record.at),
            (claim_uid, None, NOW),
            "{phase}"
        );
        assert_eq!(volume_lines(&report), ["streamspace pv-e held"], "{phase}");
        let pv = kept.volumes.lock().unwrap()["pv-e"].clone();
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");

        // Released; a week less a second later it is still held, a week later given back.
        kept.volumes.lock().unwrap().get_mut("pv-e").unwrap()["status"]["phase"] =
            "Released".into();
        let later = run_at(&fake(false), &kept, &cfg(), NOW + 7.0 * DAY - 1.0);
        assert_eq!(volume_lines(&later), ["streamspace pv-e held"], "{phase}");
        let later = run_at(&fake(false), &kept, &cfg(), NOW + 7.0 * DAY);
        assert_eq!(
            volume_lines(&later),
            ["streamspace pv-e delete deleted"],
            "{phase}"
        );
    }
}

/// The window counts from the claim's last delete: a claim whose delete did not follow its keep
/// (killed, stopped, a fence that held) and is deleted days later renews the record; one
/// deleted by someone else counts from when its volume was released.
#[test]
fn the_window_counts_from_the_claims_last_delete() {
    let claim_uid = "u-e-PersistentVolumeClaim";
    let stale = gc_kept(
        "pv-e",
        (claim_uid, "Bound"),
        (claim_uid, "streamspace"),
        NOW - 8.0 * DAY,
        None,
    );
    let kept = kept_with(vec![stale.clone()], false);
    let report = run_at(&with_claim(), &kept, &cfg(), NOW);
    assert_eq!(report.failures, 0, "{:?}", results(&report));
    assert_eq!(record_on(&kept, "pv-e").at, NOW);
    assert_eq!(volume_lines(&report), ["streamspace pv-e held"]);
    kept.volumes.lock().unwrap().get_mut("pv-e").unwrap()["status"]["phase"] = "Released".into();
    let next_day = run_at(&fake(false), &kept, &cfg(), NOW + DAY);
    assert_eq!(volume_lines(&next_day), ["streamspace pv-e held"]);

    // Deleted by someone else a day ago: released then.
    let mut released = stale;
    released["status"] = json!({
        "phase": "Released",
        "lastPhaseTransitionTime": crate::isotime::format_timestamp(NOW - DAY),
    });
    let kept = kept_with(vec![released], false);
    let report = run_at(&fake(false), &kept, &cfg(), NOW);
    assert_eq!(volume_lines(&report), ["streamspace pv-e held"]);
    let report = run_at(&fake(false), &kept, &cfg(), NOW + 6.0 * DAY);
    assert_eq!(volume_lines(&report), ["streamspace pv-e delete deleted"]);
}

/// Every volume gc kept is reviewed whatever the namespaces a run selects: the run that reviews
/// for the namespaces no run selects (`VolumeReview::AllBut`) takes those of a namespace that
/// left the selection, each line the reviewing run's, its reason naming that namespace; with
/// retention 0 what was kept earlier is given back, with a line, never forgotten.
#[test]
fn kept_volumes_are_reviewed_whatever_the_selection_and_with_retention_off() {
    use crate::sessions::volumes::VolumeReview;
    let released = |name: &str, namespace: &str, days_ago: f64| {
        let uid = format!("claim-{name}");
        gc_kept(
            name,
            (&uid, "Released"),
            (&uid, namespace),
            NOW - days_ago * DAY,
            None,
        )
    };
    // Kept 8 days ago for 30 days by a run of its own namespace: its window, not this run's.
    let mut long = released("left-long", "left", 8.0);
    let note = &mut long["metadata"]["annotations"]["gc.example.com/retained"];
    let mut record: Value = serde_json::from_str(note.as_str().unwrap()).unwrap();
    record["days"] = json!(30);
    *note = json!(record.to_string());
    let volumes = || {
        kept_with(
            vec![
                released("mine", "streamspace", 1.0),
                released("left-old", "left", 8.0),
                released("left-young", "left", 1.0),
                long.clone(),
                released("selected", "selected-too", 8.0),
            ],
            false,
        )
    };
    let kept = volumes();
    let own = run_at(&fake(false), &kept, &cfg(), NOW);
    assert_eq!(volume_lines(&own), ["streamspace mine held"]);
    let all_but = SessionConfig {
        volume_review: VolumeReview::AllBut(vec!["selected-too".into()]),
        ..cfg()
    };
    let report = run_at(&fake(false), &kept, &all_but, NOW);
    assert_eq!(
        volume_lines(&report),
        [
            "streamspace left-long held",
            "streamspace left-old delete deleted",
            "streamspace left-young held",
            "streamspace mine held"
        ]
    );
    let record = report
        .records
        .iter()
        .find(|r| r.judged.resource.name == "left-old")
        .unwrap();
    let SessionDecision::Delete { reason } = &record.judged.decision else {
        panic!("{record:?}");
    };
    assert!(
        reason.contains("namespace left is not among this run's"),
        "{reason}"
    );

    let kept = volumes();
    let off = SessionConfig {
        retain_volume_days: 0,
        volume_review: VolumeReview::AllBut(Vec::new()),
        ..cfg()
    };
    let report = run_at(&fake(false), &kept, &off, NOW);
    assert_eq!(report.failures, 0);
    assert_eq!(
        volume_lines(&report),
        [
            "streamspace left-long held",
            "streamspace left-old delete deleted",
            "streamspace left-young delete deleted",
            "streamspace mine delete deleted",
            "streamspace selected delete deleted",
        ]
    );
    let volumes = kept.volumes.lock().unwrap();
    let given_back = volumes
        .values()
        .filter(|v| v["spec"]["persistentVolumeReclaimPolicy"] == "Delete");
    assert_eq!(given_back.count(), 4, "{volumes:?}");
}

/// The run of a kept volume's own namespace applies its own window (here 1 day), not the one the
/// volume was kept for (30 days): that is for the runs of other namespaces. A volume with gc's
/// label whose record does not read is said once, by the run that reviews every namespace, and
/// left alone; a namespace's own review does not repeat it.
#[test]
fn a_namespaces_own_run_applies_its_window_and_an_unreadable_record_is_said_once() {
    use crate::sessions::volumes::VolumeReview;
    let claim = ("claim-mine", "Released");
    let mut mine = gc_kept(
        "mine",
        claim,
        ("claim-mine", "streamspace"),
        NOW - 2.0 * DAY,
        None,
    );
    let note = &mut mine["metadata"]["annotations"]["gc.example.com/retained"];
    let mut record: Value = serde_json::from_str(note.as_str().unwrap()).unwrap();
    record["days"] = json!(30);
    *note = json!(record.to_string());
    let one_day = SessionConfig {
        retain_volume_days: 1,
        ..cfg()
    };
    let kept = kept_with(vec![mine], false);
    let report = run_at(&fake(false), &kept, &one_day, NOW);
    assert_eq!(volume_lines(&report), ["streamspace mine delete deleted"]);

    let mut odd = gc_kept("odd", claim, ("claim-mine", "streamspace"), NOW, None);
    odd["metadata"]["annotations"]["gc.example.com/retained"] = json!("not a record");
    let kept = kept_with(vec![odd], false);
    let own = run_at(&fake(false), &kept, &cfg(), NOW);
    assert_eq!(volume_lines(&own), Vec::<String>::new());
    let all = SessionConfig {
        volume_review: VolumeReview::AllBut(Vec::new()),
        ..cfg()
    };
    let report = run_at(&fake(false), &kept, &all, NOW);
    assert_eq!(volume_lines(&report), ["streamspace odd skipped"]);
    let volumes = kept.volumes.lock().unwrap();
    assert_eq!(
        volumes["odd"]["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
}

/// Concurrency: the fake cluster answering each call only after the others had their turn
/// (a pending poll, as a network would), so objects in flight interleave step by step; a fault
/// on demand for one object's delete; the most calls it saw at once.
struct Interleaved {
    fake: Fake,
    fail_delete_of: Option<&'static str>,
    at_once: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

impl Interleaved {
    /// Sessions s00 to s19, a Deployment and a `Session` each; the table holds s00 to s11, so
    /// the objects of eight sessions are deleted (16 of 40: under the guard's half).
    fn new(fail_delete_of: Option<&'static str>) -> (Self, Db) {
        let f = fake(false);
        let mut objects = Vec::new();
        for i in 0..20 {
            let s = format!("s{i:02}");
            objects.push(object("Deployment", &s));
            objects.push(object("Session", &s));
        }
        *f.objects.lock().unwrap() = objects;
        let live: Vec<&'static str> = (0..12)
            .map(|i| &*Box::leak(format!("s{i:02}").into_boxed_str()))
            .collect();
        let this = Self {
            fake: f,
            fail_delete_of,
            at_once: 0.into(),
            peak: 0.into(),
        };
        (this, Db(Ok(live), Mutex::new(0)))
    }

    /// Answers `answer` after one pending poll, counting the calls waiting meanwhile.
    async fn later<T>(&self, answer: T) -> T {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.at_once.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now, SeqCst);
        let mut polled = false;
        std::future::poll_fn(|cx| {
            if std::mem::replace(&mut polled, true) {
                std::task::Poll::Ready(())
            } else {
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await;
        self.at_once.fetch_sub(1, SeqCst);
        answer
    }
}

#[async_trait]
impl ObjectCluster for Interleaved {
    async fn list_metadata(
        &self,
        kind: &Kind,
        ns: &str,
        selector: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let answer = self
            .fake
            .list_metadata(kind, ns, selector, limit, token)
            .await;
        self.later(answer).await
    }
    async fn get_object(
        &self,
        kind: &Kind,
        ns: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        let answer = self.fake.get_object(kind, ns, name).await;
        self.later(answer).await
    }
    async fn list_objects(
        &self,
        kind: &Kind,
        ns: &str,
        selector: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let answer = self
            .fake
            .list_objects(kind, ns, selector, limit, token)
            .await;
        self.later(answer).await
    }
    async fn delete_object(
        &self,
        kind: &Kind,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        // Sent (and recorded) at once; answered later.
        let answer = if self.fail_delete_of == Some(name) {
            self.fake
                .deleted
                .lock()
                .unwrap()
                .push((name.into(), dry_run));
            Err(ClusterError::Unavailable("the connection was reset".into()))
        } else {
            self.fake.delete_object(kind, ns, name, pre, dry_run).await
        };
        self.later(answer).await
    }
}

/// The archive sink and the store of `Kept`, each answering after one pending poll (a disk,
/// a database), so an object in flight can be overtaken between any two of its steps; with a
/// flag, raised as the receipt of that number is recorded (the lock lost right then).
struct SlowKept<'a>(&'a Kept, Option<(usize, &'a AtomicBool)>);

/// Ready after one pending poll.
async fn one_poll_later() {
    let mut polled = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut polled, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

#[async_trait]
impl crate::ports::ArchiveSink for SlowKept<'_> {
    async fn write(&self, key: &crate::ports::ArchiveKey, b: &[u8]) -> Result<String, StoreError> {
        let answer = self.0.write(key, b).await;
        one_poll_later().await;
        answer
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        let answer = self.0.read(uri).await;
        one_poll_later().await;
        answer
    }
}

#[async_trait]
impl Store for SlowKept<'_> {
    async fn load_ledger(
        &self,
        c: &str,
        ns: &str,
    ) -> Result<crate::pods::ledger::PreviousLedger, StoreError> {
        self.0.load_ledger(c, ns).await
    }
    async fn save_ledger(
        &self,
        c: &str,
        ns: &str,
        l: &crate::pods::ledger::Ledger,
    ) -> Result<(), StoreError> {
        self.0.save_ledger(c, ns, l).await
    }
    async fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        let answer = self.0.put_receipt(receipt).await;
        if let Some((at, flag)) = self.1
            && self.0.receipts.lock().unwrap().len() == at
        {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        one_poll_later().await;
        answer
    }
    async fn get_receipt(&self, c: &str, uid: &str) -> Result<Option<Receipt>, StoreError> {
        self.0.get_receipt(c, uid).await
    }
}

impl SlowKept<'_> {
    fn keep(&self) -> Keep<'_> {
        Keep {
            sink: self,
            store: self,
            ..self.0.keep()
        }
    }
}

/// The sixteen objects of the eight gone sessions, claims first then in the plan's order.
fn gone_objects() -> Vec<String> {
    let mut names = Vec::new();
    for kind in ["Deployment", "Session"] {
        names.extend((12..20).map(|i| format!("s{i:02}-{kind}")));
    }
    names.sort();
    names
}

/// Many objects in flight: one object's failed delete fails that object alone; every other is
/// archived, receipted and deleted, its record in the plan's order as one after another.
#[test]
fn a_fault_for_one_object_in_flight_leaves_the_others_done() {
    let (f, db) = Interleaved::new(Some("s14-Session"));
    let kept = Kept::default();
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    let report = block_on(run(
        &f,
        &db,
        SlowKept(&kept, None).keep(),
        &cfg(),
        1_795_953_600.0,
        go_on(&flags, false),
    ))
    .unwrap();
    let peak = f.peak.load(std::sync::atomic::Ordering::SeqCst);
    assert!(peak > 4, "objects were not in flight together: {peak}");
    let mut sent: Vec<String> = (f.fake.deleted.lock().unwrap().iter())
        .map(|(n, _)| n.clone())
        .collect();
    sent.sort();
    assert_eq!(sent, gone_objects());
    let done: Vec<(String, String)> = (report.records.iter())
        .filter_map(|r| {
            Some((
                r.judged.resource.name.clone(),
                r.result.as_ref()?.to_string(),
            ))
        })
        .collect();
    let mut in_plan_order = done.clone();
    in_plan_order.sort_by_key(|(name, _)| {
        let j = report
            .records
            .iter()
            .position(|r| &r.judged.resource.name == name);
        j.unwrap()
    });
    assert_eq!(done, in_plan_order);
    for (name, result) in &done {
        if name == "s14-Session" {
            assert!(
                result.starts_with("failed: cluster unavailable"),
                "{result}"
            );
        } else {
            assert_eq!(result, "deleted", "{name}");
        }
    }
    assert_eq!(report.failures, 1);
    // Every object whose delete was sent was archived and receipted first.
    assert_eq!(kept.receipts.lock().unwrap().len(), 16);
    assert_eq!(kept.archives.lock().unwrap().len(), 16);
}

/// Many objects in flight when the lock is lost (as the third receipt is recorded): each halts
/// before its next write. No delete is sent after the loss, not even the one whose receipt
/// was just recorded; each object not deleted fails saying so.
#[test]
fn a_lost_lock_halts_every_object_in_flight_before_its_next_write() {
    let (f, db) = Interleaved::new(None);
    let lost = AtomicBool::new(false);
    // Every delete is checked against the flag as it is sent.
    struct Checked<'a>(&'a Interleaved, &'a AtomicBool);
    #[async_trait]
    impl ObjectCluster for Checked<'_> {
        async fn list_metadata(
            &self,
            kind: &Kind,
            ns: &str,
            selector: &str,
            limit: u32,
            token: Option<&str>,
        ) -> Result<Page, ClusterError> {
            self.0.list_metadata(kind, ns, selector, limit, token).await
        }
        async fn get_object(
            &self,
            kind: &Kind,
            ns: &str,
            name: &str,
        ) -> Result<Option<Vec<u8>>, ClusterError> {
            self.0.get_object(kind, ns, name).await
        }
        async fn list_objects(
            &self,
            kind: &Kind,
            ns: &str,
            selector: &str,
            limit: u32,
            token: Option<&str>,
        ) -> Result<Page, ClusterError> {
            self.0.list_objects(kind, ns, selector, limit, token).await
        }
        async fn delete_object(
            &self,
            kind: &Kind,
            ns: &str,
            name: &str,
            pre: &Preconditions,
            dry_run: bool,
        ) -> Result<(), ClusterError> {
            let lost = self.1.load(std::sync::atomic::Ordering::SeqCst);
            assert!(!lost, "{name}: a delete sent after the loss");
            self.0.delete_object(kind, ns, name, pre, dry_run).await
        }
    }
    let kept = Kept::default();
    let stopping = AtomicBool::new(false);
    let report = block_on(run(
        &Checked(&f, &lost),
        &db,
        SlowKept(&kept, Some((3, &lost))).keep(),
        &cfg(),
        1_795_953_600.0,
        Held::new(&lost, &stopping, false),
    ))
    .unwrap();
    let deleted = f.fake.deleted.lock().unwrap().len();
    assert!(deleted < 3, "{deleted}");
    let results = results(&report);
    assert_eq!(results.iter().filter(|r| *r == "deleted").count(), deleted);
    let lost_lock = "failed: not deleted: the run lock was lost";
    let failed = results.iter().filter(|r| *r == lost_lock).count();
    assert_eq!(failed, 16 - deleted, "{results:?}");
    assert_eq!(report.failures, failed);
}

/// `Session` objects are deleted after every other kind, whatever the kinds' order: StreamSpace
/// v1's controller owns a session's Deployment by its `Session`, and an owner deleted first
/// would let Kubernetes' garbage collector take the Deployment unarchived.
#[test]
fn sessions_go_after_what_they_may_own() {
    let f = fake(false);
    let mut c = cfg();
    c.kinds.reverse();
    assert_eq!(c.kinds[0].kind, "Session", "the Sessions listed first");
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    let kept = Kept::default();
    let report = block_on(run(
        &f,
        &db,
        kept.keep(),
        &c,
        1_795_953_600.0,
        go_on(&flags, false),
    ))
    .unwrap();
    assert_eq!(*f.deleted.lock().unwrap(), session_e(false));
    let deleted: Vec<&str> = (report.records.iter())
        .filter(|r| r.result.is_some())
        .map(|r| r.judged.resource.kind.as_str())
        .collect();
    assert_eq!(deleted, ["Deployment", "Session"]);
}

/// A scanned object that another scanned object names as its owner (StreamSpace v1's `Session`,
/// owner of its Deployment) is deleted leaving what it owns in place, whatever gc decided of
/// that: deleted here, or kept; an object nothing scanned names is deleted plainly.
#[test]
fn an_owner_is_deleted_leaving_what_it_owns() {
    let f = fake(false);
    {
        let mut objects = f.objects.lock().unwrap();
        let (_, deployment) = (objects.iter_mut())
            .find(|(_, o)| o["metadata"]["name"] == "e-Deployment")
            .unwrap();
        deployment["metadata"]["ownerReferences"] = json!([{"apiVersion": "stream.space/v1alpha1", "kind": "Session", "name": "e", "uid": "u-e-Session"}]);
    }
    let report = run_over(&f, false, false, false);
    assert_eq!(
        *f.deleted.lock().unwrap(),
        [
            ("e-Deployment".to_owned(), false),
            ("e-Session (owner)".to_owned(), false)
        ]
    );
    assert_eq!(report.failures, 0);
}

/// A label and a record prove nothing: a volume labelled as kept by this cluster, with a record
/// that reads, whose keep gc's store has no receipt of (copied from another volume, made up, or
/// another install's), is never written to: not given back when its window would have passed, not
/// renewed when its claim is deleted (left `Retain`, as any volume whose policy gc did not set).
/// Each review says so; a store that cannot be read is said too, and nothing is written.
#[test]
fn a_label_and_record_without_gcs_receipt_are_never_written_to() {
    let forged = gc_kept(
        "forged",
        ("claim-x", "Released"),
        ("claim-x", "streamspace"),
        NOW - 30.0 * DAY,
        None,
    );
    let kept = kept_with(vec![], false);
    kept.volumes
        .lock()
        .unwrap()
        .insert("forged".into(), forged.clone());
    let report = run_at(&fake(false), &kept, &cfg(), NOW);
    assert_eq!(volume_lines(&report), ["streamspace forged skipped"]);
    let reason = report
        .records
        .last()
        .unwrap()
        .judged
        .decision
        .reason()
        .to_owned();
    assert!(
        reason.contains("gc's store holds no receipt of that claim's delete naming this volume")
            && reason.contains("(uid claim-x)")
            && reason.contains("not kept by this gc, left alone"),
        "{reason}"
    );
    assert_eq!(kept.volumes.lock().unwrap()["forged"], forged);

    // Its claim deleted by a run: the claim goes, the volume is left as it is, and the claim's
    // receipt names no volume kept.
    let mut bound = gc_kept(
        "pv-e",
        ("u-e-PersistentVolumeClaim", "Bound"),
        ("u-e-PersistentVolumeClaim", "streamspace"),
        NOW - DAY,
        None,
    );
    bound["metadata"]["resourceVersion"] = json!("7");
    let kept = kept_with(vec![], false);
    kept.volumes
        .lock()
        .unwrap()
        .insert("pv-e".into(), bound.clone());
    let f = with_claim();
    let report = run_keeping(&f, &kept, false, false, false);
    assert_eq!(report.failures, 0, "{:?}", results(&report));
    assert!(
        f.deleted
            .lock()
            .unwrap()
            .iter()
            .any(|(n, _)| n == "e-PersistentVolumeClaim")
    );
    assert_eq!(kept.volumes.lock().unwrap()["pv-e"], bound);
    let receipts = kept.receipts.lock().unwrap();
    assert!(
        receipts
            .iter()
            .all(|r| r.session.as_ref().unwrap().retained.is_none())
    );
    drop(receipts);

    // The store cannot be read: nothing is written, and the review says why.
    let down = Kept {
        refuse_receipts: true,
        ..kept_with(vec![], false)
    };
    down.volumes
        .lock()
        .unwrap()
        .insert("forged".into(), forged.clone());
    let report = block_on(review(
        &down,
        &down,
        &cfg(),
        NOW,
        go_on(&[AtomicBool::new(false), AtomicBool::new(false)], false),
    ));
    assert_eq!(volume_lines(&report), ["streamspace forged skipped"]);
    let reason = report.records[0].judged.decision.reason();
    assert!(reason.contains("gc's receipts cannot be read"), "{reason}");
    assert_eq!(down.volumes.lock().unwrap()["forged"], forged);
}

/// What gc recorded wins over what a volume's record says: a record rewritten to start its
/// window long ago does not end it before the keep's run plus the window, and the policy given
/// back is the one the receipt recorded, not the record's.
#[test]
fn the_receipt_not_the_record_says_the_policy_and_the_windows_start() {
    let ours = gc_kept(
        "pv",
        ("claim-x", "Released"),
        ("claim-x", "streamspace"),
        NOW - DAY,
        None,
    );
    let kept = kept_with(vec![ours.clone()], false);
    let mut rewritten = ours;
    let note = &mut rewritten["metadata"]["annotations"]["gc.example.com/retained"];
    let mut record: Value = serde_json::from_str(note.as_str().unwrap()).unwrap();
    record["at"] = json!(0.0);
    record["policy"] = json!("Recycle");
    *note = json!(record.to_string());
    kept.volumes.lock().unwrap().insert("pv".into(), rewritten);
    let report = run_at(&fake(false), &kept, &cfg(), NOW);
    assert_eq!(volume_lines(&report), ["streamspace pv held"]);
    let report = run_at(&fake(false), &kept, &cfg(), NOW + 7.0 * DAY);
    assert_eq!(volume_lines(&report), ["streamspace pv delete deleted"]);
    let pv = kept.volumes.lock().unwrap()["pv"].clone();
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
}

/// A volume is marked only once the receipt naming it is recorded: a store that refuses the
/// claim's receipt leaves the volume untouched (`Delete`, no label) and the claim in place.
#[test]
fn a_volume_is_marked_only_after_the_receipt_naming_it() {
    let claim_uid = "u-e-PersistentVolumeClaim";
    let before = volume("pv-e", claim_uid, "Delete", "Bound");
    let kept = Kept {
        refuse_receipts: true,
        ..kept_with(vec![before.clone()], false)
    };
    let f = with_claim();
    let report = run_keeping(&f, &kept, false, false, false);
    assert!(report.failures > 0);
    assert!(f.deleted.lock().unwrap().is_empty());
    assert_eq!(kept.volumes.lock().unwrap()["pv-e"], before);
}

/// The volumes of `Kept`, whose list always fails with the error given (no RBAC to list
/// PersistentVolumes, or an API server down).
struct Unlistable<'a>(&'a Kept, ClusterError);

#[async_trait]
impl crate::ports::Volumes for Unlistable<'_> {
    async fn get_volume(&self, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        self.0.get_volume(name).await
    }
    async fn list_volumes(&self, _: &str, _: u32, _: Option<&str>) -> Result<Page, ClusterError> {
        Err(self.1.clone())
    }
    async fn patch_volume(
        &self,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        self.0.patch_volume(name, patch, dry_run).await
    }
}

/// Kept volumes that cannot be listed: with retention 0 and no right to list volumes, a note
/// (nothing is kept now; what was kept earlier cannot be known), not a failure; with retention
/// on, or any other error, the run says the volumes were not listed (a failed review).
#[test]
fn volumes_not_listed_are_a_note_only_when_forbidden_with_retention_off() {
    let forbidden = ClusterError::Forbidden {
        verb: "list".into(),
        resource: "persistentvolumes".into(),
        namespace: String::new(),
        message: "no RBAC".into(),
    };
    let down = ClusterError::Unavailable("the connection was reset".into());
    let kept = Kept::default();
    let with = |error: &ClusterError, days: u32| {
        let volumes = Unlistable(&kept, error.clone());
        let keep = Keep {
            volumes: &volumes,
            ..kept.keep()
        };
        let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
        let flags = [AtomicBool::new(false), AtomicBool::new(false)];
        let cfg = SessionConfig {
            retain_volume_days: days,
            ..cfg()
        };
        let report = block_on(run(
            &fake(false),
            &db,
            keep,
            &cfg,
            NOW,
            go_on(&flags, false),
        ));
        let report = report.unwrap();
        // The deletes are done either way.
        assert_eq!(results(&report), ["deleted", "deleted"]);
        assert_eq!(report.failures, 0);
        let said =
            |s: &Option<String>| s.as_ref().map(|s| s.split(" (").next().unwrap().to_owned());
        (said(&report.volumes_note), said(&report.volumes_unlisted))
    };
    let note = Some("cannot list the volumes gc kept earlier".to_owned());
    assert_eq!(with(&forbidden, 0), (note, None));
    let unlisted = |e: &ClusterError| Some(format!("cannot list the retained volumes: {e}"));
    assert_eq!(with(&forbidden, 7), (None, unlisted(&forbidden)));
    assert_eq!(with(&down, 0), (None, unlisted(&down)));
    assert_eq!(with(&down, 7), (None, unlisted(&down)));
}

/// A kept volume whose policy cannot be given back is a failure of the run, counted with its
/// failed deletes; the review alone (a run refused before its deletes) counts it too.
#[test]
fn a_policy_not_given_back_is_counted_with_the_failed_deletes() {
    let due = |name: &str, days_ago: f64| {
        let uid = format!("claim-{name}");
        gc_kept(
            name,
            (&uid, "Released"),
            (&uid, "streamspace"),
            NOW - days_ago * DAY,
            None,
        )
    };
    let mut kept = kept_with(vec![due("due", 8.0), due("young", 1.0)], true);
    kept.refuse_archives = true;
    let report = run_at(&fake(false), &kept, &cfg(), NOW);
    let refused = "not deleted: cannot archive its manifest";
    let results = results(&report);
    assert!(results[0].contains(refused), "{report:?}");
    assert!(results[1].starts_with("not started: "), "{report:?}");
    let lines = volume_lines(&report);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("streamspace due delete failed: forbidden"),
        "{lines:?}"
    );
    assert_eq!(lines[1], "streamspace young held");
    // A delete not sent (the other not started: the sink is unavailable) and one policy not
    // given back.
    assert_eq!(report.failures, 2);
    // The review alone: the one policy not given back.
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    let reviewed = block_on(review(&kept, &kept, &cfg(), NOW, go_on(&flags, false)));
    assert_eq!(reviewed.failures, 1);
    assert_eq!(volume_lines(&reviewed), lines);
    // Given back, nothing fails.
    kept.refuse_volume_patches = false;
    let reviewed = block_on(review(&kept, &kept, &cfg(), NOW, go_on(&flags, false)));
    assert_eq!(reviewed.failures, 0);
    assert_eq!(
        volume_lines(&reviewed),
        ["streamspace due delete deleted", "streamspace young held"]
    );
}

/// The OpenAPI schema of a delete's result (feature `openapi`) is what its `Serialize` writes: a
/// string, one of the texts the description names (`failed: ...` for each failure's why).
#[cfg(feature = "openapi")]
#[test]
fn the_schema_of_a_delete_result_is_its_text() {
    use utoipa::PartialSchema;
    let schema = serde_json::to_value(DeleteResult::schema()).unwrap();
    assert_eq!(schema["type"], "string", "{schema}");
    let described = schema["description"].as_str().expect("a description");
    let why = "the reason";
    for result in [
        DeleteResult::Deleted,
        DeleteResult::WouldDelete,
        DeleteResult::Changed,
        DeleteResult::Failed(why.into()),
        DeleteResult::NotStarted(why.into()),
    ] {
        let text = serde_json::to_value(&result).unwrap();
        let text = text.as_str().expect("a string");
        let named = match text.strip_suffix(why) {
            Some(head) => format!("`{head}...`"),
            None => format!("`{text}`"),
        };
        assert!(described.contains(&named), "{named} in {described}");
    }
}

/// The fake cluster, with every whole-object list it is asked for: its kind and label selector.
struct Listing {
    fake: Fake,
    lists: Mutex<Vec<(String, String)>>,
}

#[async_trait]
impl ObjectCluster for Listing {
    async fn list_metadata(
        &self,
        kind: &Kind,
        ns: &str,
        selector: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        self.fake
            .list_metadata(kind, ns, selector, limit, token)
            .await
    }
    async fn get_object(
        &self,
        kind: &Kind,
        ns: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        self.fake.get_object(kind, ns, name).await
    }
    async fn list_objects(
        &self,
        kind: &Kind,
        ns: &str,
        selector: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let list = (kind.kind.clone(), selector.to_owned());
        self.lists.lock().unwrap().push(list);
        self.fake
            .list_objects(kind, ns, selector, limit, token)
            .await
    }
    async fn delete_object(
        &self,
        kind: &Kind,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        self.fake.delete_object(kind, ns, name, pre, dry_run).await
    }
}

/// Each kind's objects to delete are read ahead by one list of that kind, within the run's
/// selection and for the ids of that kind's deletes only: gone sessions e (a Deployment and a
/// `Session`), f (a Service) and g (a Deployment) make one list of Deployments for e and g, one
/// of Services for f, and, in the last phase, one of `Session`s for e; no object is read by a
/// GET.
#[test]
fn each_kind_is_read_ahead_by_the_ids_of_its_own_deletes_within_the_selection() {
    let f = fake(false);
    f.objects
        .lock()
        .unwrap()
        .extend([object("Service", "f"), object("Deployment", "g")]);
    let cluster = Listing {
        fake: f,
        lists: Mutex::new(Vec::new()),
    };
    let kept = Kept::default();
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    let report = block_on(run(
        &cluster,
        &db,
        kept.keep(),
        &cfg(),
        NOW,
        go_on(&flags, false),
    ))
    .unwrap();
    assert_eq!(results(&report), ["deleted"; 4]);
    assert!(cluster.fake.gets.lock().unwrap().is_empty());
    let within = |ids: &str| format!("app=streamspace-session,session in ({ids})");
    assert_eq!(
        *cluster.lists.lock().unwrap(),
        [
            ("Deployment".to_owned(), within("e,g")),
            ("Service".to_owned(), within("f")),
            ("Session".to_owned(), within("e")),
        ]
    );
    assert_eq!(kept.archives.lock().unwrap().len(), 4);
}

/// A store that is unavailable (refused, or silent past its timeout) is asked once per run: the
/// first object's receipt fails, and no other object is started (nor waits for it), each said
/// `not started` naming why; the run fails. The volumes' review, which needs the store alone,
/// asks it no more either, and writes nothing.
#[test]
fn an_unavailable_store_is_asked_once_and_nothing_more_is_started() {
    struct Counting<'a>(&'a Kept, std::sync::atomic::AtomicUsize);
    #[async_trait]
    impl Store for Counting<'_> {
        async fn load_ledger(&self, _: &str, _: &str) -> Result<crate::PreviousLedger, StoreError> {
            unreachable!()
        }
        async fn save_ledger(&self, _: &str, _: &str, _: &crate::Ledger) -> Result<(), StoreError> {
            unreachable!()
        }
        async fn put_receipt(&self, _: &Receipt) -> Result<(), StoreError> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(StoreError::Unavailable(
                "gc's store: the store did not answer within 30s".into(),
            ))
        }
        async fn get_receipt(&self, c: &str, u: &str) -> Result<Option<Receipt>, StoreError> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.0.get_receipt(c, u).await
        }
    }
    let kept = kept_with(
        vec![gc_kept(
            "due",
            ("claim-due", "Released"),
            ("claim-due", "streamspace"),
            NOW - 30.0 * DAY,
            None,
        )],
        false,
    );
    let store = Counting(&kept, std::sync::atomic::AtomicUsize::new(0));
    let keep = Keep {
        store: &store,
        concurrency: 1,
        ..kept.keep()
    };
    let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    let f = fake(false);
    let report = block_on(run(&f, &db, keep, &cfg(), NOW, go_on(&flags, false))).unwrap();
    assert_eq!(store.1.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(f.deleted.lock().unwrap().is_empty());
    let results = results(&report);
    assert!(
        results[0].contains("did not answer within 30s"),
        "{results:?}"
    );
    assert!(results.len() > 1, "{results:?}");
    for later in &results[1..] {
        assert_eq!(
            later,
            "not started: store unavailable: gc's store: the store did not answer within 30s, \
             earlier in this run: the next run judges it again"
        );
    }
    assert_eq!(report.failures, 1);
    assert_eq!(volume_lines(&report), ["streamspace due skipped"]);
    let volume = kept.volumes.lock().unwrap()["due"].clone();
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
}

/// A review by a run that lost its lock gives nothing back and says so: the volume whose window
/// passed keeps `Retain`, its line a failure naming the lost lock.
#[test]
fn a_review_that_lost_its_lock_gives_nothing_back() {
    let due = gc_kept(
        "due",
        ("claim-due", "Released"),
        ("claim-due", "streamspace"),
        NOW - 8.0 * DAY,
        None,
    );
    let kept = kept_with(vec![due], false);
    let lost = [AtomicBool::new(true), AtomicBool::new(false)];
    let report = block_on(review(&kept, &kept, &cfg(), NOW, go_on(&lost, false)));
    assert_eq!(
        volume_lines(&report),
        ["streamspace due delete failed: not deleted: the run lock was lost"]
    );
    assert_eq!(report.failures, 1);
    let volume = kept.volumes.lock().unwrap()["due"].clone();
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
}

/// The claim a restore created, found gone before it was bound: the review notes it on gc's
/// record (its window starts now) and holds the volume; a note that cannot be written is a
/// failure of the run, said on the volume's line, and nothing else is written.
#[test]
fn a_restored_claim_found_gone_is_noted_and_a_note_refused_is_a_failure() {
    let restored = || {
        let mut v = gc_kept(
            "pv",
            ("new", "Released"),
            ("claim-old", "streamspace"),
            NOW - 2.0 * DAY,
            Some("new"),
        );
        v["spec"]["claimRef"] = json!({"namespace": "streamspace", "name": "c", "uid": "new"});
        v
    };
    for refused in [false, true] {
        let kept = kept_with(vec![restored()], refused);
        *kept.claims.lock().unwrap() = Some(Default::default());
        let flags = [AtomicBool::new(false), AtomicBool::new(false)];
        let report = block_on(review(&kept, &kept, &cfg(), NOW, go_on(&flags, false)));
        let line = &volume_lines(&report)[0];
        let record = record_on(&kept, "pv");
        if refused {
            assert!(line.starts_with("streamspace pv held failed: "), "{line}");
            assert_eq!(report.failures, 1);
            assert_eq!(record.gone_at, None);
        } else {
            assert_eq!(line, "streamspace pv held");
            assert_eq!(report.failures, 0);
            assert_eq!(record.gone_at, Some(NOW));
        }
    }
}
