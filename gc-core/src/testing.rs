//! Fakes of the ports, in memory, with faults on demand: what the engines' unit tests share,
//! and what an embedder's tests use (the `test-util` feature), as `gc-runtime`'s do.

pub mod pods;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::ports::{
    ClusterError, ObjectCluster, Page, Preconditions, SessionDirectory, StoreError,
};
use crate::sessions::{Kind, Row};

use std::task::{Context, Poll, Waker};

/// A run never asked to stop.
pub static GO_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs a future whose ports never wait (every fake answers at once).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
}

/// The session settings the engine tests share: StreamSpace's defaults with a guard floor of 1
/// and a ratio of one half, so that small fixtures reach the guard, on a cluster whose `Session`
/// definition is installed under one group (the fakes tell kinds apart by name only).
pub fn session_config() -> crate::sessions::SessionConfig {
    let mut kinds = crate::sessions::Kind::streamspace();
    kinds.retain(|k| k.group != "stream.streamspace.io");
    crate::sessions::SessionInputs {
        guard_floor: 1,
        guard_ratio: 0.5,
        kinds,
        ..Default::default()
    }
    .validate()
    .unwrap()
}

/// An archive sink and a store of receipts in memory, for the session engine's tests: the
/// archives by URI, the receipts in the order recorded; each refuses its writes when told to.
#[derive(Default)]
pub struct Kept {
    /// The archives, by URI.
    pub archives: std::sync::Mutex<std::collections::BTreeMap<String, Vec<u8>>>,
    /// The receipts, in the order recorded.
    pub receipts: std::sync::Mutex<Vec<crate::ports::Receipt>>,
    /// Archive writes are refused.
    pub refuse_archives: bool,
    /// Receipts are refused.
    pub refuse_receipts: bool,
    /// Reads answer other bytes than were written (a sink that lost or replaced them).
    pub tampered: bool,
    /// PersistentVolumes by name, patched as the API server patches them (`test` ops fence).
    pub volumes: std::sync::Mutex<std::collections::BTreeMap<String, serde_json::Value>>,
    /// Volume patches are refused (no RBAC).
    pub refuse_volume_patches: bool,
    /// PersistentVolumeClaims by `namespace/name`, when reading claims is offered (`None`: it is
    /// not, as the port's default).
    pub claims: std::sync::Mutex<Option<std::collections::BTreeMap<String, serde_json::Value>>>,
    /// Set by each volume patch: a flag of the run's `Stop` raised right after it.
    pub raise_on_volume_patch: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Set by each volume read: a flag raised between a read and the patch that follows it.
    pub raise_on_volume_read: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Kept {
    /// Records the receipt of the keep that `volume`'s record (gc's annotation) claims, as the
    /// run that kept it would have: the receipt of its claim's delete, naming the volume and the
    /// policy the record says.
    ///
    /// # Panics
    /// When `volume` carries no record that reads.
    pub fn receipt_of_keep(&self, volume: &Value) {
        let key = crate::sessions::volumes::RETAINED_ANNOTATION;
        let record: crate::sessions::volumes::Retained =
            serde_json::from_str(volume["metadata"]["annotations"][key].as_str().unwrap()).unwrap();
        self.receipts.lock().unwrap().push(crate::ports::Receipt {
            cluster_id: volume["metadata"]["labels"][key]
                .as_str()
                .unwrap_or("primary")
                .to_owned(),
            namespace: record.namespace.clone(),
            uid: record.claim_uid.clone(),
            name: record.claim.clone(),
            uri: format!("mem://kept/{}", record.claim_uid),
            sha256: String::new(),
            bytes: 0,
            session: Some(crate::ports::SessionObject {
                api_version: "v1".into(),
                kind: "PersistentVolumeClaim".into(),
                session: record.session.clone(),
                run_at: crate::isotime::format_timestamp(record.at),
                retained: Some(crate::ports::RetainedVolume {
                    name: volume["metadata"]["name"].as_str().unwrap().to_owned(),
                    policy: record.policy,
                }),
            }),
        });
    }

    /// The ports of a run that keeps its manifests here.
    pub fn keep(&self) -> crate::sessions::run::Keep<'_> {
        crate::sessions::run::Keep {
            sink: self,
            store: self,
            volumes: self,
            concurrency: crate::pipeline::DEFAULT_CONCURRENCY,
            acted: None,
        }
    }
}

