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
//! 6. `Delete`: with uid and resourceVersion preconditions; read back: deleting, pin still on,
//!    status as archived.
//! 7. `Release`: JSON patch `test` uid, resourceVersion, phase and the finalizer list, then remove
//!    the pin. `VerifyGone`: the uid is gone, checked at once and then with a short backoff for
//!    at most 2 s.
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

use crate::pods::archive;
use crate::pods::config::PodConfig;
use crate::pods::facts::{self as pod, Basis, Rules};
use crate::pods::inventory::pod_facts;
use crate::pods::ledger::{PreviousLedger, PyNum};
use crate::pods::plan::Target;

use crate::lease::Held;
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
pub enum TargetOutcome {
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
    /// A fence held: the object changed under us (a write refused with 409 or 422, or labels
    /// changed after the pin, which is then released). Nothing else was written.
    Changed {
        /// The write that was refused, or the read that saw the change.
        step: Step,
        /// The server's message.
        message: String,
    },
    /// The pinned Pod's archive is larger than `max_archive_bytes` (pinning adds a finalizer and
    /// a `managedFields` entry): the pin was released and nothing deleted.
    TooLarge {
        /// The archive's size.
        bytes: usize,
        /// The ceiling.
        max: usize,
    },
    /// Recovery released a pin left by an earlier run; nothing was deleted.
    Released {
        /// Why the pin was released rather than the Pod collected.
        reason: String,
    },
    /// Not started: the run was asked to stop first; the Pod is untouched and the next run
    /// collects it. No failure.
    NotStarted {
        /// Why.
        reason: String,
    },
    /// A step failed; the Pod is left in a state the next run resumes.
    Failed {
        /// The failing step.
        step: Step,
        /// The error.
        error: String,
    },
}

impl TargetOutcome {
    /// Whether the run should exit non-zero for this target: a step failed, or its archive is
    /// over the ceiling (as the plan fails on one; the operator must raise the ceiling).
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed { .. } | Self::TooLarge { .. })
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
    pub outcome: TargetOutcome,
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
    /// The run's proof of its lock ([`crate::lease`]): a dry run's sends every write in
    /// server-side dry run and writes no archive; once the lock is lost (or may be), the engine
    /// writes nothing more; once the run is asked to stop, no new target is started.
    pub held: Held<'p>,
    /// Targets in flight at once ([`crate::pipeline`]; 1: one after another).
    pub concurrency: usize,
}

/// The longest wait, after the release, for the uid to be gone (the flow's fixed `settle`).
pub const SETTLE_SECONDS: f64 = 2.0;

/// The first wait when the uid is still there right after the release; each next one doubles.
pub const FIRST_VERIFY_WAIT_SECONDS: f64 = 0.05;

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
fn cluster_outcome(step: Step, e: ClusterError) -> TargetOutcome {
    match e {
        ClusterError::Changed { message, .. } => TargetOutcome::Changed { step, message },
        ClusterError::NotFound(_) => TargetOutcome::Skipped {
            step,
            reason: "the Pod is gone".into(),
        },
        e => TargetOutcome::Failed {
            step,
            error: e.to_string(),
        },
    }
}

fn failed(step: Step, error: impl Into<String>) -> TargetOutcome {
    TargetOutcome::Failed {
        step,
        error: error.into(),
    }
}

fn skipped(step: Step, reason: impl Into<String>) -> TargetOutcome {
    TargetOutcome::Skipped {
        step,
        reason: reason.into(),
    }
}

/// Applies `targets`, up to [`Ports::concurrency`] at once, each walking its whole protocol in
/// order and bound to the resourceVersion it was planned at; results in the targets' order. One
/// target's failure does not stop the others; a lost run lock ([`Ports::held`]) stops them all
/// before their next write.
///
/// # Guarantees
/// - A target whose Pod changed since the plan (another resourceVersion) is reported
///   [`TargetOutcome::Changed`] and not written to; the pin patch itself tests the planned
///   resourceVersion, so a change between the re-read and the pin is refused by the server.
/// - No delete without an archive read back and verified and a receipt read back.
pub async fn apply<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    ports: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    targets: &[Target],
) -> Vec<TargetResult> {
    apply_until(ports, cfg, targets, None).await
}

