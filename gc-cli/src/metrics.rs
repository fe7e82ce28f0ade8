//! Prometheus metrics of a run, and where they go: a Pushgateway (a CronJob does not live long
//! enough to be scraped), a text file for node-exporter's textfile collector; and an alert to a
//! webhook in Slack's incoming-webhook format when a run fails (optionally after every live run).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use anyhow::Context;
use clap::Args;
use gc_core::apply::{Outcome, TargetResult};
use gc_core::plan::{Decision, PodPlan};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Where metrics and alerts go.
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct MetricsArgs {
    /// Push the run's metrics to this Pushgateway (`http://host:9091`).
    #[arg(long, env = "GC_PUSHGATEWAY", value_name = "URL")]
    pushgateway: Option<String>,
    /// Write the run's metrics to this file (text format, written atomically).
    #[arg(long, env = "GC_METRICS_FILE", value_name = "FILE")]
    metrics_file: Option<PathBuf>,
    /// Prefix of every metric name (`streamspace` fits StreamSpace's alert rules).
    #[arg(
        long,
        env = "GC_METRICS_PREFIX",
        default_value = "gc",
        value_name = "PREFIX"
    )]
    metrics_prefix: String,
    /// Post an alert to this webhook (Slack incoming-webhook format) when a run fails.
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
}

impl MetricsArgs {
    pub(crate) fn metrics_prefix(&self) -> String {
        self.metrics_prefix.clone()
    }

