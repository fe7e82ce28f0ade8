//! The run lock of a namespace: a Lease taken through the [`Lock`] port (waiting for another run
//! up to a bound), renewed every third of its duration while the run works, and released at the
//! end. Its lifecycle is [`gc_core::lease`]'s: a renewal that finds the Lease expired or written
//! by anyone else since the run's last write, or no successful renewal for two thirds of the
//! lease (a process frozen included, checked before every write), loses the lock for good.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gc_core::lease::{Held, Lease, Renewed};
use gc_core::ports::{ClusterError, Lock};

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

/// The run lock of a namespace, held through the [`Lock`] port `L` and renewed in the background
/// until released. When the lock is lost the run writes nothing more ([`RunLock::held`] says so
/// before every write); [`RunLock::stop`] is set then, and when the embedder's [`Cancel`] asks
/// the run to stop. A dry run takes no Lease: it writes nothing but server-side dry runs, and
/// only the embedder stops it.
pub struct RunLock<L: Lock> {
    port: L,
    namespace: String,
    name: String,
    stop: Arc<AtomicBool>,
    /// `None` for a dry run, which holds no Lease.
    lease: Option<Arc<Lease<L::Token>>>,
    /// The renewal task; `None` for a dry run.
    renewer: Option<tokio::task::JoinHandle<()>>,
    /// Gives the Lease up in the background: what a lock dropped unreleased does (an embedder's
    /// timeout around a run, a panic), so that no Lease outlives its run.
    vacate: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl<L: Lock> Drop for RunLock<L> {
    /// A lock dropped without [`RunLock::release`] stops renewing at once and gives its Lease up
    /// in the background (on the runtime it was taken on; without one the Lease expires by
    /// itself within its duration).
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        if let Some(vacate) = self.vacate.take() {
            vacate();
        }
    }
}

impl<L: Lock + Clone + 'static> RunLock<L> {
    /// Waits for the Lease `name` in `namespace` up to `options.wait`, trying every second, then
    /// renews it every third of its duration. A dry run takes no Lease.
    ///
    /// # Errors
    /// [`LockError::Cancelled`] when `cancel` says so before the lock is taken,
    /// [`LockError::Held`] when another run holds it for the whole wait,
    /// [`LockError::Cluster`] when the Lease cannot be read or written.
    pub async fn take(
        port: &L,
        namespace: &str,
        name: &str,
        options: &LockOptions,
        dry_run: bool,
        cancel: &dyn Cancel,
    ) -> Result<Self, LockError> {
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
            port: port.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            stop: Arc::new(AtomicBool::new(false)),
            lease: None,
            renewer: None,
            vacate: None,
        };
        cancel.register(&lock.stop);
        if dry_run {
            return Ok(lock);
        }
        let holder = holder();
        // The Lease's clock: the runtime's timer (tokio's, so that tests that pause and advance
        // time see a frozen process as one).
        let origin = tokio::time::Instant::now();
        let monotonic: gc_core::lease::Monotonic = Arc::new(move || origin.elapsed());
        let deadline = origin + options.wait;
        let lease = loop {
            let seconds = options.lease_seconds;
            let taken = Lease::acquire(port, namespace, name, &holder, seconds, monotonic.clone())
                .await
                .map_err(LockError::Cluster)?;
            if let Some(lease) = taken {
                break Arc::new(lease);
            }
            if let Some(cancelled) = cancelled("while waiting for") {
                return Err(cancelled);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(LockError::Held {
                    name: name.to_owned(),
                    namespace: namespace.to_owned(),
                    waited: options.wait.as_secs(),
                });
            }
            // The next attempt in a second, or at once when asked to stop (which it then says).
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = cancel.stopped() => {}
            }
        };
        let renewal = renew(
            port.clone(),
            Arc::clone(&lease),
            Arc::clone(&lock.stop),
            name.into(),
        );
        lock.renewer = Some(tokio::spawn(renewal));
        let (port, held, name) = (port.clone(), Arc::clone(&lease), name.to_owned());
        let runtime = tokio::runtime::Handle::current();
        lock.vacate = Some(Box::new(move || {
            runtime.spawn(async move {
                if let Err(e) = held.release(&port).await {
                    tracing::warn!(
                        "cannot give up the run lock {name} (it expires by itself): {e}"
                    );
                }
            });
        }));
        lock.lease = Some(lease);
        Ok(lock)
    }

    /// Stops renewing and gives the lease up. A failure is a warning: the lease expires by
    /// itself within its duration. A lost lease is left as it is.
    pub async fn release(mut self) {
        self.vacate = None;
        let (Some(renewer), Some(lease)) = (self.renewer.take(), self.lease.take()) else {
            return;
        };
        renewer.abort();
        if let Err(e) = lease.release(&self.port).await {
            tracing::warn!(
                "cannot release the run lock {} (it expires by itself): {e}",
                self.name
            );
        }
    }
}

