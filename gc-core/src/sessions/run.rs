//! One run of the orphaned-session collector: scan, batched lookup, plan, fenced deletes, audit.
//!
//! Any doubt stops the run before the first delete: a list that fails (other than a kind whose
//! definition is not installed, which is reported and skipped), a database error, an id without
//! an answer, or the mass-deletion guard. Before each delete the object is read whole and its
//! manifest archived ([`crate::sessions::manifest`]), read back, verified and receipted: no
//! receipt, no delete. Deletes carry the uid and resourceVersion preconditions of the version
//! archived; a dry run reads and builds the same manifests, writes none, and sends the same
//! deletes in server-side dry run.

use std::collections::HashMap;

use serde::Serialize;
use thiserror::Error;

use crate::lease::Held;
use crate::ports::{
    ArchiveKey, ArchiveSink, ClusterError, ObjectCluster, Preconditions, Receipt, SessionDirectory,
    SessionObject, Store, StoreError, Volumes,
};
pub use crate::sessions::deletes::DeleteResult;
use crate::sessions::deletes::unsent;
use crate::sessions::{
    self, Judged, Kind, Resource, SessionConfig, SessionDecision, SessionPlan, SessionPlanError,
    manifest, volumes,
};

/// Ids per database round trip.
pub const LOOKUP_BATCH: usize = 500;
pub use crate::pages::PAGE_SIZE;

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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// Where the object's manifest was archived before its delete (`null`: no delete was sent,
    /// or a dry run, which archives nothing).
    pub archive: Option<String>,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

/// Where a live run keeps what it deletes: each object's manifest in the archive sink, its
/// receipt in the store (no receipt, no delete), and a deleted claim's volume, retained
/// ([`crate::sessions::volumes`]) unless `retain_volume_days` is 0; and how many objects it
/// works on at once.
#[derive(Clone, Copy)]
pub struct Keep<'a> {
    /// The archive sink.
    pub sink: &'a dyn ArchiveSink,
    /// The store of receipts.
    pub store: &'a dyn Store,
    /// The cluster's PersistentVolumes.
    pub volumes: &'a dyn Volumes,
    /// Objects in flight at once ([`crate::pipeline`]; 1: one after another).
    pub concurrency: usize,
    /// Hears the record of each delete sent, or refused before it was sent, as soon as it is
    /// done (a live run posts its Event then, while the others go on).
    pub acted: Option<&'a (dyn Fn(&AuditRecord) + Sync)>,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionReport {
    /// Every resource, judged, with the result of its delete.
    pub records: Vec<AuditRecord>,
    /// Kinds that could not be scanned because their definition is not installed.
    pub missing_kinds: Vec<String>,
    /// Database round trips made.
    pub lookups: usize,
    /// Rows in a state neither live nor terminal, by state ([`SessionPlan::unknown_states`]).
    pub unknown_states: std::collections::BTreeMap<String, usize>,
    /// Deletes that failed (not counting fences that held), and volumes that could not be given
    /// back their policy.
    pub failures: usize,
    /// Why the volumes retained earlier could not be listed (none were given back), if so.
    pub volumes_unlisted: Option<String>,
    /// A warning on the volumes that does not fail the run: with retention 0, no access to
    /// volumes (nothing is kept now; whether anything was kept earlier cannot be known).
    pub volumes_note: Option<String>,
}

/// A scanned object: the resource, its labels, and the uids of its owners.
type Scanned = (Resource, crate::selector::Labels, Vec<String>);

/// Scans `kind`, page by page.
async fn scan<C: ObjectCluster>(
    cluster: &C,
    kind: &Kind,
    cfg: &SessionConfig,
) -> Result<Vec<Scanned>, ClusterError> {
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
            let owners = (m["ownerReferences"].as_array().into_iter().flatten())
                .filter_map(|o| o["uid"].as_str().map(str::to_owned))
                .collect();
            Ok(Some((resource, sessions::labels_of(m), owners)))
        },
    )
    .await
}

