//! The session collector's run in one namespace, as the CLI's `run sessions` does it: take the
//! run lock (a live run), prove the archive sink takes writes (dry runs too), list the labelled
//! resources, look their sessions up, apply the guard, archive each orphan's manifest with its
//! receipt and send its fenced delete until asked to stop, release the lock; then the audit
//! records, the Events, and the run's metrics, delivered.

use gc_core::ports::{
    ObjectCreator, SessionCluster, SessionDirectory, SessionReceipts, Sink, Store,
};
use gc_core::selector::Spared;
use gc_core::sessions::SessionConfig;
use gc_core::sessions::run::{
    self as collect_sessions, AuditRecord, DeleteResult, Keep, SessionReport, SessionRunError,
};
use gc_core::sessions::volumes::VolumeReview;

use crate::audit::{Audit, Counted, RefusedLine, requested_by};
use crate::clock;
use crate::events::Events;
use crate::metrics::RunMetrics;
use crate::outcome::{Failure, NamespaceRun, Stage};
use crate::restore::{RestoreRequest, Restored};
use crate::{Settings, SettingsError, Stopped, stopped};

mod words;
pub use words::{
    Ranked, rank, report_missing, report_unknown_states, round_trips, unrequested_words,
};

/// The run lock of the session collector in its namespace (one per namespace, whatever the
/// cluster id).
pub const SESSIONS_LOCK: &str = "gc-sessions";

/// The session collector, built once from connected parts, each a `gc-core` port: the cluster
/// ([`SessionCluster`]), the application's session directory (read-only), gc's store of
/// receipts, and the archive sink. Each collection of a namespace takes its Lease (a live run),
/// proves the sink takes writes, lists, looks up, guards, archives each orphan with its receipt
/// and sends its fenced delete until asked to stop, releases the Lease, then audits, posts its
/// Events and delivers its metrics. Events follow the run's dry-run setting by construction.
///
/// Each operation asks only for the parts it uses, so a collector built for less cannot do
/// more: `()` stands for a part not given. A plan needs the cluster and the directory
/// (`(cluster, directory, (), ())`); a restore the cluster, the store and the sink, never the
/// application's database (`(cluster, (), store, sink)`); a collection all four.
pub struct SessionCollector<C, D, S, A> {
    cluster: C,
    directory: D,
    store: S,
    sink: A,
    settings: Settings,
    events: Events,
}

impl<C: SessionCluster, D, S, A> SessionCollector<C, D, S, A> {
    /// A collector over `cluster`, `directory`, `store` and `sink`, acting as `settings` say.
    ///
    /// # Errors
    /// [`SettingsError`] when `settings.now` is not an instant to judge at.
    pub(crate) fn new(
        (cluster, directory, store, sink): (C, D, S, A),
        settings: Settings,
    ) -> Result<Self, SettingsError> {
        settings.check()?;
        let events = settings.events_hook();
        Ok(Self {
            cluster,
            directory,
            store,
            sink,
            settings,
            events,
        })
    }

    /// The parts the collector was built from, given back (to close them).
    pub fn into_parts(self) -> (C, D, S, A) {
        (self.cluster, self.directory, self.store, self.sink)
    }

    /// Whether its runs are dry runs.
    pub fn dry_run(&self) -> bool {
        !self.settings.live
    }

    /// Who holds the run lock (the Lease [`SESSIONS_LOCK`]) of `namespace` now, if anyone.
    ///
    /// # Errors
    /// The Lease could not be read.
    pub async fn lock_holder(
        &self,
        namespace: &str,
    ) -> Result<Option<gc_core::ports::LeaseHolder>, gc_core::ports::ClusterError> {
        self.cluster.holder(namespace, SESSIONS_LOCK).await
    }
}

