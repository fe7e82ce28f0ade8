//! A fault proxy for HTTP services on loopback (an object store, above all): it passes requests
//! on, or refuses, cuts or holds them on demand, so that tests can make a dependency fail
//! mid-run the way real ones do: a key that may list but not write, an outage, an upload
//! delivered after the client gave up.
//!
//! One request per connection: the proxy reads a request (head and `Content-Length` body),
//! decides by the current [`Fault`], and answers with `Connection: close`, so clients open a
//! fresh connection for the next request and a change of fault applies to it at once.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Error, Result};

/// What the proxy does with the next requests. A fault that names a `target` applies to the
/// writes (`PUT`, `POST`, `DELETE`) whose request line contains it (`".json"`: an archive, not
/// the sink probe), other requests pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every request passes.
    Pass,
    /// Writes to `target` are answered 403 `AccessDenied`, as S3 answers a key without
    /// `s3:PutObject` (`""`: every write); reads and lists pass.
    RefuseWrites(&'static str),
    /// Every connection is closed at once, unanswered: the store is down.
    Down,
    /// Writes to `target` are kept, unsent, and their connection closed unanswered (the client
    /// gives up); [`FaultProxy::deliver_held`] sends them later, as a slow gateway would.
    HoldWrites(&'static str),
    /// Writes to `target` wait, connection open and unanswered, until [`FaultProxy::set`]
    /// chooses another fault; then they are sent on and answered (a store that hangs, then
    /// comes back).
    StallWrites(&'static str),
}

/// The proxy's state, shared with its connections.
#[derive(Debug)]
struct Shared {
    upstream: SocketAddr,
    fault: tokio::sync::watch::Sender<Fault>,
    /// Requests kept by [`Fault::HoldWrites`], as they would be sent upstream.
    held: Mutex<Vec<Vec<u8>>>,
    /// How many writes [`Fault::StallWrites`] has stalled so far.
    stalled: std::sync::atomic::AtomicUsize,
}

/// A fault proxy on a free loopback port in front of `upstream`; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    endpoint: String,
    shared: Arc<Shared>,
    /// Stops the proxy's thread when sent or dropped.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream` (`http://127.0.0.1:PORT`), passing every request.
    ///
    /// # Errors
    /// [`Error::Start`] when `upstream` is not such a URL or no port can be bound.
    pub async fn start(upstream: &str) -> Result<Self> {
        let address = upstream
            .strip_prefix("http://")
            .and_then(|a| a.trim_end_matches('/').parse::<SocketAddr>().ok())
            .ok_or_else(|| Error::Start(format!("not an http://IP:PORT upstream: {upstream}")))?;
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| Error::io("bind the fault proxy", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::io("read the fault proxy's address", e))?
            .port();
        let shared = Arc::new(Shared {
            upstream: address,
            fault: tokio::sync::watch::Sender::new(Fault::Pass),
            held: Mutex::new(Vec::new()),
            stalled: std::sync::atomic::AtomicUsize::new(0),
        });
        let serving = Arc::clone(&shared);
        let stop = crate::proxy::serve_on_thread(listener, "fault proxy", move |client| {
            serve(client, Arc::clone(&serving))
        })?;
        Ok(Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            shared,
            stop: Some(stop),
        })
    }

    /// The proxy's URL, to give clients instead of the upstream's.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// What the proxy does with the requests it reads from now on.
    pub fn set(&self, fault: Fault) {
        self.shared.fault.send_replace(fault);
    }

    /// How many writes [`Fault::StallWrites`] has stalled so far (the ones sent on since
    /// included).
    pub fn stalled(&self) -> usize {
        self.shared
            .stalled
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many writes [`Fault::HoldWrites`] keeps unsent.
    pub fn held(&self) -> usize {
        self.shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Sends the held writes upstream now, in the order they came, and returns the HTTP status
    /// of each answer (a late delivery: the client that sent them gave up long ago).
    ///
    /// # Errors
    /// [`Error::Io`] when the upstream cannot be reached.
    pub async fn deliver_held(&self) -> Result<Vec<u16>> {
        let held: Vec<Vec<u8>> = std::mem::take(
            &mut *self
                .shared
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut statuses = Vec::with_capacity(held.len());
        for request in held {
            let mut upstream = TcpStream::connect(self.shared.upstream)
                .await
                .map_err(|e| Error::io("connect to the upstream", e))?;
            upstream
                .write_all(&request)
                .await
                .map_err(|e| Error::io("send a held request", e))?;
            let mut answer = Vec::new();
            upstream
                .read_to_end(&mut answer)
                .await
                .map_err(|e| Error::io("read a held request's answer", e))?;
            statuses.push(status_of(&answer).unwrap_or(0));
        }
        Ok(statuses)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;

/// One connection: one request, handled as the fault says.
async fn serve(mut client: TcpStream, shared: Arc<Shared>) {
    if *shared.fault.borrow() == Fault::Down {
        return;
    }
    let Some(request) = read_request(&mut client).await else {
        return;
    };
    let fault = *shared.fault.borrow();
    let write_to = |target: &str| {
        let line = request.split(|b| *b == b'\r').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        ["PUT ", "POST ", "DELETE "]
            .iter()
            .any(|m| line.starts_with(m))
            && line.contains(target)
    };
    match fault {
        Fault::RefuseWrites(target) if write_to(target) => {
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code>\
                        <Message>Access Denied</Message></Error>";
            let answer = format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.write_all(answer.as_bytes()).await;
        }
        Fault::HoldWrites(target) if write_to(target) => {
            shared
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(request);
        }
        Fault::StallWrites(target) if write_to(target) => {
            shared
                .stalled
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut changed = shared.fault.subscribe();
            let _ = changed
                .wait_for(|f| !matches!(f, Fault::StallWrites(_)))
                .await;
            let _ = pass(&mut client, &request, shared.upstream).await;
        }
        _ => {
            let _ = pass(&mut client, &request, shared.upstream).await;
        }
    }
}

/// Sends `request` upstream and copies the answer back, with `Connection: close`.
async fn pass(client: &mut TcpStream, request: &[u8], upstream: SocketAddr) -> std::io::Result<()> {
    let mut upstream = TcpStream::connect(upstream).await?;
    upstream.write_all(request).await?;
    let mut answer = Vec::new();
    upstream.read_to_end(&mut answer).await?;
    client.write_all(&with_close(&answer)).await?;
    client.shutdown().await
}

/// Reads one request (its head, and a `Content-Length` body) and returns it with
/// `Connection: close`; `None` when the client closes first or the request is too large.
async fn read_request(client: &mut TcpStream) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(end) = find(&bytes, b"\r\n\r\n") {
            break end + 4;
        }
        if bytes.len() > MAX_HEAD {
            return None;
        }
        let n = client.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while bytes.len() < head_end + length {
        let n = client.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buffer[..n]);
    }
    Some(with_close(&bytes))
}

/// `message` (a request or an answer) with `Connection: close` as its last header, replacing
/// any `Connection` header it had.
fn with_close(message: &[u8]) -> Vec<u8> {
    let Some(end) = find(message, b"\r\n\r\n") else {
        return message.to_vec();
    };
    let head = String::from_utf8_lossy(&message[..end]);
    let mut out = String::new();
    for line in head.split("\r\n") {
        if !line.to_ascii_lowercase().starts_with("connection:") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&message[end + 4..]);
    bytes
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The status of an HTTP answer.
fn status_of(answer: &[u8]) -> Option<u16> {
    let line = answer.split(|b| *b == b'\n').next()?;
    std::str::from_utf8(line)
        .ok()?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_close_replaces_the_connection_header() {
        let request = b"PUT /b/k HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\nbody";
        let closed = with_close(request);
        assert_eq!(
            closed,
            b"PUT /b/k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nbody".to_vec()
        );
        assert_eq!(
            status_of(b"HTTP/1.1 412 Precondition Failed\r\n"),
            Some(412)
        );
    }
}
