//! The failed-Pod collector's run invariants, on `gc-core`'s stateful fake of the Pod protocol
//! (Kubernetes' finalizer, precondition and JSON-patch semantics, its guarantees checked at each
//! call) with faults injected at each port, without an API server: the lock is held before the
//! first call to the cluster; recovery comes before planning; the store and the sink are proven
//! before any pin (else every pin is released and nothing is planned); nothing is written after
//! the lock is lost; a stop finishes the target in flight and starts no other; a pin left at the
//! end fails the run; a dry run takes no Lease, writes nothing and posts no Event; pins outside
//! the selection are released, never collected.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use gc_core::ports::StoreError;

use gc_core::pods::apply::TargetOutcome as Done;
use gc_core::testing::pods::{self as fake, Fake, PIN};

use super::*;
use crate::testing::{TestPods, TestSink};
use crate::{FailureKind, LockOptions, Outcome, StopToken};

/// The store, opened on demand, or refused.
struct Receipts(Arc<Fake>, bool);

#[async_trait]
impl OpenStore for Receipts {
    type Store = Arc<Fake>;
    async fn open(&self) -> Result<Arc<Fake>, StoreError> {
        if self.1 {
            return Err(StoreError::Unavailable("connection refused".into()));
        }
        Ok(Arc::clone(&self.0))
    }
}

/// The fake's clock.
struct Ticks(Arc<Fake>);

#[async_trait]
impl Clock for Ticks {
    fn now(&self) -> f64 {
        self.0.now()
    }
    async fn sleep(&self, seconds: f64) {
        self.0.sleep(seconds).await;
    }
}

/// A run's world: the cluster (with its Lease and Events), and whether the store and the sink
/// refuse.
struct World {
    pods: TestPods,
    store_refused: bool,
    sink_refused: bool,
}

type Collector = PodCollector<TestPods, Receipts, TestSink<Fake>, Ticks>;

impl World {
    fn new(fake: Fake) -> Self {
        Self {
            pods: TestPods::new(fake),
            store_refused: false,
            sink_refused: false,
        }
    }

    fn collector(&self, settings: Settings) -> Result<Collector, SettingsError> {
        let fake = &self.pods.fake;
        let parts = (
            self.pods.clone(),
            Receipts(Arc::clone(fake), self.store_refused),
            TestSink(Arc::clone(fake), self.sink_refused),
            Ticks(Arc::clone(fake)),
        );
        PodCollector::new(parts, settings)
    }

    /// One planned run of namespace `work` with `settings`: how it ended, why, its report.
    async fn run(&self, settings: Settings) -> (Outcome, String, Option<Report>) {
        let run = (self.collector(settings).unwrap())
            .run_namespace(&fake::config(), Targets::Planned, 1)
            .await;
        let why = (run.failure.as_ref()).map_or(String::new(), |f| format!("{:#}", f.error));
        (run.outcome(), why, run.report)
    }

    /// The guarantees of the fake's world held: no Pod removed without a verified archive and
    /// receipt of its state, none that was not the collector's to remove.
    fn kept_its_guarantees(&self) {
        let w = self.pods.fake.w();
        assert!(w.violations.is_empty(), "{:?}", w.violations);
    }

    /// What a run left is finished by the next, clean one: every target collected, no pin
    /// left, nothing protected removed, no one else's finalizer taken off.
    async fn finished_by_the_next_run(mut self) {
        self.kept_its_guarantees();
        (self.store_refused, self.sink_refused) = (false, false);
        self.pods.before_delete = Arc::new(|_| {});
        self.pods.delete_takes = Duration::ZERO;
        // A lost Lease is never released by its run: it expires, as the API server's does.
        {
            let mut lease = self.pods.lease.state();
            (lease.unreachable, lease.holder) = (false, None);
        }
        let (outcome, why, _) = self.run(live()).await;
        assert_eq!(outcome, Outcome::Succeeded, "{why}");
        fake::invariants(&self.pods.fake.w()).unwrap();
    }

    fn events(&self) -> Vec<String> {
        self.pods.events.lock().unwrap().clone()
    }

    /// Every write that took effect, as `op name`.
    fn writes(&self) -> Vec<String> {
        let w = self.pods.fake.w();
        w.writes.iter().map(|(_, op, _)| op.clone()).collect()
    }

    /// Every call, as `op subject`.
    fn calls(&self) -> Vec<String> {
        self.pods.fake.w().log.clone()
    }
}

fn live() -> Settings {
    Settings {
        live: true,
        ..Settings::default()
    }
}

