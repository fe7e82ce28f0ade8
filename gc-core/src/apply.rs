//! The fenced apply of a failed-Pod plan: one target at a time, every step re-reading the Pod
//! and checking it is still the same Pod (uid), still eligible, still past retention.
//!
//! The protocol, per target, and the [`Step`] each part reports under:
//!
//! 1. `Reread`: read the Pod by name; absent or another uid: skip. Still eligible and past
//!    retention, or skip.
//! 2. `Pin`: without finalizers, JSON patch `test` uid, resourceVersion and phase, then add the pin
//!    finalizer; read it back (the same uid, eligible, finalizers exactly the pin).
//! 3. `Archive`: the canonical archive of `metadata`, `status`, `retentionBasis`, `anchor`, its
//!    sha256, written to the sink; `VerifyArchive`: read back, hash and uid checked.
//! 4. `Receipt`: the receipt stored.
//! 5. `Fence`: re-read: same uid, eligible, pinned, status unchanged since the archive, the receipt
//!    and the archive agree.
//! 6. `Delete`: with uid and resourceVersion preconditions; read back: deleting, pin still on.
//! 7. `Release`: JSON patch `test` uid, resourceVersion, phase and the finalizer list, then remove
//!    the pin. `VerifyGone`: after a short wait, the uid is gone.
//!
//! The state of a target lives in the cluster and the store (pinned? deleting? receipt?), never
//! in the process, so a run that stops anywhere is resumed by the next: a pinned Pod is pinned
//! already, a deleting one is archived again and released. [`recover`] finishes or releases the
//! pins that no target of the current plan covers, so no pin stays forever.
//!
//! Dry run takes the same path with server-side dry run on the patch and the delete; the archive
//! and receipt are computed but not written, and the release (which could only be tested against
//! a pin that a dry run never stored) is reported, not sent.

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::archive;
use crate::config::PodConfig;
use crate::inventory::pod_facts;
use crate::ledger::PyNum;
use crate::plan::Target;
use crate::pod::{self, Basis, Rules};
use crate::ports::{
    ArchiveKey, ArchiveSink, Clock, Cluster, ClusterError, Preconditions, Receipt, Store,
};

/// A step of the protocol, as results name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// Re-reading the Pod and checking it is still a target.
    Reread,
    /// Pinning its identity with the finalizer.
    Pin,
    /// Writing the canonical archive.
    Archive,
    /// Reading the archive back.
    VerifyArchive,
    /// Storing the receipt.
    Receipt,
    /// The pre-delete fence.
    Fence,
    /// The fenced delete.
    Delete,
    /// Releasing the pin.
    Release,
    /// Checking the uid is gone.
    VerifyGone,
}

/// What happened to one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Outcome {
    /// Archived, verified, receipted and removed.
    Collected {
        /// Where the archive is.
        uri: String,
        /// Its sha256.
        sha256: String,
        /// Its size.
        bytes: usize,
    },
    /// Dry run: every check passed and the server accepted every write in dry-run mode.
    WouldCollect {
        /// The archive's sha256 as it would be written.
        sha256: String,
        /// Its size.
        bytes: usize,
    },
    /// No longer a target (gone, replaced, no longer eligible, retention changed).
    Skipped {
        /// Where it was noticed.
        step: Step,
        /// Why.
        reason: String,
    },
    /// A fence held: the object changed under us (409 or 422). Nothing else was written.
    Changed {
        /// The write that was refused.
        step: Step,
        /// The server's message.
        message: String,
    },
    /// A step failed; the Pod is left in a state the next run resumes.
    Failed {
        /// The failing step.
        step: Step,
        /// The error.
        error: String,
    },
}

impl Outcome {
    /// Whether the run should exit non-zero for this target.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed { .. })
    }
}

/// One target's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetResult {
    /// The Pod's name.
    pub name: String,
    /// The planned uid.
    pub uid: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The ports the engine drives.
