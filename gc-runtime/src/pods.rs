//! The failed-Pod collector ([`PodCollector`]), as the CLI's `run pods` and `apply` run it in
//! each namespace: take the run lock (a live run), prove the store and the archive sink usable
//! (else release every pin and stop), recover every pin left by earlier runs, plan from the
//! cluster (or take a reviewed plan's targets), apply them fenced until asked to stop, check that
//! no pin is left, release the lock; then count the run in its metrics, deliver them and post
//! its Events. With `-A`, [`PodCollector::release_outside`] releases the pins in namespaces the
//! run does not cover.

use crate::Context as _;
use gc_core::PodConfig;
use gc_core::PodPlan;
use gc_core::pods::apply::{self, Ports, TargetOutcome, TargetResult};
use gc_core::pods::approval::PlanFile;
use gc_core::pods::ledger::PreviousLedger;
use gc_core::pods::plan::Target;
use gc_core::ports::{Clock, OpenStore, PodCluster, Sink};
use serde::Serialize;

use crate::clock::SystemClock;
use crate::events::Events;
use crate::metrics::RunMetrics;
use crate::outcome::{Failure, NamespaceRun, Stage};
use crate::{RunLock, Settings, SettingsError, Stopped, stopped};

/// The run lock of the failed-Pod collector in its namespace (one per namespace, whatever the
/// cluster id).
pub const PODS_LOCK: &str = "gc-pods";

mod plan;
use plan::{Live, plan_live};

/// The failed-Pod collector's namespace when none is named (nor given by the context).
pub const PODS_NAMESPACE: &str = "default";

/// The failed-Pod collector, built once from connected parts, each a `gc-core` port: the cluster
/// ([`PodCluster`]), gc's store of receipts and ledgers ([`OpenStore`]), the archive sink
/// ([`Sink`]) and the clock. Each run of a namespace takes its Lease (a live run), proves the
/// store and the sink usable, recovers, plans or takes reviewed targets, applies them fenced,
/// checks that no pin is left, releases the Lease, then counts, delivers its metrics and posts
/// its Events. Events follow the run's dry-run setting by construction.
pub struct PodCollector<C, O, A, K = SystemClock> {
    cluster: C,
    store: O,
    sink: A,
    clock: K,
    settings: Settings,
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

impl<C: PodCluster, O: OpenStore, A: Send + Sync, K: Send + Sync> PodCollector<C, O, A, K> {
    /// A collector over `cluster`, `store`, `sink` and `clock`, acting as `settings` say.
    ///
    /// # Errors
    /// [`SettingsError`] when `settings.now` is not an instant to judge at.
    pub(crate) fn new(
        (cluster, store, sink, clock): (C, O, A, K),
        settings: Settings,
    ) -> Result<Self, SettingsError> {
        settings.check()?;
        Ok(Self {
            cluster,
            store,
            sink,
            clock,
            settings,
        })
    }

    /// Whether its runs are dry runs.
    pub fn dry_run(&self) -> bool {
        !self.settings.live
    }

    /// The cluster it was built over (to resolve a selection of namespaces on).
    pub fn cluster(&self) -> &C {
        &self.cluster
    }

    /// How it acts and reports.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Plans `cfg`'s namespace from the cluster at `now`, with `file_ledger` or the store's
    /// ledger (the new one recorded there when `record`); the settings' progress hook hears of
    /// each page listed. Nothing is written to the cluster.
    ///
    /// # Errors
    /// When the store cannot be opened, the Pods cannot be listed, the ledger cannot be loaded
    /// or saved, or the plan fails closed on the data.
    pub async fn plan(
        &self,
        cfg: &PodConfig,
        file_ledger: Option<&PreviousLedger>,
        now: f64,
        record: bool,
    ) -> crate::Result<PodPlan> {
        // A ledger file not recorded needs no store.
        let store = match (file_ledger, record) {
            (Some(_), false) => None,
            _ => Some(self.store.open().await.context("cannot open the store")?),
        };
        let live = Live {
            cluster: &self.cluster,
            store: store.as_ref(),
            record,
        };
        let mut heard = |pages, pods| {
            if let Some(progress) = &self.settings.progress {
                progress.page(pages, pods);
            }
        };
        let plan = plan_live(live, cfg, file_ledger, now, &mut heard).await;
        if let Some(progress) = &self.settings.progress {
            progress.done();
        }
        plan
    }
}

impl<C: PodCluster, O: OpenStore, A: Sink, K: Clock> PodCollector<C, O, A, K> {
    /// The run of `cfg`'s namespace, one of `namespaces` in all (the metrics file is written by
    /// the run only when it is the only one: [`crate::metrics::Delivery::write_merged`] writes
    /// several).
    pub async fn run_namespace(
        &self,
        cfg: &PodConfig,
        targets: Targets<'_>,
        namespaces: usize,
    ) -> NamespaceRun<Report> {
        let events = self.settings.events_hook();
        self.execute(&events, cfg, targets, namespaces).await
    }

