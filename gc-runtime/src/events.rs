//! Kubernetes Events for what a live run did: a Normal Event on each Pod collected and one on each
//! session collected (`SessionCollected`, naming every object of it the run deleted; with
//! `event_per_object`, one `Deleted` on each object instead), a Warning on each object refused
//! (its fence lost, its archive too large) or failed, and a Warning on the
//! Namespace when the run as a whole was refused (the mass-deletion guard, a failing plan) or
//! failed (the database, the store, the lock, ...), in the words of the run's report or audit
//! line.
//!
//! What no Event is for: objects kept, held, deferred, skipped, protected or excluded (decisions,
//! not actions: the plan and the audit log say why), and dry runs, which change nothing and whose
//! output is the report. Posting never fails a run: the first error is logged once per run, with
//! how many Events were not posted; a 403 or an unreachable API server stops the posting for the
//! rest of the run.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use futures_util::StreamExt as _;
use gc_core::events::{EventRecord, EventType, Regarding, Reporter};
use gc_core::pods::apply::{TargetOutcome, TargetResult};
use gc_core::ports::{ClusterError, EventSink};
use gc_core::sessions::run::{AuditRecord, DeleteResult, SessionReport, SessionRunError};
use gc_core::sessions::{SessionDecision, SessionPlanError};

/// The `reportingController` of every Event.
pub const CONTROLLER: &str = "gc.example.com/gc-cli";

/// The Events of one run (of every namespace it covers): posted as the run goes, counted, and
/// the first failure logged once when the run ends (on drop).
pub struct Events {
    /// `None` when off: a dry run, or Events turned off.
    reporter: Option<Reporter>,
    posted: AtomicUsize,
    unposted: AtomicUsize,
    /// The first failure, and whether posting stopped because of it.
    first_error: Mutex<Option<ClusterError>>,
    stopped: AtomicBool,
    /// Events posted at once: a run's objects each have one, so their order per object holds.
    in_flight: usize,
    /// One Event per object deleted rather than one per session.
    per_object: bool,
}

impl Events {
    /// The Events of a run when `on` (none for a dry run, which changes nothing), up to
    /// `in_flight` posted at once.
    #[must_use]
    pub fn new(on: bool, in_flight: usize) -> Self {
        Self {
            in_flight,
            reporter: on.then(|| Reporter::new(CONTROLLER, &instance())),
            posted: AtomicUsize::new(0),
            unposted: AtomicUsize::new(0),
            first_error: Mutex::new(None),
            stopped: AtomicBool::new(false),
            per_object: false,
        }
    }

    /// These Events, with one on each session object deleted (`per_object`) rather than one on
    /// each session.
    #[must_use]
    pub fn per_object(mut self, per_object: bool) -> Self {
        self.per_object = per_object;
        self
    }

    /// An Event on each Pod collected, refused or failed in `namespace`.
    pub async fn pods(
        &self,
        cluster: &(impl EventSink + ?Sized),
        namespace: &str,
        results: &[&TargetResult],
    ) {
        // Made before they are posted, as for sessions: `Send` for every lifetime.
        let records: Vec<EventRecord> = results
            .iter()
            .filter_map(|r| pod_event(namespace, r))
            .collect();
        self.post_all(cluster, records.into_iter()).await;
    }

    /// An Event on each session resource deleted, refused or failed, but those of `posted`
    /// (their Events were [`Events::stream`]ed).
    pub async fn sessions(
        &self,
        cluster: &(impl EventSink + ?Sized),
        report: &SessionReport,
        posted: &HashSet<String>,
    ) {
        // Made before they are posted: a future over a borrowing iterator is not `Send` for
        // every lifetime, and an embedder spawns runs.
        let (deleted, others): (Vec<&AuditRecord>, Vec<&AuditRecord>) = (report.records.iter())
            .filter(|r| !posted.contains(&r.judged.resource.uid))
            .partition(|r| self.grouped(r));
        let mut records: Vec<EventRecord> = others.into_iter().filter_map(session_event).collect();
        records.extend(sessions_collected(deleted));
        self.post_all(cluster, records.into_iter()).await;
    }

