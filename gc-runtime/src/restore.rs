//! Undoing session deletes: every archived object of a session that does not exist now, created
//! again from its verified archive (the session collector's `restore`, and the request desk's).
//!
//! A session's archives are all read back and verified against their receipts first: one that
//! does not match (or cannot be read) restores nothing of that session. An object that exists
//! again (same kind and name) is never replaced. A claim whose volume was kept is created on that
//! volume, and the volume's `claimRef` moved to it (fenced); once the new claim is bound (waited
//! for up to [`RestoreRequest::bind_wait`], else by a later restore), the volume gets its reclaim
//! policy back. Each object created gets an Event.

use std::time::Duration;

use crate::Context as _;
use gc_core::events::{EventRecord, EventType, Regarding};
use gc_core::ports::{ObjectCreator, Receipt, SessionCluster, SessionReceipts};
use gc_core::sessions::Kind;
use gc_core::sessions::manifest::restorable;
use gc_core::sessions::volumes::{self, ClaimedAgain, NotKept};
use serde_json::Value;

use crate::clock::now;
use crate::events::Events;
use gc_core::ports::Sink;

mod restored;
pub use restored::{Restoration, Restored};

/// What to restore: the sessions, where their objects were, and how long to wait for a claim
/// to be bound again.
#[derive(Debug, Clone)]
pub struct RestoreRequest {
    /// The cluster id the archives were written under.
    pub cluster_id: String,
    /// The namespace the session's objects were in (and are created again in).
    pub namespace: String,
    /// The kinds objects may be of (their plural names the API path).
    pub kinds: Vec<Kind>,
    /// The session ids whose archived objects to create again.
    pub sessions: Vec<String>,
    /// How long to wait, once a session's objects are created, for a claim created on its kept
    /// volume to be bound, to give the volume back its policy; zero: a later restore does.
    pub bind_wait: Duration,
}

impl RestoreRequest {
    /// Whether the request can be acted on: a valid cluster id and namespace, a session id in
    /// each place, a wait of at most an hour.
    ///
    /// # Errors
    /// A usage error naming what is wrong: nothing was read or written.
    pub fn check(&self) -> crate::Result<()> {
        use gc_core::input::InputError::Invalid;
        gc_core::input::check_scope(&self.cluster_id, &self.namespace)?;
        let rule = "one or more session ids, none empty";
        if let Some(empty) = self.sessions.iter().find(|s| s.is_empty()) {
            let value = empty.clone();
            return Err(Invalid {
                input: "sessions",
                value,
                rule,
            }
            .into());
        }
        if self.sessions.is_empty() {
            let value = String::new();
            return Err(Invalid {
                input: "sessions",
                value,
                rule,
            }
            .into());
        }
        if self.bind_wait > Duration::from_secs(3600) {
            let value = format!("{}s", self.bind_wait.as_secs());
            let rule = "at most an hour";
            return Err(Invalid {
                input: "bind_wait",
                value,
                rule,
            }
            .into());
        }
        Ok(())
    }
}

/// A restore under way: the collector's parts, the request, and how it acts.
pub(crate) struct Restore<'a, C, S, A> {
    pub(crate) cluster: &'a C,
    pub(crate) store: &'a S,
    pub(crate) sink: &'a A,
    pub(crate) request: &'a RestoreRequest,
    /// Every create a server-side dry run; no volume moved.
    pub(crate) dry_run: bool,
    /// An Event on each object created (none for a dry run).
    pub(crate) events: &'a Events,
    /// The embedder's stop: a wait for a volume ends when it comes.
    pub(crate) stop: &'a dyn crate::Cancel,
}

/// Waits half a second, or less when `stop` comes: whether it came (the wait then ends).
async fn paused(stop: &dyn crate::Cancel) -> bool {
    if stop.cancelled().is_some() {
        return true;
    }
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(500)) => stop.cancelled().is_some(),
        () = stop.stopped() => true,
    }
}

/// The order objects are created in: claims first (the Deployment's Pods mount them).
fn order(r: &Receipt) -> u8 {
    u8::from(r.kind() != "PersistentVolumeClaim")
}

