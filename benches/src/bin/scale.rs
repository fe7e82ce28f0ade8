//! Scale against the real API server and PostgreSQL: 20 namespaces holding 50,000 Pods (a tenth
//! labelled and Failed) and 20,000 `Session` objects (half of their sessions gone from the
//! database). The whole `gc-cli` process is measured planning every namespace in one run
//! (`-A --namespace-selector`) and in one run per namespace, alternating, for both collectors:
//! wall time, peak resident memory (the largest process), and bytes between `gc-cli` and the API
//! server (counted by a loopback TCP proxy in front of it: TLS records, both directions).
//!
//! `scale [NAMESPACES] [PODS] [SESSIONS] [ROUNDS]` (default 20 50000 20000 3); `GC_CLI` names the
//! binary (default `target/release/gc-cli`); PostgreSQL from `GC_TEST_DATABASE_URL`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use gc_testbed::{FailedPod, TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// Requests in flight while the cluster is filled.
const PARALLEL: usize = 32;

/// Counts the bytes through a TCP proxy to `upstream`; returns its address.
async fn counting_proxy(upstream: String, bytes: Arc<AtomicU64>) -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let bytes = bytes.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = TcpStream::connect(&upstream).await
                    && let Ok((up, down)) = copy_bidirectional(&mut client, &mut server).await
                {
                    bytes.fetch_add(up + down, Ordering::Relaxed);
                }
            });
        }
    });
    Ok(addr)
}

/// Runs `futures` with at most [`PARALLEL`] in flight.
async fn in_parallel<F>(futures: Vec<F>) -> Result
where
    F: std::future::Future<Output = Result> + Send + 'static,
{
    let mut set = JoinSet::new();
    for f in futures {
        if set.len() >= PARALLEL
            && let Some(done) = set.join_next().await
        {
            done??;
        }
        set.spawn(f);
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    Ok(())
}

/// Fills `ns` with `pods` Pods (every tenth labelled and Failed long ago; the rest plain Pods the
/// collector's filters leave out) and `sessions` Session objects (`s-<ns>-<i>`).
async fn fill(
    ns: &TestNamespace,
    session: &kube::discovery::ApiResource,
    pods: usize,
    sessions: usize,
) -> Result {
    let api = ns.api::<Pod>();
    let old = k8s_openapi::jiff::Timestamp::from_second(1_700_000_000)?;
    let mut work: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Result> + Send>>> =
        Vec::new();
    for i in 0..pods {
        let api = api.clone();
        work.push(Box::pin(async move {
            if i % 10 == 0 {
                FailedPod::new(&format!("failed-{i}"))
                    .label("diagnostics.example.com/collect", "true")
                    .finished_at(old)
                    .create(&api)
                    .await?;
            } else {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("other-{i}"), "labels": {"app": "batch", "job": format!("j{}", i % 50)}},
                    "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]},
                }))?;
                api.create(&PostParams::default(), &pod).await?;
            }
            Ok(())
        }));
    }
    let objects: Api<DynamicObject> = Api::namespaced_with(ns.client().clone(), ns.name(), session);
    for i in 0..sessions {
        let objects = objects.clone();
        let id = format!("s-{}-{i}", ns.name());
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": session.api_version,
            "kind": session.kind,
            "metadata": {"name": id, "labels": {"app": "streamspace-session", "session": id}},
            "spec": {"user": "someone", "template": "firefox"},
        }))?;
        work.push(Box::pin(async move {
            objects.create(&PostParams::default(), &object).await?;
            Ok(())
        }));
    }
    in_parallel(work).await
}

