//! A deleted claim's volume, kept for a while: before a run deletes a PersistentVolumeClaim bound
//! to a PersistentVolume whose reclaim policy is `Delete`, it sets that volume to `Retain` and
//! records the policy it had ([`plan_keep`], [`keep`]: the claim's receipt names the volume before
//! it is marked); runs review every volume gc kept, proven by those receipts ([`expire`]), and give
//! it its policy back once the window since its claim's last delete passed, and Kubernetes
//! reclaims it as it would have at the delete. A restore moves a kept volume to the claim created
//! again ([`kept_for`], [`rebind`]); once that claim is bound, the restore or the next review
//! gives the policy back ([`claimed_again`], [`expire`]). What each event does to a volume is
//! decided in one place, [`lifecycle::next`]; this module reads volumes and sends the writes it
//! names.
//!
//! Every write is a JSON patch whose `test` ops fence it on the volume as it was read: its uid and
//! resourceVersion, its claim, its policy, and gc's label where gc wrote one.

pub mod lifecycle;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ports::{ClusterError, RetainedVolume, Store, StoreError, Volumes};
use crate::sessions::deletes::{DeleteResult, unsent};
use crate::sessions::{Judged, Resource, SessionConfig, SessionDecision};
use lifecycle::{Action, Event, State, Window, next, state_of};

/// The label on every volume gc retained: its value is the cluster id (the runs of that cluster
/// list the volumes by it).
pub const RETAINED_LABEL: &str = "gc.example.com/retained";
/// The annotation recording what [`Retained`] says.
pub const RETAINED_ANNOTATION: &str = "gc.example.com/retained";

/// The annotation's value: the claim the volume was retained for, its policy before, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retained {
    /// The reclaim policy before (`Delete`).
    pub policy: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub claim: String,
    /// The claim's uid.
    pub claim_uid: String,
    /// The session id the claim was labelled with.
    pub session: Option<String>,
    /// When its window starts (seconds since the epoch): the claim's last delete by gc (its keep,
    /// or its renewal when deleted again), or the restore that moved the volume.
    pub at: f64,
    /// The uid of the claim `restore` created again and bound the volume to, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_to: Option<String>,
    /// The window it is kept for, in days, as the run that kept it had it: the window of a run
    /// that reviews it from outside the namespace it was kept in (whose own setting may differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
    /// When a review first found the claim `restored_to` names gone, not bound to the volume
    /// (deleted before it was): the window starts then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_at: Option<f64>,
}

/// `/metadata/{field}/{key}` added to `meta`: the whole map when it has none yet.
fn add_to(meta: &Value, field: &str, key: &str, value: &str) -> Value {
    if meta[field].is_object() {
        let key = key.replace('~', "~0").replace('/', "~1");
        json!({"op": "add", "path": format!("/metadata/{field}/{key}"), "value": value})
    } else {
        json!({"op": "add", "path": format!("/metadata/{field}"), "value": {key: value}})
    }
}

/// `/metadata/{field}/{key}` as a JSON pointer.
fn pointer(field: &str, key: &str) -> String {
    format!(
        "/metadata/{field}/{}",
        key.replace('~', "~0").replace('/', "~1")
    )
}

/// The `test` ops fencing a write on `volume` as it was read: its uid and resourceVersion, and
/// its claim's uid and its phase when it has them.
fn fence(volume: &Value) -> Vec<Value> {
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/uid", "value": volume["metadata"]["uid"]}),
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": volume["metadata"]["resourceVersion"]}),
    ];
    let claimed = &volume["spec"]["claimRef"]["uid"];
    if claimed.is_string() {
        ops.push(json!({"op": "test", "path": "/spec/claimRef/uid", "value": claimed}));
    }
    let phase = &volume["status"]["phase"];
    if phase.is_string() {
        ops.push(json!({"op": "test", "path": "/status/phase", "value": phase}));
    }
    ops
}

/// Reads the volume `name`: `None` when it does not exist.
async fn read(volumes: &dyn Volumes, name: &str) -> Result<Option<Value>, String> {
    let text = volumes
        .get_volume(name)
        .await
        .map_err(|e| format!("cannot read its volume {name}: {e}"))?;
    text.map(|text| {
        serde_json::from_slice(&text).map_err(|e| format!("volume {name} is not JSON: {e}"))
    })
    .transpose()
}

