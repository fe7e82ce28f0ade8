//! `gc-cli ledger import|export`: moves the reference flow's observation ledger in and out of the
//! store unchanged, byte for byte.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use gc_runtime::ledger;

use crate::files::read_input;
use crate::live::with_store;

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
    let (text, entries) = ledger::check_ledger(&bytes, &key.cluster_id, &key.namespace)
        .with_context(|| format!("ledger file {}", args.file.display()))?;
    let at = (key.store.as_deref(), gc_store::DEFAULT_TIMEOUT);
    let location = with_store(at, async |store| {
        let saved = store.save_ledger_json(&key.cluster_id, &key.namespace, text);
        saved.await.context("cannot store the ledger")?;
        anyhow::Ok(store.location().to_owned())
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
    let at = (key.store.as_deref(), gc_store::DEFAULT_TIMEOUT);
    let text = with_store(at, async |store| {
        gc_runtime::adapters::export_ledger(store, &key.cluster_id, &key.namespace).await
    })?;
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
    fn validate(&self) -> Result<(), gc_core::input::InputError> {
        gc_core::input::check_scope(&self.cluster_id, &self.namespace)
    }
}
