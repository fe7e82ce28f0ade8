//! `gc-cli apply PLAN` and `gc-cli run pods`: the fenced apply of failed-Pod targets, one run at
//! a time per cluster and namespace, with pins left by earlier runs finished or released first.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use async_trait::async_trait;
use clap::Args;
use gc_core::apply::{self, Outcome, Ports, TargetResult};
use gc_core::approval::PlanFile;
use gc_core::plan::Target;
use gc_core::ports::{Clock, Lock};
use gc_core::{PodConfig, PodInputs};
use gc_k8s::KubeCluster;
use serde::Serialize;

use crate::cli::{Format, PlanPods};
use crate::live::{self, ConnectArgs};
use crate::{Failure, plan_pods};

/// The clock of a real run.
struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> f64 {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        d.as_secs_f64()
    }
    async fn sleep(&self, seconds: f64) {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }
}

/// Where archives and receipts go, and how long to wait for another run.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// The store for receipts (and the ledger): `sqlite:PATH`, a path, or `postgres://...`.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    /// Folder for the archives. Default: `archives` beside the embedded store.
    #[arg(long, env = "GC_ARCHIVE_DIR", value_name = "DIR")]
    archive_dir: Option<PathBuf>,
    /// How long to wait for another run on the same cluster and namespace to finish.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    lock_wait_seconds: u64,
}

/// `gc-cli apply`
#[derive(Debug, Args)]
pub(crate) struct Apply {
    /// The plan written by `gc-cli plan pods --out`.
    plan: PathBuf,
    /// The cluster the plan must be for.
    #[arg(long, value_name = "ID")]
    cluster_id: String,
    /// The namespace the plan must be for.
    #[arg(long, short = 'n')]
    namespace: String,
    /// Send every write as a server-side dry run and write no archive: report what apply would do.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    apply: ApplyArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// `gc-cli run pods`: plan and apply in one go.
#[derive(Debug, Args)]
pub(crate) struct RunPods {
    #[command(flatten)]
    plan: Box<PlanPods>,
    /// Dry run (the default, as in the reference flow): every write a server-side dry run.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    dry_run: bool,
    /// Act for real without a reviewed plan: needs `--dry-run false` too.
    #[arg(long)]
    auto_remediate: bool,
    /// Folder for the archives. Default: `archives` beside the embedded store.
    #[arg(long, env = "GC_ARCHIVE_DIR", value_name = "DIR")]
    archive_dir: Option<PathBuf>,
    /// How long to wait for another run on the same cluster and namespace to finish.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    lock_wait_seconds: u64,
}

#[derive(Serialize)]
struct Report<'a> {
    #[serde(rename = "dryRun")]
    dry_run: bool,
    recovered: &'a [TargetResult],
    results: &'a [TargetResult],
}

pub(crate) fn apply(args: &Apply) -> Result<(), Failure> {
    let inputs = PodInputs {
        cluster_id: args.cluster_id.clone(),
        namespace: args.namespace.clone(),
        ..PodInputs::default()
    };
    inputs.validate().map_err(Failure::usage)?;
    let bytes = std::fs::read(&args.plan)
        .with_context(|| format!("cannot read plan {}", args.plan.display()))
        .map_err(Failure::usage)?;
    let file = PlanFile::open(&bytes, &args.cluster_id, &args.namespace, SystemClock.now())
        .with_context(|| format!("plan {}", args.plan.display()))
        .map_err(Failure::usage)?;
    let a = &args.apply;
    live::block_on(execute(
        &a.connect,
        a.store.as_deref(),
        a.archive_dir.clone(),
        a.lock_wait_seconds,
        &file.config,
        &file.targets,
        args.dry_run,
        args.format,
    ))
}

pub(crate) fn run(args: &RunPods) -> Result<(), Failure> {
    let live_run = args.auto_remediate && !args.dry_run;
    if !args.dry_run && !args.auto_remediate {
        return Err(Failure::usage(anyhow::anyhow!(
            "--dry-run false needs --auto-remediate: acting without a reviewed plan must be asked for explicitly"
        )));
    }
    let (cfg, plan) = plan_pods::plan(&args.plan)?;
    let p = &args.plan;
    live::block_on(execute(
        &p.connect,
        p.store.as_deref(),
        args.archive_dir.clone(),
        args.lock_wait_seconds,
        &cfg,
        &plan.targets,
        !live_run,
        p.format,
    ))
}

