//! **Failed Pods**: the failed-Pod collector's plan of a namespace, each Pod with its state and
//! reason; **Approve** applies exactly the plan shown. The page carries the plan sealed as
//! `plan pods --out` seals it (each target's uid and resourceVersion, the policy, a lifetime)
//! and naming the operator as its approver, with a key of this console's own: the approval
//! opens it as `apply` does, and each target walks the fenced protocol, so a Pod that changed
//! since the page was drawn is skipped and said, never deleted.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use gc_core::PodConfig;
use gc_core::pods::approval::PlanFile;
use gc_runtime::{Builder, Settings};
use maud::{Markup, html};

use super::{Section, csrf, layout, problem, said};
use crate::App;
use crate::gate::{Fields, refused};

/// How long an approval of a page stays valid.
const LIFETIME: u32 = 15 * 60;

/// The failed-Pod namespace a query or a form names, if served; else the first.
fn namespace<'a>(
    app: &'a App,
    asked: Option<&str>,
) -> Result<(&'a str, &'a PodConfig), Box<Response>> {
    let found = match asked {
        Some(ns) => app.pods.get_key_value(ns),
        None => app.pods.iter().next(),
    };
    found.map(|(ns, cfg)| (ns.as_str(), cfg)).ok_or_else(|| {
        let why = match asked {
            Some(ns) => format!("Namespace {ns} is not one whose failed Pods this console shows."),
            None => "No namespace of failed Pods: start the console with --pods-namespace NS."
                .to_owned(),
        };
        Box::new(refused(StatusCode::NOT_FOUND, &why))
    })
}

/// The instant the console judges at.
fn now(app: &App) -> f64 {
    app.settings.now.unwrap_or_else(gc_runtime::clock::now)
}

/// `GET /pods?ns=NS`
pub(crate) async fn page(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let query = Fields::parse(query.unwrap_or_default().as_bytes());
    let (ns, cfg) = match namespace(&app, query.one("ns")) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let settings = Settings {
        live: false,
        ..app.settings.clone()
    };
    let planner = Builder::new(settings).cluster(app.cluster.clone());
    let planner = planner.store(Arc::new(app.store.clone())).pods();
    let now = now(&app);
    let planned = match planner {
        // First observations are recorded in gc's store as `plan pods` records them: at the
        // clock's time only (one dated at a fixed `--now` would move retention).
        Ok(planner) => {
            planner
                .plan(cfg, None, now, app.settings.now.is_none())
                .await
        }
        Err(e) => Err(e.into()),
    };
    let body = html! {
        form.filter method="get" action="/pods" {
            (super::namespace_select(app.pods.keys().map(String::as_str), ns))
            button type="submit" { "Plan" }
        }
        @match &planned {
            Err(e) => (problem("No plan", &said(e))),
            Ok(plan) => {
                @let sealed = PlanFile::seal(plan, cfg, now, LIFETIME, Some(&app.seal)).approved(&app.operator, Some(&app.seal));
                dl.figures {
                    dt { "Pods looked at" } dd { (plan.decisions.len()) }
                    dt { "Targets" } dd { (plan.targets.len()) " (at most " (cfg.max_pods) " a run)" }
                    dt { "Held" } dd { (plan.held) }
                    dt { "Deferred" } dd { (plan.deferred) }
                    dt { "Retention" } dd { (cfg.retention_seconds) " s" }
                }
                table {
                    caption { "Failed Pods of " (ns) ", as planned now" }
                    thead { tr { th scope="col" { "Pod" } th scope="col" { "State" } th scope="col" { "Reason" } } }
                    tbody {
                        @for d in plan.decisions.iter().filter(|d| !matches!(d.decision, gc_core::pods::plan::Decision::NotEligible { .. })) {
                            @let (state, reason) = gc_output::pods::decision_cells(&d.decision, cfg);
                            tr {
                                th scope="row" { code { "pod/" (d.name.as_deref().unwrap_or_default()) } }
                                td { span class={ "decision " (state) } { (state) } }
                                td { (reason) }
                            }
                        }
                    }
                }
                @if plan.targets.is_empty() {
                    p { "Nothing to approve: no Pod is due now." }
                } @else {
                    form method="post" action="/pods/approve" {
                        (csrf(&app))
                        input type="hidden" name="ns" value=(ns);
                        input type="hidden" name="plan" value=(sealed.to_json());
                        p { "Approving archives, verifies, then removes each of these " (plan.targets.len()) " Pods as planned: bound to its uid and resourceVersion; one that changed since is skipped. The approval is valid for " (LIFETIME / 60) " minutes." }
                        ul.objects { @for t in &plan.targets { li { code { "pod/" (t.name.as_str().unwrap_or_default()) } " " span.muted { "uid " (t.uid) ", resourceVersion " (t.resource_version) } } } }
                        button type="submit" { "Approve and apply" }
                    }
                }
            }
        }
    };
    layout(&app, Section::Pods, &format!("Failed Pods in {ns}"), body).into_response()
}

