//! Where a store lives: a store URL read into a SQLite file or a PostgreSQL URL, and the form
//! of it that may be shown ([`crate::shown_url`]: the password replaced by `***`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A parsed store URL. `Debug` shows only what [`Location::shown`] shows.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL, as given (it may hold a password: never show it, show `shown`).
    Postgres {
        /// The URL as given, less the query parameters sqlx does not read.
        url: String,
        /// The URL with its password replaced.
        shown: String,
    },
}

/// A setting that holds a URL, as messages name it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setting {
    /// What the URL is and where it came from: `the store URL ($GC_STORE / --store)`.
    pub(crate) name: &'static str,
    /// What to give instead of an unsupported scheme: `use sqlite:PATH or postgres://`.
    pub(crate) advice: &'static str,
}

/// gc's own store.
pub(crate) const STORE: Setting = Setting {
    name: "the store URL ($GC_STORE / --store)",
    advice: "use sqlite:PATH or postgres://",
};

/// The session database (StreamSpace's PostgreSQL), which is not gc's store.
pub(crate) const SESSION_DATABASE: Setting = Setting {
    name: "the session database URL (--database-url / $GC_SESSION_DATABASE_URL)",
    advice: "the session database is PostgreSQL: give postgres://USER:PASSWORD@HOST:5432/DATABASE",
};

