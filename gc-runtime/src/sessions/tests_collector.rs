//! The session collector's run invariants, on `gc-core`'s fakes with faults injected at each
//! port, without an API server: nothing is written before the lock is held, nothing after it is
//! lost; a sink that does not take writes, a database that fails and another run's lock each
//! delete nothing and say why; a stop leaves the rest not started; a dry run takes no Lease,
//! archives nothing and posts no Event; the instant to judge at is checked; a restore creates
//! each object once, from its verified archive, claims first and on their kept volumes, waiting
//! for a volume as long as asked and no longer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gc_core::ports::StoreError;
use gc_core::sessions::SessionConfig;
use gc_core::sessions::run::SessionReport;
use gc_core::testing::{Kept, SessionTable, session_config};

use super::*;
use crate::testing::{TestCluster, TestSink};
use crate::{FailureKind, LockOptions, Outcome, StopToken};

/// When every run judges: ten days after the fakes' objects were created.
const NOW: f64 = 1_795_953_600.0;

/// What the audit log was given: each record as `name result`, and each refusal's reason.
#[derive(Default)]
struct Recorded {
    judged: Vec<String>,
    refused: Vec<String>,
}

impl Audit for Recorded {
    fn judged(
        &mut self,
        _cfg: &SessionConfig,
        report: &SessionReport,
        _time: &str,
    ) -> crate::Result<()> {
        for r in &report.records {
            let result = r.result.as_ref().map_or("-".into(), ToString::to_string);
            self.judged
                .push(format!("{} {result}", r.judged.resource.name));
        }
        Ok(())
    }
    fn refused(&mut self, line: &RefusedLine<'_>) -> crate::Result<()> {
        self.refused.push(line.reason.clone());
        Ok(())
    }
}

/// A run's world: the cluster, the receipts and archives, the sessions the database holds.
struct World {
    cluster: TestCluster,
    kept: Arc<Kept>,
    live: Result<Vec<&'static str>, StoreError>,
    sink_refused: bool,
}

impl World {
    fn new() -> Self {
        let kept = Arc::new(Kept::default());
        Self {
            cluster: TestCluster::new(Arc::clone(&kept)),
            kept,
            live: Ok(vec!["a", "b", "c", "d"]),
            sink_refused: false,
        }
    }

    /// One collection of the namespace with `settings` (judged at [`NOW`]): how it ended, and
    /// what the audit log was given.
    async fn collect(&self, settings: Settings) -> (Outcome, String, Recorded) {
        let (run, audit) = self.collect_run(settings).await;
        let why = run
            .failure
            .as_ref()
            .map_or(String::new(), |f| format!("{:#}", f.error));
        (run.outcome(), why, audit)
    }

    /// One collection of the namespace with `settings` (judged at [`NOW`]): its run (its
    /// metrics included), and what the audit log was given.
    async fn collect_run(&self, settings: Settings) -> (NamespaceRun<SessionReport>, Recorded) {
        let table = SessionTable(self.live.clone(), Mutex::new(0));
        let sink = TestSink(Arc::clone(&self.kept), self.sink_refused);
        let parts = (self.cluster.clone(), table, Arc::clone(&self.kept), sink);
        let settings = Settings {
            now: Some(NOW),
            ..settings
        };
        let collector = SessionCollector::new(parts, settings).unwrap();
        let mut audit = Recorded::default();
        let mut runs = collector.collect(&[session_config()], &mut audit).await;
        (runs.remove(0), audit)
    }

    fn archives(&self) -> usize {
        self.kept.archives.lock().unwrap().len()
    }

    fn receipts(&self) -> usize {
        self.kept.receipts.lock().unwrap().len()
    }

    fn events(&self) -> Vec<String> {
        self.cluster.events.lock().unwrap().clone()
    }
}

fn live() -> Settings {
    Settings {
        live: true,
        ..Settings::default()
    }
}

fn failed() -> Outcome {
    Outcome::Failed {
        stage: crate::Stage::Run,
        kind: FailureKind::Run,
    }
}

/// A live run: the orphans' manifests archived with their receipts, then deleted (not in dry
/// run) under the Lease, which is released at the end; one Event on the session collected, on
/// its `Session` object, naming each object deleted.
#[tokio::test(start_paused = true)]
async fn a_live_run_deletes_each_orphan_archived_under_its_lock_and_releases_it() {
    let world = World::new();
    let (outcome, why, audit) = world.collect(live()).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    let deleted = [("e-Deployment".into(), false), ("e-Session".into(), false)];
    assert_eq!(world.cluster.deleted(), deleted);
    assert_eq!((world.archives(), world.receipts()), (2, 2));
    let lease = world.cluster.lease.state();
    assert_eq!((lease.acquires, lease.holder.as_deref()), (1, None));
    assert_eq!(audit.judged.len(), 10);
    assert!(audit.judged.contains(&"e-Session deleted".to_owned()));
    assert!(audit.refused.is_empty());
    let collected = "SessionCollected: session e: deleted Deployment/e-Deployment, \
                     Session.stream.space/e-Session (no session e in the database)";
    assert_eq!(world.events(), [collected]);
}