fn failed(stage: Stage) -> Outcome {
    Outcome::Failed {
        stage,
        kind: FailureKind::Run,
    }
}

/// Each target's name and what the run did to it, in short.
fn done(report: &Report) -> Vec<String> {
    let short = |o: &Done| match o {
        Done::Collected { .. } => "collected",
        Done::WouldCollect { .. } => "would collect",
        Done::NotStarted { .. } => "not started",
        Done::Failed { .. } => "failed",
        _ => "other",
    };
    (report.results.iter())
        .map(|r| format!("{} {}", r.name, short(&r.outcome)))
        .collect()
}

fn targets(outcome: &str) -> Vec<String> {
    (0..4).map(|i| format!("target-{i} {outcome}")).collect()
}

/// A live run: every target archived, receipted and removed under the Lease, which is released
/// at the end; nothing else touched; an Event on each Pod collected.
#[tokio::test(start_paused = true)]
async fn a_live_run_collects_every_target_under_its_lock_and_releases_it() {
    let world = World::new(fake::world());
    let (outcome, why, report) = world.run(live()).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    assert_eq!(done(&report.unwrap()), targets("collected"));
    fake::invariants(&world.pods.fake.w()).unwrap();
    let lease = world.pods.lease.state();
    assert_eq!((lease.acquires, lease.holder.as_deref()), (1, None));
    assert_eq!(world.events().len(), 4, "{:?}", world.events());
}

/// The default settings are a dry run: no Lease, no write, no archive, no Event, although
/// Events are on; the report says what a live run would do.
#[tokio::test(start_paused = true)]
async fn the_default_is_a_dry_run_that_takes_no_lease_writes_nothing_and_posts_nothing() {
    let world = World::new(fake::world());
    let (outcome, why, report) = world.run(Settings::default()).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    let report = report.unwrap();
    assert!(report.dry_run);
    assert_eq!(done(&report), targets("would collect"));
    assert!(world.writes().is_empty(), "{:?}", world.writes());
    assert!(world.pods.fake.w().archives.is_empty());
    assert_eq!(world.pods.lease.state().acquires, 0);
    assert!(world.events().is_empty(), "{:?}", world.events());
}

/// Another run holds the namespace's lock for the whole wait: the cluster is not called at all
/// (no read, no pin, no delete), the failure says why, the other run's Lease is left alone.
#[tokio::test(start_paused = true)]
async fn another_runs_lock_means_no_call_to_the_cluster() {
    let world = World::new(fake::world());
    world.pods.lease.taken_by("run-b");
    let settings = Settings {
        lock: LockOptions {
            wait: Duration::from_secs(5),
            lease_seconds: 30,
        },
        ..live()
    };
    let (outcome, why, _) = world.run(settings).await;
    assert_eq!(outcome, failed(Stage::Run));
    assert_eq!(
        why,
        "another run holds lease gc-pods in namespace work; waited 5s; nothing was changed"
    );
    assert!(world.calls().is_empty(), "{:?}", world.calls());
    assert_eq!(world.pods.lease.state().holder.as_deref(), Some("run-b"));
    // A Warning on the Namespace says why (a lock lost, or a stop, would post none).
    let events = world.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].starts_with("RunFailed: another run holds"),
        "{events:?}"
    );
}

/// A stop while waiting for another run's lock: the run ends stopped, touches nothing and
/// posts no Event.
#[tokio::test(start_paused = true)]
async fn a_stop_while_waiting_for_the_lock_touches_nothing_and_posts_nothing() {
    let world = World::new(fake::world());
    world.pods.lease.taken_by("run-b");
    let token = StopToken::new();
    token.stop("SIGTERM");
    let settings = Settings {
        cancel: Arc::new(token),
        ..live()
    };
    let (outcome, why, _) = world.run(settings).await;
    assert_eq!(outcome, Outcome::Stopped, "{why}");
    assert!(world.calls().is_empty(), "{:?}", world.calls());
    assert!(world.events().is_empty(), "{:?}", world.events());
}