/// A plan made from the cluster and the database: what [`run`] would delete, before any delete.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// The uids of the scanned objects that other scanned objects name as their owner: deleted
    /// leaving what they own in place ([`ObjectCluster::delete_owner`]).
    #[serde(skip)]
    pub owners: std::collections::HashSet<String>,
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
    let (mut missing_kinds, mut owners) = (Vec::new(), std::collections::HashSet::new());
    for kind in &cfg.kinds {
        match scan(cluster, kind, cfg).await {
            Ok(found) => found.into_iter().for_each(|(r, l, o)| {
                resources.push(r);
                labels.push(l);
                owners.extend(o);
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
        owners,
    })
}

/// One run: scan every kind, look the ids up in batches, plan, archive and delete (or dry-run),
/// audit.
/// Every write goes through `held`: a dry run's sends each delete in server-side dry run and
/// writes no archive; once its Lease is lost or the run is asked to stop, nothing more is
/// deleted: each remaining delete is a failure when the lock was lost, not started when the run
/// was asked to stop.
///
/// # Errors
/// [`SessionRunError`] before any delete: a failed list, a database error, a plan refusal.
pub async fn run<C: ObjectCluster, D: SessionDirectory>(
    cluster: &C,
    directory: &D,
    keep: Keep<'_>,
    cfg: &SessionConfig,
    now: f64,
    held: Held<'_>,
) -> Result<SessionReport, SessionRunError> {
    let (dry_run, stop) = (held.is_dry_run(), held);
    let Planned {
        plan,
        missing_kinds,
        lookups,
        owners,
    } = plan(cluster, directory, cfg, now).await?;
    // The store or the sink found unavailable once (refused, or silent past its timeout) is not
    // asked again by this run, and no other object is started: the run fails closed at once
    // rather than waiting out the timeout once per object.
    let (store, sink) = (&Latched::new(keep.store), &Latched::new(keep.sink));
    let keep = Keep {
        store,
        sink,
        ..keep
    };
    let owners = &owners;
    let unknown_states = plan.unknown_states;
    let mut records = Vec::with_capacity(plan.judged.len());
    // Claims first, all of them before any other object starts: deleting a Deployment stops
    // the Pods that use its claim, and the controllers then update the claim (its `Unused`
    // condition), so a claim deleted later would find its fence changed. A claim deleted first
    // waits, behind its protection finalizer, for its Pods. `Session` objects last: StreamSpace
    // v1's controller owns a session's Deployment and Service by its `Session`, so they are
    // archived and deleted while their owner is there; and an owner's delete leaves what it owns
    // in place (`delete_owner`), so that what gc kept or could not delete is never taken by
    // Kubernetes' garbage collector.
    let mut phases: [Vec<Judged>; 3] = Default::default();
    for j in plan.judged {
        phases[phase_of(&j.resource)].push(j);
    }
    for phase in phases {
        // Only the deletes go through the pipeline: its slow start counts objects worked on.
        let deletes: Vec<usize> = (0..phase.len())
            .filter(|&i| matches!(phase[i].decision, SessionDecision::Delete { .. }))
            .collect();
        let resources: Vec<&Resource> = deletes.iter().map(|&i| &phase[i].resource).collect();
        let ahead = &read_ahead(cluster, cfg, &resources, keep.concurrency).await;
        let phase_ref = &phase;
        let record = |judged, (result, archive)| AuditRecord {
            cluster: cfg.cluster_id.clone(),
            namespace: cfg.namespace.clone(),
            judged,
            result,
            archive,
            dry_run,
        };
        let record = &record;
        let done = crate::pipeline::in_order(deletes.clone(), keep.concurrency, |i| async move {
            let judged = &phase_ref[i];
            let read = ahead.get(&judged.resource.uid).cloned();
            let r = &judged.resource;
            let owner = owners.contains(&r.uid);
            let (result, archive) = match store.latch.tripped().or_else(|| sink.latch.tripped()) {
                Some(why) => (
                    DeleteResult::NotStarted(format!(
                        "{why}, earlier in this run: the next run judges it again"
                    )),
                    None,
                ),
                None => delete(cluster, keep, cfg, (r, owner), read, now, dry_run, stop).await,
            };
            let done = record(judged.clone(), (Some(result), archive));
            if let Some(acted) = keep.acted {
                acted(&done);
            }
            done
        })
        .await;
        let mut done: HashMap<usize, _> = deletes.into_iter().zip(done).collect();
        records.extend(phase.into_iter().enumerate().map(|(i, judged)| {
            done.remove(&i)
                .unwrap_or_else(|| record(judged, (None, None)))
        }));
    }
    let failures = records
        .iter()
        .filter(|r| r.result.as_ref().is_some_and(DeleteResult::is_failure))
        .count();
    // Every review, also with retention 0: what gc kept earlier is never forgotten.
    let reviewed = review(keep.volumes, keep.store, cfg, now, stop).await;
    records.extend(reviewed.records);
    Ok(SessionReport {
        records,
        missing_kinds,
        lookups,
        unknown_states,
        failures: failures + reviewed.failures,
        volumes_unlisted: reviewed.volumes_unlisted,
        volumes_note: reviewed.volumes_note,
    })
}

/// The first call to gc's store, or to its archive sink, that found it unavailable
/// ([`StoreError::Unavailable`]: refused, or silent past its timeout) in a run, kept for the rest
/// of it.
#[derive(Default)]
struct Latch(std::sync::Mutex<Option<String>>);

impl Latch {
    /// What found the store or sink unavailable, once something did.
    fn tripped(&self) -> Option<String> {
        let first = self.0.lock();
        first
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Refuses a call once the latch is tripped, without making it.
    fn before(&self) -> Result<(), StoreError> {
        match self.tripped() {
            Some(why) => Err(StoreError::Unavailable(format!(
                "not tried: {why} earlier in this run"
            ))),
            None => Ok(()),
        }
    }

    /// `result`, the latch tripped when it says the store or sink is unavailable.
    fn seen<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e @ StoreError::Unavailable(_)) = &result {
            let mut first = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            first.get_or_insert_with(|| e.to_string());
        }
        result
    }
}