/// With `event_per_object`, the Event on each object deleted, as before Events were grouped.
#[tokio::test(start_paused = true)]
async fn an_event_per_object_when_asked() {
    let world = World::new();
    let settings = Settings {
        event_per_object: true,
        ..live()
    };
    let (outcome, why, _) = world.collect(settings).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    let deleted = "Deleted: deleted (no session e in the database)";
    assert_eq!(world.events(), [deleted, deleted]);
}

/// The default settings are a dry run: no Lease, every delete a server-side dry run, no archive
/// or receipt, and no Event, although Events are on.
#[tokio::test(start_paused = true)]
async fn the_default_is_a_dry_run_that_takes_no_lease_writes_nothing_and_posts_nothing() {
    let world = World::new();
    let settings = Settings::default();
    assert!(settings.events && !settings.live);
    let (outcome, why, audit) = world.collect(settings).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    let deleted = [("e-Deployment".into(), true), ("e-Session".into(), true)];
    assert_eq!(world.cluster.deleted(), deleted);
    assert_eq!((world.archives(), world.receipts()), (0, 0));
    assert_eq!(world.cluster.lease.state().acquires, 0);
    assert!(world.events().is_empty());
    assert!(audit.judged.contains(&"e-Session would delete".to_owned()));
    // Nor when it fails: a dry run changes nothing, Events included.
    let mut refused = World::new();
    refused.sink_refused = true;
    let (outcome, _, _) = refused.collect(Settings::default()).await;
    assert_eq!(outcome, failed());
    assert!(refused.events().is_empty(), "{:?}", refused.events());
}

/// Another run holds the namespace's lock for the whole wait: nothing is read, archived or
/// deleted; the audit log and the failure say why; no Event (the other run is working).
#[tokio::test(start_paused = true)]
async fn another_runs_lock_deletes_nothing() {
    let world = World::new();
    world.cluster.lease.taken_by("run-b");
    let settings = Settings {
        lock: LockOptions {
            wait: Duration::from_secs(5),
            lease_seconds: 30,
        },
        ..live()
    };
    let (outcome, why, audit) = world.collect(settings).await;
    assert_eq!(outcome, failed());
    let held = "another run holds lease gc-sessions in namespace streamspace; waited 5s; \
                nothing was changed";
    assert_eq!(why, held);
    assert_eq!(audit.refused, [held]);
    assert!(audit.judged.is_empty());
    assert!(world.cluster.deleted().is_empty());
    assert_eq!(world.archives(), 0);
    assert_eq!(world.cluster.lease.state().holder.as_deref(), Some("run-b"));
}

/// A sink that does not take writes: proven before any delete, so nothing is deleted; said in
/// the audit log, the failure and a Warning; the lock is released.
#[tokio::test(start_paused = true)]
async fn a_sink_that_takes_no_writes_deletes_nothing() {
    let mut world = World::new();
    world.sink_refused = true;
    let (outcome, why, audit) = world.collect(live()).await;
    assert_eq!(outcome, failed());
    assert!(
        why.starts_with("cannot use the archive sink memory: nothing deleted: "),
        "{why}"
    );
    assert_eq!(audit.refused, std::slice::from_ref(&why));
    assert!(world.cluster.deleted().is_empty());
    assert_eq!(world.cluster.lease.state().holder, None);
    let events = world.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].contains("nothing deleted"), "{events:?}");
}

/// The database fails: nothing is deleted (its failure is no answer), the volumes' review still
/// runs (audited before the refusal), and the failure is the run's, not the data's.
#[tokio::test(start_paused = true)]
async fn a_database_that_fails_deletes_nothing() {
    let mut world = World::new();
    world.live = Err(StoreError::Unavailable("connection refused".into()));
    let (outcome, why, audit) = world.collect(live()).await;
    assert_eq!(outcome, failed());
    assert!(why.contains("session database: "), "{why}");
    assert!(why.contains("nothing deleted"), "{why}");
    assert_eq!(audit.refused.len(), 1);
    assert!(world.cluster.deleted().is_empty());
    assert_eq!(world.archives(), 0);
    assert_eq!(world.cluster.lease.state().holder, None);
}

/// The lock is lost while the run deletes (the process frozen between two deletes, its
/// renewals failing): the delete in flight stands, nothing is written after it, what was done
/// is audited, the run fails saying so, and no Event is posted after the loss.
#[tokio::test(start_paused = true)]
async fn a_lock_lost_mid_run_writes_nothing_more() {
    let mut world = World::new();
    let lease = world.cluster.lease.clone();
    world.cluster.before_delete = Arc::new(move |sent| {
        if sent == 0 {
            lease.state().unreachable = true;
        }
    });
    world.cluster.delete_takes = Duration::from_secs(25);
    let (outcome, why, audit) = world.collect(live()).await;
    assert_eq!(outcome, failed());
    assert!(
        why.starts_with("lost the run lock gc-sessions in namespace streamspace: the run lock was not renewed for 20s"),
        "{why}"
    );
    assert_eq!(world.cluster.deleted(), [("e-Deployment".into(), false)]);
    assert_eq!(world.archives(), 1, "no archive after the loss");
    assert!(audit.judged.contains(&"e-Deployment deleted".to_owned()));
    let lost = "e-Session failed: not deleted: the run lock was lost";
    assert!(
        audit.judged.contains(&lost.to_owned()),
        "{:?}",
        audit.judged
    );
    assert_eq!(audit.refused.len(), 1);
    assert!(world.events().is_empty(), "{:?}", world.events());
}

