//! The application's session table, read only: [`SessionTable`] answers the session collector's
//! [`SessionDirectory`] port from PostgreSQL (StreamSpace's database) or a SQLite file.
//!
//! A wrong table must never look like an empty one (every session would then look orphaned), so
//! the table and its columns are checked when connecting, and every answer is checked against
//! the question: an id the table answers but was not asked for, or one id with two states, fails
//! the call.

mod env;
mod spec;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use gc_core::ports::{SessionDirectory, StoreError};
use gc_core::sessions::Row;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Postgres, Sqlite};

pub use env::{DB_VARIABLES, SessionUrlError, session_url, url_from_env};
pub use spec::TableSpec;

use crate::location::{Location, SESSION_DATABASE};
use crate::{BUSY_TIMEOUT, Pool, error};
use spec::{Names, quote};

/// SQLite's default bound on a statement's parameters (`SQLITE_MAX_VARIABLE_NUMBER`, since
/// 3.32; sqlx bundles a newer SQLite): a SQLite lookup sends one query per this many ids.
const SQLITE_MAX_BINDS: usize = 32_766;
/// How long one lookup query may run, on the server (`statement_timeout`) and here.
const QUERY_TIMEOUT: Duration = Duration::from_secs(60);
/// Connections per pool: the collector looks up one batch at a time.
const MAX_CONNECTIONS: u32 = 2;

/// A session table, read only. Implements [`SessionDirectory`].
///
/// # Guarantees
/// On PostgreSQL every connection starts with `default_transaction_read_only = on` and a
/// `statement_timeout`, so nothing sent through it can write or run for long; a SQLite file is
/// opened read only and never created.
///
/// # Caveats
/// Those settings travel as the connection's startup `options`, which a PgBouncer in front of
/// the server refuses unless told to ignore them (`ignore_startup_parameters = options`).
pub struct SessionTable {
    pool: Pool,
    names: Names,
    /// The lookup statement (PostgreSQL), or its text up to `IN (` (SQLite).
    select: String,
    /// The values the scope columns must hold, in the order of the names' scope.
    scope: Vec<String>,
    /// The location as it may be shown (no password).
    shown: String,
    queries: AtomicU64,
}

impl fmt::Debug for SessionTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionTable")
            .field("location", &self.shown)
            .field("table", &self.names.shown)
            .finish()
    }
}

/// Connects to the session table `table` at `url` (`postgres://...`, or a SQLite file as
/// `sqlite:PATH` or a plain path) and checks that the table and its columns exist.
///
/// # Errors
/// [`StoreError::Other`] for a name that is not a plain identifier, a table that does not exist
/// (`table sessions does not exist`), a missing column (`table sessions has no column state`),
/// or a table the credentials may not read; [`StoreError::Unavailable`] when the server cannot
/// be reached, refuses the credentials, or the SQLite file cannot be opened. A password never
/// appears in an error: a PostgreSQL URL that [`crate::shown_url`] will not show is refused
/// without its value (`the session database URL (...) is not a valid URL (its value is not
/// shown): ...`).
pub async fn connect_sessions(url: &str, table: TableSpec) -> Result<SessionTable, StoreError> {
    let names = table.check()?;
    let location = Location::parse(url, SESSION_DATABASE).map_err(StoreError::Other)?;
    let shown = location.shown();
    let pool = match &location {
        Location::Sqlite(path) => connect_sqlite(path, &names, &shown).await?,
        Location::Postgres { url, .. } => connect_postgres(url, &names, &shown).await?,
    };
    let select = lookup_sql(&pool, &names);
    let scope = table.scope.into_iter().map(|(_, value)| value).collect();
    Ok(SessionTable {
        pool,
        names,
        select,
        scope,
        shown,
        queries: AtomicU64::new(0),
    })
}

/// The lookup: `select` of the rows in scope (PostgreSQL: `$2`, `$3`, ... after the ids' `$1`;
/// SQLite: the scope's `?` first), then the ids (PostgreSQL `= ANY($1)`; SQLite `IN (`, the
/// placeholders appended per call).
fn lookup_sql(pool: &Pool, names: &Names) -> String {
    let postgres = matches!(pool, Pool::Postgres(_));
    let mut sql = format!("{} WHERE ", select(names));
    for (i, column) in names.scope.iter().enumerate() {
        let at = if postgres {
            format!("${}", i + 2)
        } else {
            "?".into()
        };
        // A row that leaves the column empty is in every scope: fail closed, as a live session.
        let column = quote(column);
        sql.push_str(&format!(
            "({column} IS NULL OR CAST({column} AS TEXT) = {at}) AND "
        ));
    }
    let id = quote(&names.id);
    sql.push_str(&if postgres {
        format!("{id} = ANY($1)")
    } else {
        format!("{id} IN (")
    });
    sql
}

