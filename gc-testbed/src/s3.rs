//! A real S3-compatible server per test: `s3s-fs`, which keeps each bucket as a folder.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::process::{Supervised, free_port};
use crate::{Error, Result};

/// The environment variable naming the `s3s-fs` binary (`scripts/s3.sh` prints its path).
pub const S3S_FS_ENV: &str = "GC_TEST_S3S_FS";

/// How long the server may take to listen.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped server may take to stop listening.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// An `s3s-fs` server on a free loopback port, with its data in a temporary folder and one
/// access key.
///
/// Each top-level folder of the data folder is a bucket, and a bucket's objects are files under
/// it, so tests can make buckets ([`S3Server::create_bucket`]) and tamper with or remove objects
/// ([`S3Server::object_path`]) directly.
///
/// # Guarantees
///
/// The server stops and its folder is removed when this value is dropped or the test process
/// ends, however it ends (see the watchdog in `process.rs`).
#[derive(Debug)]
pub struct S3Server {
    endpoint: String,
    address: SocketAddr,
    root: PathBuf,
    access_key: String,
    secret_key: String,
    process: Option<Supervised>,
}

impl S3Server {
    /// Starts a server with no bucket, and waits until it listens.
    ///
    /// # Errors
    ///
    /// [`Error::Start`] when `$GC_TEST_S3S_FS` is unset or names no file (run `scripts/s3.sh`),
    /// or the server exits early or does not listen in time (with the end of its log).
    pub async fn start() -> Result<Self> {
        let binary = binary()?;
        match Self::start_with(&binary).await {
            Err(Error::Start(first)) => {
                // The free port may have been taken between our check and the server's bind.
                eprintln!("gc-testbed: retrying once after: {first}");
                Self::start_with(&binary).await
            }
            started => started,
        }
    }

    async fn start_with(binary: &Path) -> Result<Self> {
        let port = free_port()?;
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let access_key = format!("gc-test-{}-{port}", std::process::id());
        let secret_key = format!("gc-test-secret-{port}-{}", unique());
        let process = Supervised::spawn("s3s-fs", binary, |dir| {
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
        })?;
        let root = process.dir().join("data");
        let deadline = Instant::now() + READY_TIMEOUT;
        while !accepts(address) {
            process.check_alive()?;
            if Instant::now() > deadline {
                return Err(Error::Start(format!(
                    "s3s-fs did not listen on {address} within {READY_TIMEOUT:?}; its log ended \
                     with:\n{}",
                    process.log_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            endpoint: format!("http://{address}"),
            address,
            root,
            access_key,
            secret_key,
            process: Some(process),
        })
    }

    /// The server's URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// The access key the server accepts.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret key that goes with [`S3Server::access_key`].
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// Makes an empty bucket `name` (a folder in the data folder).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the folder cannot be made (for example when the bucket exists).
    pub fn create_bucket(&self, name: &str) -> Result<()> {
        let path = self.root.join(name);
        fs::create_dir(&path).map_err(|e| Error::io(format!("create bucket {name}"), e))
    }

    /// The file that holds object `key` of `bucket` (it may not exist).
    pub fn object_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.root.join(bucket).join(key)
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
                    "s3s-fs on {} to stop",
                    self.address
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

/// The `s3s-fs` binary named by [`S3S_FS_ENV`].
fn binary() -> Result<PathBuf> {
    let Some(path) = std::env::var_os(S3S_FS_ENV).filter(|p| !p.is_empty()) else {
        return Err(Error::Start(format!(
            "{S3S_FS_ENV} is unset; run scripts/s3.sh and set {S3S_FS_ENV} to the path it prints"
        )));
    };
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(Error::Start(format!(
            "{S3S_FS_ENV} names {}, which is not a file; run scripts/s3.sh and set {S3S_FS_ENV} \
             to the path it prints",
            path.display()
        )));
    }
    Ok(path)
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
