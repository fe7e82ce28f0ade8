//! **Overview**: each namespace served, who holds its run lock now, its archives (how many, how
//! large), the objects each recent run deleted, and the volumes gc kept with the time left in
//! their window: from the cluster and gc's store, read as the page is drawn.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use gc_store::ReceiptQuery;
use maud::{Markup, html};

use super::{Section, layout, problem, said, size};
use crate::App;
use crate::plot::bars;

/// Runs shown in the plot of deletes per run.
const RUNS: usize = 12;

/// `GET /`
pub(crate) async fn page(State(app): State<Arc<App>>) -> Response {
    let mut sections = Vec::new();
    for (i, (ns, cfg)) in app.configs.iter().enumerate() {
        sections.push(namespace(&app, i, ns, cfg).await);
    }
    let body = html! {
        p { "Cluster " code { (app.cluster_id()) } ", " (app.configs.len()) " namespace(s). "
            "Every action here is done as " strong { (app.operator) } ": the API server decides what you may do." }
        @for section in &sections { (section) }
    };
    layout(&app, Section::Overview, "Overview", body).into_response()
}

async fn namespace(
    app: &App,
    i: usize,
    ns: &str,
    cfg: &gc_core::sessions::SessionConfig,
) -> Markup {
    let holder = app.live.lock_holder(ns).await;
    let asked = ReceiptQuery {
        namespace: Some(ns),
        ..ReceiptQuery::default()
    };
    let listed =
        gc_runtime::adapters::archives::list(&app.store, app.cluster_id(), asked, None, None);
    let listed = listed.await;
    let now = gc_runtime::clock::now();
    html! {
        section aria-labelledby={ "ns-" (i) } {
            h2 id={ "ns-" (i) } { "Namespace " (ns) }
            p {
                a href={ "/sessions?ns=" (ns) } { "Sessions" } " · "
                a href={ "/archives?ns=" (ns) } { "Archives" }
            }
            dl.figures {
                dt { "Run lock" }
                dd {
                    @match &holder {
                        Ok(Some(h)) => { "held by " code { (h.holder) } }
                        Ok(None) => "free",
                        Err(e) => span.failed { "cannot be read: " (e) },
                    }
                }
                @if let Ok(listed) = &listed {
                    dt { "Archives" }
                    dd { (listed.len()) ", " (size(listed.iter().map(|l| l.receipt.bytes).sum())) }
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
                    @let kept = kept(listed, cfg.retain_volume_days, now);
                    @if !kept.is_empty() {
                        h3 { "Kept volumes: days left in their window" }
                        (bars(&format!("kept-{i}"), &format!("Days left before each kept volume in {ns} gets its reclaim policy back"), &kept, "days"))
                    }
                }
            }
        }
    }
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

/// Each volume a claim's receipt says was kept, with the days left in its window (from the
/// newest such receipt), soonest first.
fn kept(listed: &[gc_store::ListedReceipt], days: u32, now: f64) -> Vec<(String, f64)> {
    let mut newest: BTreeMap<&str, f64> = BTreeMap::new();
    for l in listed {
        let Some(s) = &l.receipt.session else {
            continue;
        };
        let (Some(volume), Ok(at)) = (&s.retained, gc_core::isotime::parse_timestamp(&s.run_at))
        else {
            continue;
        };
        let newest = newest.entry(volume.name.as_str()).or_insert(at);
        *newest = newest.max(at);
    }
    let mut left: Vec<(String, f64)> = newest
        .into_iter()
        .map(|(name, at)| {
            (
                name.to_owned(),
                ((at + f64::from(days) * 86_400.0 - now) / 86_400.0).max(0.0),
            )
        })
        .collect();
    left.sort_by(|a, b| a.1.total_cmp(&b.1));
    left
}
