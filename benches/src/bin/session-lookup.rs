//! Session lookups at scale against the real PostgreSQL: the session collector's batched lookup
//! (`SessionTable::lookup`, [`LOOKUP_BATCH`] ids per query) compared in the same run with one
//! query per session, then `plan_sessions` and the whole `collect_sessions::plan` over 4 kinds of
//! synthetic resources.
//!
//! `session-lookup [SESSIONS]` (default 20000; half of them have a row). The database server is
//! `$GC_TEST_DATABASE_URL`, else the one `scripts/postgres.sh` starts; the benchmark creates (and
//! drops at the end) a database of its own on it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use gc_core::ports::{ClusterError, ObjectCluster, Page, Preconditions, SessionDirectory};
use gc_core::sessions::run::{self as collect_sessions, LOOKUP_BATCH};
use gc_core::sessions::{Kind, Resource, Row, SessionInputs, plan_sessions};
use gc_store::TableSpec;
use serde_json::json;
use sqlx::{Connection, PgConnection};

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// The benchmark's own database on the server.
const DATABASE: &str = "gc_bench_session_lookup";
/// 2026-11-29T12:00:00Z: the instant planned for.
const NOW: f64 = 1_795_953_600.0;
/// Runs of each measurement; the table shows the best and the median.
const RUNS: usize = 5;

/// StreamSpace's table, as its control plane creates it, with its index on `state`.
const SCHEMA: &str = "CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, user_id VARCHAR(255), \
     template_name VARCHAR(255), state VARCHAR(50), created_at TIMESTAMP, updated_at TIMESTAMP); \
     CREATE INDEX idx_sessions_state ON sessions(state)";

/// Session id `i` in StreamSpace's form `{user}-{template}-{8 hex}`.
fn id(i: usize) -> String {
    let template = ["firefox", "vscode", "gimp", "libreoffice"][i % 4];
    format!(
        "user{}-{template}-{:08x}",
        i % 997,
        i.wrapping_mul(2_654_435_761) & 0xffff_ffff
    )
}

/// The server's admin URL: `$GC_TEST_DATABASE_URL`, else the last line `scripts/postgres.sh`
/// prints.
fn admin_url() -> Result<String> {
    if let Some(url) = std::env::var("GC_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        return Ok(url);
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres.sh");
    let out = std::process::Command::new(script)
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("{script} failed").into());
    }
    let text = String::from_utf8(out.stdout)?;
    Ok(text
        .lines()
        .last()
        .ok_or("no URL from postgres.sh")?
        .to_owned())
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let start = base.find("://").map_or(0, |i| i + 3);
    let end = base[start..].find('/').map_or(base.len(), |i| start + i);
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    format!("{}/{database}{query}", &base[..end])
}

/// A fresh database with `n` sessions, every second one with a row (states mixed).
async fn fill(admin: &str, n: usize) -> Result<String> {
    let mut conn = PgConnection::connect(admin).await?;
    sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        .execute(&mut conn)
        .await?;
    sqlx::raw_sql(&format!("CREATE DATABASE {DATABASE}"))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let url = with_database(admin, DATABASE);
    let mut conn = PgConnection::connect(&url).await?;
    sqlx::raw_sql(SCHEMA).execute(&mut conn).await?;
    let (mut ids, mut states) = (Vec::new(), Vec::new());
    for i in (0..n).step_by(2) {
        ids.push(id(i));
        states.push(["running", "hibernated", "deleted", "terminated"][(i / 2) % 4]);
    }
    sqlx::query(
        "INSERT INTO sessions (id, user_id, template_name, state, created_at, updated_at) \
         SELECT id, split_part(id, '-', 1), split_part(id, '-', 2), state, now(), now() \
         FROM unnest($1::text[], $2::text[]) AS t(id, state)",
    )
    .bind(&ids)
    .bind(&states)
    .execute(&mut conn)
    .await?;
    sqlx::raw_sql("ANALYZE sessions").execute(&mut conn).await?;
    conn.close().await?;
    Ok(url)
}

