//! The one-pass skim of a Pod's JSON: lengths as written, what it refuses, what it records.

use super::*;
use crate::pyjson::{Layout, to_string};
use serde_json::Value;

#[test]
fn canonical_len_matches_the_written_text() {
    for text in [
        r#"{"b": "\u00e9\ud83d\ude00 \" \\ \/ \n \u007f \u0001 é😀", "a": [1, 2.0, null, true, 1e2, -0.0]}"#,
        r#"[ ]"#,
        r#" {"k": {"nested": [1.5e16, 0.00001, 123456789012345678]}, "s": "plain", "e": {}} "#,
    ] {
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            canonical_len(text).unwrap(),
            to_string(&v, Layout::Canonical).len(),
            "{text}"
        );
    }
    // Python reads `-0` as the int 0 and writes `0`.
    assert_eq!(canonical_len("[-0, -0.0]").unwrap(), "[0,-0.0]".len());
}

#[test]
fn refuses_what_is_not_json() {
    for text in [
        "",
        "{",
        "[1,]",
        "{\"a\" 1}",
        "{\"a\":1,}",
        "01",
        "1.",
        "-",
        "tru",
        "\"a\u{1}\"",
        "\"\\x\"",
        "\"\\u12g4\"",
        "{} {}",
        "[1 2]",
        "{1:2}",
        "\"abc",
    ] {
        assert!(canonical_len(text).is_err(), "{text:?}");
    }
}

#[test]
fn records_what_the_schema_names() {
    const LABELS: Schema = Schema {
        keys: &[("name", Schema::LEAF), ("labels", Schema::ANY)],
        any: false,
        elements: None,
    };
    const ITEMS: Schema = Schema {
        keys: &[("phase", Schema::LEAF)],
        any: false,
        elements: None,
    };
    const LIST: Schema = Schema {
        keys: &[],
        any: false,
        elements: Some(&ITEMS),
    };
    const POD: Schema = Schema {
        keys: &[("metadata", LABELS), ("list", LIST), ("key", Schema::LEAF)],
        any: false,
        elements: None,
    };
    let text = r#"{"metadata": {"name": "p", "labels": {"a": "b"}, "skip": {"x": 1}}, "spec": [1], "list": [{"phase": "Failed"}, 3], "k\u0065y": 1}"#;
    let mut members = Vec::new();
    skim(text, &POD, &mut members).unwrap();
    let (meta, _) = member(&members, None, "metadata").unwrap();
    assert_eq!(
        member(&members, Some(meta), "name").unwrap().1.value,
        "\"p\""
    );
    let (labels, m) = member(&members, Some(meta), "labels").unwrap();
    assert_eq!(m.value, r#"{"a": "b"}"#);
    assert_eq!(
        member(&members, Some(labels), "a").unwrap().1.value,
        "\"b\""
    );
    assert!(member(&members, Some(meta), "skip").is_none());
    assert!(member(&members, None, "spec").is_none());
    let (list, _) = member(&members, None, "list").unwrap();
    let elements: Vec<_> = children(&members, list)
        .map(|(_, m)| (m.value, m.canonical_len))
        .collect();
    assert_eq!(
        elements,
        [
            (r#"{"phase": "Failed"}"#, r#"{"phase":"Failed"}"#.len()),
            ("3", 1)
        ]
    );
    let (first, _) = children(&members, list).next().unwrap();
    assert_eq!(
        member(&members, Some(first), "phase").unwrap().1.value,
        "\"Failed\""
    );
    assert_eq!(member(&members, None, "key").unwrap().1.value, "1");
}
