//! The admin HTTP server: `/metrics` (OpenMetrics for a client that accepts it, else the text
//! format 0.0.4) and `/healthz` (503 once a run has stalled).

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::oneshot;

use super::Health;
use crate::metrics::{OPENMETRICS, Served, TEXT_FORMAT, text_format};

/// How long the server may take to finish the requests in progress once asked to stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// What the HTTP server shows: the metrics, and whether the process is healthy.
struct App {
    served: Arc<Served>,
    health: Arc<Health>,
}

/// The HTTP server, on a thread and a tokio runtime of its own (each run builds its own).
pub struct AdminServer {
    shutdown: oneshot::Sender<()>,
    finished: mpsc::Receiver<crate::Result<()>>,
}

impl AdminServer {
    /// Serves `served` and `health` on `listener`, on a thread and a runtime of its own (so that
    /// it answers whatever the runs do with theirs).
    ///
    /// # Errors
    /// When the socket, the runtime or the thread cannot be set up.
    pub fn start(
        listener: TcpListener,
        served: Arc<Served>,
        health: Arc<Health>,
    ) -> crate::Result<Self> {
        let app = Arc::new(App { served, health });
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
    pub fn stop(self) {
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
