//! A URL that may hold credentials, as messages and logs may show it: read by the `url` crate
//! (never split by hand), its password and any `password` query parameter replaced by `***`.
//!
//! A URL that does not parse is not shown at all, not even partly, and neither is one whose
//! reading could put a piece of a secret where it would be shown: a password holding a raw `/`,
//! `?` or `#` ends the authority early, so its tail (and the real host) land in the path, the
//! query or the fragment, and the text before it reads as a host and port
//! (`postgres://u:1/b@db/x` reads as host `u`, port `1`, path `/b@db/x`). Such a text always
//! holds an `@` after its authority; a URL that does is not shown.

use std::fmt;

use url::Url;

/// The query parameters whose values are shown: the PostgreSQL connection parameters sqlx reads
/// that hold no secret (names compared in any case). Any other parameter is shown as `***`, name
/// and all: a raw `&` in a `password=` value would make its tail a parameter of its own.
pub const SHOWN_PARAMETERS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "application_name",
    "options",
];

/// Why a URL is not shown. Its text never holds any of the URL's: the `url` crate's parse errors
/// are fixed sentences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlNotShown(String);

impl fmt::Display for UrlNotShown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "is not a valid URL (its value is not shown): {}", self.0)
    }
}

impl std::error::Error for UrlNotShown {}