impl<C: SessionCluster, D: SessionDirectory, S, A> SessionCollector<C, D, S, A> {
    /// What a collection of `cfg`'s namespace would do now (at the settings' instant, else the
    /// clock's): every labelled resource scanned and judged against the session directory,
    /// with the guard applied. Reads the cluster and the directory; takes no Lease and writes
    /// nothing anywhere.
    ///
    /// # Errors
    /// The plan's refusal (the guard, no answer for an id) or a failed list or lookup, naming
    /// the namespace: no plan.
    pub async fn plan(&self, cfg: &SessionConfig) -> crate::Result<collect_sessions::Planned> {
        let now = self.settings.now.unwrap_or_else(clock::now);
        let planned = collect_sessions::plan(&self.cluster, &self.directory, cfg, now).await;
        let what = "no plan (`override_guard` shows what a guard refused)";
        planned.map_err(|e| refused(e, cfg, what))
    }
}

impl<C: SessionCluster, D: SessionDirectory, S: Store, A: Sink> SessionCollector<C, D, S, A> {
    /// The collection of every namespace of `configs`, one after the other, each under its own
    /// lock, its records sent to `audit`. With several, the metrics file is written once,
    /// merged. The first namespace's run also reviews the volumes gc kept in namespaces this
    /// collection does not select: none is stranded by a namespace leaving the selection.
    pub async fn collect(
        &self,
        configs: &[SessionConfig],
        audit: &mut (dyn Audit + Send),
    ) -> Vec<NamespaceRun<SessionReport>> {
        let settings = &self.settings;
        let now = settings.now.unwrap_or_else(clock::now);
        let namespaces: Vec<String> = configs.iter().map(|c| c.namespace.clone()).collect();
        settings.delivery.scope("sessions", &namespaces);
        let delivery = settings.delivery.for_namespaces(configs.len());
        let mut runs = Vec::with_capacity(configs.len());
        let reviewing = configs.first().map(|first| SessionConfig {
            volume_review: VolumeReview::AllBut(namespaces[1..].to_vec()),
            ..first.clone()
        });
        for cfg in reviewing.iter().chain(configs.iter().skip(1)) {
            let started = std::time::Instant::now();
            let metrics = RunMetrics::new(
                &settings.delivery.metrics_prefix,
                "sessions",
                &cfg.namespace,
            );
            let result = self.collect_one(cfg, now, &metrics, audit).await;
            let elapsed = started.elapsed().as_secs_f64();
            let (report, error) = match result {
                Ok(report) => (Some(report), None),
                Err((report, error)) => (report, Some(error)),
            };
            match &error {
                None => {
                    metrics.finish(elapsed, Some(clock::now()));
                    let line = report.as_ref().map(|r| summary(r, cfg, self.dry_run()));
                    metrics
                        .deliver(&delivery, None, line.as_deref().unwrap_or(""))
                        .await;
                }
                Some(error) if stopped(error) => {
                    metrics.stopped(elapsed);
                    metrics.deliver(&delivery, None, "").await;
                }
                Some(error) => {
                    metrics
                        .fail(
                            Stage::Run.as_str(),
                            elapsed,
                            &delivery,
                            &format!("{error:#}"),
                        )
                        .await
                }
            }
            runs.push(NamespaceRun {
                namespace: cfg.namespace.clone(),
                report,
                failure: error.map(|error| Failure {
                    stage: Stage::Run,
                    error,
                }),
                metrics: metrics.text(),
            });
        }
        if configs.len() > 1 {
            let texts: Vec<String> = runs.iter().map(|r| r.metrics.clone()).collect();
            settings.delivery.write_merged(&texts);
        }
        if let Some(cfg) = configs.first() {
            let missing = runs
                .iter()
                .flat_map(|r| r.report.iter())
                .flat_map(|r| &r.missing_kinds);
            report_missing(missing, &cfg.kinds);
        }
        runs
    }