/// Asked to stop while deleting: the delete in flight stands, the next is not started, the run
/// ends stopped (neither a success nor a failure) and releases its lock.
#[tokio::test(start_paused = true)]
async fn a_stop_finishes_the_delete_in_flight_and_starts_no_other() {
    let mut world = World::new();
    let token = StopToken::new();
    let stopper = token.clone();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    world.cluster.before_delete = Arc::new(move |_| {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            stopper.stop("SIGTERM");
        }
    });
    let settings = Settings {
        cancel: Arc::new(token),
        ..live()
    };
    let (outcome, why, audit) = world.collect(settings).await;
    assert_eq!(outcome, Outcome::Stopped, "{why}");
    assert!(
        why.starts_with("stopped by SIGTERM: 1 delete(s) not started"),
        "{why}"
    );
    assert_eq!(world.cluster.deleted(), [("e-Deployment".into(), false)]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let not_started = "e-Session not started: the process is stopping; the next run judges it \
                       again";
    assert!(
        audit.judged.contains(&not_started.to_owned()),
        "{:?}",
        audit.judged
    );
    assert_eq!(world.cluster.lease.state().holder, None);
}

/// The instant to judge at is seconds since the epoch, and a live run's is not in the future
/// (it would shorten the grace period) unless allowed.
#[test]
fn the_instant_to_judge_at_is_checked() {
    let at = |now: f64, live: bool, allow_future_now: bool| Settings {
        now: Some(now),
        live,
        allow_future_now,
        ..Settings::default()
    };
    let future = crate::clock::now() + 3600.0;
    let millis = NOW * 1000.0;
    assert_eq!(
        at(millis, false, true).check(),
        Err(SettingsError::NotSeconds(millis))
    );
    assert_eq!(
        at(0.0, false, true).check(),
        Err(SettingsError::NotSeconds(0.0))
    );
    assert!(at(f64::NAN, false, true).check().is_err());
    assert_eq!(
        at(future, true, false).check(),
        Err(SettingsError::Future(future))
    );
    assert_eq!(at(future, false, false).check(), Ok(()));
    assert_eq!(at(future, true, true).check(), Ok(()));
    assert_eq!(at(NOW, true, false).check(), Ok(()));
    assert_eq!(Settings::default().check(), Ok(()));
}

/// Objects at once: 1 to 64; none, or more, is refused saying what it counts.
#[test]
fn the_concurrency_is_checked() {
    let with = |concurrency| Settings {
        concurrency,
        ..Settings::default()
    };
    for refused in [0, 65, usize::MAX] {
        let error = with(refused).check().unwrap_err();
        assert_eq!(error, SettingsError::Concurrency(refused));
        assert!(
            error
                .to_string()
                .starts_with(&format!("concurrency {refused} is not between 1 and 64")),
            "{error}"
        );
    }
    for fine in [1, 8, 64] {
        assert_eq!(with(fine).check(), Ok(()));
    }
}

/// A plan judges what a run would, and takes no Lease, writes nothing and posts nothing, even
/// in a live collector; a guard's refusal is no plan.
#[tokio::test(start_paused = true)]
async fn a_plan_judges_and_writes_nothing() {
    let world = World::new();
    let table = SessionTable(world.live.clone(), Mutex::new(0));
    let sink = TestSink(Arc::clone(&world.kept), false);
    let parts = (world.cluster.clone(), table, Arc::clone(&world.kept), sink);
    let settings = Settings {
        now: Some(NOW),
        ..live()
    };
    let collector = SessionCollector::new(parts, settings).unwrap();
    let planned = collector.plan(&session_config()).await.unwrap();
    let doomed: Vec<&str> = (planned.plan.judged.iter())
        .filter(|j| {
            matches!(
                j.decision,
                gc_core::sessions::SessionDecision::Delete { .. }
            )
        })
        .map(|j| j.resource.name.as_str())
        .collect();
    assert_eq!(doomed, ["e-Deployment", "e-Session"]);
    assert!(world.cluster.deleted().is_empty());
    assert_eq!((world.archives(), world.receipts()), (0, 0));
    assert_eq!(world.cluster.lease.state().acquires, 0);
    assert!(world.events().is_empty());
    // Every session gone from the database: the guard refuses, and says so.
    let (cluster, kept) = (world.cluster.clone(), Arc::clone(&world.kept));
    let empty = SessionTable(Ok(Vec::new()), Mutex::new(0));
    let parts = (cluster, empty, Arc::clone(&kept), TestSink(kept, false));
    let settings = Settings {
        now: Some(NOW),
        ..Settings::default()
    };
    let refused = SessionCollector::new(parts, settings).unwrap();
    let error = refused.plan(&session_config()).await.unwrap_err();
    assert_eq!(error.kind(), FailureKind::Data, "{error:#}");
    let shown = format!("{error:#}");
    assert!(
        shown.contains(": no plan (`override_guard` shows"),
        "{shown}"
    );
    assert!(shown.contains("refused: 5 of 5 sessions"), "{shown}");
}

