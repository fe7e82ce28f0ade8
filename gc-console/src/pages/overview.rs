//! **Overview**: each namespace served, who holds its run lock now, its archives (how many, how
//! large), the objects each recent run deleted (from the receipts), and the volumes gc keeps with
//! the time left in their window (from their records on the cluster), read as the page is drawn.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use gc_core::ports::{ClusterError, LeaseHolder};
use gc_core::sessions::SessionConfig;
use gc_core::sessions::volumes::RETAINED_LABEL;
use gc_store::ReceiptQuery;
use maud::{Markup, html};

use super::{Section, layout, problem, said, size};
use crate::App;
use crate::plot::bars;

/// Runs shown in the plot of deletes per run.
const RUNS: usize = 12;

/// `GET /`
pub(crate) async fn page(State(app): State<Arc<App>>) -> Response {
    let volumes = labelled(&app).await;
    let mut sections = Vec::new();
    for (i, (ns, cfg)) in app.configs.iter().enumerate() {
        sections.push(namespace(&app, i, ns, cfg, &volumes).await);
    }
    for (i, ns) in app.pods.keys().enumerate() {
        sections.push(pods(&app, i, ns).await);
    }
    let body = html! {
        p { "Cluster " code { (app.cluster_id()) } ", " (app.namespaces().len()) " namespace(s). "
            "Every action here is done as " strong { (app.operator) } ": the API server decides what you may do." }
        @for section in &sections { (section) }
    };
    layout(&app, Section::Overview, "Overview", body).into_response()
}

/// A namespace of failed Pods: who holds the failed-Pod collector's run lock, and the Pods'
/// archives.
async fn pods(app: &App, i: usize, ns: &str) -> Markup {
    use gc_core::ports::Lock as _;
    let holder = app.cluster.holder(ns, gc_runtime::pods::PODS_LOCK).await;
    let asked = ReceiptQuery {
        namespace: Some(ns),
        kind: Some("Pod"),
        ..ReceiptQuery::default()
    };
    let listed =
        gc_runtime::adapters::archives::list(&app.store, app.cluster_id(), asked, None, None);
    html! {
        section aria-labelledby={ "pods-" (i) } {
            h2 id={ "pods-" (i) } { "Failed Pods in " (ns) }
            p {
                a href={ "/pods?ns=" (ns) } { "Failed Pods" } " · "
                a href={ "/archives?ns=" (ns) } { "Archives" }
            }
            dl.figures {
                dt { "Run lock" }
                dd { (lock(&holder)) }
                dt { "Pods archived" }
                dd {
                    @match &listed.await {
                        Ok(listed) => (archived(listed)),
                        Err(e) => span.failed { "cannot be listed: " (said(e)) },
                    }
                }
            }
        }
    }
}

async fn namespace(
    app: &App,
    i: usize,
    ns: &str,
    cfg: &SessionConfig,
    volumes: &Result<Vec<serde_json::Value>, String>,
) -> Markup {
    let holder = app.live.lock_holder(ns).await;
    let asked = ReceiptQuery {
        namespace: Some(ns),
        ..ReceiptQuery::default()
    };
    let listed =
        gc_runtime::adapters::archives::list(&app.store, app.cluster_id(), asked, None, None);
    let listed = listed.await;
    let now = app.settings.now.unwrap_or_else(gc_runtime::clock::now);
    let kept = volumes.as_ref().map(|v| kept(v, cfg, now));
    html! {
        section aria-labelledby={ "ns-" (i) } {
            h2 id={ "ns-" (i) } { "Namespace " (ns) }
            p {
                a href={ "/sessions?ns=" (ns) } { "Sessions" } " · "
                a href={ "/archives?ns=" (ns) } { "Archives" }
            }
            dl.figures {
                dt { "Run lock" }
                dd { (lock(&holder)) }
                @if let Ok(listed) = &listed {
                    dt { "Archives" }
                    dd { (archived(listed)) }
                }
            }
            @match &listed {
                Err(e) => (problem("The receipts cannot be listed", &said(&e))),
                Ok(listed) => {
                    @let runs = per_run(listed);
                    @if !runs.is_empty() {
                        h3 { "Objects archived and deleted per run" }
                        (bars(&format!("runs-{i}"), &format!("Objects deleted by each of the last runs in {ns}"), &runs, "objects"))
                    }
                }
            }
            @match &kept {
                Err(why) => (problem("The kept volumes cannot be listed", why)),
                Ok(kept) if kept.is_empty() => {},
                Ok(kept) => {
                    h3 { "Kept volumes: days left in their window" }
                    (bars(&format!("kept-{i}"), &format!("Days left before each volume kept in {ns} gets its reclaim policy back"), kept, "days"))
                }
            }
        }
    }
}

