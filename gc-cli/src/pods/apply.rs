//! `gc-cli apply PLAN` and `gc-cli run pods`: the fenced apply of failed-Pod targets, one run at
//! a time per namespace, with every pin left by earlier runs finished or released first.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::Args;
use gc_core::PodConfig;
use gc_core::apply::{self, Outcome, Ports, TargetResult};
use gc_core::approval::open_plans;
use gc_core::ledger::PreviousLedger;
use gc_core::plan::Target;
use serde::Serialize;

use crate::archives::ArchiveArgs;
use crate::clock;
use crate::events::{EventArgs, Events};
use crate::exit::UsageError;
use crate::live::{self, ConnectArgs, LockArgs};
use crate::metrics::{MetricsArgs, RunMetrics};
use crate::output::{Output, OutputArgs, escape, write_doc};
use crate::pods::args::{PODS_NAMESPACE, PodInputArgs, SealArgs};
use crate::pods::plan::{self, PlanPods};

/// Where archives and receipts go, and how the run lock is taken.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// The store for receipts (and the ledger): `sqlite:PATH`, a path, or `postgres://...`.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    lock: LockArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    events: EventArgs,
}

/// `gc-cli apply`: the policy is apply's own flags (the same defaults as `plan pods`); a plan
/// made under another policy is refused.
#[derive(Debug, Args)]
pub(crate) struct Apply {
    /// The plan written by `gc-cli plan pods --out`.
    plan: PathBuf,
    #[command(flatten)]
    pod: PodInputArgs,
    #[command(flatten)]
    seal: SealArgs,
    /// `server`: send every write as a server-side dry run and write no archive, to report what
    /// apply would do; `none` (the default) acts. A bare `--dry-run` is `server`.
    #[arg(
        long,
        value_name = "none|server",
        num_args = 0..=1,
        require_equals = true,
        default_value = "none",
        default_missing_value = "server",
        value_parser = crate::dry_run::parse
    )]
    dry_run: bool,
    /// One namespace's observation ledger kept outside the store (the plan's `--ledger-out` file,
    /// as the Kestra flow keeps it): its first observations bound the plan's as the store's do. A
    /// target without `finishedAt` whose first observation neither records is held (until a plan
    /// records one and its retention passes).
    #[arg(long, value_name = "FILE")]
    ledger: Option<PathBuf>,
    #[command(flatten)]
    apply: ApplyArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// `gc-cli run pods`: recover, plan and apply in one go, under the run lock.
#[derive(Debug, Args)]
pub(crate) struct RunPods {
    #[command(flatten)]
    plan: Box<PlanPods>,
    /// `server` (the default, as in the reference flow): every write a server-side dry run;
    /// `none` acts, with `--auto-remediate`. Older forms: `--dry-run true|false`.
    #[arg(
        long,
        value_name = "none|server",
        num_args = 0..=1,
        default_value = "server",
        default_missing_value = "server",
        value_parser = crate::dry_run::parse
    )]
    dry_run: bool,
    /// Act for real without a reviewed plan: needs `--dry-run=none` too.
    #[arg(long)]
    auto_remediate: bool,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    lock: LockArgs,
    #[command(flatten)]
    pub(crate) metrics: MetricsArgs,
    #[command(flatten)]
    events: EventArgs,
}

/// The run lock of the failed-Pod collector in its namespace (one per namespace, whatever the
/// cluster id).
pub(crate) const PODS_LOCK: &str = "gc-pods";

/// What an apply needs besides its targets.
struct Job<'a> {
    connect: &'a ConnectArgs,
    store: Option<&'a str>,
    archive: &'a ArchiveArgs,
    lock: &'a LockArgs,
    metrics: &'a MetricsArgs,
    output: Output,
    /// The run's Kubernetes Events (off for a dry run).
    events: &'a Events,
}

/// Where the targets come from.
enum Targets<'a> {
    /// A reviewed plan file, and the observation ledger file apply was given.
    Reviewed(&'a [Target], Option<&'a PreviousLedger>),
    /// Planned by this run, after recovery, under the lock.
    Planned(&'a PlanPods),
}

