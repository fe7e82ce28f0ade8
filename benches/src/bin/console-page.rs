//! The console's Sessions page at scale, against the real API server and PostgreSQL: one
//! namespace holding 5,000 StreamSpace sessions (a Deployment, a headless Service, a claim and a
//! `Session` each: 20,000 objects), three in five of them live in the session table. A real
//! `gc-cli console` serves it; each figure is the time to the last byte of one page, over HTTP on
//! loopback, alternating in one run:
//!
//! - `first page after start` (once): the page the link opens, right after the console
//!   printed it (it plans the first namespace before);
//! - `first page, planned anew` (`?again=1`): the whole plan (20,000 objects listed, 5,000 ids
//!   looked up) and its first 50 sessions drawn;
//! - `another page` (`?page=40`): the namespace's plan kept from the page before, one page drawn;
//! - `filtered` (`?q=s-12&decision=delete`): the kept plan searched on the server.
//!
//! `console-page [SESSIONS] [ROUNDS]` (default 5000 5); `GC_CLI` names the binary (default
//! `target/release/gc-cli`); PostgreSQL from `GC_TEST_DATABASE_URL`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Instant;

use gc_testbed::{TestBed, TestDatabase, TestNamespace};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;
use tokio::task::JoinSet;

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// Requests in flight while the cluster is filled.
const PARALLEL: usize = 32;

/// Creates the four objects of each of `sessions` sessions (`s-<i>`) in `ns`.
async fn fill(ns: &TestNamespace, crd: &kube::discovery::ApiResource, sessions: usize) -> Result {
    let mut set = JoinSet::new();
    for i in 0..sessions {
        let (client, name, crd) = (ns.client().clone(), ns.name().to_owned(), crd.clone());
        if set.len() >= PARALLEL
            && let Some(done) = set.join_next().await
        {
            done??;
        }
        set.spawn(async move {
            let id = format!("s-{i}");
            let labels = json!({"app": "streamspace-session", "session": id});
            let objects = [
                (
                    "apps/v1",
                    "Deployment",
                    "deployments",
                    json!({"replicas": 0,
                    "selector": {"matchLabels": {"session": id}},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "s", "image": "firefox"}]}}}),
                ),
                (
                    "v1",
                    "Service",
                    "services",
                    json!({"clusterIP": "None",
                    "selector": {"session": id}, "ports": [{"port": 3000}]}),
                ),
                (
                    "v1",
                    "PersistentVolumeClaim",
                    "persistentvolumeclaims",
                    json!({
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}),
                ),
            ];
            for (api_version, kind, plural, spec) in objects {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
                let resource = kube::discovery::ApiResource::from_gvk_with_plural(&gvk, plural);
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": api_version, "kind": kind,
                    "metadata": {"name": id, "labels": labels}, "spec": spec,
                }))?;
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &name, &resource);
                api.create(&PostParams::default(), &object).await?;
            }
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": crd.api_version, "kind": crd.kind,
                "metadata": {"name": id, "labels": labels},
                "spec": {"user": "someone", "template": "firefox"},
            }))?;
            let api: Api<DynamicObject> = Api::namespaced_with(client, &name, &crd);
            api.create(&PostParams::default(), &object).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    Ok(())
}

/// One GET with the console's cookie: the status and the body's length, read to its last byte.
fn get(host: &str, path: &str, cookie: &str) -> Result<(u16, usize)> {
    let mut stream = TcpStream::connect(host)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nCookie: gc-console={cookie}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).unwrap_or_default().parse()?;
    Ok((status, answer.len()))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result {
    let mut args = std::env::args().skip(1);
    let sessions: usize = args.next().map_or(Ok(5000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let gc_cli = std::env::var("GC_CLI").unwrap_or_else(|_| "target/release/gc-cli".into());
    let Some(db) = TestDatabase::fresh("console_page").await? else {
        return Err("GC_TEST_DATABASE_URL is not set".into());
    };
    let pool = db.pool().await?;
    sqlx::raw_sql("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
        .execute(&pool)
        .await?;
    let live: Vec<String> = (0..sessions)
        .filter(|i| i % 5 < 3)
        .map(|i| format!("s-{i}"))
        .collect();
    sqlx::query("INSERT INTO sessions SELECT id, 'running' FROM UNNEST($1::text[]) AS id")
        .bind(&live)
        .execute(&pool)
        .await?;
    pool.close().await;
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("console-page").await?;
    let crd = bed.install_session_crd().await?;
    let filling = Instant::now();
    fill(&ns, &crd, sessions).await?;
    eprintln!(
        "{} objects created in {:.1} s",
        sessions * 4,
        filling.elapsed().as_secs_f64()
    );

    let mut console = Command::new(&gc_cli)
        .args(["console", "--listen", "127.0.0.1:0", "-n", ns.name()])
        .args(["--database-url", db.url()])
        .arg("--kubeconfig")
        .arg(bed.kubeconfig_path())
        .env("GC_STATE_DIR", tempfile::tempdir()?.keep())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(console.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().ok_or("the console ended")??;
        if let Some((_, url)) = line.split_once("works once): ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let path = url.split(&host).nth(1).unwrap_or_default().to_owned();
    // The link, once: its cookie.
    let mut stream = TcpStream::connect(&host)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    let mut head = String::new();
    stream.read_to_string(&mut head)?;
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: gc-console="))
        .and_then(|c| c.split(';').next())
        .ok_or("no cookie")?
        .to_owned();

    let ns = ns.name();
    // The page an operator opens first, right after the console starts.
    let started = Instant::now();
    let (status, bytes) = get(&host, &format!("/sessions?ns={ns}"), &cookie)?;
    let first = started.elapsed().as_secs_f64();
    assert_eq!(status, 200);
    eprintln!(
        "first page after start: {:.0} ms, {bytes} bytes",
        first * 1e3
    );
    let pages = [
        (
            "first page, planned anew",
            format!("/sessions?ns={ns}&again=1"),
        ),
        ("another page", format!("/sessions?ns={ns}&page=40")),
        (
            "filtered",
            format!("/sessions?ns={ns}&q=s-12&decision=delete"),
        ),
    ];
    let mut times = vec![Vec::new(); pages.len()];
    for round in 0..=rounds {
        for (i, (what, path)) in pages.iter().enumerate() {
            let started = Instant::now();
            let (status, bytes) = get(&host, path, &cookie)?;
            let seconds = started.elapsed().as_secs_f64();
            assert_eq!(status, 200, "{what}");
            // The first round warms the connections and the caches: not counted.
            if round > 0 {
                times[i].push(seconds);
            }
            eprintln!(
                "round {round} {what}: {:.0} ms, {bytes} bytes",
                seconds * 1e3
            );
        }
    }
    let _ = console.kill();
    println!(
        "| page ({sessions} sessions, {} objects) | best | median |",
        sessions * 4
    );
    println!("| --- | --- | --- |");
    println!(
        "| first page after start (once) | {:.0} ms | |",
        first * 1e3
    );
    for ((what, _), t) in pages.iter().zip(&mut times) {
        let best = t.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "| {what} | {:.0} ms | {:.0} ms |",
            best * 1e3,
            median(t) * 1e3
        );
    }
    Ok(())
}
