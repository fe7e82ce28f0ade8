//! The stateful fake of the failed-Pod protocol's ports: one in-memory world that is the
//! cluster (with Kubernetes' finalizer, precondition and JSON-patch semantics), the store, the
//! archive sink and the clock, with a fault injected at any call (an error, a refusal, a crash,
//! a write whose response is lost, or someone else changing the Pod, its archive or its receipt
//! just before the call), and the guarantees every run must keep checked as it goes
//! ([`World::violations`], [`invariants`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::PodConfig;
use crate::pods::archive;
use crate::pods::inventory;
use crate::pods::ledger::PreviousLedger;
use crate::pods::plan::{Target, plan_pods};
use crate::ports::{
    ArchiveKey, ArchiveSink, Clock, Cluster, ClusterError, Page, PodQuery, Preconditions, Receipt,
    Store, StoreError,
};

/// The instant the world starts at.
pub const NOW: f64 = 1_795_953_600.0;
/// The pin (the collector's finalizer).
pub const PIN: &str = "diagnostics.example.com/collector";
/// The collect label's key (its value `true`).
pub const LABEL: &str = "diagnostics.example.com/collect";
/// Someone else's finalizer.
pub const OTHER: &str = "example.com/other";
/// The default protect label's key (its value `true`).
pub const PROTECT: &str = "gc.example.com/protect";
/// A day in seconds.
pub const DAY: f64 = 86_400.0;

#[derive(Debug, Clone, Copy, PartialEq)]
/// What goes wrong at a call.
pub enum Fault {
    /// The call fails (timeout, 5xx): no effect.
    Error,
    /// The call is refused as a conflict (409).
    Conflict,
    /// A JSON-patch `test` op failed (422).
    TestFailed,
    /// The call is refused by validation (a 422 that is not a failed `test`).
    Invalid,
    /// The process stops: this call and every later one have no effect.
    Crash,
    /// The call takes effect, but its response is lost (a timeout after the server acted).
    Lost,
    /// Someone else changes the call's Pod (or its archive or receipt) just before the call,
    /// which then goes ahead.
    Meddle(Change),
}

/// What someone else does between two steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Removes the collect label.
    Relabel,
    /// Adds the protect label: the Pod stays eligible, and must never be archived or deleted
    /// by the collector unless its deletion was asked for already.
    Protect,
    /// Adds an annotation (as a controller replying to the pin does): nothing the collector
    /// judges by changes.
    Annotate,
    /// Adds a finalizer of its own (refused by the server on a Pod being deleted).
    Finalizer,
    /// Changes the status (the Pod stays eligible).
    Status,
    /// Removes the pin (as `kubectl patch` can): a Pod being deleted then goes.
    Unpin,
    /// Removes someone else's finalizer (its controller is done).
    Unhold,
    /// Strips the Pod's finalizers (even the pin), so that it goes, and creates a running Pod of
    /// the same name.
    Replace,
    /// Deletes the Pod (a finalizer holds it: it is then being deleted).
    Delete,
    /// Overwrites the Pod's archive with another one (only before a read of the Pod whose
    /// deletion the collector has not asked for: the fence is the last such read, and from then
    /// on the sink keeps what the fence verified).
    Archive,
    /// Overwrites the Pod's receipt with a stale one (another hash; as `Archive`, only up to
    /// the fence).
    Receipt,
}

/// Every change someone else makes.
pub const CHANGES: [Change; 10] = [
    Change::Relabel,
    Change::Protect,
    Change::Annotate,
    Change::Finalizer,
    Change::Status,
    Change::Unpin,
    Change::Replace,
    Change::Delete,
    Change::Archive,
    Change::Receipt,
];

/// Every fault but a meddling.
pub const FAULTS: [Fault; 6] = [
    Fault::Error,
    Fault::Conflict,
    Fault::TestFailed,
    Fault::Invalid,
    Fault::Crash,
    Fault::Lost,
];

