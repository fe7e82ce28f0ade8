//! The flow's ledger JSON: what is read, what is refused, and that a ledger is written back as
//! Python's `json.dumps` wrote it.

use serde_json::json;

use super::*;

/// A read ledger as text, one entry a line in uid order: `uid: first, name` for an entry of the
/// flow's shape (its first observation as Python holds it), else the entry's JSON; or the error.
fn check(input: &str, expect: &str) {
    let got = match PreviousLedger::parse(input.as_bytes()) {
        Err(e) => e.to_string(),
        Ok(ledger) => {
            let mut uids: Vec<_> = ledger.0.keys().collect();
            uids.sort();
            let line = |uid: &String| match &ledger.0[uid] {
                Value::Object(entry) => {
                    let first = entry.get("first").map(|f| match PyNum::from_json(f) {
                        Some(n) => format!("{n:?}"),
                        None => format!("not a number {f}"),
                    });
                    let name = entry.get("name").map(Value::to_string);
                    format!(
                        "{uid}: {}, {}",
                        first.unwrap_or_default(),
                        name.unwrap_or_default()
                    )
                }
                other => format!("{uid}: {other}"),
            };
            uids.into_iter().map(line).collect::<Vec<_>>().join("\n")
        }
    };
    assert_eq!(got, expect, "ledger {input}");
}

#[test]
fn parse() {
    let table = [
        ("{}", ""),
        (" {} \n", ""),
        // ints stay ints, floats stay floats, booleans are Python ints
        (
            r#"{"uid-a": {"first": 1795000000, "name": "a"}}"#,
            r#"uid-a: Int(1795000000), "a""#,
        ),
        (
            r#"{"uid-a": {"first": 1795000000.0, "name": "a"}}"#,
            r#"uid-a: Float(1795000000.0), "a""#,
        ),
        (
            r#"{"uid-a": {"first": 1795900000.25, "name": "a"}}"#,
            r#"uid-a: Float(1795900000.25), "a""#,
        ),
        (
            r#"{"uid-a": {"first": 1.7959e9, "name": "a"}}"#,
            r#"uid-a: Float(1795900000.0), "a""#,
        ),
        (
            r#"{"uid-a": {"first": true, "name": "a"}}"#,
            r#"uid-a: Bool(true), "a""#,
        ),
        (
            r#"{"uid-a": {"first": -5, "name": "a"}}"#,
            r#"uid-a: Int(-5), "a""#,
        ),
        // entries are read as they are and checked only when the plan uses them
        (
            r#"{"uid-a": {"first": "yesterday", "name": "a"}, "uid-b": 5, "uid-c": {"name": 7}}"#,
            "uid-a: not a number \"yesterday\", \"a\"\nuid-b: 5\nuid-c: , 7",
        ),
        (
            r#"{"uid-a": {"first": null}, "uid-b": []}"#,
            "uid-a: not a number null, \nuid-b: []",
        ),
        // a repeated uid: the last wins, as in a Python dict
        (
            r#"{"uid-a": {"first": 1, "name": "old"}, "uid-a": {"first": 2, "name": "new"}}"#,
            r#"uid-a: Int(2), "new""#,
        ),
        // anything but an object is refused, named
        (
            "[1, 2]",
            "malformed observation ledger: expected an object, found an array",
        ),
        (
            "null",
            "malformed observation ledger: expected an object, found null",
        ),
        (
            "5",
            "malformed observation ledger: expected an object, found a number",
        ),
        (
            "true",
            "malformed observation ledger: expected an object, found a boolean",
        ),
        (
            r#""{}""#,
            "malformed observation ledger: expected an object, found a string",
        ),
        (
            "",
            "malformed observation ledger: EOF while parsing a value at line 1 column 0",
        ),
        (
            r#"{"uid-a": {"first": 1"#,
            "malformed observation ledger: EOF while parsing an object at line 1 column 21",
        ),
        (
            "{} {}",
            "malformed observation ledger: trailing characters at line 1 column 4",
        ),
    ];
    for (input, expect) in table {
        check(input, expect);
    }
}