pub struct Ports<'p, C, S, A, K> {
    /// The cluster.
    pub cluster: &'p C,
    /// Receipts.
    pub store: &'p S,
    /// Archives.
    pub sink: &'p A,
    /// Time.
    pub clock: &'p K,
}

/// Seconds to wait after the release before checking the uid is gone (the flow's `settle`).
pub const SETTLE_SECONDS: f64 = 2.0;

/// A Pod as read from the cluster.
struct Live {
    object: Value,
    facts: pod::PodFacts,
}

impl Live {
    fn parse(bytes: &[u8], rules: Rules<'_>) -> Result<Self, String> {
        let object: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("unreadable Pod: {e}"))?;
        let metadata = serde_json::to_string(&object["metadata"]).map_err(|e| e.to_string())?;
        let status = object.get("status").map(Value::to_string);
        let facts = pod_facts(&metadata, status.as_deref(), rules)
            .map_err(|b| format!("{}: {}", b.field, b.problem))?;
        Ok(Self { object, facts })
    }
    fn meta(&self, key: &str) -> &Value {
        &self.object["metadata"][key]
    }
    fn uid(&self) -> &str {
        self.meta("uid").as_str().unwrap_or_default()
    }
    fn resource_version(&self) -> String {
        self.meta("resourceVersion")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
    fn status(&self) -> Value {
        match self.object.get("status") {
            Some(s) if !s.is_null() => s.clone(),
            _ => json!({}),
        }
    }
    fn pinned(&self, pin: &str) -> bool {
        self.meta("finalizers") == &json!([pin])
    }
    fn unpinned(&self) -> bool {
        self.meta("finalizers").as_array().is_none_or(Vec::is_empty)
    }
    fn deleting(&self) -> bool {
        !self.meta("deletionTimestamp").is_null()
    }
    /// `None` when eligible, else why not.
    fn ineligible(&self) -> Option<String> {
        match pod::assess(&self.facts) {
            Ok(Ok(_)) => None,
            Ok(Err(reason)) => Some(format!("no longer eligible: {reason}")),
            Err(bad) => Some(format!("unreadable: {}: {}", bad.field, bad.problem)),
        }
    }
}

fn rules(cfg: &PodConfig) -> Rules<'_> {
    Rules {
        namespace: &cfg.namespace,
        collect_label: &cfg.collect_label,
        pin: &cfg.pin_finalizer,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn test_ops(uid: &str, resource_version: &str) -> Vec<Value> {
    vec![
        json!({"op": "test", "path": "/metadata/uid", "value": uid}),
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}),
        json!({"op": "test", "path": "/status/phase", "value": "Failed"}),
    ]
}

/// The pin patch: `test` uid, resourceVersion and phase, then add the finalizer.
pub fn pin_patch(uid: &str, resource_version: &str, pin: &str) -> Vec<u8> {
    let mut ops = test_ops(uid, resource_version);
    ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [pin]}));
    Value::Array(ops).to_string().into_bytes()
}

/// The release patch: `test` uid, resourceVersion, phase and the finalizer list, then remove
/// the pin from it.
pub fn release_patch(
    uid: &str,
    resource_version: &str,
    finalizers: &[Value],
    pin: &str,
) -> Vec<u8> {
    let mut ops = test_ops(uid, resource_version);
    ops.push(json!({"op": "test", "path": "/metadata/finalizers", "value": finalizers}));
    if let Some(i) = finalizers.iter().position(|f| f == pin) {
        ops.push(json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")}));
    }
    Value::Array(ops).to_string().into_bytes()
}

/// How a cluster error ends a target.
fn cluster_outcome(step: Step, e: ClusterError) -> Outcome {
    match e {
        ClusterError::Changed { message, .. } => Outcome::Changed { step, message },
        ClusterError::NotFound(_) => Outcome::Skipped {
            step,
            reason: "the Pod is gone".into(),
        },
        e => Outcome::Failed {
            step,
            error: e.to_string(),
        },
    }
}

fn failed(step: Step, error: impl Into<String>) -> Outcome {
    Outcome::Failed {
        step,
        error: error.into(),
    }
}

fn skipped(step: Step, reason: impl Into<String>) -> Outcome {
    Outcome::Skipped {
        step,
        reason: reason.into(),
    }
}

/// Applies `targets` one at a time. One target's failure does not stop the others.
pub async fn apply<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    ports: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    targets: &[Target],
    dry_run: bool,
) -> Vec<TargetResult> {
    let mut results = Vec::with_capacity(targets.len());
    for t in targets {
        let outcome = collect(ports, cfg, t, dry_run, true).await;
        let name = t
            .name
            .as_str()
            .map_or_else(|| t.name.to_string(), str::to_owned);
        results.push(TargetResult {
            name,
            uid: t.uid.clone(),
            outcome,
        });
    }
    results
}

