//! The calls' handlers, each behind its route's layer (the caller authenticated and allowed,
//! [`Authorized`]): each checks its input (the namespace, then ids, then the body), then asks
//! the desk, and answers its JSON or the refusal.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use gc_core::ports::{ObjectCreator, RestoreAccount, SessionCluster, SessionDirectory};
use gc_core::ports::{SessionReceipts, Sink, Store};

use super::answers::{self, Archive, Archives, NamespaceLease, Problem, RestoreAnswer, Status};
use super::auth::Authorized;
use super::bodies::{asking, namespace, read, restoring, session_id, session_query};
use super::openapi;
use crate::requests::Requests;
use crate::requests::restores::RestoreAsked;

/// What the handlers answer from: the desk, whom restores act as, and what the API says of
/// itself.
pub(super) struct Handlers<C, D, S, A> {
    pub(super) desk: Arc<Requests<C, D, S, A>>,
    /// Whom restores act as; `None`: restore is not offered.
    pub(super) restore: Option<Box<dyn RestoreAccount<C>>>,
    /// The largest request body taken, in bytes.
    pub(super) body_limit: usize,
    /// What `/v1/status` names as the version.
    pub(super) version: String,
}

/// The handlers' state.
type Api<C, D, S, A> = State<Arc<Handlers<C, D, S, A>>>;

/// A handler's answer: its JSON, or the refusal.
type Answer = Result<Response, Problem>;

/// `GET /v1/status`: the version, the namespaces, each one's queue, latest request and Lease.
pub(super) async fn status<C, D, S, A>(State(api): Api<C, D, S, A>, _: Authorized) -> Response
where
    C: SessionCluster + Send + Sync,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
{
    let mut leases = Vec::new();
    for ns in api.desk.namespaces() {
        let held = api.desk.lock_holder(ns).await;
        let (holder, error) = match held {
            Ok(holder) => (holder, None),
            Err(e) => (None, Some(e.to_string())),
        };
        leases.push(NamespaceLease {
            namespace: ns.to_owned(),
            until: (holder.as_ref()).map(|h| gc_core::isotime::format_timestamp(h.until)),
            holder: holder.map(|h| h.holder),
            error,
        });
    }
    let status = Status {
        version: api.version.clone(),
        namespaces: api.desk.namespaces().map(str::to_owned).collect(),
        requests: api.desk.lanes(),
        leases,
    };
    axum::Json(status).into_response()
}

/// `POST .../sessions/plan`: what a collection of the sessions asked for would do now.
pub(super) async fn plan<C, D, S, A>(
    State(api): Api<C, D, S, A>,
    Path(ns): Path<String>,
    Authorized(caller): Authorized,
    body: axum::body::Body,
) -> Response
where
    C: SessionCluster + Send + Sync,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
{
    let answer = async {
        namespace(&api.desk, &ns)?;
        let sessions = asking(read(body, api.body_limit).await, api.body_limit)?;
        let planned = api.desk.plan(&ns, sessions, &caller.user).await?;
        Ok(axum::Json(planned).into_response())
    };
    answered(answer.await)
}

/// `POST .../sessions/collect`: a collection of the sessions asked for, queued; the request,
/// ended if it did within the desk's answer wait.
pub(super) async fn collect<C, D, S, A>(
    State(api): Api<C, D, S, A>,
    Path(ns): Path<String>,
    Authorized(caller): Authorized,
    body: axum::body::Body,
) -> Response
where
    C: SessionCluster + Send + Sync,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
{
    let answer = async {
        namespace(&api.desk, &ns)?;
        let sessions = asking(read(body, api.body_limit).await, api.body_limit)?;
        let run = api.desk.collect(&ns, sessions, &caller.user).await?;
        let location = format!("/v1/runs/{}", run.id);
        let mut response = (StatusCode::ACCEPTED, axum::Json(run)).into_response();
        if let Ok(location) = HeaderValue::from_str(&location) {
            response.headers_mut().insert("location", location);
        }
        Ok(response)
    };
    answered(answer.await)
}

/// `GET /v1/runs/{id}`: a requested collection as it is now (its layer found its namespace).
pub(super) async fn run<C, D, S, A>(
    State(api): Api<C, D, S, A>,
    Path(id): Path<String>,
    _: Authorized,
) -> Response {
    match api.desk.run(&id) {
        Some(run) => axum::Json(run).into_response(),
        // Forgotten since its layer found it.
        None => Problem::new(StatusCode::NOT_FOUND, format!("no run {id}")).into_response(),
    }
}

/// `POST .../sessions/{id}/restore`: a restore of one session, as `restore sessions` does it,
/// acting as the restore account ([`Requests::restore`]): answered once done (its objects
/// created, or what failed).
pub(super) async fn restore<C, D, S, A>(
    State(api): Api<C, D, S, A>,
    Path((ns, session)): Path<(String, String)>,
    Authorized(caller): Authorized,
    body: axum::body::Body,
) -> Response
where
    C: SessionCluster + ObjectCreator + Send + Sync + 'static,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + SessionReceipts + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
{
    let answer = async {
        namespace(&api.desk, &ns)?;
        session_id("session", &session)?;
        let restoring = restoring(read(body, api.body_limit).await, api.body_limit)?;
        let Some(account) = &api.restore else {
            let why = "restore is not offered by this server: serve it with \
                       --api-restore-account NAMESPACE/NAME (the chart: gc.restore.enabled \
                       with api.enabled); nothing was done";
            return Err(Problem::new(StatusCode::NOT_IMPLEMENTED, why));
        };
        let asked = RestoreAsked {
            namespace: ns.clone(),
            session: session.clone(),
            dry_run: restoring.dry_run,
            bind_wait: Duration::from_secs(restoring.bind_wait_seconds),
        };
        let restored = api
            .desk
            .restore(account.as_ref(), asked, &caller.user)
            .await?;
        // One line of no object: of the whole session (no archive, or a store that cannot say).
        if let [only] = restored.objects.as_slice()
            && let Some(refused) = answers::session_refused(&ns, only)
        {
            return Err(refused);
        }
        let answer = RestoreAnswer {
            session,
            dry_run: restored.dry_run,
            requested_by: caller.user,
            restored_as: restored.restored_as,
            failed: restored.objects.iter().filter(|o| o.failed()).count(),
            objects: restored.objects,
        };
        Ok(axum::Json(answer).into_response())
    };
    answered(answer.await)
}

/// `GET .../archives?session=ID`: the receipts of a session's archived objects.
pub(super) async fn archives<C, D, S, A>(
    State(api): Api<C, D, S, A>,
    Path(ns): Path<String>,
    RawQuery(query): RawQuery,
    _: Authorized,
) -> Response
where
    C: SessionCluster + ObjectCreator + Send + Sync + 'static,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + SessionReceipts + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
{
    let answer = async {
        namespace(&api.desk, &ns)?;
        let session = session_query(query.as_deref())?;
        let receipts = api.desk.receipts(&ns, &session).await.map_err(|e| {
            Problem::new(StatusCode::SERVICE_UNAVAILABLE, format!("{e:#}")).retry(5)
        })?;
        let archives = receipts.into_iter().map(Archive::from).collect();
        Ok(axum::Json(Archives { session, archives }).into_response())
    };
    answered(answer.await)
}

/// `GET /v1/openapi.json`: the API's OpenAPI document; no token needed, it holds no data.
pub(super) async fn document<C, D, S, A>(State(api): Api<C, D, S, A>) -> Response {
    axum::Json(openapi::document(&api.version)).into_response()
}

fn answered(answer: Answer) -> Response {
    answer.unwrap_or_else(IntoResponse::into_response)
}