impl<L: Lock> RunLock<L> {
    /// The flag that stops the run: set when the lock is lost, and for the embedder to set on
    /// its shutdown (the run then finishes the target in progress and starts no other).
    pub fn stop_flag(&self) -> &Arc<AtomicBool> {
        &self.stop
    }

    /// Set when the lock is lost, or when the embedder asked the run to stop.
    pub fn stop(&self) -> &AtomicBool {
        &self.stop
    }

    /// The engine's proof of this lock ([`gc_core::lease::Held`]): lost only when the lock is
    /// lost (or may be), never by the embedder's shutdown, which stops the run between objects;
    /// a dry run's when the run is one.
    pub fn held(&self) -> Held<'_> {
        match &self.lease {
            Some(lease) => lease.held(&self.stop),
            None => Held::dry_run(&self.stop),
        }
    }

    /// Why the lock was lost, when it was: the run wrote nothing after it noticed.
    pub fn lost(&self) -> Option<LockLost> {
        let lease = self.lease.as_ref()?;
        // Checked now: a lock not renewed in time is lost from this moment.
        let _ = lease.halted();
        let why = lease.lost()?;
        Some(LockLost(format!(
            "lost the run lock {} in namespace {}: {why}; this run wrote nothing after it \
             noticed, and the next run resumes",
            self.name, self.namespace
        )))
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Lease's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}

/// Renews `lease` every third of its duration (every second after a failed renewal), fenced on
/// the last renewal; sets `stop` once it is lost (the Lease expired or was written by anyone else
/// since, or no renewal succeeded for two thirds of the lease, before it could expire). It never
/// takes back a lease it let lapse.
async fn renew<L: Lock>(port: L, lease: Arc<Lease<L::Token>>, stop: Arc<AtomicBool>, name: String) {
    let period = Duration::from_secs(u64::from(lease.seconds())) / 3;
    // After a failed renewal, tries again soon: the lock is lost two thirds of the lease after
    // the last renewal, only one period after a failed one.
    let retry = Duration::from_secs(1).min(period);
    let mut wait = period;
    loop {
        tokio::time::sleep(wait).await;
        match lease.renew(&port).await {
            Renewed::Held => wait = period,
            Renewed::Lost => break,
            Renewed::Failed(e) => {
                tracing::warn!("cannot renew the run lock {name}: {e}; trying again");
                wait = retry;
            }
        }
    }
    if let Some(why) = lease.lost() {
        tracing::error!("{why}; stopping");
    }
    stop.store(true, Ordering::SeqCst);
}

/// [`RunLock::take`], a cancelled wait being [`Stopped`].
pub(crate) async fn take_or_stop<L: Lock + Clone + 'static>(
    port: &L,
    namespace: &str,
    name: &str,
    options: &LockOptions,
    dry_run: bool,
    cancel: &dyn Cancel,
) -> crate::Result<RunLock<L>> {
    RunLock::take(port, namespace, name, options, dry_run, cancel)
        .await
        .map_err(|e| match e {
            LockError::Cancelled(why) => crate::Error::from(Stopped::new(why)),
            other => crate::Error::from(other),
        })
}