impl Location {
    /// Reads `sqlite:PATH`, `sqlite://PATH`, `postgres://...`, `postgresql://...`, or a plain
    /// file path (SQLite). `setting` names where the URL came from, for the messages about a
    /// PostgreSQL URL that cannot be shown and an unsupported scheme.
    ///
    /// A PostgreSQL URL that [`crate::shown_url`] will not show is refused, its value not shown:
    /// one that does not parse, or whose reading could show part of its password (then sqlx
    /// would read a piece of the password as the host, port or database too).
    pub(crate) fn parse(url: &str, setting: Setting) -> Result<Self, String> {
        if url.is_empty() {
            return Err(format!("{} is empty", setting.name));
        }
        let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
        if matches!(scheme.as_deref(), Some("postgres" | "postgresql")) {
            let shown = crate::shown_url(url).map_err(|why| format!("{} {why}", setting.name))?;
            let (url, dropped) = for_sqlx(url);
            if dropped > 0 {
                tracing::warn!(
                    "{}: ignoring {dropped} query parameter(s) sqlx does not read (not \
                     shown: one may hold a piece of a password)",
                    setting.name
                );
            }
            return Ok(Self::Postgres { shown, url });
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
        if let Some(error) = foreign_scheme(url, setting) {
            return Err(error);
        }
        // `user:password@host/db` with its scheme forgotten reads as a relative file path: it
        // would be created, and shown, password and all. A file path with `@` says `sqlite:`.
        if !url.starts_with("sqlite:") && url.contains('@') {
            return Err(format!(
                "{} holds an `@` without a scheme (its value is not shown): a PostgreSQL \
                 URL starts with postgres://; a SQLite file whose path holds an `@` is written \
                 sqlite:PATH",
                setting.name
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

/// The message for `url` when it starts with a `scheme://` other than SQLite's and PostgreSQL's
/// (`mysql://`): the scheme and `setting`'s advice; a scheme that is no scheme (it may be a piece
/// of a password) is not shown.
pub(crate) fn foreign_scheme(url: &str, setting: Setting) -> Option<String> {
    let (scheme, _) = url.split_once("://")?;
    let lower = scheme.to_ascii_lowercase();
    if url.starts_with("sqlite:") || matches!(lower.as_str(), "postgres" | "postgresql") {
        return None;
    }
    // Text before `://` that is no scheme may be anything, a password too.
    let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    Some(if is_scheme {
        format!(
            "unsupported URL scheme {scheme:?} in {}: {}",
            setting.name, setting.advice
        )
    } else {
        format!(
            "{} is not a valid URL (its value is not shown)",
            setting.name
        )
    })
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// `url` (one [`crate::shown_url`] shows) without the query parameters sqlx does not read, and
/// how many those were. sqlx ignores them anyway, but logs each with its value at WARN, and one
/// may be a piece of a password (`PASSWORD=...`, or the tail of a `password=` value holding a raw
/// `&`).
fn for_sqlx(url: &str) -> (String, usize) {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return (url.to_owned(), 0);
    };
    let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
    let kept: Vec<&(String, String)> = pairs.iter().filter(|(k, _)| sqlx_reads(k)).collect();
    let dropped = pairs.len() - kept.len();
    if dropped == 0 {
        return (url.to_owned(), 0);
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    (parsed.into(), dropped)
}

/// Whether sqlx's PostgreSQL driver reads the query parameter `key` (its names, exactly): the
/// ones shown, and `password`.
fn sqlx_reads(key: &str) -> bool {
    key == "password"
        || gc_core::shown::SHOWN_PARAMETERS.contains(&key)
        || (key.starts_with("options[") && key.ends_with(']'))
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

    const SETTING: Setting = STORE;

    fn shown(url: &str) -> String {
        Location::parse(url, SETTING).unwrap().shown()
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            shown("postgres://gc:s3cret@db:5432/gc"),
            "postgres://gc:***@db:5432/gc"
        );
        assert_eq!(
            shown("postgresql://gc:p%40ss@w@db/gc?sslmode=require"),
            "postgresql://gc:***@db/gc?sslmode=require"
        );
        assert_eq!(shown("postgres://gc@db/gc"), "postgres://gc@db/gc");
        assert_eq!(shown("postgres://db"), "postgres://db");
        assert_eq!(
            shown("postgres://db/gc?user=gc&password=s3cret&sslmode=disable"),
            "postgres://db/gc?user=gc&password=***&***"
        );
    }

    #[test]
    fn sqlx_gets_only_the_parameters_it_reads() {
        let given = |url: &str| match Location::parse(url, SETTING).unwrap() {
            Location::Postgres { url, .. } => url,
            Location::Sqlite(_) => panic!("{url}"),
        };
        let plain = "postgres://gc:pw@db/gc?sslmode=disable&options[search_path]=a%20b";
        assert_eq!(given(plain), plain);
        assert_eq!(
            given("postgres://gc:pw@db/gc?PASSWORD=Zq&sslmode=disable&connect_timeout=5"),
            "postgres://gc:pw@db/gc?sslmode=disable"
        );
        assert_eq!(
            given("postgres://db/gc?password=a&Zq&application_name=gc%20x"),
            "postgres://db/gc?password=a&application_name=gc+x"
        );
        assert_eq!(
            given("postgres://gc:pw@db/gc?Zq="),
            "postgres://gc:pw@db/gc"
        );
    }

    #[test]
    fn a_postgres_url_that_cannot_be_shown_is_refused_unshown() {
        for url in [
            "postgres://gc:a/Zq@db/gc",
            "postgres://gc:1/Zq@db/gc",
            "postgresql://gc:pa#Zq@db/gc",
            "POSTGRES://gc:pa?Zq@db/gc",
            "postgres:gc:pa?Zq@db/gc",
        ] {
            let message = Location::parse(url, SETTING).unwrap_err();
            assert!(
                message.starts_with(
                    "the store URL ($GC_STORE / --store) is not a valid URL (its value is not \
                     shown): "
                ),
                "{message}"
            );
            assert!(
                !message.contains("Zq") && !message.contains("db/"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_password_holding_a_question_mark_is_never_shown() {
        let url = "postgres://gc:pa?ss@db/gc";
        let shown = match Location::parse(url, SETTING) {
            Ok(location) => format!("{} {location:?}", location.shown()),
            Err(message) => message,
        };
        assert!(
            !shown.contains("pa?ss") && !shown.contains("ss@db"),
            "{shown}"
        );
    }

    #[test]
    fn urls_are_read() {
        let parse = |url: &str| Location::parse(url, SETTING);
        let sqlite = |p: &str| Ok(Location::Sqlite(PathBuf::from(p)));
        assert_eq!(parse("sqlite:/var/gc.db"), sqlite("/var/gc.db"));
        assert_eq!(parse("sqlite:///var/gc.db"), sqlite("/var/gc.db"));
        assert_eq!(parse("sqlite://rel/gc.db"), sqlite("rel/gc.db"));
        assert_eq!(parse("gc.db"), sqlite("gc.db"));
        assert_eq!(parse("/a/b c/gc.db"), sqlite("/a/b c/gc.db"));
        let pg = parse("postgres://u:pw@h/d").unwrap();
        assert_eq!(pg.shown(), "postgres://u:***@h/d");
        assert!(parse("").is_err());
        assert!(parse("sqlite::memory:").is_err());
        let mysql = parse("mysql://h/d").unwrap_err();
        assert!(
            mysql.ends_with("--store): use sqlite:PATH or postgres://"),
            "{mysql}"
        );
        let odd = parse("u:Zq@h/d?next=x://y").unwrap_err();
        assert!(!odd.contains("Zq"), "{odd}");
        // A PostgreSQL URL without its scheme is no file path: refused, unshown.
        for url in ["gc:Zq@db:5432/gc", "gc:Zq@db/gc", "/var/lib/gc/a@b.sqlite3"] {
            let e = parse(url).unwrap_err();
            assert!(e.contains("holds an `@` without a scheme"), "{e}");
            assert!(!e.contains("Zq") && !e.contains("db"), "{e}");
        }
        assert_eq!(
            parse("sqlite:/var/lib/gc/a@b.sqlite3"),
            sqlite("/var/lib/gc/a@b.sqlite3")
        );
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
