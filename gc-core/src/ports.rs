//! The ports the engine drives: the cluster and the store. Adapters implement them
//! (`gc-k8s`, `gc-store`) and map their driver errors once, at this seam, into the errors below.
//!
//! Objects cross the cluster port as JSON text, exactly as the API server sends it, so the same
//! readers serve a live cluster and an inventory file.

use async_trait::async_trait;
use thiserror::Error;

use crate::pods::ledger::{Ledger, PreviousLedger};

/// What a cluster call can fail with. Every adapter MUST map its errors to these.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClusterError {
    /// The object does not exist (HTTP 404).
    #[error("not found: {0}")]
    NotFound(String),
    /// The object changed under us: a failed precondition (HTTP 409) or a failed JSON-patch
    /// `test` op (HTTP 422 whose cause is the failed test). Any other 422 (validation) is
    /// `Other`. Skip and re-check on the next run.
    #[error("the object changed ({status}): {message}")]
    Changed {
        /// 409 or 422.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The credentials may not do this (HTTP 403): `verb` on `resource` in `namespace`.
    #[error("forbidden: cannot {verb} {resource} in namespace {namespace}: {message}")]
    Forbidden {
        /// The refused verb (`list`, `patch`, ...).
        verb: String,
        /// The resource (`pods`, ...).
        resource: String,
        /// The namespace.
        namespace: String,
        /// The server's message.
        message: String,
    },
    /// A list's continue token expired (HTTP 410): restart the list.
    #[error("continue token expired")]
    Expired,
    /// The server could not be reached or answered 5xx or 429, after the client's retries.
    #[error("cluster unavailable: {0}")]
    Unavailable(String),
    /// Anything else: a bad request, unreadable response, or bad credentials (401).
    #[error("cluster error: {0}")]
    Other(String),
}

/// One page of a list: the `PodList` JSON text and the token for the next page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The list's JSON text (`{"items": [...], ...}`), as the server sent it.
    pub text: Vec<u8>,
    /// `metadata.continue`, when more pages follow.
    pub continue_token: Option<String>,
}

/// Which Pods to list: one namespace, server-side selectors, a page size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodQuery {
    /// The namespace.
    pub namespace: String,
    /// `key=value` label selector (`diagnostics.example.com/collect=true`).
    pub label_selector: String,
    /// Field selector (`status.phase=Failed`).
    pub field_selector: String,
    /// Page size.
    pub limit: u32,
}

/// `uid` and `resourceVersion` a write must find unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preconditions {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
}

/// The cluster as the failed-Pod collector sees it.
///
/// # Errors
/// Every method returns [`ClusterError`]; 404 MUST be `NotFound` (or `Ok(None)` where the
/// signature allows), 409 and a 422 from a failed `test` op MUST be `Changed`, any other 422
/// `Other`, 403 `Forbidden`, 410 `Expired`.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// One page of Pods matching `query`, from `continue_token` when given.
    async fn list_pods(
        &self,
        query: &PodQuery,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError>;
    /// One page of every Pod in `namespace`, whatever its labels and phase, metadata only (a
    /// `PartialObjectMetadataList`'s JSON text), from `continue_token` when given.
    async fn list_pod_metadata(
        &self,
        namespace: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError>;
    /// The Pod's JSON text, or `None` when it does not exist.
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError>;
    /// Applies a JSON patch (which starts with `test` ops); returns the patched Pod's JSON text.
    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError>;
    /// Deletes with preconditions; returns the Pod's JSON text as the server answered (still
    /// present while a finalizer holds it), or `None` when it is gone at once.
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<Option<Vec<u8>>, ClusterError>;
}

/// What a store call can fail with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// The database could not be reached or refused the credentials.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Stored data that cannot be read back.
    #[error("store data is malformed: {0}")]
    Malformed(String),
    /// What was asked for does not exist (an archive URI with nothing behind it).
    #[error("not found: {0}")]
    NotFound(String),
    /// Any other database error.
    #[error("store error: {0}")]
    Other(String),
}

/// A record that an object's archive was written and verified: a failed Pod's, or a session
/// resource's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The cluster.
    pub cluster_id: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's uid.
    pub uid: String,
    /// The object's name.
    pub name: String,
    /// Where the archive is.
    pub uri: String,
    /// Hex sha256 of the archive's bytes.
    pub sha256: String,
    /// The archive's size.
    pub bytes: u64,
    /// For a session resource's manifest, what else names it; `None` for a Pod's archive.
    pub session: Option<SessionObject>,
}