/// Pins left by an earlier run are recovered before the run plans: the first call is
/// recovery's metadata list, the plan's list comes after; every leftover ends as the protocol
/// says and nothing is left pinned.
#[tokio::test(start_paused = true)]
async fn recovery_comes_before_the_plan() {
    let world = World::new(fake::leftovers());
    let (outcome, why, report) = world.run(live()).await;
    assert_eq!(outcome, Outcome::Succeeded, "{why}");
    let calls = world.calls();
    let first = |op: &str| calls.iter().position(|c| c.split(' ').next() == Some(op));
    assert_eq!(first("list-metadata"), Some(0), "{calls:?}");
    assert!(first("list") > first("list-metadata"), "{calls:?}");
    // A Pod recovery released and the run then collected is reported once, as a target.
    let report = report.unwrap();
    let targets: Vec<&str> = report.results.iter().map(|r| r.uid.as_str()).collect();
    assert!(
        report
            .recovered
            .iter()
            .all(|r| !targets.contains(&r.uid.as_str()))
    );
    assert!(targets.contains(&"uid-target-pinned"), "{targets:?}");
    assert!(!report.recovered.is_empty());
    world.kept_its_guarantees();
    let w = world.pods.fake.w();
    let pinned: Vec<&String> = (w.pods.iter())
        .filter(|(_, p)| fake::finalizers(p).iter().any(|f| f == PIN))
        .map(|(n, _)| n)
        .collect();
    assert!(pinned.is_empty(), "{pinned:?}");
}

/// A store that cannot be opened, or a sink that takes no writes: proven before any pin, so
/// nothing is pinned, archived or deleted and nothing is planned; the pins of earlier runs are
/// released; the run fails at the part's stage, under a lock it releases.
#[tokio::test(start_paused = true)]
async fn an_unusable_store_or_sink_plans_nothing_and_releases_every_pin() {
    for (store_refused, stage, said) in [
        (
            true,
            Stage::Store,
            "cannot open the store: store unavailable: connection refused",
        ),
        (
            false,
            Stage::Archive,
            "cannot use the archive sink memory: store unavailable: disk full",
        ),
    ] {
        let mut world = World::new(fake::leftovers());
        (world.store_refused, world.sink_refused) = (store_refused, !store_refused);
        let (outcome, why, report) = world.run(live()).await;
        assert_eq!(outcome, failed(stage), "{why}");
        assert!(why.starts_with(said), "{why}");
        assert!(why.contains("stopped before planning"), "{why}");
        let calls = world.calls();
        assert!(!calls.iter().any(|c| c.starts_with("list ")), "{calls:?}");
        let writes = world.writes();
        assert!(writes.iter().all(|w| w.starts_with("patch ")), "{writes:?}");
        assert!(
            writes.contains(&"patch target-pinned".to_owned()),
            "{writes:?}"
        );
        assert!(report.unwrap().results.is_empty());
        assert_eq!(world.pods.lease.state().holder, None);
        world.finished_by_the_next_run().await;
    }
}

/// The lock is lost while a Pod is deleted (the process frozen 25 s, its renewals failing): the
/// delete in flight stands, nothing is written after it, the run fails at stage `lock` and
/// posts no Event.
#[tokio::test(start_paused = true)]
async fn a_lock_lost_mid_run_writes_nothing_more() {
    let mut world = World::new(fake::world());
    let lease = world.pods.lease.clone();
    world.pods.before_delete = Arc::new(move |sent| {
        if sent == 0 {
            lease.state().unreachable = true;
        }
    });
    world.pods.delete_takes = Duration::from_secs(25);
    let (outcome, why, _) = world.run(live()).await;
    assert_eq!(outcome, failed(Stage::Lock));
    assert!(
        why.starts_with("lost the run lock gc-pods in namespace work"),
        "{why}"
    );
    let writes = world.writes();
    assert_eq!(
        writes.last().map(String::as_str),
        Some("delete target-0"),
        "{writes:?}"
    );
    assert_eq!(writes.iter().filter(|w| w.starts_with("delete")).count(), 1);
    assert!(world.events().is_empty(), "{:?}", world.events());
    world.finished_by_the_next_run().await;
}

/// Asked to stop while a Pod is deleted: that target is finished (its pin released), the next
/// is not started, the run ends stopped (neither a success nor a failure) and releases its
/// lock.
#[tokio::test(start_paused = true)]
async fn a_stop_finishes_the_target_in_flight_and_starts_no_other() {
    let mut world = World::new(fake::world());
    let token = StopToken::new();
    let stopper = token.clone();
    world.pods.before_delete = Arc::new(move |sent| {
        if sent == 0 {
            stopper.stop("SIGTERM");
        }
    });
    let settings = Settings {
        cancel: Arc::new(token),
        ..live()
    };
    let (outcome, why, report) = world.run(settings).await;
    assert_eq!(outcome, Outcome::Stopped, "{why}");
    assert!(
        why.starts_with("stopped by SIGTERM: 1 of 4 targets collected"),
        "{why}"
    );
    let mut expected = targets("not started");
    expected[0] = "target-0 collected".into();
    assert_eq!(done(&report.unwrap()), expected);
    assert_eq!(world.pods.lease.state().holder, None);
    world.finished_by_the_next_run().await;
}

