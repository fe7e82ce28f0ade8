//! **Sessions**: the plan of a namespace, session by session, filtered and paged on the server;
//! sessions chosen there are collected now, through the request desk (narrowing only): first as a
//! server-side dry run, shown with exactly the objects a collection would delete, then, once
//! confirmed, for real.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use gc_core::sessions::SessionDecision;
use gc_core::sessions::plan::Judged;
use gc_core::sessions::requests::Requested;
use gc_core::sessions::run::{AuditRecord, Planned};
use gc_runtime::requests::RequestedRun;
use maud::{Markup, html};

use super::{Section, csrf, layout, namespace, namespace_select, object, problem, said};
use crate::App;
use crate::gate::Fields;

/// Sessions on a page.
pub(crate) const PER_PAGE: usize = 50;

/// How long a namespace's plan is shown again (paging, filtering) before it is made anew.
const FRESH: Duration = Duration::from_secs(60);

/// A namespace's latest plan, and when it was made.
pub(crate) struct Cached {
    at: Instant,
    planned: Result<Arc<Planned>, String>,
}

/// The decisions, most consequential first: a session reads as its first.
const DECISIONS: [&str; 8] = [
    "delete",
    "deferred",
    "held",
    "unrequested",
    "kept",
    "protected",
    "excluded",
    "skipped",
];

/// One session of the plan: its id and its objects, judged.
struct Session<'a> {
    id: &'a str,
    objects: Vec<&'a Judged>,
}

impl Session<'_> {
    /// Whether one of its objects was judged against the database.
    fn judged(&self) -> bool {
        let judged = |j: &&Judged| !matches!(j.decision, SessionDecision::Skipped { .. });
        self.objects.iter().any(judged)
    }

    /// Whether the database says it is gone (an object of it is an orphan).
    fn gone(&self) -> bool {
        self.objects.iter().any(|j| {
            matches!(
                j.decision,
                SessionDecision::Delete { .. }
                    | SessionDecision::Held { .. }
                    | SessionDecision::Deferred { .. }
                    | SessionDecision::Unrequested { .. }
            )
        })
    }

    /// The session's most consequential decision.
    fn decision(&self) -> &'static str {
        let words: BTreeSet<_> = self.objects.iter().map(|j| j.decision.name()).collect();
        DECISIONS
            .into_iter()
            .find(|d| words.contains(d))
            .unwrap_or("kept")
    }
}

/// The plan's sessions, by id (objects with no session id under the empty id).
fn sessions(planned: &Planned) -> Vec<Session<'_>> {
    let mut by_id: BTreeMap<&str, Vec<&Judged>> = BTreeMap::new();
    for judged in &planned.plan.judged {
        let id = judged.resource.session.as_deref().unwrap_or_default();
        by_id.entry(id).or_default().push(judged);
    }
    by_id
        .into_iter()
        .map(|(id, objects)| Session { id, objects })
        .collect()
}

/// The page's filter, from its query string.
struct Filter {
    q: String,
    decision: String,
    page: usize,
}

impl Filter {
    fn of(query: &Fields) -> Self {
        Self {
            q: query.one("q").unwrap_or_default().trim().to_owned(),
            decision: query.one("decision").unwrap_or_default().to_owned(),
            page: query
                .one("page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1)
                .max(1),
        }
    }

    fn keeps(&self, session: &Session<'_>) -> bool {
        let q = self.q.to_lowercase();
        let found = q.is_empty()
            || session.id.to_lowercase().contains(&q)
            || (session.objects.iter()).any(|j| j.resource.name.to_lowercase().contains(&q));
        found && (self.decision.is_empty() || session.decision() == self.decision)
    }

    /// This filter's URL on page `page`.
    fn url(&self, ns: &str, page: usize) -> String {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("ns", ns)
            .append_pair("q", &self.q)
            .append_pair("decision", &self.decision)
            .append_pair("page", &page.to_string())
            .finish();
        format!("/sessions?{query}")
    }
}

/// The plan of `ns`: the cached one while fresh (unless `again`), else a new one.
pub(crate) async fn plan_of(
    app: &App,
    ns: &str,
    again: bool,
) -> (Result<Arc<Planned>, String>, Instant) {
    if !again {
        let plans = app
            .plans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(cached) = plans.get(ns).filter(|c| c.at.elapsed() < FRESH) {
            return (cached.planned.clone(), cached.at);
        }
    }
    let planned = app.live.plan(ns, Requested::All, &app.operator).await;
    let planned = planned.map(Arc::new).map_err(|e| said(&e));
    let at = Instant::now();
    let mut plans = app
        .plans
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cached = Cached {
        at,
        planned: planned.clone(),
    };
    plans.insert(ns.to_owned(), cached);
    (planned, at)
}

/// `GET /sessions?ns=NS&q=TEXT&decision=WORD&page=N[&again=1]`
pub(crate) async fn page(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let query = Fields::parse(query.unwrap_or_default().as_bytes());
    let ns = match namespace(&app, query.one("ns")) {
        Ok(ns) => ns,
        Err(refused) => return *refused,
    };
    let filter = Filter::of(&query);
    let (planned, at) = plan_of(&app, ns, query.one("again").is_some()).await;
    let body = html! {
        form.filter method="get" action="/sessions" role="search" {
            (namespace_select(app.configs.keys().map(String::as_str), ns))
            label for="q" { "Search" }
            input #q type="search" name="q" value=(filter.q) placeholder="session id or object name";
            label for="decision" { "Decision" }
            select #decision name="decision" {
                option value="" { "any" }
                @for d in DECISIONS { option value=(d) selected[filter.decision == d] { (d) } }
            }
            button type="submit" { "Filter" }
            " "
            a href={ "/sessions?again=1&ns=" (ns) } { "Plan again" }
            " "
            span.muted { "planned " (at.elapsed().as_secs()) " s ago" }
        }
        @match &planned {
            Err(why) => (problem("No plan", why)),
            Ok(planned) => (plan(&app, ns, planned, &filter)),
        }
    };
    layout(&app, Section::Sessions, &format!("Sessions in {ns}"), body).into_response()
}

