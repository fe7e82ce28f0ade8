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
//! Refusals are JSON `{"error": ..., "field": ...}`: `400` for bad input (naming the field;
//! nothing is queued), `401` without a valid token, `403` when not allowed, `404` for an
//! unknown run, `409` while another process holds the namespace's Lease and `429` when its
//! queue is full or the caller's address has had its TokenReviews for now (each with
//! `Retry-After`), `503` when the API server cannot answer for the caller (no answer is no),
//! every place for an authenticated connection is taken, or the process is stopping, `501` for
//! a restore when no restore account is configured.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::header::{AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gc_core::ports::{
    Access, Asked, Caller, ObjectCreator, Receipt, RestoreAccount, SessionCluster,
    SessionDirectory, SessionReceipts, Sink, Store,
};
use gc_core::sessions::requests::Requested;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::tls::Door;
use crate::metrics::ApiMetrics;
use crate::requests::{Refusal, Requests};

/// gc's own API group: the resources a caller is authorized on (`sessions/plan`,
/// `sessions/collect`, `sessions/restore`, `runs`, `archives`, `status`). No such API is served by the API server; RBAC rules
/// name it like any other.
pub const GROUP: &str = "gc.stream.space";

/// How the API checks its callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiOptions {
    /// The audience a caller's token must be for (a projected ServiceAccount token's).
    pub audience: String,
    /// How long an answer of the API server about a token or a right is reused.
    pub cache: Duration,
    /// The largest request body taken, in bytes.
    pub body_limit: usize,
    /// How long a call may take, its body read included: then `503`. A collection goes on in
    /// the background, a restore to its end (follow them in the audit log).
    pub request_timeout: Duration,
    /// How long a client may take to send a request's head, and a kept-alive connection may
    /// stay idle.
    pub header_timeout: Duration,
    /// How many connections whose caller was authenticated are served at once: past that, a
    /// caller authenticated on another connection is answered `503` (`Retry-After: 1`).
    pub connections: usize,
    /// How many connections whose caller is not yet authenticated are served at once (a TLS
    /// handshake or a request head in progress, a call without a valid token): a new one
    /// closes the oldest of the source address holding the most.
    pub anonymous_connections: usize,
    /// How long a connection may stay unauthenticated, its handshake and first request head
    /// included: then it is closed (once the call in progress, if any, is answered).
    pub anonymous_timeout: Duration,
    /// How many TokenReviews a source address may cause at once (a token not cached): past
    /// that, `429` until its rate ([`Self::review_period`]) gives it another.
    pub review_burst: u32,
    /// After its burst, one TokenReview per source address per this time.
    pub review_period: Duration,
}

impl Default for ApiOptions {
    /// Audience `gc`, answers kept ten seconds (a revoked right stops working within that;
    /// a token the API server refused is refused again that long without asking it), bodies up
    /// to 64 KiB (about two thousand session ids), two minutes for a call (a restore may wait a
    /// minute for a claim to be bound), ten seconds for a request's head.
    ///
    /// 512 authenticated connections (a control plane holds a few). 64 unauthenticated ones,
    /// five seconds each: a caller's handshake, head and token take milliseconds in a cluster,
    /// so five seconds leave room for a slow network and a slow API server, and 64 a burst of
    /// callers connecting at once, while a flood of connections that never present a token
    /// only closes its own (the oldest of the address holding the most go first).
    ///
    /// Ten TokenReviews at once per source address, then one per 500 ms: a caller's token is
    /// reviewed once per ten seconds (the cache), so an address with twenty callers' tokens is
    /// never refused, while one sending junk tokens costs the API server two reviews a second.
    fn default() -> Self {
        Self {
            audience: "gc".into(),
            cache: Duration::from_secs(10),
            body_limit: 64 * 1024,
            request_timeout: Duration::from_secs(120),
            header_timeout: Duration::from_secs(10),
            connections: 512,
            anonymous_connections: 64,
            anonymous_timeout: Duration::from_secs(5),
            review_burst: 10,
            review_period: Duration::from_millis(500),
        }
    }
}

impl ApiOptions {
    /// The connections' limits, as the server applies them.
    pub(crate) fn limits(&self) -> super::tls::Limits {
        super::tls::Limits {
            connections: self.connections,
            anonymous: self.anonymous_connections,
            anonymous_timeout: self.anonymous_timeout,
            header_timeout: self.header_timeout,
        }
    }

    /// The TokenReviews a source address may cause: [`Self::review_burst`] at once, then one
    /// per [`Self::review_period`].
    fn review_quota(&self) -> governor::Quota {
        let burst = std::num::NonZeroU32::new(self.review_burst).unwrap_or(NonZeroU32::MIN);
        let period = self.review_period.max(Duration::from_nanos(1));
        governor::Quota::with_period(period)
            .unwrap_or_else(|| governor::Quota::per_second(NonZeroU32::MAX))
            .allow_burst(burst)
    }
}