/// A run's store, or its sink, behind a [`Latch`] of its own (the volumes' review needs the
/// store alone).
struct Latched<'a, P: ?Sized> {
    inner: &'a P,
    latch: Latch,
}

impl<'a, P: ?Sized> Latched<'a, P> {
    fn new(inner: &'a P) -> Self {
        Self {
            inner,
            latch: Latch::default(),
        }
    }
}

#[async_trait::async_trait]
impl Store for Latched<'_, dyn Store + '_> {
    async fn load_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
    ) -> Result<crate::PreviousLedger, StoreError> {
        self.latch.before()?;
        let loaded = self.inner.load_ledger(cluster_id, namespace).await;
        self.latch.seen(loaded)
    }
    async fn save_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
        ledger: &crate::Ledger,
    ) -> Result<(), StoreError> {
        self.latch.before()?;
        let saved = self.inner.save_ledger(cluster_id, namespace, ledger).await;
        self.latch.seen(saved)
    }
    async fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        self.latch.before()?;
        self.latch.seen(self.inner.put_receipt(receipt).await)
    }
    async fn get_receipt(
        &self,
        cluster_id: &str,
        uid: &str,
    ) -> Result<Option<Receipt>, StoreError> {
        self.latch.before()?;
        self.latch
            .seen(self.inner.get_receipt(cluster_id, uid).await)
    }
}

#[async_trait::async_trait]
impl ArchiveSink for Latched<'_, dyn ArchiveSink + '_> {
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
        self.latch.before()?;
        self.latch.seen(self.inner.write(key, bytes).await)
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        self.latch.before()?;
        self.latch.seen(self.inner.read(uri).await)
    }
}

/// The review of the volumes gc kept ([`volumes::expire`]) that ends every run, as a report of
/// its own: its audit records, its failures, and why the volumes could not be listed. It needs
/// neither the database nor the plan, so a run refused before its deletes (a database down, the
/// guard) still gives back the volumes whose window passed: call it then.
pub async fn review(
    volumes: &dyn Volumes,
    store: &dyn Store,
    cfg: &SessionConfig,
    now: f64,
    held: Held<'_>,
) -> SessionReport {
    let (dry_run, stop) = (held.is_dry_run(), held);
    let mut report = SessionReport::default();
    match volumes::expire(volumes, store, cfg, now, stop).await {
        Ok(reviewed) => {
            for volumes::Reviewed { judged, result } in reviewed {
                report.failures +=
                    usize::from(result.as_ref().is_some_and(DeleteResult::is_failure));
                report.records.push(AuditRecord {
                    cluster: cfg.cluster_id.clone(),
                    namespace: cfg.namespace.clone(),
                    judged,
                    result,
                    archive: None,
                    dry_run,
                });
            }
        }
        // Retention off and no access to volumes: nothing is kept now, and whether anything
        // was kept earlier cannot be known here; said, not a failure.
        Err(e @ ClusterError::Forbidden { .. }) if cfg.retain_volume_days == 0 => {
            report.volumes_note = Some(format!(
                "cannot list the volumes gc kept earlier ({e}): any such volume keeps Retain \
                 until a run that may list and patch PersistentVolumes gives it its policy back"
            ));
        }
        Err(e) => {
            report.volumes_unlisted = Some(format!("cannot list the retained volumes: {e}"));
        }
    }
    report
}

/// Session ids per whole-object list of [`read_ahead`]: a label selector of 100 ids (at most
/// 63 characters each) keeps a request's URL far under the API server's limits.
pub const READ_BATCH: usize = 100;

