//! `gc-cli apply PLAN` and `gc-cli run pods`: the fenced apply of failed-Pod targets, one run at
//! a time per namespace, with every pin left by earlier runs finished or released first.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use gc_core::pods::approval::{PlanFile, open_plans};
use gc_output::pods::{write_report, write_runs};
use gc_runtime::NamespaceRun;
use gc_runtime::Settings;
use gc_runtime::adapters::{self, KubePodCollector, PodSources, StoreAt};
use gc_runtime::namespaces::Selection;
use gc_runtime::pods::Report;

use crate::archives::ArchiveArgs;
use crate::clock;
use crate::events::EventArgs;
use crate::exit::UsageError;
use crate::live::{self, ConnectArgs, LockArgs};
use crate::metrics::MetricsArgs;
use crate::output::{Output, OutputArgs};
use crate::pods::args::{PODS_NAMESPACE, PodInputArgs, SealArgs};
use crate::pods::plan::PlanPods;

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
    let flags = (&a.metrics, &a.events, &a.lock);
    let settings = setup(flags, args.dry_run)?;
    live::block_on(async {
        // Named namespaces' plans are opened before connecting; `-A`'s once they are listed.
        let open = |namespaces: &[String]| {
            let policy_for = |ns: &str| {
                (namespaces.iter().any(|n| n == ns))
                    .then(|| args.pod.inputs(ns).validate().ok())
                    .flatten()
            };
            open_plans(&bytes, policy_for, key.as_ref(), clock::now()).with_context(|| {
                let namespaces = namespaces.join(", ");
                let plan = args.plan.display();
                format!("plan {plan} (apply's namespaces: {namespaces})")
            })
        };
        let early = scope.named(PODS_NAMESPACE).map(|n| open(&n));
        let early = early.transpose()?;
        let covered = |files: &[PlanFile]| Selection {
            named: files.iter().map(|f| f.config.namespace.clone()).collect(),
            ..Selection::default()
        };
        let selection = early.as_deref().map_or_else(|| scope.clone(), covered);
        let several = scope.several(PODS_NAMESPACE);
        let parts = (&a.connect, &a.archive, a.store.as_ref());
        let (run, namespaces) = match made(settings, parts, &selection).await {
            Ok(made) => made,
            Err(unmade_run) => return unmade(args.output.form, unmade_run, several),
        };
        let files = early.map_or_else(|| open(&namespaces), Ok)?;
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
        let several = several || files.len() > 1;
        // The plans' policy equals apply's (checked); apply acts under its own.
        let inputs = |ns: &str| args.pod.inputs(ns).validate();
        let all = scope.all.then_some(&namespaces[..]);
        let runs = run.apply(&files, ledger.as_ref(), all, inputs).await?;
        finish(args.output.form, runs, several)
    })
}

/// The collector its flags describe, and the namespaces of `selection` ([`adapters::connect_pods`]).
async fn made(
    settings: Settings,
    (connect, archive, store): (&ConnectArgs, &ArchiveArgs, Option<&String>),
    selection: &Selection,
) -> Result<(KubePodCollector, Vec<String>), (Vec<NamespaceRun<Report>>, gc_runtime::Error)> {
    let sources = PodSources {
        connection: connect.connection().map_err(gc_runtime::Error::other),
        sink: archive.sink().map_err(gc_runtime::Error::other),
        store: StoreAt(store.cloned(), archive.store_timeout),
    };
    adapters::connect_pods(sources, settings, selection).await
}

/// The settings of the flags' reporting, lock and dry run.
fn setup(flags: (&MetricsArgs, &EventArgs, &LockArgs), dry_run: bool) -> anyhow::Result<Settings> {
    crate::signals::install()?;
    Ok(Settings {
        live: !dry_run,
        events: !flags.1.no_events,
        lock: flags.2.options(),
        delivery: flags.0.delivery()?,
        cancel: Arc::new(crate::signals::STOP.clone()),
        progress: Some(Arc::new(gc_output::TerminalProgress::new())),
        concurrency: flags.2.concurrency,
        ..Settings::default()
    })
}

/// The end of a command whose run could not be [`made`]: one namespace's error
/// as it is (its exit code), several as [`finish`] reports them.
fn unmade(
    output: Output,
    (runs, error): (Vec<NamespaceRun<Report>>, gc_runtime::Error),
    several: bool,
) -> anyhow::Result<()> {
    if several && runs.len() > 1 {
        finish(output, runs, several)
    } else {
        Err(error.into())
    }
}

/// The checks of `run pods`' flags alone, which no later run could pass either (`serve` makes
/// them before its first run).
pub(crate) fn check(args: &RunPods) -> anyhow::Result<()> {
    args.metrics.delivery()?;
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
    let named = p.pod.namespaces.selection().named(PODS_NAMESPACE);
    for ns in named.unwrap_or_else(|| vec![PODS_NAMESPACE.to_owned()]) {
        p.pod.inputs(&ns).validate()?;
    }
    Ok(())
}

pub(crate) async fn run(args: &RunPods) -> anyhow::Result<()> {
    check(args)?;
    let live_run = args.auto_remediate && !args.dry_run;
    let p = &args.plan;
    let scope = &p.pod.namespaces.in_context(&p.connect);
    if let Some(named) = scope.named(PODS_NAMESPACE) {
        for ns in &named {
            p.pod.inputs(ns).validate()?;
        }
    }
    let flags = (&args.metrics, &args.events, &args.lock);
    let settings = setup(flags, !live_run)?;
    let several = scope.several(PODS_NAMESPACE);
    let parts = (&p.connect, &args.archive, p.store.as_ref());
    let (run, namespaces) = match made(settings, parts, scope).await {
        Ok(made) => made,
        Err(unmade_run) => return unmade(p.output.form, unmade_run, several),
    };
    let configs = namespaces
        .iter()
        .map(|ns| p.pod.inputs(ns).validate())
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = |ns: &str| p.pod.inputs(ns).validate();
    let runs = run.collect(&configs, scope.all, inputs).await;
    finish(p.output.form, runs, several)
}

/// Prints what each namespace's run did; the error names the
/// namespaces that failed. One namespace prints its report alone, as it always has; `several`
/// (the flags may name several) a list, each failed namespace's error in it.
fn finish(output: Output, runs: Vec<NamespaceRun<Report>>, several: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if let (false, [run]) = (several, &runs[..]) {
        if let Some(report) = &run.report {
            write_report(&mut out, report, output).context("cannot write the report")?;
        }
    } else {
        write_runs(&mut out, &runs, output).context("cannot write the reports")?;
    }
    Ok(gc_runtime::outcome_of(runs)?)
}
