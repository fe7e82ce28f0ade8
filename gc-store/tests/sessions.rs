//! The session table's contract, checked by the same code against SQLite (a temporary file) and
//! the real PostgreSQL (a fresh database per test, from `gc-testbed`), on StreamSpace's schema.

use std::collections::HashMap;

use gc_core::ports::{SessionDirectory, StoreError};
use gc_core::sessions::Row;
use gc_store::{SessionTable, TableSpec, connect_sessions};
use gc_testbed::TestDatabase;
use sqlx::postgres::PgConnectOptions;

mod common;

use common::Raw;

/// StreamSpace's `sessions` table, as its API creates it at startup.
const STREAMSPACE: &str = "CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, \
     user_id VARCHAR(255), state VARCHAR(50), created_at TIMESTAMP, updated_at TIMESTAMP)";

/// One database under test, with StreamSpace's schema, and a way to reach it behind the table's
/// back.
struct Db {
    url: String,
    raw: Raw,
    /// Keeps the SQLite folder alive.
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    async fn execute(&self, sql: &str) {
        self.raw.execute(sql).await;
    }

    fn is_postgres(&self) -> bool {
        matches!(self.raw, Raw::Postgres(_))
    }

    async fn connect(&self, spec: TableSpec) -> Result<SessionTable, StoreError> {
        connect_sessions(&self.url, spec).await
    }

    async fn streamspace(&self) -> SessionTable {
        self.connect(TableSpec::streamspace()).await.unwrap()
    }