#[derive(Default)]
/// The cluster, the store, the sink and the clock, with what the collector did to them.
pub struct World {
    /// The Pods, by name.
    pub pods: BTreeMap<String, Value>,
    /// The observation ledger in the store.
    pub ledger: PreviousLedger,
    /// The last resourceVersion given.
    pub rv: u64,
    /// The archives, by URI.
    pub archives: BTreeMap<String, Vec<u8>>,
    /// The receipts, by uid.
    pub receipts: BTreeMap<String, Receipt>,
    /// The clock.
    pub now: f64,
    /// Pods per page of a metadata list.
    pub page: usize,
    /// How many continued metadata lists answer that their token expired.
    pub expire: usize,
    /// A Pod whose last finalizer goes stays a while (graceful termination).
    pub linger: bool,
    /// Seconds the engine slept, in all.
    pub slept: f64,
    /// A lingering Pod is gone once the engine slept this long in all.
    pub gone_after_sleeping: Option<f64>,
    /// Calls so far.
    pub calls: usize,
    /// Every call, as `"<op> <subject>"`, in order.
    pub log: Vec<String>,
    /// The fault injected at a call (its number).
    pub fault: Option<(usize, Fault)>,
    /// The stop flag is set after this call.
    pub stop_after: Option<usize>,
    /// Every write that took effect: `(call, "<op> <subject>", stop flag set when it began)`.
    pub writes: Vec<(usize, String, bool)>,
    /// Uids the collector must never remove: Pods that were not targets, or that someone else
    /// made ineligible before anyone asked for their deletion.
    pub protected: BTreeSet<String>,
    /// Uids whose deletion the collector asked for.
    pub deleted: BTreeSet<String>,
    /// Uids that got someone else's finalizer: it must stay on them.
    pub foreign: BTreeSet<String>,
    /// Broken guarantees: must stay empty.
    pub violations: Vec<String>,
}

/// `pod`'s `metadata[key]`.
pub fn meta<'v>(pod: &'v Value, key: &str) -> &'v Value {
    &pod["metadata"][key]
}

/// `pod`'s uid.
pub fn uid_of(pod: &Value) -> String {
    meta(pod, "uid").as_str().unwrap_or_default().to_owned()
}

