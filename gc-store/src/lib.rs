//! The store port on sqlx: PostgreSQL in production, SQLite as the embedded default.
//!
//! [`open`] takes a store URL (`sqlite:PATH`, a plain file path, or `postgres://...`), migrates
//! the schema and returns a [`Store`] that implements [`gc_core::ports::Store`]. Ledgers are kept
//! as the reference flow's JSON text, byte for byte, so they move in and out unchanged.
//!
//! Two more adapters live here: [`DirectorySink`], the [`gc_core::ports::ArchiveSink`] that
//! writes archives as files, and [`SessionTable`], the read-only
//! [`gc_core::ports::SessionDirectory`] over the application's session table.
//! [`ObjectSink`] is the same archive port over an S3-compatible object store.

mod archive;
mod error;
mod location;
mod object;
mod schema;
mod sessions;
mod sinks;

use std::fmt;
use std::path::PathBuf;
use std::sync::PoisonError;
use std::time::Duration;

use async_trait::async_trait;
use gc_core::ports::{self, Receipt, RetainedVolume, SessionObject, StoreError};
use gc_core::{Ledger, PreviousLedger};
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};
use sqlx::{ConnectOptions, Connection, Database, Postgres, Sqlite};

use location::Location;
use schema::Dialect;

pub use archive::{ArchiveEntry, DirectorySink, default_archive_dir};
pub use gc_core::shown::{UrlNotShown, shown_url};
pub use object::{ObjectOptions, ObjectSink};
pub use sessions::{
    DB_VARIABLES, SessionTable, SessionUrlError, TableSpec, connect_sessions, session_url,
    url_from_env,
};
pub use sinks::Archives;

/// How long opening a store may wait for the first connection, and a call for a pooled one.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call to the store may wait for its answer by default ([`open_within`]): a
/// receipt is written in milliseconds, so 30 s is a store that stopped answering, well inside the
/// run lock's 30 s lease renewed every 10 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SQLite waits for another writer (another process) before answering "busy".
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections per pool: the engine works one target at a time.
const MAX_CONNECTIONS: u32 = 4;

/// The embedded default database file: `$GC_STATE_DIR/gc.sqlite3`, else
/// `$XDG_STATE_HOME/gc/gc.sqlite3`, else `~/.local/state/gc/gc.sqlite3`.
pub fn default_path() -> PathBuf {
    location::default_path_from(|name| std::env::var_os(name))
}

/// The store at a URL (`sqlite:PATH`, a path, `postgres://...`), or the embedded SQLite file
/// (`None`), each call to it waiting at most the duration given for its answer: what a
/// collector opens for each namespace's run ([`gc_core::ports::OpenStore`]).
#[derive(Debug, Clone)]
pub struct StoreAt(pub Option<String>, pub Duration);

impl Default for StoreAt {
    fn default() -> Self {
        Self(None, DEFAULT_TIMEOUT)
    }
}

impl StoreAt {
    /// Opens it.
    ///
    /// # Errors
    /// As [`open_within`]; [`StoreError::Other`] when the default path is not UTF-8.
    pub async fn open(&self) -> Result<Store, StoreError> {
        let url = match &self.0 {
            Some(url) => url.clone(),
            None => default_path()
                .to_str()
                .ok_or_else(|| {
                    StoreError::Other("the default store path is not UTF-8: give `store`".into())
                })?
                .to_owned(),
        };
        open_within(&url, self.1).await
    }
}

#[async_trait::async_trait]
impl gc_core::ports::OpenStore for StoreAt {
    type Store = Store;
    async fn open(&self) -> Result<Store, StoreError> {
        StoreAt::open(self).await
    }
}

/// An open store: a SQLite file or a PostgreSQL database, migrated.
///
/// Cloning is cheap and shares the connection pool.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// The location as it may be shown: a URL's password is replaced by `***`.
    shown: String,
    /// Receipts waiting for the next group commit ([`Store::put_receipt`]).
    receipts: std::sync::Arc<GroupCommit>,
    /// How long one call may wait for the database's answer.
    timeout: Duration,
}

