//! Deletes at API speed: whole `gc-cli` runs (`GC_CLI`, default `target/release/gc-cli`) beside
//! bare fenced deletes of the same objects at the same concurrency, on the test bed's
//! kube-apiserver and PostgreSQL, alternating round by round.
//!
//! `delete-speed [SESSIONS] [PODS] [ROUNDS] [CONCURRENCY]` (default `2500,5000 500 3 1,8`):
//!
//! - sessions: SESSIONS sessions in a namespace, each a Deployment, a Service and a `Session`,
//!   their rows `running`, but a fifth `terminated`: `gc-cli run sessions --dry-run=none` deletes
//!   the fifth's objects (archived, receipted, fenced, an Event each); the bare deletes list the
//!   three kinds (Services headless: the test bed's service IP range is small)' metadata by the same selector and send a DELETE with uid and resourceVersion
//!   preconditions for each object of a terminated session. The orphans are created again
//!   between rounds (not timed);
//! - Pods: PODS Failed, labelled, ownerless Pods finished three days ago, 50 in each of PODS/50
//!   namespaces (a run collects at most 50 Pods per namespace): one `gc-cli run pods -A
//!   --namespace-selector ... --dry-run=none --auto-remediate` (pin, archive, receipt, fence,
//!   delete, release, gone; an Event each) beside a bare list by the same selectors and a fenced
//!   DELETE of each.
//!
//! `GC_EXTRA` adds flags to each `gc-cli` run (`--no-events`: what the Events cost; `-vv`), and
//! `GC_STDERR` names a file their stderr is appended to (their log lines, timed). Every
//! figure is a median over ROUNDS of the whole wall time, gc's process start included.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gc_core::pipeline::in_order;
use gc_testbed::{FailedPod, TestBed, TestDatabase, TestNamespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions, PropagationPolicy,
};
use serde_json::json;

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

const SELECTOR: &str = "app=streamspace-session";
const COLLECT: &str = "diagnostics.example.com/collect";
/// Objects created at once while filling (not timed).
const FILL: usize = 16;

fn arg(i: usize, default: &str) -> String {
    std::env::args()
        .nth(i)
        .unwrap_or_else(|| default.to_owned())
}

fn numbers(text: &str) -> Result<Vec<usize>> {
    Ok(text.split(',').map(str::parse).collect::<Result<_, _>>()?)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs `gc-cli` with `args`; fails with its stderr unless it succeeded.
fn gc(gc_cli: &Path, args: &[String]) -> Result<Duration> {
    let extra = std::env::var("GC_EXTRA").unwrap_or_default();
    let started = Instant::now();
    let out = Command::new(gc_cli)
        .args(args)
        .args(extra.split_whitespace())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let took = started.elapsed();
    if let Some(log) = std::env::var_os("GC_STDERR") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        std::io::Write::write_all(&mut file, &out.stderr)?;
    }
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("gc-cli {}: {stderr}", args.join(" ")).into());
    }
    Ok(took)
}

/// The three kinds of a session, as dynamic APIs in `ns`.
fn kinds(ns: &TestNamespace, session: &ApiResource) -> Vec<Api<DynamicObject>> {
    let client = ns.client().clone();
    [
        ApiResource::erase::<Deployment>(&()),
        ApiResource::erase::<Service>(&()),
        session.clone(),
    ]
    .iter()
    .map(|r| Api::namespaced_with(client.clone(), ns.name(), r))
    .collect()
}

/// Creates the objects of `ids`, [`FILL`] at once; `session` is the `Session` kind's apiVersion.
async fn create_sessions(apis: &[Api<DynamicObject>], session: &str, ids: &[String]) -> Result {
    let made = in_order(ids, FILL, |id| async move {
        let labels = json!({"app": "streamspace-session", "session": id});
        let meta = json!({"name": id, "labels": labels});
        let bodies = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                   "spec": {"replicas": 0, "selector": {"matchLabels": {"session": id}},
                            "template": {"metadata": {"labels": {"session": id}},
                                         "spec": {"containers": [{"name": "s", "image": "busybox"}]}}}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta,
                   "spec": {"clusterIP": "None", "ports": [{"port": 3000}]}}),
            json!({"apiVersion": session, "kind": "Session", "metadata": meta,
                   "spec": {"user": "user", "template": "firefox"}}),
        ];
        for (api, body) in apis.iter().zip(bodies) {
            let object: DynamicObject = serde_json::from_value(body)?;
            api.create(&PostParams::default(), &object).await?;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    })
    .await;
    made.into_iter().collect()
}

