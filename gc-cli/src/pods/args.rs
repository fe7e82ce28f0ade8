//! The flags every failed-Pod command shares: the collector's inputs and the plan seal key.

use std::path::PathBuf;

use clap::Args;
use gc_core::PodInputs;
use gc_core::pods::approval::SealKey;
use gc_core::pods::config::{DEFAULT_COLLECT_LABEL, DEFAULT_PIN_FINALIZER};
use gc_core::selector::{DEFAULT_PROTECT_LABEL, LabelPair, Selector};

use crate::exit::UsageError;
use crate::namespaces::NamespaceArgs;

/// The failed-Pod collector's namespace when none is named (the reference flow's).
pub(crate) use gc_runtime::pods::PODS_NAMESPACE;

/// Inputs of the failed-Pod collector, with the reference flow's defaults.
#[derive(Debug, Args)]
pub(crate) struct PodInputArgs {
    /// Identifies the cluster in ledger keys, receipts and archive names.
    #[arg(long, default_value = "primary", value_name = "ID")]
    cluster_id: String,
    #[command(flatten)]
    pub(crate) namespaces: NamespaceArgs,
    /// Minimum hold after complete container termination or first observed Failed status: `1d`,
    /// `12h`, `90m`; a bare number is seconds (`--retention-seconds`, its older name).
    #[arg(long = "retention", alias = "retention-seconds", default_value = "1d", value_name = "DURATION",
        allow_negative_numbers = true, value_parser = gc_runtime::durations::seconds)]
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
    /// A Pod with this label is never archived or deleted: plans report it `protected` (not
    /// held, not deferred). A sealed plan binds it: `apply` refuses a plan made with another.
    #[arg(
        long,
        default_value = DEFAULT_PROTECT_LABEL,
        value_name = "KEY=VALUE",
        value_parser = LabelPair::parse
    )]
    protect_label: LabelPair,
    /// A label selector (`key=value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`,
    /// `!key`, comma separated): a Pod it matches is never archived or deleted; plans report it
    /// `excluded`. A sealed plan binds it: `apply` refuses a plan made with another. Default:
    /// none.
    #[arg(long, value_name = "SELECTOR", value_parser = Selector::parse)]
    exclude_selector: Option<Selector>,
}

impl PodInputArgs {
    /// The inputs of a run in `namespace` (each namespace of a run has its own).
    pub(crate) fn inputs(&self, namespace: &str) -> PodInputs {
        PodInputs {
            cluster_id: self.cluster_id.clone(),
            namespace: namespace.to_owned(),
            retention_seconds: self.retention_seconds,
            max_pods: self.max_pods,
            max_inventory: self.max_inventory,
            max_archive_bytes: self.max_archive_bytes,
            collect_label: self.collect_label.clone(),
            pin_finalizer: self.pin_finalizer.clone(),
            protect_label: self.protect_label.to_string(),
            exclude_selector: self.exclude_selector.as_ref().map(ToString::to_string),
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
    ///
    /// # Errors
    /// A [`UsageError`] when the file cannot be read or the key is too short.
    pub(crate) fn key(&self) -> Result<Option<SealKey>, UsageError> {
        let bytes = match &self.seal_key_file {
            Some(path) => std::fs::read(path)
                .map_err(|e| UsageError::unreadable("--seal-key-file", path, e))?,
            None => match std::env::var_os("GC_SEAL_KEY") {
                Some(key) => key.into_encoded_bytes(),
                None => return Ok(None),
            },
        };
        SealKey::new(&bytes).map(Some).map_err(|e| {
            UsageError::because("invalid seal key (--seal-key-file or GC_SEAL_KEY)", e)
        })
    }
}
