//! From the control plane's call to a session's objects deleted and archived, through the
//! request API of a real `gc-cli serve` (`GC_CLI`, default `target/release/gc-cli`) on the test
//! bed's kube-apiserver and PostgreSQL. Each session is a Deployment, a Service and a `Session`;
//! twice BATCH sessions stay running beside those collected.
//! `request-latency [ROUNDS] [BATCH]` (default 20 and 50):
//!
//! - one session: ROUNDS times, a row set `terminated`, then `POST .../sessions/collect` with its
//!   id, then `GET /v1/runs/{id}` every 10 ms until the run ended: the time from the call to the
//!   end seen;
//! - BATCH sessions requested at once (one request each, from BATCH threads): each one's time,
//!   and the whole batch's;
//! - the API's own cost: `POST .../sessions/plan` of one session (the caller's answers cached)
//!   beside a whole `gc-cli plan sessions` process of the same namespace, alternating.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gc_testbed::{TestBed, TestDatabase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// One HTTP/1.1 call: the status and the JSON answer.
fn call(addr: &str, method: &str, path: &str, token: &str, body: &str) -> Result<(u16, Value)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let length = body.len();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n{body}"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

/// Collects `id` through the API and follows its run to the end: the time it took.
fn collect(addr: &str, ns: &str, token: &str, id: &str) -> Result<Duration> {
    let started = Instant::now();
    let body = json!({ "sessions": [id] }).to_string();
    let path = format!("/v1/namespaces/{ns}/sessions/collect");
    let (status, mut run) = call(addr, "POST", &path, token, &body)?;
    if status != 202 {
        return Err(format!("collect {id}: {status} {run}").into());
    }
    let follow = format!("/v1/runs/{}", run["id"].as_str().unwrap_or_default());
    while !["succeeded", "failed", "stopped"].contains(&run["state"].as_str().unwrap_or("")) {
        std::thread::sleep(Duration::from_millis(10));
        run = call(addr, "GET", &follow, token, "")?.1;
    }
    let took = started.elapsed();
    let deleted = (run["records"].as_array().into_iter().flatten())
        .filter(|r| r["result"] == "deleted" && r["archive"].is_string())
        .count();
    if run["state"] != "succeeded" || deleted != 3 {
        return Err(format!("collect {id}: {run}").into());
    }
    Ok(took)
}

/// The `q` quantile of `times`, in milliseconds.
fn quantile(times: &[Duration], q: f64) -> f64 {
    let mut ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = ((ms.len() as f64 - 1.0) * q).round() as usize;
    ms[at]
}

