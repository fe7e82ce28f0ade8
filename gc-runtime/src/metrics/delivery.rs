//! Where a run's metrics and alerts go ([`Delivery`]).

use std::path::PathBuf;
use std::sync::Arc;

use super::*;

/// Where a run's metrics and alerts go (the CLI's `--pushgateway`, `--metrics-file`,
/// `--metrics-prefix`, `--alert-webhook`, `--alert-on-success`). Its `Debug` shows the
/// Pushgateway URL as [`gc_core::shown::shown_url`] shows it.
#[derive(Clone)]
pub struct Delivery {
    /// Push each run's metrics to this Pushgateway (`http://host:9091`).
    pub pushgateway: Option<String>,
    /// Write each run's metrics to this file (text format, atomically, mode 0600).
    pub metrics_file: Option<PathBuf>,
    /// Prefix of every metric name ([`metric_prefix`] checks one).
    pub metrics_prefix: String,
    /// Post an alert to each of these webhooks, in its format, when a run fails; a URL's path
    /// is a secret no message shows.
    pub alert_webhooks: Vec<Webhook>,
    /// Also post a summary of every live run that deleted something.
    pub alert_on_success: bool,
    /// `serve`'s metrics in memory, which every run adds itself to.
    pub served: Option<Arc<Served>>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pushgateway = self.pushgateway.as_deref().map(|url| {
            gc_core::shown::shown_url(url).unwrap_or_else(|_| "(not shown: not a valid URL)".into())
        });
        f.debug_struct("Delivery")
            .field("pushgateway", &pushgateway)
            .field("metrics_file", &self.metrics_file)
            .field("metrics_prefix", &self.metrics_prefix)
            .field("alert_webhooks", &self.alert_webhooks)
            .field("alert_on_success", &self.alert_on_success)
            .field("served", &self.served.is_some())
            .finish()
    }
}

impl Default for Delivery {
    fn default() -> Self {
        Self {
            pushgateway: None,
            metrics_file: None,
            metrics_prefix: "gc".into(),
            alert_webhooks: Vec::new(),
            alert_on_success: false,
            served: None,
        }
    }
}

/// A metric name prefix: the start of a Prometheus metric name (without the `:` that recording
/// rules keep for themselves), so that every name a run writes is one Prometheus accepts.
///
/// # Errors
/// What is wrong with `value`.
pub fn metric_prefix(value: &str) -> Result<String, String> {
    let mut chars = value.chars();
    let first = chars.next().ok_or("empty: a metric name needs a prefix")?;
    let fits = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if !(first.is_ascii_alphabetic() || first == '_') || !chars.all(fits) {
        return Err(format!(
            "{value:?} cannot start a Prometheus metric name: a letter or `_`, then letters, \
             digits and `_`"
        ));
    }
    Ok(value.to_owned())
}

impl Delivery {
    /// The flags each namespace's run of a run over `namespaces` delivers with: these, but
    /// without `--metrics-file` when there are several (the file is then written once, merged,
    /// by [`Self::write_merged`]).
    pub fn for_namespaces(&self, namespaces: usize) -> Self {
        let mut flags = self.clone();
        if namespaces > 1 {
            flags.metrics_file = None;
        }
        flags
    }

    /// Writes the expositions of several namespaces' runs as one to `--metrics-file`, if given.
    pub fn write_merged(&self, texts: &[String]) {
        if let Err(e) = write_metrics_file(self.file(), &merge(texts)) {
            tracing::warn!("{e:#}");
        }
    }

    /// `--metrics-file`, if given, and the prefix of the metrics in it.
    pub(super) fn file(&self) -> Option<(&std::path::Path, &str)> {
        let path = self.metrics_file.as_deref()?;
        Some((path, &self.metrics_prefix))
    }

    /// Every run delivered with these flags also adds itself to `served`.
    pub fn serve_into(&mut self, served: Arc<Served>) {
        self.served = Some(served);
    }

    /// A run of `collector` covers exactly `namespaces`: `serve` forgets the others it showed
    /// (a namespace deleted, or no longer matching `-A`'s selector).
    pub fn scope(&self, collector: &str, namespaces: &[String]) {
        if let Some(served) = &self.served {
            served.retain(collector, namespaces);
        }
    }

    /// Alerts the webhook, if given, that a run of `collector` failed before it knew any
    /// namespace to report on (with `-A`, when the cluster cannot be asked which): no metrics,
    /// which are labelled by namespace, only the alert. Problems are reported, never fatal.
    pub async fn alert_unscoped(&self, collector: &str, why: &str) {
        let alert = Alert {
            collector: collector.to_owned(),
            namespace: None,
            error: Some(why.to_owned()),
            counts: serde_json::json!({
                "scanned": 0, "eligible": 0, "held": 0, "deferred": 0, "deleted": 0,
                "errors": 1, "fencesLost": 0, "archiveBytes": 0,
            }),
            run_id: format!("{collector}-{}", (crate::clock::now() * 1e6) as u64),
            text: failed(collector, "before it knew its namespaces (-A)", why),
        };
        let hooks = self.alert_webhooks.clone();
        let posted = tokio::task::spawn_blocking(move || alerts::post_alerts(&hooks, Some(&alert)));
        match posted.await {
            Ok(problems) => problems.iter().for_each(|e| tracing::warn!("{e:#}")),
            Err(e) => tracing::warn!("cannot post the alert: {e}"),
        }
    }
}
