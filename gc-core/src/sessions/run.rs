//! One run of the orphaned-session collector: scan, batched lookup, plan, fenced deletes, audit.
//!
//! Any doubt stops the run before the first delete: a list that fails (other than a kind whose
//! definition is not installed, which is reported and skipped), a database error, an id without
//! an answer, or the mass-deletion guard. Deletes carry uid and resourceVersion preconditions; a
//! dry run sends the same deletes in server-side dry run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use thiserror::Error;

use crate::ports::{
    ClusterError, Halt, ObjectCluster, Preconditions, SessionDirectory, StoreError,
};
use crate::sessions::{
    self, Judged, Kind, Resource, SessionConfig, SessionDecision, SessionPlan, SessionPlanError,
};

/// Ids per database round trip.
pub const LOOKUP_BATCH: usize = 500;
/// Objects per list page.
pub const PAGE_SIZE: u32 = 500;

/// Why a run deleted nothing.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SessionRunError {
    /// A list failed.
    #[error("listing {kind}: {error}")]
    List {
        /// The kind.
        kind: String,
        /// The error.
        error: ClusterError,
    },
    /// The database failed.
    #[error("session database: {0}")]
    Database(#[from] StoreError),
    /// The plan refused (no answer for an id, or the guard).
    #[error(transparent)]
    Plan(#[from] SessionPlanError),
}

/// An audit record: one per resource judged, one JSON line each.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// The cluster.
    pub cluster: String,
    /// The namespace.
    pub namespace: String,
    /// The resource and its decision.
    #[serde(flatten)]
    pub judged: Judged,
    /// For deletes, what the delete did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<DeleteResult>,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

/// What a fenced delete did. In audit lines it is the text [`std::fmt::Display`] gives:
/// `deleted`, `would delete`, `changed: skipped, re-checked next run`, `failed: ...`,
/// `not started: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteResult {
    /// The object was deleted.
    Deleted,
    /// Dry run: the server accepted the delete in dry-run mode.
    WouldDelete,
    /// A fence held (the object changed or is gone since it was listed): re-checked next run.
    Changed,
    /// The delete failed, or was not sent (lock lost, unknown kind): why.
    Failed(String),
    /// The delete was not sent because the caller asked the run to stop ([`Stop::stopping`]):
    /// why. Not a failure: the next run judges the object again.
    NotStarted(String),
}

impl DeleteResult {
    /// Whether the run counts this as a failure.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed(_))
    }
}

impl std::fmt::Display for DeleteResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Deleted => f.write_str("deleted"),
            Self::WouldDelete => f.write_str("would delete"),
            Self::Changed => f.write_str("changed: skipped, re-checked next run"),
            Self::Failed(why) => write!(f, "failed: {why}"),
            Self::NotStarted(why) => write!(f, "not started: {why}"),
        }
    }
}

/// When a run sends no more deletes, as its caller learns it: each flag may be set at any time,
/// and is read before each delete.
#[derive(Clone, Copy)]
pub struct Stop<'a> {
    /// The run lock was lost: another run may be working, so each remaining delete is
    /// [`DeleteResult::Failed`]. Checked first.
    pub lock_lost: &'a dyn Halt,
    /// The caller asked the run to stop (the process is shutting down): each remaining delete is
    /// [`DeleteResult::NotStarted`], which is no failure.
    pub stopping: &'a AtomicBool,
}

impl Stop<'_> {
    /// The result of a delete not sent because of these flags, if one is set.
    fn result(&self) -> Option<DeleteResult> {
        if self.lock_lost.halted() {
            return Some(DeleteResult::Failed(
                "not deleted: the run lock was lost".into(),
            ));
        }
        self.stopping.load(Ordering::SeqCst).then(|| {
            DeleteResult::NotStarted("the process is stopping; the next run judges it again".into())
        })
    }
}

impl Serialize for DeleteResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionReport {
    /// Every resource, judged, with the result of its delete.
    pub records: Vec<AuditRecord>,
    /// Kinds that could not be scanned because their definition is not installed.
    pub missing_kinds: Vec<String>,
    /// Database round trips made.
    pub lookups: usize,
    /// Deletes that failed (not counting fences that held).
    pub failures: usize,
}

/// Scans `kind`, page by page.
async fn scan<C: ObjectCluster>(
    cluster: &C,
    kind: &Kind,
    cfg: &SessionConfig,
) -> Result<Vec<(Resource, crate::selector::Labels)>, ClusterError> {
    crate::pages::collect(
        |token: Option<String>| async move {
            cluster
                .list_metadata(
                    kind,
                    &cfg.namespace,
                    &cfg.selector,
                    PAGE_SIZE,
                    token.as_deref(),
                )
                .await
        },
        |item| {
            let m = &item["metadata"];
            let text = |k: &str| m[k].as_str().map(str::to_owned);
            let (Some(name), Some(uid), Some(resource_version)) =
                (text("name"), text("uid"), text("resourceVersion"))
            else {
                return Err(ClusterError::Other(format!(
                    "a {} without name, uid or resourceVersion",
                    kind.kind
                )));
            };
            let resource = Resource {
                kind: kind.kind.clone(),
                name,
                uid,
                resource_version,
                session: m["labels"][cfg.id_label.as_str()]
                    .as_str()
                    .map(str::to_owned),
                created: text("creationTimestamp"),
                deleting: !m["deletionTimestamp"].is_null(),
            };
            Ok(Some((resource, sessions::labels_of(m))))
        },
    )
    .await
}

