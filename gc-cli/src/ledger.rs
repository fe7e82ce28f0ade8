//! `gc-cli ledger import|export`: moves the reference flow's observation ledger in and out of the
//! store unchanged, byte for byte.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use gc_core::PodInputs;
use gc_core::ledger::{PreviousLedger, SCOPE_KEY};
use serde_json::Value;

use crate::exit::UsageError;
use crate::files::read_input;
use crate::live::block_on;
use gc_core::pyjson::type_name as kind;

/// `gc-cli ledger ...`
#[derive(Debug, Subcommand)]
pub(crate) enum LedgerCommand {
    /// Store a ledger file (the Kestra flow's `{uid: {"first": seconds, "name": name}}`) as it
    /// is, replacing the stored ledger of the cluster and namespace.
    Import(Import),
    /// Print the stored ledger of a cluster and namespace exactly as stored (`{}` when none is).
    Export(Export),
}

/// Which ledger, in which store.
#[derive(Debug, Args)]
pub(crate) struct LedgerKey {
    /// The cluster the ledger belongs to.
    #[arg(long, value_name = "ID")]
    cluster_id: String,
    /// The namespace the ledger belongs to.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: String,
    /// The store: `sqlite:PATH` or a file path (SQLite), or `postgres://...`. Default: the
    /// embedded SQLite file, `$GC_STATE_DIR/gc.sqlite3`, else `$XDG_STATE_HOME/gc/gc.sqlite3`,
    /// else `~/.local/state/gc/gc.sqlite3`.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
}

/// `gc-cli ledger import`
#[derive(Debug, Args)]
pub(crate) struct Import {
    #[command(flatten)]
    key: LedgerKey,
    /// The ledger file; `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    file: PathBuf,
}

/// `gc-cli ledger export`
#[derive(Debug, Args)]
pub(crate) struct Export {
    #[command(flatten)]
    key: LedgerKey,
    /// Write the ledger to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub(crate) fn execute(command: &LedgerCommand) -> anyhow::Result<()> {
    match command {
        LedgerCommand::Import(args) => import(args),
        LedgerCommand::Export(args) => export(args),
    }
}

fn import(args: &Import) -> anyhow::Result<()> {
    let key = &args.key;
    key.validate()?;
    let bytes = read_input(&args.file, "ledger file")?;
    // Not a ledger the flow wrote: the input file is invalid.
    let (text, entries) = check_ledger(&bytes, &key.cluster_id, &key.namespace)
        .map_err(|e| UsageError::new(format!("ledger file {}: {e:#}", args.file.display())))?;
    let location = block_on(async {
        let store = key.open().await?;
        store
            .save_ledger_json(&key.cluster_id, &key.namespace, text)
            .await
            .context("cannot store the ledger")?;
        store.close().await;
        Ok(store.location().to_owned())
    })?;
    let noun = if entries == 1 { "entry" } else { "entries" };
    tracing::info!(
        "imported the ledger of cluster {} namespace {} ({entries} {noun}) into {location}",
        key.cluster_id,
        key.namespace
    );
    Ok(())
}

fn export(args: &Export) -> anyhow::Result<()> {
    let key = &args.key;
    key.validate()?;
    let (text, location) = block_on(async {
        let store = key.open().await?;
        let text = store
            .ledger_json(&key.cluster_id, &key.namespace)
            .await
            .context("cannot read the ledger")?;
        store.close().await;
        Ok((text, store.location().to_owned()))
    })?;
    let text = text.unwrap_or_else(|| {
        // The flow reads a missing ledger as `{}` too.
        tracing::warn!(
            "no ledger of cluster {} namespace {} in {location}: exporting the empty ledger",
            key.cluster_id,
            key.namespace
        );
        "{}".to_owned()
    });
    match &args.out {
        Some(path) => crate::files::write_file(path, &text)?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("cannot write the ledger")?;
        }
    }
    Ok(())
}

impl LedgerKey {
    /// Checks the cluster id and namespace as a plan does: a ledger is only ever kept under
    /// names a plan accepts.
    fn validate(&self) -> Result<(), gc_core::config::InputError> {
        PodInputs {
            cluster_id: self.cluster_id.clone(),
            namespace: self.namespace.clone(),
            ..PodInputs::default()
        }
        .validate()
        .map(drop)
    }

    async fn open(&self) -> anyhow::Result<gc_store::Store> {
        crate::live::open_store(self.store.as_deref()).await
    }
}

/// Checks that `bytes` is a ledger the flow (or gc) wrote for `cluster_id` and `namespace`: a
/// JSON object whose every entry is an object with a numeric `first`, and which names no other
/// cluster or namespace ([`gc_core::ledger::SCOPE_KEY`]). Returns the text, unchanged, and the
/// number of entries.
fn check_ledger<'a>(
    bytes: &'a [u8],
    cluster_id: &str,
    namespace: &str,
) -> anyhow::Result<(&'a str, usize)> {
    let text = std::str::from_utf8(bytes).context("not UTF-8 text")?;
    let value: Value = serde_json::from_str(text).context("not JSON")?;
    let Value::Object(entries) = &value else {
        anyhow::bail!(
            "expected a JSON object {{uid: {{\"first\": seconds, \"name\": name}}}}, found {}",
            kind(&value)
        );
    };
    PreviousLedger::parse(bytes)?.check_scope(cluster_id, namespace)?;
    let entries: Vec<_> = entries.iter().filter(|(k, _)| *k != SCOPE_KEY).collect();
    for (uid, entry) in &entries {
        let Value::Object(fields) = entry else {
            anyhow::bail!("entry {uid:?}: expected an object, found {}", kind(entry));
        };
        match fields.get("first") {
            Some(Value::Number(_)) => {}
            Some(other) => anyhow::bail!(
                "entry {uid:?}: \"first\" must be a number of seconds, found {}",
                kind(other)
            ),
            None => anyhow::bail!("entry {uid:?}: \"first\" is missing"),
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