/// What a run did.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    dry_run: bool,
    recovered: Vec<TargetResult>,
    results: Vec<TargetResult>,
    /// Pods that still carry the pin at the end of a live run: each is a failure.
    pins_left: Vec<String>,
    /// The store or the archive sink was unusable (the metrics stage, and why): recovery
    /// released what it could and the run stopped before planning. A failure.
    #[serde(
        rename = "stoppedBeforePlanning",
        skip_serializing_if = "Option::is_none",
        serialize_with = "unusable_why"
    )]
    unusable: Option<(&'static str, String)>,
}

fn unusable_why<S: serde::Serializer>(
    unusable: &Option<(&'static str, String)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match unusable {
        Some((_, why)) => s.serialize_str(why),
        None => s.serialize_none(),
    }
}

/// One namespace's run: its report when it got that far, its error when it failed, and its
/// metrics exposition.
struct NamespaceRun {
    namespace: String,
    report: Option<Report>,
    error: Option<anyhow::Error>,
    metrics: String,
}

pub(crate) fn apply(args: &Apply) -> anyhow::Result<()> {
    let key = args.seal.key()?;
    let scope = &args.pod.namespaces.in_context(&args.apply.connect);
    // Named namespaces are checked before anything is read or connected.
    if let Some(named) = scope.named(PODS_NAMESPACE) {
        for ns in &named {
            args.pod.inputs(ns).validate()?;
        }
    }
    let bytes =
        std::fs::read(&args.plan).map_err(|e| UsageError::unreadable("plan", &args.plan, e))?;
    let ledger = crate::pods::plan::read_ledger(args.ledger.as_deref())?;
    let a = &args.apply;
    let events = Events::new(&a.events, args.dry_run);
    let job = Job {
        connect: &a.connect,
        store: a.store.as_deref(),
        archive: &a.archive,
        lock: &a.lock,
        metrics: &a.metrics,
        output: args.output.form,
        events: &events,
    };
    live::block_on(async {
        let namespaces = resolve(scope, &a.connect, &a.metrics).await?;
        let policy_for = |ns: &str| {
            namespaces
                .iter()
                .any(|n| n == ns)
                .then(|| args.pod.inputs(ns).validate().ok())
                .flatten()
        };
        let files =
            open_plans(&bytes, policy_for, key.as_ref(), clock::now()).with_context(|| {
                let namespaces = namespaces.join(", ");
                format!(
                    "plan {} (apply's namespaces: {namespaces})",
                    args.plan.display()
                )
            })?;
        if ledger.is_some() && files.len() > 1 {
            return Err(UsageError::new(
                "--ledger is one namespace's ledger: apply a plan of several namespaces without it",
            )
            .into());
        }
        if let (Some(ledger), [file], Some(path)) = (&ledger, &files[..], &args.ledger) {
            let cfg = &file.config;
            ledger
                .check_scope(&cfg.cluster_id, &cfg.namespace)
                .with_context(|| format!("ledger {}", path.display()))?;
        }
        let mut runs = Vec::with_capacity(files.len());
        for file in &files {
            // The plan's policy equals apply's (checked); apply acts under its own.
            let cfg = args.pod.inputs(&file.config.namespace).validate()?;
            let targets = Targets::Reviewed(&file.targets, ledger.as_ref());
            runs.push(execute(&job, &cfg, targets, args.dry_run, files.len()).await);
        }
        if scope.all() {
            let inputs = |ns: &str| args.pod.inputs(ns).validate();
            runs.extend(outside(&job, &namespaces, inputs, args.dry_run).await);
        }
        finish(&job, runs, files.len() > 1 || several(scope))
    })
}

/// The checks of `run pods`' flags alone, which no later run could pass either (`serve` makes
/// them before its first run).
pub(crate) fn check(args: &RunPods) -> anyhow::Result<()> {
    if !args.dry_run && !args.auto_remediate {
        return Err(UsageError::new(
            "--dry-run=none needs --auto-remediate: acting without a reviewed plan must be asked for explicitly",
        )
        .into());
    }
    let p = &args.plan;
    for (given, flag) in [
        (p.inventory.is_some(), "--inventory"),
        (p.ledger.is_some(), "--ledger"),
        (p.ledger_out.is_some(), "--ledger-out"),
        (p.out.is_some(), "--out"),
        (p.now.is_some(), "--now"),
    ] {
        if given {
            return Err(UsageError::new(format!(
                "run pods plans from the cluster with the store's ledger: {flag} is for plan pods"
            ))
            .into());
        }
    }
    // The policy of each namespace named (the flags alone; `-A`'s are known only when listed).
    let named = p.pod.namespaces.named(PODS_NAMESPACE);
    for ns in named.unwrap_or_else(|| vec![PODS_NAMESPACE.to_owned()]) {
        p.pod.inputs(&ns).validate()?;
    }
    Ok(())
}