/// `pod`'s finalizers.
pub fn finalizers(pod: &Value) -> Vec<Value> {
    meta(pod, "finalizers")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Whether `pod` is being deleted.
pub fn is_deleting(pod: &Value) -> bool {
    !meta(pod, "deletionTimestamp").is_null()
}

/// Eligible as far as the Pods of these tests go: labelled, not protected, Failed, not owned, no
/// finalizer but the pin.
pub fn collectable(pod: &Value) -> bool {
    meta(pod, "labels")[LABEL] == "true"
        && meta(pod, "labels")[PROTECT] != "true"
        && pod["status"]["phase"] == "Failed"
        && meta(pod, "ownerReferences").is_null()
        && finalizers(pod).iter().all(|f| f == PIN)
}

impl World {
    /// Counts a call named `op` on `subject` (a Pod's name); applies a meddling; `Some(fault)`
    /// when this call fails or loses its response.
    pub fn call(&mut self, op: &str, subject: &str) -> Option<Fault> {
        self.calls += 1;
        self.log.push(format!("{op} {subject}"));
        match self.fault {
            Some((_, Fault::Crash)) if self.crashed() => Some(Fault::Crash),
            Some((at, Fault::Meddle(change))) if at == self.calls => {
                let store = matches!(change, Change::Archive | Change::Receipt);
                let asked = self
                    .pods
                    .get(subject)
                    .is_none_or(|p| self.deleted.contains(&uid_of(p)));
                if !store || (op == "get" && !asked) {
                    self.meddle(change, subject);
                }
                None
            }
            Some((at, f)) if at == self.calls => Some(f),
            _ => None,
        }
    }
    /// Whether the process crashed.
    pub fn crashed(&self) -> bool {
        matches!(self.fault, Some((at, Fault::Crash)) if self.calls >= at)
    }
    /// Whether the stop flag was set before this call.
    pub fn stopped(&self) -> bool {
        self.stop_after.is_some_and(|at| self.calls > at)
    }
    /// Records a write that took effect.
    pub fn wrote(&mut self, op: &str, subject: &str) {
        let stopped = self.stopped();
        self.writes
            .push((self.calls, format!("{op} {subject}"), stopped));
    }
    /// Gives `pod` a new resourceVersion.
    pub fn bump(&mut self, pod: &mut Value) {
        self.rv += 1;
        pod["metadata"]["resourceVersion"] = json!(self.rv.to_string());
    }
    /// The name of the Pod of `uid` (the uid when there is none).
    pub fn name_of(&self, uid: &str) -> String {
        self.pods
            .iter()
            .find(|(_, p)| uid_of(p) == uid)
            .map_or_else(|| uid.to_owned(), |(n, _)| n.clone())
    }
    /// Someone else's change to `name`'s Pod (or its archive or receipt).
    pub fn meddle(&mut self, change: Change, name: &str) {
        if change == Change::Replace {
            if let Some(old) = self.pods.remove(name) {
                // Gone by someone else's hand: no longer the collector's to keep.
                self.protected.remove(&uid_of(&old));
            }
            let mut new = json!({
                "metadata": {"name": name, "namespace": "work", "uid": format!("uid-{name}-new"),
                             "labels": {LABEL: "true"}},
                "status": {"phase": "Running"}
            });
            self.protected.insert(uid_of(&new));
            self.bump(&mut new);
            self.pods.insert(name.into(), new);
            return;
        }
        let Some(mut pod) = self.pods.get(name).cloned() else {
            return;
        };
        let uid = uid_of(&pod);
        let deleting = is_deleting(&pod);
        match change {
            Change::Relabel => {
                pod["metadata"]["labels"] = json!({});
                if !deleting {
                    self.protected.insert(uid);
                }
            }
            Change::Protect => {
                pod["metadata"]["labels"][PROTECT] = json!("true");
                if !deleting {
                    self.protected.insert(uid);
                }
            }
            Change::Annotate => {
                pod["metadata"]["annotations"]["example.com/seen"] = json!(self.calls.to_string());
            }
            Change::Finalizer if deleting => return,
            Change::Finalizer => {
                let mut f = finalizers(&pod);
                f.push(json!(OTHER));
                pod["metadata"]["finalizers"] = json!(f);
                self.protected.insert(uid.clone());
                self.foreign.insert(uid);
            }
            Change::Status => {
                pod["status"]["message"] = json!(format!("changed at call {}", self.calls));
            }
            Change::Unpin => {
                let f: Vec<Value> = finalizers(&pod).into_iter().filter(|f| f != PIN).collect();
                if deleting && f.is_empty() {
                    self.pods.remove(name);
                    self.protected.remove(&uid);
                    return;
                }
                pod["metadata"]["finalizers"] = json!(f);
            }
            Change::Unhold => {
                let f: Vec<Value> = finalizers(&pod)
                    .into_iter()
                    .filter(|f| f != OTHER)
                    .collect();
                pod["metadata"]["finalizers"] = json!(f);
            }
            Change::Replace => unreachable!(),
            Change::Delete if finalizers(&pod).is_empty() => {
                self.pods.remove(name);
                return;
            }
            Change::Delete if deleting => return,
            Change::Delete => {
                pod["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:59:00Z");
                // Asked by someone else: no longer ours to keep.
                self.protected.remove(&uid);
            }
            Change::Archive => {
                for (uri, bytes) in &mut self.archives {
                    if uri.ends_with(&format!("/{uid}.json")) {
                        *bytes = json!({"metadata": {"uid": uid}, "status": {}})
                            .to_string()
                            .into_bytes();
                    }
                }
                return;
            }
            Change::Receipt => {
                if let Some(r) = self.receipts.get_mut(&uid) {
                    r.sha256 = "0".repeat(64);
                }
                return;
            }
        }
        self.bump(&mut pod);
        self.pods.insert(name.into(), pod);
    }
    /// Whether a verified archive and a receipt of `pod` as it is now are stored.
    pub fn archived(&self, pod: &Value) -> bool {
        let uid = uid_of(pod);
        self.receipts.get(&uid).is_some_and(|r| {
            self.archives.get(&r.uri).is_some_and(|a| {
                let doc: Value = serde_json::from_slice(a).unwrap_or_default();
                archive::digest(a) == r.sha256
                    && doc["metadata"]["uid"] == uid.as_str()
                    && doc["status"] == pod["status"]
            })
        })
    }
    /// The collector asked for `pod`'s deletion: it must be collectable and archived as it is.
    pub fn check_delete(&mut self, pod: &Value) {
        let uid = uid_of(pod);
        if self.protected.contains(&uid) || !collectable(pod) || !self.archived(pod) {
            self.violations.push(format!("deleted {uid}: {pod}"));
        }
    }
    /// Removes a Pod whose last finalizer went or that the collector deleted unheld.
    pub fn remove(&mut self, name: &str) {
        let pod = self.pods.remove(name).unwrap();
        let uid = uid_of(&pod);
        if self.protected.contains(&uid) || (collectable(&pod) && !self.archived(&pod)) {
            self.violations.push(format!("removed {uid}: {pod}"));
        }
    }
}

/// The cluster, the store, the sink and the clock, with the run's stop flag.
pub struct Fake(pub Mutex<World>, pub AtomicBool);

impl Fake {
    /// A fake over `w`, its lock held.
    pub fn new(w: World) -> Self {
        Self(Mutex::new(w), AtomicBool::new(false))
    }
    /// The world, locked.
    pub fn w(&self) -> MutexGuard<'_, World> {
        self.0.lock().unwrap()
    }
    /// Enters a call; `Err` when it fails before any effect, `Ok(lost)` otherwise.
    pub fn enter(&self, op: &str, subject: &str) -> (MutexGuard<'_, World>, Result<bool, Fault>) {
        let mut w = self.w();
        let fault = w.call(op, subject);
        if w.stop_after.is_some_and(|at| w.calls >= at) {
            self.1.store(true, Ordering::SeqCst);
        }
        let r = match fault {
            None => Ok(false),
            Some(Fault::Lost) => Ok(true),
            Some(f) => Err(f),
        };
        (w, r)
    }
}

