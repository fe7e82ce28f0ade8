//! Timestamps read exactly as the reference flow reads them: Python's `datetime.fromisoformat`.
//!
//! Kubernetes writes RFC 3339 (`2026-01-02T03:04:05Z`), but the planner must accept and refuse
//! the same strings as the flow it replaces, which parses with CPython's ISO 8601 reader after
//! replacing every `Z` with `+00:00`. This module is a byte-for-byte port of that reader
//! (`_datetimemodule.c`: `_find_isoformat_datetime_separator`, `parse_isoformat_date`,
//! `parse_isoformat_time`, including `24:00` as the next midnight), so a timestamp that the flow
//! rejects is rejected here, with the same distinction between "not a date" and "no time zone".

use thiserror::Error;

/// Why a timestamp could not be turned into an instant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TimeError {
    /// Not an ISO 8601 date-time that CPython accepts, or a field out of range.
    #[error("not an ISO 8601 timestamp: {0:?}")]
    Invalid(String),
    /// A valid date-time without a UTC offset: its instant is unknown.
    #[error("timestamp has no time zone: {0:?}")]
    NoTimezone(String),
}

/// Seconds since the Unix epoch of `value`, as `datetime.fromisoformat(value.replace('Z',
/// '+00:00')).timestamp()` computes them (microsecond precision, divided as a float).
///
/// # Errors
/// [`TimeError::Invalid`] for anything CPython refuses, [`TimeError::NoTimezone`] for a naive
/// date-time.
pub fn parse_timestamp(value: &str) -> Result<f64, TimeError> {
    let text = value.replace('Z', "+00:00");
    let invalid = || TimeError::Invalid(value.to_owned());
    let parsed = parse(text.as_bytes()).ok_or_else(invalid)?;
    let Some((offset_s, offset_us)) = parsed.offset else {
        return Err(TimeError::NoTimezone(value.to_owned()));
    };
    let days = days_from_civil(parsed.year, parsed.month, parsed.day);
    let local_us = ((days * 86_400
        + i64::from(parsed.hour) * 3_600
        + i64::from(parsed.minute) * 60
        + i64::from(parsed.second))
        * 1_000_000)
        + i64::from(parsed.micro);
    let utc_us = local_us - (offset_s * 1_000_000 + offset_us);
    // CPython: timedelta.total_seconds() == microseconds / 10**6, a correctly rounded division.
    #[allow(clippy::cast_precision_loss)]
    Ok(utc_us as f64 / 1e6)
}

struct Parsed {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    micro: u32,
    offset: Option<(i64, i64)>,
}

/// A byte at `i`, or NUL past the end (the C reader relies on the terminating NUL).
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

/// Exactly `n` ASCII digits at `*p`.
fn digits(s: &[u8], p: &mut usize, n: usize) -> Option<u32> {
    let mut v = 0u32;
    for _ in 0..n {
        let c = at(s, *p);
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
        *p += 1;
    }
    Some(v)
}

