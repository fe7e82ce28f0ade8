//! **Archives**: the receipts of a namespace (of one session, if asked), each archive read back
//! and verified against its receipt's sha256 as the page is drawn (one that does not match is
//! shown refused, in red); one archive's manifest, shown only once verified.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use gc_store::ReceiptQuery;
use maud::html;

use super::{Section, layout, object, problem, said, size};
use crate::App;
use crate::gate::Fields;

/// Receipts verified on one page, newest first.
const SHOWN: usize = 200;

/// The refusal of an archive of a namespace the console does not serve.
fn unserved(ns: &str) -> Box<Response> {
    let why =
        format!("Namespace {ns} is not one this console serves (see `-n`, `--pods-namespace`).");
    Box::new(crate::gate::refused(
        axum::http::StatusCode::NOT_FOUND,
        &why,
    ))
}

/// `GET /archives?ns=NS[&session=ID]`
pub(crate) async fn page(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let query = Fields::parse(query.unwrap_or_default().as_bytes());
    let asked = query.one("ns");
    let ns = match asked.map(|ns| app.namespaces().contains(ns)) {
        Some(true) | None => asked
            .or_else(|| app.namespaces().first().copied())
            .unwrap_or_default(),
        Some(false) => return *unserved(asked.unwrap_or_default()),
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
            (super::namespace_select(app.namespaces(), ns))
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
                                td { @if let Some(s) = session { a href=(super::link("/restore", &[("ns", ns), ("session", s)])) { "Restore " (s) "…" } } }
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
    if let Ok((r, _)) = &read
        && !app.namespaces().contains(r.namespace.as_str())
    {
        return *unserved(&r.namespace);
    }
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
                (live(&app, r, bytes).await)
            }
        }
    };
    layout(&app, Section::Archives, &format!("Archive {uid}"), body).into_response()
}

/// The archived object beside the live one of the same name, when there is one: the archive's
/// fields (and its metadata's), line by line, as the live object has them now.
async fn live(app: &App, receipt: &gc_core::ports::Receipt, bytes: &[u8]) -> maud::Markup {
    use gc_core::ports::{Cluster as _, ObjectCluster as _};
    let (ns, name) = (receipt.namespace.as_str(), receipt.name.as_str());
    let found = match &receipt.session {
        None => app.cluster.get_pod(ns, name).await,
        Some(s) => {
            let kinds = app.configs.values().flat_map(|c| &c.kinds);
            let kind = kinds
                .into_iter()
                .find(|k| k.kind == s.kind && k.api_version() == s.api_version);
            match kind {
                Some(kind) => app.cluster.get_object(kind, ns, name).await,
                None => {
                    return html! { p.muted { "Its kind is not one this console scans: no live object to compare." } };
                }
            }
        }
    };
    let archive: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    // A session object's archive holds its manifest beside where it came from; a Pod's is the
    // Pod's own fields.
    let archived = archive.get("manifest").unwrap_or(&archive);
    let live = match found {
        Err(e) => return problem("The live object cannot be read", &said(&e)),
        Ok(None) => {
            return html! { h2 { "Live object" } p { "None: " code { (object(receipt.kind(), name)) } " does not exist now." } };
        }
        Ok(Some(live)) => serde_json::from_slice::<serde_json::Value>(&live).unwrap_or_default(),
    };
    let shown = projected(archived, &live);
    let (before, after) = (pretty(archived), pretty(&shown));
    let diff = similar::TextDiff::from_lines(&before, &after);
    html! {
        h2 { "Compared with the live object" }
        @if before == after {
            p { "The live " code { (object(receipt.kind(), name)) } " has every archived field as archived." }
        } @else {
            p { "Lines starting " code { "-" } " are the archive's; " code { "+" } " the live object's (its fields the archive has)." }
            pre.manifest.diff tabindex="0" {
                @for change in diff.iter_all_changes() {
                    @let (sign, class) = match change.tag() {
                        similar::ChangeTag::Delete => ("-", "del"),
                        similar::ChangeTag::Insert => ("+", "ins"),
                        similar::ChangeTag::Equal => (" ", "same"),
                    };
                    span class=(class) { (sign) " " (change.value().trim_end_matches('\n')) }
                }
            }
        }
    }
}

/// `live` with only the fields `archived` has, at the top and in `metadata`.
fn projected(archived: &serde_json::Value, live: &serde_json::Value) -> serde_json::Value {
    let mut shown = serde_json::Map::new();
    for (key, value) in archived.as_object().into_iter().flatten() {
        let now = match (key.as_str(), value.as_object()) {
            ("metadata", Some(meta)) => {
                let fields = meta
                    .keys()
                    .filter_map(|k| Some((k.clone(), live["metadata"].get(k)?.clone())));
                serde_json::Value::Object(fields.collect())
            }
            _ => live.get(key).cloned().unwrap_or(serde_json::Value::Null),
        };
        shown.insert(key.clone(), now);
    }
    serde_json::Value::Object(shown)
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn the_live_object_is_shown_by_the_archived_fields() {
        let archived = json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"port": 1}});
        let live = json!({"kind": "Service", "metadata": {"name": "a", "uid": "u", "labels": {"x": "2"}}, "spec": {"port": 1}, "status": {}});
        let shown = super::projected(&archived, &live);
        assert_eq!(
            shown,
            json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "2"}}, "spec": {"port": 1}})
        );
    }
}
