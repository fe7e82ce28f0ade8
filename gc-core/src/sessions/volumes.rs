//! A deleted claim's volume, kept for a while: before a run deletes a PersistentVolumeClaim bound
//! to a PersistentVolume whose reclaim policy is `Delete`, it sets that volume to `Retain` and
//! records the policy it had ([`retain`]); `retain_volume_days` later a run gives the volume its
//! policy back, and Kubernetes reclaims it as it would have at the delete ([`expire`]).
//!
//! Every write is a JSON patch whose `test` ops fence it: [`retain`] on the volume's uid,
//! resourceVersion, claim (the uid of the claim being deleted) and policy; [`expire`] also on its
//! phase (`Released`: nothing claimed it again) and on gc's own label. A volume whose policy is
//! already `Retain` (or anything but `Delete`) is left alone. A restore moves a kept volume to
//! the claim created again ([`rebind`]); once that claim is bound, the restore or the next run
//! gives the policy back ([`claimed_again`], [`expire`]), fenced on the new claim and `Bound`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::collect_sessions::DeleteResult;
use crate::ports::{ClusterError, RetainedVolume, Volumes};
use crate::sessions::{Judged, Resource, SessionConfig, SessionDecision};

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
    /// When (seconds since the epoch).
    pub at: f64,
    /// The uid of the claim `restore` created again and bound the volume to, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_to: Option<String>,
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

/// Keeps the volume of `claim` (the claim's whole object, about to be deleted): `Ok(None)` when
/// there is none to keep (unbound, bound to a volume that names another claim, a policy other than
/// `Delete`), `Ok(Some)` when it is kept (now, or by an earlier run that did not get to the
/// delete). `stop` is read before the patch.
///
/// # Errors
/// The result of the claim's delete, which must not be sent: `Changed` when a fence held (leave
/// the claim for the next run), `Failed` when the volume cannot be read or patched, what `stop`
/// says when it is set.
pub async fn retain(
    volumes: &dyn Volumes,
    cfg: &SessionConfig,
    claim: &Value,
    resource: &Resource,
    now: f64,
    dry_run: bool,
    stop: crate::collect_sessions::Stop<'_>,
) -> Result<Option<RetainedVolume>, DeleteResult> {
    let failed = |why: String| DeleteResult::Failed(format!("not deleted: {why}"));
    let Some(name) = claim["spec"]["volumeName"]
        .as_str()
        .filter(|n| !n.is_empty())
    else {
        return Ok(None);
    };
    let text = match volumes.get_volume(name).await {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(None),
        Err(e) => return Err(failed(format!("cannot read its volume {name}: {e}"))),
    };
    let volume: Value = serde_json::from_slice(&text)
        .map_err(|e| failed(format!("volume {name} is not JSON: {e}")))?;
    if volume["spec"]["claimRef"]["uid"] != resource.uid.as_str() {
        return Ok(None);
    }
    let meta = &volume["metadata"];
    let ours = meta["annotations"][RETAINED_ANNOTATION]
        .as_str()
        .and_then(|a| serde_json::from_str::<Retained>(a).ok())
        .filter(|r| r.claim_uid == resource.uid);
    if let Some(ours) = ours {
        return Ok(Some(RetainedVolume {
            name: name.to_owned(),
            policy: ours.policy,
        }));
    }
    let policy = &volume["spec"]["persistentVolumeReclaimPolicy"];
    if policy != "Delete" {
        return Ok(None);
    }
    let record = Retained {
        policy: "Delete".into(),
        namespace: cfg.namespace.clone(),
        claim: resource.name.clone(),
        claim_uid: resource.uid.clone(),
        session: resource.session.clone(),
        at: now,
        restored_to: None,
    };
    let record = serde_json::to_string(&record).map_err(|e| failed(e.to_string()))?;
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
        {"op": "test", "path": "/spec/claimRef/uid", "value": resource.uid},
        {"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Delete"},
        {"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"},
        add_to(meta, "labels", RETAINED_LABEL, &cfg.cluster_id),
        add_to(meta, "annotations", RETAINED_ANNOTATION, &record),
    ]);
    if let Some(unsent) = stop.result() {
        return Err(unsent);
    }
    match volumes
        .patch_volume(name, patch.to_string().as_bytes(), dry_run)
        .await
    {
        Ok(_) => Ok(Some(RetainedVolume {
            name: name.to_owned(),
            policy: "Delete".into(),
        })),
        Err(ClusterError::Changed { .. } | ClusterError::NotFound(_)) => Err(DeleteResult::Changed),
        Err(e) => Err(failed(format!("cannot retain its volume {name}: {e}"))),
    }
}

/// What [`expire`] did with one retained volume: its judgement, and the result of its patch.
pub type Expired = (Judged, Option<DeleteResult>);

