//! The failed-Pod collector's run in one namespace, as the CLI's `run pods` and `apply` do it:
//! connect, take the run lock (a live run), prove the store and the archive sink usable (else
//! release every pin and stop), recover every pin left by earlier runs, plan from the cluster
//! (or take a reviewed plan's targets), apply them fenced until asked to stop, check that no pin
//! is left, release the lock; then count the run in its metrics, deliver them and post its
//! Events. With `-A`, [`release_outside`] releases the pins in namespaces the run does not cover.

use std::sync::Arc;

use anyhow::Context;
use gc_core::PodConfig;
use gc_core::pods::apply::{self, Outcome, Ports, TargetResult};
use gc_core::pods::approval::PlanFile;
use gc_core::pods::ledger::PreviousLedger;
use gc_core::pods::plan::Target;
use gc_core::ports::Store as _;
use gc_core::{PodPlan, plan_pods};
use serde::Serialize;

use crate::clock::{self, SystemClock};
use crate::events::Events;
use crate::metrics::{Delivery, RunMetrics};
use crate::outcome::{Failure, NamespaceRun, Stage};
use crate::{Cancel, LockOptions, RunLock, Stopped, stopped};

/// The run lock of the failed-Pod collector in its namespace (one per namespace, whatever the
/// cluster id).
pub const PODS_LOCK: &str = "gc-pods";

/// What a failed-Pod run needs besides its namespace's inputs and its targets: the same for
/// every namespace of a run. [`PodRun::new`] gives the defaults; set the fields to change them.
pub struct PodRun {
    /// How to reach the cluster (connected once per namespace). Default: as `kubectl` does.
    pub connection: gc_k8s::Connection,
    /// The store of receipts and the ledger (`sqlite:PATH`, a path, `postgres://...`).
    /// Default (`None`): the embedded SQLite file.
    pub store: Option<String>,
    /// Where archives go. Default: the embedded archive folder.
    pub sink: gc_store::Archives,
    /// How the run lock is taken.
    pub lock: LockOptions,
    /// Where the run's metrics and alerts go. Default: nowhere.
    pub delivery: Delivery,
    /// Posts the run's Kubernetes Events when it is live (a dry run posts none, whatever this
    /// says). Default: true.
    pub events: bool,
    /// Hears how each live plan's listing goes (`gc-cli`: a line on a terminal). Default: none.
    pub progress: Option<Arc<dyn Progress>>,
    /// The embedder's shutdown.
    pub cancel: Arc<dyn Cancel>,
    /// Every write a server-side dry run, no archive written, no Lease taken. Default: true.
    pub dry_run: bool,
}

impl PodRun {
    /// A dry run stopped by `cancel`, with every other default.
    #[must_use]
    pub fn new(cancel: Arc<dyn Cancel>) -> Self {
        let folder = gc_store::DirectorySink::new(gc_store::default_archive_dir());
        Self {
            connection: gc_k8s::Connection::default(),
            store: None,
            sink: gc_store::Archives::Directory(folder),
            lock: LockOptions::default(),
            delivery: Delivery::default(),
            events: true,
            progress: None,
            cancel,
            dry_run: true,
        }
    }
}

impl PodRun {
    /// The Events of a run with these settings: none unless it is live and posts them.
    fn events(&self) -> Events {
        Events::new(self.events && !self.dry_run)
    }

