//! The request API (`/v1/...`): the control plane asks for a plan or a collection of some
//! sessions of a namespace, and follows its run. Every call is authenticated by the caller's
//! Kubernetes token (a `TokenReview` for gc's audience) and authorized by a
//! `SubjectAccessReview` on a resource of gc's own API group ([`GROUP`]) in that namespace;
//! answers are cached for [`ApiOptions::cache`]. A request can only narrow what a scheduled run
//! does ([`crate::requests`]).
//!
//! | call | authorized as |
//! | --- | --- |
//! | `GET /v1/status` | `get` `status` (any namespace): the version, the namespaces, each one's queue and latest request |
//! | `POST /v1/namespaces/{ns}/sessions/plan` | `create` `sessions/plan` in `ns` |
//! | `POST /v1/namespaces/{ns}/sessions/collect` | `create` `sessions/collect` in `ns` |
//! | `GET /v1/runs/{id}` | `get` `runs` in the run's namespace |
//! | `POST /v1/namespaces/{ns}/sessions/{id}/restore` | `create` `sessions/restore` in `ns`: done as the restore account ([`RestoreAccount`]) |
//! | `GET /v1/namespaces/{ns}/archives?session=ID` | `get` `archives` in `ns`: the session's receipts |
//!
//! Each route declares the right of the table it needs, and its layer (`auth.rs`) checks the
//! caller before the handler (`handlers.rs`) runs: no handler authorizes by hand, and no body is
//! read for a caller refused. The handlers check the input (`bodies.rs`) and ask the desk;
//! `answers.rs` makes statuses of what it says.
//!
//! Refusals are JSON `{"error": ..., "field": ...}`: `400` for bad input (naming the field;
//! nothing is queued), `401` without a valid token, `403` when not allowed, `404` for an
//! unknown run, `409` while another process holds the namespace's Lease and `429` when its
//! queue is full or the caller's address has had its TokenReviews for now (each with
//! `Retry-After`), `503` when the API server cannot answer for the caller (no answer is no),
//! every place for an authenticated connection is taken, or the process is stopping, `501` for
//! a restore when no restore account is configured.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gc_core::ports::{
    Access, ObjectCreator, RestoreAccount, SessionCluster, SessionDirectory, SessionReceipts, Sink,
    Store,
};

use crate::metrics::ApiMetrics;
use crate::requests::Requests;
use auth::{Gate, Need, guarded};
use handlers::Handlers;

mod answers;
mod auth;
mod bodies;
mod handlers;
pub mod openapi;
mod options;
#[cfg(test)]
mod tests;

pub use answers::Problem;
pub use auth::GROUP;
pub use options::ApiOptions;

// What the tests (`use super::*`) name of the API's parts.
#[cfg(test)]
use {
    axum::body::Bytes,
    axum::extract::ConnectInfo,
    axum::http::header::RETRY_AFTER,
    gc_core::ports::{Asked, Caller},
    std::net::SocketAddr,
};

/// The request API: its callers' checks (`auth.rs`) in front of its handlers (`handlers.rs`),
/// over the request desk.
pub struct Api<C, D, S, A, X> {
    handlers: Arc<Handlers<C, D, S, A>>,
    gate: Arc<Gate<X>>,
    options: ApiOptions,
}

impl<C, D, S, A, X> Api<C, D, S, A, X>
where
    C: SessionCluster + ObjectCreator + Send + Sync + 'static,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + SessionReceipts + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
    X: Access + 'static,
{
    /// The API of `desk`, its callers checked by `access` as `options` say, its restores done
    /// as `restore` (`None`: not offered); `version` is what `/v1/status` names.
    pub fn new(
        desk: Arc<Requests<C, D, S, A>>,
        access: X,
        options: ApiOptions,
        version: &str,
        restore: Option<Box<dyn RestoreAccount<C>>>,
    ) -> Arc<Self> {
        let audit = Arc::clone(&desk) as Arc<dyn auth::Refusals>;
        Arc::new(Self {
            gate: Arc::new(Gate::new(access, audit, options.clone())),
            handlers: Arc::new(Handlers {
                desk,
                restore,
                body_limit: options.body_limit,
                version: version.to_owned(),
            }),
            options,
        })
    }

    /// The API's counters: shown on `/metrics` once given to [`crate::metrics::Served::show_api`].
    #[must_use]
    pub fn metrics(&self) -> Arc<ApiMetrics> {
        self.gate.metrics()
    }

    /// The routes, `/v1/...`, for an embedder's server (or `serve`'s): each with what its
    /// caller needs, checked by its layer before its handler runs (see the module's table).
    pub fn router(self: &Arc<Self>) -> Router {
        let gate = &self.gate;
        let sessions = |subresource| Need::to("create", "sessions").of(subresource).in_path("ns");
        let desk = Arc::clone(&self.handlers.desk);
        let runs = Need::to("get", "runs")
            .in_namespace_of("id", "run", move |id| desk.run(id).map(|run| run.namespace));
        Router::new()
            .route(
                "/v1/status",
                guarded(get(handlers::status), gate, Need::to("get", "status")),
            )
            .route(
                "/v1/namespaces/{ns}/sessions/plan",
                guarded(post(handlers::plan), gate, sessions("plan")),
            )
            .route(
                "/v1/namespaces/{ns}/sessions/collect",
                guarded(post(handlers::collect), gate, sessions("collect")),
            )
            .route("/v1/runs/{id}", guarded(get(handlers::run), gate, runs))
            .route(
                "/v1/namespaces/{ns}/sessions/{id}/restore",
                guarded(post(handlers::restore), gate, sessions("restore")),
            )
            .route(
                "/v1/namespaces/{ns}/archives",
                guarded(
                    get(handlers::archives),
                    gate,
                    Need::to("get", "archives").in_path("ns"),
                ),
            )
            .route("/v1/openapi.json", get(handlers::document))
            .layer(axum::middleware::from_fn_with_state(
                self.options.request_timeout,
                within,
            ))
            .with_state(Arc::clone(&self.handlers))
    }
}

