//! Live failed-Pod plan against the real API server, compared in the same run with listing every
//! Pod of the namespace unfiltered (what the reference flow's `kubectl get` does): wall time, API
//! requests and bytes received. `live-plan [PODS]` (default 3000).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use gc_core::pods::inventory::Inventory;
use gc_core::ports::{Cluster, ClusterError, Page, PodQuery, Preconditions};
use gc_core::{PodInputs, PreviousLedger, plan_pods};
use gc_testbed::{FailedPod, TestBed};
use k8s_openapi::api::core::v1::Pod;

/// Counts the list requests and the bytes they bring back.
struct Counting<'c> {
    inner: &'c gc_k8s::KubeCluster,
    requests: AtomicUsize,
    bytes: AtomicUsize,
}

#[async_trait]
impl Cluster for Counting<'_> {
    async fn list_pods(&self, q: &PodQuery, token: Option<&str>) -> Result<Page, ClusterError> {
        let page = self.inner.list_pods(q, token).await?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(page.text.len(), Ordering::Relaxed);
        Ok(page)
    }
    async fn list_pod_metadata(
        &self,
        ns: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        self.inner.list_pod_metadata(ns, limit, token).await
    }
    async fn get_pod(&self, ns: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        self.inner.get_pod(ns, name).await
    }
    async fn patch_pod(
        &self,
        ns: &str,
        name: &str,
        patch: &[u8],
        dry: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        self.inner.patch_pod(ns, name, patch, dry).await
    }
    async fn delete_pod(
        &self,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        dry: bool,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        self.inner.delete_pod(ns, name, pre, dry).await
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3000);
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("bench-live").await?;
    let pods = ns.api::<Pod>();
    let started = Instant::now();
    // A namespace like a busy batch namespace: a sixth labelled Failed Pods, the rest running,
    // succeeded or unlabelled.
    for chunk in (0..n).collect::<Vec<_>>().chunks(25) {
        let creates = chunk.iter().map(|i| {
            let p = match i % 6 {
                0 => FailedPod::new(&format!("failed-{i}"))
                    .label("diagnostics.example.com/collect", "true"),
                1 => FailedPod::new(&format!("succeeded-{i}"))
                    .phase("Succeeded")
                    .label("diagnostics.example.com/collect", "true"),
                2 => FailedPod::new(&format!("unlabelled-{i}")),
                _ => FailedPod::new(&format!("running-{i}"))
                    .phase("Running")
                    .running_container("main"),
            };
            let pods = pods.clone();
            async move { p.create(&pods).await }
        });
        for r in futures_join(creates).await {
            r?;
        }
    }
    eprintln!("created {n} Pods in {:.1?}", started.elapsed());
    let cluster = gc_k8s::KubeCluster::new(ns.client().clone());
    let cfg = PodInputs {
        namespace: ns.name().into(),
        max_inventory: 10_000,
        ..PodInputs::default()
    }
    .validate()?;
    let rules = cfg.rules();
    let filtered = gc_k8s::failed_pod_query(&cfg, 500);
    let unfiltered = PodQuery {
        label_selector: String::new(),
        field_selector: String::new(),
        ..filtered.clone()
    };
    println!("| listing | Pods returned | requests | bytes received | list + plan |");
    println!("| --- | --- | --- | --- | --- |");
    for (label, query) in [
        ("server-filtered (gc-cli)", &filtered),
        ("unfiltered (the flow's kubectl get)", &unfiltered),
    ] {
        let counting = Counting {
            inner: &cluster,
            requests: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
        };
        let t = Instant::now();
        let inventory: Inventory =
            gc_k8s::list_inventory(&counting, query, rules, 20_001, &mut |_, _| {}).await?;
        let plan = plan_pods(&inventory, &PreviousLedger::default(), &cfg, 4e9)?;
        let elapsed = t.elapsed();
        println!(
            "| {label} | {} | {} | {:.2} MB | {:.0} ms ({} targets, {} deferred) |",
            inventory.count,
            counting.requests.load(Ordering::Relaxed),
            counting.bytes.load(Ordering::Relaxed) as f64 / 1e6,
            elapsed.as_secs_f64() * 1000.0,
            plan.targets.len(),
            plan.deferred,
        );
    }
    Ok(())
}

/// Awaits every future of `futures` concurrently.
async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let handles: Vec<_> = futures.map(|f| Box::pin(f)).collect();
    let mut out = Vec::with_capacity(handles.len());
    // Small batches: a join by polling each in turn is enough here.
    for h in handles {
        out.push(h.await);
    }
    out
}