    /// This run with `connection` and `sink`, as a command's flags give them. When either could
    /// not be made (an unreadable token file, an invalid archive URL), each of `namespaces`
    /// fails at stage `run` with its metrics, alert and Event (when the cluster can be reached),
    /// as a run that met the error does: `Err` holds those runs and the error.
    ///
    /// # Errors
    /// As said.
    pub async fn with_parts(
        mut self,
        connection: anyhow::Result<gc_k8s::Connection>,
        sink: anyhow::Result<gc_store::Archives>,
        namespaces: &[String],
    ) -> Result<Self, (Vec<NamespaceRun<Report>>, anyhow::Error)> {
        let (connection, error) = match (connection, sink) {
            (Ok(connection), Ok(sink)) => {
                (self.connection, self.sink) = (connection, sink);
                return Ok(self);
            }
            (Ok(connection), Err(error)) => (Some(connection), error),
            (Err(error), _) => (None, error),
        };
        if namespaces.is_empty() {
            return Err((Vec::new(), error));
        }
        let cluster = match &connection {
            Some(connection) => connect(connection).await.ok(),
            None => None,
        };
        let events = self.events();
        let (started, d, e) = (std::time::Instant::now(), &self.delivery, &events);
        let failed =
            crate::failed_before("pods", d, e, cluster.as_ref(), namespaces, started, &error);
        Err((failed.await, error))
    }
}

/// Hears how a live plan's listing of Pods goes.
pub trait Progress: Send + Sync {
    /// `pages` pages listed so far, holding `pods` Pods.
    fn page(&self, pages: usize, pods: usize);
    /// The listing ended.
    fn done(&self);
}

/// Where a run's targets come from.
#[derive(Clone, Copy)]
pub enum Targets<'a> {
    /// A reviewed plan's, and the observation ledger kept outside the store, if any.
    Reviewed(&'a [Target], Option<&'a PreviousLedger>),
    /// Planned by the run from the cluster at the clock, after recovery, under the lock, with
    /// the store's ledger.
    Planned,
}

/// What a run did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Every write was a server-side dry run.
    pub dry_run: bool,
    /// Pins left by earlier runs, finished or released first.
    pub recovered: Vec<TargetResult>,
    /// The targets, each as far as the run took it.
    pub results: Vec<TargetResult>,
    /// Pods that still carry the pin at the end of a live run: each is a failure.
    pub pins_left: Vec<String>,
    /// The store or the archive sink was unusable (the metrics stage, and why): recovery
    /// released what it could and the run stopped before planning. A failure.
    #[serde(
        rename = "stoppedBeforePlanning",
        skip_serializing_if = "Option::is_none",
        serialize_with = "unusable_why"
    )]
    pub unusable: Option<(Stage, String)>,
}

fn unusable_why<S: serde::Serializer>(
    unusable: &Option<(Stage, String)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match unusable {
        Some((_, why)) => s.serialize_str(why),
        None => s.serialize_none(),
    }
}

/// The run of `cfg`'s namespace, one of `namespaces` in all (the metrics file is written by the
/// run only when it is the only one: [`crate::metrics::Delivery::write_merged`] writes several).
pub async fn run_namespace(
    run: &PodRun,
    cfg: &PodConfig,
    targets: Targets<'_>,
    namespaces: usize,
) -> NamespaceRun<Report> {
    execute(run, &run.events(), cfg, targets, namespaces).await
}

/// The run of every namespace of `configs` (planned by the run), then, when the run covers
/// `-A`'s choice of namespaces (`all`), the release of the pins outside them.
pub async fn run_pods(
    run: &PodRun,
    configs: &[PodConfig],
    all: bool,
    inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
) -> Vec<NamespaceRun<Report>> {
    let (events, mut runs) = (run.events(), Vec::with_capacity(configs.len()));
    for cfg in configs {
        runs.push(execute(run, &events, cfg, Targets::Planned, configs.len()).await);
    }
    if all {
        let covered: Vec<String> = configs.iter().map(|c| c.namespace.clone()).collect();
        runs.extend(release_outside_posting(run, &events, &covered, inputs).await);
    }
    runs
}

