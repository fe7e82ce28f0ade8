//! Termination signals. The first SIGTERM or SIGINT asks the process to stop: the stop flag of
//! every run lock is set (the session engine sends no other delete, each left `not started`; the
//! Pod engine finishes its target in progress and starts no other: it reads the lock's `lost`
//! flag inside a target and this one only between targets), no lock is taken any more, and `serve` starts no other run and leaves its
//! sleep at once. A second one stops the process at once (exit status 128 + the signal's number).
//! A run so stopped ends with a [`gc_runtime::Stopped`] error: neither a success nor a failure.
//! The runs read the signals as their [`gc_runtime::Cancel`]: [`STOP`].
//!
//! The signals are hooked once, on a thread of their own with its own runtime, by the first
//! [`install`]: commands that never take a run lock keep the default (the signal ends them).

use std::sync::{LazyLock, OnceLock};

use anyhow::Context;
use gc_runtime::{Cancel as _, StopToken};

/// What the signals stop: every run reads it as its [`gc_runtime::Cancel`].
pub(crate) static STOP: LazyLock<StopToken> = LazyLock::new(StopToken::new);
/// The outcome of the first [`install`].
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Hooks SIGTERM and SIGINT, once for the process; later calls return the first one's outcome.
///
/// # Errors
/// When the signal thread, its runtime or the hooks cannot be set up.
pub(crate) fn install() -> anyhow::Result<()> {
    INSTALLED
        .get_or_init(|| hook().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
        .context("cannot handle termination signals")
}

/// The signal that asked the process to stop (`SIGTERM`, `SIGINT`), if one did.
pub(crate) fn received() -> Option<String> {
    STOP.cancelled()
}

/// Starts the signal thread and waits until its hooks are in place.
fn hook() -> anyhow::Result<()> {
    let (ready, hooked) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("gc-signals".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => return drop(ready.send(Err(e))),
            };
            runtime.block_on(async move {
                match Hooked::new() {
                    Ok(signals) => {
                        let _ = ready.send(Ok(()));
                        watch(signals).await;
                    }
                    Err(e) => drop(ready.send(Err(e))),
                }
            });
        })
        .context("cannot start the signal thread")?;
    hooked
        .recv()
        .context("the signal thread stopped")?
        .context("cannot hook SIGTERM and SIGINT")
}

/// The first signal asks the process to stop; the second stops it.
async fn watch(mut signals: Hooked) {
    let (name, _) = signals.next().await;
    stop(name);
    let (name, number) = signals.next().await;
    tracing::warn!("{name} received again: stopping at once");
    std::process::exit(128 + number);
}

/// Asks the process to stop: records `name`, sets every lock's stop flag.
fn stop(name: &'static str) {
    STOP.stop(name);
    tracing::warn!(
        "{name} received: finishing the target in progress (no new target, no new \
         run), then releasing the run lock; send it again to stop at once"
    );
}

/// The hooked signals.
#[cfg(unix)]
struct Hooked {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Hooked {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next signal's name and number.
    async fn next(&mut self) -> (&'static str, i32) {
        use std::task::Poll;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(Some(())) = self.term.poll_recv(cx) {
                return Poll::Ready(("SIGTERM", 15));
            }
            if let Poll::Ready(Some(())) = self.int.poll_recv(cx) {
                return Poll::Ready(("SIGINT", 2));
            }
            Poll::Pending
        })
        .await
    }
}

/// The hooked signal: Ctrl-C.
#[cfg(not(unix))]
struct Hooked;

#[cfg(not(unix))]
impl Hooked {
    fn new() -> std::io::Result<Self> {
        Ok(Self)
    }

    async fn next(&mut self) -> (&'static str, i32) {
        let _ = tokio::signal::ctrl_c().await;
        ("Ctrl-C", 2)
    }
}
