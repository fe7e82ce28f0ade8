//! A real S3-compatible server per test: `s3s-fs`, which keeps each bucket as a folder, or
//! `moto`, which keeps them in memory and answers as AWS does.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::process::{Supervised, free_port};
use crate::{Error, Result};

/// The environment variable naming the `s3s-fs` binary (`scripts/s3.sh` prints its path).
pub const S3S_FS_ENV: &str = "GC_TEST_S3S_FS";
/// The environment variable naming the `moto_server` executable (`scripts/moto.sh` prints its
/// path).
pub const MOTO_ENV: &str = "GC_TEST_MOTO";

/// How long the server may take to listen.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped server may take to stop listening.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long creating a bucket over HTTP may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Which S3-compatible server an [`S3Server`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum S3Kind {
    /// `s3s-fs` (from crates.io): each bucket a folder, each object a file. Takes a write into a
    /// missing bucket (making its folder).
    S3sFs,
    /// `moto` (`moto[server]` from PyPI): buckets in memory, answers as AWS does (`NoSuchBucket`
    /// on a write into a missing bucket, `412 PreconditionFailed` on a create-only write over an
    /// object). Accepts any credentials.
    Moto,
}

impl S3Kind {
    /// Both kinds, for tests that run against each.
    pub const ALL: [Self; 2] = [Self::S3sFs, Self::Moto];

    /// The server's name, `s3s-fs` or `moto`.
    pub fn name(self) -> &'static str {
        match self {
            Self::S3sFs => "s3s-fs",
            Self::Moto => "moto",
        }
    }

    /// The environment variable naming the server's executable.
    fn env(self) -> &'static str {
        match self {
            Self::S3sFs => S3S_FS_ENV,
            Self::Moto => MOTO_ENV,
        }
    }

    /// The script that installs the server and prints its executable's path.
    fn script(self) -> &'static str {
        match self {
            Self::S3sFs => "scripts/s3.sh",
            Self::Moto => "scripts/moto.sh",
        }
    }
}

/// An S3-compatible server ([`S3Kind`]) on a free loopback port with no bucket, and one access
/// key.
///
/// Buckets are made with [`S3Server::create_bucket`]. With `s3s-fs`, each top-level folder of a
/// temporary data folder is a bucket, and a bucket's objects are files under it, so tests can
/// also tamper with or remove objects ([`S3Server::object_path`]) directly.
///
/// # Guarantees
///
/// The server stops and its folder is removed when this value is dropped or the test process
/// ends, however it ends (see the watchdog in `process.rs`).
#[derive(Debug)]
pub struct S3Server {
    kind: S3Kind,
    endpoint: String,
    address: SocketAddr,
    /// The data folder (`s3s-fs` only).
    root: Option<PathBuf>,
    access_key: String,
    secret_key: String,
    process: Option<Supervised>,
}

impl S3Server {
    /// Starts an `s3s-fs` server with no bucket, and waits until it listens.
    ///
    /// # Errors
    ///
    /// As [`S3Server::start_kind`].
    pub async fn start() -> Result<Self> {
        Self::start_kind(S3Kind::S3sFs).await
    }

    /// Starts a server of `kind` with no bucket, and waits until it listens.
    ///
    /// # Errors
    ///
    /// [`Error::Start`] when the kind's variable (`$GC_TEST_S3S_FS`, `$GC_TEST_MOTO`) is unset or
    /// names no file (run `scripts/s3.sh` or `scripts/moto.sh`), or the server exits early or
    /// does not listen in time (with the end of its log).
    pub async fn start_kind(kind: S3Kind) -> Result<Self> {
        let binary = binary(kind)?;
        match Self::start_with(kind, &binary).await {
            Err(Error::Start(first)) => {
                // The free port may have been taken between our check and the server's bind.
                eprintln!("gc-testbed: retrying once after: {first}");
                Self::start_with(kind, &binary).await
            }
            started => started,
        }
    }