    /// One namespace's run under its own lock, then its Events; its report, or why it did not
    /// finish (with the report when it got one).
    async fn collect_one(
        &self,
        cfg: &SessionConfig,
        now: f64,
        metrics: &RunMetrics,
        audit: &mut (dyn Audit + Send),
    ) -> Result<SessionReport, (Option<SessionReport>, crate::Error)> {
        let (cluster, events, dry_run) = (&self.cluster, &self.events, self.dry_run());
        let cancel = &*self.settings.cancel;
        let time = gc_core::isotime::format_timestamp(now);
        // What a run that fails did all the same, audited before its refusal: the volumes
        // reviewed by a run refused before its deletes, or what a run did before it lost its
        // lock (a claim deleted, a volume given back its policy is not seen again by any later
        // run).
        let mut done: Option<SessionReport> = None;
        // The uids whose Events were posted while the run deleted.
        let mut posted = std::collections::HashSet::new();
        let outcome = async {
            let lock = crate::lock::take_or_stop(
                cluster,
                &cfg.namespace,
                SESSIONS_LOCK,
                &self.settings.lock,
                dry_run,
                cancel,
            )
            .await?;
            // A lost lock fails what is left; a stop leaves it not started.
            let held = lock.held();
            // Each delete's Event is posted as it ends, beside the deletes still at work.
            let (sent, records) = tokio::sync::mpsc::unbounded_channel();
            let directory = &self.directory;
            let report = match self.sink.probe(&cfg.cluster_id).await {
                Ok(()) => {
                    let run = async {
                        // Dropped when the run ends: the Events' stream then posts the rest.
                        let sent = sent;
                        let acted = move |record: &AuditRecord| drop(sent.send(record.clone()));
                        let keep = Keep {
                            sink: &self.sink,
                            store: &self.store,
                            volumes: cluster,
                            concurrency: self.settings.concurrency,
                            acted: Some(&acted),
                        };
                        collect_sessions::run(cluster, directory, keep, cfg, now, held).await
                    };
                    let (report, streamed) =
                        tokio::join!(run, events.stream(cluster, records, held));
                    posted = streamed;
                    match report {
                        Ok(report) => Ok(report),
                        Err(e) => {
                            // Refused before its deletes: the volumes' review needs neither the
                            // database nor the plan, and a window that passed is not held by a
                            // refusal.
                            done = Some(
                                collect_sessions::review(cluster, &self.store, cfg, now, held)
                                    .await,
                            );
                            Err(refused(e, cfg, "nothing deleted"))
                        }
                    }
                }
                Err(e) => Err(crate::Error::from(e).context(format!(
                    "cannot use the archive sink {}: nothing deleted",
                    self.sink.shown()
                ))),
            };
            // A run that lost its lock fails saying so (what it did before is still audited):
            // what it did not finish is the next run's.
            match crate::lock::release_saying(lock, cancel).await {
                Some(lost) => {
                    done = report.ok().or(done.take());
                    Err(lost)
                }
                None => report,
            }
        }
        .await;
        let report = match outcome {
            Ok(report) => report,
            Err(error) => {
                if let Some(report) = &done {
                    if let Err(e) = audit.judged(cfg, report, &time) {
                        return Err((done, e));
                    }
                    let why = report.volumes_unlisted.iter().chain(&report.volumes_note);
                    for why in why {
                        tracing::warn!("{why}");
                    }
                }
                if !stopped(&error) && !crate::lock::lock_lost(&error) {
                    events.run_failed(cluster, &cfg.namespace, &error).await;
                }
                // The audit log says why this run deleted nothing.
                let line = RefusedLine {
                    time: &time,
                    cluster: &cfg.cluster_id,
                    namespace: &cfg.namespace,
                    api_version: None,
                    kind: None,
                    name: None,
                    uid: None,
                    session: None,
                    decision: "refused",
                    reason: format!("{error:#}"),
                    result: None,
                    archive: None,
                    counted: Counted::of(&error),
                    dry_run,
                    requested_by: requested_by(cfg),
                };
                if let Err(e) = audit.refused(&line) {
                    return Err((None, e));
                }
                return Err((None, error));
            }
        };
        events.sessions(cluster, &report, &posted).await;
        record(metrics, &report);
        if let Err(e) = audit.judged(cfg, &report, &time) {
            return Err((Some(report), e));
        }
        let line = summary(&report, cfg, dry_run);
        tracing::info!("{line}");
        report_unknown_states(&cfg.namespace, &report.unknown_states);
        if let Some(note) = &report.volumes_note {
            tracing::warn!("{note}");
        }
        if let Some(why) = report.volumes_unlisted.clone() {
            return Err((
                Some(report),
                crate::Error::msg(format!("{why}; no volume given back its policy")),
            ));
        }
        if report.failures > 0 {
            let error = crate::Error::msg(format!(
                "{} delete(s) failed; the next run tries them again",
                report.failures
            ));
            return Err((Some(report), error));
        }
        let not_started = report
            .records
            .iter()
            .filter(|r| matches!(r.result, Some(DeleteResult::NotStarted(_))))
            .count();
        if not_started > 0 {
            let cause = cancel.cancelled().unwrap_or_else(|| "a stop".into());
            let error = Stopped::new(format!(
                "stopped by {cause}: {not_started} delete(s) not started in namespace {}; the \
                 next run judges them again",
                cfg.namespace
            ));
            return Err((Some(report), error.into()));
        }
        Ok(report)
    }
}

