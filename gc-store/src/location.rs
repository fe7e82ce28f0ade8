//! Where a store lives: a store URL read into a SQLite file or a PostgreSQL URL, and the form
//! of it that may be shown (the password replaced by `***`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A parsed store URL. `Debug` shows only what [`Location::shown`] shows.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL, as given (it may hold a password: never show it, show `shown`).
    Postgres {
        /// The URL as given.
        url: String,
        /// The URL with its password replaced.
        shown: String,
    },
}

impl Location {
    /// Reads `sqlite:PATH`, `sqlite://PATH`, `postgres://...`, `postgresql://...`, or a plain
    /// file path (SQLite).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        if url.is_empty() {
            return Err("empty store URL".into());
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres {
                shown: redact(url),
                url: url.to_owned(),
            });
        }
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        if path.is_empty() || path == ":memory:" {
            return Err(format!(
                "{url:?} names no database file: give a file path, as in sqlite:/var/lib/gc/gc.sqlite3"
            ));
        }
        if let Some((scheme, _)) = url.split_once("://")
            && !url.starts_with("sqlite:")
        {
            return Err(format!(
                "unsupported store URL scheme {scheme:?}: use sqlite:PATH or postgres://"
            ));
        }
        Ok(Self::Sqlite(PathBuf::from(path)))
    }

    /// The location as it may be shown in messages and logs.
    pub(crate) fn shown(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("sqlite:{}", path.display()),
            Self::Postgres { shown, .. } => shown.clone(),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// `url` with the password of its user info and of a `password=` query parameter replaced by
/// `***`.
pub(crate) fn redact(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let start = base.find("://").map_or(0, |i| i + 3);
    let mut out = base[..start].to_owned();
    // The user info ends at the last `@`, so a password holding a raw `/` or `@` is still hidden.
    match base[start..].rsplit_once('@') {
        Some((userinfo, rest)) => {
            match userinfo.split_once(':') {
                Some((user, _password)) => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push('@');
            out.push_str(rest);
        }
        None => out.push_str(&base[start..]),
    }
    if let Some(query) = query {
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

/// The embedded default database file, given a way to read environment variables.
pub(crate) fn default_path_from(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("GC_STATE_DIR") {
        return dir.join("gc.sqlite3");
    }
    // The XDG base directory spec: a relative value is invalid and must be ignored.
    if let Some(dir) = set("XDG_STATE_HOME").filter(|d| d.is_absolute()) {
        return dir.join("gc").join("gc.sqlite3");
    }
    let home = set("HOME").unwrap_or_else(|| Path::new(".").to_path_buf());
    home.join(".local/state/gc/gc.sqlite3")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_redact(url: &str, expected: &str) {
        assert_eq!(redact(url), expected, "{url}");
    }

    #[test]
    fn passwords_are_redacted() {
        check_redact(
            "postgres://gc:s3cret@db:5432/gc",
            "postgres://gc:***@db:5432/gc",
        );
        check_redact(
            "postgresql://gc:p%40ss@w@db/gc?sslmode=require",
            "postgresql://gc:***@db/gc?sslmode=require",
        );
        check_redact("postgres://gc@db/gc", "postgres://gc@db/gc");
        check_redact("postgres://gc:a/b@db/gc", "postgres://gc:***@db/gc");
        check_redact("postgres://db", "postgres://db");
        check_redact(
            "postgres://db/gc?user=gc&password=s3cret&sslmode=disable",
            "postgres://db/gc?user=gc&password=***&sslmode=disable",
        );
    }

    #[test]
    fn urls_are_read() {
        let sqlite = |p: &str| Ok(Location::Sqlite(PathBuf::from(p)));
        assert_eq!(Location::parse("sqlite:/var/gc.db"), sqlite("/var/gc.db"));
        assert_eq!(Location::parse("sqlite:///var/gc.db"), sqlite("/var/gc.db"));
        assert_eq!(Location::parse("sqlite://rel/gc.db"), sqlite("rel/gc.db"));
        assert_eq!(Location::parse("gc.db"), sqlite("gc.db"));
        assert_eq!(Location::parse("/a/b c/gc.db"), sqlite("/a/b c/gc.db"));
        let pg = Location::parse("postgres://u:pw@h/d").unwrap();
        assert_eq!(pg.shown(), "postgres://u:***@h/d");
        assert!(Location::parse("").is_err());
        assert!(Location::parse("sqlite::memory:").is_err());
        assert!(Location::parse("mysql://h/d").is_err());
    }

    #[test]
    fn default_path_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let check = |pairs: &'static [(&'static str, &'static str)], expected: &str| {
            assert_eq!(default_path_from(env(pairs)), PathBuf::from(expected));
        };
        check(
            &[
                ("GC_STATE_DIR", "/s"),
                ("XDG_STATE_HOME", "/x"),
                ("HOME", "/h"),
            ],
            "/s/gc.sqlite3",
        );
        check(
            &[("XDG_STATE_HOME", "/x"), ("HOME", "/h")],
            "/x/gc/gc.sqlite3",
        );
        check(
            &[
                ("GC_STATE_DIR", ""),
                ("XDG_STATE_HOME", "rel"),
                ("HOME", "/h"),
            ],
            "/h/.local/state/gc/gc.sqlite3",
        );
        check(&[], "./.local/state/gc/gc.sqlite3");
    }
}
