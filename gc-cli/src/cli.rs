//! The command line, as clap types that convert into the library's plain config structs.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use gc_core::PodInputs;
use gc_core::approval::SealKey;
use gc_core::config::{DEFAULT_COLLECT_LABEL, DEFAULT_PIN_FINALIZER};

use crate::Failure;

/// A Kubernetes garbage collector that never deletes the wrong thing.
#[derive(Debug, Parser)]
#[command(name = "gc-cli", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan a run: what would be collected, held or deferred, and why. Changes nothing.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Apply a reviewed plan written by `plan pods --out`: archive, then remove, its targets.
    Apply(Box<crate::apply::Apply>),
    /// Plan and apply in one go (pods: dry run unless `--auto-remediate --dry-run false`;
    /// sessions: deletes unless `--dry-run`).
    #[command(subcommand)]
    Run(RunCommand),
    /// Run a collector every interval and serve its metrics on /metrics.
    Serve(Box<crate::serve::Serve>),
    /// Move the observation ledger in and out of the store, unchanged.
    #[command(subcommand)]
    Ledger(crate::ledger::LedgerCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunCommand {
    /// Plan and apply the failed-Pod diagnostics collector.
    Pods(Box<crate::apply::RunPods>),
    /// Delete session resources whose session is gone from the database (fenced, audited).
    Sessions(Box<crate::sessions::RunSessions>),
}

impl RunCommand {
    /// Runs the collector once.
    pub(crate) fn run(&self) -> Result<(), Failure> {
        match self {
            Self::Pods(args) => crate::apply::run(args),
            Self::Sessions(args) => crate::sessions::run(args),
        }
    }

    /// Where the run sends its metrics.
    pub(crate) fn metrics_mut(&mut self) -> &mut crate::metrics::MetricsArgs {
        match self {
            Self::Pods(args) => &mut args.metrics,
            Self::Sessions(args) => &mut args.metrics,
        }
    }
}

#[derive(Debug, Subcommand)]
enum PlanCommand {
    /// Plan the failed-Pod diagnostics collector over a Pod inventory.
    Pods(Box<PlanPods>),
    /// Plan the orphaned-session collector against the cluster and the session database.
    Sessions(Box<crate::sessions::PlanSessions>),
}

/// Output formats of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// For people: one row per targeted, held or deferred Pod, and the counts.
    Table,
    /// The whole plan, every Pod's decision and reason.
    Json,
    /// One line `::{"outputs":{...}}::` as a Kestra script task emits it.
    Kestra,
}

/// Inputs of the failed-Pod collector, with the reference flow's defaults.
#[derive(Debug, Args)]
pub(crate) struct PodInputArgs {
    /// Identifies the cluster in ledger keys, receipts and archive names.
    #[arg(long, default_value = "primary", value_name = "ID")]
    cluster_id: String,
    /// The one namespace to collect in.
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// Minimum hold after complete container termination or first observed Failed status.
    #[arg(
        long,
        default_value_t = 86_400,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    retention_seconds: i64,
    /// At most this many Pods are targeted per run (1..=50).
    #[arg(
        long,
        default_value_t = 5,
        value_name = "N",
        allow_negative_numbers = true
    )]
    max_pods: i64,
    /// The plan fails when the inventory holds more Pods (max-pods..=10000).
    #[arg(
        long,
        default_value_t = 1_000,
        value_name = "N",
        allow_negative_numbers = true
    )]
    max_inventory: i64,
    /// The plan fails when a target's archive would be larger (1024..=1048576).
    #[arg(
        long,
        default_value_t = 262_144,
        value_name = "BYTES",
        allow_negative_numbers = true
    )]
    max_archive_bytes: i64,
    /// Label whose value "true" opts a Pod in.
    #[arg(long, default_value = DEFAULT_COLLECT_LABEL, value_name = "KEY")]
    collect_label: String,
    /// Finalizer that pins a Pod while it is archived and removed.
    #[arg(long, default_value = DEFAULT_PIN_FINALIZER, value_name = "NAME")]
    pin_finalizer: String,
}

