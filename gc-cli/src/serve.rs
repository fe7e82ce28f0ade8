//! `gc-cli serve`: a long-running collector. Runs `run pods` or `run sessions` every interval
//! through the same code path as the one-shot commands, and serves its metrics from memory on
//! `/metrics` for Prometheus to scrape: each collector and namespace's last run, and counters
//! adding up every run since the process started. `/healthz` answers while the process lives,
//! and 503 once a run has lasted past `--stall-seconds`, so that a liveness probe restarts a
//! wedged process.
//!
//! The loop, the health state and the HTTP server are `gc_runtime::serve`'s.
//!
//! SIGTERM or SIGINT: the run in progress writes nothing more and releases its lock (it is
//! reported stopped: neither a success nor a failure), no other run starts (a sleep between runs
//! ends at once), the server stops and the process exits 0.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use gc_runtime::metrics::Served;
use gc_runtime::serve::{AdminServer, Health, every};

use crate::run::RunCommand;
use crate::signals;

/// `gc-cli serve`
#[derive(Debug, Args)]
pub(crate) struct Serve {
    /// Address to serve `/metrics` on.
    #[arg(long, default_value = "0.0.0.0:9898", value_name = "ADDR")]
    listen: SocketAddr,
    /// Time between runs: `6h`, `15m`; a bare number is seconds (`--interval-seconds`).
    #[arg(long = "interval", alias = "interval-seconds", default_value = "6h", value_name = "DURATION",
        value_parser = |s: &str| gc_runtime::durations::seconds_within(s, 0..=u64::from(u32::MAX)))]
    interval_seconds: u64,
    /// Stop after this many runs (default: never); then exit 1 when any of them failed.
    #[arg(long, value_name = "N")]
    runs: Option<u64>,
    /// `/healthz` answers 503 once a run has lasted this long (waiting for its lock included), so
    /// that a liveness probe restarts a wedged process; 0: never. Give it more than
    /// `--lock-wait` and the longest run expected.
    #[arg(long = "stall", alias = "stall-seconds", default_value = "1h", value_name = "DURATION",
        value_parser = |s: &str| gc_runtime::durations::seconds_within(s, 0..=u64::from(u32::MAX)))]
    stall_seconds: u64,
    /// The collector to run, with its flags.
    #[command(subcommand)]
    run: RunCommand,
}

pub(crate) fn serve(mut args: Serve) -> anyhow::Result<()> {
    // Flags no run could pass end the process now (exit 2) rather than fail every round.
    args.run.check()?;
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let shown = listener.local_addr().unwrap_or(args.listen);
    let metrics = args.run.metrics_mut();
    let served = Arc::new(Served::new(metrics.metrics_prefix()));
    metrics.serve_into(Arc::clone(&served));
    signals::install()?;
    let stall = (args.stall_seconds > 0).then(|| Duration::from_secs(args.stall_seconds));
    let health = Arc::new(Health::new(stall).shown_as(gc_output::options::shown));
    let server = AdminServer::start(listener, served, Arc::clone(&health))?;
    tracing::info!("serving /metrics on {shown}");
    let interval = Duration::from_secs(args.interval_seconds);
    let rounds = every(interval, args.runs, &health, &*signals::STOP, || {
        args.run.run_async()
    });
    let (done, failed) = crate::live::block_on(async { Ok(rounds.await) })?;
    if let Some(signal) = signals::received() {
        tracing::info!("{signal} received: exiting after {done} run(s)");
    }
    server.stop();
    // A bounded serve (`--runs`, a job) says whether its runs succeeded, as `run` would.
    if args.runs.is_some() && failed > 0 {
        anyhow::bail!("{failed} of {done} run(s) failed");
    }
    Ok(())
}