/// Tokio's clock (paused in tests), as the TokenReview limiter reads it.
#[derive(Debug, Clone, Copy, Default)]
struct TokioClock;

impl governor::clock::Clock for TokioClock {
    type Instant = std::time::Instant;
    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// The TokenReviews each source address may still cause.
type Reviews =
    governor::RateLimiter<IpAddr, governor::state::keyed::HashMapStateStore<IpAddr>, TokioClock>;

/// Past this many source addresses, the limiter forgets those back to a full burst.
const SOURCES: usize = 4096;

/// Where a request came from: its connection ([`Door`], when [`super::tls::serve`] serves it)
/// and its peer's address (axum's `ConnectInfo`, which an embedder's server gives with
/// `into_make_service_with_connect_info::<SocketAddr>()`; without it, every caller is one
/// source to the TokenReview limit).
#[derive(Debug, Clone, Default)]
struct Source {
    address: Option<IpAddr>,
    door: Option<Arc<Door>>,
}

impl Source {
    /// The address the TokenReview limit counts the request against.
    fn key(&self) -> IpAddr {
        self.address
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Source {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        let connected = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        Ok(Self {
            address: connected.map(|c| c.0.ip().to_canonical()),
            door: parts.extensions.get::<Arc<Door>>().cloned(),
        })
    }
}

/// The API's state: the request desk, the API server's answers about callers, and their cache.
pub struct Api<C, D, S, A, X> {
    desk: Arc<Requests<C, D, S, A>>,
    access: X,
    /// Whom restores act as; `None`: restore is not offered.
    restore: Option<Box<dyn RestoreAccount<C>>>,
    /// The sessions (namespace, id) a restore works on now.
    restoring: Places,
    /// The refusals audited in the current second, and those left out.
    denials: Mutex<Denials>,
    options: ApiOptions,
    version: String,
    /// Who each token the API server accepted is, by its digest.
    callers: Cache<[u8; 32], Caller>,
    /// Why the API server did not accept each token it refused, by its digest: kept apart, so
    /// that a flood of junk tokens never pushes a caller's answer out.
    strangers: Cache<[u8; 32], String>,
    /// What each caller may do.
    rights: Cache<String, Result<(), String>>,
    /// The TokenReviews each source address may still cause.
    reviews: Reviews,
    /// The API's counters, as `serve`'s `/metrics` shows them.
    metrics: Arc<ApiMetrics>,
}

/// Answers of the API server, each with when it was given.
type Cache<K, V> = Mutex<HashMap<K, (tokio::time::Instant, V)>>;

/// A refusal, as the API answers it.
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The HTTP status.
    #[serde(skip)]
    pub status: StatusCode,
    /// What was wrong, and what to do.
    pub error: String,
    /// The request field at fault, for bad input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// When to try again, in seconds.
    #[serde(skip)]
    pub retry_after: Option<u32>,
}

impl Problem {
    fn new(status: StatusCode, error: impl Into<String>) -> Self {
        Self {
            status,
            error: error.into(),
            field: None,
            retry_after: None,
        }
    }

    fn bad(field: &str, error: impl Into<String>) -> Self {
        Self {
            field: Some(field.to_owned()),
            ..Self::new(StatusCode::BAD_REQUEST, error)
        }
    }

