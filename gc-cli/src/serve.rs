//! `gc-cli serve`: a long-running collector. Runs `run pods` or `run sessions` every interval
//! through the same code path as the one-shot commands, and serves its metrics from memory on
//! `/metrics` for Prometheus to scrape: each collector and namespace's last run, and counters
//! adding up every run since the process started. `/healthz` answers while the process lives,
//! and 503 once a run has lasted past `--stall-seconds`, so that a liveness probe restarts a
//! wedged process.
//!
//! SIGTERM or SIGINT: the run in progress writes nothing more and releases its lock (it is
//! reported stopped: neither a success nor a failure), no other run starts (a sleep between runs
//! ends at once), the server stops and the process exits 0.

use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

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
    /// Stop after this many runs (default: never); then exit 1 when any of them failed.
    #[arg(long, value_name = "N")]
    runs: Option<u64>,
    /// `/healthz` answers 503 once a run has lasted this long (waiting for its lock included), so
    /// that a liveness probe restarts a wedged process; 0: never. Give it more than
    /// `--lock-wait-seconds` and the longest run expected.
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    stall_seconds: u64,
    /// The collector to run, with its flags.
    #[command(subcommand)]
    run: RunCommand,
}

/// How long the server may take to finish the requests in progress once asked to stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

pub(crate) fn serve(mut args: Serve) -> anyhow::Result<()> {
    // Flags no run could pass end the process now (exit 2) rather than fail every round.
    args.run.check()?;
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let shown = listener.local_addr().unwrap_or(args.listen);
    let metrics = args.run.metrics_mut();
    let served = Arc::new(Served::new(&metrics.metrics_prefix()));
    metrics.serve_into(Arc::clone(&served));
    signals::install()?;
    let stall = (args.stall_seconds > 0).then(|| Duration::from_secs(args.stall_seconds));
    let app = Arc::new(App {
        served,
        health: Health::new(stall),
    });
    let server = Server::start(listener, Arc::clone(&app))?;
    tracing::info!("serving /metrics on {shown}");
    let (done, failed) = schedule(&args, &app.health);
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

/// Runs the collector every interval until `--runs` runs are done or a signal asks the process
/// to stop; how many runs started, and how many of them failed (a stopped run did not).
fn schedule(args: &Serve, health: &Health) -> (u64, u64) {
    let interval = Duration::from_secs(args.interval_seconds);
    let (mut done, mut failed) = (0, 0);
    while signals::received().is_none() {
        done += 1;
        tracing::info!("run {done} starting");
        health.started(done, Instant::now());
        let result = args.run.run();
        health.ended();
        if let Err(error) = result {
            if signals::stopped(&error) {
                tracing::info!("run stopped: {error:#}");
            } else {
                failed += 1;
                tracing::error!("run failed: {error:#}");
            }
        }
        if args.runs.is_some_and(|n| done >= n) || !signals::sleep(interval) {
            break;
        }
    }
    (done, failed)
}

/// What the HTTP server shows: the metrics, and whether the process is healthy.
struct App {
    served: Arc<Served>,
    health: Health,
}

/// The run in progress, to tell a wedged process from a busy one.
#[derive(Debug)]
struct Health {
    /// How long a run may last before the process counts as wedged; `None`: for ever.
    stall: Option<Duration>,
    /// The run in progress (its number) and when it started.
    running: Mutex<Option<(u64, Instant)>>,
}

impl Health {
    fn new(stall: Option<Duration>) -> Self {
        Self {
            stall,
            running: Mutex::new(None),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Option<(u64, Instant)>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `run` started `at`.
    fn started(&self, run: u64, at: Instant) {
        *self.running() = Some((run, at));
    }

    /// The run in progress ended.
    fn ended(&self) {
        *self.running() = None;
    }

    /// Why the process is not healthy at `now`: the run in progress has lasted past the stall
    /// deadline.
    fn stalled(&self, now: Instant) -> Option<String> {
        let stall = self.stall?;
        let (run, at) = (*self.running())?;
        let lasted = now.saturating_duration_since(at);
        (lasted > stall).then(|| {
            format!(
                "stalled: run {run} has lasted {}s, over --stall-seconds {}",
                lasted.as_secs(),
                stall.as_secs()
            )
        })
    }
}

/// The HTTP server, on a thread and a tokio runtime of its own (each run builds its own).
struct Server {
    shutdown: oneshot::Sender<()>,
    finished: mpsc::Receiver<anyhow::Result<()>>,
}

impl Server {
    fn start(listener: TcpListener, app: Arc<App>) -> anyhow::Result<Self> {
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
                    axum::serve(listener, router(app))
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
fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .with_state(app)
}

/// OpenMetrics for a client that accepts it (Prometheus does), else the text format 0.0.4.
async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> impl IntoResponse {
    let text = app.served.text();
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

/// Ready once listening; alive while the process is, unless a run has stalled (503).
async fn healthz(State(app): State<Arc<App>>) -> (StatusCode, String) {
    match app.health.stalled(Instant::now()) {
        None => (StatusCode::OK, "ok\n".into()),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_until_a_run_lasts_past_the_stall_deadline() {
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let health = Health::new(Some(Duration::from_secs(60)));
        assert_eq!(health.stalled(at(1000)), None, "no run in progress");
        health.started(3, start);
        assert_eq!(health.stalled(at(60)), None);
        assert_eq!(
            health.stalled(at(61)).as_deref(),
            Some("stalled: run 3 has lasted 61s, over --stall-seconds 60")
        );
        health.ended();
        assert_eq!(health.stalled(at(1000)), None);
        let never = Health::new(None);
        never.started(1, start);
        assert_eq!(never.stalled(at(1_000_000)), None);
    }

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
