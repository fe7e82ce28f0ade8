//! `gc-cli plan pods`: the failed-Pod plan over an inventory file or a live cluster.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use gc_core::approval::{PlanFile, check_ttl};
use gc_core::inventory::{Inventory, Reader};
use gc_core::ports::Store as _;
use gc_core::{PodConfig, PodPlan, PreviousLedger, Rules, plan_pods};

use crate::cli::PlanPods;
use crate::files::write_file;
use crate::{Failure, live, output};

fn read_input(path: &Path, what: &str) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    let read = if path == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut f| {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            bytes.reserve_exact(usize::try_from(len).unwrap_or(0));
            f.read_to_end(&mut bytes).map(|_| ())
        })
    };
    read.with_context(|| format!("cannot read {what} {}", path.display()))
        .map_err(Failure::usage)?;
    Ok(bytes)
}

/// Streams an inventory file through the reader, a chunk at a time: only one Pod's text is held.
fn read_inventory(path: &Path, cfg: &PodConfig) -> Result<Inventory, Failure> {
    let rules = Rules {
        namespace: &cfg.namespace,
        collect_label: &cfg.collect_label,
        pin: &cfg.pin_finalizer,
    };
    // One more than the ceiling is kept, so the ceiling error can name the count.
    let mut reader = Reader::new(rules, cfg.max_inventory + 1);
    let mut source: Box<dyn Read> = if path == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(path)
                .with_context(|| format!("cannot read inventory {}", path.display()))
                .map_err(Failure::usage)?,
        )
    };
    let mut chunk = vec![0u8; 256 * 1024];
    let context = || format!("inventory {}", path.display());
    loop {
        let n = source
            .read(&mut chunk)
            .with_context(|| format!("cannot read inventory {}", path.display()))
            .map_err(Failure::usage)?;
        if n == 0 {
            break;
        }
        reader
            .feed(&chunk[..n])
            .with_context(context)
            .map_err(Failure::plan)?;
    }
    reader.finish().with_context(context).map_err(Failure::plan)
}

/// The instant to plan for: `--now` or the clock, as float seconds like Python's `time.time()`.
pub(crate) fn now(arg: Option<&str>) -> Result<f64, Failure> {
    let at = match arg {
        Some(text) => {
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .with_context(|| format!("invalid --now {text:?}: expected an RFC 3339 timestamp"))
                .map_err(Failure::usage)?
        }
        None => time::OffsetDateTime::now_utc(),
    };
    let micros = at.unix_timestamp_nanos() / 1_000;
    #[allow(clippy::cast_precision_loss)]
    Ok(micros as f64 / 1e6)
}

pub(crate) fn run(args: &PlanPods) -> Result<(), Failure> {
    let (cfg, plan) = live::block_on(plan_async(args))?;
    let mut out = std::io::stdout().lock();
    output::write_plan(&mut out, &plan, &cfg, args.format).context("cannot write the plan")?;
    Ok(())
}

/// Makes the plan `args` describe, and writes the files they ask for.
pub(crate) async fn plan_async(args: &PlanPods) -> Result<(PodConfig, PodPlan), Failure> {
    let cfg = args.pod.inputs().validate().map_err(Failure::usage)?;
    let ttl = check_ttl(args.ttl_seconds).map_err(Failure::usage)?;
    let key = args.seal.key()?;
    let now = now(args.now.as_deref())?;
    let file_ledger = match &args.ledger {
        Some(path) => {
            let bytes = read_input(path, "ledger")?;
            Some(
                PreviousLedger::parse(&bytes)
                    .with_context(|| format!("ledger {}", path.display()))
                    .map_err(Failure::plan)?,
            )
        }
        None => None,
    };
    let plan = match &args.inventory {
        Some(path) => {
            let inventory = read_inventory(path, &cfg)?;
            plan_pods(&inventory, &file_ledger.unwrap_or_default(), &cfg, now)
                .with_context(|| format!("inventory {}", path.display()))
                .map_err(Failure::plan)?
        }
        None => plan_live(args, &cfg, file_ledger, now).await?,
    };
    if let Some(path) = &args.ledger_out {
        write_file(path, &plan.ledger.to_json())?;
    }
    if let Some(path) = &args.out {
        let file = PlanFile::seal(&plan, &cfg, now, ttl, key.as_ref());
        write_file(path, &file.to_json())?;
    }
    Ok((cfg, plan))
}

/// Plans from the cluster; the ledger comes from the store (or `--ledger`) and goes back to the
/// store (unless `--ledger-out` takes it). Nothing is written to the cluster.
async fn plan_live(
    args: &PlanPods,
    cfg: &PodConfig,
    file_ledger: Option<PreviousLedger>,
    now: f64,
) -> Result<PodPlan, Failure> {
    let cluster = gc_k8s::connect(&args.connect.connection()?)
        .await
        .context("cannot connect to the cluster")?;
    let store = match (&file_ledger, &args.ledger_out) {
        (Some(_), Some(_)) => None,
        _ => Some(live::open_store(args.store.as_deref()).await?),
    };
    let previous = match (file_ledger, &store) {
        (Some(ledger), _) => ledger,
        (None, Some(store)) => store
            .load_ledger(&cfg.cluster_id, &cfg.namespace)
            .await
            .context("cannot load the ledger")
            .map_err(Failure::plan)?,
        (None, None) => PreviousLedger::default(),
    };
    let rules = Rules {
        namespace: &cfg.namespace,
        collect_label: &cfg.collect_label,
        pin: &cfg.pin_finalizer,
    };
    let query = gc_k8s::failed_pod_query(cfg, 500);
    let mut progress = live::Progress::new();
    let inventory = gc_k8s::list_inventory(
        &cluster,
        &query,
        rules,
        cfg.max_inventory + 1,
        &mut |pages, pods| {
            progress.update(pages, pods);
        },
    )
    .await
    .with_context(|| format!("cannot list the Pods of namespace {}", cfg.namespace))?;
    progress.done();
    let plan = plan_pods(&inventory, &previous, cfg, now)
        .with_context(|| format!("namespace {}", cfg.namespace))
        .map_err(Failure::plan)?;
    if let (Some(store), None) = (&store, &args.ledger_out) {
        store
            .save_ledger(&cfg.cluster_id, &cfg.namespace, &plan.ledger)
            .await
            .context("cannot save the ledger")?;
    }
    Ok(plan)
}
