//! Where a run's metrics and alerts go (`gc_runtime::metrics` delivers them).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use gc_runtime::metrics::{AlertFormat, Delivery, Served, Webhook, metric_prefix};

use crate::exit::UsageError;

/// Where metrics and alerts go.
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct MetricsArgs {
    /// Push the run's metrics to this Pushgateway (`http://host:9091`). The push gives up after
    /// 10 seconds (connecting included) and is reported, never fatal.
    #[arg(
        long,
        env = "GC_PUSHGATEWAY",
        hide_env_values = true,
        value_name = "URL"
    )]
    pushgateway: Option<String>,
    /// Write the run's metrics to this file (text format, written atomically, mode 0600).
    #[arg(long, env = "GC_METRICS_FILE", value_name = "FILE")]
    metrics_file: Option<PathBuf>,
    /// Prefix of every metric name (`streamspace` fits StreamSpace's alert rules): a letter or
    /// `_`, then letters, digits and `_`.
    #[arg(
        long,
        env = "GC_METRICS_PREFIX",
        default_value = "gc",
        value_name = "PREFIX",
        value_parser = metric_prefix
    )]
    metrics_prefix: String,
    /// Post an alert to this webhook when a run fails; repeat for several. `teams=URL`,
    /// `adaptive=URL` or `json=URL` gives one its own format, else `--alert-format`'s. Each post gives up after
    /// 10 seconds (connecting included) and is reported, never fatal; messages show only the
    /// scheme and host, never the URL (its path is the webhook's secret).
    #[arg(
        long,
        env = "GC_ALERT_WEBHOOK",
        hide_env_values = true,
        value_name = "[FORMAT=]URL"
    )]
    alert_webhook: Vec<String>,
    /// The body of an alert: `slack` (Slack's incoming webhook, `{"text": ...}`; Mattermost and
    /// Rocket.Chat take it too), `teams` (a Microsoft Teams message card, for an Office 365
    /// connector URL), `adaptive` (a message with an Adaptive Card, for a Teams Workflows URL) or
    /// `json` (`{collector, namespace, outcome, counts, error, runId, text}`).
    #[arg(
        long,
        env = "GC_ALERT_FORMAT",
        default_value = "slack",
        value_name = "slack|teams|adaptive|json",
        value_parser = AlertFormat::parse
    )]
    alert_format: AlertFormat,
    /// Also post a summary of every live run that deleted something.
    #[arg(long)]
    alert_on_success: bool,
    /// `serve`'s metrics in memory, which every run adds itself to.
    #[arg(skip)]
    served: Option<Arc<Served>>,
}

impl MetricsArgs {
    /// The delivery these flags describe.
    ///
    /// # Errors
    /// A [`UsageError`] naming `--alert-webhook` (never its URL: clap would echo a value it
    /// refuses) when a `FORMAT=` prefix names no format.
    pub(crate) fn delivery(&self) -> Result<Delivery, UsageError> {
        Ok(Delivery {
            pushgateway: self.pushgateway.clone(),
            metrics_file: self.metrics_file.clone(),
            metrics_prefix: self.metrics_prefix.clone(),
            alert_webhooks: self.webhooks()?,
            alert_on_success: self.alert_on_success,
            served: self.served.clone(),
        })
    }

    /// The webhooks, each in its format.
    fn webhooks(&self) -> Result<Vec<Webhook>, UsageError> {
        self.alert_webhook
            .iter()
            .map(|text| {
                Webhook::parse(text, self.alert_format).map_err(|why| {
                    UsageError::new(format!(
                        "invalid --alert-webhook or $GC_ALERT_WEBHOOK: {why} (the URL is not \
                         shown: its path is the webhook's secret)"
                    ))
                })
            })
            .collect()
    }

    /// Every run delivered with these flags also adds itself to `served`.
    pub(crate) fn serve_into(&mut self, served: Arc<Served>) {
        self.served = Some(served);
    }

    /// The prefix of every metric name.
    pub(crate) fn metrics_prefix(&self) -> &str {
        &self.metrics_prefix
    }
}