/// The error of a call whose response was lost.
pub const LOST: &str = "response lost";

/// The cluster's error for `f`.
pub fn refused(f: Fault) -> ClusterError {
    match f {
        Fault::Conflict => ClusterError::Changed {
            status: 409,
            message: "conflict".into(),
        },
        Fault::TestFailed => ClusterError::Changed {
            status: 422,
            message: "test failed".into(),
        },
        Fault::Invalid => ClusterError::Other("422 Invalid: invalid".into()),
        Fault::Error | Fault::Crash | Fault::Lost | Fault::Meddle(_) => {
            ClusterError::Unavailable("timeout".into())
        }
    }
}

/// The store's error for `f`.
pub fn store_fault(f: Fault) -> StoreError {
    StoreError::Unavailable(format!("{f:?}"))
}

#[async_trait]
impl Cluster for Fake {
    async fn list_pods(&self, q: &PodQuery, _: Option<&str>) -> Result<Page, ClusterError> {
        let (w, r) = self.enter("list", "target-0");
        if r.unwrap_or(true) {
            return Err(refused(r.err().unwrap_or(Fault::Lost)));
        }
        let items: Vec<&Value> = w
            .pods
            .values()
            .filter(|p| meta(p, "labels")[LABEL] == "true" && p["status"]["phase"] == "Failed")
            .filter(|p| meta(p, "namespace") == q.namespace.as_str())
            .collect();
        Ok(Page {
            text: json!({"items": items}).to_string().into_bytes(),
            continue_token: None,
        })
    }
    async fn list_pod_metadata(
        &self,
        namespace: &str,
        _: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let (mut w, r) = self.enter("list-metadata", "target-0");
        if r.unwrap_or(true) {
            return Err(refused(r.err().unwrap_or(Fault::Lost)));
        }
        if token.is_some() && w.expire > 0 {
            w.expire -= 1;
            return Err(ClusterError::Expired);
        }
        let from: usize = token.map_or(0, |t| t.parse().unwrap());
        let in_namespace = |p: &&Value| meta(p, "namespace") == namespace;
        let all = w.pods.values().filter(in_namespace).count();
        let items: Vec<Value> = w
            .pods
            .values()
            .filter(in_namespace)
            .skip(from)
            .take(w.page)
            .map(|p| json!({"metadata": p["metadata"]}))
            .collect();
        let next = from + items.len();
        Ok(Page {
            text: json!({"items": items}).to_string().into_bytes(),
            continue_token: (next < all).then(|| next.to_string()),
        })
    }
    async fn get_pod(&self, _: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        let (w, r) = self.enter("get", name);
        if r.unwrap_or(true) {
            return Err(refused(r.err().unwrap_or(Fault::Lost)));
        }
        Ok(w.pods.get(name).map(|p| p.to_string().into_bytes()))
    }
    async fn patch_pod(
        &self,
        _: &str,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        let (mut w, r) = self.enter("patch", name);
        let lost = r.map_err(refused)?;
        let Some(mut pod) = w.pods.get(name).cloned() else {
            return Err(ClusterError::NotFound(name.into()));
        };
        let before = finalizers(&pod).len();
        let ops: json_patch::Patch = serde_json::from_slice(patch).unwrap();
        if json_patch::patch(&mut pod, &ops).is_err() {
            return Err(ClusterError::Changed {
                status: 422,
                message: "test failed".into(),
            });
        }
        let after = finalizers(&pod).len();
        let deleting = is_deleting(&pod);
        if deleting && after > before {
            return Err(ClusterError::Other("422 Invalid: no new finalizers".into()));
        }
        if !dry_run {
            w.wrote("patch", name);
            w.bump(&mut pod);
            w.pods.insert(name.into(), pod.clone());
            if deleting && after == 0 && !w.linger {
                w.remove(name);
            }
        }
        if lost {
            return Err(ClusterError::Unavailable(LOST.into()));
        }
        Ok(pod.to_string().into_bytes())
    }
    async fn delete_pod(
        &self,
        _: &str,
        name: &str,
        pre: &Preconditions,
        dry_run: bool,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        let (mut w, r) = self.enter("delete", name);
        let lost = r.map_err(refused)?;
        let Some(mut pod) = w.pods.get(name).cloned() else {
            return Err(ClusterError::NotFound(name.into()));
        };
        if uid_of(&pod) != pre.uid || meta(&pod, "resourceVersion") != pre.resource_version.as_str()
        {
            return Err(ClusterError::Changed {
                status: 409,
                message: "precondition failed".into(),
            });
        }
        let held = !finalizers(&pod).is_empty();
        if !dry_run {
            w.wrote("delete", name);
            w.check_delete(&pod);
            w.deleted.insert(uid_of(&pod));
        }
        if held && !is_deleting(&pod) {
            pod["metadata"]["deletionTimestamp"] = json!("2026-11-29T12:00:00Z");
            if !dry_run {
                w.bump(&mut pod);
            }
        }
        if !dry_run {
            w.pods.insert(name.into(), pod.clone());
            if !held {
                w.remove(name);
            }
        }
        if lost {
            return Err(ClusterError::Unavailable(LOST.into()));
        }
        Ok(Some(pod.to_string().into_bytes()))
    }
}

