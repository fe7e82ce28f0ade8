//! The canonical diagnostic archive of a Pod, byte for byte what the reference flow writes.
//!
//! The archive is `json.dumps({"metadata": m, "status": s, "retentionBasis": basis, "anchor":
//! end}, sort_keys=True, separators=(",", ":"))` with Python's defaults otherwise (ASCII-only
//! text, Python float `repr`). Its sha256 over those UTF-8 bytes is what receipts record, so
//! anyone can recompute it with `sha256sum` or three lines of Python.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::pods::facts::Basis;
use crate::pods::ledger::PyNum;
use crate::pyjson::{self, Layout};

/// The archive text of a Pod with `metadata` and `status` (`{}` when it has none).
pub fn document(metadata: &Value, status: &Value, basis: Basis, anchor: PyNum) -> String {
    let mut out = String::from("{\"anchor\":");
    anchor.write(&mut out);
    out.push_str(",\"metadata\":");
    pyjson::write_value(&mut out, metadata, Layout::Canonical);
    out.push_str(",\"retentionBasis\":\"");
    out.push_str(basis.as_str());
    out.push_str("\",\"status\":");
    pyjson::write_value(&mut out, status, Layout::Canonical);
    out.push('}');
    out
}

/// The digest receipts record: lowercase hex sha256 of the archive's bytes (`sha256sum`'s).
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
