//! The instant a `--now` flag gives, and the run's clock (`gc_runtime::clock`).

use crate::exit::UsageError;

pub(crate) use gc_runtime::clock::now;

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
