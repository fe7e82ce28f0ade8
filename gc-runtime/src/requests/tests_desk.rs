//! The request desk on `gc-core`'s fakes, without an API server: a request deletes only the
//! orphans it names, judged against the database with the operator's settings; requests that
//! come while a run holds the namespace wait and are coalesced into one run, each reporting on
//! its own ids; a full queue, an unknown namespace, another process's Lease and a stopping
//! process are refused, and every audit line of a requested run names who asked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gc_core::sessions::SessionConfig;
use gc_core::sessions::run::SessionReport;
use gc_core::testing::{Kept, SessionTable, session_config};

use super::*;
use crate::Settings;
use crate::testing::{TestCluster, TestSink};
use crate::{LockOptions, StopToken};

/// When every run judges: ten days after the fakes' objects were created.
const NOW: f64 = 1_795_953_600.0;

pub(crate) type Desk = Requests<TestCluster, SessionTable, Arc<Kept>, TestSink>;

/// What the desk's audit log was given: each record as `name result [by]`, and each refusal.
#[derive(Clone, Default)]
pub(crate) struct Lines(Arc<Mutex<Vec<String>>>);

impl Audit for Lines {
    fn judged(
        &mut self,
        cfg: &SessionConfig,
        report: &SessionReport,
        _time: &str,
    ) -> crate::Result<()> {
        let by = crate::audit::requested_by(cfg).map(|by| by.iter().cloned().collect());
        let by: Vec<String> = by.unwrap_or_default();
        for r in &report.records {
            let result = r.result.as_ref().map_or("-".into(), ToString::to_string);
            let line = format!("{} {result} {by:?}", r.judged.resource.name);
            self.0.lock().unwrap().push(line);
        }
        Ok(())
    }
    fn refused(&mut self, line: &RefusedLine<'_>) -> crate::Result<()> {
        let by = format!("{:?}", line.requested_by);
        self.0.lock().unwrap().push(format!("refused {by}"));
        Ok(())
    }
    fn restored(&mut self, lines: &[crate::audit::RestoredLine<'_>]) -> crate::Result<()> {
        for l in lines {
            let (kind, result) = (&l.object.kind, &l.object.result);
            let line = format!(
                "restored {kind} {result} by {} as {}",
                l.requested_by, l.restored_as
            );
            self.0.lock().unwrap().push(line);
        }
        Ok(())
    }
    fn denied(&mut self, line: &crate::audit::DeniedLine<'_>) -> crate::Result<()> {
        let (status, call, by) = (line.status, &line.call, line.requested_by);
        let mut text = format!("denied {status} {call} in {:?} by {by:?}", line.namespace);
        if line.unaudited > 0 {
            text.push_str(&format!(" ({} unaudited before)", line.unaudited));
        }
        let line = text;
        self.0.lock().unwrap().push(line);
        Ok(())
    }
}

/// The fakes' namespace, where the database knows sessions a, b and c: d and e are orphans.
pub(crate) struct World {
    pub(crate) cluster: TestCluster,
    lines: Lines,
    /// The collector's stop.
    stop: StopToken,
}

impl World {
    pub(crate) fn new() -> Self {
        Self {
            cluster: TestCluster::new(Arc::new(Kept::default())),
            lines: Lines::default(),
            stop: StopToken::new(),
        }
    }

    /// A live desk over this world, with `options` and the collector's lock as `lock` says.
    pub(crate) fn desk(&self, options: RequestOptions, lock: LockOptions) -> Arc<Desk> {
        self.desk_over(Kept::default(), options, lock)
    }

    /// [`Self::desk`], its store and sink `kept`.
    pub(crate) fn desk_over(
        &self,
        kept: Kept,
        options: RequestOptions,
        lock: LockOptions,
    ) -> Arc<Desk> {
        let kept = Arc::new(kept);
        let table = SessionTable(Ok(vec!["a", "b", "c"]), Mutex::new(0));
        let parts = (
            self.cluster.clone(),
            table,
            Arc::clone(&kept),
            TestSink(kept, false),
        );
        let settings = Settings {
            now: Some(NOW),
            live: true,
            lock,
            cancel: Arc::new(self.stop.clone()),
            ..Settings::default()
        };
        let collector = SessionCollector::new(parts, settings).unwrap();
        let configs = vec![session_config()];
        Requests::new(collector, configs, options, Box::new(self.lines.clone()))
    }