pub(crate) fn run(args: &RunPods) -> anyhow::Result<()> {
    check(args)?;
    let live_run = args.auto_remediate && !args.dry_run;
    let p = &args.plan;
    let scope = &p.pod.namespaces.in_context(&p.connect);
    if let Some(named) = scope.named(PODS_NAMESPACE) {
        for ns in &named {
            p.pod.inputs(ns).validate()?;
        }
    }
    let events = Events::new(&args.events, !live_run);
    let job = Job {
        connect: &p.connect,
        store: p.store.as_deref(),
        archive: &args.archive,
        lock: &args.lock,
        metrics: &args.metrics,
        output: p.output.form,
        events: &events,
    };
    live::block_on(async {
        let namespaces = resolve(scope, &p.connect, &args.metrics).await?;
        args.metrics.scope("pods", &namespaces);
        let mut runs = Vec::with_capacity(namespaces.len());
        for ns in &namespaces {
            let cfg = p.pod.inputs(ns).validate()?;
            let run = execute(&job, &cfg, Targets::Planned(p), !live_run, namespaces.len());
            runs.push(run.await);
        }
        if scope.all() {
            let inputs = |ns: &str| p.pod.inputs(ns).validate();
            runs.extend(outside(&job, &namespaces, inputs, !live_run).await);
        }
        finish(&job, runs, several(scope))
    })
}