/// [`apply`], asked to stop between targets by [`Held::stopping`] (a process told to stop): the
/// targets in progress are finished, each later one is [`TargetOutcome::NotStarted`]. Unlike a
/// lost lock ([`Held::lost`], checked first: it fails what is left), being asked to stop never
/// interrupts a target and is no failure. `recorded` is an observation ledger kept outside the
/// store (a file), which records first observations as the store's does ([`first_observed`]).
pub async fn apply_until<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    ports: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    targets: &[Target],
    recorded: Option<&PreviousLedger>,
) -> Vec<TargetResult> {
    let dry_run = ports.held.is_dry_run();
    let ledger = ports
        .store
        .load_ledger(&cfg.cluster_id, &cfg.namespace)
        .await;
    let ledger = &ledger;
    // Targets by index, not by reference: a future over items that borrow stays `Send` only for
    // some lifetimes, and an embedder spawns runs.
    crate::pipeline::in_order(0..targets.len(), ports.concurrency, |i| async move {
        let t = &targets[i];
        let outcome = match ledger {
            _ if ports.held.stopping() && !ports.held.lost() => TargetOutcome::NotStarted {
                reason: "the run was asked to stop (the next run collects it)".into(),
            },
            Ok(ledger) => {
                let records = [Some(ledger), recorded];
                let t = Target {
                    first: first_observed(t, records.into_iter().flatten(), ports.clock.now()),
                    ..t.clone()
                };
                collect(ports, cfg, &t, dry_run, Mode::Planned)
                    .await
                    .unwrap_or_else(|stopped| stopped)
            }
            Err(e) => failed(
                Step::Reread,
                format!("cannot read the observation ledger: {e}"),
            ),
        };
        let name = t
            .name
            .as_str()
            .map_or_else(|| t.name.to_string(), str::to_owned);
        TargetResult {
            name,
            uid: t.uid.clone(),
            outcome,
        }
    })
    .await
}

/// When retention of `t` may run from, if it has no `finishedAt`: the latest of the plan's first
/// observation and those `records` hold (the store's ledger, and a ledger file apply was given).
/// A plan cannot move the first observation earlier than recorded, nor supply one nothing
/// records (an unkeyed plan can be re-sealed by anyone, and `plan --now` records nothing): then
/// it is `now`, and the Pod is held until a plan records it and its retention has passed.
fn first_observed<'l>(
    t: &Target,
    records: impl Iterator<Item = &'l PreviousLedger>,
    now: f64,
) -> PyNum {
    let recorded = records
        .filter_map(|ledger| ledger.0.get(&t.uid))
        .filter_map(|entry| PyNum::from_json(&entry["first"]))
        .max_by(|a, b| a.seconds().total_cmp(&b.seconds()));
    match recorded {
        Some(first) if first.seconds() > t.first.seconds() => first,
        Some(_) => t.first,
        None => PyNum::Float(now),
    }
}

/// What binds a target while it is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A planned target: the planned resourceVersion, eligibility and retention.
    Planned,
    /// Recovery finishing a pinned Pod that is already being deleted: eligibility only
    /// (archiving it is better than losing it; it changed when it was pinned and deleted).
    Finish,
}

async fn get<C: Cluster>(
    cluster: &C,
    cfg: &PodConfig,
    name: &str,
    step: Step,
) -> Result<Option<Live>, TargetOutcome> {
    match cluster.get_pod(&cfg.namespace, name).await {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => Live::parse(&bytes, cfg.rules())
            .map(Some)
            .map_err(|e| failed(step, e)),
        Err(e) => Err(cluster_outcome(step, e)),
    }
}

/// `Err` with the outcome when the run lock is lost: nothing more is written.
fn check_lock<C, S, A, K>(p: &Ports<'_, C, S, A, K>, step: Step) -> Result<(), TargetOutcome> {
    halted(p.held, step)
}

/// `Err` with the outcome when `held`'s lock is lost: nothing more is written.
fn halted(held: Held<'_>, step: Step) -> Result<(), TargetOutcome> {
    if held.lost() {
        Err(failed(
            step,
            "the run lock was lost or the process is stopping; stopped before this write (the next run resumes)",
        ))
    } else {
        Ok(())
    }
}