async fn get<C: Cluster>(
    cluster: &C,
    cfg: &PodConfig,
    name: &str,
    step: Step,
) -> Result<Option<Live>, Outcome> {
    match cluster.get_pod(&cfg.namespace, name).await {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => Live::parse(&bytes, rules(cfg))
            .map(Some)
            .map_err(|e| failed(step, e)),
        Err(e) => Err(cluster_outcome(step, e)),
    }
}

/// The protocol for one target. `check_retention` is off only when recovery finishes a Pod that
/// is already being deleted (archiving it is then better than losing it).
async fn collect<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    t: &Target,
    dry_run: bool,
    check_retention: bool,
) -> Outcome {
    let name = t.name.as_str().unwrap_or_default();
    let pin = cfg.pin_finalizer.as_str();
    // 1. Re-read: the same Pod, still eligible, still past retention.
    let pod = match get(p.cluster, cfg, name, Step::Reread).await {
        Err(o) => return o,
        Ok(None) => return skipped(Step::Reread, "the Pod is gone"),
        Ok(Some(pod)) if pod.uid() != t.uid => {
            return skipped(Step::Reread, "another Pod has this name now");
        }
        Ok(Some(pod)) => pod,
    };
    if let Some(why) = pod.ineligible() {
        return skipped(Step::Reread, why);
    }
    let (end, basis) = match pod::assess(&pod.facts) {
        Ok(Ok(e)) => match e.finished_at() {
            Ok(Some(at)) => (PyNum::Float(at), Basis::FinishedAt),
            Ok(None) => (t.first, Basis::ObservedFailed),
            Err(bad) => return failed(Step::Reread, format!("{}: {}", bad.field, bad.problem)),
        },
        _ => return skipped(Step::Reread, "no longer eligible"),
    };
    if check_retention && end.seconds() > p.clock.now() - f64::from(cfg.retention_seconds) {
        return skipped(
            Step::Reread,
            "retention has not passed (the anchor changed)",
        );
    }
    // 2. Pin, then read it back.
    let stored_rv = pod.resource_version();
    let pinned = if pod.unpinned() {
        let patch = pin_patch(&t.uid, &pod.resource_version(), pin);
        match p
            .cluster
            .patch_pod(&cfg.namespace, name, &patch, dry_run)
            .await
        {
            Err(e) => return cluster_outcome(Step::Pin, e),
            // A dry-run patch is not stored: its answer is what a read would show.
            Ok(answer) if dry_run => match Live::parse(&answer, rules(cfg)) {
                Ok(pod) => pod,
                Err(e) => return failed(Step::Pin, e),
            },
            Ok(_) => match get(p.cluster, cfg, name, Step::Pin).await {
                Err(o) => return o,
                Ok(None) => return failed(Step::Pin, "the pinned Pod is gone"),
                Ok(Some(pod)) => pod,
            },
        }
    } else {
        pod
    };
    if pinned.uid() != t.uid || !pinned.pinned(pin) || pinned.ineligible().is_some() {
        return failed(Step::Pin, "identity pin invalid after pinning");
    }
    // 3. The canonical archive, written and read back.
    let status = pinned.status();
    let doc = archive::document(&pinned.object["metadata"], &status, basis, end);
    if doc.len() > cfg.max_archive_bytes {
        return failed(
            Step::Archive,
            format!(
                "archive of {} bytes exceeds max_archive_bytes {}",
                doc.len(),
                cfg.max_archive_bytes
            ),
        );
    }
    let sha256 = sha256_hex(doc.as_bytes());
    if dry_run {
        return dry_run_rest(p, cfg, name, &pinned, stored_rv, sha256, doc.len()).await;
    }
    let key = ArchiveKey {
        cluster_id: cfg.cluster_id.clone(),
        namespace: cfg.namespace.clone(),
        uid: t.uid.clone(),
    };
    let uri = match p.sink.write(&key, doc.as_bytes()).await {
        Ok(uri) => uri,
        Err(e) => return failed(Step::Archive, e.to_string()),
    };
    if let Err(e) = verify_archive(p.sink, &uri, &sha256, &t.uid).await {
        return failed(Step::VerifyArchive, e);
    }
    // 4. The receipt.
    let receipt = Receipt {
        cluster_id: cfg.cluster_id.clone(),
        namespace: cfg.namespace.clone(),
        uid: t.uid.clone(),
        name: name.to_owned(),
        uri: uri.clone(),
        sha256: sha256.clone(),
        bytes: doc.len() as u64,
    };
    if let Err(e) = p.store.put_receipt(&receipt).await {
        return failed(Step::Receipt, e.to_string());
    }
    // 5. The pre-delete fence.
    let current = match get(p.cluster, cfg, name, Step::Fence).await {
        Err(o) => return o,
        Ok(None) => return failed(Step::Fence, "the pinned Pod is gone"),
        Ok(Some(pod)) => pod,
    };
    if current.uid() != t.uid || !current.pinned(pin) || current.ineligible().is_some() {
        return failed(
            Step::Fence,
            "pre-delete fence invalid: not the same eligible pinned Pod",
        );
    }
    if current.status() != status {
        return skipped(
            Step::Fence,
            "the status changed after the archive; archived again next run",
        );
    }
    match p.store.get_receipt(&cfg.cluster_id, &t.uid).await {
        Ok(Some(r)) if r.sha256 == sha256 && r.uri == uri => {}
        Ok(_) => return failed(Step::Fence, "archive receipt readback invalid"),
        Err(e) => return failed(Step::Fence, e.to_string()),
    }
    if let Err(e) = verify_archive(p.sink, &uri, &sha256, &t.uid).await {
        return failed(Step::Fence, e);
    }
    // 6. The fenced delete, then: deleting, pin still on.
    let pre = Preconditions {
        uid: t.uid.clone(),
        resource_version: current.resource_version(),
    };
    if let Err(e) = p
        .cluster
        .delete_pod(&cfg.namespace, name, &pre, false)
        .await
    {
        return cluster_outcome(Step::Delete, e);
    }
    let deleting = match get(p.cluster, cfg, name, Step::Delete).await {
        Err(o) => return o,
        // Someone released the pin already: archived and receipted, so collected.
        Ok(None) => {
            return Outcome::Collected {
                uri,
                sha256,
                bytes: doc.len(),
            };
        }
        Ok(Some(pod)) => pod,
    };
    if deleting.uid() != t.uid || !deleting.deleting() || !deleting.pinned(pin) {
        return failed(Step::Delete, "delete did not mark the pinned Pod");
    }
    // 7. Release, then the uid must be gone.
    let patch = release_patch(&t.uid, &deleting.resource_version(), &[json!(pin)], pin);
    if let Err(e) = p
        .cluster
        .patch_pod(&cfg.namespace, name, &patch, false)
        .await
    {
        return cluster_outcome(Step::Release, e);
    }
    p.clock.sleep(SETTLE_SECONDS).await;
    match get(p.cluster, cfg, name, Step::VerifyGone).await {
        Err(o) => o,
        Ok(Some(pod)) if pod.uid() == t.uid => {
            failed(Step::VerifyGone, "the archived Pod's uid remains")
        }
        Ok(_) => Outcome::Collected {
            uri,
            sha256,
            bytes: doc.len(),
        },
    }
}