/// A plan made from the cluster and the database: what [`run`] would delete, before any delete.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Planned {
    /// Every resource scanned, judged.
    #[serde(flatten)]
    pub plan: SessionPlan,
    /// Kinds that could not be scanned because their definition is not installed.
    pub missing_kinds: Vec<String>,
    /// Database round trips made.
    pub lookups: usize,
}

/// The first half of [`run`]: scan every kind, look the ids up in batches, plan. Writes nothing.
///
/// # Errors
/// As [`run`].
pub async fn plan<C: ObjectCluster, D: SessionDirectory>(
    cluster: &C,
    directory: &D,
    cfg: &SessionConfig,
    now: f64,
) -> Result<Planned, SessionRunError> {
    let (mut resources, mut labels) = (Vec::new(), Vec::new());
    let mut missing_kinds = Vec::new();
    for kind in &cfg.kinds {
        match scan(cluster, kind, cfg).await {
            Ok(found) => found.into_iter().for_each(|(r, l)| {
                resources.push(r);
                labels.push(l);
            }),
            Err(ClusterError::NotFound(_)) => {
                missing_kinds.push(format!("{}/{} {}", kind.group, kind.version, kind.kind))
            }
            Err(error) => {
                return Err(SessionRunError::List {
                    kind: kind.kind.clone(),
                    error,
                });
            }
        }
    }
    let ids = sessions::session_ids(&resources);
    let mut rows = HashMap::with_capacity(ids.len());
    let mut lookups = 0;
    for batch in ids.chunks(LOOKUP_BATCH) {
        rows.extend(directory.lookup(batch).await?);
        lookups += 1;
    }
    let plan = sessions::plan_labelled(&resources, &labels, &rows, cfg, now)?;
    Ok(Planned {
        plan,
        missing_kinds,
        lookups,
    })
}

/// One run: scan every kind, look the ids up in batches, plan, delete (or dry-run), audit.
/// Once a flag of `stop` is set, nothing more is deleted: each remaining delete is a failure when
/// the lock was lost, not started when the run was asked to stop.
///
/// # Errors
/// [`SessionRunError`] before any delete: a failed list, a database error, a plan refusal.
pub async fn run<C: ObjectCluster, D: SessionDirectory>(
    cluster: &C,
    directory: &D,
    cfg: &SessionConfig,
    now: f64,
    dry_run: bool,
    stop: Stop<'_>,
) -> Result<SessionReport, SessionRunError> {
    let Planned {
        plan,
        missing_kinds,
        lookups,
    } = plan(cluster, directory, cfg, now).await?;
    let mut records = Vec::with_capacity(plan.judged.len());
    let mut failures = 0;
    for judged in plan.judged {
        let result = match judged.decision {
            SessionDecision::Delete { .. } => {
                Some(delete(cluster, cfg, &judged.resource, dry_run, stop).await)
            }
            _ => None,
        };
        failures += usize::from(result.as_ref().is_some_and(DeleteResult::is_failure));
        records.push(AuditRecord {
            cluster: cfg.cluster_id.clone(),
            namespace: cfg.namespace.clone(),
            judged,
            result,
            dry_run,
        });
    }
    Ok(SessionReport {
        records,
        missing_kinds,
        lookups,
        failures,
    })
}