    fn retry(self, seconds: u32) -> Self {
        Self {
            retry_after: Some(seconds),
            ..self
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(&self)).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Self {
        let error = refusal.to_string();
        match refusal {
            Refusal::UnknownNamespace(_) => Self::bad("namespace", error),
            Refusal::Full { .. } => Self::new(StatusCode::TOO_MANY_REQUESTS, error).retry(5),
            Refusal::Busy(_) => Self::new(StatusCode::CONFLICT, error).retry(30),
            Refusal::Stopping => Self::new(StatusCode::SERVICE_UNAVAILABLE, error).retry(5),
        }
    }
}

/// How many refusals a second are audit lines: past that (a flood of calls without a token, say)
/// they are counted, and the count said in the log once the second is over.
const DENIALS_PER_SECOND: u32 = 20;

/// The refusals of the current second.
struct Denials {
    since: tokio::time::Instant,
    audited: u32,
    left_out: u32,
}

impl Denials {
    /// Whether one more refusal is audited now: with how many were left out since the last
    /// audited one, which its line carries.
    fn audit(&mut self) -> Option<u32> {
        if self.since.elapsed() >= Duration::from_secs(1) {
            if self.left_out > 0 {
                let n = self.left_out;
                tracing::warn!(
                    "{n} refused call(s) were not audited (the next audit line counts them)"
                );
            }
            (self.since, self.audited) = (tokio::time::Instant::now(), 0);
        }
        if self.audited < DENIALS_PER_SECOND {
            self.audited += 1;
            return Some(std::mem::take(&mut self.left_out));
        }
        self.left_out += 1;
        None
    }
}

/// Sessions, each a (namespace, id).
type Places = Arc<Mutex<BTreeSet<(String, String)>>>;

/// A session's place while a restore works on it: given back when dropped.
struct InFlight {
    places: Places,
    place: (String, String),
}

impl InFlight {
    /// The place of `session` in `ns`, `None` while another restore holds it.
    fn take(places: &Places, ns: &str, session: &str) -> Option<Self> {
        let place = (ns.to_owned(), session.to_owned());
        let mut taken = places.lock().unwrap_or_else(PoisonError::into_inner);
        taken.insert(place.clone()).then(|| Self {
            places: Arc::clone(places),
            place,
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut taken = self.places.lock().unwrap_or_else(PoisonError::into_inner);
        taken.remove(&self.place);
    }
}

/// The body of a restore.
#[derive(utoipa::ToSchema, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Restoring {
    /// Every create a server-side dry run, no volume moved.
    #[serde(default)]
    dry_run: bool,
    /// How long to wait for a claim created on its kept volume to be bound (at most 60; 0: the
    /// next run gives the volume back its policy).
    #[serde(default)]
    bind_wait_seconds: u64,
}

/// `POST .../sessions/{id}/restore`: what came of each archived object of the session.
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RestoreAnswer {
    session: String,
    dry_run: bool,
    requested_by: String,
    /// The account the objects were created as.
    restored_as: String,
    /// How many objects failed (each says why in `objects`).
    failed: usize,
    objects: Vec<crate::restore::Restored>,
}

/// `GET .../archives?session=ID`: the receipts of the session's archived objects, newest first.
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Archives {
    session: String,
    archives: Vec<Archive>,
}

/// One receipt: an archived object, where its manifest is, and what verifies it.
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Archive {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    /// The instant of the run that archived it (RFC 3339).
    run_at: String,
    uri: String,
    sha256: String,
    bytes: u64,
    /// A deleted claim's volume gc kept (`null`: none).
    retained_volume: Option<String>,
    /// That volume's reclaim policy before.
    volume_policy: Option<String>,
}

impl From<Receipt> for Archive {
    fn from(r: Receipt) -> Self {
        let session = r.session.unwrap_or_else(|| gc_core::ports::SessionObject {
            api_version: "v1".into(),
            kind: "Pod".into(),
            session: None,
            run_at: String::new(),
            retained: None,
        });
        Self {
            api_version: session.api_version,
            kind: session.kind,
            name: r.name,
            uid: r.uid,
            run_at: session.run_at,
            uri: r.uri,
            sha256: r.sha256,
            bytes: r.bytes,
            retained_volume: session.retained.as_ref().map(|v| v.name.clone()),
            volume_policy: session.retained.map(|v| v.policy),
        }
    }
}

/// The body of a plan or a collection: the sessions it is about (absent: all of the namespace).
#[derive(utoipa::ToSchema, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Asking {
    #[serde(default)]
    sessions: Option<Vec<String>>,
}

/// `GET /v1/status`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
struct Status {
    version: String,
    namespaces: Vec<String>,
    /// Per namespace: its queue and its latest request.
    requests: Vec<crate::requests::Lane>,
    /// Per namespace: who holds its run lock now.
    leases: Vec<NamespaceLease>,
}

/// Who holds a namespace's run lock (a run of this process, of another replica, of the CronJob).
#[derive(utoipa::ToSchema, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceLease {
    namespace: String,
    /// The holder now (`null`: nobody, no run works there; or unknown, see `error`).
    holder: Option<String>,
    /// When its hold ends unless renewed (RFC 3339).
    until: Option<String>,
    /// Why the Lease could not be read.
    error: Option<String>,
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
        Arc::new(Self {
            desk,
            access,
            restore,
            restoring: Places::default(),
            denials: Mutex::new(Denials {
                since: tokio::time::Instant::now(),
                audited: 0,
                left_out: 0,
            }),
            reviews: Reviews::hashmap_with_clock(options.review_quota(), TokioClock),
            options,
            version: version.to_owned(),
            callers: Mutex::default(),
            strangers: Mutex::default(),
            rights: Mutex::default(),
            metrics: Arc::default(),
        })
    }

    /// The API's counters: shown on `/metrics` once given to [`crate::metrics::Served::show_api`].
    #[must_use]
    pub fn metrics(&self) -> Arc<ApiMetrics> {
        Arc::clone(&self.metrics)
    }