#[allow(clippy::too_many_arguments)]
async fn execute(
    connect: &ConnectArgs,
    store: Option<&str>,
    archive_dir: Option<PathBuf>,
    lock_wait_seconds: u64,
    cfg: &PodConfig,
    targets: &[Target],
    dry_run: bool,
    format: Format,
) -> Result<(), Failure> {
    let cluster = gc_k8s::connect(&connect.connection()?)
        .await
        .context("cannot connect to the cluster")?;
    let store = live::open_store(store).await?;
    let sink =
        gc_store::DirectorySink::new(archive_dir.unwrap_or_else(gc_store::default_archive_dir));
    let clock = SystemClock;
    let ports = Ports {
        cluster: &cluster,
        store: &store,
        sink: &sink,
        clock: &clock,
    };
    let lease = format!("gc-pods-{}", cfg.cluster_id);
    let holder = holder();
    take_lock(&cluster, cfg, &lease, &holder, lock_wait_seconds).await?;
    let recovered = apply::recover(&ports, cfg, targets, dry_run).await;
    let results = apply::apply(&ports, cfg, targets, dry_run).await;
    let released = cluster.release(&cfg.namespace, &lease, &holder).await;
    let recovered = recovered
        .with_context(|| format!("cannot list pinned Pods in namespace {}", cfg.namespace))?;
    released.context("cannot release the run lock (it expires by itself)")?;
    report(
        &Report {
            dry_run,
            recovered: &recovered,
            results: &results,
        },
        format,
    )?;
    let failed = recovered
        .iter()
        .chain(&results)
        .filter(|r| r.outcome.is_failure())
        .count();
    if failed > 0 {
        return Err(Failure::from(anyhow::anyhow!(
            "{failed} target(s) failed; the next run resumes them"
        )));
    }
    Ok(())
}

fn holder() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "gc-cli".into());
    format!("{host}-{}", std::process::id())
}

/// Waits for the run lock up to `wait_seconds`, polling every two seconds.
async fn take_lock(
    cluster: &KubeCluster,
    cfg: &PodConfig,
    lease: &str,
    holder: &str,
    wait_seconds: u64,
) -> Result<(), Failure> {
    // The lease outlives any run: a crashed run's lease expires after it.
    const TTL: u32 = 900;
    let deadline = std::time::Instant::now() + Duration::from_secs(wait_seconds);
    loop {
        if cluster
            .try_acquire(&cfg.namespace, lease, holder, TTL)
            .await
            .context("cannot take the run lock")?
        {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(Failure::from(anyhow::anyhow!(
                "another run holds lease {lease} in namespace {}; waited {wait_seconds}s",
                cfg.namespace
            )));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn report(r: &Report<'_>, format: Format) -> Result<(), Failure> {
    if format != Format::Table {
        println!(
            "{}",
            serde_json::to_string_pretty(r).context("cannot write the report")?
        );
        return Ok(());
    }
    let mode = if r.dry_run { " (dry run)" } else { "" };
    for t in r.recovered.iter().chain(r.results) {
        let line = match &t.outcome {
            Outcome::Collected { uri, sha256, .. } => {
                format!("collected   archive {uri} sha256 {sha256}")
            }
            Outcome::WouldCollect { sha256, bytes } => {
                format!("would collect   archive of {bytes} bytes, sha256 {sha256}")
            }
            Outcome::Skipped { step, reason } => format!("skipped at {step:?}: {reason}"),
            Outcome::Changed { step, message } => {
                format!("changed at {step:?} (fence held): {message}")
            }
            Outcome::Failed { step, error } => format!("FAILED at {step:?}: {error}"),
        };
        println!("{:<32} {:<38} {line}", t.name, t.uid);
    }
    let collected = r
        .results
        .iter()
        .filter(|t| {
            matches!(
                t.outcome,
                Outcome::Collected { .. } | Outcome::WouldCollect { .. }
            )
        })
        .count();
    println!(
        "{collected} of {} targets collected{mode}, {} pins recovered",
        r.results.len(),
        r.recovered.len()
    );
    Ok(())
}