/// Restores every session of the request, one after the other.
pub(crate) async fn restore_sessions<C, S, A>(run: &Restore<'_, C, S, A>) -> Vec<Restored>
where
    C: SessionCluster + ObjectCreator,
    S: SessionReceipts,
    A: Sink,
{
    let mut all = Vec::new();
    for session in &run.request.sessions {
        all.extend(restore_session(run, session).await);
    }
    all
}

/// The failures of a restore: an error counting the objects not restored and naming their
/// sessions, when any was not.
///
/// # Errors
/// As said.
pub fn failures(restored: &[Restored]) -> crate::Result<()> {
    let failed: Vec<&str> = restored
        .iter()
        .filter(|r| r.failed())
        .map(|r| r.session.as_str())
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    let mut sessions = failed.clone();
    sessions.dedup();
    let (n, sessions) = (failed.len(), sessions.join(", "));
    Err(crate::Error::msg(format!(
        "{n} object(s) not restored, of session(s) {sessions}"
    )))
}

/// One session: its newest receipt of each object, every archive verified, then each object.
async fn restore_session<C, S, A>(run: &Restore<'_, C, S, A>, session: &str) -> Vec<Restored>
where
    C: SessionCluster + ObjectCreator,
    S: SessionReceipts,
    A: Sink,
{
    let (cluster_id, namespace) = (&run.request.cluster_id, &run.request.namespace);
    // A line of no object: what came of the whole session.
    let of_session = |result| Restored {
        session: session.to_owned(),
        api_version: String::new(),
        kind: String::new(),
        name: String::new(),
        archived_uid: String::new(),
        uid: None,
        result,
        note: None,
    };
    let listed = match run
        .store
        .session_receipts(cluster_id, namespace, session)
        .await
    {
        Ok(listed) => listed,
        Err(e) => {
            let reason = format!("cannot list the receipts: {e}");
            return vec![of_session(Restoration::Unlisted { reason })];
        }
    };
    // Newest first: the first receipt of each object is its last archive.
    let mut receipts: Vec<Receipt> = Vec::new();
    for r in listed {
        let seen = receipts.iter().any(|k| {
            k.kind() == r.kind() && k.api_version() == r.api_version() && k.name == r.name
        });
        if r.session.is_some() && !seen {
            receipts.push(r);
        }
    }
    if receipts.is_empty() {
        let reason = format!(
            "no archive of session {session} in namespace {namespace} of cluster {cluster_id} in {}",
            run.store.shown()
        );
        return vec![of_session(Restoration::NoArchive { reason })];
    }
    receipts.sort_by_key(order);
    let mut docs = Vec::with_capacity(receipts.len());
    let mut problems = Vec::new();
    for r in &receipts {
        match read(run.sink, r).await {
            Ok(doc) => docs.push(doc),
            Err(problem) => problems.push(problem),
        }
    }
    if !problems.is_empty() {
        let why = format!(
            "not restored: an archive of the session failed verification: {}",
            problems.join("; ")
        );
        return receipts
            .iter()
            .map(|r| outcome(session, r, None, Restoration::failed_because(&why), None))
            .collect();
    }
    let mut done = Vec::with_capacity(receipts.len());
    // Claims come first: one that conflicts with a claim of its name restores nothing more of
    // the session (its Deployment would mount the other claim).
    let mut conflict = None;
    for (r, doc) in receipts.iter().zip(&docs) {
        if let Some(claim) = &conflict {
            let why = format!("not restored: its claim {claim} conflicts (see its line)");
            let result = Restoration::failed_because(why);
            done.push(outcome(session, r, None, result, None));
            continue;
        }
        let restored = restore_object(run, session, r, doc).await;
        if let Restoration::Conflict { .. } = restored.result {
            conflict = Some(r.name.clone());
        }
        done.push(restored);
    }
    // After every object of the session, so that one slow binding delays none of the others.
    for (r, restored) in receipts.iter().zip(&mut done) {
        let volume = r.session.as_ref().and_then(|s| s.retained.as_ref());
        if let (Some(volume), Some(uid), false, Restoration::Created) =
            (volume, &restored.uid, run.dry_run, &restored.result)
            && let Some(note) = wait_bound(run, &volume.name, uid, &volume.policy).await
        {
            restored.note = Some(note);
        }
    }
    done
}

/// Waits up to [`RestoreRequest::bind_wait`] for the volume `name` to be bound to the claim created
/// again (`uid`), and gives it back its `policy` then: what was done, or `None` when the wait
/// ran out with the volume not yet bound (it keeps `Retain`; the next run of the collector, or a
/// later `restore`, gives it back once bound).
/// A read or a patch that fails (a fence lost to another write of the volume) is tried again
/// until the wait runs out, and then said. A wait of zero does not look: the volume keeps
/// `Retain` whatever the binder did meanwhile.
///
/// A fixed half-second poll, not kube-runtime's `await_condition`: that watches, and the restore
/// account may only get and patch volumes (the chart's `gc-restore` role); nor a retry crate
/// (`backon`), whose `when` would hold this same match of each outcome.
async fn wait_bound<C: SessionCluster, S, A>(
    run: &Restore<'_, C, S, A>,
    name: &str,
    uid: &str,
    policy: &str,
) -> Option<String> {
    let request = run.request;
    if request.bind_wait.is_zero() {
        return None;
    }
    let deadline = tokio::time::Instant::now() + request.bind_wait;
    loop {
        let found = volumes::claimed_again(run.cluster, name, uid, &request.cluster_id, false);
        let found = found.await;
        let late = tokio::time::Instant::now() >= deadline;
        match found {
            Ok(ClaimedAgain::GivenBack) => {
                return Some(format!(
                    "on its volume {name}, bound again: reclaim policy {policy} given back"
                ));
            }
            Ok(ClaimedAgain::NotKept) => return None,
            Ok(ClaimedAgain::NotBound) if late => return None,
            Err(why) if late => return Some(format!("on its volume {name}: {why}")),
            Ok(ClaimedAgain::NotBound) | Err(_) => {
                if paused(run.stop).await {
                    // The volume keeps `Retain`: the next run, or a later restore, gives it back.
                    return Some(format!(
                        "on its volume {name}: not yet bound when the process stopped; it keeps \
                         `Retain` until the collector's next run gives back {policy}"
                    ));
                }
            }
        }
    }
}

/// The archive of `r`, read from `sink` and verified against `r`, as JSON.
async fn read(sink: &impl Sink, r: &Receipt) -> Result<Value, String> {
    let bytes = read_receipted(sink, r)
        .await
        .map_err(|e| format!("{e:#}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("archive {} is not JSON: {e}", r.uri))
}

fn outcome(
    session: &str,
    r: &Receipt,
    uid: Option<String>,
    result: Restoration,
    note: Option<String>,
) -> Restored {
    Restored {
        session: session.to_owned(),
        api_version: r.api_version().to_owned(),
        kind: r.kind().to_owned(),
        name: r.name.clone(),
        archived_uid: r.uid.clone(),
        uid,
        result,
        note,
    }
}

/// One object of the session: left alone when it exists (a claim's kept volume then given back
/// its policy once bound to it), else created again (a claim on its kept volume).
async fn restore_object<C, S, A>(
    run: &Restore<'_, C, S, A>,
    session: &str,
    r: &Receipt,
    doc: &Value,
) -> Restored
where
    C: SessionCluster + ObjectCreator,
{
    let (cluster_id, namespace) = (&run.request.cluster_id, &run.request.namespace);
    let done = |uid, result, note| outcome(session, r, uid, result, note);
    let failed = Restoration::failed_because;
    let Some(kind) = run
        .request
        .kinds
        .iter()
        .find(|k| k.kind == r.kind() && k.api_version() == r.api_version())
    else {
        let why = format!("kind {} {} is not among `kinds`", r.api_version(), r.kind());
        return done(None, failed(why), None);
    };
    let retained = r.session.as_ref().and_then(|s| s.retained.as_ref());
    let existing = match run.cluster.get_object(kind, namespace, &r.name).await {
        Ok(existing) => existing,
        Err(e) => return done(None, failed(format!("cannot read it: {e}")), None),
    };
    if let Some(existing) = existing {
        let existing: Value = serde_json::from_slice(&existing).unwrap_or_default();
        let uid = existing["metadata"]["uid"].as_str().map(str::to_owned);
        if !existing["metadata"]["deletionTimestamp"].is_null() {
            let note = "being deleted (a finalizer holds it): restore again once it is gone";
            return done(uid, Restoration::Exists, Some(note.to_owned()));
        }
        let mut note = None;
        if let (Some(volume), Some(uid)) = (retained, &uid) {
            let back =
                volumes::claimed_again(run.cluster, &volume.name, uid, cluster_id, run.dry_run);
            note = match back.await {
                Ok(ClaimedAgain::GivenBack) => Some(format!(
                    "its volume {} bound again: reclaim policy {} given back",
                    volume.name, volume.policy
                )),
                Ok(ClaimedAgain::NotBound) => Some(format!(
                    "its volume {} keeps Retain until this claim is bound to it",
                    volume.name
                )),
                Ok(ClaimedAgain::NotKept) => match on_volume(run, &volume.name, &existing).await {
                    Ok(note) => note,
                    Err(result) => return done(Some(uid.clone()), result, None),
                },
                Err(why) => return done(Some(uid.clone()), failed(why.to_string()), None),
            };
        }
        return done(uid, Restoration::Exists, note);
    }
    // A claim goes back on its kept volume, if it is still as it was kept.
    let kept = match retained {
        Some(volume) => match released(run, &volume.name, &r.uid).await {
            Ok(kept) => Some(kept),
            Err(why) => return done(None, failed(format!("not restored: {why}")), None),
        },
        None => None,
    };
    let manifest = match restorable(doc, kept.is_some()) {
        Ok(manifest) => manifest,
        Err(why) => return done(None, failed(why.to_string()), None),
    };
    let created = run
        .cluster
        .create_object(
            kind,
            namespace,
            manifest.to_string().as_bytes(),
            run.dry_run,
        )
        .await;
    let created: Value = match created {
        Ok(text) => serde_json::from_slice(&text).unwrap_or_default(),
        Err(e) => return done(None, failed(format!("cannot create it: {e}")), None),
    };
    let uid = created["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let result = if run.dry_run {
        Restoration::WouldCreate
    } else {
        Restoration::Created
    };
    let mut note = None;
    if let Some((volume, record)) = kept {
        let name = volume["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Err(why) = volumes::rebind(
            run.cluster,
            &volume,
            record,
            &r.name,
            &uid,
            now(),
            run.dry_run,
        )
        .await
        {
            return done(Some(uid), failed(why.to_string()), None);
        }
        note = Some(format!(
            "on its volume {name}, which keeps Retain until this claim is bound to it (then the next run, \
             or restore again, gives its policy back)"
        ));
    } else if r.kind() == "PersistentVolumeClaim" {
        note = Some("its volume was not kept: a new, empty one".to_owned());
    }
    if !run.dry_run {
        let record = EventRecord {
            regarding: Regarding {
                api_version: r.api_version().to_owned(),
                kind: r.kind().to_owned(),
                name: r.name.clone(),
                namespace: namespace.clone(),
                uid: Some(uid.clone()),
            },
            type_: EventType::Normal,
            reason: "Restored",
            action: "Create",
            note: format!(
                "created again from archive {} of session {session} (uid {} before)",
                r.uri, r.uid
            ),
        };
        run.events.post_record(run.cluster, &record).await;
    }
    done(Some(uid), result, note)
}

/// The volume `name` kept for the deleted claim `claim_uid` ([`volumes::kept_for`]); while it
/// still shows bound to that claim (Kubernetes has not released it yet), asked again every half
/// second for up to [`RestoreRequest::bind_wait`].
async fn released<C: SessionCluster, S, A>(
    run: &Restore<'_, C, S, A>,
    name: &str,
    claim_uid: &str,
) -> Result<(Value, volumes::Retained), String> {
    let (cluster_id, bind_wait) = (&run.request.cluster_id, run.request.bind_wait);
    let deadline = tokio::time::Instant::now() + bind_wait;
    loop {
        match volumes::kept_for(run.cluster, name, claim_uid, cluster_id).await {
            Ok(kept) => return Ok(kept),
            Err(NotKept::NotReleased(why)) if tokio::time::Instant::now() < deadline => {
                tracing::info!("{why}: waiting");
                if paused(run.stop).await {
                    return Err(format!("{why} when the process stopped: restore again"));
                }
            }
            Err(NotKept::NotReleased(why)) => {
                return Err(format!(
                    "{why} after `bind_wait` {}: restore again shortly",
                    bind_wait.as_secs()
                ));
            }
            Err(NotKept::Not(why)) => return Err(why),
        }
    }
}

/// Whether the claim `existing` (of the archived claim's name, not the one a restore moved the
/// kept volume `name` to) may stand for the archived one: it is on that volume, or the volume is
/// no longer gc's (gone, given back: nothing of the user's is left to bring back); a note then,
/// when it is not on it.
///
/// # Errors
/// [`Restoration::Conflict`]: the volume is still kept by gc and the claim is not on it (another
/// claim took the name); the session is not restored on that claim. [`Restoration::Failed`]:
/// the volume could not be read.
async fn on_volume<C: SessionCluster, S, A>(
    run: &Restore<'_, C, S, A>,
    name: &str,
    existing: &Value,
) -> Result<Option<String>, Restoration> {
    let meta = &existing["metadata"];
    let uid = meta["uid"].as_str().unwrap_or_default();
    let volume =
        run.cluster.get_volume(name).await.map_err(|e| {
            Restoration::failed_because(format!("cannot read its volume {name}: {e}"))
        })?;
    let volume: Value = volume
        .and_then(|text| serde_json::from_slice(&text).ok())
        .unwrap_or_default();
    if existing["spec"]["volumeName"] == name && volume["spec"]["claimRef"]["uid"] == uid {
        return Ok(None);
    }
    let Some(record) = volumes::lifecycle::record_of(&volume, &run.request.cluster_id) else {
        return Ok(Some(format!(
            "not on its volume {name}, which gc no longer keeps: another claim of its name"
        )));
    };
    let reason = format!(
        "another claim {} (uid {uid}, on volume {}) has the archived claim's name; its kept \
         volume {name} (kept for claim uid {}) is not on it: nothing of the session is created \
         (delete or rename that claim, then restore again)",
        meta["name"].as_str().unwrap_or_default(),
        existing["spec"]["volumeName"].as_str().unwrap_or("none"),
        record.claim_uid,
    );
    Err(Restoration::Conflict { reason })
}

/// The archive `receipt` records, read from `sink` and verified against it.
///
/// # Errors
/// When `sink` does not hold it, it cannot be read, or it does not match `receipt`.
pub async fn read_receipted(sink: &impl Sink, receipt: &Receipt) -> crate::Result<Vec<u8>> {
    let uri = &receipt.uri;
    if !sink.holds(uri) {
        return Err(crate::Error::msg(format!(
            "archive {uri} is not in {} (give the sink it was written to)",
            sink.shown()
        )));
    }
    let bytes = sink
        .read(uri)
        .await
        .with_context(|| format!("cannot read archive {uri}"))?;
    if let Some(problem) = receipt.mismatch(&bytes) {
        return Err(crate::Error::msg(format!("archive {uri} {problem}")));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(sessions: &[&str], bind_wait: u64) -> RestoreRequest {
        RestoreRequest {
            cluster_id: "primary".into(),
            namespace: "streamspace".into(),
            kinds: Vec::new(),
            sessions: sessions.iter().map(|s| (*s).to_owned()).collect(),
            bind_wait: Duration::from_secs(bind_wait),
        }
    }

    /// A request names one session or more, none empty, and waits an hour at most.
    #[test]
    fn a_request_names_its_sessions_and_waits_an_hour_at_most() {
        let usage = |r: RestoreRequest| r.check().map_err(|e| (e.kind(), format!("{e:#}")));
        assert!(usage(request(&["e"], 3600)).is_ok());
        let (kind, why) = usage(request(&["e"], 3601)).unwrap_err();
        assert_eq!(kind, crate::FailureKind::Usage);
        assert!(why.contains("bind_wait") && why.contains("3601s"), "{why}");
        for sessions in [&[][..], &["e", ""][..]] {
            let (kind, why) = usage(request(sessions, 0)).unwrap_err();
            assert_eq!(kind, crate::FailureKind::Usage);
            assert!(why.contains("sessions"), "{why}");
        }
    }

    fn restored(session: &str, result: Restoration) -> Restored {
        Restored {
            session: session.into(),
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: format!("{session}-Deployment"),
            archived_uid: "u-old".into(),
            uid: None,
            result,
            note: None,
        }
    }

    fn failed(reason: &str) -> Restoration {
        Restoration::failed_because(reason)
    }

    /// A restore fails when any object was not restored: the error counts them and names their
    /// sessions once each; objects created, would be created or left as they are are no failure.
    #[test]
    fn the_objects_not_restored_make_one_error_naming_their_sessions() {
        let fine = [
            restored("a", Restoration::Created),
            restored("a", Restoration::WouldCreate),
            restored("b", Restoration::Exists),
        ];
        assert!(failures(&fine).is_ok());
        let some = [
            restored("a", Restoration::Created),
            restored("b", failed("cannot create it: 403")),
            restored("b", failed("not restored: its claim conflicts")),
            restored(
                "c",
                Restoration::NoArchive {
                    reason: "no archive of session c".into(),
                },
            ),
        ];
        let error = failures(&some).unwrap_err();
        assert_eq!(
            error.to_string(),
            "3 object(s) not restored, of session(s) b, c"
        );
    }
}
