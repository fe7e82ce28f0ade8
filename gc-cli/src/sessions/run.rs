//! `gc-cli run sessions`: plans under the run lock, then deletes, each delete fenced on uid and
//! resourceVersion (a dry run sends the same deletes in server-side dry run), and writes one
//! JSON audit line per resource judged.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use gc_output::sessions::Shown;
use gc_runtime::Settings;
use gc_runtime::adapters::SessionsApi;
use gc_runtime::audit::AuditLog;
use gc_runtime::metrics::Delivery;
use gc_runtime::requests::RequestOptions;
use gc_runtime::serve::api::ApiOptions;

use crate::archives::ArchiveArgs;
use crate::events::EventArgs;
use crate::exit::UsageError;
use crate::live;
use crate::metrics::MetricsArgs;
use crate::output::{FORMS, Output, forms};
use crate::sessions::args::{SESSIONS_NAMESPACE, SessionArgs};

/// `gc-cli run sessions`
#[derive(Debug, Args)]
pub(crate) struct RunSessions {
    #[command(flatten)]
    args: SessionArgs,
    /// `server` (the default, as `run pods`): send every delete as a server-side dry run, to
    /// report what a run would delete; `none` deletes. A bare `--dry-run` is `server`.
    #[arg(
        long,
        value_name = "none|server",
        num_args = 0..=1,
        default_value = "server",
        default_missing_value = "server",
        value_parser = crate::dry_run::parse
    )]
    dry_run: bool,
    /// gc's store, for the receipts of the manifests archived before each delete: `sqlite:PATH`,
    /// a path, or `postgres://...` (never the session database). Default: the embedded SQLite
    /// file.
    #[arg(long, env = "GC_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    /// Where each object's manifest is archived before its delete (labels, annotations, spec:
    /// what creates it again), read back and verified; no receipt, no delete. A dry run writes
    /// none.
    #[command(flatten)]
    archive: ArchiveArgs,
    /// Append the audit lines to this file instead of writing them to stdout (to stderr when
    /// `-o` is given).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Print the run as `FORMAT` on stdout (`--format` is the older spelling): `table`/`wide` a
    /// row per resource judged with its result, `json`/`yaml` the audit records, `name` the
    /// resources deleted (or that would be). Without it, stdout carries the audit lines.
    #[arg(
        long = "output",
        short = 'o',
        alias = "format",
        value_name = "FORMAT",
        value_parser = forms(FORMS)
    )]
    output: Option<Output>,
    #[command(flatten)]
    lock: live::LockArgs,
    #[command(flatten)]
    pub(crate) metrics: MetricsArgs,
    #[command(flatten)]
    events: EventArgs,
}

/// Where audit lines go: a file opened for appending, stdout, or stderr when stdout carries `-o`.
pub(crate) fn audit_sink(
    path: Option<&PathBuf>,
    output: Option<Output>,
) -> Result<Box<dyn Write + Send>, UsageError> {
    Ok(match path {
        Some(path) => Box::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    UsageError::because(format!("cannot open --audit-log {}", path.display()), e)
                })?,
        ),
        None if output.is_some() => Box::new(std::io::stderr()),
        None => Box::new(std::io::stdout()),
    })
}

/// The checks of `run sessions`' flags alone, which no later run could pass either (`serve`
/// makes them before its first run).
pub(crate) fn check(args: &RunSessions) -> anyhow::Result<()> {
    args.metrics.delivery()?;
    args.args.check()
}

pub(crate) async fn run(args: &RunSessions) -> anyhow::Result<()> {
    check(args)?;
    let now = crate::clock::at(args.args.now.as_deref())?;
    let archives = args.archive.sink()?;
    let sink = audit_sink(args.audit_log.as_ref(), args.output)?;
    let delivery = args.metrics.delivery()?;
    crate::signals::install()?;
    let selection = args.args.namespaces.selection();
    let mut audit = gc_output::sessions::Audited {
        log: AuditLog(sink),
        // Several as the flags say (`-A` however many match): the output's shape is known.
        shown: Shown::new(args.output, selection.several(SESSIONS_NAMESPACE)),
    };
    let settings = settings(args, delivery, Some(now));
    let store = args.store.as_deref();
    let config = |ns: &str| args.args.config(ns).map_err(gc_runtime::Error::other);
    let sources = args.args.sources();
    let runs = gc_runtime::adapters::run_selected(
        sources, store, archives, settings, &selection, config, &mut audit,
    )
    .await?;
    audit.shown.finish(&mut std::io::stdout().lock())?;
    Ok(gc_runtime::outcome_of(runs)?)
}

/// A run's settings as the flags give them, judging at `now` (`None`: the clock's).
fn settings(args: &RunSessions, delivery: Delivery, now: Option<f64>) -> Settings {
    Settings {
        live: !args.dry_run,
        delivery,
        ..settings_of(&args.lock, &args.events, args.archive.store_timeout, now)
    }
}

/// The settings the lock, Event and store flags give a dry run judging at `now`.
pub(crate) fn settings_of(
    lock: &crate::live::LockArgs,
    events: &crate::events::EventArgs,
    store_timeout: std::time::Duration,
    now: Option<f64>,
) -> Settings {
    Settings {
        events: !events.no_events,
        event_per_object: events.event_per_object,
        lock: lock.options(),
        cancel: std::sync::Arc::new(crate::signals::STOP.clone()),
        now,
        // A future `--now` would treat young resources as past their grace period: a live run
        // accepts one only when the environment says this is a test.
        allow_future_now: std::env::var_os("GC_ALLOW_FUTURE_NOW").is_some(),
        concurrency: lock.concurrency,
        store_timeout,
        ..Settings::default()
    }
}

/// `serve --api-listen`: the request API over this command's parts (its audit lines where a
/// run's go, its counters on `served`'s `/metrics`), until the process is asked to stop.
pub(crate) async fn serve_api(
    args: &RunSessions,
    listener: std::net::TcpListener,
    (api, requests, restore_account, served): (
        ApiOptions,
        RequestOptions,
        Option<(String, String)>,
        std::sync::Arc<gc_runtime::metrics::Served>,
    ),
    tls: Option<gc_runtime::serve::tls::TlsConfig>,
) -> anyhow::Result<()> {
    check(args)?;
    // A fixed `--now` (tests) judges every request at it; without it, at the clock's time.
    let now = (args.args.now.as_deref()).map(|now| crate::clock::at(Some(now)));
    let settings = settings(args, args.metrics.delivery()?, now.transpose()?);
    let served = SessionsApi {
        sources: args.args.sources(),
        store: args.store.clone(),
        sink: args.archive.sink()?,
        settings,
        requests,
        api,
        audit: Box::new(AuditLog(audit_sink(args.audit_log.as_ref(), args.output)?)),
        version: env!("CARGO_PKG_VERSION").into(),
        tls,
        restore_account,
        served: Some(served),
    };
    let config = |ns: &str| args.args.config(ns).map_err(gc_runtime::Error::other);
    let selection = args.args.namespaces.selection();
    Ok(served.serve(listener, &selection, config).await?)
}
