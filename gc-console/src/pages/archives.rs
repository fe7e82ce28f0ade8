//! **Archives**: the receipts of a namespace (of one session, if asked), each archive read back
//! and verified against its receipt's sha256 as the page is drawn (one that does not match is
//! shown refused, in red); one archive's manifest, shown only once verified.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use gc_store::ReceiptQuery;
use maud::html;

use super::{Section, layout, namespace, namespace_select, object, problem, said, size};
use crate::App;
use crate::gate::Fields;

/// Receipts verified on one page, newest first.
const SHOWN: usize = 200;

/// `GET /archives?ns=NS[&session=ID]`
pub(crate) async fn page(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let query = Fields::parse(query.unwrap_or_default().as_bytes());
    let ns = match namespace(&app, query.one("ns")) {
        Ok(ns) => ns,
        Err(refused) => return *refused,
    };
    let session = query.one("session").filter(|s| !s.is_empty());
    let asked = ReceiptQuery {
        namespace: Some(ns),
        session,
        ..ReceiptQuery::default()
    };
    let listed =
        gc_runtime::adapters::archives::list(&app.store, app.cluster_id(), asked, None, None);
    let listed = listed.await;
    let mut rows = Vec::new();
    if let Ok(listed) = &listed {
        for l in listed.iter().take(SHOWN) {
            let checked = gc_runtime::restore::read_receipted(&app.sink, &l.receipt).await;
            rows.push((l, checked.err().map(|e| said(&e))));
        }
    }
    let failed = rows.iter().filter(|(_, e)| e.is_some()).count();
    let body = html! {
        form.filter method="get" action="/archives" role="search" {
            (namespace_select(&app, ns))
            label for="session" { "Session" }
            input #session type="search" name="session" value=(session.unwrap_or_default());
            button type="submit" { "Show" }
        }
        @match &listed {
            Err(e) => (problem("The receipts cannot be listed", &said(&e))),
            Ok(listed) => {
                p.summary { (rows.len() - failed) " verified, " (failed) " failed"
                    @if listed.len() > SHOWN { " (the newest " (SHOWN) " of " (listed.len()) ")" } "." }
                @if failed > 0 { (problem("Tampered or missing archives", "An archive that does not match its receipt is never restored; see each row.")) }
                table {
                    caption { "Archives in " (ns) ", newest first, each checked against its receipt" }
                    thead { tr { th scope="col" { "Object" } th scope="col" { "Session" } th scope="col" { "Archived" } th scope="col" { "Size" } th scope="col" { "Verified" } th scope="col" { "Restore" } } }
                    tbody {
                        @for (l, problem) in &rows {
                            @let r = &l.receipt;
                            @let session = r.session.as_ref().and_then(|s| s.session.as_deref());
                            tr class=[problem.is_some().then_some("tampered")] {
                                th scope="row" { a href={ "/archives/" (r.uid) } { code { (object(r.kind(), &r.name)) } } }
                                td { (session.unwrap_or_default()) }
                                td { time datetime=(l.archived_at) { (l.archived_at) } }
                                td { (size(r.bytes)) }
                                td.long {
                                    @match problem {
                                        None => span.ok { "verified" },
                                        Some(why) => span.failed { "refused: " (why) },
                                    }
                                }
                                td { @if let Some(s) = session { a href={ "/restore?ns=" (ns) "&session=" (s) } { "Restore " (s) "…" } } }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(&app, Section::Archives, &format!("Archives in {ns}"), body).into_response()
}

/// `GET /archives/{uid}`: one archive, verified against its receipt, its manifest shown; an
/// archive that does not match is refused, its bytes not shown.
pub(crate) async fn one(State(app): State<Arc<App>>, Path(uid): Path<String>) -> Response {
    let read = gc_runtime::adapters::archives::read_verified(
        &app.store,
        &app.sink,
        app.cluster_id(),
        &uid,
    )
    .await;
    let body = html! {
        @match &read {
            Err(e) => (problem("Refused: this archive is not shown", &said(&e))),
            Ok((r, bytes)) => {
                @let text = serde_json::from_slice::<serde_json::Value>(bytes).ok()
                    .and_then(|v| serde_json::to_string_pretty(&v).ok())
                    .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned());
                dl.figures {
                    dt { "Object" } dd { code { (object(r.kind(), &r.name)) } " in " (r.namespace) }
                    dt { "uid" } dd { code { (r.uid) } }
                    dt { "sha256" } dd { code { (r.sha256) } " " span.ok { "verified" } }
                    dt { "Size" } dd { (size(r.bytes)) }
                    dt { "Where" } dd { code { (r.uri) } }
                }
                h2 { "Manifest" }
                pre.manifest tabindex="0" { code { (text) } }
            }
        }
    };
    layout(&app, Section::Archives, &format!("Archive {uid}"), body).into_response()
}
