//! The console's pages: each a URL an operator can paste, drawn on the server from the types the
//! command line prints, in one layout (a skip link, the sections, who is signed in).

pub(crate) mod archives;
pub(crate) mod overview;
pub(crate) mod pods;
pub(crate) mod restore;
pub(crate) mod sessions;

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, html};

use crate::App;

/// The console's style sheet, in the binary.
const STYLE: &str = include_str!("../assets/console.css");

/// Every page, behind the gate.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(overview::page))
        .route("/sessions", get(sessions::page))
        .route("/sessions/preview", axum::routing::post(sessions::preview))
        .route("/sessions/collect", axum::routing::post(sessions::collect))
        .route("/pods", get(pods::page))
        .route("/pods/approve", axum::routing::post(pods::approve))
        .route("/archives", get(archives::page))
        .route("/archives/{uid}", get(archives::one))
        .route("/restore", get(restore::preview).post(restore::restore))
        .route("/console.css", get(style))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            crate::gate::check,
        ))
        .with_state(app)
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

async fn not_found() -> Response {
    let page = html! { (DOCTYPE) html lang="en" { head { meta charset="utf-8"; title { "Not found · gc console" } }
    body { main { h1 { "Not found" } p { a href="/" { "Back to the overview" } } } } } };
    (StatusCode::NOT_FOUND, page).into_response()
}

/// The sections of the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Overview,
    Sessions,
    Pods,
    Archives,
    Restore,
}

impl Section {
    const ALL: [(Self, &'static str, &'static str); 5] = [
        (Self::Overview, "/", "Overview"),
        (Self::Sessions, "/sessions", "Sessions"),
        (Self::Pods, "/pods", "Failed Pods"),
        (Self::Archives, "/archives", "Archives"),
        (Self::Restore, "/restore", "Restore"),
    ];
}

/// A whole page: the layout around `body`.
pub(crate) fn layout(app: &App, section: Section, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · gc console" }
                link rel="stylesheet" href="/console.css";
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                header {
                    span.brand { "gc console" }
                    nav aria-label="Sections" {
                        ul {
                            @for (s, href, name) in Section::ALL {
                                li { a href=(href) aria-current=[(s == section).then_some("page")] { (name) } }
                            }
                        }
                    }
                    p.who {
                        "Acting as " strong { (app.operator) }
                        @if !app.groups.is_empty() {
                            span.groups { " (" (app.groups.join(", ")) ")" }
                        }
                    }
                }
                main #main tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// An error and its causes, the options it names shown as `gc-cli`'s flags.
pub(crate) fn said(error: &impl std::fmt::Display) -> String {
    gc_output::options::shown(&format!("{error:#}"))
}

/// A box saying that something failed or was refused, and why.
pub(crate) fn problem(title: &str, why: &str) -> Markup {
    html! { div.problem role="alert" { strong { (title) } p { (why) } } }
}

/// The hidden CSRF field of every form.
pub(crate) fn csrf(app: &App) -> Markup {
    html! { input type="hidden" name="csrf" value=(app.gate.csrf()); }
}

/// A select of the namespaces `served`, `current` chosen.
pub(crate) fn namespace_select<'a>(
    served: impl IntoIterator<Item = &'a str>,
    current: &str,
) -> Markup {
    html! {
        label for="ns" { "Namespace" }
        select #ns name="ns" {
            @for ns in served {
                option value=(ns) selected[ns == current] { (ns) }
            }
        }
    }
}

/// The namespace a query names, if served; else the first served.
pub(crate) fn namespace<'a>(app: &'a App, asked: Option<&str>) -> Result<&'a str, Box<Response>> {
    match asked {
        Some(ns) => app
            .configs
            .get_key_value(ns)
            .map(|(k, _)| k.as_str())
            .ok_or_else(|| {
                Box::new(crate::gate::refused(
                    StatusCode::NOT_FOUND,
                    &format!("Namespace {ns} is not one this console serves (see `-n`, `-A`)."),
                ))
            }),
        None => Ok(app.configs.keys().next().map_or("", String::as_str)),
    }
}

/// `path` with the query `pairs`, each encoded as a form encodes it.
pub(crate) fn link(path: &str, pairs: &[(&str, &str)]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.extend_pairs(pairs);
    format!("{path}?{}", query.finish())
}

/// `bytes` as people read sizes (`1.2 MiB`).
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `Kind/name`, as kubectl names an object.
pub(crate) fn object(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(super::size(0), "0 B");
        assert_eq!(super::size(1023), "1023 B");
        assert_eq!(super::size(1536), "1.5 KiB");
        assert_eq!(super::size(5 * 1024 * 1024), "5.0 MiB");
    }
}