/// The bare baseline: list each kind's metadata by `selector` (and `fields`), then a DELETE with
/// uid and resourceVersion preconditions for each object `pick` takes, `concurrency` at once.
/// Answers how many were deleted.
async fn bare(
    apis: &[Api<DynamicObject>],
    selector: &str,
    fields: &str,
    pick: &(dyn Fn(&DynamicObject) -> bool + Sync),
    concurrency: usize,
) -> Result<usize> {
    let mut doomed = Vec::new();
    for api in apis {
        let mut params = ListParams::default().labels(selector).limit(500);
        if !fields.is_empty() {
            params = params.fields(fields);
        }
        loop {
            let page = api.list_metadata(&params).await?;
            for item in &page.items {
                let object = DynamicObject {
                    types: None,
                    metadata: item.metadata.clone(),
                    data: serde_json::Value::Null,
                };
                if pick(&object) {
                    doomed.push((api, object.metadata));
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
    }
    let sent = in_order(&doomed, concurrency, |(api, meta)| async move {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
            }),
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        let name = meta.name.as_deref().unwrap_or_default();
        api.delete(name, &params).await.map(|_| ())
    })
    .await;
    let deleted = sent.into_iter().collect::<Result<Vec<()>, _>>()?.len();
    Ok(deleted)
}

/// How many objects of the three kinds carry one of `ids`.
async fn remaining(apis: &[Api<DynamicObject>], ids: &HashSet<String>) -> Result<usize> {
    let mut n = 0;
    for api in apis {
        let list = api
            .list_metadata(&ListParams::default().labels(SELECTOR))
            .await?;
        n += list
            .items
            .iter()
            .filter(|o| session_of(&o.metadata).is_some_and(|s| ids.contains(s)))
            .count();
    }
    Ok(n)
}

fn session_of(meta: &kube::api::ObjectMeta) -> Option<&String> {
    meta.labels.as_ref()?.get("session")
}

struct Figures {
    what: String,
    concurrency: usize,
    deletes: usize,
    gc: Vec<Duration>,
    bare: Vec<Duration>,
}

impl Figures {
    fn row(&self) {
        let (gc, bare) = (median(self.gc.clone()), median(self.bare.clone()));
        let per = gc.as_secs_f64() / self.deletes as f64;
        println!(
            "| {} | {} | {} | {:.2} s | {:.2} s | {:.2} | {:.1} ms |",
            self.what,
            self.concurrency,
            self.deletes,
            gc.as_secs_f64(),
            bare.as_secs_f64(),
            gc.as_secs_f64() / bare.as_secs_f64(),
            per * 1000.0
        );
    }
}

#[allow(clippy::too_many_arguments)]
async fn sessions(
    bed: &'static TestBed,
    session: &ApiResource,
    db: &TestDatabase,
    gc_cli: &Path,
    dir: &Path,
    count: usize,
    rounds: usize,
    concurrencies: &[usize],
) -> Result<Vec<Figures>> {
    let ns = bed.namespace(&format!("speed-sessions-{count}")).await?;
    let apis = kinds(&ns, session);
    let ids: Vec<String> = (0..count)
        .map(|i| format!("user-firefox-{i:08x}"))
        .collect();
    let started = Instant::now();
    create_sessions(&apis, &session.api_version, &ids).await?;
    eprintln!("{count} sessions created in {:.0?}", started.elapsed());
    let orphans: Vec<String> = ids.iter().step_by(5).cloned().collect();
    let orphan_set: HashSet<String> = orphans.iter().cloned().collect();
    let pool = db.pool().await?;
    let table = format!("sessions_{count}");
    sqlx::query(&format!(
        "CREATE TABLE {table} (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))"
    ))
    .execute(&pool)
    .await?;
    for chunk in ids.chunks(1000) {
        sqlx::query(&format!(
            "INSERT INTO {table} SELECT id, CASE WHEN id = ANY($2) THEN 'terminated' \
             ELSE 'running' END FROM unnest($1::text[]) AS id"
        ))
        .bind(chunk)
        .bind(&orphans)
        .execute(&pool)
        .await?;
    }
    let kubeconfig = bed.kubeconfig_path().display().to_string();
    let deletes = orphans.len() * 3;
    let mut figures = Vec::new();
    for &concurrency in concurrencies {
        let mut f = Figures {
            what: format!("`run sessions`, {count} sessions"),
            concurrency,
            deletes,
            gc: Vec::new(),
            bare: Vec::new(),
        };
        for round in 0..rounds {
            let place = dir.join(format!("sessions-{count}-{concurrency}-{round}"));
            let args: Vec<String> = [
                "run",
                "sessions",
                "-n",
                ns.name(),
                "--kubeconfig",
                &kubeconfig,
                "--database-url",
                db.url(),
                "--table",
                &table,
                "--state-column",
                "state",
                "--terminal-state",
                "terminated",
                // The kinds the bare deletes touch (not the claims, nor `Session` of the other
                // group): the same objects listed by both.
                "--kinds",
                "deployment,service,Session",
                "--grace",
                "0h",
                "--max-deletes",
                "10000",
                "--dry-run=none",
                "--store",
                &format!("sqlite:{}", place.join("gc.sqlite3").display()),
                "--archive-dir",
                &place.join("archives").display().to_string(),
                "--concurrency",
                &concurrency.to_string(),
            ]
            .map(str::to_owned)
            .to_vec();
            f.gc.push(gc(gc_cli, &args)?);
            let left = remaining(&apis, &orphan_set).await?;
            if left != 0 {
                return Err(format!("gc left {left} objects of orphaned sessions").into());
            }
            create_sessions(&apis, &session.api_version, &orphans).await?;
            let pick =
                |o: &DynamicObject| session_of(&o.metadata).is_some_and(|s| orphan_set.contains(s));
            let started = Instant::now();
            let deleted = bare(&apis, SELECTOR, "", &pick, concurrency).await?;
            f.bare.push(started.elapsed());
            if deleted != deletes {
                return Err(format!("bare deleted {deleted} of {deletes}").into());
            }
            create_sessions(&apis, &session.api_version, &orphans).await?;
        }
        f.row();
        figures.push(f);
    }
    Ok(figures)
}

/// Creates `per` Failed, labelled Pods finished three days ago in each of `namespaces`.
async fn create_pods(bed: &'static TestBed, namespaces: &[String], per: usize) -> Result {
    let old = Timestamp::from_second(Timestamp::now().as_second() - 3 * 86_400)?;
    let all: Vec<(String, usize)> = namespaces
        .iter()
        .flat_map(|ns| (0..per).map(move |i| (ns.clone(), i)))
        .collect();
    let made = in_order(&all, FILL, |(ns, i)| async move {
        let pods: Api<Pod> = Api::namespaced(bed.client(), ns);
        FailedPod::new(&format!("failed-{i:03}"))
            .label(COLLECT, "true")
            .finished_at(old)
            .create(&pods)
            .await
            .map(|_| ())
    })
    .await;
    Ok(made.into_iter().collect::<Result<(), _>>()?)
}

async fn pods(
    bed: &'static TestBed,
    gc_cli: &Path,
    dir: &Path,
    count: usize,
    rounds: usize,
    concurrencies: &[usize],
) -> Result<Vec<Figures>> {
    const PER: usize = 50;
    let selector = format!("gc-bench=speed-{}", std::process::id());
    let (key, value) = selector.split_once('=').unwrap();
    let all: Api<Namespace> = Api::all(bed.client());
    let mut keep = Vec::new();
    for i in 0..count.div_ceil(PER) {
        let ns = bed.namespace(&format!("speed-pods-{i}")).await?;
        let patch = Patch::Merge(json!({"metadata": {"labels": {key: value}}}));
        all.patch(ns.name(), &PatchParams::default(), &patch)
            .await?;
        keep.push(ns);
    }
    let names: Vec<String> = keep.iter().map(|n| n.name().to_owned()).collect();
    let pod_resource = ApiResource::erase::<Pod>(&());
    let apis: Vec<Api<DynamicObject>> = names
        .iter()
        .map(|ns| Api::namespaced_with(bed.client(), ns, &pod_resource))
        .collect();
    let kubeconfig = bed.kubeconfig_path().display().to_string();
    let mut figures = Vec::new();
    for &concurrency in concurrencies {
        let mut f = Figures {
            what: format!("`run pods`, {} namespaces of {PER}", names.len()),
            concurrency,
            deletes: names.len() * PER,
            gc: Vec::new(),
            bare: Vec::new(),
        };
        for round in 0..rounds {
            create_pods(bed, &names, PER).await?;
            let place = dir.join(format!("pods-{concurrency}-{round}"));
            let args: Vec<String> = [
                "run",
                "pods",
                "-A",
                "--namespace-selector",
                &selector,
                "--kubeconfig",
                &kubeconfig,
                "--retention",
                "1h",
                "--max-pods",
                "50",
                "--dry-run=none",
                "--auto-remediate",
                "--store",
                &format!("sqlite:{}", place.join("gc.sqlite3").display()),
                "--archive-dir",
                &place.join("archives").display().to_string(),
                "--concurrency",
                &concurrency.to_string(),
            ]
            .map(str::to_owned)
            .to_vec();
            f.gc.push(gc(gc_cli, &args)?);
            for api in &apis {
                let left = api.list_metadata(&ListParams::default()).await?.items.len();
                if left != 0 {
                    return Err(format!("gc left {left} Pods").into());
                }
            }
            create_pods(bed, &names, PER).await?;
            let started = Instant::now();
            let fields = "status.phase=Failed";
            let deleted = bare(
                &apis,
                &format!("{COLLECT}=true"),
                fields,
                &|_| true,
                concurrency,
            )
            .await?;
            f.bare.push(started.elapsed());
            if deleted != f.deletes {
                return Err(format!("bare deleted {deleted} of {}", f.deletes).into());
            }
        }
        f.row();
        figures.push(f);
    }
    Ok(figures)
}

#[tokio::main]
async fn main() -> Result {
    let session_counts = numbers(&arg(1, "2500,5000"))?;
    let pod_count: usize = arg(2, "500").parse()?;
    let rounds: usize = arg(3, "3").parse()?;
    let concurrencies = numbers(&arg(4, "1,8"))?;
    let gc_cli = std::env::var_os("GC_CLI")
        .map_or_else(|| PathBuf::from("target/release/gc-cli"), PathBuf::from);
    let bed = TestBed::shared().await?;
    let session = bed.install_session_crd().await?;
    let db = TestDatabase::fresh("bench_speed")
        .await?
        .ok_or("set GC_TEST_DATABASE_URL (scripts/postgres.sh)")?;
    let dir = tempfile::tempdir()?;
    println!(
        "| run | concurrency | deletes | gc (median) | bare fenced deletes (median) | ratio | gc per delete |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut all = Vec::new();
    for &count in &session_counts {
        all.extend(
            sessions(
                bed,
                &session,
                &db,
                &gc_cli,
                dir.path(),
                count,
                rounds,
                &concurrencies,
            )
            .await?,
        );
    }
    if pod_count > 0 {
        all.extend(pods(bed, &gc_cli, dir.path(), pod_count, rounds, &concurrencies).await?);
    }
    println!();
    for f in &all {
        f.row();
    }
    Ok(())
}
