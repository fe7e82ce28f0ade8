//! Read-only use, checked through a session table's own connections: a write sent down them
//! fails. (The integration tests in `tests/sessions.rs` cover what the port answers.)

use gc_testbed::TestDatabase;

use super::*;

const SCHEMA: &str = "CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, user_id VARCHAR(255), \
     state VARCHAR(50), created_at TIMESTAMP, updated_at TIMESTAMP)";
const WRITE: &str = "INSERT INTO sessions (id, state) VALUES ('x', 'running')";

#[tokio::test]
async fn a_sqlite_session_table_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite3");
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    sqlx::raw_sql(SCHEMA).execute(&pool).await.unwrap();
    pool.close().await;

    let table = connect_sessions(path.to_str().unwrap(), TableSpec::streamspace())
        .await
        .unwrap();
    let Pool::Sqlite(pool) = &table.pool else {
        panic!("a file path opens SQLite");
    };
    let err = sqlx::query(WRITE).execute(pool).await.unwrap_err();
    assert!(err.to_string().contains("readonly"), "{err}");
}

#[tokio::test]
async fn a_postgres_session_table_cannot_write() {
    let Some(db) = TestDatabase::fresh("sessions_read_only").await.unwrap() else {
        return;
    };
    let admin = db.pool().await.unwrap();
    sqlx::raw_sql(SCHEMA).execute(&admin).await.unwrap();
    admin.close().await;

    let table = connect_sessions(db.url(), TableSpec::streamspace())
        .await
        .unwrap();
    let Pool::Postgres(pool) = &table.pool else {
        panic!("a postgres URL opens PostgreSQL");
    };
    for write in [WRITE, "CREATE TABLE t (a INT)", "DELETE FROM sessions"] {
        let err = sqlx::query(write).execute(pool).await.unwrap_err();
        let code = err.as_database_error().and_then(|e| e.code());
        // read_only_sql_transaction
        assert_eq!(code.as_deref(), Some("25006"), "{write}: {err}");
    }
}
