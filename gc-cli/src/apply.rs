//! `gc-cli apply PLAN` and `gc-cli run pods`: the fenced apply of failed-Pod targets, one run at
//! a time per cluster and namespace, with pins left by earlier runs finished or released first.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use async_trait::async_trait;
use clap::Args;
use gc_core::apply::{self, Outcome, Ports, TargetResult};
use gc_core::approval::PlanFile;
use gc_core::plan::{PodPlan, Target};
use gc_core::ports::{Clock, Lock};
use gc_core::{PodConfig, PodInputs};
use serde::Serialize;

use crate::cli::{Format, PlanPods};
use crate::live::{self, ConnectArgs};
use crate::metrics::{MetricsArgs, RunMetrics};
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
    #[command(flatten)]
    metrics: MetricsArgs,
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
    #[command(flatten)]
    pub(crate) metrics: MetricsArgs,
}

/// What an apply needs besides its targets.
struct Job<'a> {
    connect: &'a ConnectArgs,
    store: Option<&'a str>,
    archive_dir: Option<PathBuf>,
    lock_wait_seconds: u64,
    metrics: &'a MetricsArgs,
    format: Format,
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
    let job = Job {
        connect: &a.connect,
        store: a.store.as_deref(),
        archive_dir: a.archive_dir.clone(),
        lock_wait_seconds: a.lock_wait_seconds,
        metrics: &a.metrics,
        format: args.format,
    };
    live::block_on(execute(
        &job,
        &file.config,
        None,
        &file.targets,
        args.dry_run,
    ))
}

pub(crate) fn run(args: &RunPods) -> Result<(), Failure> {
    let live_run = args.auto_remediate && !args.dry_run;
    if !args.dry_run && !args.auto_remediate {
        return Err(Failure::usage(anyhow::anyhow!(
            "--dry-run false needs --auto-remediate: acting without a reviewed plan must be asked for explicitly"
        )));
    }
    let p = &args.plan;
    let job = Job {
        connect: &p.connect,
        store: p.store.as_deref(),
        archive_dir: args.archive_dir.clone(),
        lock_wait_seconds: args.lock_wait_seconds,
        metrics: &args.metrics,
        format: p.format,
    };
    let started = std::time::Instant::now();
    let (cfg, plan) = match plan_pods::plan(p) {
        Ok(planned) => planned,
        Err(f) => {
            let m = RunMetrics::new(
                &args.metrics.metrics_prefix(),
                "pods",
                &p.pod.inputs().namespace,
            );
            m.error("plan");
            m.finish(started.elapsed().as_secs_f64(), None);
            m.deliver(&args.metrics, Some(&format!("{:#}", f.error())), "");
            return Err(f);
        }
    };
    live::block_on(execute(&job, &cfg, Some(&plan), &plan.targets, !live_run))
}

async fn execute(
    job: &Job<'_>,
    cfg: &PodConfig,
    plan: Option<&PodPlan>,
    targets: &[Target],
    dry_run: bool,
) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let metrics = RunMetrics::new(&job.metrics.metrics_prefix(), "pods", &cfg.namespace);
    if let Some(plan) = plan {
        metrics.plan(plan);
    }
    let outcome = act(job, cfg, targets, dry_run).await;
    let elapsed = started.elapsed().as_secs_f64();
    match outcome {
        Ok((recovered, results)) => {
            metrics.results(&recovered);
            metrics.results(&results);
            let failed = recovered
                .iter()
                .chain(&results)
                .filter(|r| r.outcome.is_failure())
                .count();
            let summary = summary(&results, recovered.len(), dry_run);
            report(
                &Report {
                    dry_run,
                    recovered: &recovered,
                    results: &results,
                },
                job.format,
            )?;
            if failed > 0 {
                let why = format!("{failed} target(s) failed; the next run resumes them");
                metrics.finish(elapsed, None);
                metrics.deliver(job.metrics, Some(&why), &summary);
                return Err(Failure::from(anyhow::anyhow!(why)));
            }
            metrics.finish(elapsed, Some(SystemClock.now()));
            let deleted = results
                .iter()
                .any(|r| matches!(r.outcome, Outcome::Collected { .. }));
            metrics.deliver(job.metrics, None, if deleted { &summary } else { "" });
            Ok(())
        }
        Err(f) => {
            metrics.error("run");
            metrics.finish(elapsed, None);
            metrics.deliver(job.metrics, Some(&format!("{:#}", f.error())), "");
            Err(f)
        }
    }
}

/// Connects, takes the run lock, recovers earlier pins, applies, releases the lock.
async fn act(
    job: &Job<'_>,
    cfg: &PodConfig,
    targets: &[Target],
    dry_run: bool,
) -> Result<(Vec<TargetResult>, Vec<TargetResult>), Failure> {
    let cluster = gc_k8s::connect(&job.connect.connection()?)
        .await
        .context("cannot connect to the cluster")?;
    let store = live::open_store(job.store).await?;
    let sink = gc_store::DirectorySink::new(
        job.archive_dir
            .clone()
            .unwrap_or_else(gc_store::default_archive_dir),
    );
    let clock = SystemClock;
    let ports = Ports {
        cluster: &cluster,
        store: &store,
        sink: &sink,
        clock: &clock,
    };
    let lease = format!("gc-pods-{}", cfg.cluster_id);
    let holder = live::holder();
    live::take_lock(
        &cluster,
        &cfg.namespace,
        &lease,
        &holder,
        job.lock_wait_seconds,
    )
    .await?;
    let recovered = apply::recover(&ports, cfg, targets, dry_run).await;
    let results = apply::apply(&ports, cfg, targets, dry_run).await;
    let released = cluster.release(&cfg.namespace, &lease, &holder).await;
    let recovered = recovered
        .with_context(|| format!("cannot list pinned Pods in namespace {}", cfg.namespace))?;
    released.context("cannot release the run lock (it expires by itself)")?;
    Ok((recovered, results))
}

fn summary(results: &[TargetResult], recovered: usize, dry_run: bool) -> String {
    let collected = results
        .iter()
        .filter(|t| {
            matches!(
                t.outcome,
                Outcome::Collected { .. } | Outcome::WouldCollect { .. }
            )
        })
        .count();
    let mode = if dry_run { " (dry run)" } else { "" };
    format!(
        "{collected} of {} targets collected{mode}, {recovered} pins recovered",
        results.len()
    )
}

fn report(r: &Report<'_>, format: Format) -> Result<(), Failure> {
    if format != Format::Table {
        println!(
            "{}",
            serde_json::to_string_pretty(r).context("cannot write the report")?
        );
        return Ok(());
    }
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
    println!("{}", summary(r.results, r.recovered.len(), r.dry_run));
    Ok(())
}