    /// Whether `record`'s Event is its session's, posted once for all its objects deleted.
    fn grouped(&self, record: &AuditRecord) -> bool {
        !self.per_object && record.result == Some(DeleteResult::Deleted)
    }

    /// Posts `records`, up to `in_flight` at once: the run's end waits for one round trip per
    /// `in_flight` Events rather than one per Event.
    async fn post_all(
        &self,
        cluster: &(impl EventSink + ?Sized),
        records: std::vec::IntoIter<EventRecord>,
    ) {
        gc_core::pipeline::in_order(records, self.in_flight, |record| async move {
            self.post(cluster, &record).await;
        })
        .await;
    }

    /// Posts the Event of each delete record `records` brings as it comes, up to `in_flight`
    /// at once, until its senders are gone (the run ended, or stopped: what came is flushed),
    /// and none once `held` is lost (an Event is a write). Answers the uids whose records came,
    /// so that the run's end does not post them again.
    pub async fn stream(
        &self,
        cluster: &(impl EventSink + ?Sized),
        mut records: tokio::sync::mpsc::UnboundedReceiver<AuditRecord>,
        held: gc_core::lease::Held<'_>,
    ) -> HashSet<String> {
        let came = Mutex::new(HashSet::new());
        // The deletes whose Event is their session's, posted once the run's deletes ended.
        let grouped = Mutex::new(Vec::new());
        let records = futures_util::stream::poll_fn(|cx| records.poll_recv(cx));
        let (came_ref, grouped_ref) = (&came, &grouped);
        records
            .for_each_concurrent(self.in_flight.max(1), |record| async move {
                let uid = record.judged.resource.uid.clone();
                came_ref
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(uid);
                if held.lost() {
                    return;
                }
                if self.grouped(&record) {
                    let mut grouped = grouped_ref.lock().unwrap_or_else(PoisonError::into_inner);
                    grouped.push(record);
                } else if let Some(event) = session_event(&record) {
                    self.post(cluster, &event).await;
                }
            })
            .await;
        let grouped = grouped.into_inner().unwrap_or_else(PoisonError::into_inner);
        if !held.lost() {
            let records = sessions_collected(grouped.iter()).collect::<Vec<_>>();
            self.post_all(cluster, records.into_iter()).await;
        }
        came.into_inner().unwrap_or_else(PoisonError::into_inner)
    }

    /// A Warning on the Namespace: the run in it was refused or failed with `error`.
    pub async fn run_failed(
        &self,
        cluster: &(impl EventSink + ?Sized),
        namespace: &str,
        error: &crate::Error,
    ) {
        self.post(cluster, &namespace_event(namespace, error)).await;
    }

    /// Posts `record` (an Event of the embedder's, or of `restore`).
    pub(crate) async fn post_record(
        &self,
        cluster: &(impl EventSink + ?Sized),
        record: &EventRecord,
    ) {
        self.post(cluster, record).await;
    }