/// The whole objects of `deletes`, by uid, read ahead of their deletes: one list per kind and
/// [`READ_BATCH`] session ids (the run's selector and `id_label in (...)`), `concurrency` at
/// once, instead of one GET per object. What this answers is only where an object's reading
/// starts: [`archive`] still refuses an object whose uid or resourceVersion is not the one
/// planned, and the delete still carries them as preconditions. An object missing here (a list
/// that failed or is not offered, an object without a session label, one changed or gone) is
/// read by its own GET.
async fn read_ahead<C: ObjectCluster>(
    cluster: &C,
    cfg: &SessionConfig,
    deletes: &[&Resource],
    concurrency: usize,
) -> HashMap<String, serde_json::Value> {
    let wanted: std::collections::HashSet<&str> = deletes.iter().map(|r| r.uid.as_str()).collect();
    let mut lists = Vec::new();
    // Kinds by index, not by reference: a future over items that borrow stays `Send` only for
    // some lifetimes, and an embedder spawns runs.
    for (k, kind) in cfg.kinds.iter().enumerate() {
        let mut ids: Vec<&str> = (deletes.iter())
            .filter(|r| cfg.kind_of(r) == Some(kind))
            .filter_map(|r| r.session.as_deref())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        for batch in ids.chunks(READ_BATCH) {
            let by_id = format!("{} in ({})", cfg.id_label, batch.join(","));
            let selector = [cfg.selector.as_str(), &by_id]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(",");
            lists.push((k, selector));
        }
    }
    let wanted = &wanted;
    let read = crate::pipeline::in_order(lists, concurrency, |(k, selector)| async move {
        let (kind, selector) = (&cfg.kinds[k], &selector);
        crate::pages::collect(
            |token: Option<String>| async move {
                cluster
                    .list_objects(kind, &cfg.namespace, selector, PAGE_SIZE, token.as_deref())
                    .await
            },
            |item| {
                let Some(uid) = item["metadata"]["uid"]
                    .as_str()
                    .filter(|u| wanted.contains(u))
                else {
                    return Ok(None);
                };
                let mut object = item.clone();
                // A list's items of a built-in kind lack these; a GET's answer has them.
                if let Some(fields) = object.as_object_mut() {
                    let api_version = serde_json::Value::from(kind.api_version());
                    fields.entry("apiVersion").or_insert(api_version);
                    let kind = serde_json::Value::from(kind.kind.as_str());
                    fields.entry("kind").or_insert(kind);
                }
                Ok(Some((uid.to_owned(), object)))
            },
        )
        .await
    })
    .await;
    read.into_iter().flatten().flatten().collect()
}

/// Whether `r` is a PersistentVolumeClaim.
fn is_claim(r: &Resource) -> bool {
    r.kind == "PersistentVolumeClaim" && r.api_version == "v1"
}

/// Which of a run's three phases deletes `r`: claims, then every other kind, then the `Session`
/// objects (of either group) that may own them.
fn phase_of(r: &Resource) -> usize {
    match r.kind.as_str() {
        _ if is_claim(r) => 0,
        "Session" => 2,
        _ => 1,
    }
}

/// Archives one orphan's manifest (`read`: the whole object read ahead, if it was), then
/// deletes it with the uid and resourceVersion preconditions of the version archived; returns
/// what came of it and, after a live delete was sent, where the manifest is. Once a flag of
/// `stop` is set nothing more is written.
#[allow(clippy::too_many_arguments)]
async fn delete<C: ObjectCluster>(
    cluster: &C,
    keep: Keep<'_>,
    cfg: &SessionConfig,
    (r, owner): (&Resource, bool),
    read: Option<serde_json::Value>,
    now: f64,
    dry_run: bool,
    stop: Held<'_>,
) -> (DeleteResult, Option<String>) {
    // Resources come from scanning these kinds, so the kind is always found; if it were not,
    // nothing is deleted rather than guessing.
    let Some(kind) = cfg.kind_of(r) else {
        return (
            DeleteResult::Failed(format!("unknown kind {}", r.kind)),
            None,
        );
    };
    if let Some(unsent) = unsent(stop) {
        return (unsent, None);
    }
    let uri = match archive(cluster, keep, (kind, read), cfg, r, now, dry_run, stop).await {
        Ok(uri) => uri,
        Err(result) => return (result, None),
    };
    if let Some(unsent) = unsent(stop) {
        return (unsent, None);
    }
    let pre = Preconditions {
        uid: r.uid.clone(),
        resource_version: r.resource_version.clone(),
    };
    let (ns, name) = (&cfg.namespace, &r.name);
    let sent = if owner {
        cluster.delete_owner(kind, ns, name, &pre, dry_run).await
    } else {
        cluster.delete_object(kind, ns, name, &pre, dry_run).await
    };
    let result = match sent {
        Ok(()) if dry_run => DeleteResult::WouldDelete,
        Ok(()) => DeleteResult::Deleted,
        Err(ClusterError::Changed { .. } | ClusterError::NotFound(_)) => DeleteResult::Changed,
        Err(e) => DeleteResult::Failed(e.to_string()),
    };
    (result, uri)
}