/// With `-A`: the pins in namespaces the run does not cover (outside `--namespace-selector`, or
/// excluded), found by one metadata-only list of every namespace's Pods (paged), each released
/// under that namespace's run lock, fenced, and never collected: a namespace that leaves the
/// selection keeps no pin, so no delete of its Pods hangs. One run per such namespace, reported
/// as any other (system namespaces are never touched).
async fn outside(
    job: &Job<'_>,
    covered: &[String],
    inputs: impl Fn(&str) -> Result<PodConfig, gc_core::input::InputError>,
    dry_run: bool,
) -> Vec<NamespaceRun> {
    let failed = |namespace: &str, error: anyhow::Error| NamespaceRun {
        namespace: namespace.to_owned(),
        report: None,
        error: Some(error),
        metrics: String::new(),
    };
    let all = "(outside the selection)";
    let cluster = match job.connect.cluster().await {
        Ok(cluster) => cluster,
        Err(e) => return vec![failed(all, e)],
    };
    let pin = match inputs("default") {
        Ok(cfg) => cfg.pin_finalizer,
        Err(e) => return vec![failed(all, e.into())],
    };
    let pinned = gc_core::pages::collect(
        async |token| cluster.list_all_pod_metadata(500, token).await,
        |item| {
            let meta = &item["metadata"];
            let pinned = meta["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == pin.as_str()));
            Ok(pinned
                .then(|| meta["namespace"].as_str().map(str::to_owned))
                .flatten())
        },
    )
    .await;
    let mut namespaces = match pinned {
        Ok(namespaces) => namespaces,
        Err(e) => {
            let e = anyhow::Error::new(e).context("cannot list pinned Pods in every namespace");
            return vec![failed(all, e)];
        }
    };
    namespaces.sort();
    namespaces.dedup();
    namespaces.retain(|ns| {
        !covered.contains(ns) && !gc_core::input::SYSTEM_NAMESPACES.contains(&ns.as_str())
    });
    let mut runs = Vec::with_capacity(namespaces.len());
    for ns in namespaces {
        let released = async {
            let cfg = inputs(&ns)?;
            let lock = live::take_lock(&cluster, &ns, PODS_LOCK, job.lock, dry_run).await?;
            let why = "its namespace is outside the run's selection (--namespace-selector, \
                       --exclude-namespace): never collected";
            let recovered = apply::release_pins(&cluster, &cfg, lock.halt(), dry_run, why, false)
                .await
                .with_context(|| format!("cannot list pinned Pods in namespace {ns}"));
            let lost = live::lost(&lock);
            live::release_lock(lock).await;
            match lost {
                Some(lost) => Err(lost),
                None => recovered,
            }
        };
        runs.push(match released.await {
            Ok(recovered) => {
                let results = recovered.iter();
                job.events.pods(&cluster, &ns, results).await;
                // A pin still on (its Pod kept changing) fails the run: the next run tries again.
                let failed = recovered.iter().any(|r| {
                    r.outcome.is_failure() || matches!(r.outcome, Outcome::Changed { .. })
                });
                let why = "a pin outside the selection could not be released; the next run tries \
                           again";
                NamespaceRun {
                    error: failed.then(|| anyhow::Error::msg(why)),
                    namespace: ns,
                    report: Some(Report {
                        dry_run,
                        recovered,
                        results: Vec::new(),
                        pins_left: Vec::new(),
                        unusable: None,
                    }),
                    metrics: String::new(),
                }
            }
            Err(e) => failed(&ns, e),
        });
    }
    runs
}

/// The namespaces of the run; when they cannot be known (`-A`, the cluster unreachable or its
/// Namespaces not listable), the webhook is alerted once, as no namespace's metrics can say so.
async fn resolve(
    scope: &crate::namespaces::NamespaceArgs,
    connect: &ConnectArgs,
    metrics: &MetricsArgs,
) -> anyhow::Result<Vec<String>> {
    let resolved = scope.resolve_with(connect, PODS_NAMESPACE).await;
    if let Err(error) = &resolved {
        metrics.alert_unscoped("pods", &format!("{error:#}"));
    }
    resolved
}

/// Whether the flags name several namespaces, or `-A`'s (however many match): the output is
/// then a list, one entry per namespace, an empty list too.
fn several(scope: &crate::namespaces::NamespaceArgs) -> bool {
    scope
        .named(PODS_NAMESPACE)
        .is_none_or(|named| named.len() > 1)
}

/// Prints what each namespace's run did and writes their metrics; the error names the
/// namespaces that failed. One namespace prints its report alone, as it always has; `several`
/// (the flags may name several) a list, each failed namespace's error in it.
fn finish(job: &Job<'_>, runs: Vec<NamespaceRun>, several: bool) -> anyhow::Result<()> {
    if let (false, [run]) = (several, &runs[..]) {
        if let Some(report) = &run.report {
            print_report(report, job.output)?;
        }
    } else {
        job.metrics
            .write_merged(&runs.iter().map(|r| r.metrics.clone()).collect::<Vec<_>>());
        if matches!(job.output, Output::Table | Output::Wide | Output::Name) {
            for run in &runs {
                if job.output != Output::Name {
                    println!("namespace {}:", run.namespace);
                }
                match (&run.report, &run.error) {
                    (Some(report), _) => print_report(report, job.output)?,
                    (None, Some(error)) if job.output != Output::Name => {
                        println!("FAILED: {error:#}");
                    }
                    _ => {}
                }
            }
        } else {
            #[derive(Serialize)]
            struct Doc<'a> {
                namespace: &'a str,
                #[serde(skip_serializing_if = "Option::is_none")]
                report: Option<&'a Report>,
                #[serde(skip_serializing_if = "Option::is_none")]
                error: Option<String>,
            }
            let docs: Vec<Doc> = runs
                .iter()
                .map(|r| Doc {
                    namespace: &r.namespace,
                    report: r.report.as_ref(),
                    error: r.error.as_ref().map(|e| format!("{e:#}")),
                })
                .collect();
            write_doc(&mut std::io::stdout().lock(), &docs, job.output)?;
        }
    }
    let total = runs.len();
    let failed = runs
        .into_iter()
        .filter_map(|r| r.error.map(|e| (r.namespace, e)))
        .collect();
    crate::namespaces::outcome(total, failed)
}