/// A restore of session `e`'s objects in the fakes' namespace, waiting for no binding.
fn restore_e() -> crate::restore::RestoreRequest {
    let cfg = session_config();
    crate::restore::RestoreRequest {
        cluster_id: cfg.cluster_id,
        namespace: cfg.namespace,
        kinds: cfg.kinds,
        sessions: vec!["e".into()],
        bind_wait: Duration::ZERO,
    }
}

impl World {
    /// A restore through a collector of this world's parts, built with `settings` and no
    /// session directory (a restore reads none): each object's `name result`.
    async fn restore(
        &self,
        settings: Settings,
        request: &crate::restore::RestoreRequest,
    ) -> crate::Result<Vec<String>> {
        let sink = TestSink(Arc::clone(&self.kept), self.sink_refused);
        let parts = (self.cluster.clone(), (), Arc::clone(&self.kept), sink);
        let collector = SessionCollector::new(parts, settings).unwrap();
        let restored = collector.restore(request).await?;
        Ok(restored
            .iter()
            .map(|r| format!("{} {}", r.name, r.result))
            .collect())
    }

    /// The receipts and archives kept so far, kept from now on by a store and sink that
    /// `fault` changes (the cluster's volumes stay where they are).
    fn kept_as(&mut self, fault: impl FnOnce(&mut Kept)) {
        let mut kept = Kept {
            archives: Mutex::new(self.kept.archives.lock().unwrap().clone()),
            receipts: Mutex::new(self.kept.receipts.lock().unwrap().clone()),
            ..Kept::default()
        };
        fault(&mut kept);
        self.kept = Arc::new(kept);
    }

    fn created(&self) -> Vec<(String, bool)> {
        self.cluster.created.lock().unwrap().clone()
    }
}

/// A live collection undone: each object of the session created again from its archive, read
/// back and verified, without its old uid; an Event on each; the restored objects are found by
/// the next plan again.
#[tokio::test(start_paused = true)]
async fn a_restore_creates_each_deleted_object_again_from_its_verified_archive() {
    let world = World::new();
    let (outcome, why, _) = world.collect(live()).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    world.cluster.finish_deletes();
    let events_before = world.events().len();
    let restored = world.restore(live(), &restore_e()).await.unwrap();
    // Newest archive first (claims would come before all).
    assert_eq!(restored, ["e-Session created", "e-Deployment created"]);
    let created = [("e-Session".into(), false), ("e-Deployment".into(), false)];
    assert_eq!(world.created(), created);
    let objects = world.cluster.objects.objects.lock().unwrap().clone();
    let back = objects
        .iter()
        .find(|(_, o)| o["metadata"]["name"] == "e-Session");
    let back = &back.expect("e-Session created again").1;
    assert_eq!(back["metadata"]["uid"], "u-new-e-Session");
    assert_eq!(back["metadata"]["labels"]["session"], "e");
    let events = world.events();
    assert_eq!(events.len(), events_before + 2, "{events:?}");
    assert!(
        events
            .last()
            .unwrap()
            .starts_with("Restored: created again from archive mem://")
    );
    // Restored again: each object exists now, and is left as it is.
    let again = world.restore(live(), &restore_e()).await.unwrap();
    assert_eq!(again, ["e-Session exists", "e-Deployment exists"]);
    assert_eq!(world.created().len(), 2);
}

/// An archive that does not match its receipt restores nothing of its session: every object
/// says why, nothing is created, no Event.
#[tokio::test(start_paused = true)]
async fn an_archive_that_fails_verification_restores_nothing_of_its_session() {
    let mut world = World::new();
    world.collect(live()).await;
    world.cluster.finish_deletes();
    let events_before = world.events().len();
    world.kept_as(|k| k.tampered = true);
    let restored = world.restore(live(), &restore_e()).await.unwrap();
    assert_eq!(restored.len(), 2);
    for line in &restored {
        assert!(
            line.contains("failed: not restored: an archive of the session failed verification"),
            "{line}"
        );
    }
    assert!(world.created().is_empty());
    assert_eq!(world.events().len(), events_before);
}

/// The default settings restore as a dry run: each create a server-side dry run, nothing
/// created, no Event; a session never archived fails saying where gc looked.
#[tokio::test(start_paused = true)]
async fn a_dry_run_restore_creates_nothing_and_a_session_never_archived_says_where_it_looked() {
    let world = World::new();
    world.collect(live()).await;
    world.cluster.finish_deletes();
    let events_before = world.events().len();
    let restored = world.restore(Settings::default(), &restore_e()).await;
    let would = ["e-Session would create", "e-Deployment would create"];
    assert_eq!(restored.unwrap(), would);
    let dry = [("e-Session".into(), true), ("e-Deployment".into(), true)];
    assert_eq!(world.created(), dry);
    assert_eq!(world.events().len(), events_before);
    let never = crate::restore::RestoreRequest {
        sessions: vec!["a".into()],
        ..restore_e()
    };
    let restored = world.restore(live(), &never).await.unwrap();
    let why =
        " failed: no archive of session a in namespace streamspace of cluster primary in memory";
    assert_eq!(restored, [why]);
}

