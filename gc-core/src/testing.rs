//! What the unit tests of the engines share.

use std::task::{Context, Poll, Waker};

/// Runs a future whose ports never wait (every fake answers at once).
/// A run never asked to stop.
pub(crate) static GO_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
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
pub(crate) fn session_config() -> crate::sessions::SessionConfig {
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
pub(crate) struct Kept {
    pub(crate) archives: std::sync::Mutex<std::collections::BTreeMap<String, Vec<u8>>>,
    pub(crate) receipts: std::sync::Mutex<Vec<crate::ports::Receipt>>,
    pub(crate) refuse_archives: bool,
    pub(crate) refuse_receipts: bool,
    /// Reads answer other bytes than were written (a sink that lost or replaced them).
    pub(crate) tampered: bool,
    /// PersistentVolumes by name, patched as the API server patches them (`test` ops fence).
    pub(crate) volumes: std::sync::Mutex<std::collections::BTreeMap<String, serde_json::Value>>,
    /// Volume patches are refused (no RBAC).
    pub(crate) refuse_volume_patches: bool,
    /// Set by each volume patch: a flag of the run's `Stop` raised right after it.
    pub(crate) raise_on_volume_patch: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Set by each volume read: a flag raised between a read and the patch that follows it.
    pub(crate) raise_on_volume_read: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Kept {
    /// The ports of a run that keeps its manifests here.
    pub(crate) fn keep(&self) -> crate::collect_sessions::Keep<'_> {
        crate::collect_sessions::Keep {
            sink: self,
            store: self,
            volumes: self,
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
        _: &str,
        _: &str,
    ) -> Result<Option<crate::ports::Receipt>, crate::ports::StoreError> {
        unreachable!("the session run reads no receipt")
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
}