/// The protocol for one target, one function per step. `Err` is the outcome of a step that
/// stopped it; either way the value is the target's outcome.
async fn collect<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    t: &Target,
    dry_run: bool,
    mode: Mode,
) -> Result<TargetOutcome, TargetOutcome> {
    let name = t.name.as_str().unwrap_or_default();
    let (pod, end, basis) = reread(p, cfg, t, mode).await?;
    check_lock(p, Step::Pin)?;
    let stored_rv = pod.resource_version();
    let pinned = pin(p, cfg, name, t, pod, dry_run).await?;
    let status = pinned.status();
    let doc = archive::document(&pinned.object["metadata"], &status, basis, end);
    if doc.len() > cfg.max_archive_bytes {
        return Ok(too_large(p, cfg, name, &pinned, doc.len(), dry_run).await);
    }
    let sha256 = archive::digest(doc.as_bytes());
    if dry_run {
        return Ok(dry_run_rest(p, cfg, name, &pinned, stored_rv, sha256, doc.len()).await);
    }
    check_lock(p, Step::Archive)?;
    let uri = match write_archive(p, cfg, t, &doc, &sha256).await {
        Ok(uri) => uri,
        Err(failure) => return Err(unpin_after(p, cfg, name, &pinned, failure).await),
    };
    let receipt = Receipt {
        cluster_id: cfg.cluster_id.clone(),
        namespace: cfg.namespace.clone(),
        uid: t.uid.clone(),
        name: name.to_owned(),
        uri: uri.clone(),
        sha256: sha256.clone(),
        bytes: doc.len() as u64,
        session: None,
    };
    check_lock(p, Step::Receipt)?;
    if let Err(e) = p.store.put_receipt(&receipt).await {
        let failure = failed(Step::Receipt, e.to_string());
        return Err(unpin_after(p, cfg, name, &pinned, failure).await);
    }
    let current = fence(p, cfg, name, t, &pinned, &receipt).await?;
    check_lock(p, Step::Delete)?;
    let collected = TargetOutcome::Collected {
        uri,
        sha256,
        bytes: doc.len(),
    };
    let Some(deleting) = delete(p, cfg, name, t, &current, &status).await? else {
        // Someone released the pin already: archived and receipted, so collected.
        return Ok(collected);
    };
    release_and_verify(p, cfg, name, t, &deleting).await?;
    Ok(collected)
}

/// Step 1: Re-read: the same Pod at the planned resourceVersion, still eligible, still past
/// retention; returns it with its anchor.
async fn reread<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    t: &Target,
    mode: Mode,
) -> Result<(Live, PyNum, Basis), TargetOutcome> {
    let name = t.name.as_str().unwrap_or_default();
    let pod = match get(p.cluster, cfg, name, Step::Reread).await? {
        None => return Err(skipped(Step::Reread, "the Pod is gone")),
        Some(pod) if pod.uid() != t.uid => {
            return Err(skipped(Step::Reread, "another Pod has this name now"));
        }
        Some(pod) => pod,
    };
    if mode == Mode::Planned && pod.resource_version() != t.resource_version {
        return Err(TargetOutcome::Changed {
            step: Step::Reread,
            message: format!(
                "resourceVersion {} when planned, {} now: the Pod changed since the plan and is left alone; plan again",
                t.resource_version,
                pod.resource_version()
            ),
        });
    }
    if let Some(why) = pod.ineligible() {
        return Err(skipped(Step::Reread, why));
    }
    // A plan never targets a protected or excluded Pod; a forged one naming one at its current
    // resourceVersion is refused here, before anything is written.
    if let Some(spared) = spared(cfg, &pod) {
        return Err(skipped(Step::Reread, format!("{spared}: never collected")));
    }
    // No Pod is observed before it exists: a first observation recorded earlier than its
    // creationTimestamp (a ledger a plan for another instant wrote) counts from its creation.
    let created = pod.meta("creationTimestamp").as_str();
    let first = match created.and_then(|c| crate::isotime::parse_timestamp(c).ok()) {
        Some(created) if created > t.first.seconds() => PyNum::Float(created),
        _ => t.first,
    };
    let (end, basis) = anchor(&pod, first).map_err(|e| failed(Step::Reread, e))?;
    if mode == Mode::Planned && end.seconds() > p.clock.now() - f64::from(cfg.retention_seconds) {
        return Err(skipped(
            Step::Reread,
            format!(
                "retention has not passed: anchored at {} ({}{})",
                crate::isotime::format_timestamp(end.seconds()),
                basis.as_str(),
                match basis {
                    Basis::FinishedAt => "",
                    Basis::ObservedFailed => {
                        "; the first observation recorded in the store or the ledger given, \
                         never before its creation, else now"
                    }
                }
            ),
        ));
    }
    Ok((pod, end, basis))
}

