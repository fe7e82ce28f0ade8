//! What the commands that talk to a cluster or a store share: connection flags, the store, the
//! async runtime and the progress line.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use gc_core::ports::Lock as _;
use gc_k8s::{Connection, Explicit, SecretString, Source};

use crate::exit::UsageError;

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
    ///
    /// # Errors
    /// A [`UsageError`] when `--token-file` cannot be read.
    pub(crate) fn connection(&self) -> Result<Connection, UsageError> {
        let source = if let Some(api_url) = &self.api_url {
            let token = match &self.token_file {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .map_err(|e| UsageError::unreadable("--token-file", path, e))?
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

impl ConnectArgs {
    /// Connects to the cluster as these flags say.
    ///
    /// # Errors
    /// A [`UsageError`] when `--token-file` cannot be read; the connection's error otherwise.
    pub(crate) async fn cluster(&self) -> anyhow::Result<gc_k8s::KubeCluster> {
        let connection = self.connection()?;
        gc_k8s::connect(&connection)
            .await
            .context("cannot connect to the cluster")
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
pub(crate) fn block_on<T>(work: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(work)
}

/// Who holds the run lock: the host (the Pod's name in a cluster) and the process.
/// The start instant makes it unique even where two processes share a host name and a pid (a
/// container restarted in the same Pod runs as pid 1 again).
fn holder() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "gc-cli".into());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{host}-{}-{started:x}", std::process::id())
}

/// How a run takes the one-run-at-a-time lock of its namespace.
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    /// How long to wait for another run on the same namespace to finish.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    lock_wait_seconds: u64,
    /// The run lock's lease: renewed every third of it while the run works, so a crashed run's
    /// lock frees itself this long after the crash (5..=300).
    #[arg(long, default_value_t = 30, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(5..=300))]
    lock_lease_seconds: u32,
}

/// The run lock of a namespace, held and renewed in the background until released. When the
/// lock is lost ([`RunLock::halt`]: another run wrote the Lease, it expired, or no renewal
/// succeeded for two thirds of the lease, however the process spent that time, frozen
/// included), or a termination signal asks the process to stop ([`crate::signals`]),
/// [`RunLock::stop`] is set and the run writes nothing more. A dry run takes no Lease: it writes
/// nothing but server-side dry runs, and only a signal stops it.
pub(crate) struct RunLock {
    cluster: gc_k8s::KubeCluster,
    namespace: String,
    name: String,
    holder: String,
    stop: Arc<AtomicBool>,
    state: Arc<LockState>,
    /// The renewal task; `None` for a dry run, which holds no Lease.
    renewer: Option<tokio::task::JoinHandle<()>>,
}

/// What the run and the renewal task share: when the Lease was last renewed, and whether (and
/// why) it is lost. Once lost, never held again.
struct LockState {
    /// When the last successful renewal (or the acquisition) was sent.
    renewed: Mutex<Instant>,
    /// How long the run may go without a renewal: two thirds of the lease.
    grace: Duration,
    /// Why the lock is lost, once it is.
    lost: Mutex<Option<String>>,
    /// No Lease at all (a dry run): never lost.
    none: bool,
}

impl LockState {
    fn lose(&self, why: String) {
        let mut lost = self
            .lost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lost.is_none() {
            tracing::error!("{why}; stopping");
            *lost = Some(why);
        }
    }
    fn lost(&self) -> Option<String> {
        self.lost
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
    fn renewed(&self) -> Instant {
        *self
            .renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl gc_core::ports::Halt for LockState {
    /// Lost, or not renewed for two thirds of the lease: read before every write, so that a
    /// process frozen past its lease writes nothing after it resumes, whichever task runs first.
    fn halted(&self) -> bool {
        if self.none {
            return false;
        }
        let since = self.renewed().elapsed();
        if since >= self.grace {
            self.lose(format!(
                "the run lock was not renewed for {}s (it lasts {}s): another run may hold it",
                since.as_secs(),
                self.grace.as_secs() * 3 / 2
            ));
        }
        self.lost().is_some()
    }
}

impl RunLock {
    /// Waits for the lease `name` in `namespace` up to `--lock-wait-seconds`, polling every
    /// second, then renews it every third of its duration. Hooks the termination signals first:
    /// once one arrives, no lock is taken and the held ones stop their runs. A dry run takes
    /// no Lease and only hooks the signals.
    pub(crate) async fn take(
        cluster: &gc_k8s::KubeCluster,
        namespace: &str,
        name: &str,
        args: &LockArgs,
        dry_run: bool,
    ) -> anyhow::Result<Self> {
        crate::signals::install()?;
        let holder = holder();
        let lease = args.lock_lease_seconds;
        let stopped = |when: &str| {
            crate::signals::received().map(|signal| {
                anyhow::Error::new(crate::signals::Stopped::new(format!(
                    "stopped by {signal} {when} the run lock {name} in namespace {namespace}; nothing was changed"
                )))
            })
        };
        if let Some(stopped) = stopped("before taking") {
            return Err(stopped);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(LockState {
            renewed: Mutex::new(Instant::now()),
            grace: Duration::from_secs(u64::from(lease)) * 2 / 3,
            lost: Mutex::new(None),
            none: dry_run,
        });
        let mut lock = Self {
            cluster: cluster.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            holder,
            stop,
            state,
            renewer: None,
        };
        if dry_run {
            crate::signals::register(&lock.stop);
            return Ok(lock);
        }
        let deadline = Instant::now() + Duration::from_secs(args.lock_wait_seconds);
        let held = loop {
            let sent = Instant::now();
            let taken = cluster
                .acquire(namespace, name, &lock.holder, lease)
                .await
                .context("cannot take the run lock")?;
            if let Some(held) = taken {
                *lock
                    .state
                    .renewed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = sent;
                break held;
            }
            if let Some(stopped) = stopped("while waiting for") {
                return Err(stopped);
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "another run holds lease {name} in namespace {namespace}; waited {}s; nothing was changed",
                    args.lock_wait_seconds
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        crate::signals::register(&lock.stop);
        lock.renewer = Some(tokio::spawn(renew(
            Renewer {
                cluster: cluster.clone(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                holder: lock.holder.clone(),
                lease,
            },
            held,
            Arc::clone(&lock.state),
            Arc::clone(&lock.stop),
        )));
        Ok(lock)
    }

    /// Set when the lock is lost, or when a termination signal asks the process to stop.
    pub(crate) fn stop(&self) -> &AtomicBool {
        &self.stop
    }

    /// Halted only when the lock is lost (or may be), never by a signal: for a caller that
    /// finishes the target in progress on a signal and checks [`crate::signals::received`]
    /// between targets.
    pub(crate) fn halt(&self) -> &dyn gc_core::ports::Halt {
        &*self.state
    }

    /// The error of a run whose lock was lost, when it was: it wrote nothing after it noticed.
    pub(crate) fn lost(&self) -> Option<anyhow::Error> {
        use gc_core::ports::Halt as _;
        self.state.halted();
        self.state.lost().map(|why| {
            anyhow::Error::new(LockLost(format!(
                "lost the run lock {} in namespace {}: {why}; this run wrote nothing after it \
                 noticed, and the next run resumes",
                self.name, self.namespace
            )))
        })
    }

    /// Stops renewing and gives the lease up. A failure is a warning: the lease expires by
    /// itself within its duration. A lost lease is left as it is.
    pub(crate) async fn release(self) {
        let Some(renewer) = self.renewer else {
            return;
        };
        renewer.abort();
        if let Some(signal) = crate::signals::received() {
            tracing::warn!(
                "{signal} received: releasing the run lock {} in namespace {}; the next run resumes",
                self.name,
                self.namespace
            );
        }
        if self.state.lost().is_some() {
            return;
        }
        if let Err(e) = self
            .cluster
            .release(&self.namespace, &self.name, &self.holder)
            .await
        {
            tracing::warn!(
                "cannot release the run lock {} (it expires by itself): {e}",
                self.name
            );
        }
    }
}

/// A run that lost its lock: it wrote nothing after it noticed, and posts no Event.
#[derive(Debug)]
pub(crate) struct LockLost(String);

impl std::fmt::Display for LockLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LockLost {}

/// Whether the run that ended with `error` lost its lock ([`LockLost`] in its chain).
pub(crate) fn lock_lost(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.is::<LockLost>())
}

/// Which Lease a renewal task renews.
struct Renewer {
    cluster: gc_k8s::KubeCluster,
    namespace: String,
    name: String,
    holder: String,
    lease: u32,
}

/// Renews the lease every third of its duration (every second after a failed renewal), fenced
/// on the last renewal; marks the lock
/// lost, and sets `stop`, when the Lease expired or was written by anyone else since, or when no
/// renewal succeeded for two thirds of the lease (before it could expire). It never takes back a
/// lease it let lapse.
async fn renew(r: Renewer, mut held: gc_k8s::Held, state: Arc<LockState>, stop: Arc<AtomicBool>) {
    use gc_core::ports::Halt as _;
    let period = Duration::from_secs(u64::from(r.lease)) / 3;
    // After a failed renewal, tries again soon: the lock is lost two thirds of the lease after
    // the last renewal, only one period after a failed one.
    let retry = Duration::from_secs(1).min(period);
    let name = &r.name;
    let mut wait = period;
    loop {
        tokio::time::sleep(wait).await;
        if state.halted() {
            break;
        }
        let sent = Instant::now();
        match r
            .cluster
            .renew(&r.namespace, name, &r.holder, r.lease, &held)
            .await
        {
            Ok(gc_k8s::Renewal::Renewed(now)) => {
                held = now;
                wait = period;
                *state
                    .renewed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = sent;
            }
            Ok(gc_k8s::Renewal::Lost(why)) => {
                state.lose(format!("the run lock {name} is lost: {why}"));
                break;
            }
            Err(e) => {
                tracing::warn!("cannot renew the run lock {name}: {e}; trying again");
                if state.halted() {
                    break;
                }
                wait = retry;
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
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
