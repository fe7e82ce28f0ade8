//! `gc-cli plan pods`: the failed-Pod plan over an inventory file or a live cluster.

use std::env::var;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use gc_core::pods::approval::{PlanFile, PlanSet, check_ttl};
use gc_core::pods::inventory::{Inventory, Reader};
use gc_core::{PodConfig, PodPlan, PreviousLedger, plan_pods};

use crate::exit::UsageError;
use crate::files::{read_input, write_file};
use crate::live::{self, ConnectArgs};
use crate::output::{Output, OutputArgs};
use crate::pods::args::{PODS_NAMESPACE, PodInputArgs, SealArgs};
use gc_output::TerminalProgress;
use gc_output::pods::{write_plan, write_plans};
use gc_runtime::adapters::open_store;
use gc_runtime::pods::PodCollector;
use gc_runtime::{Builder, Error as RunError, Progress};

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
    pub(crate) connect: ConnectArgs,
    /// The store for the ledger and receipts: `sqlite:PATH`, a file path, or `postgres://...`.
    /// Default: the embedded SQLite file (see `gc-cli ledger --help`).
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Also write the plan, sealed with its expiry and digest, for `gc-cli apply`.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// How long a plan written with `--out` stays valid (1s..=24h; a bare number is seconds).
    #[arg(long = "ttl", alias = "ttl-seconds", default_value = "1h", value_name = "DURATION",
        allow_negative_numbers = true, value_parser = gc_runtime::durations::seconds)]
    pub(crate) ttl_seconds: i64,
    #[command(flatten)]
    pub(crate) seal: SealArgs,
    #[command(flatten)]
    pub(crate) pod: PodInputArgs,
    /// The instant to plan for (RFC 3339); default now. A plan of the cluster for another instant
    /// records no observation: nothing in the store's ledger, and `--ledger-out` is refused
    /// (an `--inventory` plan, the reproducible kind, still writes it).
    #[arg(long, value_name = "RFC3339")]
    pub(crate) now: Option<String>,
    /// `-o`: `run pods` prints its report in it; `plan pods` adds `kestra`.
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

/// Streams an inventory file through the reader, a chunk at a time: only one Pod's text is held.
fn read_inventory(path: &Path, cfg: &PodConfig) -> anyhow::Result<Inventory> {
    let rules = cfg.rules();
    // One more than the ceiling is kept, so the ceiling error can name the count.
    let mut reader = Reader::new(rules, cfg.max_inventory + 1);
    let mut source: Box<dyn Read> = if path == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(path).map_err(|e| UsageError::unreadable("inventory", path, e))?,
        )
    };
    let mut chunk = vec![0u8; 256 * 1024];
    let context = || format!("inventory {}", path.display());
    loop {
        let n = source
            .read(&mut chunk)
            .map_err(|e| UsageError::unreadable("inventory", path, e))?;
        if n == 0 {
            break;
        }
        reader.feed(&chunk[..n]).with_context(context)?;
    }
    reader.finish().with_context(context)
}

pub(crate) fn plan(args: &PlanPods) -> anyhow::Result<()> {
    let (plans, failed) = live::block_on(plan_all(args))?;
    // The plans live until the process ends: the exit frees them at once.
    let plans = std::mem::ManuallyDrop::new(plans);
    let mut out = std::io::stdout().lock();
    match &plans[..] {
        [(cfg, plan)] if failed.is_empty() => {
            write_plan(&mut out, plan, cfg, args.output.form).context("cannot write the plan")?;
        }
        _ => write_plans(&mut out, &plans, args.output.form).context("cannot write the plans")?,
    }
    Ok(gc_runtime::outcome(plans.len() + failed.len(), failed)?)
}

