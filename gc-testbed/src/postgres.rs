//! A fresh PostgreSQL database per test, on the server that `scripts/postgres.sh` starts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sqlx::{Connection, PgConnection, PgPool};

use crate::apiserver::dns_label;
use crate::{Error, Result};

/// The environment variable holding an admin URL (`postgres://USER:PASSWORD@HOST:PORT/postgres`).
pub const DATABASE_URL_ENV: &str = "GC_TEST_DATABASE_URL";

/// Every test database's name starts with this, then the creating process's id.
const PREFIX: &str = "gc_test_";

/// A database created for one test.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    name: String,
    url: String,
}

impl TestDatabase {
    /// Creates an empty database with a unique name that contains `prefix`.
    ///
    /// Returns `Ok(None)` and says so loudly on stderr when `$GC_TEST_DATABASE_URL` is unset
    /// outside CI; the test should then return early.
    ///
    /// # Guarantees
    ///
    /// Databases left by earlier test processes that have exited are dropped first, so the
    /// server does not fill up; databases of running processes are never touched.
    ///
    /// # Errors
    ///
    /// [`Error::Database`] when the variable is unset and `$CI` is set (CI must not skip), and
    /// [`Error::Sql`] when the server refuses the connection or the `CREATE DATABASE`.
    pub async fn fresh(prefix: &str) -> Result<Option<Self>> {
        let Some(admin_url) = admin_url()? else {
            return Ok(None);
        };
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!(
            "{PREFIX}{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            dns_label(prefix, 30).replace('-', "_"),
        );
        let mut admin = PgConnection::connect(&admin_url).await?;
        drop_leftovers(&mut admin).await;
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
        let url = with_database(&admin_url, &name);
        Ok(Some(Self { name, url }))
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A URL for the database, with the admin's credentials.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A connection pool to the database, bound to the calling Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Sql`] when the server cannot be reached.
    pub async fn pool(&self) -> Result<PgPool> {
        Ok(PgPool::connect(&self.url).await?)
    }
}

/// `$GC_TEST_DATABASE_URL`, or `None` (with a loud message) outside CI.
fn admin_url() -> Result<Option<String>> {
    if let Some(url) = std::env::var(DATABASE_URL_ENV)
        .ok()
        .filter(|u| !u.is_empty())
    {
        return Ok(Some(url));
    }
    let ci = std::env::var("CI")
        .ok()
        .filter(|v| !v.is_empty() && v != "false" && v != "0");
    if ci.is_some() {
        return Err(Error::Database(format!(
            "{DATABASE_URL_ENV} is unset under CI; run the suite through scripts/test.sh"
        )));
    }
    eprintln!(
        "\n*** gc-testbed: {DATABASE_URL_ENV} is unset: SKIPPING a PostgreSQL test. \
         Run scripts/test.sh (or scripts/postgres.sh) to run it. ***\n"
    );
    Ok(None)
}

/// Drops (once per process) the test databases of processes that no longer exist. Best effort:
/// a failure here must not fail the test that happened to run first.
async fn drop_leftovers(admin: &mut PgConnection) {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::Relaxed) {
        return;
    }
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE starts_with(datname, $1)")
            .bind(PREFIX)
            .fetch_all(&mut *admin)
            .await
            .unwrap_or_default();
    for name in names.iter().filter(|n| owner_exited(n)) {
        let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        if let Err(e) = sqlx::raw_sql(&sql).execute(&mut *admin).await {
            eprintln!("gc-testbed: could not drop leftover database {name}: {e}");
        }
    }
}

/// Whether the process that created the test database `name` has exited.
fn owner_exited(name: &str) -> bool {
    let pid = name
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.split('_').next());
    match pid.and_then(|p| p.parse::<u32>().ok()) {
        Some(pid) => {
            pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        }
        None => false,
    }
}

/// `url` with its database (path) replaced by `database`; the query string is kept.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{database}", &base[..path_start]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{owner_exited, with_database};

    #[test]
    fn with_database_replaces_only_the_path() {
        let check = |url: &str, expected: &str| assert_eq!(with_database(url, "d"), expected);
        check(
            "postgres://gc:gc@127.0.0.1:54329/postgres",
            "postgres://gc:gc@127.0.0.1:54329/d",
        );
        check(
            "postgres://gc:gc@127.0.0.1:54329",
            "postgres://gc:gc@127.0.0.1:54329/d",
        );
        check(
            "postgres://h/postgres?sslmode=disable",
            "postgres://h/d?sslmode=disable",
        );
    }

    #[test]
    fn databases_of_this_process_or_unknown_names_are_kept() {
        assert!(!owner_exited(&format!(
            "gc_test_{}_1_x",
            std::process::id()
        )));
        assert!(!owner_exited("gc_test_notapid_1_x"));
    }
}
