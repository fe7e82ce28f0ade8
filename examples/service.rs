//! A long-running service that embeds the failed-Pod collector through the library: every
//! interval it plans the namespace from the live cluster, keeps the observation ledger in the
//! store, and applies the plan as a server-side dry run, logging what a live run would do.
//!
//! ```sh
//! cargo run -p examples --example service -- --namespace batch --once
//! cargo run -p examples --example service -- --namespace batch --interval-seconds 300
//! ```
//!
//! It connects as `kubectl` does (the Pod's ServiceAccount in a cluster, else the kubeconfig's
//! current context) and uses the embedded SQLite store and archive folder unless `--store` and
//! `--archive-dir` say otherwise. Nothing is ever written to the cluster but server-side dry runs
//! and the run lock (the Lease `gc-pods` of the namespace, shared with `gc-cli`).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use async_trait::async_trait;
use gc_core::apply::{self, Outcome, Ports, TargetResult};
use gc_core::ports::{Clock, Lock, Store as _};
use gc_core::{PodConfig, PodInputs, PodPlan, plan_pods};
use gc_k8s::{Connection, KubeCluster};
use gc_store::{DirectorySink, Store};

/// How long the run lock is held at most, should the service stop mid-pass.
const LEASE_TTL_SECONDS: u32 = 60;

/// Wall-clock time and tokio's timer: the engine never reads the clock itself.
struct TokioClock;

#[async_trait]
impl Clock for TokioClock {
    fn now(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64()
    }
    async fn sleep(&self, seconds: f64) {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }
}

/// The command line, validated once.
struct Settings {
    cfg: PodConfig,
    interval: Duration,
    once: bool,
    store: Option<String>,
    archive_dir: Option<PathBuf>,
}

const USAGE: &str = "usage: service [--namespace NS] [--cluster-id ID] [--interval-seconds N] \
                     [--store URL] [--archive-dir DIR] [--once]";

impl Settings {
    fn from_args(mut args: impl Iterator<Item = String>) -> anyhow::Result<Self> {
        let mut inputs = PodInputs::default();
        let (mut interval, mut once, mut store, mut archive_dir) = (300, false, None, None);
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--namespace" | "-n" => inputs.namespace = value()?,
                "--cluster-id" => inputs.cluster_id = value()?,
                "--interval-seconds" => interval = value()?.parse().context(USAGE)?,
                "--store" => store = Some(value()?),
                "--archive-dir" => archive_dir = Some(PathBuf::from(value()?)),
                "--once" => once = true,
                _ => bail!("unknown argument {arg:?}\n{USAGE}"),
            }
        }
        if interval == 0 {
            bail!("--interval-seconds must be at least 1");
        }
        Ok(Self {
            cfg: inputs.validate()?,
            interval: Duration::from_secs(interval),
            once,
            store,
            archive_dir,
        })
    }
}

/// What a pass keeps open between passes.
struct Service {
    cfg: PodConfig,
    cluster: KubeCluster,
    store: Store,
    sink: DirectorySink,
    holder: String,
}

impl Service {
    async fn start(settings: &Settings) -> anyhow::Result<Self> {
        let cluster = gc_k8s::connect(&Connection::default())
            .await
            .context("cannot connect to the cluster")?;
        let url = match &settings.store {
            Some(url) => url.clone(),
            None => gc_store::default_path().display().to_string(),
        };
        let store = gc_store::open(&url)
            .await
            .context("cannot open the store")?;
        let sink = DirectorySink::new(
            settings
                .archive_dir
                .clone()
                .unwrap_or_else(gc_store::default_archive_dir),
        );
        Ok(Self {
            cfg: settings.cfg.clone(),
            cluster,
            store,
            sink,
            holder: format!("gc-example-service-{}", std::process::id()),
        })
    }

    /// Plans from the cluster and saves the new ledger, as `gc-cli plan pods` does.
    async fn plan(&self, now: f64) -> anyhow::Result<PodPlan> {
        let cfg = &self.cfg;
        let previous = self
            .store
            .load_ledger(&cfg.cluster_id, &cfg.namespace)
            .await
            .context("cannot load the ledger")?;
        let rules = cfg.rules();
        let query = gc_k8s::failed_pod_query(cfg, 500);
        let inventory = gc_k8s::list_inventory(
            &self.cluster,
            &query,
            rules,
            cfg.max_inventory + 1,
            &mut |_, _| {},
        )
        .await
        .with_context(|| format!("cannot list the Pods of namespace {}", cfg.namespace))?;
        let plan = plan_pods(&inventory, &previous, cfg, now)
            .with_context(|| format!("namespace {}", cfg.namespace))?;
        self.store
            .save_ledger(&cfg.cluster_id, &cfg.namespace, &plan.ledger)
            .await
            .context("cannot save the ledger")?;
        Ok(plan)
    }

    /// One pass: plan, then, under the run lock, recover earlier pins and apply, all dry run.
    async fn pass(&self) -> anyhow::Result<()> {
        let clock = TokioClock;
        let cfg = &self.cfg;
        let plan = self.plan(clock.now()).await?;
        println!(
            "plan: {} targeted, {} held, {} deferred in namespace {}",
            plan.targets.len(),
            plan.held,
            plan.deferred,
            cfg.namespace
        );
        let lease = "gc-pods";
        let taken = self
            .cluster
            .try_acquire(&cfg.namespace, lease, &self.holder, LEASE_TTL_SECONDS)
            .await
            .context("cannot take the run lock")?;
        if !taken {
            println!("another run holds lease {lease}; skipping this pass");
            return Ok(());
        }
        // A pass is a dry run and short: it never loses the lease it takes.
        let stop = AtomicBool::new(false);
        let ports = Ports {
            cluster: &self.cluster,
            store: &self.store,
            sink: &self.sink,
            clock: &clock,
            stop: &stop,
        };
        let recovered = apply::recover(&ports, cfg, true).await;
        let results = apply::apply(&ports, cfg, &plan.targets, true).await;
        let released = self
            .cluster
            .release(&cfg.namespace, lease, &self.holder)
            .await;
        let recovered = recovered.context("cannot list pinned Pods")?;
        released.context("cannot release the run lock (it expires by itself)")?;
        for r in recovered.iter().chain(&results) {
            log_result(r);
        }
        Ok(())
    }
}

fn log_result(r: &TargetResult) {
    let what = match &r.outcome {
        Outcome::Collected { uri, .. } => format!("collected, archive {uri}"),
        Outcome::WouldCollect { bytes, sha256 } => {
            format!("would collect ({bytes} bytes, sha256 {sha256})")
        }
        Outcome::Skipped { step, reason } => format!("skipped at {step:?}: {reason}"),
        Outcome::Changed { step, message } => format!("changed at {step:?}: {message}"),
        Outcome::TooLarge { bytes, max } => format!("too large ({bytes} > {max} bytes)"),
        Outcome::Released { reason } => format!("released: {reason}"),
        Outcome::NotStarted { reason } => format!("not started: {reason}"),
        Outcome::Failed { step, error } => format!("failed at {step:?}: {error}"),
    };
    println!("{} {}: {what}", r.name, r.uid);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::from_args(std::env::args().skip(1))?;
    let service = Service::start(&settings).await?;
    if settings.once {
        let result = service.pass().await;
        service.store.close().await;
        return result;
    }
    let mut ticks = tokio::time::interval(settings.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                // A failed pass changes nothing; the next one starts afresh.
                if let Err(e) = service.pass().await {
                    eprintln!("pass failed: {e:#}");
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    service.store.close().await;
    Ok(())
}
