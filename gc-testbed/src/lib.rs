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

mod apiserver;
mod binaries;
mod crd;
mod fault;
mod namespace;
mod pods;
mod postgres;
mod process;
mod proxy;
mod s3;
mod service_account;
mod stall;

pub use apiserver::TestBed;
pub use binaries::{BIN_ENV, tool};
pub use crd::{
    SESSION_GROUP, SESSION_GROUP_IO, SESSION_KIND, SESSION_PLURAL, SESSION_VERSION,
    session_resource, session_resource_in,
};
pub use fault::{Fault, FaultProxy};
pub use namespace::TestNamespace;
pub use pods::FailedPod;
pub use postgres::{DATABASE_URL_ENV, TestDatabase};
pub use s3::{MOTO_ENV, S3Kind, S3S_FS_ENV, S3Server};
pub use stall::StallProxy;

/// What can go wrong while setting up a test fixture.
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

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

/// The test bed's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The HTTP status code of an API error, if `error` is one.
///
/// Tests pin the API server's behaviour by code (409, 410, 422, 403), as the collector does.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