    /// Writes the metrics to `path` (as `--metrics-file` does).
    pub(crate) fn set_file(&mut self, path: PathBuf) {
        self.metrics_file = Some(path);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Object {
    collector: String,
    kind: String,
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Stage {
    collector: String,
    namespace: String,
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Run {
    collector: String,
    namespace: String,
}

/// The metrics of one run.
pub(crate) struct RunMetrics {
    registry: Registry,
    collector: String,
    namespace: String,
    scanned: Family<Object, Counter>,
    eligible: Family<Object, Counter>,
    held: Family<Object, Counter>,
    deferred: Family<Object, Counter>,
    deleted: Family<Object, Counter>,
    fences_lost: Family<Stage, Counter>,
    errors: Family<Stage, Counter>,
    archive_bytes: Family<Run, Counter>,
    duration: Family<Run, Gauge<f64, AtomicU64>>,
    last_success: Family<Run, Gauge<f64, AtomicU64>>,
}

impl RunMetrics {
    pub(crate) fn new(prefix: &str, collector: &str, namespace: &str) -> Self {
        let mut registry = Registry::with_prefix(prefix);
        let m = Self {
            registry: Registry::default(),
            collector: collector.into(),
            namespace: namespace.into(),
            scanned: Family::default(),
            eligible: Family::default(),
            held: Family::default(),
            deferred: Family::default(),
            deleted: Family::default(),
            fences_lost: Family::default(),
            errors: Family::default(),
            archive_bytes: Family::default(),
            duration: Family::default(),
            last_success: Family::default(),
        };
        registry.register("objects_scanned", "Objects looked at", m.scanned.clone());
        registry.register(
            "objects_eligible",
            "Objects eligible or orphaned",
            m.eligible.clone(),
        );
        registry.register(
            "objects_held",
            "Eligible objects held by retention or grace",
            m.held.clone(),
        );
        registry.register(
            "objects_deferred",
            "Due objects deferred by the per-run cap",
            m.deferred.clone(),
        );
        registry.register(
            "objects_deleted",
            "Objects deleted (archived first where required)",
            m.deleted.clone(),
        );
        registry.register(
            "fences_lost",
            "Writes refused because the object changed (409/422)",
            m.fences_lost.clone(),
        );
        registry.register("errors", "Errors by stage", m.errors.clone());
        registry.register(
            "archive_bytes",
            "Bytes of diagnostic archives written",
            m.archive_bytes.clone(),
        );
        registry.register(
            "run_duration_seconds",
            "Duration of the last run",
            m.duration.clone(),
        );
        registry.register(
            "last_success_timestamp_seconds",
            "When a run last succeeded",
            m.last_success.clone(),
        );
        Self { registry, ..m }
    }

    fn object(&self, kind: &str) -> Object {
        Object {
            collector: self.collector.clone(),
            kind: kind.into(),
            namespace: self.namespace.clone(),
        }
    }

    fn run(&self) -> Run {
        Run {
            collector: self.collector.clone(),
            namespace: self.namespace.clone(),
        }
    }

    /// Counts a failed-Pod plan.
    pub(crate) fn plan(&self, plan: &PodPlan) {
        let eligible = plan
            .decisions
            .iter()
            .filter(|d| !matches!(d.decision, Decision::NotEligible { .. }))
            .count();
        let n = |v: usize| v as u64;
        self.objects(
            "Pod",
            n(plan.decisions.len()),
            n(eligible),
            n(plan.held),
            n(plan.deferred),
            0,
        );
    }

    /// Counts the results of an apply.
    pub(crate) fn results(&self, results: &[TargetResult]) {
        let pod = self.object("Pod");
        for r in results {
            match &r.outcome {
                Outcome::Collected { bytes, .. } => {
                    self.deleted.get_or_create(&pod).inc();
                    self.archive_bytes
                        .get_or_create(&self.run())
                        .inc_by(*bytes as u64);
                }
                Outcome::Changed { step, .. } => {
                    self.stage(&self.fences_lost, &format!("{step:?}"))
                }
                Outcome::Failed { step, .. } => self.error(&format!("{step:?}")),
                Outcome::WouldCollect { .. } | Outcome::Skipped { .. } => {}
            }
        }
    }

    /// Counts objects of `kind` by decision (for collectors other than the Pod one).
    pub(crate) fn objects(
        &self,
        kind: &str,
        scanned: u64,
        eligible: u64,
        held: u64,
        deferred: u64,
        deleted: u64,
    ) {
        let o = self.object(kind);
        self.scanned.get_or_create(&o).inc_by(scanned);
        self.eligible.get_or_create(&o).inc_by(eligible);
        self.held.get_or_create(&o).inc_by(held);
        self.deferred.get_or_create(&o).inc_by(deferred);
        self.deleted.get_or_create(&o).inc_by(deleted);
    }

    fn stage(&self, family: &Family<Stage, Counter>, stage: &str) {
        let label = Stage {
            collector: self.collector.clone(),
            namespace: self.namespace.clone(),
            stage: stage.into(),
        };
        family.get_or_create(&label).inc();
    }

    /// Counts an error at `stage`.
    pub(crate) fn error(&self, stage: &str) {
        self.stage(&self.errors, stage);
    }

    /// Records the run's end.
    pub(crate) fn finish(&self, seconds: f64, success_at: Option<f64>) {
        self.duration.get_or_create(&self.run()).set(seconds);
        if let Some(at) = success_at {
            self.last_success.get_or_create(&self.run()).set(at);
        }
    }

    /// The text exposition of the metrics.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Sends the metrics and, when asked, an alert. Delivery problems are reported, never fatal
    /// to the run's own outcome.
    pub(crate) fn deliver(&self, args: &MetricsArgs, failure: Option<&str>, summary: &str) {
        if let Err(e) = self.try_deliver(args, failure, summary) {
            eprintln!("gc-cli: warning: {e:#}");
        }
    }

    fn try_deliver(
        &self,
        args: &MetricsArgs,
        failure: Option<&str>,
        summary: &str,
    ) -> anyhow::Result<()> {
        let text = self.text();
        if let Some(path) = &args.metrics_file {
            crate::plan_pods::write_file(path, &text)?;
        }
        if let Some(url) = &args.pushgateway {
            let url = format!(
                "{}/metrics/job/gc/collector/{}/namespace/{}",
                url.trim_end_matches('/'),
                self.collector,
                self.namespace
            );
            ureq::put(&url)
                .header("Content-Type", "text/plain; version=0.0.4")
                .send(text.as_bytes())
                .with_context(|| format!("cannot push metrics to {}", redact(&url)))?;
        }
        if let Some(hook) = &args.alert_webhook {
            let text = match failure {
                Some(why) => Some(format!(
                    ":rotating_light: gc {} collector failed in namespace {}: {why}. Inspect collector-pinned objects before retrying.",
                    self.collector, self.namespace
                )),
                None if args.alert_on_success => Some(format!(
                    "gc {} collector in namespace {}: {summary}",
                    self.collector, self.namespace
                )),
                None => None,
            };
            if let Some(text) = text {
                ureq::post(hook)
                    .send_json(serde_json::json!({ "text": text }))
                    .context("cannot post the alert to the webhook")?;
            }
        }
        Ok(())
    }
}

/// A URL without credentials, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_prefixed_and_labelled() {
        let m = RunMetrics::new("streamspace", "sessions", "ns1");
        m.objects("Deployment", 10, 3, 1, 0, 2);
        m.error("Delete");
        m.finish(1.5, Some(1_795_953_600.0));
        let text = m.text();
        assert!(text.contains(r#"streamspace_objects_deleted_total{collector="sessions",kind="Deployment",namespace="ns1"} 2"#), "{text}");
        assert!(
            text.contains(
                r#"streamspace_errors_total{collector="sessions",namespace="ns1",stage="Delete"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("streamspace_last_success_timestamp_seconds"),
            "{text}"
        );
        assert_eq!(redact("https://user:pw@host/x"), "https://***@host/x");
    }
}
