//! The fenced apply of failed-Pod targets against the real API server: wall time of a whole apply
//! and per Pod, with the engine as it is (the uid's absence checked at once after the release,
//! then polled with a doubling backoff) and with the earlier fixed 2 s settle emulated (each
//! release followed by a 2 s sleep before the engine's first check). The two variants alternate
//! over rounds, each on fresh Pods in a namespace of its own. Every port call is timed, so the
//! table says where a Pod's time goes. `apply-speed [PODS] [ROUNDS]` (default 30 and 3).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use gc_core::lease::Lease;
use gc_core::pods::apply::{self, Ports, TargetOutcome};
use gc_core::ports::{
    ArchiveKey, ArchiveSink, Clock, Cluster, ClusterError, Page, PodQuery, Preconditions, Receipt,
    Store, StoreError,
};
use gc_core::{PodInputs, PreviousLedger, plan_pods};
use gc_testbed::{FailedPod, TestBed};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

type Error = Box<dyn std::error::Error + Send + Sync>;

const COLLECT: &str = "diagnostics.example.com/collect";
/// The earlier engine's fixed wait after each release.
const OLD_SETTLE: Duration = Duration::from_secs(2);

/// Time spent per kind of port call, and the per-target marks.
#[derive(Default)]
struct Log {
    calls: BTreeMap<&'static str, (u32, Duration)>,
    /// When each target's first request (its re-read) started, in order.
    starts: Vec<(String, Instant)>,
    /// The release that is waiting for its uid to be gone: Pod name and when the patch returned.
    released: Option<(String, Instant)>,
    /// From each release's answer to the check that found the Pod gone.
    verify: Vec<Duration>,
}

/// Every port of the engine, timed: the cluster, the store, the sink and the clock's sleeps.
struct Timed<'a> {
    cluster: &'a gc_k8s::KubeCluster,
    store: &'a gc_store::Store,
    sink: &'a gc_store::DirectorySink,
    /// Sleep this long after each release (the old fixed settle); zero for the engine as it is.
    settle: Duration,
    log: Mutex<Log>,
}

impl Timed<'_> {
    fn note(&self, what: &'static str, since: Instant) {
        let mut log = self.log.lock().unwrap();
        let e = log.calls.entry(what).or_default();
        e.0 += 1;
        e.1 += since.elapsed();
    }
}

#[async_trait]
impl Cluster for Timed<'_> {
    async fn list_pods(&self, q: &PodQuery, token: Option<&str>) -> Result<Page, ClusterError> {
        let t = Instant::now();
        let r = self.cluster.list_pods(q, token).await;
        self.note("cluster: list Pods", t);
        r
    }
    async fn list_pod_metadata(
        &self,
        ns: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let t = Instant::now();
        let r = self.cluster.list_pod_metadata(ns, limit, token).await;
        self.note("cluster: list pinned (metadata)", t);
        r
    }
    async fn get_pod(&self, ns: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        let t = Instant::now();
        {
            let mut log = self.log.lock().unwrap();
            if log.starts.last().is_none_or(|(n, _)| n != name) {
                log.starts.push((name.to_owned(), t));
            }
        }
        let r = self.cluster.get_pod(ns, name).await;
        self.note("cluster: get Pod", t);
        let mut log = self.log.lock().unwrap();
        if let (Ok(None), Some((released, at))) = (&r, &log.released)
            && released == name
        {
            let waited = at.elapsed();
            log.verify.push(waited);
            log.released = None;
        }
        r
    }
    async fn patch_pod(
        &self,
        ns: &str,
        name: &str,
        patch: &[u8],
        dry: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        const REMOVE: &[u8] = br#""op":"remove""#;
        let release = patch.windows(REMOVE.len()).any(|w| w == REMOVE);
        let t = Instant::now();
        let r = self.cluster.patch_pod(ns, name, patch, dry).await;
        self.note(
            if release {
                "cluster: patch (release)"
            } else {
                "cluster: patch (pin)"
            },
            t,
        );
        if release && r.is_ok() {
            self.log.lock().unwrap().released = Some((name.to_owned(), Instant::now()));
            if !self.settle.is_zero() {
                tokio::time::sleep(self.settle).await;
            }
        }
        r
    }
    async fn delete_pod(
        &self,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        dry: bool,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        let t = Instant::now();
        let r = self.cluster.delete_pod(ns, name, pre, dry).await;
        self.note("cluster: delete", t);
        r
    }
}

