//! Who calls, and whether it may: each call is authenticated by the caller's Kubernetes token
//! (a `TokenReview` for the API's audience, at most [`ApiOptions::review_burst`] of them at once
//! per source address) and authorized by a `SubjectAccessReview` on a resource of gc's own API
//! group ([`GROUP`]); answers are cached for [`ApiOptions::cache`], refused tokens apart. A call
//! refused for who asked is an audit line (at most [`DENIALS_PER_SECOND`], the rest counted).
//!
//! Handlers never call this by hand: each route declares what it needs ([`Need`]), and its
//! layer ([`guarded`]) checks the caller before the handler runs, giving it the caller
//! ([`Authorized`]), or answers the refusal itself. The body is never read for a caller refused.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts, Path, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use gc_core::ports::{Access, Asked, Caller};
use sha2::{Digest, Sha256};

use super::answers::Problem;
use super::options::ApiOptions;
use crate::audit::DeniedLine;
use crate::metrics::ApiMetrics;
use crate::requests::Requests;
use crate::serve::tls::Door;

/// gc's own API group: the resources a caller is authorized on (`sessions/plan`,
/// `sessions/collect`, `sessions/restore`, `runs`, `archives`, `status`). No such API is served
/// by the API server; RBAC rules name it like any other.
pub const GROUP: &str = "gc.stream.space";

/// What a route needs of its caller: the right to `verb` the `resource` (`/subresource`) of
/// [`GROUP`], in the namespace its scope says.
#[derive(Clone)]
pub(super) struct Need {
    verb: &'static str,
    resource: &'static str,
    subresource: &'static str,
    scope: Scope,
}

/// Where a route's call is authorized.
#[derive(Clone)]
enum Scope {
    /// In no namespace (`""`): a call about every namespace.
    Cluster,
    /// In the namespace of the path's parameter.
    Path(&'static str),
    /// In the namespace of the object the path's parameter `param` names, as `find` says. The
    /// caller is authenticated first (as for a call in no namespace): an unknown id tells a
    /// stranger nothing. An object not found, or one the caller may not read, is answered `404`
    /// `no {what} {id}`, its namespace unsaid (the refusal audited all the same).
    Owner {
        param: &'static str,
        what: &'static str,
        find: Finder,
    },
}

/// The namespace of the object an id names, if there is one.
type Finder = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl Need {
    /// The right to `verb` `resource`, in no namespace.
    pub(super) fn to(verb: &'static str, resource: &'static str) -> Self {
        Self {
            verb,
            resource,
            subresource: "",
            scope: Scope::Cluster,
        }
    }

    /// Of the `subresource`.
    pub(super) fn of(self, subresource: &'static str) -> Self {
        Self {
            subresource,
            ..self
        }
    }

    /// In the namespace the path's parameter `param` names.
    pub(super) fn in_path(self, param: &'static str) -> Self {
        Self {
            scope: Scope::Path(param),
            ..self
        }
    }

    /// In the namespace of the `what` the path's parameter `param` names, found by `find`
    /// ([`Scope::Owner`]).
    pub(super) fn in_namespace_of(
        self,
        param: &'static str,
        what: &'static str,
        find: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        let find = Arc::new(find);
        Self {
            scope: Scope::Owner { param, what, find },
            ..self
        }
    }

    fn asked<'a>(&self, namespace: &'a str) -> Asked<'a> {
        Asked {
            verb: self.verb,
            resource: self.resource,
            subresource: self.subresource,
            namespace,
        }
    }
}

/// `route`, its calls checked by `gate` for what they `need` before its handler runs.
pub(super) fn guarded<St, X>(
    route: MethodRouter<St>,
    gate: &Arc<Gate<X>>,
    need: Need,
) -> MethodRouter<St>
where
    St: Clone + Send + Sync + 'static,
    X: Access + 'static,
{
    let guard = Guard {
        gate: Arc::clone(gate),
        need,
    };
    route.route_layer(axum::middleware::from_fn_with_state(guard, check::<X>))
}

/// A route's layer: its gate, and what the route needs.
struct Guard<X> {
    gate: Arc<Gate<X>>,
    need: Need,
}

impl<X> Clone for Guard<X> {
    fn clone(&self) -> Self {
        Self {
            gate: Arc::clone(&self.gate),
            need: self.need.clone(),
        }
    }
}

/// The caller, as the route's layer authenticated and authorized it: a handler that takes it
/// runs behind that layer only (without it, the call is refused `500`).
pub(super) struct Authorized(pub(super) Caller);

/// The caller the layer let through, in the request's extensions: only this module makes one.
#[derive(Clone)]
struct Checked(Caller);

impl<S: Send + Sync> FromRequestParts<S> for Authorized {
    type Rejection = Problem;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        match parts.extensions.remove::<Checked>() {
            Some(Checked(caller)) => Ok(Self(caller)),
            None => {
                tracing::error!("request refused (500): a route without its authorization");
                let why = "the call was not authorized: nothing was done";
                Err(Problem::new(StatusCode::INTERNAL_SERVER_ERROR, why))
            }
        }
    }
}