    /// The collection of every namespace of `configs`: each namespace's run, planned by the run,
    /// then, when the collection covers `-A`'s choice of namespaces (`all`), the release of the
    /// pins outside them. With several runs, the metrics file is written once, merged.
    pub async fn collect(
        &self,
        configs: &[PodConfig],
        all: bool,
        inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
    ) -> Vec<NamespaceRun<Report>> {
        let covered: Vec<String> = configs.iter().map(|c| c.namespace.clone()).collect();
        self.settings.delivery.scope("pods", &covered);
        let (events, mut runs) = (self.settings.events_hook(), Vec::new());
        for cfg in configs {
            runs.push((self.execute(&events, cfg, Targets::Planned, configs.len())).await);
        }
        if all {
            runs.extend(
                self.release_outside_posting(&events, &covered, inputs)
                    .await,
            );
        }
        self.merged(runs)
    }

    /// `runs`, their metrics file written once, merged, when there are several (a single run
    /// wrote its own).
    fn merged(&self, runs: Vec<NamespaceRun<Report>>) -> Vec<NamespaceRun<Report>> {
        if runs.len() > 1 {
            let texts: Vec<String> = runs.iter().map(|r| r.metrics.clone()).collect();
            self.settings.delivery.write_merged(&texts);
        }
        runs
    }

    /// The run of each reviewed plan of `plans` (opened by
    /// [`gc_core::pods::approval::open_plans`], whose policy equals apply's own), each acting
    /// under apply's own policy `inputs`, with the observation ledger kept outside the store
    /// (`ledger`), if any; then, when the run covers `-A`'s choice of namespaces (`all`: the
    /// namespaces it resolved), the release of the pins outside them, as [`Self::collect`] does.
    ///
    /// # Errors
    /// When `inputs` refuses a plan's namespace: nothing is run then.
    pub async fn apply(
        &self,
        plans: &[PlanFile],
        ledger: Option<&PreviousLedger>,
        all: Option<&[String]>,
        inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
    ) -> Result<Vec<NamespaceRun<Report>>, gc_core::input::InputError> {
        let configs =
            (plans.iter().map(|p| inputs(&p.config.namespace))).collect::<Result<Vec<_>, _>>()?;
        let (events, mut runs) = (self.settings.events_hook(), Vec::new());
        for (plan, cfg) in plans.iter().zip(&configs) {
            let targets = Targets::Reviewed(&plan.targets, ledger);
            runs.push(self.execute(&events, cfg, targets, plans.len()).await);
        }
        if let Some(covered) = all {
            runs.extend(self.release_outside_posting(&events, covered, inputs).await);
        }
        Ok(self.merged(runs))
    }

    /// With `-A`: the pins in namespaces the run does not cover (outside
    /// `--namespace-selector`, or excluded), found by one metadata-only list of every
    /// namespace's Pods (paged), each released under that namespace's run lock, fenced, and
    /// never collected: a namespace that leaves the selection keeps no pin, so no delete of its
    /// Pods hangs. One run per such namespace, reported as any other (system namespaces are
    /// never touched).
    pub async fn release_outside(
        &self,
        covered: &[String],
        inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
    ) -> Vec<NamespaceRun<Report>> {
        let events = self.settings.events_hook();
        self.release_outside_posting(&events, covered, inputs).await
    }

