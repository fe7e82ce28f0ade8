//! A service embedding the session collector through `gc-runtime`: every interval, the run
//! `gc-cli run sessions` makes (run lock, list, look up, guard, manifests archived with their
//! receipts, fenced deletes, audit lines, metrics, Events), until SIGTERM or Ctrl-C; a dry run
//! unless `--live`.
//!
//! ```sh
//! cargo run -p examples --example sessions -- --database-url postgres://... --once
//! ```
//!
//! It connects as `kubectl` does and reads StreamSpace's `sessions` table (read-only); the
//! embedded store and archive folder keep the receipts and manifests unless `--store` and
//! `--archive-dir` say otherwise. The audit lines go to stdout, one JSON line per resource.

use std::time::Duration;

use anyhow::{Context, bail};
use gc_core::sessions::SessionInputs;
use gc_runtime::Settings;
use gc_runtime::adapters::{SessionSources, run_selected};
use gc_runtime::audit::AuditLog;
use gc_runtime::namespaces::Selection;
use gc_runtime::{StopToken, metrics::Delivery, serve};

const USAGE: &str = "usage: sessions --database-url URL [--namespace NS] [--grace-hours N] \
    [--interval-seconds N] [--store URL] [--archive-dir DIR] [--metrics-file FILE] [--live] [--once]";

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let (mut inputs, mut url, mut delivery) = (SessionInputs::default(), None, Delivery::default());
    let (mut interval, mut once, mut live) = (300, false, false);
    let (mut store, mut folder) = (None, gc_store::default_archive_dir());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value: {USAGE}"))
        };
        match flag.as_str() {
            "--database-url" => url = Some(value()?),
            "--namespace" => inputs.namespace = value()?,
            "--grace-hours" => inputs.grace_hours = value()?.parse().context("--grace-hours")?,
            "--interval-seconds" => interval = value()?.parse().context("--interval-seconds")?,
            "--store" => store = Some(value()?),
            "--archive-dir" => folder = value()?.into(),
            "--metrics-file" => delivery.metrics_file = Some(value()?.into()),
            "--once" => once = true,
            "--live" => live = true,
            _ => bail!("unknown flag {flag}: {USAGE}"),
        }
    }
    let url = url.with_context(|| format!("--database-url is required: {USAGE}"))?;
    let cfg = inputs.validate().context("invalid settings")?;
    let sink = gc_store::Archives::Directory(gc_store::DirectorySink::new(folder));
    let shutdown = StopToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
        stop.stop("SIGTERM");
        std::io::Result::Ok(())
    });
    let selection = Selection {
        named: vec![cfg.namespace.clone()],
        ..Selection::default()
    };
    let health = serve::Health::new(None);
    let every = Duration::from_secs(interval);
    let mut audit = AuditLog(std::io::stdout());
    let (done, failed) = serve::every(every, once.then_some(1), &health, &shutdown, async || {
        // Each run connects the cluster, the session table and the store as `run sessions` does.
        let sources = SessionSources {
            connection: Ok(gc_k8s::Connection::default()),
            database_url: Ok(url.clone()),
            table: gc_store::TableSpec::default(),
        };
        // A dry run unless `--live`; Events, the lock and the clock as the defaults say.
        let settings = Settings {
            live,
            delivery: delivery.clone(),
            cancel: std::sync::Arc::new(shutdown.clone()),
            ..Settings::default()
        };
        let (config, store) = (|_: &str| Ok(cfg.clone()), store.as_deref());
        let sink = sink.clone();
        let runs = run_selected(
            sources, store, sink, settings, &selection, config, &mut audit,
        )
        .await?;
        gc_runtime::outcome_of(runs)
    })
    .await;
    if failed > 0 {
        bail!("{failed} of {done} run(s) failed");
    }
    Ok(())
}
