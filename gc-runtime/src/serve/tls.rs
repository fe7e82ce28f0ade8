//! The request API over TLS: the certificate chain and key the operator provides, as PEM files
//! (a `kubernetes.io/tls` Secret mounted as `tls.crt` and `tls.key`, cert-manager's among them),
//! read again when they change: a renewed certificate is served from the next handshake, with
//! no restart. The API's connections, over TLS or not ([`serve`]), each a [`Door`]: a connection
//! whose caller is not yet authenticated holds a place of a small pool of its own, for a short
//! time, and only an authenticated one a place of the main pool.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How long a client may take to finish its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// How often the files are looked at again, at most.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// The request API's TLS settings, as [`server_config`] makes them.
pub type TlsConfig = Arc<rustls::ServerConfig>;

/// Where the certificate chain and its key are, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (`tls.crt`).
    pub cert: PathBuf,
    /// The private key (`tls.key`): PKCS#8, PKCS#1 or SEC1.
    pub key: PathBuf,
}

/// The certificate chain's and the key's bytes, as last read.
type Pem = (Vec<u8>, Vec<u8>);

impl TlsFiles {
    /// The files' bytes.
    fn read(&self) -> crate::Result<Pem> {
        let read = |what: &str, path: &Path| std::fs::read(path).map_err(|e| named(what, path, &e));
        Ok((read("certificate", &self.cert)?, read("key", &self.key)?))
    }

    /// The certificate and key of `pem`, checked against each other.
    fn parse(&self, pem: &Pem, provider: &CryptoProvider) -> crate::Result<CertifiedKey> {
        let certs = CertificateDer::pem_slice_iter(&pem.0)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| named("certificate", &self.cert, &e))?;
        if certs.is_empty() {
            return Err(named("certificate", &self.cert, &"no certificate in it"));
        }
        let key = PrivateKeyDer::from_pem_slice(&pem.1).map_err(|e| named("key", &self.key, &e))?;
        CertifiedKey::from_der(certs, key, provider).map_err(|e| {
            let why = format!("the key does not serve the certificate: {e}");
            named("key", &self.key, &why)
        })
    }
}

/// A file of `what` at `path` that cannot serve, and why.
fn named(what: &str, path: &Path, e: &dyn std::fmt::Display) -> crate::Error {
    crate::Error::msg(format!(
        "cannot read the TLS {what} {}: {e}",
        path.display()
    ))
}

/// The served certificate, read again when its files change (their bytes are compared: a
/// renewal within a file system's timestamp granularity is still seen).
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    pem: Pem,
    looked: Instant,
    key: Arc<CertifiedKey>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.looked.elapsed() >= LOOK_AGAIN {
            state.looked = Instant::now();
            let renewed = (self.files.read()).map(|pem| (pem != state.pem).then_some(pem));
            let loaded = renewed.and_then(|pem| {
                pem.map(|pem| Ok((self.files.parse(&pem, &self.provider)?, pem)))
                    .transpose()
            });
            match loaded {
                Ok(Some((key, pem))) => {
                    tracing::info!(
                        "serving the TLS certificate {} again",
                        self.files.cert.display()
                    );
                    state.key = Arc::new(key);
                    state.pem = pem;
                }
                Ok(None) => {}
                // Half-written during a rotation, say: the previous one serves meanwhile.
                Err(e) => tracing::warn!("{e:#}; serving the previous certificate"),
            }
        }
        Some(Arc::clone(&state.key))
    }
}

