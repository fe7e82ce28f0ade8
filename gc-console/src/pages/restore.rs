//! **Restore**: a session's archived objects, with what restoring them would do (every create a
//! server-side dry run: created, exists, conflict, the kept volume), then the restore itself, as
//! `gc-cli restore sessions` does it, as the operator; each object's result, and one audit line
//! per object naming the operator.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use gc_runtime::adapters::KubeCluster;
use gc_runtime::requests::restores::RestoreAsked;
use gc_runtime::restore::Restored;
use maud::{Markup, html};

use super::{Section, csrf, layout, namespace, namespace_select, object, problem, said};
use crate::App;
use crate::gate::Fields;

/// The operator, as the account a restore acts as: the console's own credentials.
struct Operator<'a>(&'a App);

#[async_trait::async_trait]
impl gc_core::ports::RestoreAccount<KubeCluster> for Operator<'_> {
    fn name(&self) -> &str {
        &self.0.operator
    }
    async fn act(&self) -> Result<KubeCluster, gc_core::ports::ClusterError> {
        Ok(self.0.cluster.clone())
    }
}

/// The restore of `session` in `ns` through the request desk, as the operator: live, or every
/// create a server-side dry run. It runs as the desk's own task (a browser that goes away does
/// not cut it between two creates), one at a time per session, and writes its audit lines.
async fn restored(app: &App, ns: &str, session: &str, live: bool) -> Result<Vec<Restored>, String> {
    let asked = RestoreAsked {
        namespace: ns.to_owned(),
        session: session.to_owned(),
        dry_run: !live,
        bind_wait: crate::BIND_WAIT,
    };
    let restored = app.live.restore(&Operator(app), asked, &app.operator).await;
    restored.map(|r| r.objects).map_err(|e| said(&e))
}

/// `GET /restore?ns=NS&session=ID`: what a restore of the session would do, and its
/// confirmation.
pub(crate) async fn preview(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let query = Fields::parse(query.unwrap_or_default().as_bytes());
    let ns = match namespace(&app, query.one("ns")) {
        Ok(ns) => ns,
        Err(refused) => return *refused,
    };
    let session = query.one("session").unwrap_or_default().trim();
    let chooser = html! {
        form.filter method="get" action="/restore" {
            (namespace_select(app.configs.keys().map(String::as_str), ns))
            label for="session" { "Session" }
            input #session type="text" name="session" value=(session) required;
            button type="submit" { "Show what a restore would do" }
        }
    };
    if session.is_empty() {
        return layout(&app, Section::Restore, "Restore a session", chooser).into_response();
    }
    let would = restored(&app, ns, session, false).await;
    let body = html! {
        (chooser)
        @match &would {
            Err(e) => (problem("No restore", e)),
            Ok(would) => {
                (table(would, "What a restore would do (server-side dry run)"))
                @if would.iter().any(|r| r.failed()) {
                    p { "A session whose archives fail verification, or whose objects conflict, restores nothing: nothing to confirm." }
                } @else if !would.iter().any(|r| r.result.to_string() == "would create") {
                    p { "Every object of this session exists: nothing to restore." }
                } @else {
                    form method="post" action="/restore" {
                        (csrf(&app))
                        input type="hidden" name="ns" value=(ns);
                        input type="hidden" name="session" value=(session);
                        button type="submit" { "Restore session " (session) }
                    }
                }
            }
        }
    };
    layout(&app, Section::Restore, &format!("Restore {session}"), body).into_response()
}

/// `POST /restore`: the session restored, as the operator.
pub(crate) async fn restore(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let fields = match app.gate.form(&body) {
        Ok(fields) => fields,
        Err(refused) => return *refused,
    };
    let ns = match namespace(&app, fields.one("ns")) {
        Ok(ns) => ns,
        Err(refused) => return *refused,
    };
    let session = fields.one("session").unwrap_or_default().trim();
    let done = restored(&app, ns, session, true).await;
    app.forget_plan(ns);
    let body = html! {
        @match &done {
            Err(e) => (problem("The restore failed", e)),
            Ok(done) => (table(done, "What the restore did")),
        }
        p { a href=(super::link("/archives", &[("ns", ns), ("session", session)])) { "The archives of " (session) } }
    };
    layout(&app, Section::Restore, &format!("Restored {session}"), body).into_response()
}

fn table(restored: &[Restored], caption: &str) -> Markup {
    html! {
        table {
            caption { (caption) }
            thead { tr { th scope="col" { "Object" } th scope="col" { "Result" } th scope="col" { "Note" } } }
            tbody {
                @for r in restored {
                    tr {
                        th scope="row" { code { (object(&r.kind, &r.name)) } }
                        td class=[r.failed().then_some("failed")] { (r.result.to_string()) }
                        td { (r.note.as_deref().unwrap_or_default()) }
                    }
                }
            }
        }
    }
}