/// `POST /pods/approve`: the plan the page showed, opened as `apply` opens a sealed plan, then
/// applied, as the operator.
pub(crate) async fn approve(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let fields = match app.gate.form(&body) {
        Ok(fields) => fields,
        Err(refused) => return *refused,
    };
    let (ns, cfg) = match namespace(&app, fields.one("ns")) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let text = fields.one("plan").unwrap_or_default();
    let opened = PlanFile::open(text.as_bytes(), cfg, Some(&app.seal), now(&app));
    let body = match opened {
        Err(e) => problem(
            "Refused: this approval is not of a plan this console showed",
            &said(&e),
        ),
        Ok(plan) if plan.approved_by.as_deref() != Some(app.operator.as_str()) => {
            problem("Refused", "This plan names another approver.")
        }
        Ok(plan) => {
            // The desk's own task: a browser that goes away does not cut the run, and a stop
            // waits for it.
            let (run, ns) = (Arc::clone(&app), ns.to_owned());
            let task = app
                .live
                .spawn(async move { applied(&run, &ns, plan).await });
            task.await
                .unwrap_or_else(|e| problem("The run ended without an answer", &e.to_string()))
        }
    };
    layout(&app, Section::Pods, &format!("Approved in {ns}"), body).into_response()
}

/// The run of the approved `plan` and what it did to each target.
async fn applied(app: &App, ns: &str, plan: PlanFile) -> Markup {
    tracing::info!(
        namespace = ns,
        approved_by = app.operator,
        targets = plan.targets.len(),
        "failed-Pod plan approved in the console"
    );
    let settings = Settings {
        live: true,
        ..app.settings.clone()
    };
    let collector = Builder::new(settings).cluster(app.cluster.clone());
    let collector = collector
        .store(Arc::new(app.store.clone()))
        .sink(app.sink.clone())
        .pods();
    let collector = match collector {
        Ok(collector) => collector,
        Err(e) => return problem("Nothing was applied", &said(&gc_runtime::Error::from(e))),
    };
    let inputs = |n: &str| match app.pods.get(n) {
        Some(cfg) => Ok(cfg.clone()),
        None => Err(gc_core::input::InputError::Invalid {
            input: "namespace",
            value: n.to_owned(),
            rule: "not a namespace of failed Pods this console shows",
        }),
    };
    let runs = match collector.apply(&[plan], None, None, inputs).await {
        Ok(runs) => runs,
        Err(e) => return problem("Nothing was applied", &said(&e)),
    };
    html! {
        @for run in &runs {
            @if let Some(failure) = &run.failure { (problem("The run did not complete", &said(&failure.error))) }
            @if let Some(report) = &run.report {
                table {
                    caption { "What the approval did in " (run.namespace) }
                    thead { tr { th scope="col" { "Pod" } th scope="col" { "Result" } th scope="col" { "What happened" } } }
                    tbody {
                        @for r in report.recovered.iter().chain(&report.results) {
                            @let (result, said) = gc_output::pods::result_cells(&r.outcome);
                            tr {
                                th scope="row" { code { "pod/" (r.name) } }
                                td class=[(result == "FAILED").then_some("failed")] { (result) }
                                td.long { (said) }
                            }
                        }
                    }
                }
            }
        }
        p { a href={ "/pods?ns=" (ns) } { "Plan " (ns) " again" } " · " a href={ "/archives?ns=" (ns) } { "Its archives" } }
    }
}
