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

/// What is wrong with `bytes` as the archive of Pod `uid` that a receipt records with `sha256`
/// (and `size`, when it records one), if anything. The one check of an archive read back: by
/// apply before the receipt and the delete, and by `archives show|verify`.
pub fn mismatch(bytes: &[u8], sha256: &str, size: Option<u64>, uid: &str) -> Option<String> {
    mismatch_at(bytes, sha256, size, "/metadata/uid", &format!("Pod {uid}"))
}

/// [`mismatch`] of any archive: its uid is at `pointer`, and `what` is `KIND UID` (the uid last,
/// as the archive must name it).
pub fn mismatch_at(
    bytes: &[u8],
    sha256: &str,
    size: Option<u64>,
    pointer: &str,
    what: &str,
) -> Option<String> {
    let found = digest(bytes);
    let length = bytes.len() as u64;
    if found != sha256 || size.is_some_and(|s| s != length) {
        let recorded = size.map_or_else(String::new, |s| format!(" ({s} bytes)"));
        return Some(format!(
            "does not match its receipt: sha256 {found} ({length} bytes), receipt {sha256}{recorded}"
        ));
    }
    let doc: Value = match serde_json::from_slice(bytes) {
        Ok(doc) => doc,
        Err(e) => return Some(format!("is not readable: {e}")),
    };
    let uid = what.rsplit(' ').next().unwrap_or(what);
    let named = doc.pointer(pointer).unwrap_or(&Value::Null);
    (named != uid).then(|| format!("is not the archive of {what}: it names uid {named}"))
}

#[cfg(test)]
mod tests;
