//! HTTP for the Pushgateway and the webhook: a bounded agent, and what of a URL messages show
//! (a whole URL is shown as `gc_core::shown::shown_url` shows it).

use std::time::Duration;

/// How long one Pushgateway or webhook call may take in all, connecting included.
pub(super) const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// An HTTP agent whose every call gives up after [`HTTP_TIMEOUT`].
pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(HTTP_TIMEOUT))
        .timeout_global(Some(HTTP_TIMEOUT))
        .build()
        .into()
}

/// `scheme://host[:port]` of an `http` or `https` URL, for messages; otherwise what is wrong
/// with it (never the URL itself).
pub(super) fn endpoint(url: &str) -> Result<String, &'static str> {
    let Some((scheme, _)) = url.split_once("://") else {
        return Err("has no scheme (it must start with https:// or http://)");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err("has a scheme other than https:// or http://");
    }
    let uri: ureq::http::Uri = url.parse().map_err(|_| "is not a valid URL")?;
    let host = uri.host().filter(|h| !h.is_empty()).ok_or("has no host")?;
    let scheme = scheme.to_ascii_lowercase();
    Ok(match uri.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

/// What went wrong with a call, without anything of its URL (some of ureq's messages quote it).
pub(super) fn describe(e: &ureq::Error) -> String {
    use ureq::Error as E;
    match e {
        E::StatusCode(code) => format!("the server answered HTTP status {code}"),
        E::Timeout(_) => format!(
            "no answer within {} seconds (timed out)",
            HTTP_TIMEOUT.as_secs()
        ),
        E::Io(io) => format!("I/O error: {}", io.kind()),
        E::HostNotFound => "host not found".into(),
        E::ConnectionFailed => "connection failed".into(),
        E::TooManyRedirects | E::RedirectFailed => "redirect failed".into(),
        E::Tls(_) | E::Rustls(_) | E::Pem(_) | E::TlsRequired => format!("TLS: {e}"),
        _ => "the request failed (details not shown: they may quote the URL)".into(),
    }
}