/// Reads `r` whole (unless it was `read` ahead) and, unless `dry_run`, writes its manifest to
/// the sink, reads it back, verifies it and records its receipt, then (a claim's) keeps its
/// volume, named in that receipt ([`volumes::plan_keep`]); returns the archive's URI
/// (`None` in a dry run, which builds the manifest and writes nothing). `Err` is the result of
/// a delete that must not be sent: the object changed or is gone (the next run judges it
/// again), or the archive or the receipt failed.
#[allow(clippy::too_many_arguments)]
async fn archive<C: ObjectCluster>(
    cluster: &C,
    keep: Keep<'_>,
    (kind, read): (&Kind, Option<serde_json::Value>),
    cfg: &SessionConfig,
    r: &Resource,
    now: f64,
    dry_run: bool,
    stop: Held<'_>,
) -> Result<Option<String>, DeleteResult> {
    let run_at = &crate::isotime::format_timestamp(now);
    let failed = |why: String| DeleteResult::Failed(format!("not deleted: {why}"));
    // The list the plan was made from has only metadata; the archive needs the whole object.
    let object = match read {
        Some(object) => object,
        None => {
            let text = match cluster.get_object(kind, &cfg.namespace, &r.name).await {
                Ok(Some(text)) => text,
                Ok(None) => return Err(DeleteResult::Changed),
                Err(e) => return Err(failed(format!("cannot read it to archive it: {e}"))),
            };
            serde_json::from_slice(&text)
                .map_err(|e| failed(format!("the API server's answer is not JSON: {e}")))?
        }
    };
    if manifest::unchanged(&object, r).is_err() {
        return Err(DeleteResult::Changed);
    }
    // A claim's volume is kept after its receipt names it: a volume gc marks is always one its
    // store can prove it kept (`volumes::keep_receipt`).
    let keeping = if is_claim(r) && cfg.retain_volume_days > 0 {
        volumes::plan_keep(keep.volumes, keep.store, cfg, &object, r, now).await?
    } else {
        None
    };
    let doc = manifest::document(&object, &cfg.cluster_id, &cfg.namespace, r, run_at);
    if dry_run {
        if let Some(keeping) = &keeping {
            volumes::keep(keep.volumes, keeping, stop).await?;
        }
        return Ok(None);
    }
    if let Some(unsent) = unsent(stop) {
        return Err(unsent);
    }
    let key = ArchiveKey {
        cluster_id: cfg.cluster_id.clone(),
        namespace: cfg.namespace.clone(),
        uid: r.uid.clone(),
    };
    let uri = keep
        .sink
        .write(&key, doc.as_bytes())
        .await
        .map_err(|e| failed(format!("cannot archive its manifest: {e}")))?;
    let receipt = Receipt {
        cluster_id: cfg.cluster_id.clone(),
        namespace: cfg.namespace.clone(),
        uid: r.uid.clone(),
        name: r.name.clone(),
        uri: uri.clone(),
        sha256: crate::pods::archive::digest(doc.as_bytes()),
        bytes: doc.len() as u64,
        session: Some(SessionObject {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            session: r.session.clone(),
            run_at: run_at.to_owned(),
            retained: keeping.as_ref().map(|k| k.volume.clone()),
        }),
    };
    let back = keep
        .sink
        .read(&uri)
        .await
        .map_err(|e| failed(format!("cannot read its archive {uri} back: {e}")))?;
    if let Some(problem) = receipt.mismatch(&back) {
        return Err(failed(format!("archive {uri} {problem}")));
    }
    if let Some(unsent) = unsent(stop) {
        return Err(unsent);
    }
    keep.store
        .put_receipt(&receipt)
        .await
        .map_err(|e| failed(format!("no receipt of archive {uri}: {e}")))?;
    if let Some(keeping) = &keeping {
        volumes::keep(keep.volumes, keeping, stop).await?;
    }
    Ok(Some(uri))
}

#[cfg(test)]
mod tests;