/// The run of each reviewed plan of `plans` (opened by [`gc_core::pods::approval::open_plans`], whose
/// policy equals apply's own), each acting under apply's own policy `inputs`, with the
/// observation ledger kept outside the store (`ledger`), if any; then, when the run covers
/// `-A`'s choice of namespaces (`all`: the namespaces it resolved), the release of the pins
/// outside them, as [`run_pods`] does.
///
/// # Errors
/// When `inputs` refuses a plan's namespace: nothing is run then.
pub async fn apply_reviewed(
    run: &PodRun,
    plans: &[PlanFile],
    ledger: Option<&PreviousLedger>,
    all: Option<&[String]>,
    inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
) -> Result<Vec<NamespaceRun<Report>>, gc_core::input::InputError> {
    let configs =
        (plans.iter().map(|p| inputs(&p.config.namespace))).collect::<Result<Vec<_>, _>>()?;
    let (events, mut runs) = (run.events(), Vec::with_capacity(plans.len()));
    for (plan, cfg) in plans.iter().zip(&configs) {
        let targets = Targets::Reviewed(&plan.targets, ledger);
        runs.push(execute(run, &events, cfg, targets, plans.len()).await);
    }
    if let Some(covered) = all {
        runs.extend(release_outside_posting(run, &events, covered, inputs).await);
    }
    Ok(runs)
}

/// With `-A`: the pins in namespaces the run does not cover (outside `--namespace-selector`, or
/// excluded), found by one metadata-only list of every namespace's Pods (paged), each released
/// under that namespace's run lock, fenced, and never collected: a namespace that leaves the
/// selection keeps no pin, so no delete of its Pods hangs. One run per such namespace, reported
/// as any other (system namespaces are never touched).
pub async fn release_outside(
    run: &PodRun,
    covered: &[String],
    inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
) -> Vec<NamespaceRun<Report>> {
    release_outside_posting(run, &run.events(), covered, inputs).await
}