    async fn post(&self, cluster: &(impl EventSink + ?Sized), record: &EventRecord) {
        let Some(reporter) = &self.reporter else {
            return;
        };
        if self.stopped.load(Ordering::SeqCst) {
            self.unposted.fetch_add(1, Ordering::SeqCst);
            return;
        }
        match cluster.post_event(record, reporter).await {
            Ok(()) => {
                self.posted.fetch_add(1, Ordering::SeqCst);
            }
            Err(error) => {
                self.unposted.fetch_add(1, Ordering::SeqCst);
                // Each further POST would meet the same 403 or the same timeouts.
                let hopeless = matches!(
                    error,
                    ClusterError::Forbidden { .. } | ClusterError::Unavailable(_)
                );
                self.stopped.store(hopeless, Ordering::SeqCst);
                self.first_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(error);
            }
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let (posted, unposted) = (*self.posted.get_mut(), *self.unposted.get_mut());
        if posted > 0 {
            tracing::debug!(posted, "posted {posted} Kubernetes Event(s)");
        }
        let first = self
            .first_error
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(error) = first.take() {
            let hint = if matches!(error, ClusterError::Forbidden { .. }) {
                " (grant create on events.k8s.io events, or set `events: false`)"
            } else {
                ""
            };
            tracing::warn!(
                posted,
                unposted,
                "cannot post Kubernetes Events: {unposted} of {} not posted; first error: \
                 {error}{hint}",
                posted + unposted
            );
        }
    }
}

/// `reportingInstance`: the Pod's name in a cluster (`$HOSTNAME`), else the host's name.
fn instance() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map_or_else(|| "gc-cli".to_owned(), |h| h.trim().to_owned())
}

/// The Event of one Pod's result, in the words of the run's report: none for a dry run's
/// `wouldCollect`, a Pod skipped (no longer a target, protected or excluded since the plan) or a
/// pin released by recovery.
fn pod_event(namespace: &str, result: &TargetResult) -> Option<EventRecord> {
    use EventType::{Normal, Warning};
    let (type_, reason, note) = match &result.outcome {
        TargetOutcome::Collected { uri, sha256, bytes } => (
            Normal,
            "Collected",
            format!("collected: archive {uri} sha256 {sha256} ({bytes} bytes); the Pod is deleted"),
        ),
        TargetOutcome::Changed { step, message } => (
            Warning,
            "FenceLost",
            format!("changed at {step:?} (fence held): {message}"),
        ),
        TargetOutcome::TooLarge { bytes, max } => (
            Warning,
            "TooLarge",
            format!(
                "too large: archive of {bytes} bytes over max_archive_bytes {max}; pin released"
            ),
        ),
        TargetOutcome::Failed { step, error } => (
            Warning,
            "CollectFailed",
            format!("failed at {step:?}: {error}"),
        ),
        TargetOutcome::WouldCollect { .. }
        | TargetOutcome::Skipped { .. }
        | TargetOutcome::Released { .. }
        | TargetOutcome::NotStarted { .. } => return None,
    };
    let regarding = Regarding {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: result.name.clone(),
        namespace: namespace.into(),
        uid: Some(result.uid.clone()),
    };
    Some(EventRecord {
        regarding,
        type_,
        reason,
        action: "Collect",
        note,
    })
}

/// The Event of one audit record, in its words: none without a delete, or for a dry run's.
fn session_event(record: &AuditRecord) -> Option<EventRecord> {
    let result = record.result.as_ref()?;
    let (type_, reason) = match result {
        DeleteResult::Deleted => (EventType::Normal, "Deleted"),
        DeleteResult::Changed => (EventType::Warning, "FenceLost"),
        DeleteResult::Failed(_) => (EventType::Warning, "DeleteFailed"),
        // A dry run's delete, and one never sent: no Event.
        DeleteResult::WouldDelete | DeleteResult::NotStarted(_) => return None,
    };
    let r = &record.judged.resource;
    let note = match &record.judged.decision {
        SessionDecision::Delete { reason } => format!("{result} ({reason})"),
        _ => result.to_string(),
    };
    let regarding = Regarding {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: record.namespace.clone(),
        uid: Some(r.uid.clone()),
    };
    Some(EventRecord {
        regarding,
        type_,
        reason,
        action: "Delete",
        note,
    })
}

