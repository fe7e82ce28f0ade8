//! The run lock of a namespace: a Lease taken (waiting for another run up to a bound), renewed
//! every third of its duration while the run works, and released at the end. A renewal that
//! finds the Lease expired or written by anyone else since the run's last write, or no
//! successful renewal for two thirds of the lease (a process frozen included, checked before
//! every write), loses the lock for good.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gc_core::ports::{ClusterError, Halt, Lock as _};
use gc_k8s::{Held, KubeCluster, Renewal};

use crate::{Cancel, Stopped};

/// How a run takes its lock. Default: wait up to 300 s, a lease of 30 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockOptions {
    /// How long to wait for another run on the same namespace to finish.
    pub wait: Duration,
    /// The lease, in seconds: renewed every third of it, so a crashed run's lock frees itself
    /// this long after the crash.
    pub lease_seconds: u32,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            wait: Duration::from_secs(300),
            lease_seconds: 30,
        }
    }
}

/// Why no lock was taken. Nothing was changed in any case.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// [`Cancel`] asked the run not to start: `"{why} {when} the run lock ..."`.
    #[error("{0}")]
    Cancelled(String),
    /// Another run held the Lease for the whole wait.
    #[error(
        "another run holds lease {name} in namespace {namespace}; waited {waited}s; nothing was \
         changed"
    )]
    Held {
        /// The Lease.
        name: String,
        /// Its namespace.
        namespace: String,
        /// How long the run waited, in seconds.
        waited: u64,
    },
    /// The Lease could not be read or written.
    #[error("cannot take the run lock")]
    Cluster(#[source] ClusterError),
}

/// A run that lost its lock: it wrote nothing after it noticed, and posts no Event.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LockLost(String);

/// Who holds a run lock: the host (the Pod's name in a cluster), the process, the instant it
/// asked and 64 random bits, so that two processes are told apart even where they share a host
/// name and a pid (a container restarted in the same Pod runs as pid 1 again; two replicas of a
/// Deployment started at once).
pub fn holder() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "gc".into());
    let asked = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    // The standard library seeds each `RandomState` from the system's random source.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("{host}-{}-{asked:x}-{random:016x}", std::process::id())
}

/// The run lock of a namespace, held and renewed in the background until released. When the
/// lock is lost ([`RunLock::halt`]) the run writes nothing more; [`RunLock::stop`] is set then,
/// and when the embedder sets [`RunLock::stop_flag`] (its shutdown). A dry run takes no Lease: it
/// writes nothing but server-side dry runs, and only the embedder stops it.
pub struct RunLock {
    cluster: KubeCluster,
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
        let mut lost = self.lost.lock().unwrap_or_else(PoisonError::into_inner);
        if lost.is_none() {
            tracing::error!("{why}; stopping");
            *lost = Some(why);
        }
    }
    fn lost(&self) -> Option<String> {
        self.lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
    fn renewed(&self) -> Instant {
        *self.renewed.lock().unwrap_or_else(PoisonError::into_inner)
    }
    fn renewed_at(&self, sent: Instant) {
        *self.renewed.lock().unwrap_or_else(PoisonError::into_inner) = sent;
    }
}