#[async_trait]
impl Store for Timed<'_> {
    async fn load_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
    ) -> Result<PreviousLedger, StoreError> {
        let t = Instant::now();
        let r = self.store.load_ledger(cluster_id, namespace).await;
        self.note("store: load ledger", t);
        r
    }
    async fn save_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
        ledger: &gc_core::Ledger,
    ) -> Result<(), StoreError> {
        let t = Instant::now();
        let r = self.store.save_ledger(cluster_id, namespace, ledger).await;
        self.note("store: save ledger", t);
        r
    }
    async fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        let t = Instant::now();
        let r = self.store.put_receipt(receipt).await;
        self.note("store: put receipt (SQLite, WAL)", t);
        r
    }
    async fn get_receipt(
        &self,
        cluster_id: &str,
        uid: &str,
    ) -> Result<Option<Receipt>, StoreError> {
        let t = Instant::now();
        let r = self.store.get_receipt(cluster_id, uid).await;
        self.note("store: get receipt", t);
        r
    }
}

#[async_trait]
impl ArchiveSink for Timed<'_> {
    async fn write(&self, key: &ArchiveKey, bytes: &[u8]) -> Result<String, StoreError> {
        let t = Instant::now();
        let r = self.sink.write(key, bytes).await;
        self.note("sink: write archive (fsync file + folder)", t);
        r
    }
    async fn read(&self, uri: &str) -> Result<Vec<u8>, StoreError> {
        let t = Instant::now();
        let r = self.sink.read(uri).await;
        self.note("sink: read archive back", t);
        r
    }
}

#[async_trait]
impl Clock for Timed<'_> {
    fn now(&self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64()
    }
    async fn sleep(&self, seconds: f64) {
        let t = Instant::now();
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        self.note("engine: verify backoff sleeps", t);
    }
}

/// One apply's measurements.
struct Round {
    wall: Duration,
    per_pod: Vec<Duration>,
    verify: Vec<Duration>,
    calls: BTreeMap<&'static str, (u32, Duration)>,
}

