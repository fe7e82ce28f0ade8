//! The binary's one clock: the current instant as float seconds since the epoch (as Python's
//! `time.time()`), the instant a `--now` flag gives, and the engine's [`Clock`] port over it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use gc_core::ports::Clock;

use crate::exit::UsageError;

/// Now, in seconds since the Unix epoch.
pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// The instant to plan for: `--now` or the clock, as float seconds like Python's `time.time()`.
///
/// # Errors
/// A [`UsageError`] naming `--now` when it is not an RFC 3339 timestamp.
pub(crate) fn at(now_flag: Option<&str>) -> anyhow::Result<f64> {
    Ok(match now_flag {
        Some(text) => parse("--now", text)?,
        None => seconds(time::OffsetDateTime::now_utc()),
    })
}

/// The RFC 3339 timestamp `text` given as `flag`, in seconds since the epoch.
///
/// # Errors
/// A [`UsageError`] naming `flag` when `text` is not an RFC 3339 timestamp.
pub(crate) fn parse(flag: &str, text: &str) -> Result<f64, UsageError> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map(seconds)
        .map_err(|e| {
            UsageError::because(
                format!("invalid {flag} {text:?}: expected an RFC 3339 timestamp"),
                e,
            )
        })
}

/// `at` as float seconds, to the microsecond (as Python's `time.time()`).
fn seconds(at: time::OffsetDateTime) -> f64 {
    let micros = at.unix_timestamp_nanos() / 1_000;
    #[allow(clippy::cast_precision_loss)]
    let seconds = micros as f64 / 1e6;
    seconds
}

/// The clock of a real run.
pub(crate) struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> f64 {
        now()
    }
    async fn sleep(&self, seconds: f64) {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }
}