/// Where a queued receipt's result goes.
type Answer = tokio::sync::oneshot::Sender<Result<(), StoreError>>;

/// Receipts recorded together: each `put_receipt` queues its receipt and waits for its turn to
/// write; the writer whose turn it is commits every receipt queued by then in one transaction
/// (one disk sync) and tells each its result. A receipt is answered only once the transaction
/// that holds it committed: no object is deleted before its own receipt is durable.
#[derive(Default)]
struct GroupCommit {
    /// Each receipt waiting, and where its result goes.
    queue: std::sync::Mutex<Vec<(Receipt, Answer)>>,
    turn: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl fmt::Debug for Store {
    // The pools' own `Debug` would print their connect options, password included.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.shown)
            .finish()
    }
}

/// Opens the store at `url` and migrates its schema.
///
/// `url` is `sqlite:PATH`, `sqlite://PATH` or a plain file path for SQLite, or
/// `postgres://...` / `postgresql://...` for PostgreSQL.
///
/// # Guarantees
/// A SQLite file and its parent folders are created on first use; the file is put in WAL mode
/// with a busy timeout, so processes can share it. The schema is at the newest version when this
/// returns. A URL's password never appears in an error or in [`Store::location`] (it is shown
/// as [`shown_url`] shows it).
///
/// # Errors
/// [`StoreError::Unavailable`] when the database cannot be reached within a few seconds, refuses
/// the credentials, or the SQLite file or folder cannot be created; [`StoreError::Malformed`] when
/// the file is not a SQLite database; [`StoreError::Other`] for a bad URL or a failed migration.
/// A PostgreSQL URL that [`shown_url`] will not show is refused without its value:
/// `the store URL ($GC_STORE / --store) is not a valid URL (its value is not shown): ...`.
pub async fn open(url: &str) -> Result<Store, StoreError> {
    open_within(url, DEFAULT_TIMEOUT).await
}

/// [`open`], each later call to the store (and the schema's check as it opens) waiting at most
/// `timeout` for the database's answer.
///
/// # Errors
/// As [`open`]; [`StoreError::Unavailable`] (`the store did not answer within 30s`) when the
/// database, connected, does not answer the schema's check in time.
pub async fn open_within(url: &str, timeout: Duration) -> Result<Store, StoreError> {
    let location = Location::parse(url, location::STORE).map_err(StoreError::Other)?;
    let shown = location.shown();
    let pool = match &location {
        Location::Sqlite(path) => open_sqlite(path, &shown, timeout).await?,
        Location::Postgres { url, .. } => open_postgres(url, &shown, timeout).await?,
    };
    Ok(Store {
        pool,
        shown,
        receipts: std::sync::Arc::default(),
        timeout,
    })
}

/// `work`'s result, or [`StoreError::Unavailable`] when it does not end within `timeout`: a
/// connection open and silent is a store that stopped answering, and waiting longer would hold
/// the run (and its Lease) with it.
async fn within<T, E>(
    timeout: Duration,
    shown: &str,
    work: impl Future<Output = Result<T, E>>,
    map: impl FnOnce(E) -> StoreError,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, work).await {
        Ok(result) => result.map_err(map),
        Err(_) => Err(StoreError::Unavailable(format!(
            "{shown}: the store did not answer within {}s",
            timeout.as_secs_f64()
        ))),
    }
}

async fn open_sqlite(
    path: &std::path::Path,
    shown: &str,
    timeout: Duration,
) -> Result<Pool, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Unavailable(format!("{shown}: cannot create {}: {e}", dir.display()))
        })?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(BUSY_TIMEOUT);
    let err = |e: sqlx::Error| error::map(shown, e);
    // SQLite's migrator takes no lock, and switching to WAL or creating the first tables can
    // answer "database is locked" at once, without waiting out the busy timeout. Openers of one
    // file, in this process or another, take turns on an advisory lock beside it (as
    // PostgreSQL's migrator does with an advisory lock), released when the pool exists.
    let _turn = open_turn(path, shown).await?;
    let mut conn = connect(options.connect(), shown).await?;
    let migrator = schema::migrator(Dialect::Sqlite).await.map_err(err)?;
    // `run_direct`, sqlx's own way around `Acquire`'s lifetime: with `run`, no future that
    // opens a store is `Send` for every lifetime, so an embedder could not spawn a run.
    let migrated = migrator.run_direct(&mut conn);
    within(timeout, shown, migrated, |e| err(e.into())).await?;
    let pool = pool_after::<Sqlite>(conn, options, MAX_CONNECTIONS, shown, timeout).await?;
    Ok(Pool::Sqlite(pool))
}