/// Sends `patch` to the volume `name`: what came of it as the result of a write.
async fn send(volumes: &dyn Volumes, name: &str, patch: &Value, dry_run: bool) -> DeleteResult {
    match volumes
        .patch_volume(name, patch.to_string().as_bytes(), dry_run)
        .await
    {
        Ok(_) if dry_run => DeleteResult::WouldDelete,
        Ok(_) => DeleteResult::Deleted,
        Err(ClusterError::Changed { .. } | ClusterError::NotFound(_)) => DeleteResult::Changed,
        Err(e) => DeleteResult::Failed(e.to_string()),
    }
}

/// The receipt in gc's store of the keep `record` claims for the volume `name`: the receipt of
/// its claim's delete (`record.claim_uid`, in `record.namespace`) naming this volume as kept. A
/// volume is gc's only with it: a label and record without one (copied, made up, another
/// install's) are never written to. Its `retained.policy` is the policy to give back, whatever
/// the record on the volume says.
///
/// # Errors
/// The store cannot be read: nothing is written then.
pub async fn keep_receipt(
    store: &dyn Store,
    cluster: &str,
    name: &str,
    record: &Retained,
) -> Result<Option<(RetainedVolume, f64)>, StoreError> {
    let receipt = store.get_receipt(cluster, &record.claim_uid).await?;
    Ok(receipt.and_then(|receipt| {
        let object = receipt
            .session
            .filter(|_| receipt.namespace == record.namespace)?;
        let at = crate::isotime::parse_timestamp(&object.run_at).unwrap_or(0.0);
        object
            .retained
            .filter(|kept| kept.name == name)
            .map(|kept| (kept, at))
    }))
}

/// A claim's volume about to be kept ([`plan_keep`]): what the claim's receipt records of it,
/// and the fenced patch that keeps it ([`keep`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Keeping {
    /// The volume and its policy before, as the claim's receipt records them.
    pub volume: RetainedVolume,
    patch: Value,
}