/// [`release_outside`], posting to `events`.
async fn release_outside_posting(
    run: &PodRun,
    events: &Events,
    covered: &[String],
    inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
) -> Vec<NamespaceRun<Report>> {
    let failed =
        |namespace: &str, error: anyhow::Error| NamespaceRun::failed(namespace, Stage::Run, error);
    let dry_run = run.dry_run;
    let all = "(outside the selection)";
    let cluster = match connect(&run.connection).await {
        Ok(cluster) => cluster,
        Err(e) => return vec![failed(all, e)],
    };
    let pin = match inputs("default") {
        Ok(cfg) => cfg.pin_finalizer,
        Err(e) => return vec![failed(all, e.into())],
    };
    let pinned = gc_core::pages::collect(
        |token: Option<String>| {
            let cluster = &cluster;
            async move { cluster.list_all_pod_metadata(500, token.as_deref()).await }
        },
        |item| {
            let meta = &item["metadata"];
            let pinned = meta["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == pin.as_str()));
            Ok(pinned
                .then(|| meta["namespace"].as_str().map(str::to_owned))
                .flatten())
        },
    )
    .await;
    let mut namespaces = match pinned {
        Ok(namespaces) => namespaces,
        Err(e) => {
            let e = anyhow::Error::new(e).context("cannot list pinned Pods in every namespace");
            return vec![failed(all, e)];
        }
    };
    namespaces.sort();
    namespaces.dedup();
    namespaces.retain(|ns| {
        !covered.contains(ns) && !gc_core::input::SYSTEM_NAMESPACES.contains(&ns.as_str())
    });
    let mut runs = Vec::with_capacity(namespaces.len());
    for ns in namespaces {
        let released = async {
            let cfg = inputs(&ns)?;
            let lock = take_lock(run, &cluster, &ns).await?;
            let why = "its namespace is outside the run's selection (--namespace-selector, \
                       --exclude-namespace): never collected";
            let recovered = apply::release_pins(&cluster, &cfg, lock.held(), why, false)
                .await
                .with_context(|| format!("cannot list pinned Pods in namespace {ns}"));
            match release_lock(run, lock).await {
                Some(lost) => Err(lost),
                None => recovered,
            }
        };
        runs.push(match released.await {
            Ok(recovered) => {
                let results: Vec<&TargetResult> = recovered.iter().collect();
                events.pods(&cluster, &ns, &results).await;
                // A pin still on (its Pod kept changing) fails the run: the next run tries again.
                let failed = recovered.iter().any(|r| {
                    r.outcome.is_failure() || matches!(r.outcome, Outcome::Changed { .. })
                });
                let why = "a pin outside the selection could not be released; the next run tries \
                           again";
                NamespaceRun {
                    failure: failed.then(|| crate::Failure {
                        stage: Stage::Recover,
                        error: anyhow::Error::msg(why),
                    }),
                    namespace: ns,
                    report: Some(Report {
                        dry_run,
                        recovered,
                        results: Vec::new(),
                        pins_left: Vec::new(),
                        unusable: None,
                    }),
                    metrics: String::new(),
                }
            }
            Err(e) => failed(&ns, e),
        });
    }
    runs
}

/// One namespace's run of a run over `namespaces`, its metrics delivered (with the metrics file
/// only when it is the only namespace).
async fn execute(
    run: &PodRun,
    events: &Events,
    cfg: &PodConfig,
    targets: Targets<'_>,
    namespaces: usize,
) -> NamespaceRun<Report> {
    let started = std::time::Instant::now();
    let metrics = RunMetrics::new(&run.delivery.metrics_prefix, "pods", &cfg.namespace);
    let delivery = run.delivery.for_namespaces(namespaces);
    let outcome = act(run, events, cfg, targets, &metrics).await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut done = NamespaceRun::new(&cfg.namespace);
    let report = match outcome {
        Ok(report) => report,
        Err((stage, error)) => {
            if stopped(&error) {
                metrics.stopped(elapsed);
                metrics.deliver(&delivery, None, "").await;
            } else {
                metrics
                    .fail(stage.as_str(), elapsed, &delivery, &format!("{error:#}"))
                    .await;
            }
            done.metrics = metrics.text();
            done.failure = Some(Failure { stage, error });
            return done;
        }
    };
    metrics.results(&report.recovered);
    metrics.results(&report.results);
    for _ in &report.pins_left {
        metrics.error(Stage::PinLeft.as_str());
    }
    let failed = report
        .recovered
        .iter()
        .chain(&report.results)
        .filter(|r| r.outcome.is_failure())
        .count();
    let summary = summary(&report);
    let stop = stopped_by(run.cancel.cancelled(), &report);
    if let Some(cause) = stop.filter(|_| failed == 0 && report.pins_left.is_empty()) {
        // Neither a success nor a failure: no alert, the last success kept.
        let why = format!("stopped by {cause}: {summary}; the next run collects the rest");
        metrics.stopped(elapsed);
        metrics.deliver(&delivery, None, &summary).await;
        done.failure = Some(Failure {
            stage: Stage::Run,
            error: Stopped::new(why).into(),
        });
    } else if failed > 0 || !report.pins_left.is_empty() || report.unusable.is_some() {
        let mut why = format!("{failed} target(s) failed; the next run resumes them");
        let mut stage = Stage::Apply;
        if let Some((unusable_stage, unusable)) = &report.unusable {
            metrics.error(unusable_stage.as_str());
            stage = *unusable_stage;
            why = format!("{unusable}: stopped before planning, {summary}");
            if failed > 0 {
                why.push_str(&format!(
                    "; {failed} pin(s) stay on Pods being deleted until their archives are written"
                ));
            }
        }
        if !report.pins_left.is_empty() {
            why = format!("{why}; the pin is still on {}", report.pins_left.join(", "));
            stage = Stage::PinLeft;
        }
        metrics.finish(elapsed, None);
        metrics.deliver(&delivery, Some(&why), &summary).await;
        done.failure = Some(Failure {
            stage,
            error: anyhow::anyhow!(why),
        });
    } else {
        metrics.finish(elapsed, Some(clock::now()));
        let deleted = report
            .results
            .iter()
            .chain(&report.recovered)
            .any(|r| matches!(r.outcome, Outcome::Collected { .. }));
        let said = if deleted { summary.as_str() } else { "" };
        metrics.deliver(&delivery, None, said).await;
    }
    done.metrics = metrics.text();
    done.report = Some(report);
    done
}

/// Connects, does the run, then posts its Events: one on each Pod collected, refused or
/// failed, or one on the Namespace when the run failed. An error names the metrics stage.
async fn act(
    run: &PodRun,
    events: &Events,
    cfg: &PodConfig,
    targets: Targets<'_>,
    metrics: &RunMetrics,
) -> Result<Report, (Stage, anyhow::Error)> {
    let cluster = connect(&run.connection)
        .await
        .map_err(|e| (Stage::Run, e))?;
    let outcome = connected(run, &cluster, cfg, targets, metrics).await;
    match &outcome {
        Ok(report) => {
            let results: Vec<&TargetResult> =
                report.recovered.iter().chain(&report.results).collect();
            events.pods(&cluster, &cfg.namespace, &results).await;
            if let Some((_, why)) = &report.unusable {
                let error = anyhow::anyhow!("{why}: stopped before planning");
                events.run_failed(&cluster, &cfg.namespace, &error).await;
            }
        }
        // A stopped run (waiting for its lock) did not fail; a run that lost its lock writes
        // nothing more, Events included.
        Err((_, error)) if stopped(error) => {}
        Err((Stage::Lock, _)) => {}
        Err((_, error)) => events.run_failed(&cluster, &cfg.namespace, error).await,
    }
    outcome
}

/// Connects to the cluster.
pub(crate) async fn connect(
    connection: &gc_k8s::Connection,
) -> anyhow::Result<gc_k8s::KubeCluster> {
    gc_k8s::connect(connection)
        .await
        .context("cannot connect to the cluster")
}

/// Takes the run lock of `namespace` (none for a dry run); a cancelled run is [`Stopped`].
pub(crate) async fn take_lock(
    run: &PodRun,
    cluster: &gc_k8s::KubeCluster,
    namespace: &str,
) -> anyhow::Result<RunLock<gc_k8s::KubeCluster>> {
    crate::lock::take_or_stop(
        cluster,
        namespace,
        PODS_LOCK,
        &run.lock,
        run.dry_run,
        &*run.cancel,
    )
    .await
}

/// Releases `lock`; the error of its run when it was lost.
async fn release_lock(run: &PodRun, lock: RunLock<gc_k8s::KubeCluster>) -> Option<anyhow::Error> {
    crate::lock::release_saying(lock, &*run.cancel).await
}

/// Takes the run lock (a live run), proves the store and the archive sink usable, recovers
/// every pin, plans (when this run plans), applies, checks that no pin is left, releases the
/// lock. With the store or the sink unusable, recovery still runs: it releases every pin it can
/// and the run stops there (failed). A run whose lock was lost fails at stage `lock`. An error
/// names the metrics stage.
async fn connected(
    run: &PodRun,
    cluster: &gc_k8s::KubeCluster,
    cfg: &PodConfig,
    targets: Targets<'_>,
    metrics: &RunMetrics,
) -> Result<Report, (Stage, anyhow::Error)> {
    let dry_run = run.dry_run;
    let lock = take_lock(run, cluster, &cfg.namespace)
        .await
        .map_err(|e| (Stage::Run, e))?;
    let report = match usable(run.store.as_deref(), &run.sink, &cfg.cluster_id).await {
        Ok(store) => {
            let ports = Ports {
                cluster,
                store: &store,
                sink: &run.sink,
                clock: &SystemClock,
                // A lost lock stops the writes at once; a stop only between targets.
                held: lock.held(),
            };
            let progress = run.progress.as_deref();
            work(&ports, cfg, targets, metrics, progress).await
        }
        Err((stage, error)) => {
            let why = format!("{error:#}");
            apply::release_pins(cluster, cfg, lock.held(), &why, true)
                .await
                .with_context(|| {
                    format!(
                        "{why}; and cannot list pinned Pods in namespace {}",
                        cfg.namespace
                    )
                })
                .map_err(|e| (Stage::Recover, e))
                .map(|recovered| Report {
                    dry_run,
                    recovered,
                    results: Vec::new(),
                    pins_left: Vec::new(),
                    unusable: Some((stage, why)),
                })
        }
    };
    match release_lock(run, lock).await {
        Some(lost) => Err((Stage::Lock, lost)),
        None => report,
    }
}

/// The store and the archive sink, proven usable: the store opened, the sink's probe written
/// and read back (dry runs too, so that a dry run meets what a live run would). `Err` names
/// the metrics stage, `store` or `archive`.
async fn usable(
    store: Option<&str>,
    sink: &gc_store::Archives,
    cluster_id: &str,
) -> Result<gc_store::Store, (Stage, anyhow::Error)> {
    let store = crate::open_store(store)
        .await
        .map_err(|e| (Stage::Store, e))?;
    sink.probe(cluster_id)
        .await
        .with_context(|| format!("cannot use the archive sink {}", sink.shown()))
        .map_err(|e| (Stage::Archive, e))?;
    Ok(store)
}

/// Under the lock: recovery, the plan when this run makes it, the apply (asked to stop between
/// targets by the lock's stop flag), the pin check.
async fn work(
    ports: &Ports<'_, gc_k8s::KubeCluster, gc_store::Store, gc_store::Archives, SystemClock>,
    cfg: &PodConfig,
    targets: Targets<'_>,
    metrics: &RunMetrics,
    progress: Option<&dyn Progress>,
) -> Result<Report, (Stage, anyhow::Error)> {
    let dry_run = ports.held.is_dry_run();
    let recovered = apply::recover(ports, cfg)
        .await
        .with_context(|| format!("cannot list pinned Pods in namespace {}", cfg.namespace))
        .map_err(|e| (Stage::Recover, e))?;
    let planned;
    let (targets, recorded) = match targets {
        Targets::Reviewed(targets, recorded) => {
            metrics.reviewed(targets.len());
            (targets, recorded)
        }
        Targets::Planned => {
            let live = Live {
                cluster: ports.cluster,
                store: Some(ports.store),
                record: true,
            };
            let mut heard = |pages, pods| {
                if let Some(progress) = progress {
                    progress.page(pages, pods);
                }
            };
            let plan = plan_live(live, cfg, None, clock::now(), &mut heard).await;
            if let Some(progress) = progress {
                progress.done();
            }
            planned = plan.map_err(|e| (Stage::Plan, e))?;
            metrics.plan(&planned);
            (&planned.targets[..], None)
        }
    };
    let results = apply::apply_until(ports, cfg, targets, recorded).await;
    // A Pod whose pin recovery released and that this run then worked on as a target is
    // reported (counted, evented) once, by what the run last did to it.
    let mut recovered = recovered;
    let started = |t: &&TargetResult| !matches!(t.outcome, Outcome::NotStarted { .. });
    recovered.retain(|r| !results.iter().filter(started).any(|t| t.uid == r.uid));
    let pins_left = if dry_run {
        Vec::new()
    } else {
        apply::pinned_pods(ports.cluster, cfg)
            .await
            .with_context(|| format!("cannot list pinned Pods in namespace {}", cfg.namespace))
            .map_err(|e| (Stage::Recover, e))?
            .into_iter()
            .map(|p| p.name)
            .collect()
    };
    Ok(Report {
        dry_run,
        recovered,
        results,
        pins_left,
        unusable: None,
    })
}

/// The cluster a plan reads, the store its ledger lives in (else none is kept), and whether
/// the new ledger is recorded there.
pub struct Live<'a> {
    /// The cluster.
    pub cluster: &'a gc_k8s::KubeCluster,
    /// The store of the ledger.
    pub store: Option<&'a gc_store::Store>,
    /// Whether the plan's new ledger goes back to the store (not for a plan for another
    /// instant, nor one whose ledger is written elsewhere).
    pub record: bool,
}

