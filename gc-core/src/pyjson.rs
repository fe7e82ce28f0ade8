//! JSON text exactly as Python's `json.dumps` writes it, so digests and sizes can be recomputed.
//!
//! The archive digest is taken over `json.dumps(doc, sort_keys=True, separators=(',', ':'))` and
//! the Kestra outputs over Python's defaults; anyone must be able to recompute either with the
//! standard library. That fixes three details serde_json does differently: non-ASCII text is
//! escaped as `\uXXXX` (`ensure_ascii`), floats use Python's `repr` (`1e+16`, `1e-05`, `2.0`),
//! and object keys are sorted by code point when asked.

use serde_json::{Map, Value};

/// How `json.dumps` lays out the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `separators=(',', ':')`, `sort_keys=True`: the canonical archive form.
    Canonical,
    /// `separators=(',', ':')`, keys in the map's own order.
    Compact,
    /// Python's default `', '` and `': '` separators, keys in the map's own order.
    Default,
}

/// `value` as `json.dumps` would write it with `layout`.
pub fn to_string(value: &Value, layout: Layout) -> String {
    let mut out = String::new();
    write_value(&mut out, value, layout);
    out
}

/// Appends `value` to `out` as `json.dumps` would write it with `layout`.
pub fn write_value(out: &mut String, value: &Value, layout: Layout) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                write_float(out, n.as_f64().unwrap_or(f64::NAN));
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_separator(layout));
                }
                write_value(out, item, layout);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map, layout),
    }
}

fn item_separator(layout: Layout) -> &'static str {
    if layout == Layout::Default { ", " } else { "," }
}

fn key_separator(layout: Layout) -> &'static str {
    if layout == Layout::Default { ": " } else { ":" }
}

fn write_object(out: &mut String, map: &Map<String, Value>, layout: Layout) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    if layout == Layout::Canonical {
        // Rust orders `str` by UTF-8 bytes, which is code point order, as Python sorts `str`.
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    }
    out.push('{');
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push_str(item_separator(layout));
        }
        write_str(out, key);
        out.push_str(key_separator(layout));
        write_value(out, item, layout);
    }
    out.push('}');
}

/// A string literal with `ensure_ascii=True` escaping.
pub fn write_str(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// A float as Python's `repr` writes it (shortest round-trip digits; exponent form when the
/// decimal point falls outside `-4 < decpt <= 16`).
pub fn write_float(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("NaN");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    // `{:e}` gives the shortest round-trip digits: "-1.2345e-7", "1e16", "0e0".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1;
    if negative {
        out.push('-');
    }
    if (-4 < decpt) && (decpt <= 16) {
        let n = i32::try_from(digits.len()).unwrap_or(i32::MAX);
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n(
                '0',
                usize::try_from(-decpt).unwrap_or(0),
            ));
            out.push_str(&digits);
        } else if decpt >= n {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n(
                '0',
                usize::try_from(decpt - n).unwrap_or(0),
            ));
            out.push_str(".0");
        } else {
            let (int, frac) = digits.split_at(usize::try_from(decpt).unwrap_or(0));
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let e = decpt - 1;
        out.push_str(if e < 0 { "e-" } else { "e+" });
        out.push_str(&format!("{:02}", e.abs()));
    }
}

/// The length of one character in a string with `ensure_ascii` escaping.
pub fn escaped_len(c: u32) -> usize {
    match c {
        0x22 | 0x5c | 0x0a | 0x0d | 0x09 | 0x08 | 0x0c => 2,
        0x20..=0x7e => 1,
        0x1_0000.. => 12,
        _ => 6,
    }
}

/// How an error message names a JSON value's type (`a string`, `an object`, ...).
pub fn type_name(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn float(x: f64) -> String {
        let mut s = String::new();
        write_float(&mut s, x);
        s
    }

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1_764_441_234.5, "1764441234.5"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (1.5e16, "1.5e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (1e100, "1e+100"),
            (0.1, "0.1"),
            (123.456, "123.456"),
        ];
        for (x, want) in cases {
            assert_eq!(float(x), want, "{x}");
        }
    }

    #[test]
    fn strings_are_ascii_escaped() {
        let v = json!({"b": "é\u{1F600}\"\\\n\u{7f}\u{1}", "a": [1, 2.0, null, true]});
        assert_eq!(
            to_string(&v, Layout::Canonical),
            r#"{"a":[1,2.0,null,true],"b":"\u00e9\ud83d\ude00\"\\\n\u007f\u0001"}"#
        );
        assert_eq!(
            to_string(&json!({"z": [1, {"k": "v"}]}), Layout::Default),
            r#"{"z": [1, {"k": "v"}]}"#
        );
    }
}
