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
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use gc_runtime::metrics::Served;
use gc_runtime::requests::RequestOptions;
use gc_runtime::serve::api::ApiOptions;
use gc_runtime::serve::tls::{TlsFiles, server_config};
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
    /// Also serve the request API (`/v1/...`: a caller's plans and collections of some sessions,
    /// each caller checked with the API server) on this address (a loopback one without TLS);
    /// `serve sessions` only.
    #[arg(long, value_name = "ADDR")]
    api_listen: Option<SocketAddr>,
    /// Serve it over TLS with this certificate chain (PEM, `tls.crt` of a TLS Secret), on any
    /// address; read again when it changes.
    #[arg(long, value_name = "FILE", requires = "api_tls_key")]
    api_tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM, `tls.key`).
    #[arg(long, value_name = "FILE", requires = "api_tls_cert")]
    api_tls_key: Option<PathBuf>,
    /// The audience a caller's ServiceAccount token must be projected for.
    #[arg(long, default_value = "gc", value_name = "AUDIENCE")]
    api_audience: String,
    /// Offer restores through the API, done as this ServiceAccount (`NAMESPACE/NAME`, the
    /// chart's restore account) with a short-lived token gc asks for: gc's own account needs
    /// `create` on `serviceaccounts/token` for it, and no right to create.
    #[arg(long, value_name = "NAMESPACE/NAME", requires = "api_listen",
        value_parser = gc_runtime::serve::api::parse_account)]
    api_restore_account: Option<(String, String)>,
    /// The grace period of a requested collection, from each resource's creation.
    #[arg(long = "request-grace", default_value = "5m", value_name = "DURATION",
        value_parser = |s: &str| gc_runtime::durations::seconds_within(s, 0..=u64::from(u32::MAX)))]
    request_grace_seconds: u64,
    /// The collector to run, with its flags.
    #[command(subcommand)]
    run: RunCommand,
}

pub(crate) fn serve(mut args: Serve) -> anyhow::Result<()> {
    // Flags no run could pass end the process now (exit 2) rather than fail every round.
    args.run.check()?;
    if args.api_listen.is_some() && !matches!(args.run, RunCommand::Sessions(_)) {
        let why = "--api-listen serves the session collector: `serve --api-listen ADDR sessions`";
        return Err(crate::exit::UsageError::new(why).into());
    }
    let tls = match (&args.api_tls_cert, &args.api_tls_key) {
        (Some(cert), Some(key)) => Some(server_config(&TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        })?),
        _ => None,
    };
    let check = |listen| gc_runtime::serve::api::check_address(listen, tls.is_some());
    args.api_listen.map(check).transpose()?;
    let bind = |at| TcpListener::bind(at).with_context(|| format!("cannot listen on {at}"));
    let api_listener = args.api_listen.map(bind).transpose()?;
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let shown = listener.local_addr().unwrap_or(args.listen);
    let metrics = args.run.metrics_mut();
    let served = Arc::new(Served::new(metrics.metrics_prefix()));
    metrics.serve_into(Arc::clone(&served));
    signals::install()?;
    let stall = (args.stall_seconds > 0).then(|| Duration::from_secs(args.stall_seconds));
    let health = Arc::new(Health::new(stall).shown_as(gc_output::options::shown));
    let server = AdminServer::start(listener, Arc::clone(&served), Arc::clone(&health))?;
    tracing::info!("serving /metrics on {shown}");
    let interval = Duration::from_secs(args.interval_seconds);
    let rounds = every(interval, args.runs, &health, &*signals::STOP, || {
        args.run.run_async()
    });
    let api = async {
        let (RunCommand::Sessions(run), Some(listener)) = (&args.run, api_listener) else {
            return Ok(());
        };
        let grace = u32::try_from(args.request_grace_seconds).unwrap_or(u32::MAX);
        let requests = RequestOptions {
            grace_seconds: grace,
            ..RequestOptions::default()
        };
        let audience = args.api_audience.clone();
        let api = ApiOptions {
            audience,
            ..ApiOptions::default()
        };
        let restore = args.api_restore_account.clone();
        let parts = (api, requests, restore, served);
        crate::sessions::run::serve_api(run, listener, parts, tls).await
    };
    // The rounds end the process; the API (when served) ends it early only when it fails. After
    // a stop, it answers its calls and waits for what their callers left, in `finish_within`.
    let (done, failed) = crate::live::block_on(async {
        tokio::pin!(rounds, api);
        let (ended, api_ended) = tokio::select! {
            ended = &mut rounds => (ended, false),
            failed = &mut api => {
                failed?;
                (rounds.await, true)
            }
        };
        let within = RequestOptions::default().finish_within;
        if !api_ended
            && signals::received().is_some()
            && tokio::time::timeout(within, api).await.is_err()
        {
            tracing::warn!("the request API still at work after {within:?}: exiting");
        }
        Ok(ended)
    })?;
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