/// A call, given `limit` (its body read included): `503` once past it. What it started goes
/// on (a collection's run, a restore's task).
async fn within(
    State(limit): State<Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let why = format!(
                "the call took longer than {}s; what it started goes on (see the audit log)",
                limit.as_secs()
            );
            Problem::new(StatusCode::SERVICE_UNAVAILABLE, why).into_response()
        }
    }
}

/// Refuses an address the request API may not be served on: without `tls`, plain HTTP is
/// served on a loopback address only.
///
/// # Errors
/// A usage error naming `api_listen`.
pub fn check_address(address: std::net::SocketAddr, tls: bool) -> crate::Result<()> {
    if tls || address.ip().is_loopback() {
        return Ok(());
    }
    Err(crate::Error::Input(gc_core::input::InputError::Invalid {
        input: "`api_listen`",
        value: address.to_string(),
        rule: "without `api_tls` the request API is plain HTTP, served on a loopback address \
               only (127.0.0.1 or ::1)",
    }))
}

/// A ServiceAccount named `NAMESPACE/NAME`, each a DNS label (as `--api-restore-account` takes
/// it).
///
/// # Errors
/// What is wrong with `text`.
pub fn parse_account(text: &str) -> Result<(String, String), String> {
    use gc_core::input::{is_dns_label, is_dns_subdomain};
    match text.split_once('/') {
        Some((ns, name)) if is_dns_label(ns) && is_dns_subdomain(name) => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(format!(
            "{text:?} is not NAMESPACE/NAME of a ServiceAccount (a namespace, a `/`, a name)"
        )),
    }
}

/// How a served request API answers, beside its desk: who checks callers, whom restores act as,
/// and what the server shows.
pub struct Serving<C, X> {
    /// The API server's answers about callers.
    pub access: X,
    /// Whom restores act as; `None`: restore is not offered.
    pub restore: Option<Box<dyn RestoreAccount<C>>>,
    /// How callers are checked.
    pub options: ApiOptions,
    /// What `/v1/status` names as the version.
    pub version: String,
    /// TLS ([`crate::serve::tls::server_config`]); without it, plain HTTP on a loopback address only.
    pub tls: Option<crate::serve::tls::TlsConfig>,
    /// Where `serve` shows its metrics: the API's counters are shown there too (`None`: not
    /// shown).
    pub served: Option<Arc<crate::metrics::Served>>,
}

/// Answers `desk`'s request API on `listener` (checked with [`check_address`]) until `stop`
/// ends; then requests still queued end stopped, the server finishes the calls in progress, and
/// what callers left behind (a run whose caller went away, a restore past its call) ends within
/// the desk's `finish_within`: its audit lines written, its Lease released.
///
/// # Errors
/// When the listening socket cannot be served.
pub async fn serve_desk<C, D, S, A, X>(
    listener: std::net::TcpListener,
    desk: Arc<Requests<C, D, S, A>>,
    serving: Serving<C, X>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> crate::Result<()>
where
    C: SessionCluster + ObjectCreator,
    D: SessionDirectory + 'static,
    S: Store + SessionReceipts + 'static,
    A: Sink + 'static,
    X: Access + 'static,
{
    use crate::Context as _;
    let Serving {
        access,
        restore,
        options,
        version,
        tls,
        served,
    } = serving;
    let api = Api::new(Arc::clone(&desk), access, options, &version, restore);
    listener
        .set_nonblocking(true)
        .context("cannot set up the listening socket")?;
    let listener = tokio::net::TcpListener::from_std(listener)
        .context("cannot serve on the listening socket")?;
    let stopping = Arc::clone(&desk);
    let stopped = async move {
        stop.await;
        stopping.stop();
    };
    if let Some(served) = &served {
        served.show_api(api.metrics());
    }
    let limits = api.options.limits();
    crate::serve::tls::serve(listener, api.router(), tls, limits, stopped).await;
    let within = desk.finish_within();
    if !desk.finished(within).await {
        tracing::warn!(
            "stopping with runs or restores still going after {}s: their Leases expire by \
             themselves, and the next run resumes",
            within.as_secs()
        );
    }
    Ok(())
}
