//! A long-running collector: runs every interval until asked to stop, with the health state a
//! liveness probe reads ([`Health`]) and, with the `admin` feature, the HTTP server of
//! `/metrics` and `/healthz` ([`AdminServer`]).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::Cancel;

#[cfg(feature = "admin")]
mod admin;
#[cfg(feature = "admin")]
pub use admin::AdminServer;
#[cfg(feature = "admin")]
pub mod api;
#[cfg(feature = "admin")]
pub mod tls;

/// Runs `run` every `interval` until `runs` runs are done (`None`: for ever) or `cancel` asks
/// to stop (a sleep between runs ends then within a tenth of a second), keeping `health` up to
/// date; how many runs started, and how many of them failed (a stopped run did not).
pub async fn every<E: AsRef<dyn std::error::Error + Send + Sync + 'static>>(
    interval: Duration,
    runs: Option<u64>,
    health: &Health,
    cancel: &dyn Cancel,
    mut run: impl AsyncFnMut() -> Result<(), E>,
) -> (u64, u64) {
    let (mut done, mut failed) = (0, 0);
    while cancel.cancelled().is_none() {
        done += 1;
        tracing::info!("run {done} starting");
        health.started(done, Instant::now());
        let result = run().await;
        health.ended();
        if let Err(error) = result {
            let error = error.as_ref();
            let shown = crate::error::shown(error);
            if crate::error::stopped_in(error) {
                tracing::info!("run stopped: {shown}");
            } else {
                failed += 1;
                tracing::error!("run failed: {shown}");
            }
        }
        if runs.is_some_and(|n| done >= n) || !sleep(interval, cancel).await {
            break;
        }
    }
    (done, failed)
}

/// Sleeps for `duration`, or until `cancel` asks to stop; `false` when it did.
async fn sleep(duration: Duration, cancel: &dyn Cancel) -> bool {
    tokio::select! {
        () = tokio::time::sleep(duration) => cancel.cancelled().is_none(),
        () = cancel.stopped() => false,
    }
}

/// The run in progress, to tell a wedged process from a busy one.
#[derive(Debug)]
pub struct Health {
    /// How long a run may last before the process counts as wedged; `None`: for ever.
    stall: Option<Duration>,
    /// The run in progress (its number) and when it started.
    running: Mutex<Option<(u64, Instant)>>,
    /// How the stall's message shows the option it names ([`crate::options`]).
    shown: fn(&str) -> String,
}

impl Health {
    /// A process whose runs may last `stall` (`None`: for ever).
    #[must_use]
    pub fn new(stall: Option<Duration>) -> Self {
        Self {
            stall,
            running: Mutex::new(None),
            shown: str::to_owned,
        }
    }

    /// The same, its stall message showing the option it names as `shown` does (a front end's
    /// own names: [`crate::options::shown_with`]).
    #[must_use]
    pub fn shown_as(self, shown: fn(&str) -> String) -> Self {
        Self { shown, ..self }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Option<(u64, Instant)>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `run` started `at`.
    pub fn started(&self, run: u64, at: Instant) {
        *self.running() = Some((run, at));
    }

    /// The run in progress ended.
    pub fn ended(&self) {
        *self.running() = None;
    }

    /// Why the process is not healthy at `now`: the run in progress has lasted past the stall
    /// deadline.
    pub fn stalled(&self, now: Instant) -> Option<String> {
        let stall = self.stall?;
        let (run, at) = (*self.running())?;
        let lasted = now.saturating_duration_since(at);
        (lasted > stall).then(|| {
            (self.shown)(&format!(
                "stalled: run {run} has lasted {}s, over `stall` {}",
                lasted.as_secs(),
                stall.as_secs()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_until_a_run_lasts_past_the_stall_deadline() {
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let health = Health::new(Some(Duration::from_secs(60)));
        assert_eq!(health.stalled(at(1000)), None, "no run in progress");
        health.started(3, start);
        assert_eq!(health.stalled(at(60)), None);
        assert_eq!(
            health.stalled(at(61)).as_deref(),
            Some("stalled: run 3 has lasted 61s, over `stall` 60")
        );
        health.ended();
        assert_eq!(health.stalled(at(1000)), None);
        let never = Health::new(None);
        never.started(1, start);
        assert_eq!(never.stalled(at(1_000_000)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn runs_every_interval_until_done_or_stopped() {
        let health = Health::new(None);
        let mut calls = 0;
        let (done, failed) = every(
            Duration::from_secs(60),
            Some(3),
            &health,
            &crate::NeverCancel,
            || {
                calls += 1;
                let result = if calls == 2 {
                    Err(crate::Error::msg("failed"))
                } else {
                    Ok(())
                };
                async move { result }
            },
        )
        .await;
        assert_eq!((done, failed), (3, 1));
        let token = crate::StopToken::new();
        let stopper = token.clone();
        let (done, failed) = every(Duration::from_secs(60), None, &health, &token, async || {
            stopper.stop("shutdown");
            Err(crate::Error::from(crate::Stopped::new(
                "stopped by shutdown: 1 target not started",
            )))
        })
        .await;
        assert_eq!((done, failed), (1, 0), "a stopped run is not a failure");
    }

    /// A stop during the wait between runs ends the wait at once: nothing waits out its
    /// interval, and nothing polls.
    #[tokio::test(start_paused = true)]
    async fn a_stop_between_runs_ends_the_wait_at_once() {
        let (health, token) = (Health::new(None), crate::StopToken::new());
        let stopper = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            stopper.stop("SIGTERM");
        });
        let start = tokio::time::Instant::now();
        let hour = Duration::from_secs(3600);
        let (done, failed) = every(hour, None, &health, &token, async || {
            crate::Result::<()>::Ok(())
        })
        .await;
        assert_eq!((done, failed), (1, 0));
        assert_eq!(start.elapsed().as_secs(), 5);
    }
}