#[tokio::main]
async fn main() -> Result {
    let arg = |i: usize, default: usize| -> usize {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let (rounds, batch) = (arg(1, 20), arg(2, 50));
    let gc_cli = std::env::var_os("GC_CLI")
        .map_or_else(|| PathBuf::from("target/release/gc-cli"), PathBuf::from);
    let bed = TestBed::shared().await?;
    let session = bed.install_session_crd().await?;
    let ns = bed.namespace("latency").await?;
    let db = TestDatabase::fresh("bench_latency")
        .await?
        .ok_or("set GC_TEST_DATABASE_URL (scripts/postgres.sh)")?;

    // The sessions: each a Deployment, a Service and a Session, its row `running`; twice the
    // batch stay running (the guard weighs the whole namespace: without live sessions beside
    // them, a batch of gone sessions is refused as an empty database would be).
    let total = rounds + 3 * batch;
    let all: Vec<String> = (0..total)
        .map(|i| format!("user-firefox-{i:08x}"))
        .collect();
    let ids = &all[..rounds + batch];
    let pool = db.pool().await?;
    sqlx::query("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
        .execute(&pool)
        .await?;
    let post = PostParams::default();
    let sessions: Api<DynamicObject> =
        Api::namespaced_with(ns.client().clone(), ns.name(), &session);
    for id in &all {
        let labels = json!({"app": "streamspace-session", "session": id});
        let meta = json!({"name": id, "labels": labels});
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": meta,
            "spec": {"replicas": 0, "selector": {"matchLabels": {"session": id}},
                     "template": {"metadata": {"labels": {"session": id}},
                                  "spec": {"containers": [{"name": "s", "image": "busybox"}]}}},
        }))?;
        ns.api::<Deployment>().create(&post, &deployment).await?;
        let service: Service = serde_json::from_value(json!({
            "metadata": meta, "spec": {"ports": [{"port": 3000}]},
        }))?;
        ns.api::<Service>().create(&post, &service).await?;
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": session.api_version, "kind": session.kind, "metadata": meta,
            "spec": {"user": "user", "template": "firefox"},
        }))?;
        sessions.create(&post, &object).await?;
        sqlx::query("INSERT INTO sessions VALUES ($1, 'running')")
            .bind(id)
            .execute(&pool)
            .await?;
    }
    let terminate = async |ids: &[String]| -> Result {
        sqlx::query("UPDATE sessions SET state = 'terminated' WHERE id = ANY($1)")
            .bind(ids)
            .execute(&pool)
            .await?;
        Ok(())
    };

    // The control plane's account, allowed every call.
    ns.service_account_client("streamspace-api").await?;
    let rule = PolicyRule {
        api_groups: Some(vec!["gc.stream.space".into()]),
        resources: Some(vec![
            "sessions/collect".into(),
            "sessions/plan".into(),
            "runs".into(),
        ]),
        verbs: vec!["create".into(), "get".into()],
        ..PolicyRule::default()
    };
    ns.grant("streamspace-api", vec![rule]).await?;
    let token = ns
        .service_account_token_for("streamspace-api", &["gc"])
        .await?;

    // `serve` with the API, live, its requests' grace none (the objects are seconds old).
    let dir = tempfile::tempdir()?;
    let free = || -> Result<String> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .to_string())
    };
    let (metrics, api) = (free()?, free()?);
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let archives = dir.path().join("archives").display().to_string();
    let common = [
        "sessions",
        "-n",
        ns.name(),
        "--kubeconfig",
        &kubeconfig,
        "--database-url",
        db.url(),
        "--state-column",
        "state",
        "--terminal-state",
        "terminated",
        "--store",
        &store,
        "--archive-dir",
        &archives,
    ];
    let mut served = Command::new(&gc_cli)
        .args([
            "serve",
            "--listen",
            &metrics,
            "--api-listen",
            &api,
            "--interval",
            "7d",
        ])
        .args(["--request-grace", "0s"])
        .args(common)
        .args(["--dry-run=none", "--max-deletes", "1000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let status_ok = || call(&api, "GET", "/v1/runs/0", &token, "").map(|(s, _)| s == 404);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !status_ok().unwrap_or(false) {
        if Instant::now() > deadline {
            return Err("the request API did not answer within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The first scheduled run finds nothing to do; let it end.
    std::thread::sleep(Duration::from_secs(2));

    // One session at a time.
    let mut one = Vec::new();
    for id in &ids[..rounds] {
        terminate(std::slice::from_ref(id)).await?;
        one.push(collect(&api, ns.name(), &token, id)?);
    }
    // A batch requested at once.
    let wave = &ids[rounds..];
    terminate(wave).await?;
    let started = Instant::now();
    let threads: Vec<_> = wave
        .iter()
        .map(|id| {
            let (api, ns, token, id) =
                (api.clone(), ns.name().to_owned(), token.clone(), id.clone());
            std::thread::spawn(move || collect(&api, &ns, &token, &id).map_err(|e| e.to_string()))
        })
        .collect();
    let mut each = Vec::new();
    for thread in threads {
        each.push(thread.join().map_err(|_| "a thread panicked")??);
    }
    let whole = started.elapsed();

    // The API's own cost: a plan through it (answers cached) beside a whole `plan sessions`.
    let (mut through_api, mut process) = (Vec::new(), Vec::new());
    let plan = format!("/v1/namespaces/{}/sessions/plan", ns.name());
    let body = json!({ "sessions": [ids[0]] }).to_string();
    for _ in 0..rounds {
        let started = Instant::now();
        let (status, answer) = call(&api, "POST", &plan, &token, &body)?;
        through_api.push(started.elapsed());
        if status != 200 {
            return Err(format!("plan: {status} {answer}").into());
        }
        let started = Instant::now();
        let out = Command::new(&gc_cli)
            .arg("plan")
            .args(&common[..11])
            .arg("-q")
            .output()?;
        process.push(started.elapsed());
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
        }
    }
    let _ = Command::new("kill")
        .args(["-TERM", &served.id().to_string()])
        .status();
    served.wait()?;

    println!("| what | requests | p50 | p99 |");
    println!("| --- | ---: | ---: | ---: |");
    let row = |what: &str, times: &[Duration]| {
        println!(
            "| {what} | {} | {:.0} ms | {:.0} ms |",
            times.len(),
            quantile(times, 0.5),
            quantile(times, 0.99)
        );
    };
    row("one session: call to deleted and archived", &one);
    row(&format!("{batch} sessions at once: each"), &each);
    println!(
        "| {batch} sessions at once: all | 1 | {:.0} ms | |",
        whole.as_secs_f64() * 1000.0
    );
    row("plan of one session through the API", &through_api);
    row("`gc-cli plan sessions` (a whole process)", &process);
    Ok(())
}