/// `SELECT id, state FROM table`, both as text (`NULL` when no state column is read).
fn select(names: &Names) -> String {
    let state = names.state.as_deref().map_or("NULL".into(), quote);
    format!(
        "SELECT CAST({} AS TEXT), CAST({state} AS TEXT) FROM {}",
        quote(&names.id),
        names.qualified_table()
    )
}

/// The table's columns, or `None` when no such table is visible. `to_regclass` resolves the
/// name as the lookup will (through `search_path`); `information_schema` would need the schema
/// guessed and hides columns the user may not read, which would read as "no such column".
async fn postgres_columns(
    conn: &mut PgConnection,
    names: &Names,
) -> Result<Option<Vec<String>>, sqlx::Error> {
    let table = names.qualified_table();
    let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(&table)
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        return Ok(None);
    }
    let columns = sqlx::query_scalar(
        "SELECT CAST(attname AS TEXT) FROM pg_catalog.pg_attribute \
         WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped",
    )
    .bind(&table)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Some(columns))
}

/// The checks of the table as a connection opens (its columns, the lookup asking for nothing),
/// bounded as each lookup is: a connection open and silent fails them within [`QUERY_TIMEOUT`]
/// (the server's own `statement_timeout` cannot reach a client whose path is frozen).
async fn checks_within(
    checked: impl Future<Output = Result<(), StoreError>>,
    names: &Names,
    shown: &str,
) -> Result<(), StoreError> {
    match tokio::time::timeout(QUERY_TIMEOUT, checked).await {
        Ok(checked) => checked,
        Err(_) => Err(StoreError::Unavailable(format!(
            "{shown}: no answer from table {} within {} seconds",
            names.shown,
            QUERY_TIMEOUT.as_secs()
        ))),
    }
}

async fn connect_postgres(url: &str, names: &Names, shown: &str) -> Result<Pool, StoreError> {
    let err = |e: sqlx::Error| error::map(shown, e);
    let timeout = format!("{}s", QUERY_TIMEOUT.as_secs());
    let options = url
        .parse::<PgConnectOptions>()
        .map_err(err)?
        // After any `options` of the URL's own, so these win.
        .options([
            ("default_transaction_read_only", "on"),
            ("statement_timeout", timeout.as_str()),
        ]);
    let mut conn: PgConnection = crate::connect(options.connect(), shown).await?;
    let checked = async {
        let columns = postgres_columns(&mut conn, names).await.map_err(err)?;
        check_columns(columns, names, shown, str::eq)?;
        // The lookup itself, asking for nothing: a table the user may not read, or an id column
        // that cannot be compared with text, fails here rather than in the middle of a run.
        let probe = format!("{} WHERE {} = ANY($1)", select(names), quote(&names.id));
        sqlx::query(&probe)
            .bind(Vec::<String>::new())
            .fetch_all(&mut conn)
            .await
            .map_err(err)?;
        Ok(())
    };
    checks_within(checked, names, shown).await?;
    let pool =
        crate::pool_after::<Postgres>(conn, options, MAX_CONNECTIONS, shown, QUERY_TIMEOUT).await?;
    Ok(Pool::Postgres(pool))
}

async fn connect_sqlite(path: &Path, names: &Names, shown: &str) -> Result<Pool, StoreError> {
    let err = |e: sqlx::Error| error::map(shown, e);
    let options = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .create_if_missing(false)
        .busy_timeout(BUSY_TIMEOUT);
    let mut conn: SqliteConnection = crate::connect(options.connect(), shown).await?;
    let checked = async {
        let columns = sqlite_columns(&mut conn, names).await.map_err(err)?;
        check_columns(columns, names, shown, |a, b| a.eq_ignore_ascii_case(b))?;
        let probe = format!("{} WHERE {} IN ()", select(names), quote(&names.id));
        sqlx::query(&probe)
            .fetch_all(&mut conn)
            .await
            .map_err(err)?;
        Ok(())
    };
    checks_within(checked, names, shown).await?;
    let pool =
        crate::pool_after::<Sqlite>(conn, options, MAX_CONNECTIONS, shown, QUERY_TIMEOUT).await?;
    Ok(Pool::Sqlite(pool))
}

/// The table's columns, or `None` when there is no such table (or no such schema, which
/// `pragma_table_info` would report as an error).
async fn sqlite_columns(
    conn: &mut SqliteConnection,
    names: &Names,
) -> Result<Option<Vec<String>>, sqlx::Error> {
    let columns: Vec<String> = match &names.schema {
        Some(schema) => {
            let known: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pragma_database_list WHERE name = ?1 COLLATE NOCASE)",
            )
            .bind(schema)
            .fetch_one(&mut *conn)
            .await?;
            if !known {
                return Ok(None);
            }
            sqlx::query_scalar("SELECT name FROM pragma_table_info(?1, ?2)")
                .bind(&names.table)
                .bind(schema)
                .fetch_all(&mut *conn)
                .await?
        }
        None => {
            sqlx::query_scalar("SELECT name FROM pragma_table_info(?1)")
                .bind(&names.table)
                .fetch_all(&mut *conn)
                .await?
        }
    };
    // A table has at least one column: no rows means no table.
    Ok(Some(columns).filter(|c| !c.is_empty()))
}