/// Creates `n` fresh targets in a namespace of their own, plans them as `run pods` does (recovery,
/// a server-filtered list, the plan) and applies the plan for real; times the apply.
async fn round(
    bed: &'static TestBed,
    n: usize,
    settle: Duration,
    dir: &Path,
) -> Result<Round, Error> {
    let ns = bed.namespace("bench-apply").await?;
    let pods = ns.api::<Pod>();
    let old = Timestamp::from_second(Timestamp::now().as_second() - 3 * 86_400)?;
    for i in 0..n {
        FailedPod::new(&format!("failed-{i:03}"))
            .label(COLLECT, "true")
            .finished_at(old)
            .create(&pods)
            .await?;
    }
    let cluster = gc_k8s::KubeCluster::new(ns.client().clone());
    let store = gc_store::open(&format!(
        "sqlite:{}",
        dir.join(format!("{}.db", ns.name())).display()
    ))
    .await?;
    let sink = gc_store::DirectorySink::new(dir.join(ns.name()));
    let timed = Timed {
        cluster: &cluster,
        store: &store,
        sink: &sink,
        settle,
        log: Mutex::new(Log::default()),
    };
    let cfg = PodInputs {
        namespace: ns.name().into(),
        max_pods: i64::try_from(n)?,
        max_inventory: 10_000,
        ..PodInputs::default()
    }
    .validate()?;
    // The engine writes only under a Lease, taken as a run takes it (long enough for the run: no
    // renewal is needed).
    let stop = AtomicBool::new(false);
    let origin = Instant::now();
    let monotonic = std::sync::Arc::new(move || origin.elapsed());
    let lease = Lease::acquire(
        &cluster,
        ns.name(),
        "gc-pods",
        "apply-speed",
        600,
        monotonic,
    )
    .await?
    .ok_or("the run lock is held")?;
    let ports = Ports {
        cluster: &timed,
        store: &timed,
        sink: &timed,
        clock: &timed,
        held: lease.held(&stop),
        concurrency: gc_core::pipeline::DEFAULT_CONCURRENCY,
    };
    let recovered = apply::recover(&ports, &cfg).await?;
    assert!(recovered.is_empty(), "nothing was pinned");
    let query = gc_k8s::failed_pod_query(&cfg, 500);
    let inventory =
        gc_k8s::list_inventory(&timed, &query, cfg.rules(), 10_001, &mut |_, _| {}).await?;
    let plan = plan_pods(&inventory, &PreviousLedger::default(), &cfg, timed.now())?;
    assert_eq!(plan.targets.len(), n, "every Pod is a target");
    *timed.log.lock().unwrap() = Log::default();
    let t = Instant::now();
    let results = apply::apply(&ports, &cfg, &plan.targets).await;
    let wall = t.elapsed();
    let end = Instant::now();
    for r in &results {
        if !matches!(r.outcome, TargetOutcome::Collected { .. }) {
            return Err(format!("{}: {:?}", r.name, r.outcome).into());
        }
    }
    let left = apply::pinned_pods(&cluster, &cfg).await?;
    assert!(left.is_empty(), "no pin is left");
    store.close().await;
    let log = timed.log.into_inner().unwrap();
    let per_pod = log
        .starts
        .iter()
        .enumerate()
        .map(|(i, (_, at))| log.starts.get(i + 1).map_or(end, |(_, next)| *next) - *at)
        .collect();
    Ok(Round {
        wall,
        per_pod,
        verify: log.verify,
        calls: log.calls,
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let n = args.next().transpose()?.unwrap_or(30);
    let rounds = args.next().transpose()?.unwrap_or(3);
    let bed = TestBed::shared().await?;
    let dir = std::env::temp_dir().join(format!("apply-speed-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let variants = [
        (
            "engine (check at once, then backoff from 0.05 s)",
            Duration::ZERO,
        ),
        ("old fixed 2 s settle (emulated)", OLD_SETTLE),
    ];
    let mut runs: Vec<Vec<Round>> = variants.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for (i, (label, settle)) in variants.iter().enumerate() {
            let got = round(bed, n, *settle, &dir).await?;
            eprintln!(
                "round {}: {label}: {n} Pods in {:.0} ms",
                r + 1,
                ms(got.wall)
            );
            runs[i].push(got);
        }
    }
    std::fs::remove_dir_all(&dir)?;
    println!(
        "| variant | Pods | total wall (median of {rounds}) | best | per Pod (median) | verify after release (median) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for ((label, _), rs) in variants.iter().zip(&runs) {
        let walls: Vec<_> = rs.iter().map(|r| r.wall).collect();
        let per_pod: Vec<_> = rs.iter().flat_map(|r| r.per_pod.clone()).collect();
        let verify: Vec<_> = rs.iter().flat_map(|r| r.verify.clone()).collect();
        println!(
            "| {label} | {n} | {:.0} ms | {:.0} ms | {:.1} ms | {:.1} ms |",
            ms(median(walls.clone())),
            ms(walls.iter().min().copied().unwrap_or_default()),
            ms(median(per_pod)),
            ms(median(verify)),
        );
    }
    // Where a Pod's time goes, in the engine as it is: every port call of every round.
    let rs = &runs[0];
    let pods = (n * rs.len()) as f64;
    let wall: Duration = rs.iter().map(|r| r.wall).sum();
    let mut calls: BTreeMap<&str, (u32, Duration)> = BTreeMap::new();
    for r in rs {
        for (k, (c, d)) in &r.calls {
            let e = calls.entry(k).or_default();
            e.0 += c;
            e.1 += *d;
        }
    }
    println!();
    println!(
        "| port call (engine as it is) | calls per Pod | time per call | per Pod | share of the apply |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut accounted = Duration::ZERO;
    for (k, (c, d)) in &calls {
        accounted += *d;
        println!(
            "| {k} | {:.1} | {:.2} ms | {:.2} ms | {:.0} % |",
            f64::from(*c) / pods,
            ms(*d) / f64::from(*c),
            ms(*d) / pods,
            100.0 * d.as_secs_f64() / wall.as_secs_f64(),
        );
    }
    let rest = wall.saturating_sub(accounted);
    println!(
        "| the engine itself (parsing, digests, patches) | | | {:.2} ms | {:.0} % |",
        ms(rest) / pods,
        100.0 * rest.as_secs_f64() / wall.as_secs_f64(),
    );
    Ok(())
}