/// Each volume of `cfg`'s cluster retained for a claim of `cfg`'s namespace, judged: given back
/// its reclaim policy when it was retained more than `retain_volume_days` ago and is still
/// `Released`, still claimed by the deleted claim's uid and still labelled as gc's; held until
/// then; given back at once when a restore moved it to the claim created again and that claim
/// is bound to it (what [`claimed_again`] does, for a restore that stopped waiting); left alone
/// (skipped) when claimed by anything else. `stop` is read before each write.
///
/// # Errors
/// When the volumes cannot be listed: nothing is written then.
pub async fn expire(
    volumes: &dyn Volumes,
    cfg: &SessionConfig,
    now: f64,
    dry_run: bool,
    stop: crate::collect_sessions::Stop<'_>,
) -> Result<Vec<Expired>, ClusterError> {
    let selector = format!("{RETAINED_LABEL}={}", cfg.cluster_id);
    let listed = crate::pages::collect(
        |token: Option<String>| {
            let selector = selector.clone();
            async move {
                volumes
                    .list_volumes(
                        &selector,
                        crate::collect_sessions::PAGE_SIZE,
                        token.as_deref(),
                    )
                    .await
            }
        },
        |item| Ok(Some(item.clone())),
    )
    .await?;
    let window = f64::from(cfg.retain_volume_days) * 86_400.0;
    let mut judged = Vec::new();
    for volume in listed {
        let meta = &volume["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let Some(record) = meta["annotations"][RETAINED_ANNOTATION]
            .as_str()
            .and_then(|a| serde_json::from_str::<Retained>(a).ok())
        else {
            continue;
        };
        if record.namespace != cfg.namespace {
            continue;
        }
        let resource = Resource {
            api_version: "v1".into(),
            kind: "PersistentVolume".into(),
            name: text(&meta["name"]),
            uid: text(&meta["uid"]),
            resource_version: text(&meta["resourceVersion"]),
            session: record.session.clone(),
            created: meta["creationTimestamp"].as_str().map(str::to_owned),
            deleting: !meta["deletionTimestamp"].is_null(),
        };
        let of_claim = format!(
            "retained for claim {}/{} (uid {})",
            record.namespace, record.claim, record.claim_uid
        );
        let phase = &volume["status"]["phase"];
        let claimed_by = &volume["spec"]["claimRef"]["uid"];
        // Moved by a restore to the claim created again ([`rebind`]), which `restore` could not
        // see bound: its policy goes back once that claim is bound, whatever the window.
        let restored_to = (record.restored_to.as_deref()).filter(|uid| claimed_by == *uid);
        let fence = match restored_to {
            Some(new_uid) => (new_uid, "Bound"),
            None => (record.claim_uid.as_str(), "Released"),
        };
        let decision = if let Some(new_uid) = restored_to {
            if phase == "Bound" {
                SessionDecision::Delete {
                    reason: format!(
                        "{of_claim}: restored to claim uid {new_uid}, bound: reclaim policy {} \
                         given back",
                        record.policy
                    ),
                }
            } else {
                SessionDecision::Skipped {
                    reason: format!(
                        "{of_claim}: restored to claim uid {new_uid}, not bound yet (phase \
                         {phase}): keeps Retain"
                    ),
                    spared: None,
                }
            }
        } else if claimed_by != record.claim_uid.as_str() || phase != "Released" {
            SessionDecision::Skipped {
                reason: format!("{of_claim}: claimed again (phase {phase}): left alone"),
                spared: None,
            }
        } else if record.at + window > now {
            SessionDecision::Held {
                reason: format!(
                    "{of_claim}: kept for --retain-volume-days {}",
                    cfg.retain_volume_days
                ),
                until: record.at + window,
            }
        } else {
            SessionDecision::Delete {
                reason: format!(
                    "{of_claim} over --retain-volume-days {} ago: reclaim policy {} given back",
                    cfg.retain_volume_days, record.policy
                ),
            }
        };
        let result = if matches!(decision, SessionDecision::Delete { .. }) {
            Some(match stop.result() {
                Some(unsent) => unsent,
                None => {
                    give_back(
                        volumes,
                        &volume,
                        fence,
                        &record.policy,
                        &cfg.cluster_id,
                        dry_run,
                    )
                    .await
                }
            })
        } else {
            None
        };
        judged.push((Judged { resource, decision }, result));
    }
    Ok(judged)
}

/// The fenced patch that gives `volume` back its `policy` and drops gc's label and annotation,
/// fenced on its uid, resourceVersion, claim uid and phase (`fence`), `Retain` and gc's label
/// of `cluster`.
async fn give_back(
    volumes: &dyn Volumes,
    volume: &Value,
    fence: (&str, &str),
    policy: &str,
    cluster: &str,
    dry_run: bool,
) -> DeleteResult {
    let meta = &volume["metadata"];
    let label = RETAINED_LABEL.replace('/', "~1");
    let annotation = RETAINED_ANNOTATION.replace('/', "~1");
    let (claim_uid, phase) = fence;
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
        {"op": "test", "path": "/spec/claimRef/uid", "value": claim_uid},
        {"op": "test", "path": "/status/phase", "value": phase},
        {"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"},
        {"op": "test", "path": format!("/metadata/labels/{label}"), "value": cluster},
        {"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": policy},
        {"op": "remove", "path": format!("/metadata/labels/{label}")},
        {"op": "remove", "path": format!("/metadata/annotations/{annotation}")},
    ]);
    let name = meta["name"].as_str().unwrap_or_default();
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