/// A pin still on a Pod when the run ends (here put on by someone else while the run worked)
/// fails the run at stage `pin_left`, naming the Pod.
#[tokio::test(start_paused = true)]
async fn a_pin_left_at_the_end_fails_the_run() {
    let mut world = World::new(fake::world());
    let fake = Arc::clone(&world.pods.fake);
    world.pods.before_delete = Arc::new(move |_| {
        let mut w = fake.w();
        let pod = w.pods.get_mut("decoy-unlabelled").unwrap();
        pod["metadata"]["finalizers"] = serde_json::json!([PIN]);
    });
    let (outcome, why, report) = world.run(live()).await;
    assert_eq!(outcome, failed(Stage::PinLeft), "{why}");
    assert!(
        why.ends_with("the pin is still on decoy-unlabelled"),
        "{why}"
    );
    assert_eq!(report.unwrap().pins_left, ["decoy-unlabelled"]);
}

/// With `-A`, a pin in a namespace the run does not cover is released under that namespace's
/// lock and its Pod never collected; the covered namespace is collected as usual.
#[tokio::test(start_paused = true)]
async fn pins_outside_the_selection_are_released_never_collected() {
    let world = World::new(fake::world());
    {
        let mut w = world.pods.fake.w();
        for (name, namespace) in [("elsewhere-0", "elsewhere"), ("system-0", "kube-system")] {
            let mut pod = fake::left(name, true, &[PIN], false);
            pod["metadata"]["namespace"] = serde_json::json!(namespace);
            w.pods.insert(name.into(), pod);
        }
    }
    let inputs = |ns: &str| -> Result<PodConfig, gc_core::input::InputError> {
        Ok(PodConfig {
            namespace: ns.into(),
            ..fake::config()
        })
    };
    let collector = world.collector(live()).unwrap();
    let runs = collector.collect(&[fake::config()], true, inputs).await;
    let names: Vec<(&str, Outcome)> = (runs.iter())
        .map(|r| (r.namespace.as_str(), r.outcome()))
        .collect();
    assert_eq!(
        names,
        [
            ("work", Outcome::Succeeded),
            ("elsewhere", Outcome::Succeeded)
        ]
    );
    let released = &runs[1].report.as_ref().unwrap().recovered;
    assert_eq!(released.len(), 1);
    let w = world.pods.fake.w();
    let pod = &w.pods["elsewhere-0"];
    assert!(fake::finalizers(pod).is_empty(), "{pod}");
    // A system namespace is never touched.
    assert_eq!(fake::finalizers(&w.pods["system-0"]), [PIN]);
    assert!(!w.writes.iter().any(|(_, op, _)| op == "delete elsewhere-0"));
    assert_eq!(world.pods.lease.state().acquires, 2);
}

/// A collector is not built with an instant to judge at that is not in seconds since the epoch.
#[test]
fn a_collector_refuses_an_instant_in_milliseconds() {
    let world = World::new(fake::world());
    let millis = fake::NOW * 1000.0;
    let settings = Settings {
        now: Some(millis),
        ..Settings::default()
    };
    let refused = world.collector(settings).err();
    assert_eq!(refused, Some(SettingsError::NotSeconds(millis)));
}

/// A pin outside the selection that cannot be released (the cluster fails) fails that
/// namespace's run: the next run tries again.
#[tokio::test(start_paused = true)]
async fn a_pin_outside_the_selection_that_stays_fails_the_run() {
    let fault = fake::Fault::Error;
    let world = World::new(fake::with_pods(vec![]));
    {
        let mut w = world.pods.fake.w();
        let mut pod = fake::left("elsewhere-0", true, &[PIN], false);
        pod["metadata"]["namespace"] = serde_json::json!("elsewhere");
        w.pods.insert("elsewhere-0".into(), pod);
        // The first call lists the namespace's pinned Pods; the second, the release, fails.
        w.fault = Some((2, fault));
    }
    let inputs = |ns: &str| -> Result<PodConfig, gc_core::input::InputError> {
        Ok(PodConfig {
            namespace: ns.into(),
            ..fake::config()
        })
    };
    let collector = world.collector(live()).unwrap();
    let runs = collector.release_outside(&["work".into()], inputs).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome(), failed(Stage::Recover), "{fault:?}");
    let w = world.pods.fake.w();
    assert_eq!(fake::finalizers(&w.pods["elsewhere-0"]), [PIN], "{fault:?}");
}
