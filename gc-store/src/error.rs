//! The one place where sqlx's errors become [`StoreError`]s.

use gc_core::ports::StoreError;
use sqlx::error::{DatabaseError, Error};
use sqlx::migrate::MigrateError;
use sqlx::sqlite::SqliteError;

/// Maps a driver error, prefixing the (redacted) location of the store.
pub(crate) fn map(location: &str, error: Error) -> StoreError {
    let message = format!("{location}: {error}");
    match error {
        Error::Io(_)
        | Error::Tls(_)
        | Error::PoolTimedOut
        | Error::PoolClosed
        | Error::WorkerCrashed => StoreError::Unavailable(message),
        Error::ColumnDecode { .. } | Error::Decode(_) | Error::ColumnNotFound(_) => {
            StoreError::Malformed(message)
        }
        Error::Database(ref db) => match database_class(db.as_ref()) {
            Class::Unavailable => StoreError::Unavailable(message),
            Class::Malformed => StoreError::Malformed(message),
            Class::Other => StoreError::Other(message),
        },
        Error::Migrate(migrate) => match *migrate {
            MigrateError::Execute(inner) => map(location, inner),
            other => StoreError::Other(format!("{location}: cannot migrate the schema: {other}")),
        },
        _ => StoreError::Other(message),
    }
}

/// How a database error counts: the store is unavailable, its data is malformed, or other.
enum Class {
    Unavailable,
    Malformed,
    Other,
}

/// Classifies a server's error by its code: PostgreSQL's SQLSTATE or SQLite's result code.
fn database_class(db: &dyn DatabaseError) -> Class {
    let Some(code) = db.code() else {
        return Class::Other;
    };
    if db.try_downcast_ref::<SqliteError>().is_some() {
        // The extended result code, whose low byte is the primary one.
        return code
            .parse::<i32>()
            .map_or(Class::Other, |c| sqlite_class(c & 0xff));
    }
    postgres_class(&code)
}

/// PostgreSQL SQLSTATE classes (<https://www.postgresql.org/docs/current/errcodes-appendix.html>).
fn postgres_class(code: &str) -> Class {
    match code.get(..2) {
        // connection_exception, invalid_authorization_specification, insufficient_resources,
        // operator_intervention (shutdown, cannot connect now), system_error.
        Some("08" | "28" | "53" | "57" | "58") => Class::Unavailable,
        // invalid_catalog_name: the database in the URL does not exist.
        _ if code == "3D000" => Class::Unavailable,
        // data_corrupted, index_corrupted.
        _ if code == "XX001" || code == "XX002" => Class::Malformed,
        _ => Class::Other,
    }
}

/// SQLite primary result codes (<https://www.sqlite.org/rescode.html>).
fn sqlite_class(primary: i32) -> Class {
    match primary {
        // PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL, AUTH.
        3 | 5 | 6 | 7 | 8 | 10 | 13 | 14 | 15 | 23 => Class::Unavailable,
        // CORRUPT, NOTADB.
        11 | 26 => Class::Malformed,
        _ => Class::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_errors_are_unavailable() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(matches!(
            map("x", Error::Io(refused)),
            StoreError::Unavailable(m) if m.starts_with("x: ")
        ));
        assert!(matches!(
            map("x", Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(map("x", Error::RowNotFound), StoreError::Other(_)));
    }

    #[test]
    fn server_codes_are_classified() {
        assert!(matches!(sqlite_class(5), Class::Unavailable));
        assert!(matches!(sqlite_class(26), Class::Malformed));
        assert!(matches!(sqlite_class(19), Class::Other));
        assert!(matches!(postgres_class("28P01"), Class::Unavailable));
        assert!(matches!(postgres_class("3D000"), Class::Unavailable));
        assert!(matches!(postgres_class("23505"), Class::Other));
    }
}