/// Plans `cfg`'s namespace from the cluster at `now`, with `file_ledger` or the store's ledger;
/// `progress` hears of each page listed (pages, Pods). Nothing is written to the cluster.
///
/// # Errors
/// When the Pods cannot be listed, the ledger cannot be loaded or saved, or the plan fails
/// closed on the data.
pub async fn plan_live(
    live: Live<'_>,
    cfg: &PodConfig,
    file_ledger: Option<&PreviousLedger>,
    now: f64,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> anyhow::Result<PodPlan> {
    let loaded;
    let previous = match (file_ledger, live.store) {
        (Some(ledger), _) => ledger,
        (None, Some(store)) => {
            loaded = store
                .load_ledger(&cfg.cluster_id, &cfg.namespace)
                .await
                .context("cannot load the ledger")?;
            &loaded
        }
        (None, None) => &PreviousLedger::default(),
    };
    let query = gc_k8s::failed_pod_query(cfg, 500);
    let inventory = gc_k8s::list_inventory(
        live.cluster,
        &query,
        cfg.rules(),
        cfg.max_inventory + 1,
        progress,
    )
    .await
    .with_context(|| format!("cannot list the Pods of namespace {}", cfg.namespace))?;
    let plan = plan_pods(&inventory, previous, cfg, now)
        .with_context(|| format!("namespace {}", cfg.namespace))?;
    if let (Some(store), true) = (live.store, live.record) {
        store
            .save_ledger(&cfg.cluster_id, &cfg.namespace, &plan.ledger)
            .await
            .context("cannot save the ledger")?;
    }
    Ok(plan)
}

/// The cause of the stop asked for, when it left targets of `r` not started: a stop after the
/// last target stopped nothing, and the run is judged as if none had been asked.
fn stopped_by(cause: Option<String>, r: &Report) -> Option<String> {
    let not_started = |t: &TargetResult| matches!(t.outcome, Outcome::NotStarted { .. });
    cause.filter(|_| r.results.iter().any(not_started))
}

impl Report {
    /// One line: how many targets were collected, how many pins recovered, any pin left.
    #[must_use]
    pub fn summary(&self) -> String {
        summary(self)
    }
}

fn summary(r: &Report) -> String {
    let collected = r
        .results
        .iter()
        .filter(|t| {
            matches!(
                t.outcome,
                Outcome::Collected { .. } | Outcome::WouldCollect { .. }
            )
        })
        .count();
    let mode = if r.dry_run { " (dry run)" } else { "" };
    let mut line = format!(
        "{collected} of {} targets collected{mode}, {} pins recovered",
        r.results.len(),
        r.recovered.len()
    );
    if !r.pins_left.is_empty() {
        line.push_str(&format!(", PIN LEFT on {}", r.pins_left.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(outcomes: Vec<Outcome>) -> Report {
        let results = outcomes
            .into_iter()
            .enumerate()
            .map(|(i, outcome)| TargetResult {
                name: format!("p{i}"),
                uid: format!("u{i}"),
                outcome,
            })
            .collect();
        Report {
            dry_run: false,
            recovered: Vec::new(),
            results,
            pins_left: Vec::new(),
            unusable: None,
        }
    }

    #[test]
    fn a_stop_stopped_the_run_only_if_it_left_a_target_not_started() {
        let collected = || Outcome::Collected {
            uri: "file:///a".into(),
            sha256: "0".repeat(64),
            bytes: 1,
        };
        let not_started = || Outcome::NotStarted {
            reason: "stopping".into(),
        };
        let done = report(vec![collected(), collected()]);
        assert_eq!(stopped_by(Some("SIGTERM".into()), &done), None);
        let cut = report(vec![collected(), not_started()]);
        assert_eq!(
            stopped_by(Some("SIGTERM".into()), &cut).as_deref(),
            Some("SIGTERM")
        );
        assert_eq!(stopped_by(None, &cut), None);
        assert_eq!(stopped_by(Some("SIGINT".into()), &report(vec![])), None);
    }
}