    async fn start_with(kind: S3Kind, binary: &Path) -> Result<Self> {
        let port = free_port()?;
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        // moto takes any credentials; these are of the same form for both kinds.
        let access_key = format!("gc-test-{}-{port}", std::process::id());
        let secret_key = format!("gc-test-secret-{port}-{}", unique());
        let process = Supervised::spawn(kind.name(), binary, |dir| match kind {
            S3Kind::S3sFs => {
                let root = dir.join("data");
                fs::create_dir(&root)
                    .map_err(|e| Error::io(format!("create {}", root.display()), e))?;
                Ok(vec![
                    "--host".to_owned(),
                    "127.0.0.1".to_owned(),
                    "--port".to_owned(),
                    port.to_string(),
                    "--access-key".to_owned(),
                    access_key.clone(),
                    "--secret-key".to_owned(),
                    secret_key.clone(),
                    root.display().to_string(),
                ])
            }
            S3Kind::Moto => Ok(vec![
                "-H".to_owned(),
                "127.0.0.1".to_owned(),
                "-p".to_owned(),
                port.to_string(),
            ]),
        })?;
        let root = (kind == S3Kind::S3sFs).then(|| process.dir().join("data"));
        let deadline = Instant::now() + READY_TIMEOUT;
        while !accepts(address) {
            process.check_alive()?;
            if Instant::now() > deadline {
                return Err(Error::Start(format!(
                    "{} did not listen on {address} within {READY_TIMEOUT:?}; its log ended \
                     with:\n{}",
                    kind.name(),
                    process.log_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            kind,
            endpoint: format!("http://{address}"),
            address,
            root,
            access_key,
            secret_key,
            process: Some(process),
        })
    }

    /// Which server this is.
    pub fn kind(&self) -> S3Kind {
        self.kind
    }

    /// The server's URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// The access key the server accepts (moto accepts any).
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret key that goes with [`S3Server::access_key`].
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// Makes an empty bucket `name`: a folder in the data folder (`s3s-fs`), or an unsigned
    /// `PUT /name` (moto, which takes it).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the folder cannot be made (for example when the bucket exists), or
    /// moto cannot be reached or answers other than `200` (it answers `200` for a bucket that
    /// exists, as AWS does in `us-east-1`).
    pub fn create_bucket(&self, name: &str) -> Result<()> {
        let what = || format!("create bucket {name}");
        match &self.root {
            Some(root) => fs::create_dir(root.join(name)).map_err(|e| Error::io(what(), e)),
            None => {
                let status = put_empty(self.address, &format!("/{name}"))
                    .map_err(|e| Error::io(what(), e))?;
                if status.split(' ').nth(1) == Some("200") {
                    Ok(())
                } else {
                    Err(Error::io(
                        what(),
                        std::io::Error::other(format!("{} answered {status}", self.kind.name())),
                    ))
                }
            }
        }
    }

    /// The file that holds object `key` of `bucket` (it may not exist).
    ///
    /// # Panics
    ///
    /// On a moto server, which keeps objects in memory: only `s3s-fs` has files.
    pub fn object_path(&self, bucket: &str, key: &str) -> PathBuf {
        let Some(root) = &self.root else {
            panic!(
                "S3Server::object_path: {} keeps no files (only s3s-fs does)",
                self.kind.name()
            );
        };
        root.join(bucket).join(key)
    }

    /// Stops the server and waits until its port refuses connections. Its folder is removed.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] when the port still accepts connections after ten seconds.
    pub async fn stop(&mut self) -> Result<()> {
        // Dropping the watchdog's lifeline stops the server.
        drop(self.process.take());
        let deadline = Instant::now() + STOP_TIMEOUT;
        while accepts(self.address) {
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!(
                    "{} on {} to stop",
                    self.kind.name(),
                    self.address
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

/// The executable of `kind` named by its environment variable.
fn binary(kind: S3Kind) -> Result<PathBuf> {
    let (env, script) = (kind.env(), kind.script());
    let Some(path) = std::env::var_os(env).filter(|p| !p.is_empty()) else {
        return Err(Error::Start(format!(
            "{env} is unset; run {script} and set {env} to the path it prints"
        )));
    };
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(Error::Start(format!(
            "{env} names {}, which is not a file; run {script} and set {env} to the path it \
             prints",
            path.display()
        )));
    }
    Ok(path)
}

/// Sends `PUT path` with an empty body to `address` (HTTP/1.1, one request, unsigned) and
/// returns the answer's status line.
fn put_empty(address: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&address, REQUEST_TIMEOUT)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    write!(
        stream,
        "PUT {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    Ok(answer.lines().next().unwrap_or_default().trim().to_owned())
}

/// Whether something accepts connections on `address` now.
fn accepts(address: SocketAddr) -> bool {
    TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
}

/// A number that differs between calls and between processes.
fn unique() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    nanos ^ (u128::from(NEXT.fetch_add(1, Ordering::Relaxed)) << 64)
}
