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
    /// For deletes, what the delete did; `null` for every other decision.
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
                api_version: kind.api_version(),
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
                    kind: format!("{} {}", kind.api_version(), kind.kind),
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
    let Some(kind) = cfg.kind_of(r) else {
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
mod tests;
