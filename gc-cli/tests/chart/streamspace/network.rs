//! The cluster network as StreamSpace's Pods see it, on loopback: StreamSpace's PostgreSQL
//! Service at its own address and port 5432, database `streamspace`, user `streamspace` (the
//! chart's defaults), in front of the test bed's PostgreSQL; and the cluster's DNS names of
//! Services, reached through an HTTP `CONNECT` proxy (the Go client's `HTTPS_PROXY`), so that
//! TLS is checked against the Service's name as in a cluster.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::Result;

/// StreamSpace's PostgreSQL Service, as gc's Pods reach it.
pub(super) const DATABASE_ADDRESS: &str = "127.0.45.1";
/// gc's `serve` Pod's own address (the rendered `0.0.0.0` binds).
pub(super) const GC_POD_ADDRESS: &str = "127.0.45.2";

/// PostgreSQL's `SSLRequest` and `GSSENCRequest` codes, refused (`N`) as by a server without TLS:
/// the chart's `database.sslMode` is `disable`.
const ENCRYPTION_REQUESTS: [u32; 2] = [80_877_103, 80_877_104];
/// Protocol 3.0's startup message code.
const STARTUP: u32 = 196_608;

/// The network's servers, on a thread of their own (they go with the test binary).
pub(super) struct Network {
    /// The `CONNECT` proxy's URL, for `HTTPS_PROXY`.
    pub(super) proxy: String,
}

/// The database a client asks for, and who it says it is, as the façade passes them on.
pub(super) struct Facade {
    /// The test bed's PostgreSQL, `HOST:PORT`.
    pub(super) upstream: String,
    /// The database `streamspace` is, there.
    pub(super) database: String,
    /// The role `streamspace` is, there (its password is the Secret's).
    pub(super) user: String,
}

impl Network {
    /// Starts the database façade on [`DATABASE_ADDRESS`]:5432 and a `CONNECT` proxy that
    /// reaches each of `services` (`NAME:PORT` to `ADDRESS:PORT`) and nothing else.
    pub(super) fn start(facade: Facade, services: &[(String, String)]) -> Result<Self> {
        let database = std::net::TcpListener::bind((DATABASE_ADDRESS, 5432))?;
        let proxy = std::net::TcpListener::bind("127.0.0.1:0")?;
        let proxy_url = format!("http://{}", proxy.local_addr()?);
        database.set_nonblocking(true)?;
        proxy.set_nonblocking(true)?;
        let facade = Arc::new(facade);
        let services: Arc<HashMap<String, String>> = Arc::new(services.iter().cloned().collect());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let database = TcpListener::from_std(database).expect("a listener");
                let proxy = TcpListener::from_std(proxy).expect("a listener");
                loop {
                    tokio::select! {
                        Ok((client, _)) = database.accept() => {
                            tokio::spawn(postgres(client, facade.clone()));
                        }
                        Ok((client, _)) = proxy.accept() => {
                            tokio::spawn(connect(client, services.clone()));
                        }
                    }
                }
            });
        });
        Ok(Self { proxy: proxy_url })
    }
}

/// One PostgreSQL connection: its startup message's `database` and `user` checked to be the
/// chart's defaults and passed on as the test bed's, then every byte both ways.
async fn postgres(mut client: TcpStream, facade: Arc<Facade>) -> std::io::Result<()> {
    loop {
        let mut head = [0u8; 8];
        client.read_exact(&mut head).await?;
        let length = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
        let code = u32::from_be_bytes(head[4..].try_into().unwrap());
        let mut body = vec![0u8; length.saturating_sub(8)];
        client.read_exact(&mut body).await?;
        if ENCRYPTION_REQUESTS.contains(&code) {
            client.write_all(b"N").await?;
            continue;
        }
        assert_eq!(code, STARTUP, "a PostgreSQL startup message");
        let words: Vec<&[u8]> = body.split(|b| *b == 0).collect();
        let mut message = Vec::new();
        for pair in words.chunks(2) {
            let [key, value] = pair else { continue };
            if key.is_empty() {
                continue;
            }
            let value: &[u8] = match *key {
                b"database" => {
                    assert_eq!(*value, b"streamspace", "the database StreamSpace's is");
                    facade.database.as_bytes()
                }
                b"user" => {
                    assert_eq!(*value, b"streamspace", "StreamSpace's database user");
                    facade.user.as_bytes()
                }
                _ => value,
            };
            message.extend_from_slice(key);
            message.push(0);
            message.extend_from_slice(value);
            message.push(0);
        }
        message.push(0);
        let mut startup = ((message.len() + 8) as u32).to_be_bytes().to_vec();
        startup.extend_from_slice(&STARTUP.to_be_bytes());
        startup.extend_from_slice(&message);
        let mut server = TcpStream::connect(&facade.upstream).await?;
        server.write_all(&startup).await?;
        tokio::io::copy_bidirectional(&mut client, &mut server).await?;
        return Ok(());
    }
}

/// One `CONNECT NAME:PORT` to a Service: the tunnel to its address, or 502 for any other name.
async fn connect(
    mut client: TcpStream,
    services: Arc<HashMap<String, String>>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        let mut byte = [0u8; 1];
        if client.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let target = head
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("CONNECT "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_default();
    let Some(address) = services.get(target) else {
        client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            .await?;
        return Ok(());
    };
    let mut server = TcpStream::connect(address).await?;
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}