/// What a receipt of a session resource's manifest records besides what every receipt does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionObject {
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// The session id its label carried (`None`: the label was absent).
    pub session: Option<String>,
    /// The instant of the run that archived it (RFC 3339).
    pub run_at: String,
    /// For a claim whose volume was kept: the PersistentVolume's name and its reclaim policy
    /// before it was set to `Retain`.
    pub retained: Option<RetainedVolume>,
}

/// A PersistentVolume a run set to `Retain` before deleting its claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetainedVolume {
    /// The PersistentVolume's name.
    pub name: String,
    /// Its reclaim policy before (`Delete`).
    pub policy: String,
}

impl Receipt {
    /// The object's kind: `Pod`, or the session resource's.
    #[must_use]
    pub fn kind(&self) -> &str {
        self.session.as_ref().map_or("Pod", |s| s.kind.as_str())
    }

    /// The object's `apiVersion`: `v1` for a Pod.
    #[must_use]
    pub fn api_version(&self) -> &str {
        self.session
            .as_ref()
            .map_or("v1", |s| s.api_version.as_str())
    }

    /// What is wrong with `bytes` as the archive this receipt records, if anything
    /// ([`crate::pods::archive::mismatch`] with the pointer at the uid of this receipt's kind).
    #[must_use]
    pub fn mismatch(&self, bytes: &[u8]) -> Option<String> {
        let pointer = if self.session.is_some() {
            crate::sessions::manifest::UID_POINTER
        } else {
            "/metadata/uid"
        };
        let what = format!("{} {}", self.kind(), self.uid);
        crate::pods::archive::mismatch_at(bytes, &self.sha256, Some(self.bytes), pointer, &what)
    }
}

/// Where ledgers and receipts live.
///
/// # Errors
/// Every method returns [`StoreError`]; a store that cannot be read MUST NOT answer "empty".
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Store: Send + Sync {
    /// The observation ledger of a cluster and namespace (empty when none was saved).
    async fn load_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
    ) -> Result<PreviousLedger, StoreError>;
    /// Replaces the observation ledger of a cluster and namespace.
    async fn save_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
        ledger: &Ledger,
    ) -> Result<(), StoreError>;
    /// Records (or replaces) an archive receipt.
    async fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError>;
    /// The receipt of a Pod by cluster and uid.
    async fn get_receipt(&self, cluster_id: &str, uid: &str)
    -> Result<Option<Receipt>, StoreError>;
}

/// The receipts of a session's objects, as a restore reads them back.
///
/// # Errors
/// [`StoreError`]; a store that cannot be read MUST NOT answer "none".
#[async_trait]
pub trait SessionReceipts: Send + Sync {
    /// Every receipt of the objects that carried the session label `session` in `namespace` of
    /// `cluster_id`, newest first.
    async fn session_receipts(
        &self,
        cluster_id: &str,
        namespace: &str,
        session: &str,
    ) -> Result<Vec<Receipt>, StoreError>;
    /// Where the receipts are kept, with no secret in it (for messages).
    fn shown(&self) -> String;
}

/// Where archives go. Adapters MUST make a write durable before returning (write to a temporary
/// name, sync, rename) and derive names only from the `key` given.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait ArchiveSink: Send + Sync {
    /// Stores `bytes` under `key` (`<cluster>/<namespace>/<uid>`); returns the archive's URI.
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError>;
    /// Reads an archive back by its URI.
    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError>;
}

/// What names an archive: never user-controlled text alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveKey {
    /// The cluster (validated: `[a-z0-9-]`).
    pub cluster_id: String,
    /// The namespace (validated: a DNS label).
    pub namespace: String,
    /// The Pod's uid, as the API server gave it.
    pub uid: String,
}

/// Time, as the engine needs it: the current instant and a pause.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Clock: Send + Sync {
    /// Seconds since the Unix epoch.
    fn now(&self) -> f64;
    /// Waits `seconds`.
    async fn sleep(&self, seconds: f64);
}

