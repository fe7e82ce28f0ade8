//! Fakes the runtime's own tests share: a Lease as the API server keeps one, and a cluster that
//! is every port a session collector needs, over `gc-core`'s fakes.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use gc_core::ports::{ClusterError, Lock, Renewal};

/// A Lease in memory, as the API server keeps one: its holder and a version every write
/// moves; renewals fenced on the version; faults on demand.
#[derive(Clone, Default)]
pub(crate) struct FakeLease(Arc<Mutex<Stored>>);

/// What the fake API server keeps of the Lease.
#[derive(Default)]
pub(crate) struct Stored {
    pub(crate) holder: Option<String>,
    pub(crate) version: u64,
    pub(crate) acquires: usize,
    pub(crate) renewals: usize,
    /// Every renewal fails (the API server cannot be reached).
    pub(crate) unreachable: bool,
}

impl FakeLease {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, Stored> {
        self.0.lock().unwrap()
    }
    /// Another process takes the Lease (as after an expiry).
    pub(crate) fn taken_by(&self, other: &str) {
        let mut s = self.state();
        s.holder = Some(other.into());
        s.version += 1;
    }
}

#[async_trait]
impl Lock for FakeLease {
    type Token = u64;
    async fn acquire(
        &self,
        _namespace: &str,
        _name: &str,
        holder: &str,
        _ttl: u32,
    ) -> Result<Option<u64>, ClusterError> {
        let mut s = self.state();
        s.acquires += 1;
        if s.holder.as_deref().is_some_and(|h| h != holder) {
            return Ok(None);
        }
        s.holder = Some(holder.into());
        s.version += 1;
        Ok(Some(s.version))
    }
    async fn renew(
        &self,
        _namespace: &str,
        _name: &str,
        holder: &str,
        _ttl: u32,
        held: &u64,
    ) -> Result<Renewal<u64>, ClusterError> {
        let mut s = self.state();
        if s.unreachable {
            return Err(ClusterError::Other("connection refused".into()));
        }
        if s.holder.as_deref() != Some(holder) || s.version != *held {
            return Ok(Renewal::Lost("it is held by another run now".into()));
        }
        s.renewals += 1;
        s.version += 1;
        Ok(Renewal::Renewed(s.version))
    }
    async fn release(&self, _ns: &str, _name: &str, holder: &str) -> Result<(), ClusterError> {
        let mut s = self.state();
        if s.holder.as_deref() == Some(holder) {
            s.holder = None;
            s.version += 1;
        }
        Ok(())
    }
    /// The holder, held until 2100 (the fake has no clock).
    async fn holder(
        &self,
        _ns: &str,
        _name: &str,
    ) -> Result<Option<gc_core::ports::LeaseHolder>, ClusterError> {
        let s = self.state();
        Ok(s.holder.clone().map(|holder| gc_core::ports::LeaseHolder {
            holder,
            until: 4_102_444_800.0,
        }))
    }
}

/// Every port a session collector's cluster is, in memory: `gc-core`'s labelled objects and kept
/// volumes, a [`FakeLease`], and the Events posted; with a hook run before each delete is sent
/// (a freeze, a stop, a loss).
#[derive(Clone)]
pub(crate) struct TestCluster {
    pub(crate) objects: Arc<gc_core::testing::SessionObjects>,
    pub(crate) kept: Arc<gc_core::testing::Kept>,
    pub(crate) lease: FakeLease,
    /// Each Event posted: `reason: note`.
    pub(crate) events: Arc<Mutex<Vec<String>>>,
    /// Runs before each delete is sent, with how many were sent before it.
    pub(crate) before_delete: Arc<dyn Fn(usize) + Send + Sync>,
    /// Pauses each delete this long (on the runtime's timer) before it is sent.
    pub(crate) delete_takes: std::time::Duration,
    /// Each create sent: the object's name, and whether it was a dry run.
    pub(crate) created: Arc<Mutex<Vec<(String, bool)>>>,
    /// Whether a volume patch is refused as one whose fence held (409), given how many were
    /// sent before it.
    pub(crate) volume_patch_conflicts: Arc<dyn Fn(usize) -> bool + Send + Sync>,
    volume_patches: Arc<std::sync::atomic::AtomicUsize>,
}

impl TestCluster {
    /// The sessions a to e, each a Deployment and a `Session`, and volumes as `kept` holds them.
    pub(crate) fn new(kept: Arc<gc_core::testing::Kept>) -> Self {
        Self {
            objects: Arc::new(gc_core::testing::session_objects(false)),
            kept,
            lease: FakeLease::default(),
            events: Arc::default(),
            before_delete: Arc::new(|_| {}),
            delete_takes: std::time::Duration::ZERO,
            created: Arc::default(),
            volume_patch_conflicts: Arc::new(|_| false),
            volume_patches: Arc::default(),
        }
    }