#[async_trait]
impl Store for Fake {
    async fn load_ledger(&self, _: &str, _: &str) -> Result<PreviousLedger, StoreError> {
        Ok(self.w().ledger.clone())
    }
    async fn save_ledger(
        &self,
        _: &str,
        _: &str,
        _: &crate::pods::ledger::Ledger,
    ) -> Result<(), StoreError> {
        Ok(())
    }
    async fn put_receipt(&self, r: &Receipt) -> Result<(), StoreError> {
        let name = self.w().name_of(&r.uid);
        let (mut w, fault) = self.enter("put-receipt", &name);
        let lost = fault.map_err(store_fault)?;
        w.wrote("put-receipt", &name);
        w.receipts.insert(r.uid.clone(), r.clone());
        if lost {
            return Err(store_fault(Fault::Lost));
        }
        Ok(())
    }
    async fn get_receipt(&self, _: &str, uid: &str) -> Result<Option<Receipt>, StoreError> {
        let name = self.w().name_of(uid);
        let (w, r) = self.enter("get-receipt", &name);
        if r.unwrap_or(true) {
            return Err(store_fault(r.err().unwrap_or(Fault::Lost)));
        }
        Ok(w.receipts.get(uid).cloned())
    }
}

#[async_trait]
impl ArchiveSink for Fake {
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
        let name = self.w().name_of(&key.uid);
        let (mut w, r) = self.enter("write-archive", &name);
        let lost = r.map_err(store_fault)?;
        let uri = format!("mem:{}/{}/{}.json", key.cluster_id, key.namespace, key.uid);
        w.wrote("write-archive", &name);
        w.archives.insert(uri.clone(), bytes.to_vec());
        if lost {
            return Err(store_fault(Fault::Lost));
        }
        Ok(uri)
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        let uid = uri.rsplit('/').next().unwrap_or_default();
        let name = self.w().name_of(uid.trim_end_matches(".json"));
        let (w, r) = self.enter("read-archive", &name);
        if r.unwrap_or(true) {
            return Err(store_fault(r.err().unwrap_or(Fault::Lost)));
        }
        w.archives
            .get(uri)
            .cloned()
            .ok_or_else(|| StoreError::Other("no such archive".into()))
    }
}