/// Receipts that cannot be read restore nothing and say why; a request that is not valid is
/// refused before anything is read.
#[tokio::test(start_paused = true)]
async fn unreadable_receipts_or_an_invalid_request_restore_nothing() {
    let mut world = World::new();
    world.collect(live()).await;
    world.cluster.finish_deletes();
    let empty = crate::restore::RestoreRequest {
        sessions: vec![String::new()],
        ..restore_e()
    };
    let refused = world.restore(live(), &empty).await.unwrap_err();
    assert_eq!(refused.kind(), FailureKind::Usage);
    let system = crate::restore::RestoreRequest {
        namespace: "kube-system".into(),
        ..restore_e()
    };
    let refused = world.restore(live(), &system).await.unwrap_err();
    assert_eq!(refused.kind(), FailureKind::Usage, "{refused:#}");
    world.kept_as(|k| k.refuse_receipts = true);
    let restored = world.restore(live(), &restore_e()).await.unwrap();
    assert_eq!(restored.len(), 1);
    let why = " failed: cannot list the receipts: ";
    assert!(
        restored[0].starts_with(why) && restored[0].ends_with("database down"),
        "{restored:?}"
    );
    assert!(world.created().is_empty());
}

/// Session e's claim too, bound to the volume `pv-e` (reclaim policy `Delete`), which a live
/// run keeps (`Retain`) before it deletes the claim.
fn with_claim(world: &World) {
    let (kind, mut claim) = gc_core::testing::session_object("PersistentVolumeClaim", "e");
    claim["spec"] = serde_json::json!({"volumeName": "pv-e"});
    world
        .cluster
        .objects
        .objects
        .lock()
        .unwrap()
        .push((kind, claim));
    let volume = serde_json::json!({
        "metadata": {"name": "pv-e", "uid": "uid-pv-e", "resourceVersion": "1"},
        "spec": {
            "claimRef": {"uid": "u-e-PersistentVolumeClaim"},
            "persistentVolumeReclaimPolicy": "Delete",
        },
        "status": {"phase": "Bound"},
    });
    let mut volumes = world.cluster.kept.volumes.lock().unwrap();
    volumes.insert("pv-e".into(), volume);
}

/// What Kubernetes' volume controllers do to `pv-e`: its phase now `phase` (a write: its
/// resourceVersion moves).
fn set_phase(kept: &Kept, phase: &str) {
    let mut volumes = kept.volumes.lock().unwrap();
    let volume = volumes.get_mut("pv-e").unwrap();
    volume["status"]["phase"] = phase.into();
    let version: u64 = volume["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    volume["metadata"]["resourceVersion"] = (version + 1).to_string().into();
}

impl World {
    /// A restore through a collector of this world's parts (see [`World::restore`]): what came
    /// of each object, the whole answer; a restore that has not ended after a minute fails.
    async fn restored(
        &self,
        settings: Settings,
        request: &crate::restore::RestoreRequest,
    ) -> Vec<crate::restore::Restored> {
        let sink = TestSink(Arc::clone(&self.kept), self.sink_refused);
        let parts = (self.cluster.clone(), (), Arc::clone(&self.kept), sink);
        let collector = SessionCollector::new(parts, settings).unwrap();
        let restored = collector.restore(request);
        let restored = tokio::time::timeout(Duration::from_secs(60), restored).await;
        restored.expect("a restore ends").unwrap()
    }

    /// The volume `pv-e` as the cluster holds it now.
    fn volume(&self) -> serde_json::Value {
        self.cluster.kept.volumes.lock().unwrap()["pv-e"].clone()
    }

    /// The receipt of `name` moved to the oldest: archived before every other object.
    fn archived_first(&self, name: &str) {
        let mut receipts = self.kept.receipts.lock().unwrap();
        let at = receipts.iter().position(|r| r.name == name).unwrap();
        let receipt = receipts.remove(at);
        receipts.insert(0, receipt);
    }
}

/// A restore of session e waiting up to `seconds` for its claim's volume.
fn restore_e_waiting(seconds: u64) -> crate::restore::RestoreRequest {
    crate::restore::RestoreRequest {
        bind_wait: Duration::from_secs(seconds),
        ..restore_e()
    }
}

/// Each restored object as `name result`, with its note when it has one.
fn lines(restored: &[crate::restore::Restored]) -> Vec<String> {
    (restored.iter())
        .map(|r| match &r.note {
            Some(note) => format!("{} {} ({note})", r.name, r.result),
            None => format!("{} {}", r.name, r.result),
        })
        .collect()
}

/// A claim whose volume was kept is created first (whatever order its session was archived in),
/// once Kubernetes has released the volume (waited for), on that volume; once the new claim is
/// bound to it, the volume gets its reclaim policy back. Restored again, the claim exists on its
/// volume and is left as it is, with nothing to say; the other objects are created as they were.
#[tokio::test(start_paused = true)]
async fn a_claim_is_created_first_on_its_kept_volume_which_gets_its_policy_back_once_bound() {
    let world = World::new();
    with_claim(&world);
    let (outcome, why, _) = world.collect(live()).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    world.cluster.finish_deletes();
    assert_eq!(
        world.volume()["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
    world.archived_first("e-PersistentVolumeClaim");
    // Kubernetes releases the volume after 1.25 s, and binds it to the new claim 2 s later.
    let kept = Arc::clone(&world.cluster.kept);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1250)).await;
        set_phase(&kept, "Released");
        tokio::time::sleep(Duration::from_secs(2)).await;
        set_phase(&kept, "Bound");
    });
    let restored = world.restored(live(), &restore_e_waiting(5)).await;
    let given_back = "on its volume pv-e, bound again: reclaim policy Delete given back";
    assert_eq!(
        lines(&restored),
        [
            format!("e-PersistentVolumeClaim created ({given_back})"),
            "e-Session created".into(),
            "e-Deployment created".into(),
        ]
    );
    assert_eq!(
        world.created()[0],
        ("e-PersistentVolumeClaim".into(), false)
    );
    let volume = world.volume();
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(
        volume["spec"]["claimRef"]["uid"],
        "u-new-e-PersistentVolumeClaim"
    );
    assert!(volume["metadata"]["labels"]["gc.example.com/retained"].is_null());
    let objects = world.cluster.objects.objects.lock().unwrap().clone();
    let claim = (objects.iter()).find(|(kind, o)| {
        kind == "PersistentVolumeClaim" && o["metadata"]["name"] == "e-PersistentVolumeClaim"
    });
    let claim = &claim.expect("the claim created again, as a claim").1;
    assert_eq!(claim["spec"]["volumeName"], "pv-e");
    // Restored again: every object exists; the claim is on its volume, nothing to say.
    let again = world.restored(live(), &restore_e_waiting(5)).await;
    let exists = [
        "e-PersistentVolumeClaim exists",
        "e-Session exists",
        "e-Deployment exists",
    ];
    assert_eq!(lines(&again), exists);
    assert_eq!(world.created().len(), 3);
}

