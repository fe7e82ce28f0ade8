//! Who may use the console, and how each answer protects the browser.
//!
//! - **A one-time token** in the URL the console prints (as Jupyter's): the first request that
//!   carries it gets the session cookie and is sent on to the same page without it; the token
//!   then opens nothing for a browser without the cookie (a link copied from a terminal's
//!   scrollback or a browser's history is spent). A wrong token opens nothing and spends
//!   nothing.
//! - **The cookie** `gc-console`: `HttpOnly` (no script reads it), `SameSite=Strict` (no other
//!   site's page sends it), `Path=/`; every page and every form needs it.
//! - **A CSRF token** in every form, checked on every POST before anything is read or done.
//! - **The Host header** must name the console's own address (`127.0.0.1:PORT`, `localhost:PORT`):
//!   a page of another site whose name resolves to loopback (DNS rebinding) is refused.
//! - **Headers on every answer**: a Content Security Policy that allows only the console's own
//!   style sheet and forms (no script at all, no frame), `no-referrer` (the token never leaves in
//!   a Referer), `nosniff`, `no-store`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::App;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "gc-console";

/// The Content Security Policy of every answer.
pub(crate) const POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
                          form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The console's secrets: the one-time token, the session cookie, the CSRF token.
pub(crate) struct Gate {
    /// The hosts a request may name.
    hosts: [String; 2],
    token: String,
    opened: AtomicBool,
    cookie: String,
    csrf: String,
}

impl Gate {
    /// New secrets for a console served on `address`.
    pub(crate) fn new(address: SocketAddr) -> Self {
        Self {
            hosts: [address.to_string(), format!("localhost:{}", address.port())],
            token: random(),
            opened: AtomicBool::new(false),
            cookie: random(),
            csrf: random(),
        }
    }

    /// The one-time token of the console's URL.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The CSRF token every form carries.
    pub(crate) fn csrf(&self) -> &str {
        &self.csrf
    }

    /// The fields of a form posted with this console's CSRF token; 403 without it.
    ///
    /// # Errors
    /// The refusal to answer with.
    pub(crate) fn form(&self, body: &[u8]) -> Result<Fields, Box<Response>> {
        let fields = Fields::parse(body);
        match fields.one("csrf") {
            Some(token) if same(token, &self.csrf) => Ok(fields),
            _ => Err(Box::new(refused(
                StatusCode::FORBIDDEN,
                "This form carries no valid CSRF token: nothing was done. Reload the page and \
                 send it again.",
            ))),
        }
    }
}

/// The fields of a form or a query string, in order, repeated keys kept
/// (`session=a&session=b`).
pub(crate) struct Fields(Vec<(String, String)>);

impl Fields {
    /// The fields of `text` (`application/x-www-form-urlencoded`).
    pub(crate) fn parse(text: &[u8]) -> Self {
        Self(form_urlencoded::parse(text).into_owned().collect())
    }

    /// The first value of `key`, if any.
    pub(crate) fn one(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every non-empty value of `key`.
    pub(crate) fn all(&self, key: &str) -> Vec<String> {
        let values = self.0.iter().filter(|(k, v)| k == key && !v.is_empty());
        values.map(|(_, v)| v.clone()).collect()
    }
}

/// The middleware every request passes: the host, then the token or the cookie; the headers of
/// every answer.
pub(crate) async fn check(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let mut answer = admit(&app.gate, request, next).await;
    let headers = answer.headers_mut();
    let set = [
        (header::CONTENT_SECURITY_POLICY, POLICY),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
    answer
}

async fn admit(gate: &Gate, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| gate.hosts.iter().any(|known| known == h)) {
        return refused(
            StatusCode::MISDIRECTED_REQUEST,
            "This request names another host than the console's address: refused.",
        );
    }
    let query = Fields::parse(request.uri().query().unwrap_or_default().as_bytes());
    let opened = has_cookie(request.headers(), &gate.cookie);
    if let Some(token) = query.one("token") {
        // A browser that has the cookie is simply shown the page; otherwise the token opens
        // the console once, and a wrong one opens nothing (nor spends the link).
        let first = !opened
            && same(token, &gate.token)
            && (gate.opened)
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
        if !(opened || first) {
            return refused(
                StatusCode::UNAUTHORIZED,
                "This link has been used already, or is not this console's. Start `gc-cli \
                 console` again for a new one.",
            );
        }
        // Back to the same page without the token; only ever a path of this console.
        let path = request.uri().path();
        let path = if path.starts_with('/') && !path.starts_with("//") {
            path
        } else {
            "/"
        };
        let mut answer =
            (StatusCode::SEE_OTHER, [(header::LOCATION, path.to_owned())]).into_response();
        if first {
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                gate.cookie
            );
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                answer.headers_mut().insert(header::SET_COOKIE, value);
            }
        }
        return answer;
    }
    if !opened {
        return refused(
            StatusCode::UNAUTHORIZED,
            "Open the console with the link `gc-cli console` printed: this browser has no \
             session.",
        );
    }
    next.run(request).await
}

/// Whether `headers` carry the session cookie.
fn has_cookie(headers: &HeaderMap, cookie: &str) -> bool {
    let values = headers.get_all(header::COOKIE).iter();
    let pairs = values
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'));
    pairs
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(name, value)| name == COOKIE && same(value, cookie))
}

/// A refusal, as a small page saying why.
pub(crate) fn refused(status: StatusCode, why: &str) -> Response {
    let page = maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "Refused · gc console" } }
            body { main { h1 { "Refused" } p role="alert" { (why) } } }
        }
    };
    (status, page).into_response()
}

/// Whether two secrets are the same, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    Sha256::digest(a.as_bytes()) == Sha256::digest(b.as_bytes())
}

/// A key of 256 random bits, made for this process: the failed-Pod plans it seals are approved
/// by this console alone.
pub(crate) fn seal_key() -> gc_core::pods::approval::SealKey {
    let key = random();
    gc_core::pods::approval::SealKey::new(key.as_bytes()).expect("64 bytes are a key")
}

/// 256 random bits, in hex.
fn random() -> String {
    let mut bytes = [0u8; 32];
    // Without the operating system's random numbers the console cannot be served safely.
    getrandom::fill(&mut bytes).expect("the operating system's random numbers");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_repeated_keys_and_drop_empty_values() {
        let fields = Fields::parse(b"session=a&csrf=x&session=&session=b%20c");
        assert_eq!(fields.all("session"), ["a", "b c"]);
        assert_eq!(fields.one("csrf"), Some("x"));
        assert_eq!(fields.one("missing"), None);
    }

    #[test]
    fn a_form_without_the_csrf_token_is_refused() {
        let gate = Gate::new("127.0.0.1:1".parse().unwrap());
        let good = format!("csrf={}&session=a", gate.csrf());
        assert!(gate.form(good.as_bytes()).is_ok());
        for body in ["session=a", "csrf=&session=a", "csrf=0000&session=a"] {
            let refused = *gate.form(body.as_bytes()).err().unwrap();
            assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{body}");
        }
    }

    #[test]
    fn only_the_session_cookie_opens() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "other=1; gc-console=abc".parse().unwrap());
        assert!(has_cookie(&headers, "abc"));
        assert!(!has_cookie(&headers, "abd"));
        headers.insert(header::COOKIE, "gc-consolex=abc".parse().unwrap());
        assert!(!has_cookie(&headers, "abc"));
    }
}