/// One namespace's run of a run over `namespaces`, its metrics delivered (with the metrics file
/// only when it is the only namespace: `finish` writes several namespaces' at once).
async fn execute(
    job: &Job<'_>,
    cfg: &PodConfig,
    targets: Targets<'_>,
    dry_run: bool,
    namespaces: usize,
) -> NamespaceRun {
    let started = std::time::Instant::now();
    let metrics = RunMetrics::new(&job.metrics.metrics_prefix(), "pods", &cfg.namespace);
    let delivery = job.metrics.for_namespaces(namespaces);
    let outcome = act(job, cfg, targets, dry_run, &metrics).await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut run = NamespaceRun {
        namespace: cfg.namespace.clone(),
        report: None,
        error: None,
        metrics: String::new(),
    };
    let report = match outcome {
        Ok(report) => report,
        Err((_, error)) if crate::signals::stopped(&error) => {
            metrics.stopped(elapsed);
            metrics.deliver(&delivery, None, "");
            run.metrics = metrics.text();
            run.error = Some(error);
            return run;
        }
        Err((stage, error)) => {
            metrics.fail(stage, elapsed, &delivery, &format!("{error:#}"));
            run.metrics = metrics.text();
            run.error = Some(error);
            return run;
        }
    };
    metrics.results(&report.recovered);
    metrics.results(&report.results);
    for _ in &report.pins_left {
        metrics.error("PinLeft");
    }
    let failed = report
        .recovered
        .iter()
        .chain(&report.results)
        .filter(|r| r.outcome.is_failure())
        .count();
    let summary = summary(&report);
    let stopped = stopped_by(crate::signals::received(), &report);
    if let Some(signal) = stopped.filter(|_| failed == 0 && report.pins_left.is_empty()) {
        // Neither a success nor a failure: no alert, the last success kept.
        let why = format!("stopped by {signal}: {summary}; the next run collects the rest");
        metrics.stopped(elapsed);
        metrics.deliver(&delivery, None, &summary);
        run.error = Some(crate::signals::Stopped::new(why).into());
    } else if failed > 0 || !report.pins_left.is_empty() || report.unusable.is_some() {
        let mut why = format!("{failed} target(s) failed; the next run resumes them");
        if let Some((stage, unusable)) = &report.unusable {
            metrics.error(stage);
            why = format!("{unusable}: stopped before planning, {summary}");
            if failed > 0 {
                why.push_str(&format!(
                    "; {failed} pin(s) stay on Pods being deleted until their archives are written"
                ));
            }
        }
        if !report.pins_left.is_empty() {
            why = format!("{why}; the pin is still on {}", report.pins_left.join(", "));
        }
        metrics.finish(elapsed, None);
        metrics.deliver(&delivery, Some(&why), &summary);
        run.error = Some(anyhow::anyhow!(why));
    } else {
        metrics.finish(elapsed, Some(clock::now()));
        let deleted = report
            .results
            .iter()
            .chain(&report.recovered)
            .any(|r| matches!(r.outcome, Outcome::Collected { .. }));
        metrics.deliver(&delivery, None, if deleted { &summary } else { "" });
    }
    run.metrics = metrics.text();
    run.report = Some(report);
    run
}

/// Connects, does the run, then posts its Events: one on each Pod collected, refused or
/// failed, or one on the Namespace when the run failed. An error names the metrics stage.
async fn act(
    job: &Job<'_>,
    cfg: &PodConfig,
    targets: Targets<'_>,
    dry_run: bool,
    metrics: &RunMetrics,
) -> Result<Report, (&'static str, anyhow::Error)> {
    let run = |e: anyhow::Error| ("run", e);
    let cluster = job.connect.cluster().await.map_err(run)?;
    let outcome = connected(job, &cluster, cfg, targets, dry_run, metrics).await;
    match &outcome {
        Ok(report) => {
            let results = report.recovered.iter().chain(&report.results);
            job.events.pods(&cluster, &cfg.namespace, results).await;
            if let Some((_, why)) = &report.unusable {
                let error = anyhow::anyhow!("{why}: stopped before planning");
                job.events
                    .run_failed(&cluster, &cfg.namespace, &error)
                    .await;
            }
        }
        // A run a signal stopped (waiting for its lock) did not fail; a run that lost its lock
        // writes nothing more, Events included.
        Err((_, error)) if crate::signals::stopped(error) => {}
        Err(("lock", _)) => {}
        Err((_, error)) => job.events.run_failed(&cluster, &cfg.namespace, error).await,
    }
    outcome
}