/// The TLS settings of the request API, from `files` (read now: a certificate or key that
/// cannot be used is an error before anything is served).
///
/// # Errors
/// A file that cannot be read, holds no certificate or key, or a key that does not serve the
/// certificate: the error names the file.
pub fn server_config(files: &TlsFiles) -> crate::Result<TlsConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let pem = files.read()?;
    let key = Arc::new(files.parse(&pem, &provider)?);
    let resolver = Reloading {
        files: files.clone(),
        provider: Arc::clone(&provider),
        state: Mutex::new(Loaded {
            pem,
            looked: Instant::now(),
            key,
        }),
    };
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| crate::Error::msg(format!("cannot set up TLS: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// How the request API's connections are bounded ([`serve`]; `ApiOptions` gives them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Connections whose caller was authenticated, at most.
    pub(crate) connections: usize,
    /// Connections whose caller is not yet authenticated, at most (the oldest of the source
    /// holding the most is closed to make room for a new one).
    pub(crate) anonymous: usize,
    /// How long a connection may stay unauthenticated (its handshake and request head
    /// included): then it is closed, once the call in progress, if any, is answered.
    pub(crate) anonymous_timeout: Duration,
    /// How long a request's head may take, and a kept-alive connection stay idle.
    pub(crate) header_timeout: Duration,
}

/// The connections being served: the unauthenticated ones, oldest first, and the places of the
/// authenticated.
#[derive(Debug)]
struct Doors {
    limits: Limits,
    authenticated: Arc<tokio::sync::Semaphore>,
    anonymous: Mutex<BTreeMap<u64, (IpAddr, Arc<Mark>)>>,
    next: AtomicU64,
}

/// What a connection's task watches: whether its place was taken, and its calls in progress.
#[derive(Debug, Default)]
struct Mark {
    evicted: AtomicBool,
    calls: AtomicUsize,
    /// Told when it is evicted, authenticated, or a call ends.
    changed: tokio::sync::Notify,
}

impl Doors {
    fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            authenticated: Arc::new(tokio::sync::Semaphore::new(limits.connections)),
            anonymous: Mutex::default(),
            next: AtomicU64::new(0),
        })
    }

    /// A connection just accepted from `peer`, unauthenticated: it takes a place of the
    /// anonymous pool, and when that is full, closes the oldest connection of the source that
    /// holds the most places (one not in a call first): a flood from one address closes its own
    /// connections, never a caller's from elsewhere.
    fn admit(self: &Arc<Self>, peer: SocketAddr) -> Arc<Door> {
        let source = peer.ip().to_canonical();
        let mark = Arc::new(Mark::default());
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut anonymous = self
            .anonymous
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while anonymous.len() >= self.limits.anonymous.max(1) {
            let Some(id) = evicted(&anonymous) else {
                break;
            };
            if let Some((_, mark)) = anonymous.remove(&id) {
                mark.evicted.store(true, Ordering::SeqCst);
                mark.changed.notify_waiters();
            }
        }
        anonymous.insert(id, (source, Arc::clone(&mark)));
        Arc::new(Door {
            doors: Arc::clone(self),
            id,
            peer,
            mark,
            accepted: tokio::time::Instant::now(),
            place: Mutex::new(None),
        })
    }
}

/// Which unauthenticated connection gives its place up: the oldest of the source holding the
/// most (of the sources holding as many, the one with the oldest), one not in a call if it has
/// one.
fn evicted(anonymous: &BTreeMap<u64, (IpAddr, Arc<Mark>)>) -> Option<u64> {
    let mut held = HashMap::<IpAddr, usize>::new();
    for (source, _) in anonymous.values() {
        *held.entry(*source).or_default() += 1;
    }
    let most = held.values().copied().max()?;
    let source = (anonymous.values())
        .map(|(source, _)| *source)
        .find(|source| held[source] == most)?;
    let of_source = || anonymous.iter().filter(move |(_, (s, _))| *s == source);
    let idle = of_source().find(|(_, (_, mark))| mark.calls.load(Ordering::SeqCst) == 0);
    idle.or_else(|| of_source().next()).map(|(id, _)| *id)
}

/// A connection of the request API, as each of its requests carries it (an extension, beside
/// axum's `ConnectInfo`): who it comes from, and its place.
#[derive(Debug)]
pub struct Door {
    doors: Arc<Doors>,
    id: u64,
    peer: SocketAddr,
    mark: Arc<Mark>,
    accepted: tokio::time::Instant,
    /// Its place among the authenticated, once it has one.
    place: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

impl Door {
    /// The address the connection comes from.
    #[must_use]
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// A caller of this connection was authenticated: the connection leaves the anonymous pool
    /// for a place among the authenticated. `false` when every such place is taken (the
    /// connection stays anonymous, and closes at its time).
    pub fn authenticated(&self) -> bool {
        let mut place = self.place.lock().unwrap_or_else(PoisonError::into_inner);
        if place.is_some() {
            return true;
        }
        let Ok(permit) = Arc::clone(&self.doors.authenticated).try_acquire_owned() else {
            return false;
        };
        *place = Some(permit);
        drop(place);
        self.leave();
        self.mark.changed.notify_waiters();
        true
    }

