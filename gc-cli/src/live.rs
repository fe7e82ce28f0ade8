//! What the commands that talk to a cluster or a store share: connection flags, the store, the
//! async runtime and the progress line.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use gc_k8s::{Connection, Explicit, SecretString, Source};

use crate::Failure;

/// How to reach the cluster. Default: in-cluster when running in a Pod, else the kubeconfig.
#[derive(Debug, Args, Default)]
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
}

impl ConnectArgs {
    /// The connection these flags describe.
    pub(crate) fn connection(&self) -> Result<Connection, Failure> {
        let source = if let Some(api_url) = &self.api_url {
            let token = match &self.token_file {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .with_context(|| format!("cannot read --token-file {}", path.display()))
                        .map_err(Failure::usage)?
                        .trim()
                        .to_owned(),
                ),
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
            ..Connection::default()
        })
    }
}

/// Opens the store at `url`, or the embedded SQLite default.
pub(crate) async fn open_store(url: Option<&str>) -> anyhow::Result<gc_store::Store> {
    let url = match url {
        Some(url) => url.to_owned(),
        None => gc_store::default_path()
            .to_str()
            .context("the default store path is not UTF-8: give --store")?
            .to_owned(),
    };
    gc_store::open(&url).await.context("cannot open the store")
}

/// Runs `work` on a runtime of its own: the rest of the binary is synchronous.
pub(crate) fn block_on<T>(work: impl Future<Output = Result<T, Failure>>) -> Result<T, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(work)
}

/// Who holds the run lock: the host (the Pod's name in a cluster) and the process.
pub(crate) fn holder() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "gc-cli".into());
    format!("{host}-{}", std::process::id())
}

/// Waits for the run lock `lease` in `namespace` up to `wait_seconds`, polling every two seconds.
pub(crate) async fn take_lock(
    lock: &impl gc_core::ports::Lock,
    namespace: &str,
    lease: &str,
    holder: &str,
    wait_seconds: u64,
) -> Result<(), Failure> {
    // The lease outlives any run: a crashed run's lease expires after it.
    const TTL: u32 = 900;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait_seconds);
    loop {
        if lock
            .try_acquire(namespace, lease, holder, TTL)
            .await
            .context("cannot take the run lock")?
        {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(Failure::from(anyhow::anyhow!(
                "another run holds lease {lease} in namespace {namespace}; waited {wait_seconds}s; nothing was changed"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

/// A one-line progress report on a terminal's stderr; silent when stderr is not a terminal.
pub(crate) struct Progress {
    on: bool,
}

impl Progress {
    pub(crate) fn new() -> Self {
        Self {
            on: std::io::stderr().is_terminal(),
        }
    }
    pub(crate) fn update(&mut self, pages: usize, pods: usize) {
        if self.on {
            let _ = write!(std::io::stderr(), "\rlisting: {pages} pages, {pods} pods");
        }
    }
    pub(crate) fn done(&mut self) {
        if self.on {
            let _ = writeln!(std::io::stderr());
        }
    }
}