/// Whether `pod` is protected or excluded (the protect label, the exclude selector): never
/// archived or collected.
fn spared(cfg: &PodConfig, pod: &Live) -> Option<&'static str> {
    let labels = pod.facts.meta.as_ref().ok()?.labels();
    cfg.spared(labels).map(|s| s.as_str())
}

/// The anchor of an eligible Pod: its latest `finishedAt`, or `first`.
fn anchor(pod: &Live, first: PyNum) -> Result<(PyNum, Basis), String> {
    match pod::assess(&pod.facts) {
        Ok(Ok(e)) => e
            .anchor(first)
            .map_err(|bad| format!("{}: {}", bad.field, bad.problem)),
        _ => Err("no longer eligible".into()),
    }
}

/// Step 2: Pin (fenced on the planned uid and resourceVersion), then read it back: the same uid,
/// eligible, finalizers exactly the pin.
async fn pin<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    t: &Target,
    pod: Live,
    dry_run: bool,
) -> Result<Live, TargetOutcome> {
    // The labels it was judged by (the pin patch tests the resourceVersion they were read at).
    let judged = pod.meta("labels").clone();
    let pinned = if pod.unpinned() {
        let patch = pin_patch(&t.uid, &pod.resource_version(), &cfg.pin_finalizer);
        let answer = p
            .cluster
            .patch_pod(&cfg.namespace, name, &patch, dry_run)
            .await
            .map_err(|e| cluster_outcome(Step::Pin, e))?;
        if dry_run {
            // A dry-run patch is not stored: its answer is what a read would show.
            Live::parse(&answer, cfg.rules()).map_err(|e| failed(Step::Pin, e))?
        } else {
            get(p.cluster, cfg, name, Step::Pin)
                .await?
                .ok_or_else(|| failed(Step::Pin, "the pinned Pod is gone"))?
        }
    } else {
        pod
    };
    let invalid = || failed(Step::Pin, "identity pin invalid after pinning");
    if pinned.uid() != t.uid || !pinned.pinned(&cfg.pin_finalizer) {
        return Err(invalid());
    }
    if !dry_run {
        relabelled(p, cfg, name, &pinned, &judged, Step::Pin).await?;
    }
    if pinned.ineligible().is_some() {
        return Err(invalid());
    }
    Ok(pinned)
}

/// `Err` ([`TargetOutcome::Changed`] at `step`) when `now`'s labels are not `judged` (the labels the
/// Pod was judged by): someone labelled it (protected it, excluded it, took its opt-in away,
/// anything) after it was pinned. The labels decide whether a Pod may be collected at all, so the
/// Pod archived and deleted carries the labels it was judged by; the pin is released at once
/// (fenced on what `now` shows) unless the Pod is being deleted, when recovery judges it again.
/// Other metadata (annotations, which controllers write in reply to the pin) may change: the
/// archive keeps the labels and the status as judged.
async fn relabelled<C: Cluster, S, A, K>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    now: &Live,
    judged: &Value,
    step: Step,
) -> Result<(), TargetOutcome> {
    if now.meta("labels") == judged {
        return Ok(());
    }
    let message = "its labels changed after it was pinned: left alone";
    if now.deleting() {
        let message = format!("{message}; being deleted, the next run judges it again");
        return Err(TargetOutcome::Changed { step, message });
    }
    check_lock(p, Step::Release)?;
    match release(p.cluster, cfg, &PinnedPod::of(name, now), false, message).await {
        TargetOutcome::Released { .. } => Err(TargetOutcome::Changed {
            step,
            message: format!("{message}, the pin released"),
        }),
        failed => Err(failed),
    }
}