/// Who holds a run lock, as the figures say it.
fn lock(holder: &Result<Option<LeaseHolder>, ClusterError>) -> Markup {
    html! {
        @match holder {
            Ok(Some(h)) => { "held by " code { (h.holder) } }
            Ok(None) => "free",
            Err(e) => span.failed { "cannot be read: " (said(e)) },
        }
    }
}

/// How many archives `listed` names, and their size.
fn archived(listed: &[gc_store::ListedReceipt]) -> String {
    let bytes = listed.iter().map(|l| l.receipt.bytes).sum();
    format!("{}, {}", listed.len(), size(bytes))
}

/// The objects each of the last [`RUNS`] runs archived (by the run's instant), oldest first.
fn per_run(listed: &[gc_store::ListedReceipt]) -> Vec<(String, f64)> {
    let mut runs: BTreeMap<&str, f64> = BTreeMap::new();
    for l in listed {
        if let Some(s) = &l.receipt.session {
            *runs.entry(s.run_at.as_str()).or_default() += 1.0;
        }
    }
    let skip = runs.len().saturating_sub(RUNS);
    let runs = runs.into_iter().skip(skip);
    runs.map(|(at, n)| (at.to_owned(), n)).collect()
}

/// The PersistentVolumes that carry gc's label of this cluster, listed once for the page.
async fn labelled(app: &App) -> Result<Vec<serde_json::Value>, String> {
    use gc_core::ports::Volumes as _;
    let selector = format!("{RETAINED_LABEL}={}", app.cluster_id());
    gc_core::pages::collect(
        |token: Option<String>| {
            let selector = selector.clone();
            async move {
                (app.cluster)
                    .list_volumes(&selector, gc_core::pages::PAGE_SIZE, token.as_deref())
                    .await
            }
        },
        |item| Ok(Some(item.clone())),
    )
    .await
    .map_err(|e| said(&e))
}

/// The volumes gc keeps for the claims it deleted in `cfg`'s namespace (its record on each,
/// read as the review reads it), with the days left in each one's window, soonest first: kept,
/// restored but not bound yet, or restored to a claim that is gone. The window is the
/// namespace's own setting, as its run applies it.
fn kept(volumes: &[serde_json::Value], cfg: &SessionConfig, now: f64) -> Vec<(String, f64)> {
    use gc_core::sessions::volumes::lifecycle::{State, Window, state_of};
    let window = Window {
        days: cfg.retain_volume_days,
    };
    let mut left = Vec::new();
    for volume in volumes {
        let (state, Some(record)) = state_of(volume, &cfg.cluster_id) else {
            continue;
        };
        let waiting = matches!(state, State::Kept | State::Restored | State::Abandoned);
        if !waiting || record.namespace != cfg.namespace {
            continue;
        }
        let until = Window::start(volume, &record) + window.seconds();
        let name = volume["metadata"]["name"].as_str().unwrap_or_default();
        left.push((name.to_owned(), ((until - now) / 86_400.0).max(0.0)));
    }
    left.sort_by(|a, b| a.1.total_cmp(&b.1));
    left
}
