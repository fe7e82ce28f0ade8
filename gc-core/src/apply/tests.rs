//! The apply protocol against an in-memory cluster with Kubernetes' finalizer, precondition and
//! JSON-patch semantics, with a fault injected at every call: after a second, clean run, no Pod
//! was removed without a verified archive and receipt, no pin remains, every target is collected.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::*;
use crate::inventory;
use crate::ledger::PreviousLedger;
use crate::plan::plan_pods;
use crate::ports::{Page, PodQuery, StoreError};

const NOW: f64 = 1_795_953_600.0;
const PIN: &str = "diagnostics.example.com/collector";
const LABEL: &str = "diagnostics.example.com/collect";

/// Runs a future whose ports never wait (all fakes answer at once).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
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
}

#[derive(Default)]
struct World {
    pods: BTreeMap<String, Value>,
    rv: u64,
    archives: BTreeMap<String, Vec<u8>>,
    receipts: BTreeMap<String, Receipt>,
    calls: usize,
    fault: Option<(usize, Fault)>,
    /// Pods removed without a verified archive and receipt: must stay empty.
    violations: Vec<String>,
}

impl World {
    /// Counts a call; `Some(fault)` when this call is hit.
    fn call(&mut self) -> Option<Fault> {
        self.calls += 1;
        match self.fault {
            Some((_, Fault::Crash)) if self.crashed() => Some(Fault::Crash),
            Some((at, f)) if at == self.calls => Some(f),
            _ => None,
        }
    }
    fn crashed(&self) -> bool {
        matches!(self.fault, Some((at, Fault::Crash)) if self.calls >= at)
    }
    fn bump(&mut self, pod: &mut Value) {
        self.rv += 1;
        pod["metadata"]["resourceVersion"] = json!(self.rv.to_string());
    }
    /// Removes a Pod, checking it was archived and receipted first.
    fn remove(&mut self, name: &str) {
        let pod = self.pods.remove(name).unwrap();
        let uid = pod["metadata"]["uid"].as_str().unwrap().to_owned();
        let ok = self.receipts.values().any(|r| {
            r.uid == uid
                && self
                    .archives
                    .get(&r.uri)
                    .is_some_and(|a| sha256_hex(a) == r.sha256)
        });
        if !ok && pod["metadata"]["labels"][LABEL] == "true" {
            self.violations.push(uid);
        }
    }
}

struct Fake(Mutex<World>);

fn refused(f: Fault) -> ClusterError {
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
        Fault::Error | Fault::Crash => ClusterError::Unavailable("timeout".into()),
    }
}

fn store_fault(f: Fault) -> StoreError {
    StoreError::Unavailable(format!("{f:?}"))
}

#[async_trait]
impl Cluster for Fake {
    async fn list_pods(&self, q: &PodQuery, _: Option<&str>) -> Result<Page, ClusterError> {
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(refused(f));
        }
        let items: Vec<&Value> = w
            .pods
            .values()
            .filter(|p| {
                p["metadata"]["labels"][LABEL] == "true" && p["status"]["phase"] == "Failed"
            })
            .filter(|p| p["metadata"]["namespace"] == q.namespace.as_str())
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
        _: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(refused(f));
        }
        let items: Vec<Value> = w
            .pods
            .values()
            .filter(|p| p["metadata"]["namespace"] == namespace)
            .map(|p| json!({"metadata": p["metadata"]}))
            .collect();
        Ok(Page {
            text: json!({"items": items}).to_string().into_bytes(),
            continue_token: None,
        })
    }
    async fn get_pod(&self, _: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(refused(f));
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
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(refused(f));
        }
        let Some(mut pod) = w.pods.get(name).cloned() else {
            return Err(ClusterError::NotFound(name.into()));
        };
        let before = pod["metadata"]["finalizers"].as_array().map_or(0, Vec::len);
        let ops: json_patch::Patch = serde_json::from_slice(patch).unwrap();
        if json_patch::patch(&mut pod, &ops).is_err() {
            return Err(ClusterError::Changed {
                status: 422,
                message: "test failed".into(),
            });
        }
        let after = pod["metadata"]["finalizers"].as_array().map_or(0, Vec::len);
        let deleting = !pod["metadata"]["deletionTimestamp"].is_null();
        if deleting && after > before {
            return Err(ClusterError::Other("422 Invalid: no new finalizers".into()));
        }
        if !dry_run {
            w.bump(&mut pod);
            w.pods.insert(name.into(), pod.clone());
            if deleting && after == 0 {
                w.remove(name);
            }
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
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(refused(f));
        }
        let Some(mut pod) = w.pods.get(name).cloned() else {
            return Err(ClusterError::NotFound(name.into()));
        };
        if pod["metadata"]["uid"] != pre.uid.as_str()
            || pod["metadata"]["resourceVersion"] != pre.resource_version.as_str()
        {
            return Err(ClusterError::Changed {
                status: 409,
                message: "precondition failed".into(),
            });
        }
        let held = pod["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if held && pod["metadata"]["deletionTimestamp"].is_null() {
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
        Ok(Some(pod.to_string().into_bytes()))
    }
}

