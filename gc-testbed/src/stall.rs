//! A TCP proxy on loopback that passes bytes both ways until it is told to stall, or until a
//! client sends a chosen piece of text (a statement, say): from then on every connection, open or
//! new, stays open and nothing more is passed either way. A dependency whose connections are
//! established and then go silent, as a database behind a frozen network path does; the
//! bytes are sent on when [`StallProxy::resume`] is called.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Error, Result};

/// What the proxy shares with its connections.
#[derive(Debug)]
struct Shared {
    upstream: Option<SocketAddr>,
    /// `true` while nothing is passed.
    stalled: tokio::sync::watch::Sender<bool>,
    /// Text that, sent by a client, stalls the proxy before it is passed on.
    trigger: Option<Vec<u8>>,
}

/// A stalling TCP proxy on a free loopback port; stops when dropped.
#[derive(Debug)]
pub struct StallProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl StallProxy {
    /// A proxy in front of `upstream` that stalls when a client sends `trigger` (never when
    /// `None`: then only [`StallProxy::stall`] does).
    ///
    /// # Errors
    /// [`Error::Io`] when no port can be bound.
    pub fn start(upstream: SocketAddr, trigger: Option<&str>) -> Result<Self> {
        Self::with(Some(upstream), trigger)
    }

    /// A listener that accepts every connection and never answers: a server that hangs.
    ///
    /// # Errors
    /// [`Error::Io`] when no port can be bound.
    pub fn silent() -> Result<Self> {
        let proxy = Self::with(None, None)?;
        proxy.stall();
        Ok(proxy)
    }

    fn with(upstream: Option<SocketAddr>, trigger: Option<&str>) -> Result<Self> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| Error::io("bind the stall proxy", e))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::io("read the stall proxy's address", e))?;
        let shared = Arc::new(Shared {
            upstream,
            stalled: tokio::sync::watch::Sender::new(false),
            trigger: trigger.map(|t| t.as_bytes().to_vec()),
        });
        let serving = Arc::clone(&shared);
        let stop = crate::proxy::serve_on_thread(listener, "stall proxy", move |client| {
            connection(client, Arc::clone(&serving))
        })?;
        Ok(Self {
            address,
            shared,
            stop: Some(stop),
        })
    }

    /// The proxy's address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops passing bytes, on every connection.
    pub fn stall(&self) {
        self.shared.stalled.send_replace(true);
    }

    /// Passes bytes again, those held first.
    pub fn resume(&self) {
        self.shared.stalled.send_replace(false);
    }

    /// Whether the proxy is stalled.
    pub fn stalled(&self) -> bool {
        *self.shared.stalled.borrow()
    }
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One client: bytes copied both ways, each chunk only while the proxy is not stalled.
async fn connection(client: TcpStream, shared: Arc<Shared>) {
    let Some(upstream) = shared.upstream else {
        // Silent: hold the connection open, unanswered, until the client goes.
        let mut client = client;
        let mut sink = [0u8; 4096];
        while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
        return;
    };
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = copy(client_read, server_write, Arc::clone(&shared), true);
    let down = copy(server_read, client_write, shared, false);
    tokio::join!(up, down);
}

/// Copies `from` to `to`, waiting before each chunk while the proxy is stalled; a chunk from the
/// client holding the trigger stalls the proxy first.
async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    shared: Arc<Shared>,
    from_client: bool,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut stalled = shared.stalled.subscribe();
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buffer[..n];
        if from_client
            && let Some(trigger) = &shared.trigger
            && chunk
                .windows(trigger.len())
                .any(|w| w == trigger.as_slice())
        {
            shared.stalled.send_replace(true);
        }
        if stalled.wait_for(|s| !*s).await.is_err() {
            break;
        }
        if to.write_all(chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
