//! What the integration tests of `gc-store` share: a database under test reached directly,
//! behind the back of the code under test.

use std::path::PathBuf;

use gc_testbed::TestDatabase;

/// A database under test: a SQLite file or a fresh PostgreSQL database of the test bed.
pub(crate) enum Raw {
    Sqlite(PathBuf),
    Postgres(TestDatabase),
}

impl Raw {
    /// Runs `sql` on the database directly.
    pub(crate) async fn execute(&self, sql: &str) {
        match self {
            Raw::Sqlite(path) => {
                let url = format!("sqlite:{}", path.display());
                let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
            Raw::Postgres(db) => {
                let pool = db.pool().await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
        }
    }
}
