//! The request API over TLS: the certificate chain and key the operator provides, as PEM files
//! (a `kubernetes.io/tls` Secret mounted as `tls.crt` and `tls.key`, cert-manager's among them),
//! read again when they change: a renewed certificate is served from the next handshake, with
//! no restart. The API's connections, over TLS or not ([`serve`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How many connections are served at once.
const CONNECTIONS: usize = 512;

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

/// Serves `router` on `listener` until `stop` ends: over TLS with `tls` (each handshake given
/// ten seconds), else plain HTTP; one HTTP/1.1 connection per accepted stream, each request's
/// head given `header_timeout` (an idle kept-alive connection closes then too). Once `stop`
/// ends, nothing more is accepted and each connection finishes the call in progress, then
/// closes; this returns when all have.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Option<TlsConfig>,
    header_timeout: Duration,
    stop: impl std::future::Future<Output = ()>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let open = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS));
    let mut stop = std::pin::pin!(stop);
    loop {
        // At most [`CONNECTIONS`] at once: the next waits in the listen queue.
        let (stream, permit) = tokio::select! {
            accepted = accept(&listener, &open) => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("the request API could not accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let (acceptor, router, watcher) = (acceptor.clone(), router.clone(), graceful.watcher());
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper_util::service::TowerToHyperService::new(router);
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout);
            let ended = match acceptor {
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream));
                    let Ok(Ok(tls)) = handshake.await else {
                        return;
                    };
                    let io = hyper_util::rt::TokioIo::new(tls);
                    watcher.watch(http.serve_connection(io, service)).await
                }
                None => {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    watcher.watch(http.serve_connection(io, service)).await
                }
            };
            if let Err(e) = ended {
                tracing::debug!("a request API connection ended: {e}");
            }
        });
    }
    graceful.shutdown().await;
}

/// A connection accepted once one of `open`'s places is free, with its place.
async fn accept(
    listener: &tokio::net::TcpListener,
    open: &Arc<tokio::sync::Semaphore>,
) -> std::io::Result<(tokio::net::TcpStream, tokio::sync::OwnedSemaphorePermit)> {
    let permit = Arc::clone(open)
        .acquire_owned()
        .await
        .map_err(std::io::Error::other)?;
    let (stream, _) = listener.accept().await?;
    Ok((stream, permit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `localhost`, and its key, PEM.
    fn issued() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// `GET /` over TLS to `addr`, trusting only `cert`: the answer's first line.
    async fn get(addr: std::net::SocketAddr, cert: &str) -> std::io::Result<String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut roots = rustls::RootCertStore::empty();
        let trusted = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        roots.add(trusted).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await?;
        tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await?;
        let mut answer = String::new();
        tls.read_to_string(&mut answer).await?;
        Ok(answer.lines().next().unwrap_or_default().to_owned())
    }

    /// The operator's certificate is served, and a renewed one (new files in place, as a
    /// Secret's mount swaps them) from the next handshake, with no restart; a client trusting
    /// only the old one is refused then.
    #[tokio::test]
    async fn the_certificate_is_served_and_read_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let (old_cert, old_key) = issued();
        std::fs::write(&files.cert, &old_cert).unwrap();
        std::fs::write(&files.key, &old_key).unwrap();
        let config = server_config(&files).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router, Some(config), HANDSHAKE, async {
            let _ = stopped.await;
        }));
        assert_eq!(get(addr, &old_cert).await.unwrap(), "HTTP/1.1 200 OK");
        // Renewed: written beside, then moved in place, as the kubelet swaps a Secret's files.
        let (new_cert, new_key) = issued();
        std::fs::write(dir.path().join("new.crt"), &new_cert).unwrap();
        std::fs::write(dir.path().join("new.key"), &new_key).unwrap();
        // Within the file system's timestamp granularity: the same times as the old ones.
        for (new, old) in [("new.crt", &files.cert), ("new.key", &files.key)] {
            let at = std::fs::metadata(old).unwrap().modified().unwrap();
            let file = std::fs::File::options()
                .write(true)
                .open(dir.path().join(new));
            file.unwrap().set_modified(at).unwrap();
        }
        tokio::time::sleep(LOOK_AGAIN + Duration::from_millis(100)).await;
        std::fs::rename(dir.path().join("new.key"), &files.key).unwrap();
        std::fs::rename(dir.path().join("new.crt"), &files.cert).unwrap();
        tokio::time::sleep(LOOK_AGAIN + Duration::from_millis(100)).await;
        assert_eq!(get(addr, &new_cert).await.unwrap(), "HTTP/1.1 200 OK");
        assert!(
            get(addr, &old_cert).await.is_err(),
            "the old certificate is not served"
        );
        stop.send(()).unwrap();
        server.await.unwrap();
    }

    /// Plain HTTP: a connection that sends nothing, half a request head, or nothing more after
    /// a call, is closed once the head's time is up; after a stop, the call in progress is
    /// answered, then the server returns.
    #[tokio::test]
    async fn idle_connections_close_and_a_stop_finishes_the_calls_in_progress() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let slow = || async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            "done"
        };
        let router = axum::Router::new()
            .route("/", axum::routing::get(|| async { "ok" }))
            .route("/slow", axum::routing::get(slow));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let head = Duration::from_millis(300);
        let server = tokio::spawn(serve(listener, router, None, head, async {
            let _ = stopped.await;
        }));
        // What a connection is sent before the client waits: all it reads until it is closed.
        let closed_after = |sent: &'static [u8]| async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.write_all(sent).await.unwrap();
            let mut read = Vec::new();
            let started = Instant::now();
            let ended = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut read));
            assert!(ended.await.is_ok(), "not closed: {sent:?}");
            (
                String::from_utf8_lossy(&read).into_owned(),
                started.elapsed(),
            )
        };
        let (read, took) = closed_after(b"").await;
        assert!(
            read.is_empty() && took < Duration::from_secs(3),
            "{read} {took:?}"
        );
        let (read, _) = closed_after(b"GET / HTTP/1.1\r\nhost: x\r\n").await;
        assert!(!read.contains("200 OK"), "{read}");
        let (read, _) = closed_after(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
        assert!(
            read.starts_with("HTTP/1.1 200 OK"),
            "kept alive, then closed: {read}"
        );

        let call = tokio::spawn(closed_after(
            b"GET /slow HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).unwrap();
        let (read, _) = call.await.unwrap();
        assert!(read.ends_with("done"), "{read}");
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the server returns once its calls are done")
            .unwrap();
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "nothing more accepted"
        );
    }

    /// Files that cannot serve are refused before anything is served, each error naming the
    /// file: missing, no certificate, a key of another certificate.
    #[test]
    fn unusable_files_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = issued();
        let (_, other_key) = issued();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let files = |cert: &Path, key: &Path| TlsFiles {
            cert: cert.to_owned(),
            key: key.to_owned(),
        };
        let (cert, key, other_key) = (
            write("tls.crt", &cert),
            write("tls.key", &key),
            write("other.key", &other_key),
        );
        let empty = write("empty.crt", "");
        let missing = dir.path().join("missing.crt");
        assert!(server_config(&files(&cert, &key)).is_ok());
        for (files, named) in [
            (files(&missing, &key), &missing),
            (files(&empty, &key), &empty),
            (files(&cert, &other_key), &other_key),
            (files(&cert, &cert), &cert),
        ] {
            let error = format!("{:#}", server_config(&files).unwrap_err());
            assert!(error.contains(&named.display().to_string()), "{error}");
        }
    }
}