impl<C, D, S, A> SessionCollector<C, D, S, A>
where
    C: SessionCluster + ObjectCreator,
    S: SessionReceipts,
    A: Sink,
{
    /// Undoes the deletes of the request's sessions: every archived object of each session that
    /// does not exist now, created again from its archive, read back and verified against its
    /// receipt first (see [`crate::restore`]). A dry run sends each create as a server-side dry
    /// run and moves no volume. Takes no Lease: it deletes nothing.
    ///
    /// # Errors
    /// The request's usage error (nothing read or written). What came of each object, failures
    /// included, is in the answer; [`crate::restore::failures`] makes them one error.
    pub async fn restore(&self, request: &RestoreRequest) -> crate::Result<Vec<Restored>> {
        self.restore_as(&self.cluster, request, false).await
    }

    /// Every receipt of the objects archived with the session label `session` in `namespace`
    /// of `cluster_id`, newest first (what a restore of that session reads).
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn receipts(
        &self,
        cluster_id: &str,
        namespace: &str,
        session: &str,
    ) -> crate::Result<Vec<gc_core::ports::Receipt>> {
        let receipts = self.store.session_receipts(cluster_id, namespace, session);
        receipts.await.map_err(|e| {
            crate::Error::msg(format!(
                "cannot read the receipts in {}: {e}",
                self.store.shown()
            ))
        })
    }

    /// [`Self::restore`] with `cluster` creating the objects and moving the volumes (the
    /// restore account's, for the request API: the collector's own may not create), and a dry
    /// run when `dry_run` is (or the collector's settings are). The receipts, archives and
    /// Events are the collector's.
    ///
    /// # Errors
    /// As [`Self::restore`].
    pub async fn restore_as(
        &self,
        cluster: &C,
        request: &RestoreRequest,
        dry_run: bool,
    ) -> crate::Result<Vec<Restored>> {
        request.check()?;
        let run = crate::restore::Restore {
            cluster,
            store: &self.store,
            sink: &self.sink,
            request,
            dry_run: dry_run || !self.settings.live,
            events: &self.events,
            stop: &*self.settings.cancel,
        };
        Ok(crate::restore::restore_sessions(&run).await)
    }
}

/// The session collector's namespace when none is named (StreamSpace's).
pub const SESSIONS_NAMESPACE: &str = "streamspace";

/// A refusal, naming what came of it (`outcome`: no plan, nothing deleted); its type gives the
/// failure's kind.
#[must_use]
pub fn refused(error: SessionRunError, cfg: &SessionConfig, outcome: &str) -> crate::Error {
    crate::Error::from(error).context(format!(
        "namespace {} of cluster {}: {outcome}",
        cfg.namespace, cfg.cluster_id
    ))
}