/// The pinned Pod's archive is over the ceiling (pinning adds a finalizer and a
/// `managedFields` entry): release the pin, fenced, and delete nothing.
async fn too_large<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    pinned: &Live,
    bytes: usize,
    dry_run: bool,
) -> TargetOutcome {
    let too_large = TargetOutcome::TooLarge {
        bytes,
        max: cfg.max_archive_bytes,
    };
    if dry_run {
        return too_large;
    }
    if let Err(stopped) = check_lock(p, Step::Release) {
        return stopped;
    }
    let patch = release_patch(
        pinned.uid(),
        &pinned.resource_version(),
        &[json!(cfg.pin_finalizer)],
        &cfg.pin_finalizer,
    );
    match p
        .cluster
        .patch_pod(&cfg.namespace, name, &patch, false)
        .await
    {
        Ok(_) => too_large,
        Err(e) => cluster_outcome(Step::Release, e),
    }
}

/// Step 3: The archive written, then read back: hash and uid checked.
async fn write_archive<C, S, A: ArchiveSink, K>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    t: &Target,
    doc: &str,
    sha256: &str,
) -> Result<String, TargetOutcome> {
    let key = ArchiveKey {
        cluster_id: cfg.cluster_id.clone(),
        namespace: cfg.namespace.clone(),
        uid: t.uid.clone(),
    };
    let uri = p
        .sink
        .write(&key, doc.as_bytes())
        .await
        .map_err(|e| failed(Step::Archive, e.to_string()))?;
    verify_archive(p.sink, &uri, sha256, &t.uid)
        .await
        .map_err(|e| failed(Step::VerifyArchive, e))?;
    Ok(uri)
}

/// A target whose archive or receipt could not be written: its pin is released at once (fenced
/// on the Pod as pinned), so no pin outlives a sink or store that fails, and the next run pins
/// it again. A pinned Pod being deleted keeps its pin: its archive must still be written.
async fn unpin_after<C: Cluster, S, A, K>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    pinned: &Live,
    failure: TargetOutcome,
) -> TargetOutcome {
    let TargetOutcome::Failed { step, error } = failure else {
        return failure;
    };
    let kept = |why: &str| TargetOutcome::Failed {
        step,
        error: format!("{error}; {why}"),
    };
    if pinned.deleting() {
        return kept("the pin stays on this Pod being deleted until its archive is written");
    }
    if p.held.lost() {
        return kept("the pin stays (the run lock was lost); the next run releases it");
    }
    let reason = "archive not written";
    match release(p.cluster, cfg, &PinnedPod::of(name, pinned), false, reason).await {
        TargetOutcome::Released { .. } => kept("pin released; the next run pins it again"),
        TargetOutcome::Skipped { reason, .. } => kept(&reason),
        TargetOutcome::Changed { message, .. } => kept(&format!(
            "the pin stays (the Pod changed since it was pinned: {message}); the next run releases it"
        )),
        TargetOutcome::Failed { error: why, .. } => kept(&format!("the pin stays: {why}")),
        other => kept(&format!("the pin stays ({other:?})")),
    }
}

/// Step 5: The pre-delete fence: the same eligible pinned Pod, its status as archived, nothing
/// else changed since it was pinned (`pinned`, the Pod archived), the receipt and the archive as
/// written.
async fn fence<C: Cluster, S: Store, A: ArchiveSink, K>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    t: &Target,
    pinned: &Live,
    receipt: &Receipt,
) -> Result<Live, TargetOutcome> {
    let current = get(p.cluster, cfg, name, Step::Fence)
        .await?
        .ok_or_else(|| failed(Step::Fence, "the pinned Pod is gone"))?;
    let invalid = || {
        failed(
            Step::Fence,
            "pre-delete fence invalid: not the same eligible pinned Pod",
        )
    };
    if current.uid() != t.uid || !current.pinned(&cfg.pin_finalizer) {
        return Err(invalid());
    }
    relabelled(p, cfg, name, &current, pinned.meta("labels"), Step::Fence).await?;
    if current.ineligible().is_some() {
        return Err(invalid());
    }
    if current.status() != pinned.status() {
        return Err(skipped(
            Step::Fence,
            "the status changed after the archive; archived again next run",
        ));
    }
    match p.store.get_receipt(&cfg.cluster_id, &t.uid).await {
        Ok(Some(r)) if r.sha256 == receipt.sha256 && r.uri == receipt.uri => {}
        Ok(_) => return Err(failed(Step::Fence, "archive receipt readback invalid")),
        Err(e) => return Err(failed(Step::Fence, e.to_string())),
    }
    verify_archive(p.sink, &receipt.uri, &receipt.sha256, &t.uid)
        .await
        .map_err(|e| failed(Step::Fence, e))?;
    Ok(current)
}