#[async_trait]
impl Store for Fake {
    async fn load_ledger(&self, _: &str, _: &str) -> Result<PreviousLedger, StoreError> {
        Ok(PreviousLedger::default())
    }
    async fn save_ledger(
        &self,
        _: &str,
        _: &str,
        _: &crate::ledger::Ledger,
    ) -> Result<(), StoreError> {
        Ok(())
    }
    async fn put_receipt(&self, r: &Receipt) -> Result<(), StoreError> {
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(store_fault(f));
        }
        w.receipts.insert(r.uid.clone(), r.clone());
        Ok(())
    }
    async fn get_receipt(&self, _: &str, uid: &str) -> Result<Option<Receipt>, StoreError> {
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(store_fault(f));
        }
        Ok(w.receipts.get(uid).cloned())
    }
}

#[async_trait]
impl ArchiveSink for Fake {
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(store_fault(f));
        }
        let uri = format!("mem:{}/{}/{}.json", key.cluster_id, key.namespace, key.uid);
        w.archives.insert(uri.clone(), bytes.to_vec());
        Ok(uri)
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        let mut w = self.0.lock().unwrap();
        if let Some(f) = w.call() {
            return Err(store_fault(f));
        }
        w.archives
            .get(uri)
            .cloned()
            .ok_or_else(|| StoreError::Other("no such archive".into()))
    }
}

impl Clock for Fake {
    fn now(&self) -> f64 {
        NOW
    }
    fn sleep<'a, 'b>(
        &'a self,
        _: f64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
    {
        Box::pin(async {})
    }
}

fn pod(name: &str, labelled: bool, finished: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "work", "uid": format!("uid-{name}"), "resourceVersion": "1",
                     "labels": if labelled { json!({LABEL: "true"}) } else { json!({}) }},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 1, "finishedAt": finished}}}]}
    })
}

fn world() -> Fake {
    let mut w = World {
        rv: 100,
        ..World::default()
    };
    for i in 0..4 {
        let p = pod(&format!("target-{i}"), true, "2026-11-20T10:00:00Z");
        w.pods.insert(format!("target-{i}"), p);
    }
    w.pods.insert(
        "decoy-unlabelled".into(),
        pod("decoy-unlabelled", false, "2026-11-20T10:00:00Z"),
    );
    w.pods.insert(
        "decoy-recent".into(),
        pod("decoy-recent", true, "2026-11-29T11:00:00Z"),
    );
    Fake(Mutex::new(w))
}

fn config() -> PodConfig {
    crate::config::PodInputs {
        namespace: "work".into(),
        max_pods: 10,
        ..Default::default()
    }
    .validate()
    .unwrap()
}

fn plan(fake: &Fake, cfg: &PodConfig) -> Vec<Target> {
    let w = fake.0.lock().unwrap();
    let list = json!({"items": w.pods.values().collect::<Vec<_>>()}).to_string();
    let inv = inventory::read(list.as_bytes(), cfg.rules(), 1000).unwrap();
    plan_pods(&inv, &PreviousLedger::default(), cfg, NOW)
        .unwrap()
        .targets
}

fn run(fake: &Fake, cfg: &PodConfig, targets: &[Target], dry_run: bool) -> Vec<TargetResult> {
    let stop = AtomicBool::new(false);
    let ports = Ports {
        cluster: fake,
        store: fake,
        sink: fake,
        clock: fake,
        stop: &stop,
    };
    block_on(async {
        let mut results = recover(&ports, cfg, dry_run).await.unwrap_or_default();
        results.extend(apply(&ports, cfg, targets, dry_run).await);
        results
    })
}

