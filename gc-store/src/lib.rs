//! The database ports on sqlx: PostgreSQL in production, SQLite as the embedded default.