/// One measured process: wall seconds, peak RSS in KB, and its exit status.
fn measure(gc_cli: &Path, args: &[String]) -> Result<(f64, u64)> {
    let rss = tempfile::NamedTempFile::new()?;
    let started = Instant::now();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(rss.path())
        .arg(gc_cli)
        .args(args)
        .env("GC_ALLOW_FUTURE_NOW", "1")
        .output()?;
    let wall = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "gc-cli {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let kb = std::fs::read_to_string(rss.path())?
        .split_whitespace()
        .last()
        .unwrap_or("0")
        .parse()?;
    Ok((wall, kb))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result {
    let arg = |i: usize, default: usize| -> usize {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let (namespaces, pods, sessions, rounds) =
        (arg(1, 20), arg(2, 50_000), arg(3, 20_000), arg(4, 3));
    let gc_cli = std::env::var_os("GC_CLI")
        .map_or_else(|| PathBuf::from("target/release/gc-cli"), PathBuf::from);
    let bed = TestBed::shared().await?;
    let session = bed.install_session_crd().await?;
    let db = TestDatabase::fresh("bench_scale")
        .await?
        .ok_or("set GC_TEST_DATABASE_URL (scripts/postgres.sh)")?;

    // The cluster: namespaces labelled for the selector, filled in parallel.
    let started = Instant::now();
    let selector = format!("gc-bench=scale-{}", std::process::id());
    let (key, value) = selector.split_once('=').unwrap();
    let all: Api<Namespace> = Api::all(bed.client());
    let mut names = Vec::new();
    let mut keep = Vec::new();
    for i in 0..namespaces {
        let ns = bed.namespace(&format!("scale-{i}")).await?;
        let patch = Patch::Merge(json!({"metadata": {"labels": {key: value}}}));
        all.patch(ns.name(), &PatchParams::default(), &patch)
            .await?;
        names.push(ns.name().to_owned());
        keep.push(ns);
    }
    for ns in &keep {
        fill(ns, &session, pods / namespaces, sessions / namespaces).await?;
    }
    eprintln!(
        "filled {namespaces} namespaces with {pods} Pods and {sessions} Sessions in {:.0?}",
        started.elapsed()
    );
    // StreamSpace's table: every second session still exists.
    let pool = db.pool().await?;
    sqlx::query("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
        .execute(&pool)
        .await?;
    let live: Vec<String> = names
        .iter()
        .flat_map(|ns| {
            (0..sessions / namespaces)
                .step_by(2)
                .map(move |i| format!("s-{ns}-{i}"))
        })
        .collect();
    sqlx::query("INSERT INTO sessions SELECT id, 'running' FROM UNNEST($1::text[]) AS id")
        .bind(&live)
        .execute(&pool)
        .await?;
    pool.close().await;

    // A kubeconfig that reaches the API server through the counting proxy.
    let bytes = Arc::new(AtomicU64::new(0));
    let server = bed.server_url().trim_start_matches("https://").to_owned();
    let proxy = counting_proxy(server.clone(), bytes.clone()).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        std::fs::read_to_string(bed.kubeconfig_path())?.replace(&server, &proxy),
    )?;
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let common = |collector: &str| -> Vec<String> {
        let mut a = vec![
            "plan".to_owned(),
            collector.to_owned(),
            "--kubeconfig".to_owned(),
            kubeconfig.display().to_string(),
            "-o".to_owned(),
            "json".to_owned(),
        ];
        if collector == "pods" {
            a.extend(["--store", &store, "--max-inventory", "10000"].map(String::from));
        } else {
            a.extend(
                [
                    "--database-url",
                    db.url(),
                    "--kinds",
                    "Session",
                    "--max-deletes",
                    "10000",
                ]
                .map(String::from),
            );
            a.extend(["--override-guard".to_owned()]);
        }
        a
    };

    println!(
        "| collector | runs | wall (median of {rounds}) | peak RSS | bytes to and from the API server |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for collector in ["pods", "sessions"] {
        let mut one_run = (Vec::new(), 0u64, 0u64);
        let mut per_ns = (Vec::new(), 0u64, 0u64);
        for _ in 0..rounds {
            // One run over every namespace the selector picks.
            let mut args = common(collector);
            args.extend(["-A", "--namespace-selector", &selector].map(String::from));
            bytes.store(0, Ordering::Relaxed);
            let (wall, kb) = measure(&gc_cli, &args)?;
            one_run.0.push(wall);
            one_run.1 = one_run.1.max(kb);
            one_run.2 = bytes.load(Ordering::Relaxed);
            // One run per namespace, one after the other.
            bytes.store(0, Ordering::Relaxed);
            let (mut wall, mut peak) = (0.0, 0);
            for ns in &names {
                let mut args = common(collector);
                args.extend(["-n".to_owned(), ns.clone()]);
                let (w, kb) = measure(&gc_cli, &args)?;
                wall += w;
                peak = peak.max(kb);
            }
            per_ns.0.push(wall);
            per_ns.1 = per_ns.1.max(peak);
            per_ns.2 = bytes.load(Ordering::Relaxed);
        }
        for (label, (mut walls, kb, sent)) in [
            ("one run, `-A --namespace-selector`", one_run),
            ("one run per namespace", per_ns),
        ] {
            let runs = if label.starts_with("one run,") {
                1
            } else {
                namespaces
            };
            println!(
                "| {collector}: {label} | {runs} | {:.2} s | {:.1} MB | {:.2} MB |",
                median(&mut walls),
                kb as f64 / 1024.0,
                sent as f64 / 1e6
            );
        }
    }
    Ok(())
}
