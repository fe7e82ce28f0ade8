//! A service embedding the failed-Pod collector through `gc-runtime`: every interval, the run
//! `gc-cli run pods` makes (run lock, recovery, sink check, plan, fenced apply, pin check,
//! metrics, Events), until SIGTERM or Ctrl-C; a dry run unless `--live`.
//!
//! ```sh
//! cargo run -p examples --example service -- --namespace batch --once
//! cargo run -p examples --example service -- --namespace batch --live --interval-seconds 300
//! ```
//!
//! It connects as `kubectl` does and uses the embedded store and archive folder unless `--store`
//! and `--archive-dir` say otherwise. The report of each run goes to stdout as JSON.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use gc_runtime::pods::{PodRun, Targets, run_namespace};
use gc_runtime::{LockOptions, StopToken, events::Events, metrics::Delivery, serve};

const USAGE: &str = "usage: service [--namespace NS] [--cluster-id ID] [--pin-finalizer NAME] \
    [--interval-seconds N] [--lock-lease-seconds N] [--store URL] [--archive-dir DIR] \
    [--metrics-file FILE] [--live] [--once]";

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let (mut inputs, mut interval, mut lease, mut once, mut live) = Default::default();
    let (mut store, mut archive_dir, mut delivery) = (None, None, Delivery::default());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value: {USAGE}"))
        };
        let mut number = || {
            value()?
                .parse::<u32>()
                .with_context(|| format!("invalid {flag}"))
        };
        match flag.as_str() {
            "--namespace" => {
                inputs = gc_core::PodInputs {
                    namespace: value()?,
                    ..inputs
                }
            }
            "--cluster-id" => {
                inputs = gc_core::PodInputs {
                    cluster_id: value()?,
                    ..inputs
                }
            }
            "--pin-finalizer" => {
                inputs = gc_core::PodInputs {
                    pin_finalizer: value()?,
                    ..inputs
                }
            }
            "--interval-seconds" => interval = Some(number()?),
            "--lock-lease-seconds" => lease = Some(number()?),
            "--store" => store = Some(value()?),
            "--archive-dir" => archive_dir = Some(PathBuf::from(value()?)),
            "--metrics-file" => delivery.metrics_file = Some(value()?.into()),
            "--once" => once = true,
            "--live" => live = true,
            _ => bail!("unknown flag {flag}: {USAGE}"),
        }
    }
    let cfg = inputs.validate().context("invalid settings")?;
    let folder = archive_dir.unwrap_or_else(gc_store::default_archive_dir);
    let sink = gc_store::Archives::Directory(gc_store::DirectorySink::new(folder));
    let lock = LockOptions {
        wait: Duration::from_secs(300),
        lease_seconds: lease.unwrap_or(30),
    };
    // The service's shutdown: the run in progress finishes its target, then releases its lock.
    let shutdown = StopToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
        stop.stop("SIGTERM");
        std::io::Result::Ok(())
    });
    let connection = gc_k8s::Connection::default();
    let (events, dry_run) = (Events::new(live), !live);
    let run = PodRun {
        connection: &connection,
        store: store.as_deref(),
        sink: &sink,
        lock: &lock,
        delivery: &delivery,
        events: &events,
        cancel: &shutdown,
        dry_run,
    };
    let every = Duration::from_secs(interval.unwrap_or(300).into());
    let health = serve::Health::new(None);
    let (done, failed) = serve::every(every, once.then_some(1), &health, &shutdown, async || {
        let ran = run_namespace(&run, &cfg, Targets::Planned, 1).await;
        if let Some(report) = &ran.report {
            println!("{}", serde_json::to_string(report)?);
        }
        eprintln!("{}: {:?}", cfg.namespace, ran.outcome());
        ran.failure.map_or(Ok(()), |f| Err(f.error))
    })
    .await;
    if failed > 0 {
        bail!("{failed} of {done} run(s) failed");
    }
    Ok(())
}
