//! Timestamps accepted and refused exactly as CPython's `datetime.fromisoformat` does.

use super::*;

fn check(input: &str, expect: Result<f64, &str>) {
    let got = parse_timestamp(input).map_err(|e| match e {
        TimeError::Invalid(_) => "invalid",
        TimeError::NoTimezone(_) => "naive",
    });
    assert_eq!(got, expect, "{input:?}");
}

#[test]
fn kubernetes_timestamps() {
    check("1970-01-01T00:00:00Z", Ok(0.0));
    check("2026-11-29T12:00:00Z", Ok(1_795_953_600.0));
    check("2026-11-29T12:00:00.5Z", Ok(1_795_953_600.5));
    check("2026-11-29T12:00:00.123456789Z", Ok(1_795_953_600.123_456));
    check("2026-11-29T14:00:00+02:00", Ok(1_795_953_600.0));
    check("2026-11-29T11:30:00-00:30", Ok(1_795_953_600.0));
}

#[test]
fn forms_python_accepts() {
    check("2026-11-29 12:00:00Z", Ok(1_795_953_600.0));
    check("20261129T120000Z", Ok(1_795_953_600.0));
    check("2026-11-29T12:00Z", Ok(1_795_953_600.0));
    check("2026-11-29T12Z", Ok(1_795_953_600.0));
    check("2026-11-29T12:00:00,5Z", Ok(1_795_953_600.5));
    check("2026-11-28T24:00:00Z", Ok(1_795_910_400.0));
    check("2026-W48-7T12:00:00Z", Ok(1_795_953_600.0));
    check("2026W487T12:00:00Z", Ok(1_795_953_600.0));
}

#[test]
fn forms_python_refuses() {
    check("2026-11-29T12:00:00", Err("naive"));
    check("2026-11-29", Err("naive"));
    check("2026-11-29T12:00:00z", Err("invalid"));
    check("2026-11-29T25:00:00Z", Err("invalid"));
    check("2026-02-30T12:00:00Z", Err("invalid"));
    check("2026-11-29T12:00:60Z", Err("invalid"));
    check("2026-11-29T12:00:00ZZ", Err("invalid"));
    check("2026-11-29T", Err("invalid"));
    check("yesterday", Err("invalid"));
    check("", Err("invalid"));
    check("2026-11-29T12:00:00+24:00", Err("invalid"));
    check("2026-1129T12:00:00Z", Err("invalid"));
}

#[test]
fn formatted_as_rfc3339_and_parsed_back() {
    for (seconds, text) in [
        (0.0, "1970-01-01T00:00:00Z"),
        (1_795_953_600.5, "2026-11-29T12:00:00Z"),
        (1_811_808_000.0, "2027-06-01T00:00:00Z"),
        (951_782_400.0, "2000-02-29T00:00:00Z"),
        (-1.0, "1969-12-31T23:59:59Z"),
    ] {
        assert_eq!(format_timestamp(seconds), text, "{seconds}");
        assert_eq!(parse_timestamp(text), Ok(seconds.floor()), "{text}");
    }
    assert_eq!(format_timestamp(f64::NAN), "NaN");
}