    /// The routes, `/v1/...`, for an embedder's server (or `serve`'s).
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/v1/status", get(Self::status))
            .route("/v1/namespaces/{ns}/sessions/plan", post(Self::plan))
            .route("/v1/namespaces/{ns}/sessions/collect", post(Self::collect))
            .route("/v1/runs/{id}", get(Self::run))
            .route(
                "/v1/namespaces/{ns}/sessions/{id}/restore",
                post(Self::restore),
            )
            .route("/v1/namespaces/{ns}/archives", get(Self::archives))
            .route("/v1/openapi.json", get(Self::openapi))
            .layer(axum::middleware::from_fn_with_state(
                self.options.request_timeout,
                within,
            ))
            .with_state(Arc::clone(self))
    }

    /// The caller whose bearer token `headers` carry, allowed to do what it `asked`.
    async fn allowed(
        &self,
        headers: &HeaderMap,
        source: &Source,
        asked: Asked<'_>,
    ) -> Result<Caller, Problem> {
        let caller = self.caller(headers, source, &asked).await?;
        let key = format!(
            "{}\n{}\n{}\n{}\n{}",
            caller.user, asked.verb, asked.resource, asked.subresource, asked.namespace
        );
        let cached = cached(&self.rights, &key, self.options.cache);
        let right = match cached {
            Some(right) => right,
            None => {
                let answer = self.access.authorize(&caller, GROUP, asked).await;
                let right = answer.map_err(|e| unanswered("may", &e))?;
                keep(&self.rights, key, right.clone(), CALLERS);
                right
            }
        };
        match right {
            Ok(()) => Ok(caller),
            Err(why) => {
                tracing::warn!(caller = %caller.user, "request refused (403): {why}");
                self.deny(&asked, Some(&caller.user), StatusCode::FORBIDDEN, &why);
                Err(Problem::new(StatusCode::FORBIDDEN, why))
            }
        }
    }

    /// The audit line of a call refused for who asked (`user`, when the token said).
    fn deny(&self, asked: &Asked<'_>, user: Option<&str>, status: StatusCode, why: &str) {
        let mut denials = self.denials.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(unaudited) = denials.audit() else {
            self.metrics.refusal_unaudited();
            return;
        };
        drop(denials);
        let time = gc_core::isotime::format_timestamp(crate::clock::now());
        let call = match asked.subresource {
            "" => format!("{} {}", asked.verb, asked.resource),
            sub => format!("{} {}/{sub}", asked.verb, asked.resource),
        };
        // A namespace the URL names but the desk does not serve is none.
        let namespace = Some(asked.namespace).filter(|ns| self.desk.serves(ns));
        self.desk.denied(&crate::audit::DeniedLine {
            time: &time,
            namespace: namespace.unwrap_or_default(),
            decision: "denied",
            status: status.as_u16(),
            call,
            requested_by: user,
            reason: why,
            unaudited,
        });
    }

    /// Who the bearer token of `headers` is, by the API server's `TokenReview`; a refusal of
    /// the call `asked` is audited. A token not cached costs a review of the request's source
    /// address ([`ApiOptions::review_burst`]): past its rate, `429`. An authenticated caller's
    /// connection takes a place among the authenticated ones.
    async fn caller(
        &self,
        headers: &HeaderMap,
        source: &Source,
        asked: &Asked<'_>,
    ) -> Result<Caller, Problem> {
        let token = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        let token = token.and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            tracing::warn!("request refused (401): no bearer token");
            let why = "no bearer token: send the caller's ServiceAccount token (`Authorization: \
                       Bearer TOKEN`), projected for this API's audience";
            self.deny(asked, None, StatusCode::UNAUTHORIZED, why);
            return Err(Problem::new(StatusCode::UNAUTHORIZED, why));
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let ttl = self.options.cache;
        let caller = match cached(&self.callers, &key, ttl) {
            Some(caller) => Ok(caller),
            None => match cached(&self.strangers, &key, ttl) {
                Some(why) => Err(why),
                None => self.review(token, key, source, asked).await?,
            },
        };
        let caller = caller.map_err(|why| {
            tracing::warn!("request refused (401): {why}");
            let why = format!("the token is not accepted: {why}");
            self.deny(asked, None, StatusCode::UNAUTHORIZED, &why);
            Problem::new(StatusCode::UNAUTHORIZED, why)
        })?;
        if let Some(door) = &source.door
            && !door.authenticated()
        {
            let why = format!(
                "every place for an authenticated connection ({}) is taken: try again",
                self.options.connections
            );
            tracing::warn!(caller = %caller.user, "request refused (503): {why}");
            return Err(Problem::new(StatusCode::SERVICE_UNAVAILABLE, why).retry(1));
        }
        Ok(caller)
    }

    /// The API server's `TokenReview` of `token` (its digest `key`), kept; refused (`429`,
    /// audited) when `source` has had its reviews for now.
    async fn review(
        &self,
        token: &str,
        key: [u8; 32],
        source: &Source,
        asked: &Asked<'_>,
    ) -> Result<Result<Caller, String>, Problem> {
        if let Err(wait) = self.may_review(source.key()) {
            let seconds = u32::try_from(wait.as_millis().div_ceil(1000))
                .unwrap_or(u32::MAX)
                .max(1);
            let why = format!(
                "too many tokens to review from {}: at most {} at once, then one every {}ms; \
                 try again in {seconds}s",
                source.key(),
                self.options.review_burst,
                self.options.review_period.as_millis()
            );
            tracing::warn!("request refused (429): {why}");
            self.deny(asked, None, StatusCode::TOO_MANY_REQUESTS, &why);
            return Err(Problem::new(StatusCode::TOO_MANY_REQUESTS, why).retry(seconds));
        }
        let audience = &self.options.audience;
        let answer = self.access.authenticate(token, audience).await;
        let caller = answer.map_err(|e| unanswered("is", &e))?;
        match &caller {
            Ok(caller) => keep(&self.callers, key, caller.clone(), CALLERS),
            Err(why) => keep(&self.strangers, key, why.clone(), STRANGERS),
        }
        Ok(caller)
    }

    /// Whether `source` may cause one more TokenReview now, else how long until it may.
    fn may_review(&self, source: IpAddr) -> Result<(), Duration> {
        if self.reviews.len() >= SOURCES {
            self.reviews.retain_recent();
        }
        (self.reviews.check_key(&source))
            .map_err(|not| not.wait_time_from(governor::clock::Clock::now(&TokioClock)))
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

/// The API server could not say who a caller is or what it may do: refused, try again.
fn unanswered(what: &str, error: &gc_core::ports::ClusterError) -> Problem {
    tracing::warn!(
        "request refused (503): the API server could not say who the caller {what}: {error}"
    );
    let why = format!("cannot check the caller with the API server: {error}; nothing was done");
    Problem::new(StatusCode::SERVICE_UNAVAILABLE, why).retry(5)
}

/// An answer kept less than `ttl` ago.
fn cached<K: std::hash::Hash + Eq, V: Clone>(
    cache: &Cache<K, V>,
    key: &K,
    ttl: Duration,
) -> Option<V> {
    let cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    let (at, value) = cache.get(key)?;
    (at.elapsed() < ttl).then(|| value.clone())
}

/// How many callers' answers (and rights) are kept at most.
const CALLERS: usize = 4096;

/// How many refused tokens are kept at most.
const STRANGERS: usize = 1024;

/// Keeps `value`, at most `bound` of them: when full, forgets what is older than the cache's
/// longest time first, then all (the cache holds a window's answers only).
fn keep<K: std::hash::Hash + Eq, V>(cache: &Cache<K, V>, key: K, value: V, bound: usize) {
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= bound {
        cache.retain(|_, (at, _)| at.elapsed() < Duration::from_secs(60));
        if cache.len() >= bound {
            cache.clear();
        }
    }
    cache.insert(key, (tokio::time::Instant::now(), value));
}

/// A request's body as read: up to [`ApiOptions::body_limit`] bytes, else why not.
type Body = Result<Bytes, axum::Error>;

/// A request's body, read only once its caller is known and allowed (a caller without a token
/// holds no place while it sends one slowly): up to `limit` bytes.
async fn read(body: axum::body::Body, limit: usize) -> Body {
    axum::body::to_bytes(body, limit).await
}

/// The body, once the caller is known to be allowed: a JSON object of the fields of `T` (an
/// empty body: `T`'s defaults), else a `400` saying it should be `shape`. A body that could not
/// be read whole (over [`ApiOptions::body_limit`], which [`read`] stops at, or cut short) is
/// bad input too.
fn json_body<T: serde::de::DeserializeOwned + Default>(
    body: Body,
    limit: usize,
    shape: &str,
) -> Result<T, Problem> {
    let body = body.map_err(|e| {
        let why = format!("the body could not be read whole (at most {limit} bytes): {e}");
        Problem::bad("body", why)
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    // An object only (serde would take a struct's fields from an array too), each field once and
    // never null: serde_json keeps the last of a key given twice, and reads a null list as an
    // absent one, which means every session.
    let Entries(entries) = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad("body", format!("expected {shape}: {e}")))?;
    let mut object = serde_json::Map::new();
    for (key, value) in entries {
        if value.is_null() {
            let why = format!("null: give a value, or leave `{key}` out (expected {shape})");
            return Err(Problem::bad(&key, why));
        }
        if object.contains_key(&key) {
            return Err(Problem::bad(
                &key,
                format!("given twice (expected {shape})"),
            ));
        }
        object.insert(key, value);
    }
    serde_json::from_value(serde_json::Value::Object(object))
        .map_err(|e| Problem::bad("body", format!("expected {shape}: {e}")))
}

/// A JSON object's fields as given, in order, duplicates kept (to refuse them).
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// The sessions a body asks for, checked: a JSON object with at most `sessions`, each id a
/// label value (StreamSpace's session ids are), none twice.
fn asking(body: Body, limit: usize) -> Result<Requested, Problem> {
    let shape = "{\"sessions\": [\"ID\", ...]} (or nothing: every session)";
    let asking: Asking = json_body(body, limit, shape)?;
    let Some(ids) = asking.sessions else {
        return Ok(Requested::All);
    };
    if ids.is_empty() {
        let why = "no session id: name at least one, or leave `sessions` out for all";
        return Err(Problem::bad("sessions", why));
    }
    let mut seen = BTreeSet::new();
    for (i, id) in ids.into_iter().enumerate() {
        session_id(&format!("sessions[{i}]"), &id)?;
        seen.insert(id);
    }
    Ok(Requested::Ids(seen))
}

/// `id`, the value of `field`, checked to be a session id: a label value, as StreamSpace's are.
fn session_id(field: &str, id: &str) -> Result<(), Problem> {
    if id.is_empty() || !gc_core::selector::is_label_value(id) {
        let why = format!(
            "{id:?} is not a session id (a label value: at most 63 letters, digits, `-`, `_` or \
             `.`, beginning and ending with a letter or digit)"
        );
        return Err(Problem::bad(field, why));
    }
    Ok(())
}

/// The body of a restore, checked: at most `dryRun` and `bindWaitSeconds` (at most 60).
fn restoring(body: Body, limit: usize) -> Result<Restoring, Problem> {
    let shape = "{\"dryRun\": BOOL, \"bindWaitSeconds\": N} (or nothing: a restore, no wait)";
    let restoring: Restoring = json_body(body, limit, shape)?;
    if restoring.bind_wait_seconds > 60 {
        let why = format!(
            "{} is over 60: a restore answers within a minute (0: the next run gives a kept \
             volume back its policy once its claim is bound)",
            restoring.bind_wait_seconds
        );
        return Err(Problem::bad("bindWaitSeconds", why));
    }
    Ok(restoring)
}

/// The `session` of a query string, checked: the only parameter, given once.
fn session_query(query: Option<&str>) -> Result<String, Problem> {
    let mut session = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "session" if session.is_none() => session = Some(value.into_owned()),
            "session" => return Err(Problem::bad("session", "given more than once")),
            other => {
                let why = format!("unknown query parameter {other:?}: only `session` is taken");
                return Err(Problem::bad(other, why));
            }
        }
    }
    let Some(session) = session else {
        let why = "which session's archives: `?session=ID`";
        return Err(Problem::bad("session", why));
    };
    session_id("session", &session)?;
    Ok(session)
}