/// Step 6: The delete, fenced on the uid and the resourceVersion the fence saw; then: deleting, pin
/// still on, status still as archived. `None` when the Pod is gone already.
async fn delete<C: Cluster, S, A, K>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    t: &Target,
    current: &Live,
    status: &Value,
) -> Result<Option<Live>, TargetOutcome> {
    let pre = Preconditions {
        uid: t.uid.clone(),
        resource_version: current.resource_version(),
    };
    p.cluster
        .delete_pod(&cfg.namespace, name, &pre, false)
        .await
        .map_err(|e| cluster_outcome(Step::Delete, e))?;
    let Some(deleting) = get(p.cluster, cfg, name, Step::Delete).await? else {
        return Ok(None);
    };
    if deleting.uid() != t.uid || !deleting.deleting() || !deleting.pinned(&cfg.pin_finalizer) {
        return Err(failed(Step::Delete, "delete did not mark the pinned Pod"));
    }
    if deleting.status() != *status {
        // Released now, the Pod would go with a stale archive: recovery archives it again.
        return Err(skipped(
            Step::Delete,
            "the status changed after the delete; archived again and released next run",
        ));
    }
    Ok(Some(deleting))
}

/// Step 7: The release, fenced on uid, resourceVersion, phase and the finalizer list; then the uid
/// must be gone.
async fn release_and_verify<C: Cluster, S, A, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    t: &Target,
    deleting: &Live,
) -> Result<(), TargetOutcome> {
    let pin = cfg.pin_finalizer.as_str();
    check_lock(p, Step::Release)?;
    let patch = release_patch(&t.uid, &deleting.resource_version(), &[json!(pin)], pin);
    p.cluster
        .patch_pod(&cfg.namespace, name, &patch, false)
        .await
        .map_err(|e| cluster_outcome(Step::Release, e))?;
    verify_gone(p, cfg, name, t).await
}