/// What keeps the volume of `claim` (the claim's whole object, about to be deleted): `Ok(None)`
/// when there is none to keep (unbound, bound to a volume that names another claim, a policy
/// other than `Delete` that gc did not set, or gc's label without the receipt of gc's keep:
/// [`keep_receipt`]); `Ok(Some)` with the patch that keeps it: newly ([`Action::Keep`]), or
/// again, its record renewed for this claim and its window started now ([`Action::Renew`]: a
/// claim a restore created and deleted again, or one whose earlier delete did not follow its
/// keep). Nothing is written: the claim's receipt records the volume first, then [`keep`] sends
/// the patch, so that every volume gc marks is named by a receipt.
///
/// # Errors
/// The result of the claim's delete, which must not be sent: `Failed` when the volume cannot be
/// read, or gc's receipt of an earlier keep cannot be.
pub async fn plan_keep(
    volumes: &dyn Volumes,
    store: &dyn Store,
    cfg: &SessionConfig,
    claim: &Value,
    resource: &Resource,
    now: f64,
) -> Result<Option<Keeping>, DeleteResult> {
    let failed = |why: String| DeleteResult::Failed(format!("not deleted: {why}"));
    let Some(name) = claim["spec"]["volumeName"]
        .as_str()
        .filter(|n| !n.is_empty())
    else {
        return Ok(None);
    };
    let Some(volume) = read(volumes, name).await.map_err(failed)? else {
        return Ok(None);
    };
    if volume["spec"]["claimRef"]["uid"] != resource.uid.as_str() {
        return Ok(None);
    }
    let meta = &volume["metadata"];
    let policy = &volume["spec"]["persistentVolumeReclaimPolicy"];
    // A volume whose policy is `Delete` is kept anew, whatever an old record on it says.
    let (state, record) = match state_of(&volume, &cfg.cluster_id) {
        _ if policy == "Delete" => (State::Unkept, None),
        (State::Unkept, _) | (_, None) => return Ok(None),
        (state, Some(record)) => {
            let receipt = keep_receipt(store, &cfg.cluster_id, name, &record).await;
            match receipt.map_err(|e| {
                failed(format!(
                    "cannot read gc's receipt of its volume {name}: {e}"
                ))
            })? {
                Some((kept, _)) => (state, Some(kept)),
                // gc's label without gc's receipt: not gc's to keep, left as it is (Retain).
                None => return Ok(None),
            }
        }
    };
    let original = record.map_or_else(|| "Delete".to_owned(), |kept| kept.policy);
    let record = Retained {
        policy: original.clone(),
        namespace: cfg.namespace.clone(),
        claim: resource.name.clone(),
        claim_uid: resource.uid.clone(),
        session: resource.session.clone(),
        at: now,
        restored_to: None,
        days: Some(cfg.retain_volume_days),
        gone_at: None,
    };
    let record = serde_json::to_string(&record).map_err(|e| failed(e.to_string()))?;
    let mut patch = fence(&volume);
    match next(state, Event::ClaimDeleted).0 {
        Action::Keep => patch.extend([
            json!({"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Delete"}),
            json!({"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}),
            add_to(meta, "labels", RETAINED_LABEL, &cfg.cluster_id),
            add_to(meta, "annotations", RETAINED_ANNOTATION, &record),
        ]),
        Action::Renew => patch.extend([
            json!({"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}),
            json!({"op": "test", "path": pointer("labels", RETAINED_LABEL), "value": cfg.cluster_id}),
            json!({"op": "replace", "path": pointer("annotations", RETAINED_ANNOTATION), "value": record}),
        ]),
        _ => return Ok(None),
    }
    Ok(Some(Keeping {
        volume: RetainedVolume {
            name: name.to_owned(),
            policy: original,
        },
        patch: Value::Array(patch),
    }))
}

/// Sends the patch of `keeping` ([`plan_keep`]), fenced on the volume as it was read; `stop` is
/// read first.
///
/// # Errors
/// The result of the claim's delete, which must not be sent: `Changed` when a fence held (leave
/// the claim for the next run), `Failed` when the patch is refused, what `stop` says when it is
/// set.
pub async fn keep(
    volumes: &dyn Volumes,
    keeping: &Keeping,
    stop: crate::lease::Held<'_>,
) -> Result<(), DeleteResult> {
    if let Some(unsent) = unsent(stop) {
        return Err(unsent);
    }
    let name = &keeping.volume.name;
    match send(volumes, name, &keeping.patch, stop.is_dry_run()).await {
        DeleteResult::Deleted | DeleteResult::WouldDelete => Ok(()),
        DeleteResult::Failed(e) => Err(DeleteResult::Failed(format!(
            "not deleted: cannot retain its volume {name}: {e}"
        ))),
        other => Err(other),
    }
}

/// Which kept volumes a namespace's run reviews ([`expire`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum VolumeReview {
    /// Those kept for claims of its own namespace.
    #[default]
    Own,
    /// Those of its own namespace and of every namespace but these (the other namespaces of the
    /// same run, which review their own): a namespace no run selects any longer (relabelled,
    /// excluded, deleted) does not strand what gc kept there.
    AllBut(Vec<String>),
}

impl VolumeReview {
    /// Whether a run of namespace `own` reviews the volumes kept for claims of `namespace`.
    #[must_use]
    pub fn covers(&self, own: &str, namespace: &str) -> bool {
        match self {
            Self::Own => namespace == own,
            Self::AllBut(others) => namespace == own || !others.iter().any(|o| o == namespace),
        }
    }
}

/// One kept volume reviewed: its judgement (whose reason names the claim it was kept for, and
/// its namespace), and the result of its patch when one was sent. Its audit line is the
/// reviewing run's (its namespace, its Events): the namespace it was kept in may be gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    /// What was decided, and why.
    pub judged: Judged,
    /// The result of its patch.
    pub result: Option<DeleteResult>,
}

/// Every volume of `cfg`'s cluster that gc kept for a claim of a namespace `cfg.volume_review`
/// covers, its keep proven by gc's receipt in `store` ([`keep_receipt`]), reviewed
/// ([`lifecycle::review`]) and acted on as [`lifecycle::next`] says: its policy given back (the
/// claim a restore created is bound to it, another claim took it, its window passed, or
/// retention is off: `retain_volume_days` 0), the claim a restore created found gone and noted,
/// or held. One line each, also for a volume that carries gc's label but no record that reads,
/// or no receipt of its keep (left alone, and said). `stop` is read before each write.
///
/// # Errors
/// When the volumes cannot be listed: nothing is written then.
pub async fn expire(
    volumes: &dyn Volumes,
    store: &dyn Store,
    cfg: &SessionConfig,
    now: f64,
    stop: crate::lease::Held<'_>,
) -> Result<Vec<Reviewed>, ClusterError> {
    let dry_run = stop.is_dry_run();
    let selector = format!("{RETAINED_LABEL}={}", cfg.cluster_id);
    let listed = crate::pages::collect(
        |token: Option<String>| {
            let selector = selector.clone();
            async move {
                volumes
                    .list_volumes(&selector, crate::pages::PAGE_SIZE, token.as_deref())
                    .await
            }
        },
        |item| Ok(Some(item.clone())),
    )
    .await?;
    let window = Window {
        days: cfg.retain_volume_days,
    };
    let mut reviewed = Vec::new();
    for volume in listed {
        let meta = &volume["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let (state, record) = state_of(&volume, &cfg.cluster_id);
        let mut resource = Resource {
            api_version: "v1".into(),
            kind: "PersistentVolume".into(),
            name: text(&meta["name"]),
            uid: text(&meta["uid"]),
            resource_version: text(&meta["resourceVersion"]),
            session: None,
            created: meta["creationTimestamp"].as_str().map(str::to_owned),
            deleting: !meta["deletionTimestamp"].is_null(),
        };
        let Some(record) = record.filter(|_| state != State::Unkept) else {
            let reason = format!(
                "labelled {RETAINED_LABEL}={} but its annotation {RETAINED_ANNOTATION} does not \
                 read: its policy before is unknown, left alone",
                cfg.cluster_id
            );
            if VolumeReview::Own != cfg.volume_review {
                reviewed.push(Reviewed {
                    judged: Judged {
                        resource,
                        decision: SessionDecision::Skipped {
                            reason,
                            spared: None,
                        },
                    },
                    result: None,
                });
            }
            continue;
        };
        if !cfg.volume_review.covers(&cfg.namespace, &record.namespace) {
            continue;
        }
        resource.session.clone_from(&record.session);
        // gc's own receipt of the keep, or nothing is written: a label and a record prove
        // nothing (anyone who may label a volume can copy them).
        let name = resource.name.clone();
        let receipt = match keep_receipt(store, &cfg.cluster_id, &name, &record).await {
            Ok(receipt) => receipt,
            Err(e) => {
                let reason = format!(
                    "labelled {RETAINED_LABEL}={} as kept for claim {}/{}, but gc's receipts \
                     cannot be read ({e}): left alone",
                    cfg.cluster_id, record.namespace, record.claim
                );
                let decision = SessionDecision::Skipped {
                    reason,
                    spared: None,
                };
                reviewed.push(Reviewed {
                    judged: Judged { resource, decision },
                    result: None,
                });
                continue;
            }
        };
        let state = lifecycle::proven(state, receipt.is_some());
        // What gc recorded wins over what the volume says: the policy before, and a window that
        // starts no earlier than the keep's run.
        let record = match receipt {
            Some((kept, at)) => Retained {
                policy: kept.policy,
                at: record.at.max(at),
                ..record
            },
            None => record,
        };
        // The run of its own namespace applies its own window (0: retention off); any other, the
        // window the volume was kept for.
        let window = match record.days {
            Some(days) if record.namespace != cfg.namespace => Window { days },
            _ => window,
        };
        let mut event = lifecycle::review(&volume, &record, window, now);
        if state == State::Restored
            && volume["status"]["phase"] != "Bound"
            && claim_gone(volumes, &volume, &record).await
        {
            event = Event::ClaimGone;
        }
        let (action, _) = next(state, event);
        let record = match action {
            Action::Note => Retained {
                gone_at: Some(now),
                ..record
            },
            _ => record,
        };
        let decision = decide(&volume, &record, (state, event), action, window, cfg);
        let cluster = &cfg.cluster_id;
        let result = match (action, unsent(stop)) {
            (Action::GiveBack, Some(unsent)) => Some(unsent),
            (Action::GiveBack, None) => {
                Some(give_back(volumes, &volume, &record.policy, cluster, dry_run).await)
            }
            // A note written is no result of its own (the volume is held); one that failed is.
            (Action::Note, None) => match note(volumes, &volume, &record, cluster, dry_run).await {
                failed @ DeleteResult::Failed(_) => Some(failed),
                _ => None,
            },
            _ => None,
        };
        reviewed.push(Reviewed {
            judged: Judged { resource, decision },
            result,
        });
    }
    Ok(reviewed)
}

/// The audit decision of a review of `volume` (kept as `record` says, in `state`): `event` seen,
/// `action` taken.
fn decide(
    volume: &Value,
    record: &Retained,
    (state, event): (State, Event),
    action: Action,
    window: Window,
    cfg: &SessionConfig,
) -> SessionDecision {
    let mut of_claim = format!(
        "retained for claim {}/{} (uid {})",
        record.namespace, record.claim, record.claim_uid
    );
    if record.namespace != cfg.namespace {
        of_claim.push_str(&format!(
            " (namespace {} is not among this run's: reviewed here)",
            record.namespace
        ));
    }
    let claim = &volume["spec"]["claimRef"];
    let phase = &volume["status"]["phase"];
    let policy = &record.policy;
    let restored = record
        .restored_to
        .as_deref()
        .map(|uid| format!("restored to claim uid {uid}"));
    let days = window.days;
    let reason = match (event, restored) {
        _ if state == State::Unproven => format!(
            "labelled {RETAINED_LABEL}={} as {of_claim}, but gc's store holds no receipt of that \
             claim's delete naming this volume kept: not kept by this gc, left alone",
            cfg.cluster_id
        ),
        (Event::ClaimGone | Event::WindowOpen, Some(restored))
            if action != Action::GiveBack
                && (state == State::Abandoned || event == Event::ClaimGone) =>
        {
            let since = record.gone_at.map(crate::isotime::format_timestamp);
            format!(
                "{of_claim}: {restored}, which is gone (deleted before it was bound; found gone \
                 {}): keeps Retain for --volume-retention {days}d from then",
                since.unwrap_or_default()
            )
        }
        (Event::Bound, Some(restored)) => {
            format!("{of_claim}: {restored}, bound: reclaim policy {policy} given back")
        }
        (Event::ForeignClaim, _) => format!(
            "{of_claim}: taken by claim {}/{} (uid {}): gc's record removed, reclaim policy \
             {policy} given back",
            claim["namespace"].as_str().unwrap_or_default(),
            claim["name"].as_str().unwrap_or_default(),
            claim["uid"].as_str().unwrap_or_default(),
        ),
        (Event::RetentionOff, _) => format!(
            "{of_claim}: volumes are kept no longer (--volume-retention 0d): reclaim policy \
             {policy} given back"
        ),
        (Event::WindowPassed, _) => format!(
            "{of_claim} over --volume-retention {days}d ago: reclaim policy {policy} given back"
        ),
        (Event::WindowOpen, Some(restored)) => format!(
            "{of_claim}: {restored}, not bound yet (phase {phase}): keeps Retain for \
             --volume-retention {days}d"
        ),
        (Event::WindowOpen, None) => {
            format!("{of_claim}: kept for --volume-retention {days}d")
        }
        (event, _) => format!("{of_claim}: {event:?} does not apply: left alone"),
    };
    match action {
        Action::GiveBack => SessionDecision::Delete { reason },
        Action::Hold | Action::Note => SessionDecision::Held {
            reason,
            until: Window::start(volume, record) + window.seconds(),
        },
        _ => SessionDecision::Skipped {
            reason,
            spared: None,
        },
    }
}

/// Whether the claim a restore moved `volume` to (`record.restored_to`, as its claimRef names
/// it) is gone: no claim of that name, or one of another uid. A claim that cannot be read is
/// taken as there (the volume keeps its window from its restore).
async fn claim_gone(volumes: &dyn Volumes, volume: &Value, record: &Retained) -> bool {
    let claim = &volume["spec"]["claimRef"];
    let (Some(namespace), Some(name)) = (claim["namespace"].as_str(), claim["name"].as_str())
    else {
        return false;
    };
    if claim["uid"].as_str() != record.restored_to.as_deref() {
        return false;
    }
    match volumes.get_claim(namespace, name).await {
        Ok(None) => true,
        Ok(Some(text)) => serde_json::from_slice::<Value>(&text)
            .is_ok_and(|c| c["metadata"]["uid"].as_str() != record.restored_to.as_deref()),
        Err(_) => false,
    }
}

/// The fenced patch that writes `record` (noting when the claim a restore created was found
/// gone) on the kept `volume`, fenced as [`give_back`] is.
async fn note(
    volumes: &dyn Volumes,
    volume: &Value,
    record: &Retained,
    cluster: &str,
    dry_run: bool,
) -> DeleteResult {
    let Ok(text) = serde_json::to_string(record) else {
        return DeleteResult::Failed("gc's record does not serialize".into());
    };
    let mut patch = fence(volume);
    patch.extend([
        json!({"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}),
        json!({"op": "test", "path": pointer("labels", RETAINED_LABEL), "value": cluster}),
        json!({"op": "replace", "path": pointer("annotations", RETAINED_ANNOTATION), "value": text}),
    ]);
    let name = volume["metadata"]["name"].as_str().unwrap_or_default();
    send(volumes, name, &Value::Array(patch), dry_run).await
}

/// The fenced patch that gives `volume` back its `policy` and drops gc's label and annotation,
/// fenced on the volume as it was read ([`fence`]), `Retain` and gc's label of `cluster`.
async fn give_back(
    volumes: &dyn Volumes,
    volume: &Value,
    policy: &str,
    cluster: &str,
    dry_run: bool,
) -> DeleteResult {
    let (label, annotation) = (
        pointer("labels", RETAINED_LABEL),
        pointer("annotations", RETAINED_ANNOTATION),
    );
    let mut patch = fence(volume);
    patch.extend([
        json!({"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"}),
        json!({"op": "test", "path": label, "value": cluster}),
        json!({"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": policy}),
        json!({"op": "remove", "path": label}),
        json!({"op": "remove", "path": annotation}),
    ]);
    let name = volume["metadata"]["name"].as_str().unwrap_or_default();
    send(volumes, name, &Value::Array(patch), dry_run).await
}

/// Why a claim is not created again on its kept volume ([`kept_for`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotKept {
    /// The volume still shows bound to the deleted claim: Kubernetes has not released it yet (a
    /// restore waits for it).
    NotReleased(String),
    /// Anything else: gone, claimed by another claim, no longer gc's for this claim, restored
    /// already, unreadable.
    Not(String),
}

impl std::fmt::Display for NotKept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotReleased(why) | Self::Not(why) => f.write_str(why),
        }
    }
}

/// The volume `name` as it was kept for the deleted claim `claim_uid` of `cluster`: gc's label
/// and a record naming that claim, still claimed by it and no longer bound to it; with what its
/// record says.
///
/// # Errors
/// Why it is not (gone, claimed by another claim, restored already, not yet released): a claim is
/// then not created again on it.
pub async fn kept_for(
    volumes: &dyn Volumes,
    name: &str,
    claim_uid: &str,
    cluster: &str,
) -> Result<(Value, Retained), NotKept> {
    let not = NotKept::Not;
    let volume = read(volumes, name)
        .await
        .map_err(not)?
        .ok_or_else(|| not(format!("its volume {name} is gone")))?;
    let (mut state, record) = state_of(&volume, cluster);
    let claimed = volume["spec"]["claimRef"]["uid"].as_str().unwrap_or("");
    let phase = &volume["status"]["phase"];
    // The claim a restore created, gone before it was bound (no review has said so yet): it
    // stands for the claim the volume was kept for, as once a review noted it.
    if let (State::Restored, Some(r)) = (state, &record)
        && phase != "Bound"
        && claim_gone(volumes, &volume, r).await
    {
        state = State::Abandoned;
    }
    match (next(state, Event::ClaimRestored).0, record) {
        (Action::Move, Some(record)) if record.claim_uid == claim_uid => {
            // The claim a restore made and that is gone again (`state_of`) stands for it.
            if claimed != claim_uid && record.restored_to.as_deref() != Some(claimed) {
                let other = &volume["spec"]["claimRef"];
                return Err(not(format!(
                    "its volume {name} is claimed by another claim, {}/{} (uid {claimed}, phase \
                     {phase})",
                    other["namespace"].as_str().unwrap_or_default(),
                    other["name"].as_str().unwrap_or_default(),
                )));
            }
            if phase == "Bound" {
                return Err(NotKept::NotReleased(format!(
                    "its volume {name} still shows bound to the deleted claim (uid {claim_uid}): \
                     Kubernetes has not released it yet"
                )));
            }
            Ok((volume, record))
        }
        (Action::Move, Some(record)) => Err(not(format!(
            "its volume {name} is kept by gc for another claim (uid {}) now",
            record.claim_uid
        ))),
        (_, Some(record)) => Err(not(format!(
            "its volume {name} was restored already, to claim uid {}",
            record.restored_to.unwrap_or_default()
        ))),
        (_, None) => Err(not(format!(
            "its volume {name} is no longer kept by gc for this claim (phase {phase})"
        ))),
    }
}

/// Moves the kept `volume` ([`kept_for`]) to the claim created again (`claim`, uid `new_uid`, in
/// the namespace it was kept in), fenced on the volume as read; its record says so, and its
/// window starts again at `now`. Its policy stays `Retain` until that claim is bound
/// ([`claimed_again`]).
///
/// # Errors
/// The patch refused, or a fence that held (the volume changed).
pub async fn rebind(
    volumes: &dyn Volumes,
    volume: &Value,
    mut record: Retained,
    claim: &str,
    new_uid: &str,
    now: f64,
    dry_run: bool,
) -> Result<(), String> {
    let name = volume["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = record.namespace.clone();
    record.restored_to = Some(new_uid.to_owned());
    record.at = now;
    record.gone_at = None;
    let note = serde_json::to_string(&record).map_err(|e| e.to_string())?;
    let mut patch = fence(volume);
    patch.extend([
        json!({"op": "replace", "path": "/spec/claimRef", "value": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": namespace, "name": claim, "uid": new_uid,
        }}),
        json!({"op": "replace", "path": pointer("annotations", RETAINED_ANNOTATION), "value": note}),
    ]);
    match send(volumes, name, &Value::Array(patch), dry_run).await {
        DeleteResult::Deleted | DeleteResult::WouldDelete => Ok(()),
        DeleteResult::Changed => Err(format!(
            "cannot bind its volume {name} to the new claim: it changed since it was read"
        )),
        other => Err(format!(
            "cannot bind its volume {name} to the new claim: {other}"
        )),
    }
}

/// What [`claimed_again`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimedAgain {
    /// Bound to the claim created again: its policy given back (or, in a dry run, would be).
    GivenBack,
    /// Still gc's for that claim, not bound yet: it keeps `Retain`.
    NotBound,
    /// Gone, or no longer kept by gc for that claim: nothing to give back.
    NotKept,
}

