//! What the commands that talk to a cluster or a store share: connection flags, the store, the
//! async runtime and the progress line.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clap::builder::TypedValueParser as _;
use gc_k8s::{Connection, Explicit, SecretString, Source};
use gc_runtime::durations::timeout;

use crate::exit::UsageError;

/// How to reach the cluster. Default: in-cluster when running in a Pod, else the kubeconfig.
#[derive(Debug, Args)]
pub(crate) struct ConnectArgs {
    /// Kubeconfig file (default `$KUBECONFIG`, else `~/.kube/config`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["in_cluster", "api_url"])]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["in_cluster", "api_url"])]
    context: Option<String>,
    /// Use the Pod's ServiceAccount.
    #[arg(long, conflicts_with = "api_url")]
    in_cluster: bool,
    /// API server URL, with `--token-file` (the Kestra flow's `api_url` input).
    #[arg(long, value_name = "URL")]
    api_url: Option<String>,
    /// File holding the bearer token (the flow's `token`); also `$GC_K8S_TOKEN`.
    #[arg(long, value_name = "FILE", requires = "api_url")]
    token_file: Option<PathBuf>,
    /// CA bundle as base64 PEM (the flow's `ca_cert_data`).
    #[arg(long, value_name = "BASE64", requires = "api_url")]
    ca_cert_data: Option<String>,
    /// Accept any server certificate (the flow's `trust_certs`; test clusters only).
    #[arg(long, requires = "api_url")]
    trust_certs: bool,
    /// How long a call to the API server may wait for its answer before it fails.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = timeout)]
    api_timeout: Duration,
}

impl ConnectArgs {
    /// The connection these flags describe.
    ///
    /// # Errors
    /// A [`UsageError`] when `--token-file` cannot be read.
    pub(crate) fn connection(&self) -> Result<Connection, UsageError> {
        let source = if let Some(api_url) = &self.api_url {
            let token = match &self.token_file {
                Some(path) => {
                    let text = std::fs::read_to_string(path);
                    let text = text.map_err(|e| UsageError::unreadable("--token-file", path, e))?;
                    Some(text.trim().to_owned())
                }
                None => std::env::var("GC_K8S_TOKEN").ok(),
            };
            Source::Explicit(Explicit {
                api_url: api_url.clone(),
                token: token.map(SecretString::from),
                ca_cert_data: self.ca_cert_data.clone(),
                trust_certs: self.trust_certs,
            })
        } else if self.in_cluster {
            Source::InCluster
        } else if self.kubeconfig.is_some() || self.context.is_some() {
            Source::Kubeconfig {
                path: self.kubeconfig.clone(),
                context: self.context.clone(),
            }
        } else {
            Source::Auto
        };
        Ok(Connection {
            source,
            connect_timeout: self.api_timeout.min(Duration::from_secs(10)),
            read_timeout: self.api_timeout,
        })
    }

    /// Connects to the cluster as these flags say.
    ///
    /// # Errors
    /// A [`UsageError`] when `--token-file` cannot be read; the connection's error otherwise.
    pub(crate) async fn cluster(&self) -> anyhow::Result<gc_k8s::KubeCluster> {
        let c = self.connection()?;
        Context::context(gc_k8s::connect(&c).await, "cannot connect to the cluster")
    }
}

/// `work` on the store `url` names (`None`: the embedded one), each call bounded by `timeout`, on
/// a runtime of its own; the store is closed after, whatever `work` returned.
pub(crate) fn with_store<T, E: Into<anyhow::Error>>(
    (url, timeout): (Option<&str>, Duration),
    work: impl AsyncFnOnce(&gc_store::Store) -> Result<T, E>,
) -> anyhow::Result<T> {
    block_on(async {
        let store = gc_runtime::adapters::open_store_within(url, timeout).await?;
        let done = work(&store).await;
        store.close().await;
        done.map_err(Into::into)
    })
}

/// Runs `work` on a runtime of its own: the rest of the binary is synchronous.
pub(crate) fn block_on<T>(work: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(work)
}

/// How a run takes the one-run-at-a-time lock of its namespace, and how many objects it works
/// on at once under it.
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    /// Objects (or Pods) a run works on at once, each still walking its whole fenced protocol
    /// in order; 1 works one after another (1..=64).
    #[arg(long, env = "GC_CONCURRENCY", default_value_t = gc_core::pipeline::DEFAULT_CONCURRENCY,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(u16)
            .range(1..=gc_core::pipeline::MAX_CONCURRENCY as i64)
            .map(usize::from))]
    pub(crate) concurrency: usize,
    /// How long to wait for another run on the same namespace to finish (`5m`; a bare number is
    /// seconds).
    #[arg(long = "lock-wait", alias = "lock-wait-seconds", default_value = "5m", value_name = "DURATION",
        value_parser = |s: &str| gc_runtime::durations::seconds_within(s, 0..=u64::from(u32::MAX)))]
    lock_wait_seconds: u64,
    /// The run lock's lease: renewed every third of it while the run works, so a crashed run's
    /// lock frees itself this long after the crash (5s..=5m; a bare number is seconds).
    #[arg(long = "lock-lease", alias = "lock-lease-seconds", default_value = "30s", value_name = "DURATION",
        value_parser = |s: &str| gc_runtime::durations::seconds_within(s, 5..=300))]
    lock_lease_seconds: u64,
}

impl LockArgs {
    /// The lock's options these flags give.
    pub(crate) fn options(&self) -> gc_runtime::LockOptions {
        gc_runtime::LockOptions {
            wait: Duration::from_secs(self.lock_wait_seconds),
            lease_seconds: u32::try_from(self.lock_lease_seconds).unwrap_or(300),
        }
    }
}
