//! The schema: the migrations in `migrations/{sqlite,postgres}/`, embedded in the binary and run
//! by sqlx's migrator when a store is opened.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// A migration file: version, description, SQL.
type Embedded = (i64, &'static str, &'static str);

/// SQLite's migrations, in order.
const SQLITE: &[Embedded] = &[
    (
        1,
        "ledgers and receipts",
        include_str!("../migrations/sqlite/0001_ledgers_and_receipts.sql"),
    ),
    (
        2,
        "session receipts",
        include_str!("../migrations/sqlite/0002_session_receipts.sql"),
    ),
];

/// PostgreSQL's migrations, in order.
const POSTGRES: &[Embedded] = &[
    (
        1,
        "ledgers and receipts",
        include_str!("../migrations/postgres/0001_ledgers_and_receipts.sql"),
    ),
    (
        2,
        "session receipts",
        include_str!("../migrations/postgres/0002_session_receipts.sql"),
    ),
];

/// Which database's migrations.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dialect {
    /// `migrations/sqlite/`.
    Sqlite,
    /// `migrations/postgres/`.
    Postgres,
}

impl<'s> MigrationSource<'s> for Dialect {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 's>> {
        let files = match self {
            Self::Sqlite => SQLITE,
            Self::Postgres => POSTGRES,
        };
        let migrations = files
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    Cow::Borrowed(sql),
                    false,
                )
            })
            .collect();
        Box::pin(std::future::ready(Ok(migrations)))
    }
}

/// The migrator of `dialect`.
pub(crate) async fn migrator(dialect: Dialect) -> Result<Migrator, sqlx::Error> {
    Ok(Migrator::new(dialect).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file in a migrations folder is embedded, in order, under its file's version.
    #[test]
    fn every_migration_file_is_embedded() {
        for (dir, embedded) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let path = format!("{}/migrations/{dir}", env!("CARGO_MANIFEST_DIR"));
            let mut files: Vec<String> = std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            files.sort();
            assert_eq!(files.len(), embedded.len(), "{path}");
            for (file, (version, _, sql)) in files.iter().zip(embedded) {
                let number: i64 = file.split('_').next().unwrap().parse().unwrap();
                assert_eq!(number, *version, "{file}");
                let text = std::fs::read_to_string(format!("{path}/{file}")).unwrap();
                assert_eq!(&text, sql, "{file}");
            }
        }
    }
}
