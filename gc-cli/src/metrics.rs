//! Where a run's metrics and alerts go (`gc_runtime::metrics` delivers them).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use gc_runtime::metrics::{Delivery, Served, metric_prefix};

/// Where metrics and alerts go.
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct MetricsArgs {
    /// Push the run's metrics to this Pushgateway (`http://host:9091`). The push gives up after
    /// 10 seconds (connecting included) and is reported, never fatal.
    #[arg(long, env = "GC_PUSHGATEWAY", value_name = "URL")]
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
    /// Post an alert to this webhook (Slack incoming-webhook format) when a run fails. The post
    /// gives up after 10 seconds (connecting included) and is reported, never fatal; messages
    /// show only the scheme and host, never this URL (its path is the webhook's secret).
    #[arg(
        long,
        env = "GC_ALERT_WEBHOOK",
        hide_env_values = true,
        value_name = "URL"
    )]
    alert_webhook: Option<String>,
    /// Also post a summary of every live run that deleted something.
    #[arg(long)]
    alert_on_success: bool,
    /// `serve`'s metrics in memory, which every run adds itself to.
    #[arg(skip)]
    served: Option<Arc<Served>>,
}

impl MetricsArgs {
    /// The delivery these flags describe.
    pub(crate) fn delivery(&self) -> Delivery {
        Delivery {
            pushgateway: self.pushgateway.clone(),
            metrics_file: self.metrics_file.clone(),
            metrics_prefix: self.metrics_prefix.clone(),
            alert_webhook: self.alert_webhook.clone(),
            alert_on_success: self.alert_on_success,
            served: self.served.clone(),
        }
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