    /// [`Self::release_outside`], posting to `events`.
    async fn release_outside_posting(
        &self,
        events: &Events,
        covered: &[String],
        inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
    ) -> Vec<NamespaceRun<Report>> {
        let failed = |namespace: &str, error: crate::Error| {
            NamespaceRun::failed(namespace, Stage::Run, error)
        };
        let (cluster, dry_run) = (&self.cluster, self.dry_run());
        let all = "(outside the selection)";
        let pin = match inputs("default") {
            Ok(cfg) => cfg.pin_finalizer,
            Err(e) => return vec![failed(all, e.into())],
        };
        let pinned = gc_core::pages::collect(
            |token: Option<String>| async move {
                cluster.list_all_pod_metadata(500, token.as_deref()).await
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
                let e = crate::Error::from(e).context("cannot list pinned Pods in every namespace");
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
                let lock = self.take_lock(&ns).await?;
                let why = "its namespace is outside the run's selection (its namespace selector and \
                           exclusions): never collected";
                let recovered = apply::release_pins(cluster, &cfg, lock.held(), why, false)
                    .await
                    .with_context(|| format!("cannot list pinned Pods in namespace {ns}"));
                match self.release_lock(lock).await {
                    Some(lost) => Err(lost),
                    None => recovered,
                }
            };
            runs.push(match released.await {
                Ok(recovered) => {
                    let results: Vec<&TargetResult> = recovered.iter().collect();
                    events.pods(cluster, &ns, &results).await;
                    // A pin still on (its Pod kept changing) fails the run: the next run tries
                    // again.
                    let failed = recovered.iter().any(|r| {
                        r.outcome.is_failure() || matches!(r.outcome, TargetOutcome::Changed { .. })
                    });
                    let why = "a pin outside the selection could not be released; the next run \
                               tries again";
                    NamespaceRun {
                        failure: failed.then(|| Failure {
                            stage: Stage::Recover,
                            error: crate::Error::msg(why),
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

    /// One namespace's run of a run over `namespaces`, its metrics delivered (with the metrics
    /// file only when it is the only namespace).
    async fn execute(
        &self,
        events: &Events,
        cfg: &PodConfig,
        targets: Targets<'_>,
        namespaces: usize,
    ) -> NamespaceRun<Report> {
        let started = std::time::Instant::now();
        let settings = &self.settings;
        let metrics = RunMetrics::new(&settings.delivery.metrics_prefix, "pods", &cfg.namespace);
        let delivery = settings.delivery.for_namespaces(namespaces);
        let outcome = self.act(events, cfg, targets, &metrics).await;
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
        let stop = stopped_by(settings.cancel.cancelled(), &report);
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
                        "; {failed} pin(s) stay on Pods being deleted until their archives are \
                         written"
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
                error: crate::Error::msg(why),
            });
        } else {
            metrics.finish(elapsed, Some(self.clock.now()));
            let deleted = report
                .results
                .iter()
                .chain(&report.recovered)
                .any(|r| matches!(r.outcome, TargetOutcome::Collected { .. }));
            let said = if deleted { summary.as_str() } else { "" };
            metrics.deliver(&delivery, None, said).await;
        }
        done.metrics = metrics.text();
        done.report = Some(report);
        done
    }

    /// Does the run, then posts its Events: one on each Pod collected, refused or failed, or
    /// one on the Namespace when the run failed. An error names the metrics stage.
    async fn act(
        &self,
        events: &Events,
        cfg: &PodConfig,
        targets: Targets<'_>,
        metrics: &RunMetrics,
    ) -> Result<Report, (Stage, crate::Error)> {
        let cluster = &self.cluster;
        let outcome = self.locked(cfg, targets, metrics).await;
        match &outcome {
            Ok(report) => {
                let results: Vec<&TargetResult> =
                    report.recovered.iter().chain(&report.results).collect();
                events.pods(cluster, &cfg.namespace, &results).await;
                if let Some((_, why)) = &report.unusable {
                    let error = crate::Error::msg(format!("{why}: stopped before planning"));
                    events.run_failed(cluster, &cfg.namespace, &error).await;
                }
            }
            // A stopped run (waiting for its lock) did not fail; a run that lost its lock
            // writes nothing more, Events included.
            Err((_, error)) if stopped(error) => {}
            Err((Stage::Lock, _)) => {}
            Err((_, error)) => events.run_failed(cluster, &cfg.namespace, error).await,
        }
        outcome
    }

    /// Takes the run lock of `namespace` (none for a dry run); a cancelled run is [`Stopped`].
    async fn take_lock(&self, namespace: &str) -> crate::Result<RunLock<C>> {
        let (lock, cancel) = (&self.settings.lock, &*self.settings.cancel);
        let dry_run = self.dry_run();
        crate::lock::take_or_stop(&self.cluster, namespace, PODS_LOCK, lock, dry_run, cancel).await
    }

    /// Releases `lock`; the error of its run when it was lost.
    async fn release_lock(&self, lock: RunLock<C>) -> Option<crate::Error> {
        crate::lock::release_saying(lock, &*self.settings.cancel).await
    }

    /// Takes the run lock (a live run), proves the store and the archive sink usable, recovers
    /// every pin, plans (when this run plans), applies, checks that no pin is left, releases the
    /// lock. With the store or the sink unusable, recovery still runs: it releases every pin it
    /// can and the run stops there (failed). A run whose lock was lost fails at stage `lock`. An
    /// error names the metrics stage.
    async fn locked(
        &self,
        cfg: &PodConfig,
        targets: Targets<'_>,
        metrics: &RunMetrics,
    ) -> Result<Report, (Stage, crate::Error)> {
        let (cluster, dry_run) = (&self.cluster, self.dry_run());
        let lock = (self.take_lock(&cfg.namespace).await).map_err(|e| (Stage::Run, e))?;
        let report = match self.usable(&cfg.cluster_id).await {
            Ok(store) => {
                let ports = Ports {
                    cluster,
                    store: &store,
                    sink: &self.sink,
                    clock: &self.clock,
                    // A lost lock stops the writes at once; a stop only between targets.
                    held: lock.held(),
                    concurrency: self.settings.concurrency,
                };
                self.work(&ports, cfg, targets, metrics).await
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
        match self.release_lock(lock).await {
            Some(lost) => Err((Stage::Lock, lost)),
            None => report,
        }
    }

    /// The store and the archive sink, proven usable: the store opened, the sink's probe
    /// written and read back (dry runs too, so that a dry run meets what a live run would).
    /// `Err` names the metrics stage, `store` or `archive`.
    async fn usable(&self, cluster_id: &str) -> Result<O::Store, (Stage, crate::Error)> {
        let store = (self.store.open().await.context("cannot open the store"))
            .map_err(|e| (Stage::Store, e))?;
        let sink = &self.sink;
        sink.probe(cluster_id)
            .await
            .with_context(|| format!("cannot use the archive sink {}", sink.shown()))
            .map_err(|e| (Stage::Archive, e))?;
        Ok(store)
    }

    /// Under the lock: recovery, the plan when this run makes it, the apply (asked to stop
    /// between targets by the lock's stop flag), the pin check.
    async fn work(
        &self,
        ports: &Ports<'_, C, O::Store, A, K>,
        cfg: &PodConfig,
        targets: Targets<'_>,
        metrics: &RunMetrics,
    ) -> Result<Report, (Stage, crate::Error)> {
        let dry_run = ports.held.is_dry_run();
        let pinned = || format!("cannot list pinned Pods in namespace {}", cfg.namespace);
        let recovered = apply::recover(ports, cfg)
            .await
            .with_context(pinned)
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
                let progress = self.settings.progress.as_deref();
                let mut heard = |pages, pods| {
                    if let Some(progress) = progress {
                        progress.page(pages, pods);
                    }
                };
                let now = self.settings.now.unwrap_or_else(|| self.clock.now());
                let plan = plan_live(live, cfg, None, now, &mut heard).await;
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
        let started = |t: &&TargetResult| !matches!(t.outcome, TargetOutcome::NotStarted { .. });
        recovered.retain(|r| !results.iter().filter(started).any(|t| t.uid == r.uid));
        let pins_left = if dry_run {
            Vec::new()
        } else {
            apply::pinned_pods(ports.cluster, cfg)
                .await
                .with_context(pinned)
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

/// The cause of the stop asked for, when it left targets of `r` not started: a stop after the
/// last target stopped nothing, and the run is judged as if none had been asked.
fn stopped_by(cause: Option<String>, r: &Report) -> Option<String> {
    let not_started = |t: &TargetResult| matches!(t.outcome, TargetOutcome::NotStarted { .. });
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
                TargetOutcome::Collected { .. } | TargetOutcome::WouldCollect { .. }
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
mod tests_collector;

#[cfg(test)]
mod tests {
    use super::*;

    fn report(outcomes: Vec<TargetOutcome>) -> Report {
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
        let collected = || TargetOutcome::Collected {
            uri: "file:///a".into(),
            sha256: "0".repeat(64),
            bytes: 1,
        };
        let not_started = || TargetOutcome::NotStarted {
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