#[async_trait::async_trait]
impl crate::ports::ArchiveSink for Kept {
    async fn write(
        &self,
        key: &crate::ports::ArchiveKey,
        bytes: &[u8],
    ) -> Result<String, crate::ports::StoreError> {
        if self.refuse_archives {
            return Err(crate::ports::StoreError::Unavailable("read-only".into()));
        }
        let uri = format!("mem://{}/{}/{}", key.cluster_id, key.namespace, key.uid);
        self.archives
            .lock()
            .unwrap()
            .insert(uri.clone(), bytes.to_vec());
        Ok(uri)
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, crate::ports::StoreError> {
        let archives = self.archives.lock().unwrap();
        let bytes = archives.get(uri).cloned();
        let bytes = bytes.ok_or_else(|| crate::ports::StoreError::NotFound(uri.to_owned()))?;
        Ok(if self.tampered { b"{}".to_vec() } else { bytes })
    }
}

#[async_trait::async_trait]
impl crate::ports::Store for Kept {
    async fn load_ledger(
        &self,
        _: &str,
        _: &str,
    ) -> Result<crate::PreviousLedger, crate::ports::StoreError> {
        unreachable!("the session run keeps no ledger")
    }
    async fn save_ledger(
        &self,
        _: &str,
        _: &str,
        _: &crate::Ledger,
    ) -> Result<(), crate::ports::StoreError> {
        unreachable!("the session run keeps no ledger")
    }
    async fn put_receipt(
        &self,
        receipt: &crate::ports::Receipt,
    ) -> Result<(), crate::ports::StoreError> {
        if self.refuse_receipts {
            return Err(crate::ports::StoreError::Unavailable(
                "database down".into(),
            ));
        }
        self.receipts.lock().unwrap().push(receipt.clone());
        Ok(())
    }
    async fn get_receipt(
        &self,
        cluster_id: &str,
        uid: &str,
    ) -> Result<Option<crate::ports::Receipt>, crate::ports::StoreError> {
        if self.refuse_receipts {
            return Err(crate::ports::StoreError::Unavailable(
                "database down".into(),
            ));
        }
        let receipts = self.receipts.lock().unwrap();
        let found = receipts
            .iter()
            .rev()
            .find(|r| r.cluster_id == cluster_id && r.uid == uid);
        Ok(found.cloned())
    }
}

#[async_trait::async_trait]
impl crate::ports::SessionReceipts for Kept {
    async fn session_receipts(
        &self,
        cluster_id: &str,
        namespace: &str,
        session: &str,
    ) -> Result<Vec<crate::ports::Receipt>, crate::ports::StoreError> {
        if self.refuse_receipts {
            return Err(crate::ports::StoreError::Unavailable(
                "database down".into(),
            ));
        }
        let receipts = self.receipts.lock().unwrap();
        let of = |r: &&crate::ports::Receipt| {
            let labelled = r.session.as_ref().and_then(|s| s.session.as_deref());
            r.cluster_id == cluster_id && r.namespace == namespace && labelled == Some(session)
        };
        Ok(receipts.iter().rev().filter(of).cloned().collect())
    }
    fn shown(&self) -> String {
        "memory".into()
    }
}

#[async_trait::async_trait]
impl crate::ports::Volumes for Kept {
    async fn get_volume(&self, name: &str) -> Result<Option<Vec<u8>>, crate::ports::ClusterError> {
        if let Some(flag) = &self.raise_on_volume_read {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let volumes = self.volumes.lock().unwrap();
        Ok(volumes.get(name).map(|v| v.to_string().into_bytes()))
    }
    async fn list_volumes(
        &self,
        selector: &str,
        _: u32,
        _: Option<&str>,
    ) -> Result<crate::ports::Page, crate::ports::ClusterError> {
        let (key, value) = selector.split_once('=').unwrap();
        let volumes = self.volumes.lock().unwrap();
        let items: Vec<&serde_json::Value> = volumes
            .values()
            .filter(|v| v["metadata"]["labels"][key] == value)
            .collect();
        Ok(crate::ports::Page {
            text: serde_json::json!({ "items": items })
                .to_string()
                .into_bytes(),
            continue_token: None,
        })
    }
    async fn patch_volume(
        &self,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, crate::ports::ClusterError> {
        use crate::ports::ClusterError;
        if self.refuse_volume_patches {
            return Err(ClusterError::Forbidden {
                verb: "patch".into(),
                resource: "persistentvolumes".into(),
                namespace: String::new(),
                message: "no RBAC".into(),
            });
        }
        let mut volumes = self.volumes.lock().unwrap();
        let Some(volume) = volumes.get(name) else {
            return Err(ClusterError::NotFound(name.into()));
        };
        let patch: json_patch::Patch = serde_json::from_slice(patch).unwrap();
        let mut patched = volume.clone();
        json_patch::patch(&mut patched, &patch).map_err(|e| ClusterError::Changed {
            status: 422,
            message: e.to_string(),
        })?;
        let version: u64 = patched["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        patched["metadata"]["resourceVersion"] = (version + 1).to_string().into();
        if !dry_run {
            volumes.insert(name.to_owned(), patched.clone());
        }
        if let Some(flag) = &self.raise_on_volume_patch {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(patched.to_string().into_bytes())
    }
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, crate::ports::ClusterError> {
        let claims = self.claims.lock().unwrap();
        let Some(claims) = claims.as_ref() else {
            return Err(crate::ports::ClusterError::NotFound("claims".into()));
        };
        let claim = claims.get(&format!("{namespace}/{name}"));
        Ok(claim.map(|c| c.to_string().into_bytes()))
    }
}

/// A namespace's labelled session objects in memory, as the API server lists, reads and deletes
/// them (deletes recorded, not applied), with faults on demand.
pub struct SessionObjects {
    /// The objects, each with its kind.
    pub objects: Mutex<Vec<(String, Value)>>,
    /// Each delete sent: the object's name, and whether it was a dry run.
    pub deleted: Mutex<Vec<(String, bool)>>,
    /// The `Session` definition is not installed (its list is a 404).
    pub crd_missing: bool,
    /// Set after each delete: a flag raised while the run deletes (its lock lost, or a stop).
    pub raise: Option<Arc<AtomicBool>>,
    /// Each object read whole is answered at this resourceVersion instead (changed since listed).
    pub changed_to: Option<&'static str>,
    /// Whole-object lists are offered (as the API server does); else each object is read by a
    /// GET.
    pub whole_lists: bool,
    /// The objects read whole by a GET, by name.
    pub gets: Mutex<Vec<String>>,
}

impl SessionObjects {
    /// The object `o` as read whole: at [`SessionObjects::changed_to`] when set.
    fn read(&self, o: &Value) -> Value {
        let mut object = o.clone();
        if let Some(rv) = self.changed_to {
            object["metadata"]["resourceVersion"] = rv.into();
        }
        object
    }
}

#[async_trait]
impl ObjectCluster for SessionObjects {
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
    async fn get_object(
        &self,
        kind: &Kind,
        _: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        self.gets.lock().unwrap().push(name.to_owned());
        let objects = self.objects.lock().unwrap();
        let found = objects
            .iter()
            .find(|(k, o)| *k == kind.kind && o["metadata"]["name"] == name);
        Ok(found.map(|(_, o)| self.read(o).to_string().into_bytes()))
    }
    async fn list_objects(
        &self,
        kind: &Kind,
        _: &str,
        selector: &str,
        _: u32,
        _: Option<&str>,
    ) -> Result<Page, ClusterError> {
        if !self.whole_lists {
            return Err(ClusterError::NotFound("not offered".into()));
        }
        let selector = crate::selector::Selector::parse(selector).unwrap();
        let objects = self.objects.lock().unwrap();
        let items: Vec<Value> = (objects.iter())
            .filter(|(k, o)| {
                *k == kind.kind && selector.matches(&crate::sessions::labels_of(&o["metadata"]))
            })
            // Items of a built-in kind's list carry neither.
            .map(|(_, o)| {
                let mut item = self.read(o);
                let fields = item.as_object_mut().unwrap();
                fields.remove("apiVersion");
                fields.remove("kind");
                item
            })
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
    /// Recorded as `NAME (owner)`: what it owns is left in place.
    async fn delete_owner(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        let name = format!("{name} (owner)");
        self.delete_object(kind, namespace, &name, preconditions, dry_run)
            .await
    }
}

/// The application's session table in memory: the ids of its live sessions (`Err`: the
/// database fails), and how many lookups it answered.
pub struct SessionTable(pub Result<Vec<&'static str>, StoreError>, pub Mutex<usize>);

#[async_trait]
impl SessionDirectory for SessionTable {
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

/// A `kind` object of `session`, labelled as StreamSpace labels it, created 2026-11-20.
pub fn session_object(kind: &str, session: &str) -> (String, Value) {
    let meta = json!({"name": format!("{session}-{kind}"), "uid": format!("u-{session}-{kind}"), "resourceVersion": "7",
                      "creationTimestamp": "2026-11-20T00:00:00Z", "labels": {"app": "streamspace-session", "session": session}});
    let api_version = match kind {
        "Deployment" => "apps/v1",
        "Session" => "stream.space/v1alpha1",
        _ => "v1",
    };
    let object = json!({"apiVersion": api_version, "kind": kind, "metadata": meta});
    (kind.to_owned(), object)
}

/// A Deployment and a `Session` of each of the sessions a to e.
pub fn session_objects(crd_missing: bool) -> SessionObjects {
    let mut objects = Vec::new();
    for s in ["a", "b", "c", "d", "e"] {
        objects.push(session_object("Deployment", s));
        objects.push(session_object("Session", s));
    }
    SessionObjects {
        objects: Mutex::new(objects),
        deleted: Mutex::new(vec![]),
        crd_missing,
        raise: None,
        changed_to: None,
        whole_lists: true,
        gets: Mutex::new(vec![]),
    }
}