/// The volume `name` as it was kept for the deleted claim `claim_uid` of `cluster`: still
/// claimed by it, still labelled and annotated by gc, not bound to anything else (`Released` or
/// `Available`); with what its annotation records.
///
/// # Errors
/// Why it is not (gone, claimed again, changed): a claim is then not created again on it.
pub async fn kept_for(
    volumes: &dyn Volumes,
    name: &str,
    claim_uid: &str,
    cluster: &str,
) -> Result<(Value, Retained), String> {
    let text = volumes
        .get_volume(name)
        .await
        .map_err(|e| format!("cannot read its volume {name}: {e}"))?
        .ok_or_else(|| format!("its volume {name} is gone"))?;
    let volume: Value =
        serde_json::from_slice(&text).map_err(|e| format!("volume {name} is not JSON: {e}"))?;
    let meta = &volume["metadata"];
    let record = meta["annotations"][RETAINED_ANNOTATION]
        .as_str()
        .and_then(|a| serde_json::from_str::<Retained>(a).ok())
        .filter(|r| r.claim_uid == claim_uid && meta["labels"][RETAINED_LABEL] == cluster)
        .ok_or_else(|| format!("its volume {name} is no longer kept by gc for this claim"))?;
    let phase = &volume["status"]["phase"];
    if volume["spec"]["claimRef"]["uid"] != claim_uid
        || !(phase == "Released" || phase == "Available")
    {
        return Err(format!(
            "its volume {name} is claimed again (phase {phase})"
        ));
    }
    Ok((volume, record))
}

/// Moves the kept `volume` ([`kept_for`]) to the claim created again (`namespace`/`claim`, uid
/// `new_uid`), fenced on its uid, resourceVersion and old claim; its annotation records the new
/// claim, and its policy stays `Retain` until that claim is bound ([`claimed_again`]).
///
/// # Errors
/// The patch refused, or a fence that held (the volume changed).
pub async fn rebind(
    volumes: &dyn Volumes,
    volume: &Value,
    mut record: Retained,
    claim: &str,
    new_uid: &str,
    dry_run: bool,
) -> Result<(), String> {
    let meta = &volume["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let old_uid = record.claim_uid.clone();
    let namespace = record.namespace.clone();
    record.restored_to = Some(new_uid.to_owned());
    let note = serde_json::to_string(&record).map_err(|e| e.to_string())?;
    let annotation = RETAINED_ANNOTATION.replace('/', "~1");
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
        {"op": "test", "path": "/spec/claimRef/uid", "value": old_uid},
        {"op": "replace", "path": "/spec/claimRef", "value": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": namespace, "name": claim, "uid": new_uid,
        }},
        {"op": "replace", "path": format!("/metadata/annotations/{annotation}"), "value": note},
    ]);
    volumes
        .patch_volume(name, patch.to_string().as_bytes(), dry_run)
        .await
        .map(drop)
        .map_err(|e| format!("cannot bind its volume {name} to the new claim: {e}"))
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
/// once that claim is bound to it.
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
    let Some(text) = volumes
        .get_volume(name)
        .await
        .map_err(|e| format!("cannot read its volume {name}: {e}"))?
    else {
        return Ok(ClaimedAgain::NotKept);
    };
    let volume: Value =
        serde_json::from_slice(&text).map_err(|e| format!("volume {name} is not JSON: {e}"))?;
    let record = volume["metadata"]["annotations"][RETAINED_ANNOTATION]
        .as_str()
        .and_then(|a| serde_json::from_str::<Retained>(a).ok())
        .filter(|r| r.restored_to.as_deref() == Some(claim_uid));
    let bound =
        volume["status"]["phase"] == "Bound" && volume["spec"]["claimRef"]["uid"] == claim_uid;
    let Some(record) = record else {
        return Ok(ClaimedAgain::NotKept);
    };
    if !bound {
        return Ok(ClaimedAgain::NotBound);
    }
    let fence = (claim_uid, "Bound");
    match give_back(volumes, &volume, fence, &record.policy, cluster, dry_run).await {
        DeleteResult::Deleted | DeleteResult::WouldDelete => Ok(ClaimedAgain::GivenBack),
        other => Err(format!(
            "cannot give its volume {name} its policy back: {other}"
        )),
    }
}