    /// Inserts sessions `(id, state)`.
    async fn insert(&self, rows: &[(String, Option<&str>)]) {
        for chunk in rows.chunks(500) {
            let values: Vec<String> = chunk
                .iter()
                .map(|(id, state)| {
                    let state = state.map_or("NULL".into(), |s| format!("'{s}'"));
                    format!("('{id}', 'alice', {state}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
                })
                .collect();
            self.execute(&format!(
                "INSERT INTO sessions (id, user_id, state, created_at, updated_at) VALUES {}",
                values.join(", ")
            ))
            .await;
        }
    }
}

/// Runs `test` against SQLite, then against PostgreSQL when the test database is configured
/// (`scripts/test.sh` configures it; CI must), each holding StreamSpace's empty table.
async fn on_each_database(name: &str, test: impl AsyncFn(&Db)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streamspace.sqlite3");
    std::fs::File::create(&path).unwrap();
    let sqlite = Db {
        url: format!("sqlite:{}", path.display()),
        raw: Raw::Sqlite(path),
        _dir: Some(dir),
    };
    sqlite.execute(STREAMSPACE).await;
    eprintln!("{name}: {}", sqlite.url);
    test(&sqlite).await;

    if let Some(db) = TestDatabase::fresh(name).await.unwrap() {
        let postgres = Db {
            url: db.url().to_owned(),
            raw: Raw::Postgres(db),
            _dir: None,
        };
        postgres.execute(STREAMSPACE).await;
        eprintln!(
            "{name}: postgres database {}",
            postgres.url.rsplit('/').next().unwrap()
        );
        test(&postgres).await;
    }
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn present(state: Option<&str>) -> Row {
    Row::Present {
        state: state.map(str::to_owned),
    }
}

#[tokio::test]
async fn live_soft_deleted_and_absent_sessions_are_told_apart() {
    on_each_database("sessions_states", async |db| {
        db.insert(&[
            ("alice-firefox-0a1b2c3d".into(), Some("running")),
            ("alice-vscode-4e5f6a7b".into(), Some("hibernated")),
            ("bob-firefox-8c9d0e1f".into(), Some("deleted")),
            ("bob-gimp-2a3b4c5d".into(), None),
        ])
        .await;
        let table = db.streamspace().await;
        let asked = ids(&[
            "alice-firefox-0a1b2c3d",
            "alice-vscode-4e5f6a7b",
            "bob-firefox-8c9d0e1f",
            "bob-gimp-2a3b4c5d",
            "carol-firefox-00000000",
            "ALICE-FIREFOX-0A1B2C3D",
            "alice-firefox-0a1b2c3d ",
            "x' OR '1'='1",
        ]);
        let answer = table.lookup(&asked).await.unwrap();
        let expected: HashMap<String, Row> = [
            ("alice-firefox-0a1b2c3d", present(Some("running"))),
            ("alice-vscode-4e5f6a7b", present(Some("hibernated"))),
            ("bob-firefox-8c9d0e1f", present(Some("deleted"))),
            ("bob-gimp-2a3b4c5d", present(None)),
            ("carol-firefox-00000000", Row::Missing),
            ("ALICE-FIREFOX-0A1B2C3D", Row::Missing),
            ("alice-firefox-0a1b2c3d ", Row::Missing),
            ("x' OR '1'='1", Row::Missing),
        ]
        .into_iter()
        .map(|(id, row)| (id.to_owned(), row))
        .collect();
        assert_eq!(answer, expected);
        assert_eq!(table.queries(), 1);
        table.close().await;
    })
    .await;
}

#[tokio::test]
async fn without_a_state_column_only_existence_is_read() {
    on_each_database("sessions_no_state", async |db| {
        db.insert(&[("a".into(), Some("deleted"))]).await;
        let spec = TableSpec {
            state_column: None,
            ..TableSpec::streamspace()
        };
        let table = db.connect(spec).await.unwrap();
        let answer = table.lookup(&ids(&["a", "b"])).await.unwrap();
        assert_eq!(answer["a"], present(None));
        assert_eq!(answer["b"], Row::Missing);
    })
    .await;
}

#[tokio::test]
async fn an_empty_question_sends_no_query() {
    on_each_database("sessions_empty", async |db| {
        let table = db.streamspace().await;
        assert_eq!(table.lookup(&[]).await.unwrap(), HashMap::new());
        assert_eq!(table.queries(), 0);
        // Repeated ids are answered once.
        let answer = table.lookup(&ids(&["a", "a"])).await.unwrap();
        assert_eq!(answer.len(), 1);
        assert_eq!(table.queries(), 1);
    })
    .await;
}

#[tokio::test]
async fn a_batch_of_2000_ids_is_one_query() {
    on_each_database("sessions_batch", async |db| {
        let all: Vec<String> = (0..2000).map(|i| format!("user-app-{i:08x}")).collect();
        let rows: Vec<(String, Option<&str>)> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(i, id)| {
                (
                    id.clone(),
                    Some(if i % 4 == 0 { "running" } else { "deleted" }),
                )
            })
            .collect();
        db.insert(&rows).await;
        let table = db.streamspace().await;
        let answer = table.lookup(&all).await.unwrap();
        assert_eq!(table.queries(), 1);
        assert_eq!(answer.len(), 2000);
        for (i, id) in all.iter().enumerate() {
            let expected = match i % 4 {
                0 => present(Some("running")),
                2 => present(Some("deleted")),
                _ => Row::Missing,
            };
            assert_eq!(answer[id], expected, "{id}");
        }
    })
    .await;
}

#[tokio::test]
async fn past_sqlites_bind_limit_a_lookup_is_split_and_postgres_still_sends_one() {
    on_each_database("sessions_large", async |db| {
        db.insert(&[("id-39999".into(), Some("running"))]).await;
        let table = db.streamspace().await;
        let all: Vec<String> = (0..40_000).map(|i| format!("id-{i}")).collect();
        let answer = table.lookup(&all).await.unwrap();
        assert_eq!(answer.len(), 40_000);
        assert_eq!(answer["id-39999"], present(Some("running")));
        assert_eq!(answer["id-0"], Row::Missing);
        let expected = if db.is_postgres() { 1 } else { 2 };
        assert_eq!(table.queries(), expected);
    })
    .await;
}

#[tokio::test]
async fn a_missing_table_or_column_is_named_when_connecting() {
    on_each_database("sessions_missing", async |db| {
        let spec = |table: &str, id: &str, state: Option<&str>| TableSpec {
            table: table.into(),
            id_column: id.into(),
            state_column: state.map(Into::into),
            scope: Vec::new(),
        };
        for (spec, message) in [
            (
                spec("session", "id", Some("state")),
                "table session does not exist",
            ),
            (
                spec("sessions", "session_id", Some("state")),
                "table sessions has no column session_id",
            ),
            (
                spec("sessions", "id", Some("status")),
                "table sessions has no column status",
            ),
            (
                spec("nowhere.sessions", "id", Some("state")),
                "table nowhere.sessions does not exist",
            ),
        ] {
            let err = db.connect(spec.clone()).await.unwrap_err();
            assert!(
                matches!(&err, StoreError::Other(m) if m.contains(message)),
                "{spec:?}: {err}"
            );
        }
    })
    .await;
}

/// StreamSpace's agents run in several clusters and write `cluster_id` and `namespace` on each
/// row: with a scope, a session alive in another cluster is no session here.
#[tokio::test]
async fn a_scope_counts_only_the_rows_of_this_cluster_and_namespace() {
    on_each_database("sessions_scope", async |db| {
        db.execute("ALTER TABLE sessions ADD COLUMN cluster_id VARCHAR(255)")
            .await;
        db.execute("ALTER TABLE sessions ADD COLUMN namespace VARCHAR(255)")
            .await;
        db.insert(&[
            ("here".into(), Some("running")),
            ("there".into(), Some("running")),
            ("other-ns".into(), Some("running")),
            ("unscoped".into(), Some("running")),
        ])
        .await;
        for (id, cluster, namespace) in [
            ("here", "c1", "streamspace"),
            ("there", "c2", "streamspace"),
            ("other-ns", "c1", "team-b"),
        ] {
            db.execute(&format!(
                "UPDATE sessions SET cluster_id = '{cluster}', namespace = '{namespace}' \
                 WHERE id = '{id}'"
            ))
            .await;
        }
        // "unscoped" leaves both columns empty (a row written before they existed).
        let question = ids(&["here", "there", "other-ns", "gone", "unscoped"]);
        let unscoped = db.streamspace().await.lookup(&question).await.unwrap();
        assert_eq!(unscoped["there"], present(Some("running")));
        let scope = vec![
            ("cluster_id".to_owned(), "c1".to_owned()),
            ("namespace".to_owned(), "streamspace".to_owned()),
        ];
        let spec = TableSpec {
            scope,
            ..TableSpec::streamspace()
        };
        let table = db.connect(spec).await.unwrap();
        let answer = table.lookup(&question).await.unwrap();
        assert_eq!(answer["here"], present(Some("running")));
        // An empty scope column is in every scope: it fails closed, as a live session.
        assert_eq!(answer["unscoped"], present(Some("running")));
        for id in ["there", "other-ns", "gone"] {
            assert_eq!(answer[id], Row::Missing, "{id}");
        }
        // A scope column the table does not have is named when connecting; a bad name before.
        let missing = TableSpec {
            scope: vec![("cluster".into(), "c1".into())],
            ..TableSpec::streamspace()
        };
        let err = db.connect(missing).await.unwrap_err();
        assert!(err.to_string().contains("has no column cluster"), "{err}");
        let bad = TableSpec {
            scope: vec![("cluster_id; --".into(), "c1".into())],
            ..TableSpec::streamspace()
        };
        let err = db.connect(bad).await.unwrap_err();
        assert!(
            err.to_string().contains("invalid session scope column"),
            "{err}"
        );
        let twice = TableSpec {
            scope: vec![
                ("cluster_id".into(), "c1".into()),
                ("cluster_id".into(), "c2".into()),
            ],
            ..TableSpec::streamspace()
        };
        let err = db.connect(twice).await.unwrap_err();
        assert!(err.to_string().contains("given twice"), "{err}");
    })
    .await;
}

#[tokio::test]
async fn a_schema_qualified_table_is_found() {
    on_each_database("sessions_schema", async |db| {
        db.insert(&[("a".into(), Some("running"))]).await;
        let schema = if db.is_postgres() { "public" } else { "main" };
        let spec = TableSpec {
            table: format!("{schema}.sessions"),
            ..TableSpec::streamspace()
        };
        let table = db.connect(spec).await.unwrap();
        let answer = table.lookup(&ids(&["a"])).await.unwrap();
        assert_eq!(answer["a"], present(Some("running")));
    })
    .await;
}

#[tokio::test]
async fn a_table_dropped_after_connecting_fails_the_lookup_never_all_missing() {
    on_each_database("sessions_dropped", async |db| {
        db.insert(&[("a".into(), Some("running"))]).await;
        let table = db.streamspace().await;
        assert_eq!(
            table.lookup(&ids(&["a"])).await.unwrap()["a"],
            present(Some("running"))
        );
        db.execute("DROP TABLE sessions").await;
        let err = table.lookup(&ids(&["a", "b"])).await.unwrap_err();
        assert!(matches!(err, StoreError::Other(_)), "{err}");
    })
    .await;
}

#[tokio::test]
async fn an_answer_that_does_not_fit_the_question_fails() {
    on_each_database("sessions_loose", async |db| {
        // A view whose ids repeat with different states, and one that answers ids in upper case.
        db.execute(
            "CREATE VIEW twice AS SELECT id, state FROM sessions \
             UNION ALL SELECT id, 'deleted' FROM sessions",
        )
        .await;
        db.insert(&[("a".into(), Some("running"))]).await;
        let table = db
            .connect(TableSpec {
                table: "twice".into(),
                ..TableSpec::streamspace()
            })
            .await
            .unwrap();
        let err = table.lookup(&ids(&["a"])).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Malformed(m) if m.contains("different states")),
            "{err}"
        );

        db.execute("CREATE VIEW same AS SELECT id, state FROM sessions UNION ALL SELECT id, state FROM sessions")
            .await;
        let table = db
            .connect(TableSpec {
                table: "same".into(),
                ..TableSpec::streamspace()
            })
            .await
            .unwrap();
        let answer = table.lookup(&ids(&["a"])).await.unwrap();
        assert_eq!(answer["a"], present(Some("running")), "identical rows agree");
    })
    .await;
}