/// Best and median of `times`.
fn best_median(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[0], times[times.len() / 2])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The collector's lookup: one `SessionTable::lookup` per batch of [`LOOKUP_BATCH`] ids.
async fn batched(
    table: &gc_store::SessionTable,
    ids: &[String],
) -> Result<(HashMap<String, Row>, u64)> {
    let before = table.queries();
    let mut rows = HashMap::with_capacity(ids.len());
    for batch in ids.chunks(LOOKUP_BATCH) {
        rows.extend(table.lookup(batch).await?);
    }
    Ok((rows, table.queries() - before))
}

/// One query per session, over one connection (the statement prepared once and reused).
async fn one_by_one(conn: &mut PgConnection, ids: &[String]) -> Result<HashMap<String, Row>> {
    let mut rows = HashMap::with_capacity(ids.len());
    for id in ids {
        let state: Option<Option<String>> =
            sqlx::query_scalar("SELECT state FROM sessions WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *conn)
                .await?;
        let row = match state {
            None => Row::Missing,
            Some(state) => Row::Present { state },
        };
        rows.insert(id.clone(), row);
    }
    Ok(rows)
}

/// The four StreamSpace objects of every session, as the scan reads them; a tenth created
/// inside the grace period.
fn resources(ids: &[String]) -> Vec<Resource> {
    let mut out = Vec::with_capacity(ids.len() * 4);
    for kind in Kind::streamspace() {
        for (i, id) in ids.iter().enumerate() {
            let name = if kind.kind == "PersistentVolumeClaim" {
                format!("{id}-home")
            } else {
                id.clone()
            };
            let created = if i % 10 == 3 {
                "2026-11-29T06:00:00Z"
            } else {
                "2026-11-20T08:30:00Z"
            };
            out.push(Resource {
                api_version: kind.api_version(),
                kind: kind.kind.clone(),
                name,
                uid: format!("{:08x}-0000-4000-8000-{i:012x}", i ^ kind.plural.len()),
                resource_version: (1000 + i).to_string(),
                session: Some(id.clone()),
                created: Some(created.into()),
                deleting: false,
            });
        }
    }
    out
}

/// A cluster that serves `resources` as metadata-list pages (rendered once, up front, so that
/// the timing is the collector's reading and not this fake's writing) and never deletes.
struct Pages {
    by_kind: HashMap<String, Vec<Vec<u8>>>,
}

impl Pages {
    fn new(resources: &[Resource]) -> Result<Self> {
        let mut items: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
        for r in resources {
            let id = r.session.as_deref().unwrap_or_default();
            let mut parts = id.split('-');
            items.entry(r.kind.clone()).or_default().push(json!({
                "metadata": {
                    "name": r.name, "namespace": "streamspace", "uid": r.uid,
                    "resourceVersion": r.resource_version, "creationTimestamp": r.created,
                    "labels": { "app": "streamspace-session", "session": id,
                                "user": parts.next(), "template": parts.next() },
                },
            }));
        }
        let mut by_kind = HashMap::new();
        for (kind, items) in items {
            let pages = items
                .chunks(collect_sessions::PAGE_SIZE as usize)
                .map(|page| {
                    serde_json::to_vec(&json!({
                        "apiVersion": "meta.k8s.io/v1",
                        "kind": "PartialObjectMetadataList",
                        "metadata": { "resourceVersion": "99999" },
                        "items": page,
                    }))
                })
                .collect::<Result<Vec<_>, _>>()?;
            by_kind.insert(kind, pages);
        }
        Ok(Self { by_kind })
    }
}

#[async_trait]
impl ObjectCluster for Pages {
    async fn list_metadata(
        &self,
        kind: &Kind,
        _: &str,
        _: &str,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        if limit != collect_sessions::PAGE_SIZE {
            return Err(ClusterError::Other(format!(
                "pages are rendered for {limit}"
            )));
        }
        let pages = self.by_kind.get(&kind.kind).map_or(&[][..], Vec::as_slice);
        let at: usize = token.map_or(0, |t| t.parse().unwrap_or(0));
        let text = pages
            .get(at)
            .cloned()
            .unwrap_or_else(|| br#"{"items":[]}"#.to_vec());
        Ok(Page {
            text,
            continue_token: (at + 1 < pages.len()).then(|| (at + 1).to_string()),
        })
    }
    async fn get_object(
        &self,
        _: &Kind,
        _: &str,
        _: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        Err(ClusterError::Other("the benchmark only plans".into()))
    }
    async fn delete_object(
        &self,
        _: &Kind,
        _: &str,
        _: &str,
        _: &Preconditions,
        _: bool,
    ) -> Result<(), ClusterError> {
        Err(ClusterError::Other("the benchmark never deletes".into()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let admin = admin_url()?;
    let started = Instant::now();
    let url = fill(&admin, n).await?;
    eprintln!(
        "filled {DATABASE} with {} rows for {n} sessions in {:.1?}",
        n.div_ceil(2),
        started.elapsed()
    );
    let ids: Vec<String> = (0..n).map(id).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), n, "ids are distinct");

    // Batched, as the collector looks up: ids sorted and distinct, as `session_ids` gives them.
    let table = gc_store::connect_sessions(&url, TableSpec::streamspace()).await?;
    let mut times = Vec::new();
    let (mut answer, mut queries) = (HashMap::new(), 0);
    for _ in 0..RUNS {
        let t = Instant::now();
        (answer, queries) = batched(&table, &sorted).await?;
        times.push(t.elapsed());
    }
    let (batched_best, batched_median) = best_median(times);
    table.close().await;

    // One query per session, over one connection.
    let mut conn = PgConnection::connect(&url).await?;
    let mut times = Vec::new();
    let mut single = HashMap::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        single = one_by_one(&mut conn, &sorted).await?;
        times.push(t.elapsed());
    }
    let (single_best, single_median) = best_median(times);
    conn.close().await?;
    assert_eq!(answer, single, "both lookups give the same answer");
    let present = answer
        .values()
        .filter(|r| matches!(r, Row::Present { .. }))
        .count();

    println!("{n} sessions, {present} with a row; best and median of {RUNS} runs:\n");
    println!("| lookup | queries (round trips) | best | median | per session |");
    println!("| --- | --- | --- | --- | --- |");
    for (label, q, best, median) in [
        (
            format!("batched, {LOOKUP_BATCH} ids per `= ANY($1)` (collector)"),
            queries as usize,
            batched_best,
            batched_median,
        ),
        (
            "one `SELECT state ... WHERE id = $1` per session".to_owned(),
            n,
            single_best,
            single_median,
        ),
    ] {
        println!(
            "| {label} | {q} | {} | {} | {:.1} µs |",
            ms(best),
            ms(median),
            median.as_secs_f64() * 1e6 / n as f64
        );
    }

    // The plan over four kinds of every session.
    let resources = resources(&sorted);
    let cfg = SessionInputs {
        terminal_states: vec!["deleted".into(), "terminated".into()],
        max_deletes: 10_000,
        override_guard: true,
        ..SessionInputs::default()
    }
    .validate()?;
    let mut times = Vec::new();
    let mut deletes = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let plan = plan_sessions(&resources, &answer, &cfg, NOW)?;
        times.push(t.elapsed());
        deletes = plan.deletes().count();
    }
    let (plan_best, plan_median) = best_median(times);

    // The whole plan: pages of metadata read, the batched lookup, the plan.
    let pages = Pages::new(&resources)?;
    let table = gc_store::connect_sessions(&url, TableSpec::streamspace()).await?;
    let mut times = Vec::new();
    let mut lookups = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let planned = collect_sessions::plan(&pages, &table, &cfg, NOW).await?;
        times.push(t.elapsed());
        assert_eq!(planned.plan.deletes().count(), deletes);
        lookups = planned.lookups;
    }
    let (whole_best, whole_median) = best_median(times);
    table.close().await;

    println!(
        "\n| step ({} resources, 4 kinds) | best | median |",
        resources.len()
    );
    println!("| --- | --- | --- |");
    println!(
        "| `plan_sessions` ({deletes} deletes, capped at 10,000) | {} | {} |",
        ms(plan_best),
        ms(plan_median)
    );
    let (count, bytes) = pages
        .by_kind
        .values()
        .flatten()
        .fold((0, 0), |(c, b), p| (c + 1, b + p.len()));
    println!(
        "| `collect_sessions::plan`: {count} pages of {} ({:.1} MB) read, {lookups} lookups, \
         plan | {} | {} |",
        collect_sessions::PAGE_SIZE,
        bytes as f64 / 1e6,
        ms(whole_best),
        ms(whole_median)
    );

    let mut conn = PgConnection::connect(&admin).await?;
    sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}