/// Gives the volume `name`, moved to the claim created again (`claim_uid`), its policy back
/// once that claim is bound to it ([`Event::Bound`]).
///
/// # Errors
/// The volume cannot be read, or the patch fails.
pub async fn claimed_again(
    volumes: &dyn Volumes,
    name: &str,
    claim_uid: &str,
    cluster: &str,
    dry_run: bool,
) -> Result<ClaimedAgain, String> {
    let Some(volume) = read(volumes, name).await? else {
        return Ok(ClaimedAgain::NotKept);
    };
    let (state, record) = state_of(&volume, cluster);
    let Some(record) = record.filter(|r| r.restored_to.as_deref() == Some(claim_uid)) else {
        return Ok(ClaimedAgain::NotKept);
    };
    let bound =
        volume["status"]["phase"] == "Bound" && volume["spec"]["claimRef"]["uid"] == claim_uid;
    if !bound || next(state, Event::Bound).0 != Action::GiveBack {
        return Ok(ClaimedAgain::NotBound);
    }
    match give_back(volumes, &volume, &record.policy, cluster, dry_run).await {
        DeleteResult::Deleted | DeleteResult::WouldDelete => Ok(ClaimedAgain::GivenBack),
        other => Err(format!(
            "cannot give its volume {name} its policy back: {other}"
        )),
    }
}