    /// The objects whose deletes were sent for real, gone (as the API server ends a delete).
    pub(crate) fn finish_deletes(&self) {
        let gone: Vec<String> = (self.deleted().into_iter())
            .filter(|(_, dry_run)| !dry_run)
            .map(|(name, _)| name)
            .collect();
        let mut objects = self.objects.objects.lock().unwrap();
        objects.retain(|(_, o)| !gone.iter().any(|name| o["metadata"]["name"] == **name));
    }

    /// The deletes sent: name, and whether each was a dry run.
    pub(crate) fn deleted(&self) -> Vec<(String, bool)> {
        self.objects.deleted.lock().unwrap().clone()
    }
}

#[async_trait]
impl gc_core::ports::ObjectCluster for TestCluster {
    async fn list_metadata(
        &self,
        kind: &gc_core::sessions::Kind,
        namespace: &str,
        selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<gc_core::ports::Page, ClusterError> {
        let objects = &self.objects;
        objects
            .list_metadata(kind, namespace, selector, limit, continue_token)
            .await
    }
    async fn get_object(
        &self,
        kind: &gc_core::sessions::Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        // Whole, as the API server answers: with its apiVersion and kind.
        let found = self.objects.get_object(kind, namespace, name).await?;
        Ok(found.map(|text| {
            let mut object: serde_json::Value = serde_json::from_slice(&text).unwrap();
            object["apiVersion"] = kind.api_version().into();
            object["kind"] = kind.kind.clone().into();
            object.to_string().into_bytes()
        }))
    }
    async fn delete_object(
        &self,
        kind: &gc_core::sessions::Kind,
        namespace: &str,
        name: &str,
        preconditions: &gc_core::ports::Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        (self.before_delete)(self.deleted().len());
        tokio::time::sleep(self.delete_takes).await;
        let objects = &self.objects;
        objects
            .delete_object(kind, namespace, name, preconditions, dry_run)
            .await
    }
}

/// A create as the API server answers it: refused (409) when an object of that kind and name
/// exists, else given a new uid (kept unless a dry run).
#[async_trait]
impl gc_core::ports::ObjectCreator for TestCluster {
    async fn create_object(
        &self,
        kind: &gc_core::sessions::Kind,
        _namespace: &str,
        object: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        let mut object: serde_json::Value = serde_json::from_slice(object).unwrap();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        self.created.lock().unwrap().push((name.clone(), dry_run));
        let mut objects = self.objects.objects.lock().unwrap();
        if objects
            .iter()
            .any(|(k, o)| *k == kind.kind && o["metadata"]["name"] == *name)
        {
            let message = format!("{} {name} already exists", kind.plural);
            return Err(ClusterError::Changed {
                status: 409,
                message,
            });
        }
        object["metadata"]["uid"] = format!("u-new-{name}").into();
        object["metadata"]["resourceVersion"] = "1".into();
        if !dry_run {
            objects.push((kind.kind.clone(), object.clone()));
        }
        Ok(object.to_string().into_bytes())
    }
}

#[async_trait]
impl gc_core::ports::Volumes for TestCluster {
    async fn get_volume(&self, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        self.kept.get_volume(name).await
    }
    async fn list_volumes(
        &self,
        selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<gc_core::ports::Page, ClusterError> {
        self.kept
            .list_volumes(selector, limit, continue_token)
            .await
    }
    async fn patch_volume(
        &self,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        let sent = (self.volume_patches).fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if (self.volume_patch_conflicts)(sent) {
            return Err(ClusterError::Changed {
                status: 409,
                message: format!("persistentvolumes {name}: the object has been modified"),
            });
        }
        self.kept.patch_volume(name, patch, dry_run).await
    }
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        self.kept.get_claim(namespace, name).await
    }
}

/// An archive sink in memory (`gc-core`'s [`Kept`](gc_core::testing::Kept), or the Pod fake)
/// whose probe is refused when told to.
pub(crate) struct TestSink<A = gc_core::testing::Kept>(pub(crate) Arc<A>, pub(crate) bool);

#[async_trait]
impl<A: gc_core::ports::ArchiveSink> gc_core::ports::ArchiveSink for TestSink<A> {
    async fn write(
        &self,
        key: &gc_core::ports::ArchiveKey,
        bytes: &[u8],
    ) -> Result<String, gc_core::ports::StoreError> {
        self.0.write(key, bytes).await
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, gc_core::ports::StoreError> {
        self.0.read(uri).await
    }
}

#[async_trait]
impl<A: gc_core::ports::ArchiveSink> gc_core::ports::Sink for TestSink<A> {
    async fn probe(&self, _cluster_id: &str) -> Result<(), gc_core::ports::StoreError> {
        if self.1 {
            return Err(gc_core::ports::StoreError::Unavailable("disk full".into()));
        }
        Ok(())
    }
    fn shown(&self) -> String {
        "memory".into()
    }
    fn holds(&self, uri: &str) -> bool {
        uri.starts_with("mem://")
    }
}

/// Every port a failed-Pod collector's cluster is, in memory: `gc-core`'s stateful fake of the
/// Pod protocol (its faults and its guarantees), a [`FakeLease`], and the Events posted; with a
/// hook run before each delete is sent and the time a delete takes (a freeze, a stop, a loss).
#[derive(Clone)]
pub(crate) struct TestPods {
    pub(crate) fake: Arc<gc_core::testing::pods::Fake>,
    pub(crate) lease: FakeLease,
    pub(crate) events: Arc<Mutex<Vec<String>>>,
    /// Called with the number of deletes sent before this one.
    pub(crate) before_delete: Arc<dyn Fn(usize) + Send + Sync>,
    pub(crate) delete_takes: std::time::Duration,
    deletes: Arc<std::sync::atomic::AtomicUsize>,
}

impl TestPods {
    pub(crate) fn new(fake: gc_core::testing::pods::Fake) -> Self {
        Self {
            fake: Arc::new(fake),
            lease: FakeLease::default(),
            events: Arc::default(),
            before_delete: Arc::new(|_| {}),
            delete_takes: std::time::Duration::ZERO,
            deletes: Arc::default(),
        }
    }
}

#[async_trait]
impl gc_core::ports::Cluster for TestPods {
    async fn list_pods(
        &self,
        query: &gc_core::ports::PodQuery,
        token: Option<&str>,
    ) -> Result<gc_core::ports::Page, ClusterError> {
        self.fake.list_pods(query, token).await
    }
    async fn list_pod_metadata(
        &self,
        namespace: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<gc_core::ports::Page, ClusterError> {
        self.fake.list_pod_metadata(namespace, limit, token).await
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        self.fake.get_pod(namespace, name).await
    }
    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        self.fake.patch_pod(namespace, name, patch, dry_run).await
    }
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        preconditions: &gc_core::ports::Preconditions,
        dry_run: bool,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        let sent = self
            .deletes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (self.before_delete)(sent);
        tokio::time::sleep(self.delete_takes).await;
        self.fake
            .delete_pod(namespace, name, preconditions, dry_run)
            .await
    }
}

#[async_trait]
impl gc_core::ports::Namespaces for TestPods {
    async fn list_namespaces(&self, _: Option<&str>) -> Result<Vec<String>, ClusterError> {
        let w = self.fake.w();
        let mut names: Vec<String> = (w.pods.values())
            .filter_map(|p| p["metadata"]["namespace"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }
    async fn list_all_pod_metadata(
        &self,
        _limit: u32,
        _token: Option<&str>,
    ) -> Result<gc_core::ports::Page, ClusterError> {
        let w = self.fake.w();
        let items: Vec<serde_json::Value> = (w.pods.values())
            .map(|p| serde_json::json!({"metadata": p["metadata"]}))
            .collect();
        let text = serde_json::json!({ "items": items }).to_string();
        Ok(gc_core::ports::Page {
            text: text.into_bytes(),
            continue_token: None,
        })
    }
}

/// The run lock and the Events of a test cluster: its [`FakeLease`], and each Event posted
/// recorded as `reason: note`.
macro_rules! leased {
    ($($cluster:ty),*) => {$(
        #[async_trait]
        impl Lock for $cluster {
            type Token = u64;
            async fn acquire(
                &self,
                namespace: &str,
                name: &str,
                holder: &str,
                ttl: u32,
            ) -> Result<Option<u64>, ClusterError> {
                self.lease.acquire(namespace, name, holder, ttl).await
            }
            async fn renew(
                &self,
                namespace: &str,
                name: &str,
                holder: &str,
                ttl: u32,
                held: &u64,
            ) -> Result<Renewal<u64>, ClusterError> {
                self.lease.renew(namespace, name, holder, ttl, held).await
            }
            async fn release(
                &self,
                namespace: &str,
                name: &str,
                holder: &str,
            ) -> Result<(), ClusterError> {
                self.lease.release(namespace, name, holder).await
            }
            async fn holder(
                &self,
                namespace: &str,
                name: &str,
            ) -> Result<Option<gc_core::ports::LeaseHolder>, ClusterError> {
                self.lease.holder(namespace, name).await
            }
        }

        #[async_trait]
        impl gc_core::ports::EventSink for $cluster {
            async fn post_event(
                &self,
                record: &gc_core::events::EventRecord,
                _: &gc_core::events::Reporter,
            ) -> Result<(), ClusterError> {
                let line = format!("{}: {}", record.reason, record.note);
                self.events.lock().unwrap().push(line);
                Ok(())
            }
        }
    )*};
}

leased!(TestCluster, TestPods);