/// The uid must be gone: checked at once (the API server removes a Pod on the patch that
/// releases its last finalizer), then again after waits that double from
/// [`FIRST_VERIFY_WAIT_SECONDS`], for at most [`SETTLE_SECONDS`] in all (the flow's `settle`).
///
/// Written out rather than with a retry crate (`backon`): gc-core reads no clock and sleeps only
/// through the [`Clock`] port, which the tests drive; a crate's sleeper would be that port again,
/// around the same doubling capped by the total.
async fn verify_gone<C: Cluster, S, A, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    name: &str,
    t: &Target,
) -> Result<(), TargetOutcome> {
    let (mut waited, mut wait) = (0.0, FIRST_VERIFY_WAIT_SECONDS);
    loop {
        match get(p.cluster, cfg, name, Step::VerifyGone).await? {
            Some(pod) if pod.uid() == t.uid => {}
            _ => return Ok(()),
        }
        if waited >= SETTLE_SECONDS {
            return Err(failed(
                Step::VerifyGone,
                format!("the archived Pod's uid remains after {waited} s"),
            ));
        }
        let step = wait.min(SETTLE_SECONDS - waited);
        p.clock.sleep(step).await;
        waited += step;
        wait *= 2.0;
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
) -> TargetOutcome {
    let pre = Preconditions {
        uid: pinned.uid().to_owned(),
        resource_version: stored_rv,
    };
    match p.cluster.delete_pod(&cfg.namespace, name, &pre, true).await {
        Err(e) => cluster_outcome(Step::Delete, e),
        Ok(_) => TargetOutcome::WouldCollect { sha256, bytes },
    }
}

/// A Pod that carries the pin finalizer, as a metadata-only list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PinnedPod {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.finalizers`, in order.
    pub finalizers: Vec<Value>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl PinnedPod {
    /// `live`, named `name`, as a pin list would show it.
    fn of(name: &str, live: &Live) -> Self {
        Self {
            name: name.to_owned(),
            uid: live.uid().to_owned(),
            resource_version: live.resource_version(),
            finalizers: live
                .meta("finalizers")
                .as_array()
                .cloned()
                .unwrap_or_default(),
            deleting: live.deleting(),
        }
    }
}

/// Every Pod of the namespace that carries the pin finalizer, whatever its labels or phase:
/// a metadata-only list, filtered here.
///
/// # Errors
/// [`ClusterError`] when the Pods cannot be listed (an expired continue token restarts the list,
/// three times at most).
pub async fn pinned_pods<C: Cluster>(
    cluster: &C,
    cfg: &PodConfig,
) -> Result<Vec<PinnedPod>, ClusterError> {
    crate::pages::collect(
        |token: Option<String>| async move {
            cluster
                .list_pod_metadata(&cfg.namespace, 500, token.as_deref())
                .await
        },
        |item| {
            let meta = &item["metadata"];
            let finalizers = meta["finalizers"].as_array().cloned().unwrap_or_default();
            if !finalizers.iter().any(|f| f == cfg.pin_finalizer.as_str()) {
                return Ok(None);
            }
            let text = |key: &str| meta[key].as_str().unwrap_or_default().to_owned();
            Ok(Some(PinnedPod {
                name: text("name"),
                uid: text("uid"),
                resource_version: text("resourceVersion"),
                finalizers,
                deleting: !meta["deletionTimestamp"].is_null(),
            }))
        },
    )
    .await
}

/// Finishes or releases every pin in the namespace, before any plan is acted on: a run that
/// stopped mid-protocol leaves no pin behind, whatever the Pod's labels now. A pinned Pod being
/// deleted is archived (as it is now; retention no longer matters: it is going) and released,
/// or released without an archive when it is no longer eligible; any other pin is released
/// with a fenced patch, and a later plan decides about the Pod afresh.
///
/// # Errors
/// [`ClusterError`] when the Pods cannot be listed; per-Pod outcomes are in the results.
pub async fn recover<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
) -> Result<Vec<TargetResult>, ClusterError> {
    let dry_run = p.held.is_dry_run();
    let mut results = Vec::new();
    for pod in pinned_pods(p.cluster, cfg).await? {
        let outcome = match check_lock(p, Step::Release) {
            Err(o) => o,
            Ok(()) if pod.deleting => finish(p, cfg, &pod, dry_run).await,
            Ok(()) => {
                release(
                    p.cluster,
                    cfg,
                    &pod,
                    dry_run,
                    "pin released: not being deleted; a later plan decides again",
                )
                .await
            }
        };
        results.push(TargetResult {
            name: pod.name,
            uid: pod.uid,
            outcome,
        });
    }
    Ok(results)
}