/// Takes the exclusive advisory lock on `PATH.lock` (created if missing, never removed: removing
/// a lock file races with its next holder), waiting for at most [`CONNECT_TIMEOUT`]. The lock
/// is released when the returned file is dropped, or when the process ends.
async fn open_turn(path: &std::path::Path, shown: &str) -> Result<std::fs::File, StoreError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let unavailable = |e: &dyn fmt::Display| {
        StoreError::Unavailable(format!("{shown}: {}: {e}", lock_path.display()))
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| unavailable(&e))?;
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(unavailable(&format_args!(
                    "another process has been opening the store for {} seconds",
                    CONNECT_TIMEOUT.as_secs()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(unavailable(&e)),
        }
    }
}

async fn open_postgres(url: &str, shown: &str, timeout: Duration) -> Result<Pool, StoreError> {
    let err = |e: sqlx::Error| error::map(shown, e);
    let options: PgConnectOptions = url.parse().map_err(err)?;
    // A first connection of its own, so that a refused connection or bad credentials are
    // reported as such at once (a pool would retry until its timeout and then only say so).
    let mut conn: PgConnection = connect(options.connect(), shown).await?;
    // PostgreSQL's migrator holds an advisory lock: concurrent opens apply each migration once.
    let migrator = schema::migrator(Dialect::Postgres).await.map_err(err)?;
    // `run_direct`, as for SQLite.
    let migrated = migrator.run_direct(&mut conn);
    within(timeout, shown, migrated, |e| err(e.into())).await?;
    let pool = pool_after::<Postgres>(conn, options, MAX_CONNECTIONS, shown, timeout).await?;
    Ok(Pool::Postgres(pool))
}

/// Closes `conn`, the first connection that proved `options` good, and returns a pool of at most
/// `max` connections with them, each opened when first needed.
async fn pool_after<DB: Database>(
    conn: DB::Connection,
    options: <DB::Connection as Connection>::Options,
    max: u32,
    shown: &str,
    timeout: Duration,
) -> Result<sqlx::Pool<DB>, StoreError> {
    within(timeout, shown, conn.close(), |e| error::map(shown, e)).await?;
    Ok(PoolOptions::new()
        .max_connections(max)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_lazy_with(options))
}

/// Every byte outside RFC 3986's unreserved set (`A-Z a-z 0-9 - . _ ~`).
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A URI path's bytes to encode: [`UNRESERVED`]'s, less `/`.
const PATH: &percent_encoding::AsciiSet = &UNRESERVED.remove(b'/');

/// `bytes` as URI text: every byte of `set` as `%XX` (uppercase hex).
fn percent_encode(bytes: &[u8], set: &'static percent_encoding::AsciiSet) -> String {
    percent_encoding::percent_encode(bytes, set).to_string()
}

