//! StreamSpace's database settings (`DB_HOST`, `DB_PORT`, ...) read into a PostgreSQL URL.

use std::net::Ipv6Addr;

use gc_core::ports::StoreError;

/// StreamSpace's database settings, as [`url_from_env`] reads them.
pub const DB_VARIABLES: [&str; 6] = [
    "DB_HOST",
    "DB_PORT",
    "DB_USER",
    "DB_PASSWORD",
    "DB_NAME",
    "DB_SSL_MODE",
];

/// A session database setting that cannot give a URL: none given, a URL that is not
/// PostgreSQL's, a bad `DB_*` value. Its message names the setting and what to give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionUrlError(String);

impl std::fmt::Display for SessionUrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SessionUrlError {}

/// The session database's URL: `given` (`--database-url`, or `$GC_SESSION_DATABASE_URL`) when
/// it is not empty, else the one [`url_from_env`] builds from StreamSpace's `DB_*` variables
/// read through `vars`, when at least one of them is set (the others take StreamSpace's
/// defaults). Nothing is connected.
///
/// # Errors
/// [`SessionUrlError`] when nothing is given at all (no default database is guessed), when
/// `given` has a scheme that is neither PostgreSQL's nor SQLite's (`mysql://`: the message
/// advises `postgres://`), or for a bad `DB_*` value (named; the password never shown).
pub fn session_url(
    given: Option<&str>,
    vars: impl Fn(&str) -> Option<String>,
) -> Result<String, SessionUrlError> {
    if let Some(url) = given.filter(|u| !u.is_empty()) {
        return match crate::location::foreign_scheme(url, crate::location::SESSION_DATABASE) {
            Some(message) => Err(SessionUrlError(message)),
            None => Ok(url.to_owned()),
        };
    }
    if DB_VARIABLES
        .iter()
        .all(|name| vars(name).is_none_or(|v| v.is_empty()))
    {
        return Err(SessionUrlError(format!(
            "no session database given: pass --database-url \
             postgres://USER:PASSWORD@HOST:5432/DATABASE, or set $GC_SESSION_DATABASE_URL, or \
             StreamSpace's {}",
            DB_VARIABLES.join(", ")
        )));
    }
    url_from_env(vars).map_err(|e| {
        let why = match e {
            StoreError::Other(why) => why,
            other => other.to_string(),
        };
        SessionUrlError(format!(
            "cannot build the session database URL from DB_*: {why}"
        ))
    })
}

/// The `sslmode` values PostgreSQL (and sqlx) accept.
const SSL_MODES: &[&str] = &[
    "disable",
    "allow",
    "prefer",
    "require",
    "verify-ca",
    "verify-full",
];

/// Builds a PostgreSQL URL from StreamSpace's variables, read through `vars`: `DB_HOST`
/// (default `localhost`; a path starting with `/` is a Unix socket folder), `DB_PORT` (5432),
/// `DB_USER` (`streamspace`), `DB_PASSWORD` (none), `DB_NAME` (`streamspace`) and `DB_SSL_MODE`
/// (`disable`). An empty variable counts as unset, as in StreamSpace.
///
/// A URL, not `sqlx::postgres::PgConnectOptions` built from the fields: the `DB_*` settings
/// then take the one path `--database-url` takes (parsed by sqlx, checked and shown redacted by
/// [`crate::shown_url`], its query parameters sorted), so both read, fail and show alike.
///
/// # Guarantees
/// User, password and database name are percent-encoded, so any text survives the URL
/// unchanged. The password never appears in an error.
///
/// # Errors
/// [`StoreError::Other`] naming the variable when `DB_PORT` is not a port, `DB_SSL_MODE` is not
/// one of PostgreSQL's modes, or `DB_HOST` is not a host name, an IP address or a socket folder.
///
/// # Caveats
/// The URL holds the password: show it only through a redacting form, such as
/// [`crate::SessionTable::location`].
pub fn url_from_env(vars: impl Fn(&str) -> Option<String>) -> Result<String, StoreError> {
    let get = |name: &str| vars(name).filter(|v| !v.is_empty());
    let or = |name: &str, default: &str| get(name).unwrap_or_else(|| default.to_owned());
    let bad = |name: &str, value: &str, rule: &str| {
        StoreError::Other(format!("invalid {name} {value:?}: {rule}"))
    };

    let port = or("DB_PORT", "5432");
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| bad("DB_PORT", &port, "must be a port number"))?;
    let ssl_mode = or("DB_SSL_MODE", "disable");
    if !SSL_MODES.contains(&ssl_mode.as_str()) {
        return Err(bad(
            "DB_SSL_MODE",
            &ssl_mode,
            &format!("must be one of {}", SSL_MODES.join(", ")),
        ));
    }
    let host = or("DB_HOST", "localhost");
    let mut query = Vec::new();
    let authority_host = if host.starts_with('/') {
        // sqlx reads a socket folder from `host=`; the authority's host is then unused.
        query.push(format!("host={}", encode(&host)));
        "localhost".to_owned()
    } else if host.parse::<Ipv6Addr>().is_ok() {
        format!("[{host}]")
    } else if host
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b".-_".contains(&c))
    {
        host
    } else {
        return Err(bad(
            "DB_HOST",
            &host,
            "must be a host name, an IP address or a socket folder",
        ));
    };
    query.push(format!("sslmode={ssl_mode}"));

    let mut url = format!("postgres://{}", encode(&or("DB_USER", "streamspace")));
    if let Some(password) = get("DB_PASSWORD") {
        url.push(':');
        url.push_str(&encode(&password));
    }
    url.push_str(&format!(
        "@{authority_host}:{port}/{}?{}",
        encode(&or("DB_NAME", "streamspace")),
        query.join("&")
    ));
    Ok(url)
}