/// The layer's check: the caller, allowed what the route needs, handed to the handler; else
/// the refusal, and the handler never runs (nor is the body read).
async fn check<X: Access + 'static>(
    State(guard): State<Guard<X>>,
    source: Source,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    match guard.authorized(&mut parts, &source).await {
        Ok(caller) => {
            parts.extensions.insert(Checked(caller));
            next.run(Request::from_parts(parts, body)).await
        }
        Err(refused) => refused,
    }
}

impl<X: Access> Guard<X> {
    /// The caller of the request whose head is `parts`, allowed what the route needs.
    async fn authorized(&self, parts: &mut Parts, source: &Source) -> Result<Caller, Response> {
        let (need, gate) = (&self.need, &self.gate);
        let params = match need.scope {
            Scope::Cluster => HashMap::new(),
            Scope::Path(_) | Scope::Owner { .. } => {
                let params = Path::<HashMap<String, String>>::from_request_parts(parts, &()).await;
                params.map_err(IntoResponse::into_response)?.0
            }
        };
        let param = |name: &str| {
            let found = params.get(name).map(String::as_str);
            found.ok_or_else(|| {
                tracing::error!("request refused (500): no path parameter {name}");
                let why = format!("no path parameter {name}: nothing was done");
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, why)
            })
        };
        let headers = &parts.headers;
        let refused = IntoResponse::into_response;
        match &need.scope {
            Scope::Cluster => gate
                .allowed(headers, source, need.asked(""))
                .await
                .map_err(refused),
            Scope::Path(name) => {
                let ns = param(name).map_err(refused)?;
                gate.allowed(headers, source, need.asked(ns))
                    .await
                    .map_err(refused)
            }
            Scope::Owner {
                param: name,
                what,
                find,
            } => {
                let id = param(name).map_err(refused)?;
                // Who asks first: an unknown id tells an unauthenticated caller nothing.
                gate.caller(headers, source, &need.asked(""))
                    .await
                    .map_err(refused)?;
                let hidden = || Problem::new(StatusCode::NOT_FOUND, format!("no {what} {id}"));
                let Some(ns) = find(id) else {
                    return Err(hidden().into_response());
                };
                // One the caller may not read is one that does not exist (its namespace unsaid);
                // the refusal is audited all the same.
                let allowed = gate.allowed(headers, source, need.asked(&ns)).await;
                allowed.map_err(|refused| match refused.status {
                    StatusCode::FORBIDDEN => hidden().into_response(),
                    _ => refused.into_response(),
                })
            }
        }
    }
}

/// Where the gate writes the audit line of each call it refuses: the desk's audit log.
pub(super) trait Refusals: Send + Sync {
    /// Whether `namespace` is one the desk serves (a namespace it does not is none in the line).
    fn serves(&self, namespace: &str) -> bool;
    /// Writes the line.
    fn denied(&self, line: &DeniedLine<'_>);
}

impl<C, D, S, A> Refusals for Requests<C, D, S, A>
where
    Self: Send + Sync,
{
    fn serves(&self, namespace: &str) -> bool {
        Requests::serves(self, namespace)
    }
    fn denied(&self, line: &DeniedLine<'_>) {
        Requests::denied(self, line);
    }
}

/// The API's checks of its callers: the API server's answers about them, cached, the
/// TokenReviews each source address may still cause, and the refusals audited.
pub(super) struct Gate<X> {
    access: X,
    /// Where refusals are audited.
    audit: Arc<dyn Refusals>,
    options: ApiOptions,
    /// The refusals audited in the current second, and those left out.
    denials: Mutex<Denials>,
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

impl<X: Access> Gate<X> {
    /// Callers checked by `access` as `options` say, refusals audited to `audit`.
    pub(super) fn new(access: X, audit: Arc<dyn Refusals>, options: ApiOptions) -> Self {
        Self {
            access,
            audit,
            denials: Mutex::new(Denials {
                since: tokio::time::Instant::now(),
                audited: 0,
                left_out: 0,
            }),
            reviews: Reviews::hashmap_with_clock(options.review_quota(), TokioClock),
            options,
            callers: Mutex::default(),
            strangers: Mutex::default(),
            rights: Mutex::default(),
            metrics: Arc::default(),
        }
    }

    /// The counters of the gate's refusals.
    pub(super) fn metrics(&self) -> Arc<ApiMetrics> {
        Arc::clone(&self.metrics)
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
        let namespace = Some(asked.namespace).filter(|ns| self.audit.serves(ns));
        self.audit.denied(&DeniedLine {
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

/// Where a request came from: its connection ([`Door`], when [`crate::serve::tls::serve`] serves
/// it)
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

impl<S: Send + Sync> FromRequestParts<S> for Source {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let connected = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        Ok(Self {
            address: connected.map(|c| c.0.ip().to_canonical()),
            door: parts.extensions.get::<Arc<Door>>().cloned(),
        })
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

#[cfg(test)]
mod tests;
