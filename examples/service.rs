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

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, bail};
use gc_runtime::adapters::{Archives, Connection, StoreAt, connect};
use gc_runtime::pods::Targets;
use gc_runtime::{Builder, STORE_TIMEOUT, Settings, StopToken, serve};

const FLAGS: &str = "--namespace --cluster-id --pin-finalizer --retention-seconds --max-pods \
    --interval-seconds --lock-lease-seconds --store --archive-dir --metrics-file --live --once";

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let (mut flags, mut args) = (HashMap::new(), std::env::args().skip(1));
    while let Some(flag) = args.next() {
        let Some(name) = FLAGS.split_whitespace().find(|f| *f == flag) else {
            bail!("unknown flag {flag}: the flags are {FLAGS}");
        };
        let value = match name {
            "--live" | "--once" => Some(String::new()),
            _ => args.next(),
        };
        flags.insert(
            name,
            value.with_context(|| format!("{name} needs a value"))?,
        );
    }
    let text = |name: &str| flags.get(name).cloned();
    let number = |name: &str, default: i64| match flags.get(name) {
        Some(v) => v.parse().with_context(|| format!("invalid {name} {v:?}")),
        None => Ok(default),
    };
    let d = gc_core::PodInputs::default();
    let inputs = gc_core::PodInputs {
        namespace: text("--namespace").unwrap_or(d.namespace.clone()),
        cluster_id: text("--cluster-id").unwrap_or(d.cluster_id.clone()),
        pin_finalizer: text("--pin-finalizer").unwrap_or(d.pin_finalizer.clone()),
        retention_seconds: number("--retention-seconds", d.retention_seconds)?,
        max_pods: number("--max-pods", d.max_pods)?,
        ..d
    };
    let cfg = inputs.validate().context("invalid settings")?;
    // The service's shutdown: the run in progress finishes its target, then releases its lock.
    let shutdown = StopToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
        stop.stop("SIGTERM");
        std::io::Result::Ok(())
    });
    let mut settings = Settings {
        live: flags.contains_key("--live"),
        ..Settings::default()
    };
    settings.lock.lease_seconds = number("--lock-lease-seconds", 30)?.try_into()?;
    settings.delivery.metrics_file = text("--metrics-file").map(Into::into);
    let folder = text("--archive-dir").map_or_else(gc_store::default_archive_dir, Into::into);
    // The collector, connected once; each interval's run takes the namespace's Lease anew.
    let run = Builder::new(settings)
        .cluster(connect(&Connection::default()).await?)
        .store(StoreAt(text("--store"), STORE_TIMEOUT))
        .sink(Archives::Directory(gc_store::DirectorySink::new(folder)))
        .stop(shutdown.clone())
        .pods()?;
    let every = Duration::from_secs(number("--interval-seconds", 300)?.try_into()?);
    let (health, once) = (serve::Health::new(None), flags.get("--once").map(|_| 1));
    let (done, failed) = serve::every(every, once, &health, &*run.settings().cancel, async || {
        let ran = run.run_namespace(&cfg, Targets::Planned, 1).await;
        if let Some(report) = &ran.report {
            println!("{}", serde_json::to_string(report)?);
        }
        ran.failure
            .map_or(Ok(()), |f| Err(anyhow::Error::from(f.error)))
    })
    .await;
    if failed > 0 {
        bail!("{failed} of {done} run(s) failed");
    }
    Ok(())
}