impl Clock for Fake {
    fn now(&self) -> f64 {
        self.w().now
    }
    fn sleep<'a, 'b>(
        &'a self,
        seconds: f64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
    {
        let mut w = self.w();
        w.slept += seconds;
        if w.gone_after_sleeping.is_some_and(|at| w.slept >= at) {
            // The server finishes the graceful deletion of every released Pod.
            let released: Vec<String> = w
                .pods
                .iter()
                .filter(|(_, p)| is_deleting(p) && finalizers(p).is_empty())
                .map(|(n, _)| n.clone())
                .collect();
            for name in released {
                w.remove(&name);
            }
        }
        Box::pin(async {})
    }
}

/// A Failed Pod in namespace `work`, labelled or not, its container finished at `finished`.
pub fn pod(name: &str, labelled: bool, finished: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "work", "uid": format!("uid-{name}"), "resourceVersion": "1",
                     "labels": if labelled { json!({LABEL: "true"}) } else { json!({}) }},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 1, "finishedAt": finished}}}]}
    })
}

/// A finish long past retention.
pub const OLD: &str = "2026-11-20T10:00:00Z";

/// `pod` with `finalizers`, being deleted when `deleting`.
pub fn left(name: &str, labelled: bool, finalizers: &[&str], deleting: bool) -> Value {
    let mut p = pod(name, labelled, OLD);
    p["metadata"]["finalizers"] = json!(finalizers);
    if deleting {
        p["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:00:00Z");
    }
    p
}