    fn is_authenticated(&self) -> bool {
        (self.place.lock().unwrap_or_else(PoisonError::into_inner)).is_some()
    }

    /// Gives up its place in the anonymous pool.
    fn leave(&self) {
        let mut anonymous = (self.doors.anonymous.lock()).unwrap_or_else(PoisonError::into_inner);
        anonymous.remove(&self.id);
    }

    /// Ends when the connection is to be closed: its place was taken by a newer one, or it is
    /// still unauthenticated past its time and no call of it is in progress. Never, once
    /// authenticated.
    async fn closed(&self) {
        let deadline = self.accepted + self.doors.limits.anonymous_timeout;
        let mut past = false;
        loop {
            let changed = self.mark.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if self.mark.evicted.load(Ordering::SeqCst) {
                return;
            }
            if self.is_authenticated() {
                return std::future::pending().await;
            }
            if past && self.mark.calls.load(Ordering::SeqCst) == 0 {
                return;
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline), if !past => past = true,
            }
        }
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.leave();
    }
}

/// A call in progress on a connection: counted while it lasts.
struct Calling(Arc<Mark>);

impl Calling {
    fn new(door: &Door) -> Self {
        door.mark.calls.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(&door.mark))
    }
}

impl Drop for Calling {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// Serves `router` on `listener` until `stop` ends: over TLS with `tls` (each handshake given
/// ten seconds), else plain HTTP; one HTTP/1.1 connection per accepted stream, each request's
/// head given [`Limits::header_timeout`] (an idle kept-alive connection closes then too), each
/// request carrying its connection's [`Door`] and axum's `ConnectInfo<SocketAddr>`. Every
/// connection is accepted: until one of its callers is authenticated it holds a place of the
/// anonymous pool ([`Limits::anonymous`], [`Limits::anonymous_timeout`]), so that connections
/// that never present a token cannot keep a caller that does out. Once `stop` ends, nothing
/// more is accepted and each connection finishes the call in progress, then closes; this
/// returns when all have.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Option<TlsConfig>,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let doors = Doors::new(limits);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("the request API could not accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let door = doors.admit(peer);
        let (acceptor, router, watcher) = (acceptor.clone(), router.clone(), graceful.watcher());
        tokio::spawn(async move {
            let router = hyper_util::service::TowerToHyperService::new(router);
            let carried = Arc::clone(&door);
            let service = hyper::service::service_fn(
                move |mut request: hyper::Request<hyper::body::Incoming>| {
                    let calling = Calling::new(&carried);
                    let extensions = request.extensions_mut();
                    extensions.insert(axum::extract::ConnectInfo(peer));
                    extensions.insert(Arc::clone(&carried));
                    let answer = hyper::service::Service::call(&router, request);
                    async move {
                        let answer = answer.await;
                        drop(calling);
                        answer
                    }
                },
            );
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let served = async {
                match acceptor {
                    Some(acceptor) => {
                        let handshake = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream));
                        let Ok(Ok(tls)) = handshake.await else {
                            return Ok(());
                        };
                        let io = hyper_util::rt::TokioIo::new(tls);
                        watcher.watch(http.serve_connection(io, service)).await
                    }
                    None => {
                        let io = hyper_util::rt::TokioIo::new(stream);
                        watcher.watch(http.serve_connection(io, service)).await
                    }
                }
            };
            tokio::select! {
                ended = served => if let Err(e) = ended {
                    tracing::debug!("a request API connection ended: {e}");
                },
                () = door.closed() => tracing::debug!(
                    "a request API connection from {peer} closed: not authenticated in time, \
                     or its place was taken"
                ),
            }
        });
    }
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests;
