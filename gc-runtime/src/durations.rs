//! Durations as people write them (`90s`, `15m`, `24h`, `7d`, `1h 30m`: what `humantime`
//! reads), and as the older command lines, Kestra flows and chart values give them: a bare
//! integer, a number of the option's own unit (seconds, hours or days). Each option reads both,
//! so nothing written before has to change.

use std::ops::RangeInclusive;

/// The unit of an option's bare-integer form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `--retention`, `--ttl`, the waits and intervals.
    Seconds,
    /// `--grace`.
    Hours,
    /// `--volume-retention`.
    Days,
}

impl Unit {
    fn seconds(self) -> u64 {
        match self {
            Self::Seconds => 1,
            Self::Hours => 3_600,
            Self::Days => 86_400,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Seconds => "seconds",
            Self::Hours => "hours",
            Self::Days => "days",
        }
    }
}

/// `text` as a number of `unit`: a bare integer as it is (a negative one too: the option's own
/// range check names it), a duration converted, which must be a whole number of `unit`.
///
/// # Errors
/// A message that says what was expected, with examples: for text that is neither, and for a
/// duration that is not a whole number of `unit` (`90m` of hours).
pub fn in_unit(text: &str, unit: Unit) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(n) = text.parse::<i64>() {
        return Ok(n);
    }
    let name = unit.name();
    let duration = humantime::parse_duration(text).map_err(|e| {
        format!(
            "{text:?} is not a duration ({e}): give a number and a unit, such as 90s, 15m, 24h \
             or 7d (a bare number is {name})"
        )
    })?;
    let (seconds, per) = (duration.as_secs(), unit.seconds());
    if duration.subsec_nanos() != 0 || !seconds.is_multiple_of(per) {
        return Err(format!(
            "{text} is not a whole number of {name}: give {name}, such as {}",
            match unit {
                Unit::Seconds => "90s or 15m",
                Unit::Hours => "24h or 2d",
                Unit::Days => "7d or 2w",
            }
        ));
    }
    i64::try_from(seconds / per).map_err(|_| format!("{text} is too long"))
}

/// [`in_unit`] in seconds.
///
/// # Errors
/// As [`in_unit`].
pub fn seconds(text: &str) -> Result<i64, String> {
    in_unit(text, Unit::Seconds)
}

/// [`in_unit`] in hours.
///
/// # Errors
/// As [`in_unit`].
pub fn hours(text: &str) -> Result<i64, String> {
    in_unit(text, Unit::Hours)
}

/// [`in_unit`] in days.
///
/// # Errors
/// As [`in_unit`].
pub fn days(text: &str) -> Result<i64, String> {
    in_unit(text, Unit::Days)
}

/// [`in_unit`] within `range` (in `unit`).
///
/// # Errors
/// As [`in_unit`], and for a value outside `range`, named in `unit` (`outside 5s..=300s`).
pub fn within(text: &str, unit: Unit, range: RangeInclusive<u64>) -> Result<u64, String> {
    let n = in_unit(text, unit)?;
    let suffix = &unit.name()[..1];
    u64::try_from(n)
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            let (start, end) = (range.start(), range.end());
            format!("{text} is outside {start}{suffix}..={end}{suffix}")
        })
}

/// [`within`] in seconds.
///
/// # Errors
/// As [`within`].
pub fn seconds_within(text: &str, range: RangeInclusive<u64>) -> Result<u64, String> {
    within(text, Unit::Seconds, range)
}

/// A timeout as an option gives it: a duration from 1 s to 1 h (`30s`, `2m`; a bare number is
/// seconds).
///
/// # Errors
/// As [`within`].
pub fn timeout(text: &str) -> Result<std::time::Duration, String> {
    seconds_within(text, 1..=3600).map(std::time::Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_the_units_and_durations_are_converted() {
        for (text, unit, want) in [
            ("3600", Unit::Seconds, 3_600),
            ("-1", Unit::Hours, -1),
            ("0", Unit::Days, 0),
            ("1d", Unit::Seconds, 86_400),
            ("90m", Unit::Seconds, 5_400),
            ("1h 30m", Unit::Seconds, 5_400),
            ("24h", Unit::Hours, 24),
            ("2d", Unit::Hours, 48),
            ("7d", Unit::Days, 7),
            ("2w", Unit::Days, 14),
            (" 15m ", Unit::Seconds, 900),
        ] {
            assert_eq!(in_unit(text, unit), Ok(want), "{text} {unit:?}");
        }
    }

    #[test]
    fn refusals_say_what_to_write() {
        let e = in_unit("90m", Unit::Hours).unwrap_err();
        assert_eq!(
            e,
            "90m is not a whole number of hours: give hours, such as 24h or 2d"
        );
        let e = in_unit("36h", Unit::Days).unwrap_err();
        assert!(e.starts_with("36h is not a whole number of days"), "{e}");
        let e = in_unit("1500ms", Unit::Seconds).unwrap_err();
        assert!(
            e.starts_with("1500ms is not a whole number of seconds"),
            "{e}"
        );
        let e = in_unit("soon", Unit::Seconds).unwrap_err();
        assert!(
            e.starts_with("\"soon\" is not a duration (")
                && e.ends_with("such as 90s, 15m, 24h or 7d (a bare number is seconds)"),
            "{e}"
        );
        assert_eq!(seconds_within("1h", 0..=3_600), Ok(3_600));
        assert_eq!(
            seconds_within("61m", 0..=3_600).unwrap_err(),
            "61m is outside 0s..=3600s"
        );
        assert_eq!(
            seconds_within("-1", 5..=300).unwrap_err(),
            "-1 is outside 5s..=300s"
        );
        assert_eq!(
            within("3651d", Unit::Days, 0..=3650).unwrap_err(),
            "3651d is outside 0d..=3650d"
        );
    }
}