/// The cluster as the session collector sees it: metadata-only lists of any kind, fenced deletes.
///
/// # Errors
/// As [`Cluster`]: 404 (a kind whose CRD is not installed) MUST be `NotFound`, 409/422 `Changed`.
#[async_trait]
pub trait ObjectCluster: Send + Sync {
    /// One page of `kind` objects in `namespace` matching the label `selector`, metadata only
    /// (a `PartialObjectMetadataList`'s JSON text).
    async fn list_metadata(
        &self,
        kind: &crate::sessions::Kind,
        namespace: &str,
        selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError>;
    /// The whole object's JSON text, or `None` when it does not exist.
    async fn get_object(
        &self,
        kind: &crate::sessions::Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError>;
    /// One page of whole `kind` objects in `namespace` matching the label `selector` (a list's
    /// JSON text, items as the server sends them: a built-in kind's items may lack `apiVersion`
    /// and `kind`): a run reads the objects it is about to delete this way, many per request.
    /// Default: not offered ([`ClusterError::NotFound`]), and each object is read by
    /// [`ObjectCluster::get_object`].
    async fn list_objects(
        &self,
        kind: &crate::sessions::Kind,
        namespace: &str,
        selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let _ = (kind, namespace, selector, limit, continue_token);
        Err(ClusterError::NotFound(
            "whole-object lists are not offered".into(),
        ))
    }
    /// Deletes with uid and resourceVersion preconditions and background propagation; with
    /// `dry_run`, server-side dry run.
    async fn delete_object(
        &self,
        kind: &crate::sessions::Kind,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError>;
    /// As [`ObjectCluster::delete_object`], for an object that owns others the run scanned
    /// (StreamSpace v1's `Session`, owner of its Deployment and Service): what it owns MUST be
    /// left in place (propagation `Orphan`), so that Kubernetes' garbage collector never deletes
    /// an object gc kept, or before gc archived it. A cluster without a garbage collector (a
    /// fake) may leave the default, a plain delete.
    async fn delete_owner(
        &self,
        kind: &crate::sessions::Kind,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        self.delete_object(kind, namespace, name, preconditions, dry_run)
            .await
    }
}

/// Creating an object of a session kind, as a restore creates one again from its archive.
///
/// # Errors
/// As [`Cluster`]: an object of that name already there MUST be `Changed` (409).
#[async_trait]
pub trait ObjectCreator: Send + Sync {
    /// Creates `object` (JSON text) of `kind` in `namespace`; with `dry_run`, a server-side dry
    /// run. Answers the created object's JSON text (a dry run's carries the uid it would have).
    async fn create_object(
        &self,
        kind: &crate::sessions::Kind,
        namespace: &str,
        object: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError>;
}

/// PersistentVolumes (cluster-scoped), as the session collector keeps a deleted claim's volume
/// and later gives it back its reclaim policy.
///
/// # Errors
/// As [`Cluster`]: 404 MUST be `Ok(None)` where the signature allows, a failed `test` op
/// `Changed`, 403 `Forbidden`.
#[async_trait]
pub trait Volumes: Send + Sync {
    /// The PersistentVolume's JSON text, or `None` when it does not exist.
    async fn get_volume(&self, name: &str) -> Result<Option<Vec<u8>>, ClusterError>;
    /// One page of the PersistentVolumes the label `selector` matches (whole objects).
    async fn list_volumes(
        &self,
        selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError>;
    /// Applies a JSON patch (which starts with `test` ops); with `dry_run`, server-side dry run.
    async fn patch_volume(
        &self,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError>;
    /// The PersistentVolumeClaim `namespace`/`name`'s JSON text, or `None` when it does not
    /// exist: whether the claim a restore moved a kept volume to is gone. Default: not offered
    /// ([`ClusterError::NotFound`]), and such a claim is taken as still there (its volume kept
    /// from its restore).
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        Err(ClusterError::NotFound(format!(
            "reading claims ({namespace}/{name}) is not offered"
        )))
    }
}

/// The application's session table, read only.
///
/// # Errors
/// [`StoreError`] for any database error: the caller deletes nothing then. An id MUST be in the
/// answer (as a row or as missing) or the call MUST fail.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait SessionDirectory: Send + Sync {
    /// What the table says of each of `ids`, in one round trip.
    async fn lookup(
        &self,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, crate::sessions::Row>, StoreError>;
}

/// Who a caller of the request API is, as the API server authenticated its token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    /// The user name (`system:serviceaccount:NS:NAME` for a ServiceAccount).
    pub user: String,
    /// The user's uid.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// The authenticator's extra fields (a ServiceAccount token's Pod name and uid).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// What a caller asks to do, as a `SubjectAccessReview`'s resource attributes: `verb` on
/// `resource`/`subresource` of the collector's own API group, in `namespace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked<'a> {
    /// The verb (`get`, `create`).
    pub verb: &'a str,
    /// The resource (`sessions`, `runs`, `status`).
    pub resource: &'a str,
    /// The subresource (`plan`, `collect`, `restore`), or empty.
    pub subresource: &'a str,
    /// The namespace, or empty for the whole collector.
    pub namespace: &'a str,
}

/// The API server's answers about a caller: who its token is (`TokenReview`, for `audience`),
/// and whether it may do what it asks (`SubjectAccessReview`).
///
/// # Errors
/// [`ClusterError`]: the API server could not answer; the caller is refused (no answer is no).
#[async_trait]
pub trait Access: Send + Sync {
    /// The caller `token` authenticates as for `audience`, or `None` when the API server says
    /// it is not authenticated (a wrong audience, expired, revoked): the reason.
    async fn authenticate(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<Result<Caller, String>, ClusterError>;
    /// Whether `caller` may do what it `asked`, in the API group `group`, with the reason the
    /// authorizer gave when it may not.
    async fn authorize(
        &self,
        caller: &Caller,
        group: &str,
        asked: Asked<'_>,
    ) -> Result<Result<(), String>, ClusterError>;
}

#[async_trait]
impl<T: Access + ?Sized> Access for std::sync::Arc<T> {
    async fn authenticate(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<Result<Caller, String>, ClusterError> {
        (**self).authenticate(token, audience).await
    }
    async fn authorize(
        &self,
        caller: &Caller,
        group: &str,
        asked: Asked<'_>,
    ) -> Result<Result<(), String>, ClusterError> {
        (**self).authorize(caller, group, asked).await
    }
}

/// One run at a time per namespace: a `coordination.k8s.io` Lease, written with
/// resourceVersion fencing so that two runs cannot both take it.
///
/// # Errors
/// [`ClusterError`]; a lost race (409) is not an error but `None`.
#[async_trait]
pub trait Lock: Send + Sync {
    /// The fence on the holder's last write of the Lease (its resourceVersion and renew time).
    type Token: Clone + Send + Sync;
    /// Takes the lease `name` in `namespace` for `holder` for `ttl_seconds`, when it is free,
    /// expired, or already `holder`'s: the fence on that write. `None` when another holder has
    /// it.
    async fn acquire(
        &self,
        namespace: &str,
        name: &str,
        holder: &str,
        ttl_seconds: u32,
    ) -> Result<Option<Self::Token>, ClusterError>;
    /// Renews a lease `holder` took and last wrote as `held`, fenced on that write.
    /// [`Renewal::Lost`] when it expired or was written by anyone else since: the run must write
    /// nothing more, and the lease is left as it is. An error is no loss by itself.
    async fn renew(
        &self,
        namespace: &str,
        name: &str,
        holder: &str,
        ttl_seconds: u32,
        held: &Self::Token,
    ) -> Result<Renewal<Self::Token>, ClusterError>;
    /// [`Lock::acquire`], saying only whether it was taken.
    async fn try_acquire(
        &self,
        namespace: &str,
        name: &str,
        holder: &str,
        ttl_seconds: u32,
    ) -> Result<bool, ClusterError> {
        Ok(self
            .acquire(namespace, name, holder, ttl_seconds)
            .await?
            .is_some())
    }
    /// Gives the lease up when `holder` has it (fenced on its resourceVersion).
    async fn release(&self, namespace: &str, name: &str, holder: &str) -> Result<(), ClusterError>;
    /// Who holds the lease `name` in `namespace` now, and until when; `None` when nobody does
    /// (no Lease, given up, or expired). Reads only.
    async fn holder(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<LeaseHolder>, ClusterError>;
}

/// A lease's holder, as [`Lock::holder`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseHolder {
    /// Who: a run's holder identity (`gc-cli@HOST/PID`, ...).
    pub holder: String,
    /// When its hold ends unless renewed (seconds since the epoch).
    pub until: f64,
}

/// What a renewal found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal<T> {
    /// Still held, renewed now: the fence on this write.
    Renewed(T),
    /// The lock is lost, and why: the Lease expired, or changed hands (or was written by
    /// anyone else at all) since the holder's last write. A lost lease is never taken back.
    Lost(String),
}

/// Lists what spans every namespace: the Namespaces themselves, and every namespace's Pods
/// (what finds pins in namespaces a run does not cover).
///
/// # Errors
/// As [`Cluster`]'s calls: 403 MUST be `Forbidden` (a namespaced identity cannot list the
/// cluster's Namespaces).
#[async_trait]
pub trait Namespaces: Send + Sync {
    /// The name of every Namespace whose labels match `selector` (a label selector the API
    /// server applies), sorted.
    async fn list_namespaces(&self, selector: Option<&str>) -> Result<Vec<String>, ClusterError>;
    /// One page of every namespace's Pods' metadata (a `PartialObjectMetadataList`'s JSON
    /// text), from `continue_token` when given.
    async fn list_all_pod_metadata(
        &self,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError>;
}

/// Where Events go: the cluster's `events.k8s.io` API, or an embedder's own.
///
/// # Errors
/// As the cluster answers; a [`ClusterError::Forbidden`] or [`ClusterError::Unavailable`]
/// stops the posting for the rest of the run.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Posts `record`, reported by `reporter`, now.
    async fn post_event(
        &self,
        record: &crate::events::EventRecord,
        reporter: &crate::events::Reporter,
    ) -> Result<(), ClusterError>;
}

/// An archive sink as a run uses it: proved usable before its first write ([`Sink::probe`]) and
/// named in what the run says ([`Sink::shown`]).
#[async_trait]
pub trait Sink: ArchiveSink {
    /// Writes a probe and reads it back.
    ///
    /// # Errors
    /// When the sink does not take writes or does not give them back.
    async fn probe(&self, cluster_id: &str) -> Result<(), StoreError>;
    /// Where it is, with no secret in it.
    fn shown(&self) -> String;
    /// Whether the archive `uri` names is in this sink (a receipt may name another).
    fn holds(&self, uri: &str) -> bool;
}

/// The store of receipts and ledgers as a collector opens it, once per namespace's run: a store
/// that cannot be opened stops that run before it plans; one that is back by the next
/// namespace's run is used there.
#[async_trait]
pub trait OpenStore: Send + Sync {
    /// The store opened.
    type Store: Store;
    /// Opens it.
    ///
    /// # Errors
    /// When it cannot be opened (or is not there at all: [`StoreError::Unavailable`]).
    async fn open(&self) -> Result<Self::Store, StoreError>;
}

/// A store already open, shared: every run uses it.
#[async_trait]
impl<S: Store + 'static> OpenStore for std::sync::Arc<S> {
    type Store = std::sync::Arc<S>;
    async fn open(&self) -> Result<std::sync::Arc<S>, StoreError> {
        Ok(std::sync::Arc::clone(self))
    }
}

/// No store (`None`): for a collector that only plans from a ledger file and records nothing.
/// Any run that needs the store fails, saying so.
#[async_trait]
impl<O: OpenStore> OpenStore for Option<O> {
    type Store = O::Store;
    async fn open(&self) -> Result<O::Store, StoreError> {
        match self {
            Some(store) => store.open().await,
            None => Err(StoreError::Unavailable(
                "this collector was built without a store".into(),
            )),
        }
    }
}

/// The account a restore acts as, whatever the caller's own rights: a cluster whose writes are
/// that account's, had afresh for each restore.
#[async_trait]
pub trait RestoreAccount<C>: Send + Sync {
    /// The account, as answers and logs name it.
    fn name(&self) -> &str;
    /// A cluster acting as the account.
    ///
    /// # Errors
    /// The credentials could not be had: nothing is restored.
    async fn act(&self) -> Result<C, ClusterError>;
}

/// What a failed-Pod collector's cluster must do: list, pin, patch and delete Pods, list every
/// namespace's Pods, hold the run lock, and post Events (`gc_k8s::KubeCluster` does all of it).
pub trait PodCluster: Cluster + Namespaces + Lock + EventSink + Clone + 'static {}

impl<T: Cluster + Namespaces + Lock + EventSink + Clone + 'static> PodCluster for T {}

/// What a session collector's cluster must do: list, read and delete the labelled objects, keep
/// and give back volumes, hold the run lock, and post Events (`gc_k8s::KubeCluster` does
/// all of it).
pub trait SessionCluster: ObjectCluster + Volumes + Lock + EventSink + Clone + 'static {}

impl<T: ObjectCluster + Volumes + Lock + EventSink + Clone + 'static> SessionCluster for T {}

/// A port shared behind an [`Arc`](std::sync::Arc) is the port: an embedder builds its collector
/// from parts it also keeps.
mod shared {
    use std::collections::HashMap;
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::{
        ArchiveKey, ArchiveSink, ClusterError, Ledger, ObjectCluster, ObjectCreator, Page,
        Preconditions, PreviousLedger, Receipt, SessionDirectory, SessionReceipts, Store,
        StoreError, Volumes,
    };
    use crate::sessions::{Kind, Row};

    #[async_trait]
    impl<T: SessionReceipts + ?Sized> SessionReceipts for Arc<T> {
        async fn session_receipts(
            &self,
            cluster: &str,
            ns: &str,
            session: &str,
        ) -> Result<Vec<Receipt>, StoreError> {
            (**self).session_receipts(cluster, ns, session).await
        }
        fn shown(&self) -> String {
            (**self).shown()
        }
    }

    #[async_trait]
    impl<T: ObjectCreator + ?Sized> ObjectCreator for Arc<T> {
        async fn create_object(
            &self,
            kind: &Kind,
            ns: &str,
            object: &[u8],
            dry_run: bool,
        ) -> Result<Vec<u8>, ClusterError> {
            (**self).create_object(kind, ns, object, dry_run).await
        }
    }

    #[async_trait]
    impl<T: Store + ?Sized> Store for Arc<T> {
        async fn load_ledger(&self, cluster: &str, ns: &str) -> Result<PreviousLedger, StoreError> {
            (**self).load_ledger(cluster, ns).await
        }
        async fn save_ledger(&self, cluster: &str, ns: &str, l: &Ledger) -> Result<(), StoreError> {
            (**self).save_ledger(cluster, ns, l).await
        }
        async fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
            (**self).put_receipt(receipt).await
        }
        async fn get_receipt(
            &self,
            cluster: &str,
            uid: &str,
        ) -> Result<Option<Receipt>, StoreError> {
            (**self).get_receipt(cluster, uid).await
        }
    }

    #[async_trait]
    impl<T: ArchiveSink + ?Sized> ArchiveSink for Arc<T> {
        async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
            (**self).write(key, bytes).await
        }
        async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
            (**self).read(uri).await
        }
    }

    #[async_trait]
    impl<T: ObjectCluster + ?Sized> ObjectCluster for Arc<T> {
        async fn list_metadata(
            &self,
            kind: &Kind,
            namespace: &str,
            selector: &str,
            limit: u32,
            continue_token: Option<&str>,
        ) -> Result<Page, ClusterError> {
            let this = &**self;
            this.list_metadata(kind, namespace, selector, limit, continue_token)
                .await
        }
        async fn get_object(
            &self,
            kind: &Kind,
            namespace: &str,
            name: &str,
        ) -> Result<Option<Vec<u8>>, ClusterError> {
            (**self).get_object(kind, namespace, name).await
        }
        async fn list_objects(
            &self,
            kind: &Kind,
            namespace: &str,
            selector: &str,
            limit: u32,
            continue_token: Option<&str>,
        ) -> Result<Page, ClusterError> {
            let this = &**self;
            this.list_objects(kind, namespace, selector, limit, continue_token)
                .await
        }
        async fn delete_object(
            &self,
            kind: &Kind,
            namespace: &str,
            name: &str,
            preconditions: &Preconditions,
            dry_run: bool,
        ) -> Result<(), ClusterError> {
            let this = &**self;
            this.delete_object(kind, namespace, name, preconditions, dry_run)
                .await
        }
    }

    #[async_trait]
    impl<T: Volumes + ?Sized> Volumes for Arc<T> {
        async fn get_volume(&self, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
            (**self).get_volume(name).await
        }
        async fn list_volumes(
            &self,
            selector: &str,
            limit: u32,
            continue_token: Option<&str>,
        ) -> Result<Page, ClusterError> {
            (**self).list_volumes(selector, limit, continue_token).await
        }
        async fn patch_volume(
            &self,
            name: &str,
            patch: &[u8],
            dry_run: bool,
        ) -> Result<Vec<u8>, ClusterError> {
            (**self).patch_volume(name, patch, dry_run).await
        }
        async fn get_claim(
            &self,
            namespace: &str,
            name: &str,
        ) -> Result<Option<Vec<u8>>, ClusterError> {
            (**self).get_claim(namespace, name).await
        }
    }

    #[async_trait]
    impl<T: SessionDirectory + ?Sized> SessionDirectory for Arc<T> {
        async fn lookup(&self, ids: &[String]) -> Result<HashMap<String, Row>, StoreError> {
            (**self).lookup(ids).await
        }
    }
}
