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
    let watch = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let runtime = match runtime {
            Ok(runtime) => runtime,
            Err(e) => return drop(ready.send(Err(e))),
        };
        runtime.block_on(async move {
            let mut next = match hooked_signals() {
                Ok(next) => next,
                Err(e) => return drop(ready.send(Err(e))),
            };
            let _ = ready.send(Ok(()));
            // The first signal asks the process to stop; the second stops it.
            let (name, _) = next().await;
            tracing::warn!(
                "{name} received: finishing the target in progress (no new target, no new \
                 run), then releasing the run lock; send it again to stop at once"
            );
            STOP.stop(name);
            let (name, number) = next().await;
            tracing::warn!("{name} received again: stopping at once");
            std::process::exit(128 + number);
        });
    };
    let thread = std::thread::Builder::new().name("gc-signals".into());
    thread
        .spawn(watch)
        .context("cannot start the signal thread")?;
    hooked
        .recv()
        .context("the signal thread stopped")?
        .context("cannot hook SIGTERM and SIGINT")
}

/// SIGTERM and SIGINT, hooked: each call gives the next one's name and number (SIGTERM first
/// when both are there).
#[cfg(unix)]
fn hooked_signals() -> std::io::Result<impl AsyncFnMut() -> (&'static str, i32)> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move || {
        tokio::select! {
            biased;
            Some(()) = term.recv() => ("SIGTERM", 15),
            Some(()) = int.recv() => ("SIGINT", 2),
            else => std::future::pending().await,
        }
    })
}

/// Ctrl-C: each call gives the next one.
#[cfg(not(unix))]
fn hooked_signals() -> std::io::Result<impl AsyncFnMut() -> (&'static str, i32)> {
    Ok(async || {
        let _ = tokio::signal::ctrl_c().await;
        ("Ctrl-C", 2)
    })
}
