//! The one clock of a run: the current instant as float seconds since the epoch (as Python's
//! `time.time()`), and the engine's [`Clock`] port over it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use gc_core::ports::Clock;

/// Now, in seconds since the Unix epoch.
#[must_use]
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// The clock of a real run.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> f64 {
        now()
    }
    async fn sleep(&self, seconds: f64) {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }
}
