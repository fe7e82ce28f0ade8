//! Lazy reads of borrowed JSON text with Python's notion of truthiness and `in`.
//!
//! The planner keeps each Pod as raw JSON text and decodes only the fields a rule reaches, in the
//! order the reference flow reaches them, so that odd data fails the plan exactly where the flow
//! would fail and is ignored exactly where the flow would ignore it.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON value's text (known to be valid JSON), borrowed from the inventory.
pub type Raw<'a> = &'a str;

/// The JSON type of a raw value, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    /// `null`
    Null,
    /// `true` / `false`
    Bool,
    /// a number
    Number,
    /// a string
    String,
    /// an array
    Array,
    /// an object
    Object,
}

/// The JSON type of `raw`.
pub fn kind(raw: Raw<'_>) -> JsonType {
    match raw.as_bytes().first() {
        Some(b'n') => JsonType::Null,
        Some(b't' | b'f') => JsonType::Bool,
        Some(b'"') => JsonType::String,
        Some(b'[') => JsonType::Array,
        Some(b'{') => JsonType::Object,
        _ => JsonType::Number,
    }
}

/// Python's `bool(value)`: false for `null`, `false`, `0`, `""`, `[]` and `{}`.
pub fn truthy(raw: Raw<'_>) -> bool {
    let text = raw;
    match kind(raw) {
        JsonType::Null => false,
        JsonType::Bool => text == "true",
        JsonType::Number => text.parse::<f64>().is_ok_and(|n| n != 0.0),
        JsonType::String => text.len() > 2,
        JsonType::Array | JsonType::Object => !text[1..].trim_start().starts_with([']', '}']),
    }
}

/// The decoded text when `raw` is a string.
pub fn as_str<'a>(raw: Raw<'a>) -> Option<Cow<'a, str>> {
    if kind(raw) != JsonType::String {
        return None;
    }
    // Quotes around text without a backslash, a quote or a control character are a valid JSON
    // string whose content is that text: no decoding needed (most strings of a Pod are so).
    if let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"'))
        && !inner.bytes().any(|b| b == b'\\' || b == b'"' || b < 0x20)
    {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<Cow<'a, str>>(raw).ok()
}

/// Whether `raw` is the string `want`.
pub fn is_str(raw: Option<Raw<'_>>, want: &str) -> bool {
    raw.and_then(as_str).is_some_and(|s| s == want)
}

/// A JSON value of another type than the operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

/// The value of `key` in the object `raw` (the last one when a key repeats, as Python reads it),
/// or [`WrongType`] when `raw` is not an object.
pub fn get<'a>(raw: Raw<'a>, key: &str) -> Result<Option<Raw<'a>>, WrongType> {
    let mut de = serde_json::Deserializer::from_str(raw);
    FindKey(key)
        .deserialize(&mut de)
        .map(|v| v.map(RawValue::get))
        .map_err(|_| WrongType)
}

/// Finds one key of an object while skimming the rest.
struct FindKey<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for FindKey<'_> {
    type Value = Option<&'de RawValue>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FindKey<'_> {
    type Value = Option<&'de RawValue>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == self.0 {
                found = Some(map.next_value::<&RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The elements of the array `raw`, or [`WrongType`] when it is not an array.
pub fn items(raw: Raw<'_>) -> Result<Vec<Raw<'_>>, WrongType> {
    if kind(raw) != JsonType::Array {
        return Err(WrongType);
    }
    serde_json::from_str::<Vec<&RawValue>>(raw)
        .map(|xs| xs.into_iter().map(RawValue::get).collect())
        .map_err(|_| WrongType)
}

/// Python's `needle in container` for a container read from JSON, `None` where Python raises
/// `TypeError` (a number or `true`). `null`/falsy containers are the caller's business.
pub fn contains(raw: Raw<'_>, needle: &str) -> Option<bool> {
    match kind(raw) {
        JsonType::Object => get(raw, needle).ok().map(|v| v.is_some()),
        JsonType::Array => items(raw)
            .ok()
            .map(|xs| xs.iter().any(|x| is_str(Some(x), needle))),
        JsonType::String => as_str(raw).map(|s| s.contains(needle)),
        JsonType::Null | JsonType::Bool | JsonType::Number => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> &str {
        s
    }

    #[test]
    fn strings_read_without_decoding_are_what_decoding_gives() {
        for text in [
            r#""plain""#,
            r#""""#,
            r#""p\u00f6d""#,
            r#""a\"b""#,
            "\"tab\there\"",
            r#""a"b""#,
            r#""é""#,
            " \"spaced\" ",
            "1",
            "null",
        ] {
            let decoded = match kind(text) {
                JsonType::String => serde_json::from_str::<String>(text).ok(),
                _ => None,
            };
            assert_eq!(as_str(text).map(Cow::into_owned), decoded, "{text}");
        }
        assert!(matches!(as_str(r#""plain""#), Some(Cow::Borrowed("plain"))));
    }

    #[test]
    fn truthiness_matches_python() {
        for (text, want) in [
            ("null", false),
            ("false", false),
            ("true", true),
            ("0", false),
            ("0.0", false),
            ("-0", false),
            ("1e-9", true),
            ("\"\"", false),
            ("\"x\"", true),
            ("[]", false),
            ("[ ]", false),
            ("[0]", true),
            ("{}", false),
            ("{ \n}", false),
            ("{\"a\":1}", true),
        ] {
            assert_eq!(truthy(raw(text)), want, "{text}");
        }
    }

    #[test]
    fn get_takes_the_last_duplicate_and_decodes_escaped_keys() {
        let r = raw(r#"{"a":1,"\u0061":2,"b":{"c":3}}"#);
        assert_eq!(get(r, "a").unwrap().unwrap(), "2");
        assert!(get(r, "z").unwrap().is_none());
        assert!(get(raw("[1]"), "a").is_err());
    }

    #[test]
    fn contains_matches_python_in() {
        assert_eq!(contains(raw(r#"{"running":{}}"#), "running"), Some(true));
        assert_eq!(contains(raw(r#"["running"]"#), "running"), Some(true));
        assert_eq!(contains(raw(r#""xrunningx""#), "running"), Some(true));
        assert_eq!(contains(raw(r#""x""#), "running"), Some(false));
        assert_eq!(contains(raw("5"), "running"), None);
    }
}