/// Fails, naming what is missing, unless the table exists with the id and state columns.
fn check_columns(
    columns: Option<Vec<String>>,
    names: &Names,
    shown: &str,
    same: impl Fn(&str, &str) -> bool,
) -> Result<(), StoreError> {
    let table = &names.shown;
    let Some(columns) = columns else {
        return Err(StoreError::Other(format!(
            "{shown}: table {table} does not exist (or is not visible to this user)"
        )));
    };
    for wanted in std::iter::once(&names.id)
        .chain(&names.state)
        .chain(&names.scope)
    {
        if !columns.iter().any(|c| same(c, wanted)) {
            return Err(StoreError::Other(format!(
                "{shown}: table {table} has no column {wanted}"
            )));
        }
    }
    Ok(())
}

impl SessionTable {
    /// The database as it may be shown (`sqlite:PATH`, or the URL without its password).
    pub fn location(&self) -> &str {
        &self.shown
    }

    /// How many queries [`SessionDirectory::lookup`] has sent so far: one per call on
    /// PostgreSQL, one per 32,766 ids on SQLite, none for an empty call.
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// Closes the pool, waiting for its connections to finish.
    pub async fn close(&self) {
        match &self.pool {
            Pool::Postgres(pool) => pool.close().await,
            Pool::Sqlite(pool) => pool.close().await,
        }
    }

    /// Sends one query, counted and bounded by [`QUERY_TIMEOUT`].
    async fn fetch(
        &self,
        rows: impl Future<Output = Result<Vec<(String, Option<String>)>, sqlx::Error>>,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        self.queries.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(QUERY_TIMEOUT, rows).await {
            Ok(rows) => rows.map_err(|e| error::map(&self.shown, e)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "{}: no answer from table {} within {} seconds",
                self.shown,
                self.names.shown,
                QUERY_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Puts one answered row into `answer`, which holds every id asked for.
    fn record(
        &self,
        answer: &mut HashMap<String, Row>,
        id: String,
        state: Option<String>,
    ) -> Result<(), StoreError> {
        let table = &self.names.shown;
        let Some(slot) = answer.get_mut(&id) else {
            return Err(StoreError::Malformed(format!(
                "{}: table {table} answered id {id:?}, which was not asked for \
                 (does column {} compare ids loosely, such as without case?)",
                self.shown, self.names.id
            )));
        };
        match slot {
            Row::Missing => *slot = Row::Present { state },
            Row::Present { state: seen } if *seen == state => {}
            Row::Present { .. } => {
                return Err(StoreError::Malformed(format!(
                    "{}: table {table} has rows in different states for id {id:?}",
                    self.shown
                )));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl SessionDirectory for SessionTable {
    /// One query on PostgreSQL (`WHERE id = ANY($1)`, prepared once per connection, so a
    /// connection's first call takes one more round trip); on SQLite one per 32,766 ids
    /// (`WHERE id IN (?, ...)`). Every id asked for is in the answer.
    async fn lookup(&self, ids: &[String]) -> Result<HashMap<String, Row>, StoreError> {
        let mut answer: HashMap<String, Row> =
            ids.iter().map(|id| (id.clone(), Row::Missing)).collect();
        if ids.is_empty() {
            return Ok(answer);
        }
        let rows = match &self.pool {
            Pool::Postgres(pool) => {
                let query = sqlx::query_as(&self.select).bind(ids);
                let query = self.scope.iter().fold(query, |q, value| q.bind(value));
                self.fetch(query.fetch_all(pool)).await?
            }
            Pool::Sqlite(pool) => {
                let mut rows = Vec::new();
                for chunk in ids.chunks(SQLITE_MAX_BINDS - self.scope.len()) {
                    let sql = sqlite_lookup(&self.select, chunk.len());
                    // Not kept prepared: the text differs with the number of ids.
                    let query = sqlx::query_as(&sql).persistent(false);
                    let query = self.scope.iter().fold(query, |q, value| q.bind(value));
                    let query = chunk.iter().fold(query, |q, id| q.bind(id));
                    rows.extend(self.fetch(query.fetch_all(pool)).await?);
                }
                rows
            }
        };
        for (id, state) in rows {
            self.record(&mut answer, id, state)?;
        }
        Ok(answer)
    }
}

/// `select` followed by `n` placeholders and `)`.
fn sqlite_lookup(select: &str, n: usize) -> String {
    let mut sql = String::with_capacity(select.len() + 3 * n);
    sql.push_str(select);
    for i in 0..n {
        sql.push_str(if i == 0 { "?" } else { ",?" });
    }
    sql.push(')');
    sql
}