/// A ledger the flow wrote (`json.dumps(state)`, entries in uid order) is read and written back
/// byte for byte, also through [`PreviousLedger::from`].
fn check_round_trip(text: &str) {
    let previous = PreviousLedger::parse(text.as_bytes()).expect("a ledger");
    let mut uids: Vec<_> = previous.0.keys().cloned().collect();
    uids.sort();
    let mut ledger = Ledger::default();
    for uid in uids {
        let entry = &previous.0[&uid];
        let first = PyNum::from_json(&entry["first"]).expect("a number");
        let name = entry["name"].clone();
        ledger.insert(uid, Observation { first, name });
    }
    assert_eq!(ledger.to_json(), text);
    assert_eq!(PreviousLedger::from(&ledger), previous, "{text}");
}

#[test]
fn round_trip() {
    let table = [
        "{}",
        r#"{"uid-a": {"first": 1795000000, "name": "a"}}"#,
        r#"{"uid-a": {"first": 1795000000, "name": "a"}, "uid-b": {"first": 1795900000.25, "name": "b"}}"#,
        r#"{"uid-a": {"first": 1795000000.0, "name": "a"}}"#,
        r#"{"uid-a": {"first": 1e+16, "name": "a"}}"#,
        r#"{"uid-a": {"first": true, "name": "a"}}"#,
        // names as Python writes them: non-ASCII escaped, any JSON value
        r#"{"uid-caf\u00e9": {"first": 1, "name": "caf\u00e9-\ud83d\ude00 \"q\"\\"}}"#,
        r#"{"uid-a": {"first": 1, "name": null}, "uid-b": {"first": 2, "name": ["x", {"k": 1.5}]}}"#,
    ];
    for text in table {
        check_round_trip(text);
    }
}

#[test]
fn insert_keeps_the_first_position_and_the_last_value() {
    let obs = |first, name: &str| Observation {
        first: PyNum::Int(first),
        name: json!(name),
    };
    let mut ledger = Ledger::default();
    assert!(ledger.is_empty());
    ledger.insert("uid-b".into(), obs(1, "b"));
    ledger.insert("uid-a".into(), obs(2, "a"));
    ledger.insert("uid-b".into(), obs(3, "b2"));
    assert_eq!(ledger.len(), 2);
    assert_eq!(ledger.get("uid-b"), Some(&obs(3, "b2")));
    assert_eq!(ledger.get("uid-c"), None);
    assert_eq!(
        ledger.to_json(),
        r#"{"uid-b": {"first": 3, "name": "b2"}, "uid-a": {"first": 2, "name": "a"}}"#
    );
    assert_eq!(
        serde_json::to_string(&ledger).expect("json"),
        r#"{"uid-b":{"first":3,"name":"b2"},"uid-a":{"first":2,"name":"a"}}"#
    );
}

#[test]
fn a_scoped_ledger_names_its_cluster_and_namespace_and_is_refused_elsewhere() {
    let mut ledger = Ledger::default();
    ledger.insert(
        "u1".into(),
        Observation {
            first: PyNum::Int(5),
            name: "a".into(),
        },
    );
    let text = ledger.to_scoped_json("prod-x", "batch");
    assert_eq!(
        text,
        r#"{"gc:scope": {"cluster": "prod-x", "namespace": "batch"}, "u1": {"first": 5, "name": "a"}}"#
    );
    assert_eq!(
        Ledger::default().to_scoped_json("c", "n"),
        r#"{"gc:scope": {"cluster": "c", "namespace": "n"}}"#
    );
    let read = PreviousLedger::parse(text.as_bytes()).unwrap();
    assert_eq!(read.check_scope("prod-x", "batch"), Ok(()));
    // The reference flow's key is the same for these two: the ledger tells them apart.
    let e = read.check_scope("prod", "x-batch").unwrap_err();
    assert_eq!(
        e.to_string(),
        "malformed observation ledger: this is the ledger of cluster prod-x namespace batch, not \
         of cluster prod namespace x-batch: refused"
    );
    assert!(read.check_scope("prod-x", "other").is_err());
    assert!(read.check_scope("other", "batch").is_err());
    // The reference flow's ledger names nothing: accepted anywhere.
    let plain = PreviousLedger::parse(ledger.to_json().as_bytes()).unwrap();
    assert_eq!(plain.check_scope("any", "where"), Ok(()));
    for bad in [
        r#"{"gc:scope": "prod"}"#,
        r#"{"gc:scope": {"cluster": "prod"}}"#,
    ] {
        let e = PreviousLedger::parse(bad.as_bytes())
            .unwrap()
            .check_scope("prod", "batch")
            .unwrap_err();
        assert!(e.to_string().contains("\"gc:scope\" entry is not"), "{e}");
    }
}