/// `run pods`: recovery, then a fresh plan, then apply.
fn run_pods(fake: &Fake, cfg: &PodConfig) -> Vec<TargetResult> {
    let stop = AtomicBool::new(false);
    let ports = Ports {
        cluster: fake,
        store: fake,
        sink: fake,
        clock: fake,
        stop: &stop,
    };
    let mut results = block_on(recover(&ports, cfg, false)).unwrap_or_default();
    let targets = plan(fake, cfg);
    results.extend(block_on(apply(&ports, cfg, &targets, false)));
    results
}

#[test]
fn a_clean_run_collects_every_target_and_nothing_else() {
    let (fake, cfg) = (world(), config());
    let targets = plan(&fake, &cfg);
    assert_eq!(targets.len(), 4);
    let decoys: Vec<Value> = ["decoy-unlabelled", "decoy-recent"]
        .map(|n| fake.0.lock().unwrap().pods[n].clone())
        .into();
    let results = run(&fake, &cfg, &targets, false);
    assert!(
        results
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Collected { .. })),
        "{results:#?}"
    );
    let w = fake.0.lock().unwrap();
    assert_eq!(
        w.pods.keys().collect::<Vec<_>>(),
        ["decoy-recent", "decoy-unlabelled"]
    );
    assert_eq!(
        vec![
            w.pods["decoy-unlabelled"].clone(),
            w.pods["decoy-recent"].clone()
        ],
        decoys
    );
    assert!(w.violations.is_empty());
    for r in w.receipts.values() {
        let doc: Value = serde_json::from_slice(&w.archives[&r.uri]).unwrap();
        assert_eq!(doc["metadata"]["uid"], r.uid.as_str());
        assert_eq!(doc["retentionBasis"], "finishedAt");
    }
}

#[test]
fn dry_run_writes_nothing_and_reports_what_would_happen() {
    let (fake, cfg) = (world(), config());
    let targets = plan(&fake, &cfg);
    let before = fake.0.lock().unwrap().pods.clone();
    let results = run(&fake, &cfg, &targets, true);
    assert!(
        results
            .iter()
            .all(|r| matches!(r.outcome, Outcome::WouldCollect { .. })),
        "{results:#?}"
    );
    let w = fake.0.lock().unwrap();
    assert_eq!(w.pods, before);
    assert!(w.archives.is_empty() && w.receipts.is_empty());
}

#[test]
fn a_changed_pod_is_not_touched() {
    let (fake, cfg) = (world(), config());
    let targets = plan(&fake, &cfg);
    // The Pod is replaced by another of the same name after the plan.
    fake.0.lock().unwrap().pods.get_mut("target-0").unwrap()["metadata"]["uid"] = json!("uid-new");
    let results = run(&fake, &cfg, &targets, false);
    assert!(
        matches!(
            &results[0].outcome,
            Outcome::Skipped {
                step: Step::Reread,
                ..
            }
        ),
        "{:?}",
        results[0]
    );
    assert!(fake.0.lock().unwrap().pods.contains_key("target-0"));
}

/// Every call of a clean run, for every fault: then a clean run; the invariants hold.
#[test]
fn every_fault_at_every_call_is_recovered() {
    let cfg = config();
    let calls = {
        let fake = world();
        let targets = plan(&fake, &cfg);
        run(&fake, &cfg, &targets, false);
        fake.0.lock().unwrap().calls
    };
    let mut matrix = 0;
    for at in 1..=calls {
        for fault in [
            Fault::Error,
            Fault::Conflict,
            Fault::TestFailed,
            Fault::Invalid,
            Fault::Crash,
        ] {
            let fake = world();
            let targets = plan(&fake, &cfg);
            fake.0.lock().unwrap().fault = Some((at, fault));
            run(&fake, &cfg, &targets, false);
            fake.0.lock().unwrap().fault = None;
            // The next run recovers first, then plans afresh (as `run pods` does).
            let second = run_pods(&fake, &cfg);
            let w = fake.0.lock().unwrap();
            let context = format!("fault {fault:?} at call {at}: {second:#?}");
            assert!(
                w.violations.is_empty(),
                "deleted without archive: {context}"
            );
            assert!(
                w.pods
                    .values()
                    .all(|p| p["metadata"]["finalizers"] != json!([PIN])),
                "pin left: {context}"
            );
            assert!(
                !w.pods.keys().any(|k| k.starts_with("target-")),
                "target left: {context}"
            );
            matrix += 1;
        }
    }
    assert!(matrix >= 5 * 40, "only {matrix} cases");
}