#[tokio::test]
async fn a_case_insensitive_id_column_cannot_pass_an_id_off_as_another() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nocase.sqlite3");
    let url = format!("sqlite:{}?mode=rwc", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE sessions (id TEXT COLLATE NOCASE PRIMARY KEY, state TEXT); \
         INSERT INTO sessions VALUES ('abc', 'running')",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let table = connect_sessions(path.to_str().unwrap(), TableSpec::streamspace())
        .await
        .unwrap();
    let err = table.lookup(&ids(&["ABC"])).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Malformed(m) if m.contains("not asked for")),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_sqlite_file_is_unavailable_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.sqlite3");
    let err = connect_sessions(path.to_str().unwrap(), TableSpec::streamspace())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(!path.exists());
}

#[tokio::test]
async fn bad_names_are_refused_before_connecting() {
    let spec = TableSpec {
        table: "sessions; DROP TABLE sessions".into(),
        ..TableSpec::streamspace()
    };
    // The URL names nothing that exists: the name is refused first.
    let err = connect_sessions("postgres://u:Secret-Pw@127.0.0.1:1/d", spec)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Other(m) if m.starts_with("invalid session table")),
        "{err}"
    );
}

/// `postgres://USER:PASSWORD@REST` with the password replaced.
fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, rest) = rest.rsplit_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{rest}")
}