impl Halt for LockState {
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
    /// Waits for the Lease `name` in `namespace` up to `options.wait`, trying every second, then
    /// renews it every third of its duration. A dry run takes no Lease.
    ///
    /// # Errors
    /// [`LockError::Cancelled`] when `cancel` says so before the lock is taken,
    /// [`LockError::Held`] when another run holds it for the whole wait,
    /// [`LockError::Cluster`] when the Lease cannot be read or written.
    pub async fn take(
        cluster: &KubeCluster,
        namespace: &str,
        name: &str,
        options: &LockOptions,
        dry_run: bool,
        cancel: &dyn Cancel,
    ) -> Result<Self, LockError> {
        let lease = options.lease_seconds;
        let cancelled = |when: &str| {
            cancel.cancelled().map(|why| {
                LockError::Cancelled(format!(
                    "stopped by {why} {when} the run lock {name} in namespace {namespace}; nothing was changed"
                ))
            })
        };
        if let Some(cancelled) = cancelled("before taking") {
            return Err(cancelled);
        }
        let mut lock = Self {
            cluster: cluster.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            holder: holder(),
            stop: Arc::new(AtomicBool::new(false)),
            state: Arc::new(LockState {
                renewed: Mutex::new(Instant::now()),
                grace: Duration::from_secs(u64::from(lease)) * 2 / 3,
                lost: Mutex::new(None),
                none: dry_run,
            }),
            renewer: None,
        };
        cancel.register(&lock.stop);
        if dry_run {
            return Ok(lock);
        }
        let deadline = Instant::now() + options.wait;
        let held = loop {
            let sent = Instant::now();
            let taken = cluster
                .acquire(namespace, name, &lock.holder, lease)
                .await
                .map_err(LockError::Cluster)?;
            if let Some(held) = taken {
                lock.state.renewed_at(sent);
                break held;
            }
            if let Some(cancelled) = cancelled("while waiting for") {
                return Err(cancelled);
            }
            if Instant::now() >= deadline {
                return Err(LockError::Held {
                    name: name.to_owned(),
                    namespace: namespace.to_owned(),
                    waited: options.wait.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
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

    /// The flag that stops the run: set when the lock is lost, and for the embedder to set on
    /// its shutdown (the run then finishes the target in progress and starts no other).
    pub fn stop_flag(&self) -> &Arc<AtomicBool> {
        &self.stop
    }

    /// Set when the lock is lost, or when the embedder asked the run to stop.
    pub fn stop(&self) -> &AtomicBool {
        &self.stop
    }

    /// Halted only when the lock is lost (or may be), never by the embedder's shutdown: what the
    /// engine reads before every write.
    pub fn halt(&self) -> &dyn Halt {
        &*self.state
    }

    /// Why the lock was lost, when it was: the run wrote nothing after it noticed.
    pub fn lost(&self) -> Option<LockLost> {
        self.state.halted();
        self.state.lost().map(|why| {
            LockLost(format!(
                "lost the run lock {} in namespace {}: {why}; this run wrote nothing after it \
                 noticed, and the next run resumes",
                self.name, self.namespace
            ))
        })
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Lease's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Stops renewing and gives the lease up. A failure is a warning: the lease expires by
    /// itself within its duration. A lost lease is left as it is.
    pub async fn release(self) {
        let Some(renewer) = self.renewer else {
            return;
        };
        renewer.abort();
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

/// Which Lease a renewal task renews.
struct Renewer {
    cluster: KubeCluster,
    namespace: String,
    name: String,
    holder: String,
    lease: u32,
}

/// Renews the lease every third of its duration (every second after a failed renewal), fenced
/// on the last renewal; marks the lock lost, and sets `stop`, when the Lease expired or was
/// written by anyone else since, or when no renewal succeeded for two thirds of the lease
/// (before it could expire). It never takes back a lease it let lapse.
async fn renew(r: Renewer, mut held: Held, state: Arc<LockState>, stop: Arc<AtomicBool>) {
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
            Ok(Renewal::Renewed(now)) => {
                held = now;
                wait = period;
                state.renewed_at(sent);
            }
            Ok(Renewal::Lost(why)) => {
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

/// [`RunLock::take`], a cancelled wait being [`Stopped`].
pub(crate) async fn take_or_stop(
    cluster: &KubeCluster,
    namespace: &str,
    name: &str,
    options: &LockOptions,
    dry_run: bool,
    cancel: &dyn Cancel,
) -> anyhow::Result<RunLock> {
    RunLock::take(cluster, namespace, name, options, dry_run, cancel)
        .await
        .map_err(|e| match e {
            LockError::Cancelled(why) => anyhow::Error::new(Stopped::new(why)),
            other => anyhow::Error::new(other),
        })
}

/// Releases `lock`, saying so when `cancel` stopped its run; the error of the run when the lock
/// was lost.
pub(crate) async fn release_saying(lock: RunLock, cancel: &dyn Cancel) -> Option<anyhow::Error> {
    let lost = lock.lost().map(anyhow::Error::new);
    if let Some(cause) = cancel.cancelled() {
        tracing::warn!(
            "{cause} received: releasing the run lock {} in namespace {}; the next run resumes",
            lock.name(),
            lock.namespace()
        );
    }
    lock.release().await;
    lost
}

/// Whether the run that ended with `error` lost its lock ([`LockLost`] in its chain).
pub(crate) fn lock_lost(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.is::<LockLost>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(lease: u64, renewed_ago: Duration, none: bool) -> LockState {
        LockState {
            renewed: Mutex::new(
                Instant::now()
                    .checked_sub(renewed_ago)
                    .unwrap_or_else(Instant::now),
            ),
            grace: Duration::from_secs(lease) * 2 / 3,
            lost: Mutex::new(None),
            none,
        }
    }

    /// Halted once lost, or once two thirds of the lease passed without a renewal; a dry run's
    /// lock never.
    #[test]
    fn a_lock_is_halted_once_lost_or_unrenewed_for_two_thirds_of_its_lease() {
        assert!(!state(30, Duration::from_secs(19), false).halted());
        let late = state(30, Duration::from_secs(20), false);
        assert!(late.halted());
        assert!(
            late.lost()
                .unwrap()
                .contains("not renewed for 20s (it lasts 30s)")
        );
        let lost = state(30, Duration::ZERO, false);
        lost.lose("taken".into());
        lost.lose("again".into());
        assert!(lost.halted());
        assert_eq!(
            lost.lost().as_deref(),
            Some("taken"),
            "the first reason stays"
        );
        assert!(!state(30, Duration::from_secs(3600), true).halted());
    }

    #[test]
    fn holders_differ_between_asks() {
        let (a, b) = (holder(), holder());
        assert_ne!(a, b);
        assert!(a.contains(&format!("-{}-", std::process::id())), "{a}");
    }
}