/// One kind's counts in a session run.
#[derive(Default)]
struct Counts {
    scanned: u64,
    orphaned: u64,
    held: u64,
    deferred: u64,
    deleted: u64,
}

/// Counts a session run by kind and decision.
fn record(metrics: &RunMetrics, report: &SessionReport) {
    use gc_core::sessions::SessionDecision as D;
    let mut kinds: std::collections::BTreeMap<&str, Counts> = std::collections::BTreeMap::new();
    for r in &report.records {
        let c = kinds.entry(r.judged.resource.kind.as_str()).or_default();
        c.scanned += 1;
        match &r.judged.decision {
            D::Held { .. } => {
                c.orphaned += 1;
                c.held += 1;
            }
            D::Deferred { .. } => {
                c.orphaned += 1;
                c.deferred += 1;
            }
            D::Delete { .. } | D::Unrequested { .. } => c.orphaned += 1,
            D::Kept { .. } | D::Skipped { .. } => {}
        }
        match &r.result {
            Some(DeleteResult::Deleted) => c.deleted += 1,
            Some(DeleteResult::Changed) => metrics.fence_lost("delete"),
            Some(DeleteResult::Failed(_)) => metrics.error("delete"),
            Some(DeleteResult::WouldDelete | DeleteResult::NotStarted(_)) | None => {}
        }
    }
    for (kind, c) in kinds {
        metrics.objects(kind, c.scanned, c.orphaned, c.held, c.deferred, c.deleted);
    }
}

/// The run in one line: counts by decision and by result.
fn summary(report: &SessionReport, cfg: &SessionConfig, dry_run: bool) -> String {
    let mut counts: Ranked = [0; 6];
    let (mut done, mut changed, mut protected, mut excluded) = (0, 0, 0, 0);
    for r in &report.records {
        counts[rank(&r.judged.decision)] += 1;
        match r.judged.decision.spared() {
            Some(Spared::Protected) => protected += 1,
            Some(Spared::Excluded) => excluded += 1,
            None => {}
        }
        match &r.result {
            Some(DeleteResult::Deleted | DeleteResult::WouldDelete) => done += 1,
            Some(DeleteResult::Changed) => changed += 1,
            _ => {}
        }
    }
    let verb = if dry_run {
        "would delete (dry run)"
    } else {
        "deleted"
    };
    // Spared resources are counted apart from the other skipped ones, when there are any.
    let skipped = if protected + excluded > 0 {
        format!(
            "{} skipped, {protected} protected, {excluded} excluded",
            counts[3] - protected - excluded
        )
    } else {
        format!("{} skipped", counts[3])
    };
    format!(
        "sessions in namespace {} of cluster {}: {} scanned, {done} {verb}, {changed} changed \
         since listed, {} failed, {} deferred, {} held, {skipped}, {} kept{}; {}",
        cfg.namespace,
        cfg.cluster_id,
        report.records.len(),
        report.failures,
        counts[1],
        counts[2],
        counts[4],
        unrequested_words(&counts),
        round_trips(report.lookups)
    )
}

