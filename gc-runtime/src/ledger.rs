//! The observation ledger moved in and out of the store unchanged, byte for byte (`gc-cli ledger
//! import|export`): a ledger file is checked ([`check_ledger`]) before it replaces the stored one.

use crate::Context as _;
use gc_core::pods::ledger::{PreviousLedger, SCOPE_KEY};
use gc_core::pyjson::type_name as kind;
use serde_json::Value;

/// A ledger file that is not a ledger the flow (or gc) wrote for the cluster and namespace: an
/// input error ([`FailureKind::Usage`](crate::FailureKind::Usage)).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LedgerFileError(pub String);

/// Checks that `bytes` is a ledger the flow (or gc) wrote for `cluster_id` and `namespace`: a
/// JSON object whose every entry is an object with a numeric `first`, and which names no other
/// cluster or namespace ([`SCOPE_KEY`]). Returns the text, unchanged, and the
/// number of entries.
///
/// # Errors
/// What makes it no such ledger, naming the entry.
pub fn check_ledger<'a>(
    bytes: &'a [u8],
    cluster_id: &str,
    namespace: &str,
) -> Result<(&'a str, usize), LedgerFileError> {
    entries(bytes, cluster_id, namespace).map_err(|e| LedgerFileError(format!("{e:#}")))
}

fn entries<'a>(
    bytes: &'a [u8],
    cluster_id: &str,
    namespace: &str,
) -> crate::Result<(&'a str, usize)> {
    let text = std::str::from_utf8(bytes).context("not UTF-8 text")?;
    let value: Value = serde_json::from_str(text).context("not JSON")?;
    let Value::Object(entries) = &value else {
        return Err(crate::Error::msg(format!(
            "expected a JSON object {{uid: {{\"first\": seconds, \"name\": name}}}}, found {}",
            kind(&value)
        )));
    };
    PreviousLedger::parse(bytes)?.check_scope(cluster_id, namespace)?;
    let entries: Vec<_> = entries.iter().filter(|(k, _)| *k != SCOPE_KEY).collect();
    for (uid, entry) in &entries {
        let Value::Object(fields) = entry else {
            return Err(crate::Error::msg(format!(
                "entry {uid:?}: expected an object, found {}",
                kind(entry)
            )));
        };
        match fields.get("first") {
            Some(Value::Number(_)) => {}
            Some(other) => {
                return Err(crate::Error::msg(format!(
                    "entry {uid:?}: \"first\" must be a number of seconds, found {}",
                    kind(other)
                )));
            }
            None => {
                return Err(crate::Error::msg(format!(
                    "entry {uid:?}: \"first\" is missing"
                )));
            }
        }
    }
    Ok((text, entries.len()))
}

#[cfg(test)]
mod tests {
    use super::check_ledger;

    fn check(input: &str, expected: Result<usize, &str>) {
        let got = check_ledger(input.as_bytes(), "prod", "batch")
            .map(|(text, n)| {
                assert_eq!(text, input);
                n
            })
            .map_err(|e| format!("{e:#}"));
        assert_eq!(got, expected.map_err(str::to_owned), "{input}");
    }

    #[test]
    fn ledgers_are_checked_entry_by_entry() {
        check("{}", Ok(0));
        check(
            r#"{"a": {"first": 1795000000, "name": "p"}, "b": {"first": 1.5}}"#,
            Ok(2),
        );
        check(
            "[]",
            Err(
                r#"expected a JSON object {uid: {"first": seconds, "name": name}}, found an array"#,
            ),
        );
        check(
            r#"{"a": {"first": 1}, "u-2": 3}"#,
            Err(r#"entry "u-2": expected an object, found a number"#),
        );
        check(
            r#"{"u-1": {"first": "1795000000", "name": "p"}}"#,
            Err(r#"entry "u-1": "first" must be a number of seconds, found a string"#),
        );
        check(
            r#"{"u-1": {"first": true}}"#,
            Err(r#"entry "u-1": "first" must be a number of seconds, found a boolean"#),
        );
        check(
            r#"{"u-1": {"name": "p"}}"#,
            Err(r#"entry "u-1": "first" is missing"#),
        );
        assert!(check_ledger(b"{", "prod", "batch").is_err());
        assert!(check_ledger(b"", "prod", "batch").is_err());
        // A ledger gc wrote names its cluster and namespace: its own is taken, another's not.
        let scoped =
            r#"{"gc:scope": {"cluster": "prod", "namespace": "batch"}, "a": {"first": 1}}"#;
        check(scoped, Ok(1));
        let other = scoped.replace("\"batch\"", "\"x-batch\"");
        check(
            &other,
            Err(
                "malformed observation ledger: this is the ledger of cluster prod namespace \
                 x-batch, not of cluster prod namespace batch: refused",
            ),
        );
    }
}
