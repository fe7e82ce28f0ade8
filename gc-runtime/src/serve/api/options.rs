//! How the request API serves and checks its callers: its options.

use std::num::NonZeroU32;
use std::time::Duration;

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
    pub(crate) fn limits(&self) -> crate::serve::tls::Limits {
        crate::serve::tls::Limits {
            connections: self.connections,
            anonymous: self.anonymous_connections,
            anonymous_timeout: self.anonymous_timeout,
            header_timeout: self.header_timeout,
        }
    }

    /// The TokenReviews a source address may cause: [`Self::review_burst`] at once, then one
    /// per [`Self::review_period`].
    pub(super) fn review_quota(&self) -> governor::Quota {
        let burst = std::num::NonZeroU32::new(self.review_burst).unwrap_or(NonZeroU32::MIN);
        let period = self.review_period.max(Duration::from_nanos(1));
        governor::Quota::with_period(period)
            .unwrap_or_else(|| governor::Quota::per_second(NonZeroU32::MAX))
            .allow_burst(burst)
    }
}