/// A world of `pods` at [`NOW`].
pub fn with_pods(pods: Vec<Value>) -> Fake {
    let mut w = World {
        rv: 100,
        now: NOW,
        page: 500,
        ..World::default()
    };
    for p in pods {
        w.pods
            .insert(p["metadata"]["name"].as_str().unwrap().into(), p);
    }
    Fake::new(w)
}

/// Four targets and two Pods that are not.
pub fn world() -> Fake {
    let mut pods: Vec<Value> = (0..4)
        .map(|i| pod(&format!("target-{i}"), true, OLD))
        .collect();
    pods.push(pod("decoy-unlabelled", false, OLD));
    pods.push(pod("decoy-recent", true, "2026-11-29T11:00:00Z"));
    protect(with_pods(pods), &["decoy-unlabelled", "decoy-recent"])
}

/// What a run that stopped mid-protocol leaves, beside two fresh targets: pinned Pods, being
/// deleted or not, eligible or not, with someone else's finalizer or not.
pub fn leftovers() -> Fake {
    let fake = with_pods(vec![
        pod("target-0", true, OLD),
        pod("target-1", true, OLD),
        left("target-pinned", true, &[PIN], false),
        left("target-deleting", true, &[PIN], true),
        left("kept-unlabelled", false, &[PIN], false),
        left("kept-foreign", true, &[OTHER, PIN], false),
        left("kept-foreign-deleting", true, &[PIN, OTHER], true),
        left("gone-unlabelled-deleting", false, &[PIN], true),
        pod("decoy-unlabelled", false, OLD),
    ]);
    fake.w().foreign = ["uid-kept-foreign", "uid-kept-foreign-deleting"]
        .map(String::from)
        .into();
    protect(
        fake,
        &["kept-unlabelled", "kept-foreign", "decoy-unlabelled"],
    )
}

/// `fake` with the Pods `names` protected: the collector must never remove them.
pub fn protect(fake: Fake, names: &[&str]) -> Fake {
    {
        let mut w = fake.w();
        let uids: Vec<String> = names.iter().map(|n| uid_of(&w.pods[*n])).collect();
        w.protected.extend(uids);
    }
    fake
}

/// The settings of namespace `work`: at most 10 Pods a run.
pub fn config() -> PodConfig {
    crate::pods::config::PodInputs {
        namespace: "work".into(),
        max_pods: 10,
        ..Default::default()
    }
    .validate()
    .unwrap()
}

/// The targets of a plan of the world as it is.
pub fn plan(fake: &Fake, cfg: &PodConfig) -> Vec<Target> {
    let w = fake.w();
    let list = json!({"items": w.pods.values().collect::<Vec<_>>()}).to_string();
    let inv = inventory::read(list.as_bytes(), cfg.rules(), 1000).unwrap();
    plan_pods(&inv, &PreviousLedger::default(), cfg, w.now)
        .unwrap()
        .targets
}

/// The guarantees after the second run, `Err` naming the first one broken.
pub fn invariants(w: &World) -> Result<(), String> {
    if !w.violations.is_empty() {
        return Err(format!("broken: {:#?}", w.violations));
    }
    if let Some(p) = w
        .pods
        .values()
        .find(|p| finalizers(p).contains(&json!(PIN)))
    {
        return Err(format!("pin left: {p}"));
    }
    let live: BTreeMap<String, &Value> = w.pods.values().map(|p| (uid_of(p), p)).collect();
    if let Some(uid) = w.protected.iter().find(|u| !live.contains_key(*u)) {
        return Err(format!("a protected Pod was removed: {uid}"));
    }
    if let Some(uid) = w.foreign.iter().find(|u| {
        live.get(*u)
            .is_some_and(|p| !finalizers(p).contains(&json!(OTHER)))
    }) {
        return Err(format!("someone else's finalizer removed from {uid}"));
    }
    if let Some((name, _)) = w
        .pods
        .iter()
        .find(|(n, p)| n.starts_with("target-") && !w.protected.contains(&uid_of(p)))
    {
        return Err(format!("untouched target left: {name}"));
    }
    Ok(())
}
