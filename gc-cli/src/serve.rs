//! `gc-cli serve`: a long-running collector. Runs `run pods` or `run sessions` every interval
//! through the same code path as the one-shot commands, and serves its metrics from memory on
//! `/metrics` for Prometheus to scrape: each collector and namespace's last run, and counters
//! adding up every run since the process started. `/healthz` answers while the process lives.
//!
//! SIGTERM or SIGINT: the run in progress writes nothing more and releases its lock, no other run
//! starts (a sleep between runs ends at once), the server stops and the process exits 0.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use clap::Args;
use tokio::sync::oneshot;

use crate::metrics::{OPENMETRICS, Served, TEXT_FORMAT, text_format};
use crate::run::RunCommand;
use crate::signals;

/// `gc-cli serve`
#[derive(Debug, Args)]
pub(crate) struct Serve {
    /// Address to serve `/metrics` on.
    #[arg(long, default_value = "0.0.0.0:9898", value_name = "ADDR")]
    listen: SocketAddr,
    /// Seconds between runs.
    #[arg(long, default_value_t = 21_600, value_name = "SECONDS")]
    interval_seconds: u64,
    /// Stop after this many runs (default: never).
    #[arg(long, value_name = "N")]
    runs: Option<u64>,
    /// The collector to run, with its flags.
    #[command(subcommand)]
    run: RunCommand,
}

/// How long the server may take to finish the requests in progress once asked to stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

pub(crate) fn serve(mut args: Serve) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let shown = listener.local_addr().unwrap_or(args.listen);
    let metrics = args.run.metrics_mut();
    let served = Arc::new(Served::new(&metrics.metrics_prefix()));
    metrics.serve_into(Arc::clone(&served));
    signals::install()?;
    let server = Server::start(listener, served)?;
    tracing::info!("serving /metrics on {shown}");
    let done = schedule(&args);
    if let Some(signal) = signals::received() {
        tracing::info!("{signal} received: exiting after {done} run(s)");
    }
    server.stop();
    Ok(())
}

/// Runs the collector every interval until `--runs` runs are done or a signal asks the process
/// to stop; how many runs started.
fn schedule(args: &Serve) -> u64 {
    let interval = Duration::from_secs(args.interval_seconds);
    let mut done = 0;
    while signals::received().is_none() {
        done += 1;
        tracing::info!("run {done} starting");
        if let Err(error) = args.run.run() {
            tracing::error!("run failed: {error:#}");
        }
        if args.runs.is_some_and(|n| done >= n) || !signals::sleep(interval) {
            break;
        }
    }
    done
}

/// The HTTP server, on a thread and a tokio runtime of its own (each run builds its own).
struct Server {
    shutdown: oneshot::Sender<()>,
    finished: mpsc::Receiver<anyhow::Result<()>>,
}

impl Server {
    fn start(listener: TcpListener, served: Arc<Served>) -> anyhow::Result<Self> {
        listener
            .set_nonblocking(true)
            .context("cannot set up the listening socket")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the HTTP server's runtime")?;
        let (shutdown, stop) = oneshot::channel::<()>();
        let (finish, finished) = mpsc::channel();
        std::thread::Builder::new()
            .name("gc-serve-http".into())
            .spawn(move || {
                let result = runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .context("cannot serve on the listening socket")?;
                    axum::serve(listener, router(served))
                        .with_graceful_shutdown(async {
                            let _ = stop.await;
                        })
                        .await
                        .context("the HTTP server failed")
                });
                let _ = finish.send(result);
            })
            .context("cannot start the HTTP server's thread")?;
        Ok(Self { shutdown, finished })
    }

    /// Stops accepting connections and waits for the requests in progress, at most
    /// [`SHUTDOWN_WAIT`].
    fn stop(self) {
        let _ = self.shutdown.send(());
        match self.finished.recv_timeout(SHUTDOWN_WAIT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("{e:#}"),
            Err(_) => tracing::warn!(
                "the HTTP server did not stop within {}s; exiting anyway",
                SHUTDOWN_WAIT.as_secs()
            ),
        }
    }
}

/// `/metrics`, `/healthz`, and 404 for anything else.
fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .with_state(served)
}

/// OpenMetrics for a client that accepts it (Prometheus does), else the text format 0.0.4.
async fn metrics(State(served): State<Arc<Served>>, headers: HeaderMap) -> impl IntoResponse {
    let text = served.text();
    if accepts_openmetrics(&headers) {
        ([(CONTENT_TYPE, OPENMETRICS)], text)
    } else {
        ([(CONTENT_TYPE, TEXT_FORMAT)], text_format(&text))
    }
}

fn accepts_openmetrics(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"))
}

/// Ready once listening; alive while the process is.
async fn healthz() -> &'static str {
    "ok\n"
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_openmetrics_only_for_a_client_that_accepts_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                          version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, openmetrics) in [
            (Some(prometheus), true),
            (Some("text/plain"), false),
            (Some("*/*"), false),
            (None, false),
        ] {
            let mut headers = HeaderMap::new();
            if let Some(accept) = accept {
                headers.insert(ACCEPT, accept.parse().unwrap());
            }
            assert_eq!(accepts_openmetrics(&headers), openmetrics, "{accept:?}");
        }
    }
}