/// Releases (fenced) every pin in the namespace without archiving anything, when a run cannot
/// collect there: its sink or store is unusable (`keep_deleting`: a pinned Pod being deleted
/// keeps its pin, as its archive must still be written, and is reported failed), or the
/// namespace is outside the run's selection (every pin released, none collected). A release
/// that meets a change (the Pod written since it was listed) is tried again at what a new list
/// reads, up to three passes; one still `Changed` after them is left for the next run. Writes
/// nothing once `held`'s lock is lost; a dry run's sends every release in server-side dry run.
///
/// # Errors
/// [`ClusterError`] when the Pods cannot be listed; per-Pod outcomes are in the results.
pub async fn release_pins<C: Cluster>(
    cluster: &C,
    cfg: &PodConfig,
    held: Held<'_>,
    why: &str,
    keep_deleting: bool,
) -> Result<Vec<TargetResult>, ClusterError> {
    let dry_run = held.is_dry_run();
    let mut results: Vec<TargetResult> = Vec::new();
    // The uids whose release met a change (someone wrote the Pod since it was listed): listed
    // again and released at what is read then, a few times, so that a Pod a kubelet or a
    // controller keeps writing is not left pinned until the next run.
    let mut again: Option<Vec<String>> = None;
    for _ in 0..RELEASE_PASSES {
        let mut changed = Vec::new();
        for pod in pinned_pods(cluster, cfg).await? {
            if again.as_ref().is_some_and(|uids| !uids.contains(&pod.uid)) {
                continue;
            }
            let outcome = match halted(held, Step::Release) {
                Err(o) => o,
                Ok(()) if pod.deleting && keep_deleting => failed(
                    Step::Archive,
                    format!(
                        "{why}: the pin stays on this Pod being deleted until its archive is \
                         written"
                    ),
                ),
                Ok(()) => {
                    let reason = format!("pin released without an archive: {why}");
                    release(cluster, cfg, &pod, dry_run, &reason).await
                }
            };
            if matches!(outcome, TargetOutcome::Changed { .. }) {
                changed.push(pod.uid.clone());
            }
            match results.iter_mut().find(|r| r.uid == pod.uid) {
                Some(r) => r.outcome = outcome,
                None => results.push(TargetResult {
                    name: pod.name,
                    uid: pod.uid,
                    outcome,
                }),
            }
        }
        if changed.is_empty() {
            break;
        }
        again = Some(changed);
    }
    Ok(results)
}

/// How many times [`release_pins`] lists and releases a pin whose release met a change.
const RELEASE_PASSES: usize = 3;

/// A fenced release of `pod`'s pin, reported as [`TargetOutcome::Released`].
async fn release<C: Cluster>(
    cluster: &C,
    cfg: &PodConfig,
    pod: &PinnedPod,
    dry_run: bool,
    reason: &str,
) -> TargetOutcome {
    let patch = release_patch(
        &pod.uid,
        &pod.resource_version,
        &pod.finalizers,
        &cfg.pin_finalizer,
    );
    match cluster
        .patch_pod(&cfg.namespace, &pod.name, &patch, dry_run)
        .await
    {
        Ok(_) => TargetOutcome::Released {
            reason: reason.into(),
        },
        Err(e) => cluster_outcome(Step::Release, e),
    }
}

/// A pinned Pod being deleted: archived and released when it is still eligible, else released
/// (someone asked for its deletion; the pin must not hold it forever).
async fn finish<C: Cluster, S: Store, A: ArchiveSink, K: Clock>(
    p: &Ports<'_, C, S, A, K>,
    cfg: &PodConfig,
    pod: &PinnedPod,
    dry_run: bool,
) -> TargetOutcome {
    let live = match get(p.cluster, cfg, &pod.name, Step::Reread).await {
        Err(o) => return o,
        Ok(None) => return skipped(Step::Reread, "the Pod is gone"),
        Ok(Some(live)) if live.uid() != pod.uid => {
            return skipped(Step::Reread, "another Pod has this name now");
        }
        Ok(Some(live)) => live,
    };
    // Protected or excluded since it was pinned: never archived, and the pin must not hold a
    // Pod someone is deleting.
    let spared = || spared(cfg, &live).map(|s| format!("{s}: never collected"));
    if let Some(why) = live.ineligible().or_else(spared) {
        let current = PinnedPod::of(&pod.name, &live);
        let reason = format!("pin released without an archive: being deleted and {why}");
        if let Err(stopped) = check_lock(p, Step::Release) {
            return stopped;
        }
        return release(p.cluster, cfg, &current, dry_run, &reason).await;
    }
    let now = PyNum::Float(p.clock.now());
    let t = Target {
        name: Value::String(pod.name.clone()),
        uid: pod.uid.clone(),
        first: now,
        basis: Basis::ObservedFailed,
        end: now,
        resource_version: live.resource_version(),
        archive_bytes: 0,
    };
    collect(p, cfg, &t, dry_run, Mode::Finish)
        .await
        .unwrap_or_else(|stopped| stopped)
}

async fn verify_archive<A: ArchiveSink>(
    sink: &A,
    uri: &str,
    sha256: &str,
    uid: &str,
) -> Result<(), String> {
    let back = sink.read(uri).await.map_err(|e| e.to_string())?;
    match archive::mismatch(&back, sha256, None, uid) {
        Some(problem) => Err(format!("archive {uri} {problem}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