/// A kept volume that Kubernetes does not release within `bind_wait` restores no claim on it
/// (restore again shortly); one released but not bound to the new claim within the wait keeps
/// `Retain`, and the answer says who gives its policy back. Neither waits longer than asked.
#[tokio::test(start_paused = true)]
async fn a_volume_not_released_or_not_bound_within_the_wait_is_said_and_kept() {
    let world = World::new();
    with_claim(&world);
    world.collect(live()).await;
    world.cluster.finish_deletes();
    let started = tokio::time::Instant::now();
    let restored = world.restored(live(), &restore_e_waiting(2)).await;
    assert!(started.elapsed() >= Duration::from_secs(2));
    let not_released = "e-PersistentVolumeClaim failed: not restored: its volume pv-e still \
                        shows bound to the deleted claim (uid u-e-PersistentVolumeClaim): \
                        Kubernetes has not released it yet after `bind_wait` 2: restore again \
                        shortly";
    assert_eq!(lines(&restored)[0], not_released);
    assert_eq!(
        world.volume()["spec"]["claimRef"]["uid"],
        "u-e-PersistentVolumeClaim"
    );
    // Released now, but never bound to the new claim: created on it, the volume kept.
    let world = World::new();
    with_claim(&world);
    world.collect(live()).await;
    world.cluster.finish_deletes();
    set_phase(&world.cluster.kept, "Released");
    let started = tokio::time::Instant::now();
    let restored = world.restored(live(), &restore_e_waiting(2)).await;
    assert!(started.elapsed() >= Duration::from_secs(2));
    let kept = "e-PersistentVolumeClaim created (on its volume pv-e, which keeps Retain until \
                this claim is bound to it (then the next run, or restore again, gives its policy \
                back))";
    assert_eq!(lines(&restored)[0], kept);
    let volume = world.volume();
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(
        volume["spec"]["claimRef"]["uid"],
        "u-new-e-PersistentVolumeClaim"
    );
}

/// Another claim that took the archived claim's name while gc still keeps its volume (here one
/// that names the volume but that the volume does not name): a conflict, and nothing of the
/// session is created (its Deployment would mount the other claim).
#[tokio::test(start_paused = true)]
async fn a_claim_of_the_same_name_not_on_the_kept_volume_restores_nothing_of_the_session() {
    let world = World::new();
    with_claim(&world);
    world.collect(live()).await;
    world.cluster.finish_deletes();
    set_phase(&world.cluster.kept, "Released");
    world.archived_first("e-PersistentVolumeClaim");
    let (kind, mut other) = gc_core::testing::session_object("PersistentVolumeClaim", "e");
    other["metadata"]["uid"] = "u-other".into();
    other["spec"] = serde_json::json!({"volumeName": "pv-e"});
    world
        .cluster
        .objects
        .objects
        .lock()
        .unwrap()
        .push((kind, other));
    let restored = world.restored(live(), &restore_e_waiting(0)).await;
    let lines = lines(&restored);
    assert!(
        lines[0].starts_with(
            "e-PersistentVolumeClaim failed: conflict: another claim e-PersistentVolumeClaim \
             (uid u-other, on volume pv-e) has the archived claim's name"
        ),
        "{lines:?}"
    );
    let not = "failed: not restored: its claim e-PersistentVolumeClaim conflicts (see its line)";
    assert_eq!(
        lines[1..],
        [format!("e-Session {not}"), format!("e-Deployment {not}")]
    );
    assert!(world.created().is_empty());
    assert_eq!(
        world.volume()["spec"]["claimRef"]["uid"],
        "u-e-PersistentVolumeClaim"
    );
}