/// One Normal Event per session among `deleted` (objects deleted, each with its session label),
/// in the order the sessions' first objects come: on the session's `Session` object when the run
/// deleted it (what `kubectl describe session` and `kubectl get events` name), else on its first
/// object, naming every object of the session deleted ([`named`]), sorted. An object without a
/// session (none is deleted by a collection) has an Event of its own.
fn sessions_collected<'a>(
    deleted: impl IntoIterator<Item = &'a AuditRecord>,
) -> impl Iterator<Item = EventRecord> {
    let mut sessions: Vec<(Option<&str>, Vec<&AuditRecord>)> = Vec::new();
    for record in deleted {
        let session = record.judged.resource.session.as_deref();
        match sessions
            .iter_mut()
            .find(|(s, _)| session.is_some() && *s == session)
        {
            Some((_, records)) => records.push(record),
            None => sessions.push((session, vec![record])),
        }
    }
    sessions.into_iter().filter_map(|(session, records)| {
        let Some(id) = session else {
            return session_event(records.first()?);
        };
        let on = (records.iter().find(|r| r.judged.resource.kind == "Session"))
            .or_else(|| records.first())?;
        let mut objects: Vec<String> = records.iter().map(|r| named(&r.judged.resource)).collect();
        // In a fixed order, whatever order the deletes ended in.
        objects.sort();
        let why = match &on.judged.decision {
            SessionDecision::Delete { reason } => format!(" ({reason})"),
            _ => String::new(),
        };
        let r = &on.judged.resource;
        Some(EventRecord {
            regarding: Regarding {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
                namespace: on.namespace.clone(),
                uid: Some(r.uid.clone()),
            },
            type_: EventType::Normal,
            reason: "SessionCollected",
            action: "Collect",
            note: format!("session {id}: deleted {}{why}", objects.join(", ")),
        })
    })
}

/// `Kind/name`, or `Kind.group/name` (as kubectl names a kind of another group) for a kind
/// outside the core and `apps` groups: StreamSpace's `Session` is installed under two groups,
/// and a session may have one of each.
fn named(r: &gc_core::sessions::Resource) -> String {
    match r.api_version.split_once('/') {
        Some((group, _)) if group != "apps" => format!("{}.{group}/{}", r.kind, r.name),
        _ => format!("{}/{}", r.kind, r.name),
    }
}

/// The Warning on the Namespace for a run refused or failed as a whole, its reason from the
/// error's type: `GuardRefused` (the mass-deletion guard, no row for any id), `PlanRefused` (a
/// plan that failed closed on its data), `DatabaseFailed` (the session database), else
/// `RunFailed`.
fn namespace_event(namespace: &str, error: &crate::Error) -> EventRecord {
    EventRecord {
        regarding: Regarding::namespace(namespace),
        type_: EventType::Warning,
        reason: reason(error),
        action: "Run",
        note: format!("{error:#}"),
    }
}

/// The reason `error` gives: its root cause's type, or for an error of a type the library does
/// not name, the first in its chain that gives one.
fn reason(error: &crate::Error) -> &'static str {
    let reason = match error.root() {
        crate::Error::SessionRun(e) => reason_of(e),
        crate::Error::SessionPlan(e) => reason_of(e),
        crate::Error::Plan(e) => reason_of(e),
        crate::Error::Inventory(e) => reason_of(e),
        crate::Error::Ledger(e) => reason_of(e),
        crate::Error::Other(e) => {
            let e: &(dyn std::error::Error + 'static) = &**e;
            std::iter::successors(Some(e), |&e| e.source()).find_map(reason_of)
        }
        _ => None,
    };
    reason.unwrap_or("RunFailed")
}