fn parse(s: &[u8]) -> Option<Parsed> {
    if s.len() < 7 {
        return None;
    }
    let sep = separator_location(s)?;
    let (year, month, day) = parse_date(s, sep)?;
    let mut t = Time::default();
    let mut offset = None;
    if s.len() > sep {
        let tstr = &s[sep + 1..];
        offset = parse_time(tstr, &mut t)?;
    }
    let (mut year, mut month, mut day) = (year, month, day);
    if t.hour == 24 {
        if t.minute != 0 || t.second != 0 || t.micro != 0 {
            return None;
        }
        t.hour = 0;
        if (1..=12).contains(&month) && day >= 1 && day <= days_in_month(year, month) {
            day += 1;
            if day > days_in_month(year, month) {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
    }
    let valid = (1..=9999).contains(&year)
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && t.hour < 24
        && t.minute < 60
        && t.second < 60;
    valid.then_some(Parsed {
        year,
        month,
        day,
        hour: t.hour,
        minute: t.minute,
        second: t.second,
        micro: t.micro,
        offset,
    })
}

fn separator_location(s: &[u8]) -> Option<usize> {
    let len = s.len();
    if len == 7 {
        return Some(7);
    }
    if s[4] == b'-' {
        if s[5] != b'W' {
            return Some(10);
        }
        if len > 8 && s[8] == b'-' {
            if len == 9 {
                return None;
            }
            if len > 10 && s[10].is_ascii_digit() {
                return Some(8);
            }
            return Some(10);
        }
        return Some(8);
    }
    if s[4] == b'W' {
        let mut idx = 7;
        while idx < len && s[idx].is_ascii_digit() {
            idx += 1;
        }
        if idx < 9 {
            return Some(idx);
        }
        return Some(if idx % 2 == 0 { 7 } else { 8 });
    }
    Some(8)
}

fn parse_date(s: &[u8], len: usize) -> Option<(i64, u32, u32)> {
    let mut p = 0;
    let year = digits(s, &mut p, 4)?;
    let uses_sep = at(s, p) == b'-';
    if uses_sep {
        p += 1;
    }
    if at(s, p) == b'W' {
        p += 1;
        let week = digits(s, &mut p, 2)?;
        let mut weekday = 1;
        if p < len {
            if uses_sep {
                let c = at(s, p);
                p += 1;
                if c != b'-' {
                    return None;
                }
            }
            weekday = digits(s, &mut p, 1)?;
        }
        return iso_to_ymd(i64::from(year), week, weekday);
    }
    let month = digits(s, &mut p, 2)?;
    if uses_sep {
        let c = at(s, p);
        p += 1;
        if c != b'-' {
            return None;
        }
    }
    let day = digits(s, &mut p, 2)?;
    Some((i64::from(year), month, day))
}

#[derive(Default)]
struct Time {
    hour: u32,
    minute: u32,
    second: u32,
    micro: u32,
}

/// `parse_hh_mm_ss_ff` over `s[start..end]`; `Some(trailing)` where `trailing` says characters
/// remain after the parsed part (the C function's return value 1).
fn hh_mm_ss_ff(s: &[u8], start: usize, end: usize, t: &mut Time) -> Option<bool> {
    let mut p = start;
    let mut has_sep = true;
    for i in 0..3 {
        let v = digits(s, &mut p, 2)?;
        match i {
            0 => t.hour = v,
            1 => t.minute = v,
            _ => t.second = v,
        }
        let c = at(s, p);
        p += 1;
        if i == 0 {
            has_sep = c == b':';
        }
        if p >= end {
            return Some(c != 0);
        } else if has_sep && c == b':' {
            if i == 2 {
                return None;
            }
        } else if c == b'.' || c == b',' {
            if i < 2 {
                return None;
            }
            break;
        } else if !has_sep {
            p -= 1;
        } else {
            return None;
        }
    }
    // Here `p < end`: the loop returned at the end of the field.
    let to_parse = (end - p).min(6);
    let mut us = digits(s, &mut p, to_parse)?;
    us *= 10u32.pow(u32::try_from(6 - to_parse).unwrap_or(0));
    t.micro = us;
    while at(s, p).is_ascii_digit() {
        p += 1;
    }
    Some(at(s, p) != 0)
}

/// The time part, into `t`; the offset as `(seconds, microseconds)` when one is given.
#[allow(clippy::option_option)]
fn parse_time(s: &[u8], t: &mut Time) -> Option<Option<(i64, i64)>> {
    let end = s.len();
    let mut tz = 0;
    loop {
        let c = at(s, tz);
        if c == b'Z' || c == b'+' || c == b'-' {
            break;
        }
        tz += 1;
        if tz >= end {
            break;
        }
    }
    let trailing = hh_mm_ss_ff(s, 0, tz, t)?;
    if tz >= end {
        return if trailing { None } else { Some(None) };
    }
    if s[tz] == b'Z' {
        return (tz + 1 == end).then_some(Some((0, 0)));
    }
    let sign = if s[tz] == b'-' { -1 } else { 1 };
    let mut o = Time::default();
    if hh_mm_ss_ff(s, tz + 1, end, &mut o)? || o.hour > 23 || o.minute > 59 || o.second > 59 {
        return None;
    }
    let secs = i64::from(o.hour) * 3600 + i64::from(o.minute) * 60 + i64::from(o.second);
    Some(Some((sign * secs, sign * i64::from(o.micro))))
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// An instant in seconds since the epoch as RFC 3339 in UTC, whole seconds
/// (`2026-11-29T12:00:00Z`); a value that is not finite as it is.
pub fn format_timestamp(seconds: f64) -> String {
    if !seconds.is_finite() {
        return seconds.to_string();
    }
    #[allow(clippy::cast_possible_truncation)]
    let whole = seconds.floor() as i64;
    let (y, m, d) = civil_from_days(whole.div_euclid(86_400));
    let s = whole.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

fn iso_to_ymd(year: i64, week: u32, weekday: u32) -> Option<(i64, u32, u32)> {
    if !(1..=9999).contains(&year) {
        return None;
    }
    let jan1 = days_from_civil(year, 1, 1);
    // 1970-01-01 was a Thursday: Monday == 0.
    let first_weekday = (jan1 + 3).rem_euclid(7);
    if week == 0 || week >= 53 {
        let long_year = week == 53 && (first_weekday == 3 || (first_weekday == 2 && is_leap(year)));
        if !long_year {
            return None;
        }
    }
    if !(1..=7).contains(&weekday) {
        return None;
    }
    let mut monday = jan1 - first_weekday;
    if first_weekday > 3 {
        monday += 7;
    }
    Some(civil_from_days(
        monday + i64::from((week - 1) * 7 + weekday - 1),
    ))
}

#[cfg(test)]
mod tests;