/// Deletes one orphan with uid and resourceVersion preconditions. Once a flag of `stop` is set
/// nothing is sent.
async fn delete<C: ObjectCluster>(
    cluster: &C,
    cfg: &SessionConfig,
    r: &crate::sessions::Resource,
    dry_run: bool,
    stop: Stop<'_>,
) -> DeleteResult {
    // Resources come from scanning these kinds, so the kind is always found; if it were not,
    // nothing is deleted rather than guessing.
    let Some(kind) = cfg.kinds.iter().find(|k| k.kind == r.kind) else {
        return DeleteResult::Failed(format!("unknown kind {}", r.kind));
    };
    if let Some(unsent) = stop.result() {
        return unsent;
    }
    let pre = Preconditions {
        uid: r.uid.clone(),
        resource_version: r.resource_version.clone(),
    };
    match cluster
        .delete_object(kind, &cfg.namespace, &r.name, &pre, dry_run)
        .await
    {
        Ok(()) if dry_run => DeleteResult::WouldDelete,
        Ok(()) => DeleteResult::Deleted,
        Err(ClusterError::Changed { .. } | ClusterError::NotFound(_)) => DeleteResult::Changed,
        Err(e) => DeleteResult::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::Page;
    use crate::sessions::Row;
    use crate::testing::{block_on, session_config as cfg};
    use async_trait::async_trait;
    use serde_json::{Value, json};
    use std::sync::{Arc, Mutex};

    struct Fake {
        objects: Mutex<Vec<(String, Value)>>,
        deleted: Mutex<Vec<(String, bool)>>,
        crd_missing: bool,
        /// Set after each delete: a flag of [`Stop`] raised while the run deletes.
        raise: Option<Arc<AtomicBool>>,
    }

    #[async_trait]
    impl ObjectCluster for Fake {
        async fn list_metadata(
            &self,
            kind: &Kind,
            _: &str,
            _: &str,
            _: u32,
            _: Option<&str>,
        ) -> Result<Page, ClusterError> {
            if self.crd_missing && kind.kind == "Session" {
                return Err(ClusterError::NotFound("sessions".into()));
            }
            let items: Vec<Value> = self
                .objects
                .lock()
                .unwrap()
                .iter()
                .filter(|(k, _)| *k == kind.kind)
                .map(|(_, v)| v.clone())
                .collect();
            Ok(Page {
                text: json!({"items": items}).to_string().into_bytes(),
                continue_token: None,
            })
        }
        async fn delete_object(
            &self,
            _: &Kind,
            _: &str,
            name: &str,
            _: &Preconditions,
            dry_run: bool,
        ) -> Result<(), ClusterError> {
            self.deleted.lock().unwrap().push((name.into(), dry_run));
            if let Some(flag) = &self.raise {
                flag.store(true, Ordering::SeqCst);
            }
            Ok(())
        }
    }

    struct Db(Result<Vec<&'static str>, StoreError>, Mutex<usize>);

    #[async_trait]
    impl SessionDirectory for Db {
        async fn lookup(&self, ids: &[String]) -> Result<HashMap<String, Row>, StoreError> {
            *self.1.lock().unwrap() += 1;
            let live = self.0.clone()?;
            Ok(ids
                .iter()
                .map(|id| {
                    let row = if live.contains(&id.as_str()) {
                        Row::Present {
                            state: Some("running".into()),
                        }
                    } else {
                        Row::Missing
                    };
                    (id.clone(), row)
                })
                .collect())
        }
    }

    fn object(kind: &str, session: &str) -> (String, Value) {
        let meta = json!({"name": format!("{session}-{kind}"), "uid": format!("u-{session}-{kind}"), "resourceVersion": "7",
                          "creationTimestamp": "2026-11-20T00:00:00Z", "labels": {"app": "streamspace-session", "session": session}});
        (kind.to_owned(), json!({"metadata": meta}))
    }

    fn fake(crd_missing: bool) -> Fake {
        let mut objects = Vec::new();
        for s in ["a", "b", "c", "d", "e"] {
            objects.push(object("Deployment", s));
            objects.push(object("Session", s));
        }
        Fake {
            objects: Mutex::new(objects),
            deleted: Mutex::new(vec![]),
            crd_missing,
            raise: None,
        }
    }

    /// The deletes of session e's Deployment and `Session`, with `dry_run`.
    fn session_e(dry_run: bool) -> [(String, bool); 2] {
        [
            ("e-Deployment".to_owned(), dry_run),
            ("e-Session".to_owned(), dry_run),
        ]
    }

    /// No flag of [`Stop`] set.
    fn go_on<'a>(flags: &'a [AtomicBool; 2]) -> Stop<'a> {
        Stop {
            lock_lost: &flags[0],
            stopping: &flags[1],
        }
    }

    /// One run over `f` with a table holding sessions a to d, the flags of [`Stop`] as given.
    fn run_over(f: &Fake, dry_run: bool, lock_lost: bool, stopping: bool) -> SessionReport {
        let db = Db(Ok(vec!["a", "b", "c", "d"]), Mutex::new(0));
        let flags = [AtomicBool::new(lock_lost), AtomicBool::new(stopping)];
        block_on(run(f, &db, &cfg(), 1_795_953_600.0, dry_run, go_on(&flags))).unwrap()
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
        let line =
            serde_json::to_string(&report.records.iter().find(|r| r.result.is_some()).unwrap())
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
        let stop = Stop {
            lock_lost: &lost,
            stopping: &stopping,
        };
        let report = block_on(run(&f, &db, &cfg(), 1_795_953_600.0, false, stop)).unwrap();
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
        assert!(matches!(
            block_on(run(
                &f,
                &down,
                &cfg(),
                1_795_953_600.0,
                false,
                go_on(&flags)
            )),
            Err(SessionRunError::Database(_))
        ));
        let empty = Db(Ok(vec![]), Mutex::new(0));
        let err = block_on(run(
            &f,
            &empty,
            &cfg(),
            1_795_953_600.0,
            false,
            go_on(&flags),
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
}