/// `text`, a URL that may hold credentials, as it may be shown: scheme, user information, host,
/// port, path and query as the `url` crate reads them, with
/// - the password replaced by `***` (`postgres://gc:***@db:5432/gc`); for a scheme other than
///   `postgres`/`postgresql` the whole user information, which may be a token (`https://***@h`);
/// - each query parameter named `password` (in any case) as `password=***`, each one not in
///   [`SHOWN_PARAMETERS`] and every one after a `password` as `***`;
/// - no fragment; the path `/` of `http` and the like (which always have one) left out.
///
/// # Errors
/// [`UrlNotShown`], saying why (never with any of `text`), when `text` does not parse as a URL,
/// has no `//` authority, or holds an `@` after its authority.
pub fn shown_url(text: &str) -> Result<String, UrlNotShown> {
    let url = Url::parse(text).map_err(|e| UrlNotShown(e.to_string()))?;
    let Some(host) = url.host_str().filter(|_| !url.cannot_be_a_base()) else {
        return Err(UrlNotShown(
            "it has no host (it must start with SCHEME://HOST)".into(),
        ));
    };
    if after_authority(text, url.is_special()).contains('@') {
        return Err(UrlNotShown(
            "it holds an `@` after its host, as a password holding a raw `/`, `?` or `#` makes \
             it do: percent-encode the password (`/` as %2F, `?` as %3F, `#` as %23, `@` as %40)"
                .into(),
        ));
    }
    let scheme = url.scheme();
    let mut out = format!("{scheme}://");
    if !url.username().is_empty() || url.password().is_some() {
        if matches!(scheme, "postgres" | "postgresql") {
            out.push_str(url.username());
            if url.password().is_some() {
                out.push_str(":***");
            }
        } else {
            out.push_str("***");
        }
        out.push('@');
    }
    out.push_str(host);
    if let Some(port) = url.port() {
        out.push_str(&format!(":{port}"));
    }
    // A special scheme's path is never empty: `http://h` reads as `http://h/`.
    if !(url.is_special() && url.path() == "/") {
        out.push_str(url.path());
    }
    if let Some(query) = url.query().filter(|q| !q.is_empty()) {
        out.push('?');
        // After a `password` parameter, every parameter is `***`: a raw `&` in its value makes
        // its tail a parameter of its own, which may read as any name (`&sslmode=...`).
        let mut after_password = false;
        let params: Vec<String> = query
            .split('&')
            .map(|param| {
                let shown = if after_password {
                    "***".to_owned()
                } else {
                    shown_parameter(param)
                };
                after_password |= shown.ends_with("=***");
                shown
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    Ok(out)
}

/// One `name=value` of a query (as the `url` crate serialized it), as it may be shown.
fn shown_parameter(param: &str) -> String {
    let raw_name = param.split_once('=').map_or(param, |(name, _)| name);
    let name = url::form_urlencoded::parse(param.as_bytes())
        .next()
        .map(|(name, _)| name.into_owned())
        .unwrap_or_default();
    if name.to_ascii_lowercase().contains("password") {
        format!("{raw_name}=***")
    } else if SHOWN_PARAMETERS
        .iter()
        .any(|shown| shown.eq_ignore_ascii_case(&name))
    {
        param.to_owned()
    } else {
        "***".to_owned()
    }
}

/// The text of `text` after its authority, read as the `url` crate reads it: leading and
/// trailing spaces and controls trimmed, tabs and newlines dropped, the scheme and the slashes
/// after it skipped, and the authority ended by `/`, `?` or `#` (and `\` for `special` schemes,
/// `http` and the like).
fn after_authority(text: &str, special: bool) -> String {
    let text: String = text
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let Some((_, rest)) = text.split_once(':') else {
        return String::new();
    };
    let is_slash = |c: char| c == '/' || (special && c == '\\');
    let rest = rest.trim_start_matches(is_slash);
    match rest.find(|c: char| is_slash(c) || c == '?' || c == '#') {
        Some(end) => rest[end..].to_owned(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(url: &str) -> String {
        shown_url(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn passwords_and_password_parameters_become_stars() {
        for (url, expected) in [
            (
                "postgres://gc:s3cret@db:5432/gc",
                "postgres://gc:***@db:5432/gc",
            ),
            ("postgres://gc@db/gc", "postgres://gc@db/gc"),
            ("postgres://:pw@db/gc", "postgres://:***@db/gc"),
            ("postgres://db", "postgres://db"),
            (
                "postgresql://gc:pw@[::1]:6543/gc",
                "postgresql://gc:***@[::1]:6543/gc",
            ),
            (
                "postgres://db/gc?user=gc&password=s3cret&sslmode=disable",
                "postgres://db/gc?user=gc&password=***&***",
            ),
            (
                "postgres://db/gc?PassWord=s3cret&SSLMODE=require",
                "postgres://db/gc?PassWord=***&***",
            ),
            // A raw `&` in a `password=` value: its tail is a parameter of its own, not shown.
            (
                "postgres://db/gc?password=se&cret&sslmode=disable",
                "postgres://db/gc?password=***&***&***",
            ),
            // Its tail may read as a parameter gc shows: nothing after a password is shown.
            (
                "postgres://db/gc?sslmode=disable&password=K9&sslmode=Zq7&user=Zq8",
                "postgres://db/gc?sslmode=disable&password=***&***&***",
            ),
            // A raw `#` in a `password=` value: its tail is the fragment, never shown.
            (
                "postgres://db/gc?password=se#cret",
                "postgres://db/gc?password=***",
            ),
            // A percent-encoded name is read as sqlx reads it.
            (
                "postgres://db/gc?pass%77ord=s3cret",
                "postgres://db/gc?pass%77ord=***",
            ),
            // Raw `@`, `:`, `%` and spaces stay in the user information.
            ("postgresql://gc:p@ss@db/gc", "postgresql://gc:***@db/gc"),
            ("postgres://gc:a:b@db/gc", "postgres://gc:***@db/gc"),
            ("postgres://gc:100%zz@db/gc", "postgres://gc:***@db/gc"),
            ("postgres://gc:a b@db/gc", "postgres://gc:***@db/gc"),
            // Other schemes: the whole user information, which may be a token.
            ("https://user:pw@host/x", "https://***@host/x"),
            ("https://tok3n@host:9091", "https://***@host:9091"),
            ("s3://key:secret@bkt/p", "s3://***@bkt/p"),
            ("http://host", "http://host"),
            ("http://host/a%20b?x=1", "http://host/a%20b?***"),
        ] {
            assert_eq!(shown(url), expected, "{url}");
        }
    }

    #[test]
    fn a_url_that_could_show_a_secret_is_not_shown_at_all() {
        // Each would put part of the password (`Zq`) in the host, port, path, query or
        // fragment, or show the host (`dbhost`) it was meant for as part of a path.
        for url in [
            "postgres://gc:pa?Zq@dbhost/gc",
            "postgres://gc:pa#Zq@dbhost/gc",
            "postgres://gc:pa/Zq@dbhost/gc",
            "postgres://gc:1/Zq@dbhost/gc",
            "postgres://gc:1?Zq@dbhost/gc",
            "postgres://gc:1#Zq@dbhost/gc",
            "postgres://gc@dbhost/gc?x=1#a@Zq",
            "http://gc:1\\Zq@dbhost/gc",
            "https://u:1/Zq@dbhost/x",
            "postgres:gc:Zq@dbhost/gc",
            "postgres:/gc:Zq@dbhost/gc",
            "gc:Zq@dbhost:9091/metrics",
            "not a url Zq",
            "",
        ] {
            let e = shown_url(url).unwrap_err().to_string();
            assert!(
                e.starts_with("is not a valid URL (its value is not shown): "),
                "{e}"
            );
            for piece in ["Zq", "dbhost"] {
                assert!(!e.contains(piece), "{url}: {e}");
            }
        }
    }

    #[test]
    fn the_parse_errors_hold_none_of_the_text() {
        let url = "postgres://gc:pa?ss@db/gc";
        let e = Url::parse(url).unwrap_err().to_string();
        assert_eq!(e, "invalid port number");
        let e = shown_url(url).unwrap_err().to_string();
        assert_eq!(
            e,
            "is not a valid URL (its value is not shown): invalid port number"
        );
    }
}
