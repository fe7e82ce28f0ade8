//! The request API's server on real sockets: its certificate served and read again when it
//! changes, idle and unauthenticated connections closed at their time, the anonymous pool's
//! order, a stop that finishes the calls in progress, unusable files named.

use super::*;

/// The API's limits, a request's head given `header_timeout`.
fn limits(header_timeout: Duration) -> Limits {
    Limits {
        header_timeout,
        ..crate::serve::api::ApiOptions::default().limits()
    }
}

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
    let limits = limits(HANDSHAKE);
    let server = tokio::spawn(serve(listener, router, Some(config), limits, async {
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
    let server = tokio::spawn(serve(listener, router, None, limits(head), async {
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

/// A connection from `source` (an address of 127/8), as the pool sees it.
fn from(source: &str) -> SocketAddr {
    SocketAddr::new(source.parse().unwrap(), 40000)
}

/// Which of `doors` were closed to make room.
fn evicted(doors: &[&Arc<Door>]) -> Vec<bool> {
    (doors.iter())
        .map(|d| d.mark.evicted.load(Ordering::SeqCst))
        .collect()
}

/// The anonymous pool holds its bound, not one fewer; past it, a new connection closes the
/// oldest of the address holding the most (one not in a call first), never another
/// address's while that one holds more; an authenticated connection leaves the pool, and
/// takes one of the authenticated places, of which there are no more than the bound.
#[tokio::test]
async fn the_anonymous_pool_closes_the_oldest_of_the_source_holding_the_most() {
    let doors = Doors::new(Limits {
        connections: 2,
        anonymous: 3,
        ..limits(HANDSHAKE)
    });
    let (a1, a2, b1) = (
        doors.admit(from("127.0.0.2")),
        doors.admit(from("127.0.0.2")),
        doors.admit(from("127.0.0.3")),
    );
    assert_eq!(evicted(&[&a1, &a2, &b1]), [false; 3], "three places");
    let a3 = doors.admit(from("127.0.0.2"));
    assert_eq!(evicted(&[&a1, &a2, &b1, &a3]), [true, false, false, false]);
    // The oldest of the address holding the most, passing over one in a call.
    let calling = Calling::new(&a2);
    let c1 = doors.admit(from("::ffff:127.0.0.4"));
    assert_eq!(evicted(&[&a2, &b1, &a3, &c1]), [false, false, true, false]);
    drop(calling);
    let a4 = doors.admit(from("127.0.0.2"));
    assert_eq!(evicted(&[&a2, &b1, &c1, &a4]), [true, false, false, false]);
    // Each address holds one: the oldest goes.
    let d1 = doors.admit(from("127.0.0.5"));
    assert_eq!(evicted(&[&b1, &c1, &a4, &d1]), [true, false, false, false]);
    // Authenticated: out of the pool (never closed to make room), two places at most.
    assert!(c1.authenticated() && a4.authenticated());
    assert!(!d1.authenticated(), "every authenticated place is taken");
    // A flood from one address closes its own, never the other's.
    let flood: Vec<_> = (0..5).map(|_| doors.admit(from("127.0.0.2"))).collect();
    assert_eq!(evicted(&[&c1, &a4, &d1]), [false; 3]);
    let flooded = flood
        .iter()
        .filter(|d| d.mark.evicted.load(Ordering::SeqCst));
    assert_eq!(
        flooded.count(),
        3,
        "two of its five hold the places d1 left"
    );
    drop(c1);
    let e1 = doors.admit(from("127.0.0.6"));
    assert!(e1.authenticated(), "a place given back is taken again");
}

/// A connection whose caller is not authenticated is closed at its time (well before the
/// head's), once its call in progress is answered; one whose caller was authenticated stays
/// kept alive.
#[tokio::test]
async fn an_unauthenticated_connection_closes_at_its_time() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let door = |axum::Extension(door): axum::Extension<Arc<Door>>,
                axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
                headers: axum::http::HeaderMap| async move {
        assert_eq!(door.peer(), peer);
        if headers.contains_key("x-slow") {
            tokio::time::sleep(Duration::from_millis(800)).await;
        }
        if headers.contains_key("x-authenticated") {
            assert!(door.authenticated());
        }
        "ok"
    };
    let router = axum::Router::new().route("/", axum::routing::get(door));
    let limits = Limits {
        anonymous_timeout: Duration::from_millis(500),
        ..limits(Duration::from_secs(10))
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, router, None, limits, async {
        let _ = stopped.await;
    }));
    // What a connection reads after sending `sent`, until closed or a few seconds passed;
    // and when it was closed.
    let read_after = |sent: &'static [u8]| async move {
        let started = Instant::now();
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(sent).await.unwrap();
        let mut read = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut read));
        let closed = ended.await.is_ok().then(|| started.elapsed());
        (String::from_utf8_lossy(&read).into_owned(), closed)
    };
    let (nothing, anonymous, slow, authenticated) = tokio::join!(
        read_after(b""),
        read_after(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n"),
        read_after(b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: 1\r\n\r\n"),
        read_after(b"GET / HTTP/1.1\r\nhost: x\r\nx-authenticated: 1\r\n\r\n"),
    );
    let within = |closed: Option<Duration>, from: u64, to: u64| {
        closed.is_some_and(|t| t >= Duration::from_millis(from) && t < Duration::from_millis(to))
    };
    assert!(
        nothing.0.is_empty() && within(nothing.1, 400, 2000),
        "{nothing:?}"
    );
    assert!(
        anonymous.0.ends_with("ok") && within(anonymous.1, 400, 2000),
        "{anonymous:?}"
    );
    assert!(
        slow.0.ends_with("ok") && within(slow.1, 750, 2000),
        "answered first: {slow:?}"
    );
    assert!(authenticated.0.ends_with("ok"), "{authenticated:?}");
    assert_eq!(authenticated.1, None, "kept alive: {authenticated:?}");
    stop.send(()).unwrap();
    server.await.unwrap();
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
