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
    assert!(format!("{error:#}").contains(": no plan: "), "{error:#}");
}
