//! Test support: a real kube-apiserver (with etcd) per test binary, and fresh PostgreSQL databases.
//!
//! The API server is the real one, built from source by `scripts/testbed-build.sh` and found
//! through `$GC_TESTBED_BIN`. It starts on first use, once per test binary, on free loopback
//! ports; each test takes its own namespace from it. The servers are stopped and their files
//! removed when the test binary ends, however it ends.
//!
//! ```no_run
//! # async fn example() -> gc_testbed::Result<()> {
//! use gc_testbed::{FailedPod, TestBed};
//! use k8s_openapi::api::core::v1::Pod;
//!
//! let bed = TestBed::shared().await?;
//! let ns = bed.namespace("example").await?;
//! let pod = FailedPod::new("p").label("app", "x").create(&ns.api::<Pod>()).await?;
//! # Ok(()) }
//! ```
//!
//! All of that is the default feature `servers`. Beside it, [`layout`] reads a crate's module
//! graph from its source for the tests that hold each crate's layout (no import cycle, no file
//! circle); it needs no dependency, so gc-core and gc-runtime take this crate without `servers`.

#[cfg(feature = "servers")]
mod apiserver;
#[cfg(feature = "servers")]
mod binaries;
#[cfg(feature = "servers")]
mod crd;
#[cfg(feature = "servers")]
mod fault;
#[cfg(feature = "servers")]
mod namespace;
#[cfg(feature = "servers")]
mod pods;
#[cfg(feature = "servers")]
mod postgres;
#[cfg(feature = "servers")]
mod process;
#[cfg(feature = "servers")]
mod proxy;
#[cfg(feature = "servers")]
mod s3;
#[cfg(feature = "servers")]
mod service_account;
#[cfg(feature = "servers")]
mod stall;

pub mod layout;

#[cfg(feature = "servers")]
pub use apiserver::TestBed;
#[cfg(feature = "servers")]
pub use binaries::{BIN_ENV, tool};
#[cfg(feature = "servers")]
pub use crd::{
    SESSION_GROUP, SESSION_GROUP_IO, SESSION_KIND, SESSION_PLURAL, SESSION_VERSION,
    session_resource, session_resource_in,
};
#[cfg(feature = "servers")]
pub use fault::{Fault, FaultProxy};
#[cfg(feature = "servers")]
pub use namespace::TestNamespace;
#[cfg(feature = "servers")]
pub use pods::FailedPod;
#[cfg(feature = "servers")]
pub use postgres::{DATABASE_URL_ENV, TestDatabase};
#[cfg(feature = "servers")]
pub use s3::{MOTO_ENV, S3Kind, S3S_FS_ENV, S3Server};
#[cfg(feature = "servers")]
pub use stall::StallProxy;

/// What can go wrong while setting up a test fixture.
#[cfg(feature = "servers")]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The API server or etcd could not be started or did not become ready.
    #[error("test bed: {0}")]
    Start(String),
    /// The API server answered with an error, or could not be reached.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A kubeconfig could not be read.
    #[error(transparent)]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// A fixture object could not be converted.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// No database is configured although one is required, or PostgreSQL refused a fixture.
    #[error("test database: {0}")]
    Database(String),
    /// PostgreSQL answered with an error, or could not be reached.
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
    /// Something did not happen in time.
    #[error("timed out waiting for {0}")]
    Timeout(String),
}

#[cfg(feature = "servers")]
impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

/// The test bed's result type.
#[cfg(feature = "servers")]
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The HTTP status code of an API error, if `error` is one.
///
/// Tests pin the API server's behaviour by code (409, 410, 422, 403), as the collector does.
#[cfg(feature = "servers")]
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