/// The plans of every namespace `args` name, and the namespaces whose plan failed (with why);
/// writes the files they ask for. A plan file is written only when every namespace planned.
///
/// # Errors
/// Bad flags, and everything that fails before a namespace is planned.
async fn plan_all(
    args: &PlanPods,
) -> anyhow::Result<(Vec<(PodConfig, PodPlan)>, Vec<(String, gc_runtime::Error)>)> {
    let ttl = check_ttl(args.ttl_seconds)?;
    let key = args.seal.key()?;
    let now = crate::clock::at(args.now.as_deref())?;
    let scope = &args.pod.namespaces.in_context(&args.connect);
    let several = scope.several(PODS_NAMESPACE);
    if several {
        for (given, flag) in [
            (args.inventory.is_some(), "--inventory"),
            (args.ledger.is_some(), "--ledger"),
            (args.ledger_out.is_some(), "--ledger-out"),
            (args.output.form == Output::Kestra, "-o/--format kestra"),
        ] {
            if given {
                crate::namespaces::one(scope, PODS_NAMESPACE, flag)?;
            }
        }
    }
    if args.inventory.is_none() && args.now.is_some() && args.ledger_out.is_some() {
        return Err(UsageError::new(
            "--ledger-out with --now: a plan of the cluster for another instant would record \
             first observations then; plan without --now, or from an --inventory file",
        )
        .into());
    }
    if args.inventory.is_some() && args.store.is_some() && args.store != var("GC_STORE").ok() {
        let why = "a plan from a file records no ledger in a store: drop --store (or --inventory)";
        return Err(UsageError::new(format!("--store with --inventory: {why}")).into());
    }
    // Named namespaces and the ledger file are checked before anything is connected.
    for ns in scope.named(PODS_NAMESPACE).unwrap_or_default() {
        args.pod.inputs(&ns).validate()?;
    }
    let file_ledger = read_ledger(args.ledger.as_deref())?;
    // One connection to the cluster and one to the store, for every namespace; none for an
    // inventory, which names its one namespace (checked above).
    let collector = match &args.inventory {
        Some(_) => None,
        None => {
            let cluster = args.connect.cluster().await?;
            let store = match (&file_ledger, &args.ledger_out) {
                (Some(_), Some(_)) => None,
                _ => Some(Arc::new(open_store(args.store.as_deref()).await?)),
            };
            let progress = Some(Arc::new(TerminalProgress::new()) as Arc<dyn Progress>);
            let settings = gc_runtime::Settings {
                progress,
                ..Default::default()
            };
            let collector = Builder::new(settings).cluster(cluster).store(store);
            Some(collector.pods()?)
        }
    };
    let namespaces = match &collector {
        Some(c) => scope.resolve(c.cluster(), PODS_NAMESPACE).await?,
        None => scope.named(PODS_NAMESPACE).unwrap_or_default(),
    };
    let configs = namespaces
        .iter()
        .map(|ns| args.pod.inputs(ns).validate())
        .collect::<Result<Vec<_>, _>>()?;
    let live = collector.as_ref();
    let (mut plans, mut failed) = (Vec::new(), Vec::new());
    for cfg in configs {
        match plan_in(args, &cfg, now, file_ledger.as_ref(), live).await {
            Ok(plan) => plans.push((cfg, plan)),
            Err(e) if several => failed.push((cfg.namespace.clone(), RunError::other(e))),
            Err(e) => return Err(e),
        }
    }
    if let (Some(path), [(cfg, plan)]) = (&args.ledger_out, &plans[..]) {
        write_file(
            path,
            &plan.ledger.to_scoped_json(&cfg.cluster_id, &cfg.namespace),
        )?;
    }
    if let Some(path) = &args.out {
        if !failed.is_empty() {
            tracing::warn!("no plan file written: a namespace failed to plan");
        } else if plans.is_empty() {
            tracing::warn!("no plan file written: no namespace to plan");
        } else if let [(cfg, plan)] = &plans[..] {
            let file = PlanFile::seal(plan, cfg, now, ttl, key.as_ref());
            write_file(path, &file.to_json())?;
        } else {
            let file = PlanSet::seal(&plans, now, ttl, key.as_ref());
            write_file(path, &file.to_json())?;
        }
    }
    Ok((plans, failed))
}

/// `--ledger`, read and checked, if given.
pub(crate) fn read_ledger(path: Option<&Path>) -> anyhow::Result<Option<PreviousLedger>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let bytes = read_input(path, "ledger")?;
    Ok(Some(
        PreviousLedger::parse(&bytes).with_context(|| format!("ledger {}", path.display()))?,
    ))
}

/// The collector of a live plan: the cluster, and the store when the ledger lives there.
pub(crate) type Planner = PodCollector<gc_k8s::KubeCluster, Option<Arc<gc_store::Store>>, ()>;

/// The plan of one namespace (`cfg`): from `--inventory`, or from the cluster of `live`
/// ([`PodCollector::plan`]), with `file_ledger` or the store's ledger. The new ledger
/// goes back to the store unless `--ledger-out` takes it, or `--now` plans for another instant
/// (a first observation dated then would shorten retention). Nothing is written to the cluster.
pub(crate) async fn plan_in(
    args: &PlanPods,
    cfg: &PodConfig,
    now: f64,
    file_ledger: Option<&PreviousLedger>,
    live: Option<&Planner>,
) -> anyhow::Result<PodPlan> {
    if let Some(path) = &args.inventory {
        let inventory = read_inventory(path, cfg)?;
        let empty = PreviousLedger::default();
        let plan = plan_pods(&inventory, file_ledger.unwrap_or(&empty), cfg, now)
            .with_context(|| format!("inventory {}", path.display()))?;
        gc_runtime::inventory::warn_if_elsewhere(&plan, &cfg.namespace, path);
        // Freeing every Pod's facts one by one costs more than the process's exit does.
        std::mem::forget(inventory);
        return Ok(plan);
    }
    let collector = live.context("a live plan needs the cluster")?;
    let record = args.ledger_out.is_none() && args.now.is_none();
    Ok(collector.plan(cfg, file_ledger, now, record).await?)
}