    pub(crate) fn deleted(&self) -> Vec<String> {
        (self.cluster.deleted().into_iter())
            .map(|(name, _)| name)
            .collect()
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.0.lock().unwrap().clone()
    }
}

pub(crate) fn ids(ids: &[&str]) -> Requested {
    Requested::Ids(ids.iter().map(|&id| id.to_owned()).collect())
}

pub(crate) const NS: &str = "streamspace";
const API: &str = "system:serviceaccount:streamspace:streamspace-api";

/// The records of a request: `name result`.
fn records(run: &RequestedRun) -> Vec<String> {
    (run.records.iter())
        .map(|r| {
            let result = r.result.as_ref().map_or("-".into(), ToString::to_string);
            format!("{} {result}", r.judged.resource.name)
        })
        .collect()
}

/// Waits (on the paused clock) until request `id` has ended.
async fn ended(desk: &Desk, id: &str) -> RequestedRun {
    for _ in 0..600 {
        let run = desk.run(id).expect("the request is kept");
        if run.state.is_final() {
            return run;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("request {id} did not end");
}

/// A request for orphan d deletes d's objects only: e, an orphan too, is left as it is (not
/// requested); its records are d's; every audit line names who asked; the run took the Lease.
#[tokio::test(start_paused = true)]
async fn a_request_deletes_only_the_orphans_it_names() {
    let world = World::new();
    let desk = world.desk(RequestOptions::default(), LockOptions::default());
    let run = desk.collect(NS, ids(&["d"]), API).await.unwrap();
    assert_eq!(run.state, State::Succeeded, "{:?}", run.error);
    assert_eq!(run.requested_by, API);
    assert!(run.ended_at.is_some());
    assert_eq!(world.deleted(), ["d-Deployment", "d-Session"]);
    assert_eq!(records(&run), ["d-Deployment deleted", "d-Session deleted"]);
    let lines = world.lines();
    assert_eq!(lines.len(), 10, "{lines:?}");
    assert!(lines.iter().all(|l| l.ends_with(&format!("[{API:?}]"))));
    assert!(
        lines.contains(&format!("e-Session - [{API:?}]")),
        "{lines:?}"
    );
    assert_eq!(world.cluster.lease.state().acquires, 1);
    assert_eq!(desk.run(&run.id).unwrap().state, State::Succeeded);
    // Another desk (the process restarted) knows no request of this one, whatever its number.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let again = world.desk(RequestOptions::default(), LockOptions::default());
    assert!(again.run(&run.id).is_none());
    assert!(desk.run("1").is_none() && desk.run(&run.id.replace("-1", "-2")).is_none());
    // A live session asked for is judged against the database, and kept.
    let kept = desk.collect(NS, ids(&["a"]), API).await.unwrap();
    assert_eq!(kept.state, State::Succeeded);
    assert_eq!(records(&kept), ["a-Deployment -", "a-Session -"]);
    assert_eq!(world.deleted().len(), 2);
    // Its reason says the state found and what would count as gone.
    let why: Vec<(&str, &str)> = (kept.records.iter())
        .map(|r| (r.judged.decision.name(), r.judged.decision.reason()))
        .collect();
    assert_eq!(
        why[0],
        (
            "kept",
            "session a is running, not gone: kept; only a missing row counts as gone"
        )
    );
}

/// The requests' grace is the operator's: with a grace longer than the objects' age, a
/// requested orphan is held, not deleted.
#[tokio::test(start_paused = true)]
async fn a_requested_orphan_within_the_requests_grace_is_held() {
    let world = World::new();
    let options = RequestOptions {
        grace_seconds: 30 * 86_400,
        ..RequestOptions::default()
    };
    let desk = world.desk(options, LockOptions::default());
    let run = desk.collect(NS, ids(&["d"]), API).await.unwrap();
    assert_eq!(run.state, State::Succeeded, "{:?}", run.error);
    assert!(world.deleted().is_empty());
    assert_eq!(records(&run), ["d-Deployment -", "d-Session -"]);
}

/// Requests that come while a run holds the namespace wait, and are coalesced into the next
/// run (one more Lease, each orphan deleted once); each reports on its own ids; beyond the
/// queue's bound a request is refused, and nothing is queued for it.
#[tokio::test(start_paused = true)]
async fn requests_during_a_run_are_coalesced_and_a_full_queue_refuses() {
    let mut world = World::new();
    world.cluster.delete_takes = Duration::from_secs(5);
    let options = RequestOptions {
        queue: 2,
        answer_within: Duration::from_secs(1),
        ..RequestOptions::default()
    };
    let desk = world.desk(options, LockOptions::default());
    let first = desk.collect(NS, ids(&["d"]), API).await.unwrap();
    assert_eq!(first.state, State::Running);
    let second = desk.collect(NS, ids(&["e"]), "alice").await.unwrap();
    let third = desk.collect(NS, ids(&["e", "a"]), "bob").await.unwrap();
    assert_eq!((second.state, third.state), (State::Queued, State::Queued));
    let full = desk.collect(NS, ids(&["e"]), "carol").await.unwrap_err();
    let refused = Refusal::Full {
        namespace: NS.into(),
        capacity: 2,
    };
    assert_eq!(full, refused);
    let first = ended(&desk, &first.id).await;
    let second = ended(&desk, &second.id).await;
    let third = ended(&desk, &third.id).await;
    assert_eq!(
        records(&first),
        ["d-Deployment deleted", "d-Session deleted"]
    );
    assert_eq!(
        records(&second),
        ["e-Deployment deleted", "e-Session deleted"]
    );
    // In scan order: each kind, then the next.
    let both = [
        "a-Deployment -",
        "e-Deployment deleted",
        "a-Session -",
        "e-Session deleted",
    ];
    assert_eq!(records(&third), both);
    let deleted = ["d-Deployment", "d-Session", "e-Deployment", "e-Session"];
    assert_eq!(world.deleted(), deleted);
    assert_eq!(world.cluster.lease.state().acquires, 2);
    let lines = world.lines();
    let by = format!("{:?}", ["alice", "bob"]);
    assert!(
        lines.contains(&format!("e-Session deleted {by}")),
        "{lines:?}"
    );
    // The queue is free again.
    let again = desk.collect(NS, ids(&["e"]), "carol").await;
    assert!(again.is_ok(), "{again:?}");
}

/// Another process holds the namespace's Lease for the collector's whole lock wait: the
/// request is refused as busy, nothing is read or deleted, the refusal is audited with who
/// asked, and the request ends failed.
#[tokio::test(start_paused = true)]
async fn another_process_holding_the_lease_answers_busy() {
    let world = World::new();
    world.cluster.lease.taken_by("gc-cronjob");
    let lock = LockOptions {
        wait: Duration::from_secs(5),
        lease_seconds: 30,
    };
    let desk = world.desk(RequestOptions::default(), lock);
    let busy = desk.collect(NS, ids(&["d"]), API).await.unwrap_err();
    let Refusal::Busy(why) = &busy else {
        panic!("{busy:?}");
    };
    assert!(
        why.starts_with("another run holds lease gc-sessions"),
        "{why}"
    );
    assert!(world.deleted().is_empty());
    assert_eq!(world.lines(), [format!("refused Some({{{API:?}}})")]);
    let last = desk.lanes().remove(0).last.unwrap();
    assert_eq!(last.state, State::Failed);
    assert_eq!(desk.run(&last.id).unwrap().state, State::Failed);
    assert_eq!(
        world.cluster.lease.state().holder.as_deref(),
        Some("gc-cronjob")
    );
}

/// A namespace the operator did not configure is refused before anything is queued or read.
#[tokio::test(start_paused = true)]
async fn an_unknown_namespace_is_refused() {
    let world = World::new();
    let desk = world.desk(RequestOptions::default(), LockOptions::default());
    let refused = desk.collect("kube-system", Requested::All, API).await;
    let unknown = Refusal::UnknownNamespace("kube-system".into());
    assert_eq!(refused.unwrap_err(), unknown);
    assert!(desk.lanes()[0].last.is_none());
    assert!(world.deleted().is_empty() && world.lines().is_empty());
    assert_eq!(desk.namespaces().collect::<Vec<_>>(), [NS]);
}

/// A stopping process: the request waiting behind a run ends stopped with nothing done, the
/// run in flight finishes its delete and starts no other, and nothing more is queued.
#[tokio::test(start_paused = true)]
async fn a_stop_ends_the_queued_requests_and_queues_nothing_more() {
    let mut world = World::new();
    world.cluster.delete_takes = Duration::from_secs(5);
    let options = RequestOptions {
        answer_within: Duration::from_secs(1),
        ..RequestOptions::default()
    };
    let desk = world.desk(options, LockOptions::default());
    let first = desk.collect(NS, ids(&["d"]), API).await.unwrap();
    let second = desk.collect(NS, ids(&["e"]), API).await.unwrap();
    assert_eq!((first.state, second.state), (State::Running, State::Queued));
    world.stop.stop("SIGTERM");
    desk.stop();
    let second = desk.run(&second.id).unwrap();
    assert_eq!(second.state, State::Stopped);
    assert!(second.ended_at.is_some() && second.records.is_empty());
    let refused = desk.collect(NS, ids(&["e"]), API).await;
    assert_eq!(refused.unwrap_err(), Refusal::Stopping);
    let first = ended(&desk, &first.id).await;
    assert_eq!(first.state, State::Stopped, "{:?}", first.error);
    let why = first.error.unwrap_or_default();
    assert!(why.starts_with("stopped by SIGTERM"), "{why}");
    assert_eq!(world.deleted(), ["d-Deployment"]);
}

/// An archive sink whose writes wait until it is opened (a slow object store, mid-run).
struct Gate(Arc<Kept>, tokio::sync::watch::Receiver<bool>);

#[async_trait::async_trait]
impl gc_core::ports::ArchiveSink for Gate {
    async fn write(
        &self,
        key: &gc_core::ports::ArchiveKey,
        bytes: &[u8],
    ) -> Result<String, gc_core::ports::StoreError> {
        let mut open = self.1.clone();
        let _ = open.wait_for(|o| *o).await;
        self.0.write(key, bytes).await
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, gc_core::ports::StoreError> {
        self.0.read(uri).await
    }
}

/// The process stops (SIGTERM) while a run its caller left is mid-archive: the stop waits for
/// the run, which finishes the write in progress, sends no delete after the stop, writes every
/// audit line and gives its Lease up before the desk says it finished.
#[tokio::test(start_paused = true)]
async fn a_stop_waits_for_the_run_a_caller_left() {
    let world = World::new();
    let (open, gate) = tokio::sync::watch::channel(false);
    let kept = Arc::new(Kept::default());
    let table = SessionTable(Ok(vec!["a", "b", "c"]), Mutex::new(0));
    let sink = TestSink(Arc::new(Gate(Arc::clone(&kept), gate)), false);
    let settings = Settings {
        now: Some(NOW),
        live: true,
        cancel: Arc::new(world.stop.clone()),
        concurrency: 1,
        ..Settings::default()
    };
    let parts = (world.cluster.clone(), table, Arc::clone(&kept), sink);
    let collector = SessionCollector::new(parts, settings).unwrap();
    let desk = Requests::new(
        collector,
        vec![session_config()],
        RequestOptions::default(),
        Box::new(world.lines.clone()),
    );
    // The caller asks, and goes away before the answer.
    let asking = Arc::clone(&desk);
    let caller = tokio::spawn(async move { asking.collect(NS, ids(&["d", "e"]), API).await });
    tokio::time::sleep(Duration::from_secs(2)).await;
    caller.abort();
    assert!(world.lines().is_empty(), "mid-archive: {:?}", world.lines());
    assert_eq!(world.cluster.lease.state().acquires, 1);
    // SIGTERM: the collector's stop, the desk's; the store comes back a moment later.
    world.stop.stop("SIGTERM");
    desk.stop();
    let finished = {
        let desk = Arc::clone(&desk);
        tokio::spawn(async move { desk.finished(Duration::from_secs(100)).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!finished.is_finished(), "the run is still archiving");
    open.send(true).unwrap();
    assert!(finished.await.unwrap(), "every task ended");
    // Every record audited: the write in progress ended, and no delete was sent after the stop.
    let lines = world.lines();
    assert_eq!(lines.len(), 10, "{lines:?}");
    let stopped = "not started: the process is stopping";
    let not_started = lines.iter().filter(|l| l.contains(stopped)).count();
    assert_eq!(not_started, 4, "{lines:?}");
    assert_eq!(
        kept.archives.lock().unwrap().len(),
        1,
        "the write in progress ended"
    );
    assert!(world.deleted().is_empty());
    assert_eq!(
        world.cluster.lease.state().holder,
        None,
        "the Lease given up"
    );
}