/// Releases `lock`, saying so when `cancel` stopped its run; the error of the run when the lock
/// was lost.
pub(crate) async fn release_saying<L: Lock + Clone + 'static>(
    lock: RunLock<L>,
    cancel: &dyn Cancel,
) -> Option<crate::Error> {
    let lost = lock.lost().map(crate::Error::from);
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
pub(crate) fn lock_lost(error: &crate::Error) -> bool {
    error.is_lock_lost()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeLease;
    use crate::{NeverCancel, StopToken};

    fn options(wait: u64) -> LockOptions {
        LockOptions {
            wait: Duration::from_secs(wait),
            lease_seconds: 30,
        }
    }

    async fn take(port: &FakeLease) -> RunLock<FakeLease> {
        RunLock::take(port, "ns", "gc-sessions", &options(0), false, &NeverCancel)
            .await
            .unwrap()
    }

    async fn sleep(seconds: u64) {
        tokio::time::sleep(Duration::from_secs(seconds)).await;
    }

    /// Renewed every third of the lease while the run works, never lost, released at the end.
    #[tokio::test(start_paused = true)]
    async fn a_held_lock_is_renewed_every_third_and_released() {
        let port = FakeLease::default();
        let lock = take(&port).await;
        sleep(95).await;
        assert_eq!(port.state().renewals, 9);
        assert!(!lock.held().lost() && !lock.held().is_dry_run());
        assert!(lock.lost().is_none());
        assert!(!lock.stop().load(Ordering::SeqCst));
        // The embedder's shutdown, through the flag it is given: the run stops, the lock is
        // not lost.
        lock.stop_flag().store(true, Ordering::SeqCst);
        assert!(lock.held().stopping() && !lock.held().lost());
        assert!(lock.stop().load(Ordering::SeqCst));
        lock.release().await;
        assert_eq!(port.state().holder, None);
    }

    /// A renewal that finds the Lease written by another run loses the lock: the run's proof is
    /// lost, its stop flag set, its error says why; the lock is never taken back, and the other
    /// run's Lease is left as it is.
    #[tokio::test(start_paused = true)]
    async fn a_lease_taken_by_another_run_is_lost_for_good() {
        let port = FakeLease::default();
        let lock = take(&port).await;
        port.taken_by("run-b");
        sleep(11).await;
        assert!(lock.held().lost());
        assert!(lock.stop().load(Ordering::SeqCst));
        let lost = lock.lost().unwrap().to_string();
        let want = "lost the run lock gc-sessions in namespace ns: the run lock gc-sessions is \
                    lost: it is held by another run now; this run wrote nothing after it noticed";
        assert!(lost.starts_with(want), "{lost}");
        port.state().holder = None;
        sleep(30).await;
        assert!(lock.held().lost());
        assert_eq!(port.state().renewals, 0);
        port.taken_by("run-c");
        lock.release().await;
        assert_eq!(port.state().holder.as_deref(), Some("run-c"));
    }

    /// Renewals that fail are tried again every second; the lock is lost once two thirds of the
    /// lease pass without a renewal (before the Lease could expire on the server), not before.
    #[tokio::test(start_paused = true)]
    async fn failed_renewals_lose_the_lock_at_two_thirds_of_the_lease() {
        let port = FakeLease::default();
        let lock = take(&port).await;
        port.state().unreachable = true;
        sleep(19).await;
        assert!(!lock.held().lost(), "19 s of a 30 s lease");
        sleep(1).await;
        assert!(lock.held().lost(), "20 s of a 30 s lease");
        let lost = lock.lost().unwrap().to_string();
        assert!(
            lost.contains("not renewed for 20s (it lasts 30s)"),
            "{lost}"
        );
        sleep(1).await;
        assert!(lock.stop().load(Ordering::SeqCst));
        // The API server back: nothing is renewed again.
        port.state().unreachable = false;
        sleep(30).await;
        assert_eq!(port.state().renewals, 0);
        assert!(lock.held().lost());
    }

    /// A process frozen past two thirds of its lease writes nothing after it resumes: the check
    /// before the next write finds the lock lost, before the renewal task runs at all.
    #[tokio::test(start_paused = true)]
    async fn a_process_frozen_past_its_lease_writes_nothing_after_it_resumes() {
        let port = FakeLease::default();
        let lock = take(&port).await;
        sleep(11).await;
        assert_eq!(port.state().renewals, 1);
        // Frozen: the clock moves, no task runs.
        tokio::time::advance(Duration::from_secs(25)).await;
        assert!(lock.held().lost(), "checked before the next write");
        sleep(1).await;
        assert_eq!(port.state().renewals, 1, "no renewal after the freeze");
        assert!(lock.stop().load(Ordering::SeqCst));
    }

    /// A lock dropped unreleased (an embedder's timeout around a run) renews no more and gives
    /// its Lease up: nobody waits for it to expire.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_lock_stops_renewing_and_gives_its_lease_up() {
        let port = FakeLease::default();
        let lock = take(&port).await;
        sleep(11).await;
        assert_eq!(port.state().renewals, 1);
        let run = async move {
            let _lock = lock;
            sleep(3600).await;
        };
        assert!(
            tokio::time::timeout(Duration::from_secs(5), run)
                .await
                .is_err()
        );
        sleep(1).await;
        assert_eq!(port.state().holder, None, "given up");
        sleep(60).await;
        assert_eq!(port.state().renewals, 1, "no renewal after the drop");
    }

    /// Another run's lock: waited for (tried every second), then refused with nothing changed;
    /// a shutdown during the wait stops it at once, one asked before makes no attempt.
    #[tokio::test(start_paused = true)]
    async fn another_runs_lock_is_waited_for_then_refused_or_stopped() {
        let port = FakeLease::default();
        port.taken_by("run-b");
        let held = RunLock::take(&port, "ns", "gc-pods", &options(3), false, &NeverCancel).await;
        let Err(LockError::Held { waited: 3, .. }) = held else {
            panic!("{:?}", held.err().map(|e| e.to_string()));
        };
        assert_eq!(port.state().acquires, 4);
        let token = StopToken::new();
        let stopper = token.clone();
        tokio::spawn(async move {
            sleep(2).await;
            stopper.stop("SIGTERM");
        });
        let stopped = RunLock::take(&port, "ns", "gc-pods", &options(60), false, &token).await;
        let Err(LockError::Cancelled(why)) = stopped else {
            panic!("{:?}", stopped.err().map(|e| e.to_string()));
        };
        assert_eq!(
            why,
            "stopped by SIGTERM while waiting for the run lock gc-pods in namespace ns; nothing \
             was changed"
        );
        assert_eq!(port.state().holder.as_deref(), Some("run-b"));
        let attempts = port.state().acquires;
        let before = RunLock::take(&port, "ns", "gc-pods", &options(60), false, &token).await;
        assert!(matches!(before, Err(LockError::Cancelled(_))));
        assert_eq!(port.state().acquires, attempts);
    }

    /// A dry run takes no Lease, is never lost, and only the embedder stops it.
    #[tokio::test(start_paused = true)]
    async fn a_dry_run_takes_no_lease() {
        let port = FakeLease::default();
        let token = StopToken::new();
        let lock = RunLock::take(&port, "ns", "gc-pods", &options(0), true, &token)
            .await
            .unwrap();
        assert!(lock.held().is_dry_run());
        sleep(100).await;
        assert!(!lock.held().lost() && lock.lost().is_none());
        assert_eq!(port.state().acquires, 0);
        assert!(!lock.held().stopping());
        token.stop("shutdown");
        assert!(lock.held().stopping() && lock.stop().load(Ordering::SeqCst));
        lock.release().await;
    }

    #[test]
    fn holders_differ_between_asks() {
        let (a, b) = (holder(), holder());
        assert_ne!(a, b);
        assert!(a.contains(&format!("-{}-", std::process::id())), "{a}");
    }
}
