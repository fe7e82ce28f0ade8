//! The canonical archive: its digest, its compact sorted text, and the receipt check.

use super::*;
use serde_json::json;

#[test]
fn an_archive_matches_its_receipt_by_digest_size_and_pod() {
    let doc = br#"{"metadata":{"uid":"u-1"},"status":{}}"#;
    let sha = digest(doc);
    assert_eq!(mismatch(doc, &sha, Some(doc.len() as u64), "u-1"), None);
    assert_eq!(mismatch(doc, &sha, None, "u-1"), None);
    let other = mismatch(b"{}", &sha, None, "u-1").unwrap();
    assert!(
        other.starts_with("does not match its receipt: sha256 "),
        "{other}"
    );
    let short = mismatch(doc, &sha, Some(1), "u-1").unwrap();
    assert!(
        short.ends_with(&format!("receipt {sha} (1 bytes)")),
        "{short}"
    );
    let pod = mismatch(doc, &sha, None, "u-2").unwrap();
    assert_eq!(pod, "is not the archive of Pod u-2: it names uid \"u-1\"");
    let text = b"not json";
    let unreadable = mismatch(text, &digest(text), None, "u-1").unwrap();
    assert!(unreadable.starts_with("is not readable: "), "{unreadable}");
}

#[test]
fn the_digest_is_sha256sums() {
    assert_eq!(
        digest(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        digest(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn keys_are_sorted_and_compact() {
    let doc = document(
        &json!({"uid": "u", "name": "p\u{e9}"}),
        &json!({"phase": "Failed"}),
        Basis::FinishedAt,
        PyNum::Float(1_700_000_000.0),
    );
    assert_eq!(
        doc,
        r#"{"anchor":1700000000.0,"metadata":{"name":"p\u00e9","uid":"u"},"retentionBasis":"finishedAt","status":{"phase":"Failed"}}"#
    );
}