/// Takes the run lock (a live run), proves the store and the archive sink usable, recovers
/// every pin, plans (when this run plans), applies, checks that no pin is left, releases the
/// lock. With the store or the sink unusable, recovery still runs: it releases every pin it can
/// and the run stops there (failed). A run whose lock was lost fails at stage `lock`. An error
/// names the metrics stage.
async fn connected(
    job: &Job<'_>,
    cluster: &gc_k8s::KubeCluster,
    cfg: &PodConfig,
    targets: Targets<'_>,
    dry_run: bool,
    metrics: &RunMetrics,
) -> Result<Report, (&'static str, anyhow::Error)> {
    let run = |e: anyhow::Error| ("run", e);
    let sink = job.archive.sink().map_err(|e| run(e.into()))?;
    let lock = live::take_lock(cluster, &cfg.namespace, PODS_LOCK, job.lock, dry_run)
        .await
        .map_err(run)?;
    let report = match usable(job.store, &sink, &cfg.cluster_id).await {
        Ok(store) => {
            let ports = Ports {
                cluster,
                store: &store,
                sink: &sink,
                clock: &clock::SystemClock,
                // A lost lock stops the writes at once; a signal only between targets (`work`).
                stop: lock.halt(),
            };
            work(&ports, cfg, targets, dry_run, lock.stop(), metrics).await
        }
        Err((stage, error)) => {
            let why = format!("{error:#}");
            apply::release_pins(cluster, cfg, lock.halt(), dry_run, &why, true)
                .await
                .with_context(|| {
                    format!(
                        "{why}; and cannot list pinned Pods in namespace {}",
                        cfg.namespace
                    )
                })
                .map_err(|e| ("recover", e))
                .map(|recovered| Report {
                    dry_run,
                    recovered,
                    results: Vec::new(),
                    pins_left: Vec::new(),
                    unusable: Some((stage, why)),
                })
        }
    };
    let lost = live::lost(&lock);
    live::release_lock(lock).await;
    match lost {
        Some(lost) => Err(("lock", lost)),
        None => report,
    }
}

/// The store and the archive sink, proven usable: the store opened, the sink's probe written
/// and read back (dry runs too, so that a dry run meets what a live run would). `Err` names
/// the metrics stage, `store` or `archive`.
async fn usable(
    store: Option<&str>,
    sink: &gc_store::Archives,
    cluster_id: &str,
) -> Result<gc_store::Store, (&'static str, anyhow::Error)> {
    let store = live::open_store(store).await.map_err(|e| ("store", e))?;
    sink.probe(cluster_id)
        .await
        .with_context(|| format!("cannot use the archive sink {}", sink.shown()))
        .map_err(|e| ("archive", e))?;
    Ok(store)
}

/// Under the lock: recovery, the plan when this run makes it, the apply (asked to stop between
/// targets by `stopping`), the pin check.
async fn work(
    ports: &Ports<'_, gc_k8s::KubeCluster, gc_store::Store, gc_store::Archives, clock::SystemClock>,
    cfg: &PodConfig,
    targets: Targets<'_>,
    dry_run: bool,
    stopping: &AtomicBool,
    metrics: &RunMetrics,
) -> Result<Report, (&'static str, anyhow::Error)> {
    let recovered = apply::recover(ports, cfg, dry_run)
        .await
        .with_context(|| format!("cannot list pinned Pods in namespace {}", cfg.namespace))
        .map_err(|e| ("recover", e))?;
    let planned;
    let (targets, recorded) = match targets {
        Targets::Reviewed(targets, recorded) => {
            metrics.reviewed(targets.len());
            (targets, recorded)
        }
        Targets::Planned(args) => {
            // A run plans at the clock (`check` refuses `--now`).
            let now = clock::now();
            // The run's own connections: the cluster, and the store the ledger lives in.
            let live = Some((ports.cluster, Some(ports.store)));
            planned = plan::plan_in(args, cfg, now, None, live)
                .await
                .map_err(|e| ("plan", e))?;
            metrics.plan(&planned);
            (&planned.targets[..], None)
        }
    };
    let results = apply::apply_until(ports, cfg, targets, dry_run, stopping, recorded).await;
    // A Pod whose pin recovery released and that this run then worked on as a target is
    // reported (counted, evented) once, by what the run last did to it.
    let mut recovered = recovered;
    let started = |t: &&TargetResult| !matches!(t.outcome, Outcome::NotStarted { .. });
    recovered.retain(|r| !results.iter().filter(started).any(|t| t.uid == r.uid));
    let pins_left = if dry_run {
        Vec::new()
    } else {
        apply::pinned_pods(ports.cluster, cfg)
            .await
            .with_context(|| format!("cannot list pinned Pods in namespace {}", cfg.namespace))
            .map_err(|e| ("recover", e))?
            .into_iter()
            .map(|p| p.name)
            .collect()
    };
    Ok(Report {
        dry_run,
        recovered,
        results,
        pins_left,
        unusable: None,
    })
}

