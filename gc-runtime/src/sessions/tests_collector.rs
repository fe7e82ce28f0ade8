//! The session collector's run invariants, on `gc-core`'s fakes with faults injected at each
//! port, without an API server: nothing is written before the lock is held, nothing after it is
//! lost; a sink that does not take writes, a database that fails and another run's lock each
//! delete nothing and say why; a stop leaves the rest not started; a dry run takes no Lease,
//! archives nothing and posts no Event; the instant to judge at is checked.

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
        let run = runs.remove(0);
        let why = run
            .failure
            .as_ref()
            .map_or(String::new(), |f| format!("{:#}", f.error));
        (run.outcome(), why, audit)
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
/// run) under the Lease, which is released at the end; an Event on each delete.
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
    assert_eq!(world.events().len(), 2, "{:?}", world.events());
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