impl PodInputArgs {
    pub(crate) fn inputs(&self) -> PodInputs {
        PodInputs {
            cluster_id: self.cluster_id.clone(),
            namespace: self.namespace.clone(),
            retention_seconds: self.retention_seconds,
            max_pods: self.max_pods,
            max_inventory: self.max_inventory,
            max_archive_bytes: self.max_archive_bytes,
            collect_label: self.collect_label.clone(),
            pin_finalizer: self.pin_finalizer.clone(),
        }
    }
}

/// The key that seals plans, so that only its holders can approve one.
#[derive(Debug, Args)]
pub(crate) struct SealArgs {
    /// File holding the plan seal key (HMAC-SHA256, at least 16 bytes; `$GC_SEAL_KEY` may hold
    /// the key itself, for example from a Kubernetes Secret). With a key, `plan --out` seals
    /// with it and `apply` accepts only plans sealed with it; without, plans carry a plain
    /// sha256 digest that detects edits but that anyone can recompute.
    #[arg(long, value_name = "FILE")]
    seal_key_file: Option<PathBuf>,
}

impl SealArgs {
    /// The key from `--seal-key-file`, else `$GC_SEAL_KEY`, else none.
    pub(crate) fn key(&self) -> Result<Option<SealKey>, Failure> {
        let bytes = match &self.seal_key_file {
            Some(path) => std::fs::read(path)
                .with_context(|| format!("cannot read --seal-key-file {}", path.display()))
                .map_err(Failure::usage)?,
            None => match std::env::var_os("GC_SEAL_KEY") {
                Some(key) => key.into_encoded_bytes(),
                None => return Ok(None),
            },
        };
        SealKey::new(&bytes)
            .context("invalid seal key (--seal-key-file or GC_SEAL_KEY)")
            .map(Some)
            .map_err(Failure::usage)
    }
}

/// `gc-cli plan pods`
#[derive(Debug, Args)]
pub(crate) struct PlanPods {
    /// Pod inventory: `kubectl get pods -o json` output, or the Kestra flow's
    /// `{size, metadataItems, statusItems}`; `-` reads standard input. Without it, the cluster is
    /// read (labelled Failed Pods only, filtered by the API server) and the ledger kept in the
    /// store; nothing is written to the cluster.
    #[arg(long, value_name = "FILE")]
    pub(crate) inventory: Option<PathBuf>,
    /// Previous observation ledger file, `{uid: {first, name}}` (instead of the store's).
    #[arg(long, value_name = "FILE")]
    pub(crate) ledger: Option<PathBuf>,
    /// Where to write the new observation ledger (instead of the store).
    #[arg(long, value_name = "FILE")]
    pub(crate) ledger_out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) connect: crate::live::ConnectArgs,
    /// The store for the ledger and receipts: `sqlite:PATH`, a file path, or `postgres://...`.
    /// Default: the embedded SQLite file (see `gc-cli ledger --help`).
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Also write the plan, sealed with its expiry and digest, for `gc-cli apply`.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// How long a plan written with `--out` stays valid (1..=86400: at most 24 hours).
    #[arg(
        long,
        default_value_t = 3600,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub(crate) ttl_seconds: i64,
    #[command(flatten)]
    pub(crate) seal: SealArgs,
    #[command(flatten)]
    pub(crate) pod: PodInputArgs,
    /// The instant to plan for (RFC 3339); default now.
    #[arg(long, value_name = "RFC3339")]
    pub(crate) now: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,
}

impl Cli {
    pub(crate) fn run(self) -> Result<(), Failure> {
        match self.command {
            Command::Plan(PlanCommand::Pods(args)) => crate::plan_pods::run(&args),
            Command::Apply(args) => crate::apply::apply(&args),
            Command::Run(run) => run.run(),
            Command::Serve(args) => crate::serve::serve(*args),
            Command::Plan(PlanCommand::Sessions(args)) => crate::sessions::plan(&args),
            Command::Ledger(command) => crate::ledger::run(&command),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