/// A namespace a request may name: one the collector serves, never a system namespace.
fn namespace<'d, C, D, S, A>(
    desk: &'d Requests<C, D, S, A>,
    ns: &str,
) -> Result<&'d gc_core::sessions::SessionConfig, Problem> {
    if gc_core::input::SYSTEM_NAMESPACES.contains(&ns) {
        let why = format!("{ns} is a system namespace: gc never collects there");
        return Err(Problem::bad("namespace", why));
    }
    desk.config(ns)
        .ok_or_else(|| Refusal::UnknownNamespace(ns.to_owned()).into())
}

/// The routes' handlers: each checks the caller, then the input, then asks the desk.
impl<C, D, S, A, X> Api<C, D, S, A, X>
where
    C: SessionCluster + ObjectCreator + Send + Sync + 'static,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + SessionReceipts + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
    X: Access + 'static,
{
    async fn status(State(api): State<Arc<Self>>, source: Source, headers: HeaderMap) -> Response {
        let asked = Asked {
            verb: "get",
            resource: "status",
            subresource: "",
            namespace: "",
        };
        if let Err(problem) = api.allowed(&headers, &source, asked).await {
            return problem.into_response();
        }
        let mut leases = Vec::new();
        for ns in api.desk.namespaces() {
            let held = api.desk.collector().lock_holder(ns).await;
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

    /// A plan's or a collection's checks, in order: who calls and whether it may make the call
    /// `subresource` of `sessions` in `ns`, then the namespace, then the body; the caller and
    /// the sessions asked for. Nothing is queued or read before all pass.
    async fn checked(
        &self,
        (headers, source): (&HeaderMap, &Source),
        ns: &str,
        subresource: &str,
        body: axum::body::Body,
    ) -> Result<(Caller, Requested), Problem> {
        let asked = Asked {
            verb: "create",
            resource: "sessions",
            subresource,
            namespace: ns,
        };
        let caller = self.allowed(headers, source, asked).await?;
        namespace(&self.desk, ns)?;
        let limit = self.options.body_limit;
        Ok((caller, asking(read(body, limit).await, limit)?))
    }

    async fn plan(
        State(api): State<Arc<Self>>,
        Path(ns): Path<String>,
        source: Source,
        headers: HeaderMap,
        body: axum::body::Body,
    ) -> Response {
        let answer = async {
            let (caller, sessions) = api.checked((&headers, &source), &ns, "plan", body).await?;
            let cfg = api.desk.narrowed(&ns, sessions, [caller.user].into())?;
            let planned = api.desk.collector().plan(&cfg).await.map_err(|e| {
                let status = match e.kind() {
                    crate::FailureKind::Data => StatusCode::UNPROCESSABLE_ENTITY,
                    _ => StatusCode::SERVICE_UNAVAILABLE,
                };
                Problem::new(status, format!("{e:#}"))
            })?;
            Ok::<_, Problem>(axum::Json(planned).into_response())
        };
        answer.await.unwrap_or_else(IntoResponse::into_response)
    }

    async fn collect(
        State(api): State<Arc<Self>>,
        Path(ns): Path<String>,
        source: Source,
        headers: HeaderMap,
        body: axum::body::Body,
    ) -> Response {
        let answer = async {
            let (caller, sessions) = api
                .checked((&headers, &source), &ns, "collect", body)
                .await?;
            let run = api.desk.collect(&ns, sessions, &caller.user).await?;
            let location = format!("/v1/runs/{}", run.id);
            let mut response = (StatusCode::ACCEPTED, axum::Json(run)).into_response();
            if let Ok(location) = HeaderValue::from_str(&location) {
                response.headers_mut().insert("location", location);
            }
            Ok::<_, Problem>(response)
        };
        answer.await.unwrap_or_else(IntoResponse::into_response)
    }

    async fn run(
        State(api): State<Arc<Self>>,
        Path(id): Path<String>,
        source: Source,
        headers: HeaderMap,
    ) -> Response {
        let answer = async {
            // Who asks first: an unknown id tells an unauthenticated caller nothing.
            let runs = Asked {
                verb: "get",
                resource: "runs",
                subresource: "",
                namespace: "",
            };
            api.caller(&headers, &source, &runs).await?;
            let found = api.desk.run(&id);
            let Some(run) = found else {
                return Err(Problem::new(StatusCode::NOT_FOUND, format!("no run {id}")));
            };
            let asked = Asked {
                verb: "get",
                resource: "runs",
                subresource: "",
                namespace: &run.namespace,
            };
            // A run the caller may not read is one that does not exist (its namespace unsaid);
            // the refusal is audited all the same.
            (api.allowed(&headers, &source, asked).await).map_err(|refused| {
                if refused.status == StatusCode::FORBIDDEN {
                    Problem::new(StatusCode::NOT_FOUND, format!("no run {id}"))
                } else {
                    refused
                }
            })?;
            Ok(axum::Json(run).into_response())
        };
        answer.await.unwrap_or_else(IntoResponse::into_response)
    }

    /// A restore of one session, as `restore sessions` does it, acting as the restore account:
    /// answered once done (its objects created, or what failed).
    async fn restore(
        State(api): State<Arc<Self>>,
        Path((ns, session)): Path<(String, String)>,
        source: Source,
        headers: HeaderMap,
        body: axum::body::Body,
    ) -> Response {
        let answer = async {
            let asked = Asked {
                verb: "create",
                resource: "sessions",
                subresource: "restore",
                namespace: &ns,
            };
            let caller = api.allowed(&headers, &source, asked).await?;
            let cfg = namespace(&api.desk, &ns)?;
            session_id("session", &session)?;
            let limit = api.options.body_limit;
            let restoring = restoring(read(body, limit).await, limit)?;
            let Some(account) = &api.restore else {
                let why = "restore is not offered by this server: serve it with \
                           --api-restore-account NAMESPACE/NAME (the chart: gc.restore.enabled \
                           with api.enabled); nothing was done";
                return Err(Problem::new(StatusCode::NOT_IMPLEMENTED, why));
            };
            let request = crate::restore::RestoreRequest {
                cluster_id: cfg.cluster_id.clone(),
                namespace: ns.clone(),
                kinds: cfg.kinds.clone(),
                sessions: vec![session.clone()],
                bind_wait: Duration::from_secs(restoring.bind_wait_seconds),
            };
            // One restore of a session at a time: another would find every create racing it.
            let busy = Problem::new(
                StatusCode::CONFLICT,
                format!(
                    "a restore of session {session} in {ns} is in progress: its result is in \
                     the audit log"
                ),
            );
            let place = InFlight::take(&api.restoring, &ns, &session).ok_or(busy.retry(10))?;
            let cluster = account.act().await.map_err(|e| {
                tracing::warn!("restore of {session} refused (503): {e}");
                let why = format!(
                    "cannot act as the restore account {}: {e}; nothing was restored",
                    account.name()
                );
                Problem::new(StatusCode::SERVICE_UNAVAILABLE, why).retry(5)
            })?;
            let dry_run = restoring.dry_run || api.desk.collector().dry_run();
            // Its own task, holding the session's place until it ends: a caller that goes away
            // (or a call past its time) does not cut a restore between two creates, and what it
            // did is in the audit log either way.
            let (desk, user, restored_as) = (
                Arc::clone(&api.desk),
                caller.user.clone(),
                account.name().to_owned(),
            );
            let restored = api.desk.spawn(async move {
                let _place = place;
                let objects = desk
                    .collector()
                    .restore_as(&cluster, &request, dry_run)
                    .await?;
                let time = gc_core::isotime::format_timestamp(crate::clock::now());
                let lines: Vec<_> = (objects.iter())
                    .map(|object| crate::audit::RestoredLine {
                        time: &time,
                        namespace: &request.namespace,
                        decision: "restore",
                        object,
                        dry_run,
                        requested_by: &user,
                        restored_as: &restored_as,
                    })
                    .collect();
                desk.restored(&lines);
                let failed = objects.iter().filter(|o| o.failed()).count();
                tracing::info!(
                    "restore of session {} in {} asked by {user}{}: {} object(s), {failed} failed",
                    request.sessions.join(", "),
                    request.namespace,
                    if dry_run { " (dry run)" } else { "" },
                    objects.len(),
                );
                Ok::<_, crate::Error>(objects)
            });
            let restored = restored.await.map_err(|e| {
                let why = format!("the restore failed: {e}");
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, why)
            })?;
            let objects = restored.map_err(|e| Problem::bad("session", format!("{e:#}")))?;
            // One line of no object: no archive at all (404), or the store could not say (503).
            if let [only] = objects.as_slice()
                && only.api_version.is_empty()
            {
                let why = format!("session {session} in {ns}: {}", only.result);
                if only.no_archive() {
                    return Err(Problem::new(StatusCode::NOT_FOUND, why));
                }
                return Err(Problem::new(StatusCode::SERVICE_UNAVAILABLE, why).retry(5));
            }
            let failed = objects.iter().filter(|o| o.failed()).count();
            let answer = RestoreAnswer {
                session,
                dry_run,
                requested_by: caller.user,
                restored_as: account.name().to_owned(),
                failed,
                objects,
            };
            Ok::<_, Problem>(axum::Json(answer).into_response())
        };
        answer.await.unwrap_or_else(IntoResponse::into_response)
    }

    /// The API's OpenAPI document: no token needed, it holds no data.
    async fn openapi(State(api): State<Arc<Self>>) -> Response {
        axum::Json(openapi::document(&api.version)).into_response()
    }

    /// The receipts of a session's archived objects.
    async fn archives(
        State(api): State<Arc<Self>>,
        Path(ns): Path<String>,
        RawQuery(query): RawQuery,
        source: Source,
        headers: HeaderMap,
    ) -> Response {
        let answer = async {
            let asked = Asked {
                verb: "get",
                resource: "archives",
                subresource: "",
                namespace: &ns,
            };
            api.allowed(&headers, &source, asked).await?;
            let cfg = namespace(&api.desk, &ns)?;
            let session = session_query(query.as_deref())?;
            let receipts = api
                .desk
                .collector()
                .receipts(&cfg.cluster_id, &ns, &session);
            let receipts = receipts.await.map_err(|e| {
                Problem::new(StatusCode::SERVICE_UNAVAILABLE, format!("{e:#}")).retry(5)
            })?;
            let archives = receipts.into_iter().map(Archive::from).collect();
            Ok::<_, Problem>(axum::Json(Archives { session, archives }).into_response())
        };
        answer.await.unwrap_or_else(IntoResponse::into_response)
    }
}

pub mod openapi;
#[cfg(test)]
mod tests;

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
    /// TLS ([`super::tls::server_config`]); without it, plain HTTP on a loopback address only.
    pub tls: Option<super::tls::TlsConfig>,
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
    super::tls::serve(listener, api.router(), tls, limits, stopped).await;
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