fn plan(app: &App, ns: &str, planned: &Planned, filter: &Filter) -> Markup {
    let cfg = &app.configs[ns];
    let all = sessions(planned);
    let shown: Vec<&Session<'_>> = all.iter().filter(|s| filter.keeps(s)).collect();
    let pages = shown.len().div_ceil(PER_PAGE).max(1);
    let page = filter.page.min(pages);
    let on_page = shown.iter().skip((page - 1) * PER_PAGE).take(PER_PAGE);
    let p = &planned.plan;
    // The guard's share, as the plan weighs it: the sessions that look gone among those judged
    // against the database (each id once; skipped and spared objects weigh on neither side).
    let weighed = all
        .iter()
        .filter(|s| !s.id.is_empty() && s.judged())
        .count();
    let gone = all.iter().filter(|s| !s.id.is_empty() && s.gone()).count();
    #[allow(clippy::cast_precision_loss)]
    let share = if weighed == 0 {
        0.0
    } else {
        gone as f64 / weighed as f64
    };
    let guard = [
        ("sessions gone".to_owned(), share * 100.0),
        ("the guard's ratio".to_owned(), cfg.guard_ratio * 100.0),
    ];
    html! {
        section aria-labelledby="figures" {
            h2 #figures { "The plan's figures" }
            dl.figures {
                dt { "Objects scanned" } dd { (p.scanned) }
                dt { "Sessions" } dd { (all.len()) }
                dt { "Orphans" } dd { (p.orphans) }
                dt { "Spared" } dd { (p.spared) }
                dt { "To delete" } dd { (p.deletes().count()) }
                dt { "Guard" } dd { (gone) " of " (weighed) " sessions judged look gone (" (format!("{:.0}", share * 100.0)) "%), " (p.orphans) " objects; it refuses a run above " (format!("{:.0}", cfg.guard_ratio * 100.0)) "% and " (cfg.guard_floor) " objects" }
                dt { "Grace" } dd { (cfg.grace_hours) " h (a collection asked for here: its objects' grace is the request's)" }
                @if !p.unknown_states.is_empty() {
                    dt { "Unknown states" }
                    dd { @for (state, n) in &p.unknown_states { (state) ": " (n) " " } }
                }
                @if !planned.missing_kinds.is_empty() {
                    dt { "Kinds not installed" } dd { (planned.missing_kinds.join(", ")) }
                }
            }
        }
        (crate::plot::bars("guard", "The share of sessions gone, against the guard's ratio", &guard, "%"))
        form method="post" action="/sessions/preview" {
            (csrf(app))
            input type="hidden" name="ns" value=(ns);
            p { (shown.len()) " of " (all.len()) " sessions; page " (page) " of " (pages) "." }
            table {
                caption { "Sessions and their objects, as the next run would judge them" }
                thead { tr { th scope="col" { "Collect" } th scope="col" { "Session" } th scope="col" { "Decision" } th scope="col" { "Objects" } } }
                tbody {
                    @for (i, s) in on_page.enumerate() {
                        tr {
                            td {
                                @if !s.id.is_empty() {
                                    input type="checkbox" name="session" value=(s.id) id={ "pick-" (i) };
                                }
                            }
                            th scope="row" {
                                @if s.id.is_empty() { span.muted { "(no session label)" } }
                                @else { label for={ "pick-" (i) } { (s.id) } }
                            }
                            td { span class={ "decision " (s.decision()) } { (s.decision()) } }
                            td {
                                ul.objects {
                                    @for j in &s.objects {
                                        li {
                                            code { (object(&j.resource.kind, &j.resource.name)) }
                                            " " span class={ "decision " (j.decision.name()) } { (j.decision.name()) }
                                            " " span.reason { (j.decision.reason()) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            nav.pager aria-label="Pages" {
                @if page > 1 { a href=(filter.url(ns, page - 1)) rel="prev" { "Previous page" } }
                @if page < pages { a href=(filter.url(ns, page + 1)) rel="next" { "Next page" } }
            }
            button type="submit" { "Collect now…" }
            span.muted { " A server-side dry run comes first; nothing is deleted before you confirm." }
        }
    }
}

/// The namespace and the sessions a form posted with the CSRF token names.
fn chosen<'a>(app: &'a App, body: &[u8]) -> Result<(&'a str, BTreeSet<String>), Box<Response>> {
    let fields = app.gate.form(body)?;
    let ns = namespace(app, fields.one("ns"))?;
    let sessions: BTreeSet<String> = fields.all("session").into_iter().collect();
    if sessions.is_empty() {
        let why = "Choose at least one session to collect: nothing was done.";
        let body = problem("No session chosen", why);
        let page = layout(app, Section::Sessions, "Collect now", body);
        return Err(Box::new(
            (axum::http::StatusCode::BAD_REQUEST, page).into_response(),
        ));
    }
    Ok((ns, sessions))
}

/// `POST /sessions/preview`: the chosen sessions collected as a server-side dry run, and the
/// confirmation of exactly the objects a collection would delete.
pub(crate) async fn preview(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let (ns, sessions) = match chosen(&app, &body) {
        Ok(chosen) => chosen,
        Err(refused) => return *refused,
    };
    let asked = Requested::Ids(sessions.clone());
    let run = app.dry.collect(ns, asked, &app.operator).await;
    let body = html! {
        @match &run {
            Err(refused) => (problem("The dry run was refused", &said(&refused))),
            Ok(run) => {
                (records(run, "What a collection would do (server-side dry run)"))
                @let deletes: Vec<&AuditRecord> = run.records.iter().filter(|r| r.judged.decision.name() == "delete").collect();
                @if !run.state.is_final() {
                    (problem("The dry run has not ended", "It is still queued or running: try again in a moment. Nothing was deleted."))
                } @else if run.error.is_some() || deletes.is_empty() {
                    p { "Nothing to confirm: a collection would delete nothing of these sessions now." }
                } @else {
                    form method="post" action="/sessions/collect" {
                        (csrf(&app))
                        input type="hidden" name="ns" value=(ns);
                        @for s in &sessions { input type="hidden" name="session" value=(s); }
                        h2 { "Confirm" }
                        p { "Each of these " (deletes.len()) " objects is archived, its archive verified, then deleted, fenced on its uid and resourceVersion (one changed since is skipped):" }
                        ul.objects {
                            @for r in &deletes {
                                li { code { (object(&r.judged.resource.kind, &r.judged.resource.name)) } " of session " (r.judged.resource.session.as_deref().unwrap_or_default()) }
                            }
                        }
                        button type="submit" { "Collect " (sessions.len()) " session(s) now" }
                        " " a href={ "/sessions?ns=" (ns) } { "Cancel" }
                    }
                }
            }
        }
    };
    layout(
        &app,
        Section::Sessions,
        &format!("Collect now in {ns}"),
        body,
    )
    .into_response()
}

/// `POST /sessions/collect`: the chosen sessions collected, under the namespace's Lease.
pub(crate) async fn collect(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let (ns, sessions) = match chosen(&app, &body) {
        Ok(chosen) => chosen,
        Err(refused) => return *refused,
    };
    let run = app
        .live
        .collect(ns, Requested::Ids(sessions.clone()), &app.operator)
        .await;
    (app.plans
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner))
    .remove(ns);
    let body = html! {
        @match &run {
            Err(refused) => (problem("The collection was refused", &said(&refused))),
            Ok(run) => {
                (records(run, "What the collection did"))
                p { "Archives of: "
                    @for s in &sessions { a href=(super::link("/archives", &[("ns", ns), ("session", s)])) { (s) } " " }
                }
            }
        }
        p { a href={ "/sessions?ns=" (ns) } { "Back to the sessions of " (ns) } }
    };
    layout(&app, Section::Sessions, &format!("Collected in {ns}"), body).into_response()
}

/// A requested run's records as a table, with its state and error.
fn records(run: &RequestedRun, caption: &str) -> Markup {
    let state = serde_json::to_value(run.state).unwrap_or_default();
    html! {
        p { "Run " code { (run.id) } ": " strong.state { (state.as_str().unwrap_or_default()) } ", asked for by " (run.requested_by) "." }
        @if let Some(error) = &run.error { (problem("The run did not complete", error)) }
        @if !run.state.is_final() {
            (problem("Still running", "The run has not ended: its records are in the audit log, and the next page's plan shows what it did."))
        }
        table {
            caption { (caption) }
            thead { tr { th scope="col" { "Object" } th scope="col" { "Session" } th scope="col" { "Decision" } th scope="col" { "Result" } th scope="col" { "Reason" } } }
            tbody {
                @for r in &run.records {
                    @let result = r.result.as_ref().map(ToString::to_string).unwrap_or_default();
                    tr {
                        th scope="row" { code { (object(&r.judged.resource.kind, &r.judged.resource.name)) } }
                        td { (r.judged.resource.session.as_deref().unwrap_or_default()) }
                        td { span class={ "decision " (r.judged.decision.name()) } { (r.judged.decision.name()) } }
                        td class=[r.result.as_ref().is_some_and(|d| d.is_failure()).then_some("failed")] { (result) }
                        td { (r.judged.decision.reason()) }
                    }
                }
            }
        }
    }
}