/// Each object is restored once, from its newest archive, however often it was archived; objects
/// of one kind, or of one name, are told apart by kind, `apiVersion` and name together. An object
/// that exists and is being deleted is left as it is, and the answer says to restore again later.
#[tokio::test(start_paused = true)]
async fn each_object_is_restored_once_told_apart_by_kind_and_name() {
    let world = World::new();
    for kind in ["Deployment", "Service"] {
        let (kind, mut object) = gc_core::testing::session_object(kind, "e");
        object["metadata"]["name"] = "e-web".into();
        object["metadata"]["uid"] = format!("u-e-web-{kind}").into();
        world
            .cluster
            .objects
            .objects
            .lock()
            .unwrap()
            .push((kind, object));
    }
    world.collect(live()).await;
    world.cluster.finish_deletes();
    // Each archived again since (the same archives: a run that met them again).
    {
        let mut receipts = world.kept.receipts.lock().unwrap();
        let again = receipts.clone();
        receipts.extend(again);
    }
    let restored = world.restored(live(), &restore_e()).await;
    let mut made: Vec<String> = (restored.iter())
        .map(|r| format!("{} {} {}", r.kind, r.name, r.result))
        .collect();
    made.sort();
    let want = [
        "Deployment e-Deployment created",
        "Deployment e-web created",
        "Service e-web created",
        "Session e-Session created",
    ];
    assert_eq!(made, want);
    assert_eq!(world.created().len(), 4);
    // Being deleted (a finalizer holds it): left as it is, and said.
    {
        let mut objects = world.cluster.objects.objects.lock().unwrap();
        let session = (objects.iter_mut())
            .find(|(_, o)| o["metadata"]["name"] == "e-Session")
            .unwrap();
        session.1["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z".into();
    }
    let again = world.restored(live(), &restore_e()).await;
    let session = again.iter().find(|r| r.kind == "Session").unwrap();
    let deleting = "being deleted (a finalizer holds it): restore again once it is gone";
    let exists = &crate::restore::Restoration::Exists;
    assert_eq!(
        (&session.result, session.note.as_deref()),
        (exists, Some(deleting))
    );
    let web = again.iter().find(|r| r.name == "e-web").unwrap();
    assert_eq!((&web.result, web.note.as_deref()), (exists, None));
}

/// A run that fails is counted a failure in its metrics (and alerts); a run asked to stop is
/// neither a success nor a failure.
#[tokio::test(start_paused = true)]
async fn a_failed_run_is_counted_failed_and_a_stopped_run_neither() {
    let success = r#"gc_last_run_success{collector="sessions",namespace="streamspace"}"#;
    let mut world = World::new();
    world.sink_refused = true;
    let (run, _) = world.collect_run(live()).await;
    assert_eq!(run.outcome(), failed());
    assert!(
        run.metrics.contains(&format!("{success} 0\n")),
        "{}",
        run.metrics
    );
    let world = World::new();
    let token = StopToken::new();
    token.stop("SIGTERM");
    let settings = Settings {
        cancel: Arc::new(token),
        ..live()
    };
    let (run, _) = world.collect_run(settings).await;
    assert_eq!(run.outcome(), Outcome::Stopped);
    assert!(!run.metrics.contains(success), "{}", run.metrics);
}

/// A delete that fails (here a claim whose volume cannot be kept, so the claim is not deleted)
/// fails the run, saying the next run tries it again; the other deletes stand.
#[tokio::test(start_paused = true)]
async fn a_delete_that_fails_fails_the_run() {
    let kept = Arc::new(Kept {
        refuse_volume_patches: true,
        ..Kept::default()
    });
    let world = World {
        cluster: TestCluster::new(Arc::clone(&kept)),
        kept,
        live: Ok(vec!["a", "b", "c", "d"]),
        sink_refused: false,
    };
    with_claim(&world);
    let (outcome, why, audit) = world.collect(live()).await;
    assert_eq!(outcome, failed());
    assert_eq!(why, "1 delete(s) failed; the next run tries them again");
    let deleted = world.cluster.deleted();
    assert!(
        deleted.contains(&("e-Deployment".into(), false)),
        "{deleted:?}"
    );
    assert!(
        !deleted
            .iter()
            .any(|(name, _)| name == "e-PersistentVolumeClaim")
    );
    assert!(audit.refused.is_empty());
}

/// The first namespace's run also reviews the volumes gc kept for claims of namespaces no run
/// selects any longer: one whose window passed gets its reclaim policy back.
#[tokio::test(start_paused = true)]
async fn volumes_kept_in_a_namespace_no_run_selects_are_reviewed() {
    let world = World::new();
    let record = gc_core::sessions::volumes::Retained {
        policy: "Delete".into(),
        namespace: "gone".into(),
        claim: "x-PersistentVolumeClaim".into(),
        claim_uid: "u-x".into(),
        session: Some("x".into()),
        at: NOW - 30.0 * 86_400.0,
        restored_to: None,
        days: Some(7),
        gone_at: None,
    };
    let key = gc_core::sessions::volumes::RETAINED_LABEL;
    let volume = serde_json::json!({
        "metadata": {
            "name": "pv-x", "uid": "uid-pv-x", "resourceVersion": "1",
            "labels": {key: "primary"},
            "annotations": {key: serde_json::to_string(&record).unwrap()},
        },
        "spec": {"claimRef": {"uid": "u-x"}, "persistentVolumeReclaimPolicy": "Retain"},
        "status": {"phase": "Released"},
    });
    world.kept.receipt_of_keep(&volume);
    let volumes = &world.cluster.kept.volumes;
    volumes.lock().unwrap().insert("pv-x".into(), volume);
    let (outcome, why, _) = world.collect(live()).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    let volume = volumes.lock().unwrap()["pv-x"].clone();
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert!(volume["metadata"]["labels"][key].is_null(), "{volume}");
}

/// A collection of several namespaces writes the metrics file once, with each namespace's run.
#[tokio::test(start_paused = true)]
async fn several_namespaces_write_one_metrics_file_with_each() {
    let world = World::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gc.prom");
    let table = SessionTable(world.live.clone(), Mutex::new(0));
    let sink = TestSink(Arc::clone(&world.kept), false);
    let parts = (world.cluster.clone(), table, Arc::clone(&world.kept), sink);
    let settings = Settings {
        now: Some(NOW),
        delivery: crate::metrics::Delivery {
            metrics_file: Some(file.clone()),
            ..crate::metrics::Delivery::default()
        },
        ..Settings::default()
    };
    let collector = SessionCollector::new(parts, settings).unwrap();
    let other = SessionConfig {
        namespace: "other".into(),
        ..session_config()
    };
    let mut audit = Recorded::default();
    let runs = collector
        .collect(&[session_config(), other], &mut audit)
        .await;
    assert!(runs.iter().all(|r| r.outcome() == Outcome::Succeeded));
    let text = std::fs::read_to_string(&file).unwrap();
    for namespace in ["streamspace", "other"] {
        let labels = format!(r#"collector="sessions",namespace="{namespace}""#);
        assert!(text.contains(&labels), "{namespace}: {text}");
    }
}

/// A volume whose policy cannot be given back while the restore waits (a patch whose fence held:
/// another write of the volume) is tried again, until the wait runs out; then the answer says
/// why, and the volume keeps `Retain` (the next run gives its policy back).
#[tokio::test(start_paused = true)]
async fn a_policy_not_given_back_is_tried_again_until_the_wait_runs_out() {
    // The volume patches: the run's keep (0), the restore's move (1), then each give back.
    for (refused, given_back) in [(3, true), (usize::MAX, false)] {
        let mut world = World::new();
        world.cluster.volume_patch_conflicts = Arc::new(move |sent| (2..refused).contains(&sent));
        with_claim(&world);
        world.collect(live()).await;
        world.cluster.finish_deletes();
        set_phase(&world.cluster.kept, "Released");
        // Bound to the new claim after 1.25 s.
        let kept = Arc::clone(&world.cluster.kept);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1250)).await;
            set_phase(&kept, "Bound");
        });
        let restored = world.restored(live(), &restore_e_waiting(3)).await;
        let note = restored[0].note.as_deref().unwrap_or_default();
        let policy = world.volume()["spec"]["persistentVolumeReclaimPolicy"].clone();
        if given_back {
            let back = "on its volume pv-e, bound again: reclaim policy Delete given back";
            assert_eq!(note, back);
            assert_eq!(policy, "Delete");
        } else {
            let why = "on its volume pv-e: cannot give its volume pv-e its policy back: ";
            assert!(note.starts_with(why), "{note}");
            assert_eq!(policy, "Retain");
        }
    }
}

/// A stop while a restore waits for its volume to be bound ends the wait at once: the claim is
/// restored, the volume keeps `Retain` (the next run gives its policy back), and the note says so.
#[tokio::test(start_paused = true)]
async fn a_stop_ends_a_restores_wait_for_its_volume() {
    let world = World::new();
    with_claim(&world);
    world.collect(live()).await;
    world.cluster.finish_deletes();
    set_phase(&world.cluster.kept, "Released");
    let stop = crate::StopToken::new();
    let settings = Settings {
        cancel: Arc::new(stop.clone()),
        ..live()
    };
    let stopping = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        stopping.stop("SIGTERM");
    });
    let started = tokio::time::Instant::now();
    let restored = world.restored(settings, &restore_e_waiting(600)).await;
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(3), "waited {waited:?} of 600s");
    let note = restored[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains("not yet bound when the process stopped"),
        "{note}"
    );
    assert_eq!(
        world.volume()["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
}
