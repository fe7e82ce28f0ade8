//! How a collector acts and reports ([`Settings`]), checked before it is built.

use std::sync::Arc;

use crate::metrics::Delivery;
use crate::{Cancel, LockOptions, clock};

/// How long one call to gc's store may wait for its answer by default: a receipt is written in
/// milliseconds, so 30 s is a store that stopped answering, well inside the run lock's 30 s
/// lease renewed every 10 s.
pub const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How a collector acts and reports. The default is safe: a dry run (no Lease taken, every
/// write a server-side dry run, no archive written, no Event), judged at the clock's
/// instant, the lock taken as [`LockOptions::default`] says, metrics and alerts nowhere, never
/// stopped.
#[derive(Clone)]
pub struct Settings {
    /// Deletes for real (under the namespace's Lease). Default: false, a dry run.
    pub live: bool,
    /// Posts the run's Events when it is live (a dry run posts none, whatever this says).
    /// Default: true.
    pub events: bool,
    /// Posts one Event on each session object deleted rather than one on each session
    /// collected (naming its objects). Default: false.
    pub event_per_object: bool,
    /// How the run lock is taken.
    pub lock: LockOptions,
    /// Where the run's metrics and alerts go.
    pub delivery: Delivery,
    /// The embedder's shutdown.
    pub cancel: Arc<dyn Cancel>,
    /// Hears how each live plan's listing goes (`gc-cli`: a line on a terminal). Default: none.
    pub progress: Option<Arc<dyn Progress>>,
    /// The instant every run judges at, in seconds since the epoch (a replay, a test); `None`:
    /// the clock's at the start of each collection.
    pub now: Option<f64>,
    /// Accepts a `now` in the future for a live run (tests only: a future instant shortens the
    /// grace period and the volumes' window).
    pub allow_future_now: bool,
    /// Objects (or Pods) a live run works on at once, each walking its whole protocol in order
    /// ([`gc_core::pipeline`]); 1 works one after another. Default:
    /// [`gc_core::pipeline::DEFAULT_CONCURRENCY`]; at most
    /// [`gc_core::pipeline::MAX_CONCURRENCY`].
    pub concurrency: usize,
    /// How long one call to gc's store may wait for its answer before the run fails, deleting
    /// nothing more. Default: [`STORE_TIMEOUT`].
    pub store_timeout: std::time::Duration,
}

impl Settings {
    /// Whether these settings can be acted on.
    ///
    /// # Errors
    /// [`SettingsError`] when `now` is not an instant to judge at: not in seconds since the
    /// epoch, or in the future of a live run (unless allowed); or when `concurrency` is 0 or over
    /// its maximum.
    pub fn check(&self) -> Result<(), SettingsError> {
        let most = gc_core::pipeline::MAX_CONCURRENCY;
        if !(1..=most).contains(&self.concurrency) {
            return Err(SettingsError::Concurrency(self.concurrency));
        }
        if let Some(now) = self.now {
            if !(1e9..1e11).contains(&now) {
                return Err(SettingsError::NotSeconds(now));
            }
            if self.live && !self.allow_future_now && now > clock::now() + 60.0 {
                return Err(SettingsError::Future(now));
            }
        }
        Ok(())
    }

    /// The Events of a run with these settings: none unless it is live and posts them.
    pub(crate) fn events_hook(&self) -> crate::events::Events {
        crate::events::Events::new(self.live && self.events, self.concurrency)
            .per_object(self.event_per_object)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            live: false,
            events: true,
            event_per_object: false,
            lock: LockOptions::default(),
            delivery: Delivery::default(),
            cancel: Arc::new(crate::NeverCancel),
            progress: None,
            now: None,
            allow_future_now: false,
            concurrency: gc_core::pipeline::DEFAULT_CONCURRENCY,
            store_timeout: STORE_TIMEOUT,
        }
    }
}

/// Settings a collector refuses to be built with. Nothing was done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// `now` is not an instant in seconds since the epoch (milliseconds, say, or 0).
    #[error(
        "the instant to judge at ({0}) is not in seconds since the Unix epoch between 2001 and 5138"
    )]
    NotSeconds(f64),
    /// `now` is in the future of a live run.
    #[error(
        "`now` ({}) is in the future: a live run would shorten the grace period (a test sets \
         `allow_future_now`)",
        gc_core::isotime::format_timestamp(*.0)
    )]
    Future(f64),
    /// `concurrency` is 0 or over [`gc_core::pipeline::MAX_CONCURRENCY`].
    #[error(
        "concurrency {0} is not between 1 and {max} (objects in flight at once)",
        max = gc_core::pipeline::MAX_CONCURRENCY
    )]
    Concurrency(usize),
}

/// Hears how a live plan's listing of Pods goes.
pub trait Progress: Send + Sync {
    /// `pages` pages listed so far, holding `pods` Pods.
    fn page(&self, pages: usize, pods: usize);
    /// The listing ended.
    fn done(&self);
}