#[cfg(test)]
mod tests_collector;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditLog;
    use gc_core::sessions::{Judged, Resource, SessionDecision};

    /// A Service due for deletion, and what its delete did.
    fn deleted(name: &str, result: DeleteResult) -> AuditRecord {
        AuditRecord {
            cluster: "primary".into(),
            namespace: "ns".into(),
            judged: Judged {
                resource: Resource {
                    api_version: "v1".into(),
                    kind: "Service".into(),
                    name: name.into(),
                    uid: format!("u-{name}"),
                    resource_version: "7".into(),
                    session: Some(name.into()),
                    created: None,
                    deleting: false,
                },
                decision: SessionDecision::Delete {
                    reason: format!("no session {name} in the database"),
                },
            },
            result: Some(result),
            archive: None,
            dry_run: false,
        }
    }

    #[test]
    fn a_run_counts_deletes_lost_fences_and_failures_but_not_what_it_did_not_start() {
        let report = SessionReport {
            records: vec![
                deleted("a", DeleteResult::Deleted),
                deleted("b", DeleteResult::Changed),
                deleted("c", DeleteResult::Changed),
                deleted("d", DeleteResult::Failed("503".into())),
                deleted("e", DeleteResult::NotStarted("stopping".into())),
            ],
            missing_kinds: Vec::new(),
            lookups: 1,
            unknown_states: Default::default(),
            failures: 1,
            volumes_unlisted: None,
            volumes_note: None,
        };
        let metrics = RunMetrics::new("gc", "sessions", "ns");
        record(&metrics, &report);
        metrics.finish(1.0, None);
        let text = metrics.text();
        let run = r#"collector="sessions",namespace="ns""#;
        let service = r#"collector="sessions",kind="Service",namespace="ns""#;
        for (name, labels, value) in [
            (
                "gc_last_run_fences_lost",
                format!(r#"{run},stage="delete""#),
                2,
            ),
            ("gc_last_run_errors", format!(r#"{run},stage="delete""#), 1),
            ("gc_last_run_objects_deleted", service.to_owned(), 1),
            ("gc_last_run_objects_eligible", service.to_owned(), 5),
        ] {
            let line = format!("{name}{{{labels}}} {value}\n");
            assert!(text.contains(&line), "{line}: {text}");
        }
    }

    /// The audit log: one JSON line per record judged, with the run's instant, and one for a
    /// refusal; each batch written whole.
    #[test]
    fn the_audit_log_is_one_json_line_per_record_and_per_refusal() {
        let report = SessionReport {
            records: vec![
                deleted("a", DeleteResult::Deleted),
                deleted("b", DeleteResult::Changed),
            ],
            missing_kinds: Vec::new(),
            lookups: 1,
            unknown_states: Default::default(),
            failures: 0,
            volumes_unlisted: None,
            volumes_note: None,
        };
        let mut log = AuditLog(Vec::new());
        let cfg = gc_core::testing::session_config();
        let time = "2026-12-01T00:00:00Z";
        log.judged(&cfg, &report, time).unwrap();
        let refused = RefusedLine {
            time,
            cluster: "primary",
            namespace: "ns",
            api_version: None,
            kind: None,
            name: None,
            uid: None,
            session: None,
            decision: "refused",
            reason: "the guard refused".into(),
            result: None,
            archive: None,
            counted: None,
            dry_run: false,
            requested_by: None,
        };
        log.refused(&refused).unwrap();
        let text = String::from_utf8(log.0).unwrap();
        let lines: Vec<serde_json::Value> = (text.lines())
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            (&lines[0]["time"], &lines[0]["name"], &lines[0]["result"]),
            (&time.into(), &"a".into(), &"deleted".into())
        );
        assert_eq!(lines[1]["name"], "b");
        assert_eq!(
            (
                &lines[2]["decision"],
                &lines[2]["reason"],
                &lines[2]["name"]
            ),
            (
                &"refused".into(),
                &"the guard refused".into(),
                &serde_json::Value::Null
            )
        );
    }

    #[test]
    fn a_guard_refusal_names_what_it_counted() {
        use gc_core::sessions::SessionPlanError as E;
        let guard = E::MassDeletion {
            orphaned: 7,
            judged: 8,
            orphans: 21,
            ratio: 0.5,
            floor: 10,
        };
        let error = crate::Error::from(SessionRunError::Plan(guard)).context("namespace a");
        let counted = Counted {
            sessions: 8,
            gone: 7,
            resources: 21,
        };
        assert_eq!(Counted::of(&error), Some(counted));
        let none = crate::Error::from(E::NoRowFound { ids: 3, orphans: 9 });
        assert_eq!(
            Counted::of(&none).map(|c| (c.sessions, c.gone)),
            Some((3, 3))
        );
        let database =
            SessionRunError::Database(gc_core::ports::StoreError::Unavailable("x".into()));
        assert_eq!(Counted::of(&crate::Error::from(database)), None);
    }
}