#[tokio::test]
async fn a_wrong_password_is_unavailable_and_never_shown() {
    let Some(db) = TestDatabase::fresh("sessions_password").await.unwrap() else {
        return;
    };
    let url = with_password(db.url(), "Wrong-Secret-Pw");
    let err = connect_sessions(&url, TableSpec::streamspace())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(
        !format!("{err} {err:?}").contains("Wrong-Secret-Pw"),
        "{err}"
    );
}

#[tokio::test]
async fn streamspaces_settings_reach_the_database_as_a_read_only_role() {
    let Some(db) = TestDatabase::fresh("sessions_env").await.unwrap() else {
        return;
    };
    let admin = db.pool().await.unwrap();
    // One role for every run (roles outlive test databases); its password holds every character
    // that means something in a URL.
    let password = "p@ss:w/rd %?#&=ü'";
    let role = "gc_test_sessions_reader";
    let create = format!(
        "DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    );
    for sql in [
        create,
        format!(
            "ALTER ROLE {role} PASSWORD '{}'",
            password.replace('\'', "''")
        ),
        STREAMSPACE.to_owned(),
        "INSERT INTO sessions (id, state) VALUES ('a', 'running')".to_owned(),
        format!("GRANT SELECT ON sessions TO {role}"),
    ] {
        sqlx::raw_sql(&sql).execute(&admin).await.unwrap();
    }
    admin.close().await;

    let server: PgConnectOptions = db.url().parse().unwrap();
    let port = server.get_port().to_string();
    let vars = |name: &str| {
        match name {
            "DB_HOST" => Some(server.get_host()),
            "DB_PORT" => Some(port.as_str()),
            "DB_USER" => Some(role),
            "DB_PASSWORD" => Some(password),
            "DB_NAME" => Some(db.name()),
            _ => None,
        }
        .map(str::to_owned)
    };
    let url = gc_store::url_from_env(vars).unwrap();
    let table = connect_sessions(&url, TableSpec::streamspace())
        .await
        .unwrap();
    assert!(!table.location().contains("p%40ss"), "{}", table.location());
    assert!(!format!("{table:?}").contains("p%40ss"), "{table:?}");
    let answer = table.lookup(&ids(&["a", "b"])).await.unwrap();
    assert_eq!(answer["a"], present(Some("running")));
    assert_eq!(answer["b"], Row::Missing);

    // A table the role may not read is refused when connecting.
    let admin = db.pool().await.unwrap();
    sqlx::raw_sql("CREATE TABLE hidden (id TEXT, state TEXT)")
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let spec = TableSpec {
        table: "hidden".into(),
        ..TableSpec::streamspace()
    };
    let err = connect_sessions(&url, spec).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Other(m) if m.contains("permission denied")),
        "{err}"
    );
    assert!(!format!("{err:?}").contains("p%40ss"), "{err:?}");
}