/// `text` with every byte outside RFC 3986's unreserved set as `%XX`.
fn encode(text: &str) -> String {
    crate::percent_encode(text.as_bytes(), crate::UNRESERVED)
}

#[cfg(test)]
mod tests {
    use sqlx::postgres::{PgConnectOptions, PgSslMode};

    use super::*;

    fn url(pairs: &[(&str, &str)]) -> Result<String, StoreError> {
        url_from_env(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn session(given: Option<&str>, pairs: &[(&str, &str)]) -> Result<String, String> {
        let vars = |name: &str| {
            let found = pairs.iter().find(|(n, _)| *n == name);
            found.map(|(_, v)| (*v).to_owned())
        };
        session_url(given, vars).map_err(|e| e.to_string())
    }

    #[test]
    fn a_session_database_is_given_or_refused_by_name() {
        let nothing = session(None, &[]).unwrap_err();
        assert!(
            nothing.starts_with(
                "no session database given: pass --database-url \
                 postgres://USER:PASSWORD@HOST:5432/DATABASE, or set $GC_SESSION_DATABASE_URL, or \
                 StreamSpace's DB_HOST, DB_PORT, DB_USER, DB_PASSWORD, DB_NAME, DB_SSL_MODE"
            ),
            "{nothing}"
        );
        assert!(!nothing.contains("store"), "{nothing}");
        // Empty counts as unset, as in StreamSpace.
        assert_eq!(session(Some(""), &[("DB_HOST", "")]).unwrap_err(), nothing);
        // One variable is enough: the others take StreamSpace's defaults.
        assert_eq!(
            session(None, &[("DB_PASSWORD", "pw")]).unwrap(),
            "postgres://streamspace:pw@localhost:5432/streamspace?sslmode=disable"
        );
        // A URL given wins over the variables.
        let url = "postgres://gc@db/streamspace";
        assert_eq!(session(Some(url), &[("DB_HOST", "x")]).unwrap(), url);
        assert_eq!(session(Some("sessions.db"), &[]).unwrap(), "sessions.db");
        // A bad variable is named, without the store's words.
        let port = session(None, &[("DB_PORT", "0")]).unwrap_err();
        assert_eq!(
            port,
            "cannot build the session database URL from DB_*: invalid DB_PORT \"0\": must be a \
             port number"
        );
    }

    #[test]
    fn a_session_database_url_of_another_scheme_says_postgres() {
        let mysql = session(Some("mysql://x"), &[]).unwrap_err();
        assert_eq!(
            mysql,
            "unsupported URL scheme \"mysql\" in the session database URL (--database-url / \
             $GC_SESSION_DATABASE_URL): the session database is PostgreSQL: give \
             postgres://USER:PASSWORD@HOST:5432/DATABASE"
        );
        assert!(!mysql.contains("sqlite"), "{mysql}");
        // Text before `://` that is no scheme is not shown: it may be a password.
        let odd = session(Some("u:Zq@h/d?next=x://y"), &[]).unwrap_err();
        assert!(!odd.contains("Zq"), "{odd}");
        for url in [
            "postgres://h/d",
            "POSTGRESQL://h/d",
            "sqlite:/x.db",
            "sqlite:///x.db",
        ] {
            assert_eq!(session(Some(url), &[]).unwrap(), url);
        }
    }

    #[test]
    fn defaults_are_streamspaces() {
        let expected = "postgres://streamspace@localhost:5432/streamspace?sslmode=disable";
        assert_eq!(url(&[]).unwrap(), expected);
        let empty = [("DB_HOST", ""), ("DB_PORT", ""), ("DB_PASSWORD", "")];
        assert_eq!(url(&empty).unwrap(), expected);
    }

    #[test]
    fn every_setting_is_used_and_text_is_encoded() {
        let password = "p@ss:w/rd %?#&=ü";
        let got = url(&[
            ("DB_HOST", "db.streamspace.svc"),
            ("DB_PORT", "6543"),
            ("DB_USER", "gc reader"),
            ("DB_PASSWORD", password),
            ("DB_NAME", "stream/space"),
            ("DB_SSL_MODE", "verify-full"),
        ])
        .unwrap();
        assert_eq!(
            got,
            "postgres://gc%20reader:p%40ss%3Aw%2Frd%20%25%3F%23%26%3D%C3%BC@db.streamspace.svc:6543\
             /stream%2Fspace?sslmode=verify-full"
        );
        // sqlx reads back exactly what was given.
        let options: PgConnectOptions = got.parse().unwrap();
        assert_eq!(options.get_username(), "gc reader");
        assert_eq!(options.get_database(), Some("stream/space"));
        assert_eq!(options.get_host(), "db.streamspace.svc");
        assert_eq!(options.get_port(), 6543);
        assert!(matches!(options.get_ssl_mode(), PgSslMode::VerifyFull));
    }

    #[test]
    fn every_password_is_shown_as_stars() {
        for c in ["?", "#", "@", "/", ":", "%", " ", "&", "=", "\\", "%3F"] {
            let password = format!("Zq{c}Wv");
            let url = url(&[("DB_PASSWORD", &password)]).unwrap();
            assert_eq!(
                crate::shown_url(&url).unwrap(),
                "postgres://streamspace:***@localhost:5432/streamspace?sslmode=disable",
                "{password}"
            );
        }
    }

    #[test]
    fn ip_addresses_and_socket_folders_are_hosts() {
        let v6 = url(&[("DB_HOST", "::1")]).unwrap();
        assert!(v6.contains("@[::1]:5432/"), "{v6}");
        let v4 = url(&[("DB_HOST", "10.0.0.7")]).unwrap();
        assert!(v4.contains("@10.0.0.7:5432/"), "{v4}");
        let socket = url(&[("DB_HOST", "/var/run/postgresql")]).unwrap();
        let options: PgConnectOptions = socket.parse().unwrap();
        assert_eq!(
            options.get_socket(),
            Some(&std::path::PathBuf::from("/var/run/postgresql"))
        );
    }

    #[test]
    fn bad_settings_are_named_and_the_password_is_never_shown() {
        let secret = ("DB_PASSWORD", "Very-Secret-Pw");
        for (pairs, name) in [
            (vec![("DB_PORT", "0"), secret], "DB_PORT"),
            (vec![("DB_PORT", "65536"), secret], "DB_PORT"),
            (vec![("DB_PORT", "54 32"), secret], "DB_PORT"),
            (vec![("DB_SSL_MODE", "on"), secret], "DB_SSL_MODE"),
            (vec![("DB_HOST", "db/x"), secret], "DB_HOST"),
            (vec![("DB_HOST", "u@db"), secret], "DB_HOST"),
            (vec![("DB_HOST", "db:5432"), secret], "DB_HOST"),
        ] {
            let err = url(&pairs).unwrap_err();
            let StoreError::Other(message) = &err else {
                panic!("{pairs:?}: {err:?}");
            };
            assert!(message.contains(name), "{message}");
            assert!(!message.contains("Very-Secret-Pw"), "{message}");
        }
    }
}