/// The `signal` received, when it left targets of `r` not started: a signal after the last
/// target stopped nothing, and the run is judged as if none had come.
fn stopped_by(signal: Option<&'static str>, r: &Report) -> Option<&'static str> {
    let not_started = |t: &TargetResult| matches!(t.outcome, Outcome::NotStarted { .. });
    signal.filter(|_| r.results.iter().any(not_started))
}

fn summary(r: &Report) -> String {
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
    let mode = if r.dry_run { " (dry run)" } else { "" };
    let mut line = format!(
        "{collected} of {} targets collected{mode}, {} pins recovered",
        r.results.len(),
        r.recovered.len()
    );
    if !r.pins_left.is_empty() {
        line.push_str(&format!(", PIN LEFT on {}", r.pins_left.join(", ")));
    }
    line
}

/// Prints a report: a line per target (table and wide alike), the document (JSON, YAML), or
/// `pod/NAME` of each Pod collected or that would be (name).
fn print_report(r: &Report, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Table | Output::Wide => {}
        Output::Name => {
            for t in r.recovered.iter().chain(&r.results) {
                if matches!(
                    t.outcome,
                    Outcome::Collected { .. } | Outcome::WouldCollect { .. }
                ) {
                    println!("pod/{}", escape(&t.name));
                }
            }
            return Ok(());
        }
        _ => {
            return write_doc(&mut std::io::stdout().lock(), r, output)
                .context("cannot write the report");
        }
    }
    for t in r.recovered.iter().chain(&r.results) {
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
            Outcome::TooLarge { bytes, max } => format!(
                "too large   archive of {bytes} bytes over max_archive_bytes {max}; pin released"
            ),
            Outcome::Released { reason } => format!("released   {reason}"),
            Outcome::NotStarted { reason } => format!("not started   {reason}"),
            Outcome::Failed { step, error } => format!("FAILED at {step:?}: {error}"),
        };
        println!(
            "{}",
            escape(&format!("{:<32} {:<38} {line}", t.name, t.uid))
        );
    }
    println!("{}", summary(r));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(outcomes: Vec<Outcome>) -> Report {
        let results = outcomes
            .into_iter()
            .enumerate()
            .map(|(i, outcome)| TargetResult {
                name: format!("p{i}"),
                uid: format!("u{i}"),
                outcome,
            })
            .collect();
        Report {
            dry_run: false,
            recovered: Vec::new(),
            results,
            pins_left: Vec::new(),
            unusable: None,
        }
    }

    #[test]
    fn a_signal_stopped_the_run_only_if_it_left_a_target_not_started() {
        let collected = || Outcome::Collected {
            uri: "file:///a".into(),
            sha256: "0".repeat(64),
            bytes: 1,
        };
        let not_started = || Outcome::NotStarted {
            reason: "stopping".into(),
        };
        let done = report(vec![collected(), collected()]);
        assert_eq!(stopped_by(Some("SIGTERM"), &done), None);
        let cut = report(vec![collected(), not_started()]);
        assert_eq!(stopped_by(Some("SIGTERM"), &cut), Some("SIGTERM"));
        assert_eq!(stopped_by(None, &cut), None);
        assert_eq!(stopped_by(Some("SIGINT"), &report(vec![])), None);
    }
}