/// The text `percent_encode` encoded, or `None` when it is not: not UTF-8, or a `%` not
/// followed by two hex digits (which the crate's decoder would keep as it is; no encoding gc
/// writes has one, so a URI holding one is refused).
fn percent_decode(text: &str) -> Option<String> {
    let escapes = text.split('%').skip(1);
    let hex = |e: &str| e.len() >= 2 && e.as_bytes()[..2].iter().all(u8::is_ascii_hexdigit);
    if !escapes.into_iter().all(hex) {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()?;
    Some(decoded.into_owned())
}

/// Awaits a first connection, for at most [`CONNECT_TIMEOUT`].
async fn connect<C>(
    connecting: impl Future<Output = Result<C, sqlx::Error>>,
    shown: &str,
) -> Result<C, StoreError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(result) => result.map_err(|e| error::map(shown, e)),
        Err(_) => Err(StoreError::Unavailable(format!(
            "{shown}: no connection within {} seconds",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// Runs `$body` with `$pool` bound to the store's pool and `$sql` to its dialect's statements,
/// for at most the store's timeout; its error as a [`StoreError`].
macro_rules! with_pool {
    ($store:expr, |$pool:ident, $sql:ident| $body:expr) => {{
        let work = async {
            match &$store.pool {
                Pool::Sqlite($pool) => {
                    let $sql = &SQLITE_SQL;
                    $body
                }
                Pool::Postgres($pool) => {
                    let $sql = &POSTGRES_SQL;
                    $body
                }
            }
        };
        within($store.timeout, &$store.shown, work, |e| $store.err(e)).await
    }};
}

/// The statements whose text differs between the dialects (only in how they read the clock).
struct Statements {
    save_ledger: &'static str,
    put_receipt: &'static str,
    list_receipts: &'static str,
    delete_receipt: &'static str,
}

/// The statements of a dialect, given its expression for the current time.
macro_rules! statements {
    ($now:literal, $created_at:literal, $text:literal) => {
        Statements {
            save_ledger: concat!(
                "INSERT INTO gc_ledgers (cluster_id, namespace, ledger) VALUES ($1, $2, $3) ",
                "ON CONFLICT (cluster_id, namespace) DO UPDATE ",
                "SET ledger = excluded.ledger, updated_at = ",
                $now
            ),
            put_receipt: concat!(
                "INSERT INTO gc_receipts (cluster_id, uid, namespace, name, uri, sha256, bytes, ",
                "api_version, kind, session, run_at, volume, volume_policy) ",
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ",
                "ON CONFLICT (cluster_id, uid) DO UPDATE ",
                "SET namespace = excluded.namespace, name = excluded.name, uri = excluded.uri, ",
                "sha256 = excluded.sha256, bytes = excluded.bytes, ",
                "api_version = excluded.api_version, kind = excluded.kind, ",
                "session = excluded.session, run_at = excluded.run_at, ",
                "volume = excluded.volume, volume_policy = excluded.volume_policy, created_at = ",
                $now
            ),
            list_receipts: concat!(
                "SELECT cluster_id, namespace, uid, name, uri, sha256, bytes, ",
                "api_version, kind, session, run_at, volume, volume_policy, ",
                $created_at,
                " FROM gc_receipts WHERE cluster_id = $1 ",
                "AND ($2",
                $text,
                " IS NULL OR namespace = $2) AND ($3",
                $text,
                " IS NULL OR name = $3) AND ($4",
                $text,
                " IS NULL OR lower(kind) = lower($4)) AND ($5",
                $text,
                " IS NULL OR session = $5) ",
                "ORDER BY created_at DESC, namespace, name, uid"
            ),
            delete_receipt: concat!(
                "DELETE FROM gc_receipts WHERE cluster_id = $1 AND uid = $2 AND uri = $3 ",
                "AND sha256 = $4 AND ",
                $created_at,
                " = $5"
            ),
        }
    };
}

const SQLITE_SQL: Statements =
    statements!("strftime('%Y-%m-%dT%H:%M:%fZ', 'now')", "created_at", "");
const POSTGRES_SQL: Statements = statements!(
    "now()",
    r#"to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"#,
    "::text"
);

/// A receipt as the database returns it: cluster, namespace, uid, name, uri, sha256, size,
/// apiVersion, kind, session id, run instant, retained volume and its policy before.
type ReceiptRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Which receipts of a cluster [`Store::list_receipts`] lists: every one by default.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReceiptQuery<'a> {
    /// Only of this namespace.
    pub namespace: Option<&'a str>,
    /// Only of objects of this name.
    pub name: Option<&'a str>,
    /// Only of this kind (`Pod`, `Deployment`, ...; any case).
    pub kind: Option<&'a str>,
    /// Only of session resources labelled with this session id.
    pub session: Option<&'a str>,
}

/// A receipt and when it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedReceipt {
    /// The receipt.
    pub receipt: Receipt,
    /// When the receipt was recorded: RFC 3339 UTC with milliseconds, from the database's clock.
    pub archived_at: String,
}

const LOAD_LEDGER: &str = "SELECT ledger FROM gc_ledgers WHERE cluster_id = $1 AND namespace = $2";
const RECEIPT_CLUSTERS: &str = "SELECT DISTINCT cluster_id FROM gc_receipts ORDER BY cluster_id";
const GET_RECEIPT: &str = "SELECT cluster_id, namespace, uid, name, uri, sha256, bytes, \
     api_version, kind, session, run_at, volume, volume_policy FROM gc_receipts \
     WHERE cluster_id = $1 AND uid = $2";

impl Store {
    /// Records `receipts` (or replaces them) in one transaction.
    async fn put_receipts(&self, receipts: &[Receipt]) -> Result<(), StoreError> {
        with_pool!(self, |pool, sql| {
            async {
                let mut tx = pool.begin().await?;
                for receipt in receipts {
                    let session = receipt.session.as_ref();
                    let retained = session.and_then(|s| s.retained.as_ref());
                    sqlx::query(sql.put_receipt)
                        .bind(&receipt.cluster_id)
                        .bind(&receipt.uid)
                        .bind(&receipt.namespace)
                        .bind(&receipt.name)
                        .bind(&receipt.uri)
                        .bind(&receipt.sha256)
                        // Checked when it was queued (`receipt_bytes`).
                        .bind(i64::try_from(receipt.bytes).unwrap_or(i64::MAX))
                        .bind(receipt.api_version())
                        .bind(receipt.kind())
                        .bind(session.and_then(|s| s.session.as_deref()))
                        .bind(session.map(|s| s.run_at.as_str()))
                        .bind(retained.map(|r| r.name.as_str()))
                        .bind(retained.map(|r| r.policy.as_str()))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await
            }
            .await
        })
    }

    /// The store's location as it may be shown (`sqlite:PATH`, or the URL without password).
    pub fn location(&self) -> &str {
        &self.shown
    }

    /// The stored ledger text of a cluster and namespace, exactly as saved, or `None` when none
    /// was saved. The text is not checked: this is how a damaged ledger can be looked at.
    ///
    /// # Errors
    /// [`StoreError`] when the database cannot be read.
    pub async fn ledger_json(
        &self,
        cluster_id: &str,
        namespace: &str,
    ) -> Result<Option<String>, StoreError> {
        with_pool!(self, |pool, _sql| {
            sqlx::query_scalar(LOAD_LEDGER)
                .bind(cluster_id)
                .bind(namespace)
                .fetch_optional(pool)
                .await
        })
    }

    /// Replaces the ledger of a cluster and namespace with `json`, stored byte for byte (the
    /// reference flow's ledger, moved in unchanged).
    ///
    /// # Errors
    /// [`StoreError::Malformed`], storing nothing, when `json` is not a JSON object (it could not
    /// be loaded back); otherwise [`StoreError`] when the database cannot be written.
    ///
    /// # Caveats
    /// Only the top level is checked here, as [`PreviousLedger::parse`] does; the planner checks
    /// each entry it uses.
    pub async fn save_ledger_json(
        &self,
        cluster_id: &str,
        namespace: &str,
        json: &str,
    ) -> Result<(), StoreError> {
        PreviousLedger::parse(json.as_bytes()).map_err(|e| {
            StoreError::Malformed(format!(
                "refusing to store the ledger of cluster {cluster_id} namespace {namespace}: {e}"
            ))
        })?;
        with_pool!(self, |pool, sql| {
            sqlx::query(sql.save_ledger)
                .bind(cluster_id)
                .bind(namespace)
                .bind(json)
                .execute(pool)
                .await
                .map(drop)
        })
    }

    /// The receipts of a cluster that `query` selects, newest first.
    ///
    /// # Errors
    /// [`StoreError`] when the database cannot be read; [`StoreError::Malformed`] for a row with
    /// a negative size.
    pub async fn list_receipts(
        &self,
        cluster_id: &str,
        query: ReceiptQuery<'_>,
    ) -> Result<Vec<ListedReceipt>, StoreError> {
        type Listed = (
            String,
            String,
            String,
            String,
            String,
            String,
            i64,
            String,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            String,
        );
        let rows: Vec<Listed> = with_pool!(self, |pool, sql| {
            sqlx::query_as(sql.list_receipts)
                .bind(cluster_id)
                .bind(query.namespace)
                .bind(query.name)
                .bind(query.kind)
                .bind(query.session)
                .fetch_all(pool)
                .await
        })?;
        rows.into_iter()
            .map(
                |(c, ns, uid, name, uri, sha, bytes, api, kind, session, run_at, vol, pol, at)| {
                    let row = (
                        c, ns, uid, name, uri, sha, bytes, api, kind, session, run_at, vol, pol,
                    );
                    Ok(ListedReceipt {
                        receipt: self.receipt(row)?,
                        archived_at: at,
                    })
                },
            )
            .collect()
    }

    /// Removes the receipt `listed` as [`Store::list_receipts`] listed it: only while it still
    /// names the same archive (URI and sha256) and was recorded at the same instant, so a receipt
    /// written again since (a newer run, recovery) stays. `true` when it was removed, `false`
    /// when no such receipt is there (removed, or written again).
    ///
    /// # Errors
    /// [`StoreError`] when the database cannot be written.
    pub async fn delete_receipt(&self, listed: &ListedReceipt) -> Result<bool, StoreError> {
        let r = &listed.receipt;
        let done = with_pool!(self, |pool, sql| {
            sqlx::query(sql.delete_receipt)
                .bind(&r.cluster_id)
                .bind(&r.uid)
                .bind(&r.uri)
                .bind(&r.sha256)
                .bind(&listed.archived_at)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(done > 0)
    }

    /// The cluster ids that have receipts, sorted.
    ///
    /// # Errors
    /// [`StoreError`] when the database cannot be read.
    pub async fn receipt_clusters(&self) -> Result<Vec<String>, StoreError> {
        with_pool!(self, |pool, _sql| {
            sqlx::query_scalar(RECEIPT_CLUSTERS).fetch_all(pool).await
        })
    }

    fn receipt(&self, row: ReceiptRow) -> Result<Receipt, StoreError> {
        let (
            cluster_id,
            namespace,
            uid,
            name,
            uri,
            sha256,
            bytes,
            api_version,
            kind,
            session,
            run_at,
            volume,
            volume_policy,
        ) = row;
        let bytes = u64::try_from(bytes).map_err(|_| {
            StoreError::Malformed(format!(
                "{}: receipt of {kind} {uid} has a negative size {bytes}",
                self.shown
            ))
        })?;
        // A Pod's receipt names no run; a session resource's always does.
        let retained = volume
            .zip(volume_policy)
            .map(|(name, policy)| RetainedVolume { name, policy });
        let session = run_at.map(|run_at| SessionObject {
            api_version,
            kind,
            session,
            run_at,
            retained,
        });
        Ok(Receipt {
            cluster_id,
            namespace,
            uid,
            name,
            uri,
            sha256,
            bytes,
            session,
        })
    }

    /// Closes the pool, waiting for its connections to finish (SQLite then checkpoints its
    /// write-ahead log).
    pub async fn close(&self) {
        // Bounded: a connection left waiting on a silent database would hold the close forever.
        let closing = async {
            match &self.pool {
                Pool::Sqlite(pool) => pool.close().await,
                Pool::Postgres(pool) => pool.close().await,
            }
        };
        let _ = tokio::time::timeout(self.timeout, closing).await;
    }

    fn err(&self, e: sqlx::Error) -> StoreError {
        error::map(&self.shown, e)
    }
}

#[async_trait]
impl ports::Store for Store {
    async fn load_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
    ) -> Result<PreviousLedger, StoreError> {
        let Some(text) = self.ledger_json(cluster_id, namespace).await? else {
            return Ok(PreviousLedger::default());
        };
        let malformed = |e: gc_core::pods::ledger::LedgerError| {
            StoreError::Malformed(format!(
                "{}: the ledger of cluster {cluster_id} namespace {namespace}: {e}",
                self.shown
            ))
        };
        let mut ledger = PreviousLedger::parse(text.as_bytes()).map_err(malformed)?;
        // The entry naming its cluster and namespace is checked here, and is no observation.
        ledger
            .check_scope(cluster_id, namespace)
            .map_err(malformed)?;
        ledger.0.remove(gc_core::pods::ledger::SCOPE_KEY);
        Ok(ledger)
    }

    async fn save_ledger(
        &self,
        cluster_id: &str,
        namespace: &str,
        ledger: &Ledger,
    ) -> Result<(), StoreError> {
        let json = ledger.to_scoped_json(cluster_id, namespace);
        self.save_ledger_json(cluster_id, namespace, &json).await
    }

    async fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        // Checked before it joins a batch: one receipt's own fault fails no other.
        receipt_bytes(receipt)?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        let queued = (receipt.clone(), answer);
        self.receipts
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(queued);
        {
            let _turn = self.receipts.turn.lock().await;
            let batch = std::mem::take(
                &mut *self
                    .receipts
                    .queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            // Empty when an earlier writer's batch took this receipt.
            if !batch.is_empty() {
                let (receipts, answers): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                let result = self.put_receipts(&receipts).await;
                for answer in answers {
                    let _ = answer.send(result.clone());
                }
            }
        }
        // A writer dropped before its commit ended (its run cancelled) answers nothing: no
        // receipt is known to be durable, so none is claimed.
        answered.await.unwrap_or_else(|_| {
            Err(StoreError::Other(format!(
                "the receipt of {} {} was not recorded: its batch was cancelled",
                receipt.kind(),
                receipt.uid
            )))
        })
    }

    async fn get_receipt(
        &self,
        cluster_id: &str,
        uid: &str,
    ) -> Result<Option<Receipt>, StoreError> {
        let row: Option<ReceiptRow> = with_pool!(self, |pool, _sql| {
            sqlx::query_as(GET_RECEIPT)
                .bind(cluster_id)
                .bind(uid)
                .fetch_optional(pool)
                .await
        })?;
        row.map(|row| self.receipt(row)).transpose()
    }
}

#[async_trait]
impl ports::SessionReceipts for Store {
    async fn session_receipts(
        &self,
        cluster_id: &str,
        namespace: &str,
        session: &str,
    ) -> Result<Vec<Receipt>, StoreError> {
        let query = ReceiptQuery {
            namespace: Some(namespace),
            session: Some(session),
            ..ReceiptQuery::default()
        };
        let listed = self.list_receipts(cluster_id, query).await?;
        Ok(listed.into_iter().map(|l| l.receipt).collect())
    }
    fn shown(&self) -> String {
        self.shown.clone()
    }
}

/// A receipt's archive size as the store keeps it (a signed 64-bit integer).
fn receipt_bytes(receipt: &Receipt) -> Result<i64, StoreError> {
    i64::try_from(receipt.bytes).map_err(|_| {
        StoreError::Other(format!(
            "archive size {} of {} {} is too large to store",
            receipt.bytes,
            receipt.kind(),
            receipt.uid
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any text survives encoding and decoding; `/` is kept in a path only; a `%` that encodes
    /// nothing, or bytes that are not UTF-8, are no encoding gc wrote.
    #[test]
    fn percent_encoding_round_trips_and_refuses_what_it_never_writes() {
        let text = "a b/c%d?é~_.-";
        assert_eq!(
            percent_encode(text.as_bytes(), UNRESERVED),
            "a%20b%2Fc%25d%3F%C3%A9~_.-"
        );
        assert_eq!(
            percent_encode(text.as_bytes(), PATH),
            "a%20b/c%25d%3F%C3%A9~_.-"
        );
        for set in [UNRESERVED, PATH] {
            let encoded = percent_encode(text.as_bytes(), set);
            assert_eq!(percent_decode(&encoded).as_deref(), Some(text));
        }
        for bad in ["a%", "a%2", "a%zz", "%%41", "a%FF"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }
}
