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
        Error::Database(ref db) => match database_kind(db.as_ref()) {
            Kind::Unavailable => StoreError::Unavailable(message),
            Kind::Malformed => StoreError::Malformed(message),
            Kind::Other => StoreError::Other(message),
        },
        Error::Migrate(migrate) => match *migrate {
            MigrateError::Execute(inner) => map(location, inner),
            other => StoreError::Other(format!("{location}: cannot migrate the schema: {other}")),
        },
        _ => StoreError::Other(message),
    }
}

enum Kind {
    Unavailable,
    Malformed,
    Other,
}

/// Classifies a server's error by its code: PostgreSQL's SQLSTATE or SQLite's result code.
fn database_kind(db: &dyn DatabaseError) -> Kind {
    let Some(code) = db.code() else {
        return Kind::Other;
    };
    if db.try_downcast_ref::<SqliteError>().is_some() {
        // The extended result code, whose low byte is the primary one.
        return code
            .parse::<i32>()
            .map_or(Kind::Other, |c| sqlite_kind(c & 0xff));
    }
    postgres_kind(&code)
}

/// PostgreSQL SQLSTATE classes (<https://www.postgresql.org/docs/current/errcodes-appendix.html>).
fn postgres_kind(code: &str) -> Kind {
    match code.get(..2) {
        // connection_exception, invalid_authorization_specification, insufficient_resources,
        // operator_intervention (shutdown, cannot connect now), system_error.
        Some("08" | "28" | "53" | "57" | "58") => Kind::Unavailable,
        // invalid_catalog_name: the database in the URL does not exist.
        _ if code == "3D000" => Kind::Unavailable,
        // data_corrupted, index_corrupted.
        _ if code == "XX001" || code == "XX002" => Kind::Malformed,
        _ => Kind::Other,
    }
}

/// SQLite primary result codes (<https://www.sqlite.org/rescode.html>).
fn sqlite_kind(primary: i32) -> Kind {
    match primary {
        // PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL, AUTH.
        3 | 5 | 6 | 7 | 8 | 10 | 13 | 14 | 15 | 23 => Kind::Unavailable,
        // CORRUPT, NOTADB.
        11 | 26 => Kind::Malformed,
        _ => Kind::Other,
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
        assert!(matches!(sqlite_kind(5), Kind::Unavailable));
        assert!(matches!(sqlite_kind(26), Kind::Malformed));
        assert!(matches!(sqlite_kind(19), Kind::Other));
        assert!(matches!(postgres_kind("28P01"), Kind::Unavailable));
        assert!(matches!(postgres_kind("3D000"), Kind::Unavailable));
        assert!(matches!(postgres_kind("23505"), Kind::Other));
    }
}