/// The rest of a dry run after the pin: the delete in server-side dry run, fenced on the stored
/// resourceVersion (the dry-run pin was not stored).
async fn dry_run_rest<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    pinned: &Live,
    stored_rv: String,
    sha256: String,
    bytes: usize,
) -> Outcome {
    let pre = Preconditions {
        uid: pinned.uid().to_owned(),
        resource_version: stored_rv,
    };
    match p.cluster.delete_pod(&cfg.namespace, name, &pre, true).await {
        Err(e) => cluster_outcome(Step::Delete, e),
        Ok(_) => Outcome::WouldCollect { sha256, bytes },
    }
}

/// Finishes or releases every pin that no target covers: a run that stopped mid-protocol, or a
/// plan that no longer lists a pinned Pod, leaves no pin behind. A pinned Pod being deleted is
/// archived and released (retention no longer matters: it is going); any other is released with
/// a fenced patch.
///
/// # Errors
/// [`ClusterError`] when the Pods cannot be listed; per-Pod outcomes are in the results.
pub async fn recover<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    targets: &[Target],
    dry_run: bool,
) -> Result<Vec<TargetResult>, ClusterError> {
    let query = crate::ports::PodQuery {
        namespace: cfg.namespace.clone(),
        label_selector: format!("{}=true", cfg.collect_label),
        field_selector: "status.phase=Failed".into(),
        limit: 500,
    };
    let mut pinned = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = p.cluster.list_pods(&query, token.as_deref()).await?;
        let list: Value =
            serde_json::from_slice(&page.text).map_err(|e| ClusterError::Other(e.to_string()))?;
        for item in list["items"].as_array().into_iter().flatten() {
            let finalizers = item["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let uid = item["metadata"]["uid"].as_str().unwrap_or_default();
            if finalizers.iter().any(|f| f == cfg.pin_finalizer.as_str())
                && !targets.iter().any(|t| t.uid == uid)
            {
                pinned.push(item.clone());
            }
        }
        match page.continue_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    let mut results = Vec::new();
    for item in pinned {
        let meta = &item["metadata"];
        let name = meta["name"].as_str().unwrap_or_default().to_owned();
        let uid = meta["uid"].as_str().unwrap_or_default().to_owned();
        let outcome = if meta["deletionTimestamp"].is_null() {
            let finalizers = meta["finalizers"].as_array().cloned().unwrap_or_default();
            let rv = meta["resourceVersion"].as_str().unwrap_or_default();
            let patch = release_patch(&uid, rv, &finalizers, &cfg.pin_finalizer);
            match p
                .cluster
                .patch_pod(&cfg.namespace, &name, &patch, dry_run)
                .await
            {
                Ok(_) => skipped(Step::Release, "pin released: not a target of this plan"),
                Err(e) => cluster_outcome(Step::Release, e),
            }
        } else {
            let now = PyNum::Float(p.clock.now());
            let t = Target {
                name: Value::String(name.clone()),
                uid: uid.clone(),
                first: now,
                basis: Basis::ObservedFailed,
                end: now,
                resource_version: String::new(),
                archive_bytes: 0,
            };
            collect(p, cfg, &t, dry_run, false).await
        };
        results.push(TargetResult { name, uid, outcome });
    }
    Ok(results)
}

async fn verify_archive<A: ArchiveSink>(
    sink: &A,
    uri: &str,
    sha256: &str,
    uid: &str,
) -> Result<(), String> {
    let back = sink.read(uri).await.map_err(|e| e.to_string())?;
    if sha256_hex(&back) != sha256 {
        return Err("archive readback mismatch".into());
    }
    let doc: Value =
        serde_json::from_slice(&back).map_err(|e| format!("archive unreadable: {e}"))?;
    if doc["metadata"]["uid"] != uid {
        return Err("archive identity mismatch".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