/// The reason one error in a chain gives, when its type gives one.
fn reason_of(error: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let guard = |e: &SessionPlanError| match e {
        SessionPlanError::MassDeletion { .. } | SessionPlanError::NoRowFound { .. } => {
            "GuardRefused"
        }
        SessionPlanError::NoAnswer(_) => "PlanRefused",
    };
    if let Some(run) = error.downcast_ref::<SessionRunError>() {
        return match run {
            SessionRunError::Plan(e) => Some(guard(e)),
            SessionRunError::Database(_) => Some("DatabaseFailed"),
            SessionRunError::List { .. } => None,
        };
    }
    if let Some(plan) = error.downcast_ref::<SessionPlanError>() {
        return Some(guard(plan));
    }
    let refused = error.is::<gc_core::pods::plan::PlanError>()
        || error.is::<gc_core::pods::inventory::InventoryError>()
        || error.is::<gc_core::pods::ledger::LedgerError>();
    refused.then_some("PlanRefused")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gc_core::pods::apply::Step;
    use gc_core::sessions::{Judged, Resource};

    fn pod(outcome: TargetOutcome) -> TargetResult {
        TargetResult {
            name: "web-1".into(),
            uid: "u-1".into(),
            outcome,
        }
    }

    /// `(type, reason, note)` of the Event of `result`, when there is one.
    fn check(event: Option<EventRecord>, expected: Option<(EventType, &str, &str)>) {
        let got = event.as_ref().map(|e| (e.type_, e.reason, e.note.as_str()));
        assert_eq!(got, expected);
    }

    #[test]
    fn pods_deleted_refused_and_failed_have_events_and_nothing_else() {
        use EventType::{Normal, Warning};
        let step = Step::Fence;
        let cases = [
            (
                TargetOutcome::Collected {
                    uri: "file:///a/p.json".into(),
                    sha256: "ab".into(),
                    bytes: 9,
                },
                Some((
                    Normal,
                    "Collected",
                    "collected: archive file:///a/p.json sha256 ab (9 bytes); the Pod is deleted",
                )),
            ),
            (
                TargetOutcome::Changed {
                    step,
                    message: "resourceVersion 7 != 8".into(),
                },
                Some((
                    Warning,
                    "FenceLost",
                    "changed at Fence (fence held): resourceVersion 7 != 8",
                )),
            ),
            (
                TargetOutcome::TooLarge {
                    bytes: 2000,
                    max: 1024,
                },
                Some((
                    Warning,
                    "TooLarge",
                    "too large: archive of 2000 bytes over max_archive_bytes 1024; pin released",
                )),
            ),
            (
                TargetOutcome::Failed {
                    step: Step::Archive,
                    error: "disk full".into(),
                },
                Some((Warning, "CollectFailed", "failed at Archive: disk full")),
            ),
            (
                TargetOutcome::WouldCollect {
                    sha256: "ab".into(),
                    bytes: 9,
                },
                None,
            ),
            (
                TargetOutcome::Skipped {
                    step: Step::Reread,
                    reason: "protected since the plan".into(),
                },
                None,
            ),
            (
                TargetOutcome::Released {
                    reason: "not being deleted".into(),
                },
                None,
            ),
        ];
        for (outcome, expected) in cases {
            check(pod_event("team-a", &pod(outcome)), expected);
        }
        let event =
            pod_event("team-a", &pod(TargetOutcome::TooLarge { bytes: 2, max: 1 })).unwrap();
        let r = event.regarding;
        assert_eq!(
            (
                r.api_version.as_str(),
                r.kind.as_str(),
                r.name.as_str(),
                r.namespace.as_str()
            ),
            ("v1", "Pod", "web-1", "team-a")
        );
        assert_eq!(r.uid.as_deref(), Some("u-1"));
        assert_eq!(event.action, "Collect");
    }

    fn record(kind: &str, decision: SessionDecision, result: Option<DeleteResult>) -> AuditRecord {
        let api_version = gc_core::sessions::Kind::streamspace()
            .into_iter()
            .find(|k| k.kind == kind)
            .map_or_else(|| "v1".into(), |k| k.api_version());
        AuditRecord {
            cluster: "primary".into(),
            namespace: "streamspace".into(),
            judged: Judged {
                resource: Resource {
                    api_version,
                    kind: kind.into(),
                    name: "s-1".into(),
                    uid: "u-9".into(),
                    resource_version: "7".into(),
                    session: Some("s-1".into()),
                    created: None,
                    deleting: false,
                },
                decision,
            },
            result,
            archive: None,
            dry_run: false,
        }
    }

    #[test]
    fn session_deletes_fences_and_failures_have_events_and_nothing_else() {
        use EventType::{Normal, Warning};
        let delete = || SessionDecision::Delete {
            reason: "no session s-1 in the database".into(),
        };
        let cases = [
            (
                Some(DeleteResult::Deleted),
                Some((
                    Normal,
                    "Deleted",
                    "deleted (no session s-1 in the database)",
                )),
            ),
            (
                Some(DeleteResult::Changed),
                Some((
                    Warning,
                    "FenceLost",
                    "changed: skipped, re-checked next run (no session s-1 in the database)",
                )),
            ),
            (
                Some(DeleteResult::Failed("503".into())),
                Some((
                    Warning,
                    "DeleteFailed",
                    "failed: 503 (no session s-1 in the database)",
                )),
            ),
            (Some(DeleteResult::WouldDelete), None),
            (Some(DeleteResult::NotStarted("stopping".into())), None),
            (None, None),
        ];
        for (result, expected) in cases {
            check(
                session_event(&record("Deployment", delete(), result)),
                expected,
            );
        }
        let held = SessionDecision::Held {
            reason: "young".into(),
            until: 0.0,
        };
        check(session_event(&record("Service", held, None)), None);
        for (kind, api_version) in [
            ("Deployment", "apps/v1"),
            ("Service", "v1"),
            ("PersistentVolumeClaim", "v1"),
            ("Session", "stream.space/v1alpha1"),
        ] {
            let deleted = record(kind, delete(), Some(DeleteResult::Deleted));
            let r = session_event(&deleted).unwrap().regarding;
            assert_eq!(
                (r.api_version.as_str(), r.kind.as_str(), r.uid.as_deref()),
                (api_version, kind, Some("u-9"))
            );
            assert_eq!(r.namespace, "streamspace");
        }
        // A Session of the other group StreamSpace installs is regarded under its own group.
        let mut other = record("Session", delete(), Some(DeleteResult::Deleted));
        other.judged.resource.api_version = "stream.streamspace.io/v1alpha1".into();
        let r = session_event(&other).unwrap().regarding;
        assert_eq!(r.api_version, "stream.streamspace.io/v1alpha1");
    }

    #[test]
    fn a_refused_or_failed_run_is_a_warning_on_its_namespace() {
        let guard = SessionPlanError::MassDeletion {
            orphaned: 12,
            judged: 12,
            orphans: 48,
            ratio: 0.5,
            floor: 10,
        };
        let cases: Vec<(crate::Error, &str)> = vec![
            (
                crate::Error::from(SessionRunError::Plan(guard.clone()))
                    .context("namespace x of cluster primary: nothing deleted"),
                "GuardRefused",
            ),
            (
                SessionRunError::Plan(SessionPlanError::NoRowFound { ids: 3, orphans: 3 }).into(),
                "GuardRefused",
            ),
            (
                SessionRunError::Plan(SessionPlanError::NoAnswer("s".into())).into(),
                "PlanRefused",
            ),
            (
                SessionRunError::Database(gc_core::ports::StoreError::Unavailable("down".into()))
                    .into(),
                "DatabaseFailed",
            ),
            (
                crate::Error::from(gc_core::pods::plan::PlanError::InventoryCeiling {
                    count: 2,
                    max: 1,
                })
                .context("plan"),
                "PlanRefused",
            ),
            (
                crate::Error::msg("another run holds lease gc-pods in namespace x"),
                "RunFailed",
            ),
        ];
        for (error, reason) in cases {
            let event = namespace_event("x", &error);
            assert_eq!(event.reason, reason, "{error:#}");
            assert_eq!(event.type_, EventType::Warning);
            assert_eq!(event.note, format!("{error:#}"));
            assert_eq!(event.regarding, Regarding::namespace("x"));
        }
    }

    #[test]
    fn dry_runs_and_no_events_post_nothing() {
        assert!(Events::new(true, 1).reporter.is_some());
        assert!(Events::new(false, 1).reporter.is_none());
    }
}
