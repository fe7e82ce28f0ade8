//! Prometheus metrics of a run, and where they go: a Pushgateway (a CronJob does not live long
//! enough to be scraped), a text file for node-exporter's textfile collector; and an alert to a
//! webhook in Slack's incoming-webhook format when a run fails (optionally after every live run).
//!
//! Every HTTP call gives up after [`HTTP_TIMEOUT`], so a stalled endpoint never hangs a Job or
//! the `serve` loop. A webhook URL's path is its secret: no message ever shows it.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

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
    /// Push the run's metrics to this Pushgateway (`http://host:9091`). The push gives up after
    /// 10 seconds (connecting included) and is reported, never fatal.
    #[arg(long, env = "GC_PUSHGATEWAY", value_name = "URL")]
    pushgateway: Option<String>,
    /// Write the run's metrics to this file (text format, written atomically, mode 0600).
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
}

impl MetricsArgs {
    pub(crate) fn metrics_prefix(&self) -> String {
        self.metrics_prefix.clone()
    }

    /// These flags without `--metrics-file`: a run over several namespaces delivers each
    /// namespace's metrics with them, then writes the file once with [`Self::write_merged`].
    pub(crate) fn without_file(&self) -> Self {
        Self {
            metrics_file: None,
            ..self.clone()
        }
    }

    /// Writes the expositions of several namespaces' runs as one to `--metrics-file`, if given.
    pub(crate) fn write_merged(&self, texts: &[String]) {
        if let Err(e) = write_metrics_file(self, &merge(texts)) {
            eprintln!("gc-cli: warning: {e:#}");
        }
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

/// How long one Pushgateway or webhook call may take in all, connecting included.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// How the webhook is named in messages: by its flag and variable, never by its URL.
const WEBHOOK: &str = "the webhook (--alert-webhook or $GC_ALERT_WEBHOOK)";

/// The metrics of one run.
#[derive(Default)]
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
            collector: collector.into(),
            namespace: namespace.into(),
            ..Self::default()
        };
        // Registered in this order, so exposed in this order.
        for (name, help, family) in [
            ("objects_scanned", "Objects looked at", &m.scanned),
            (
                "objects_eligible",
                "Objects eligible or orphaned",
                &m.eligible,
            ),
            (
                "objects_held",
                "Eligible objects held by retention or grace",
                &m.held,
            ),
            (
                "objects_deferred",
                "Due objects deferred by the per-run cap",
                &m.deferred,
            ),
            (
                "objects_deleted",
                "Objects deleted (archived first where required)",
                &m.deleted,
            ),
        ] {
            registry.register(name, help, family.clone());
        }
        for (name, help, family) in [
            (
                "fences_lost",
                "Writes refused because the object changed (409/422)",
                &m.fences_lost,
            ),
            ("errors", "Errors by stage", &m.errors),
        ] {
            registry.register(name, help, family.clone());
        }
        registry.register(
            "archive_bytes",
            "Bytes of diagnostic archives written",
            m.archive_bytes.clone(),
        );
        for (name, help, family) in [
            (
                "run_duration_seconds",
                "Duration of the last run",
                &m.duration,
            ),
            (
                "last_success_timestamp_seconds",
                "When a run last succeeded",
                &m.last_success,
            ),
        ] {
            registry.register(name, help, family.clone());
        }
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
                Outcome::TooLarge { .. } => self.error("TooLarge"),
                Outcome::WouldCollect { .. }
                | Outcome::Skipped { .. }
                | Outcome::Released { .. } => {}
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
    /// to the run's own outcome; each way is tried whatever the others did (a stalled
    /// Pushgateway does not swallow the alert).
    pub(crate) fn deliver(&self, args: &MetricsArgs, failure: Option<&str>, summary: &str) {
        let text = self.text();
        let results = [
            write_metrics_file(args, &text),
            self.push(args, &text),
            self.alert(args, failure, summary),
        ];
        for e in results.into_iter().filter_map(Result::err) {
            eprintln!("gc-cli: warning: {e:#}");
        }
    }

    fn push(&self, args: &MetricsArgs, text: &str) -> anyhow::Result<()> {
        let Some(gateway) = args.pushgateway.as_deref().filter(|u| !u.is_empty()) else {
            return Ok(());
        };
        let url = format!(
            "{}/metrics/job/gc/collector/{}/namespace/{}",
            gateway.trim_end_matches('/'),
            self.collector,
            self.namespace
        );
        let fail = |why: String| anyhow::anyhow!("cannot push metrics to {}: {why}", redact(&url));
        endpoint(&url).map_err(|why| fail(format!("the URL {why}")))?;
        agent()
            .put(&url)
            .header("Content-Type", "text/plain; version=0.0.4")
            .send(text.as_bytes())
            .map_err(|e| fail(describe(&e)))?;
        Ok(())
    }

    fn alert(
        &self,
        args: &MetricsArgs,
        failure: Option<&str>,
        summary: &str,
    ) -> anyhow::Result<()> {
        let Some(hook) = args.alert_webhook.as_deref().filter(|u| !u.is_empty()) else {
            return Ok(());
        };
        // Checked on every run, so a wrong URL is found before the failure it should report.
        let shown = endpoint(hook).map_err(|why| {
            anyhow::anyhow!(
                "cannot post alerts to {WEBHOOK}: its URL {why} (the URL is not shown: its \
                 path is the webhook's secret)"
            )
        })?;
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
            agent()
                .post(hook)
                .send_json(serde_json::json!({ "text": text }))
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot post the alert to {WEBHOOK} at {shown} (path not shown): {}",
                        describe(&e)
                    )
                })?;
        }
        Ok(())
    }
}

/// One exposition of several, each family's samples together (the text format wants every
/// family in one group): the families in the order of the first text, then the others' new ones.
pub(crate) fn merge(texts: &[String]) -> String {
    let mut families: Vec<(String, Vec<&str>, Vec<&str>)> = Vec::new();
    for text in texts {
        let mut current: Option<usize> = None;
        for line in text.lines() {
            if line == "# EOF" {
                continue;
            }
            if let Some(rest) = line
                .strip_prefix("# HELP ")
                .or(line.strip_prefix("# TYPE "))
            {
                let name = rest.split(' ').next().unwrap_or_default();
                let at = match families.iter().position(|(n, _, _)| n == name) {
                    Some(at) => at,
                    None => {
                        families.push((name.to_owned(), Vec::new(), Vec::new()));
                        families.len() - 1
                    }
                };
                if !families[at].1.contains(&line) {
                    families[at].1.push(line);
                }
                current = Some(at);
            } else if line.starts_with('#') {
                if let Some(at) = current.filter(|at| !families[*at].1.contains(&line)) {
                    families[at].1.push(line);
                }
            } else if let Some(at) = current {
                families[at].2.push(line);
            }
        }
    }
    let mut out = String::new();
    for (_, header, samples) in families {
        for line in header.into_iter().chain(samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

fn write_metrics_file(args: &MetricsArgs, text: &str) -> anyhow::Result<()> {
    match &args.metrics_file {
        Some(path) => crate::files::write_file(path, text),
        None => Ok(()),
    }
}

/// An HTTP agent whose every call gives up after [`HTTP_TIMEOUT`].
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(HTTP_TIMEOUT))
        .timeout_global(Some(HTTP_TIMEOUT))
        .build()
        .into()
}

/// `scheme://host[:port]` of an `http` or `https` URL, for messages; otherwise what is wrong
/// with it (never the URL itself).
fn endpoint(url: &str) -> Result<String, &'static str> {
    let Some((scheme, _)) = url.split_once("://") else {
        return Err("has no scheme (it must start with https:// or http://)");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err("has a scheme other than https:// or http://");
    }
    let uri: ureq::http::Uri = url.parse().map_err(|_| "is not a valid URL")?;
    let host = uri.host().filter(|h| !h.is_empty()).ok_or("has no host")?;
    let scheme = scheme.to_ascii_lowercase();
    Ok(match uri.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

/// What went wrong with a call, without anything of its URL (some of ureq's messages quote it).
fn describe(e: &ureq::Error) -> String {
    use ureq::Error as E;
    match e {
        E::StatusCode(code) => format!("the server answered HTTP status {code}"),
        E::Timeout(_) => format!(
            "no answer within {} seconds (timed out)",
            HTTP_TIMEOUT.as_secs()
        ),
        E::Io(io) => format!("I/O error: {}", io.kind()),
        E::HostNotFound => "host not found".into(),
        E::ConnectionFailed => "connection failed".into(),
        E::TooManyRedirects | E::RedirectFailed => "redirect failed".into(),
        E::Tls(_) | E::Rustls(_) | E::Pem(_) | E::TlsRequired => format!("TLS: {e}"),
        _ => "the request failed (details not shown: they may quote the URL)".into(),
    }
}

/// A URL without credentials (`user:password@` of its authority, with or without a scheme), for
/// messages.
fn redact(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..start], &url[start + at..]),
        None => url.to_owned(),
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
        assert_eq!(redact("user:pw@host:9091/m"), "***@host:9091/m");
        assert_eq!(redact("http://host/a@b"), "http://host/a@b");
    }

    #[test]
    fn several_namespaces_merge_into_one_exposition_with_each_family_once() {
        let texts: Vec<String> = ["a", "b"]
            .iter()
            .map(|ns| {
                let m = RunMetrics::new("gc", "pods", ns);
                m.objects("Pod", 2, 1, 0, 0, 1);
                m.finish(0.5, Some(1.0));
                m.text()
            })
            .collect();
        let merged = merge(&texts);
        for family in ["gc_objects_deleted", "gc_run_duration_seconds"] {
            let types = format!("# TYPE {family} ");
            assert_eq!(merged.matches(&types).count(), 1, "{merged}");
        }
        let lines: Vec<&str> = merged.lines().collect();
        let deleted: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.starts_with("gc_objects_deleted_total{"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(deleted.len(), 2, "{merged}");
        assert_eq!(deleted[1], deleted[0] + 1, "one group: {merged}");
        assert!(merged.contains(r#"namespace="a""#) && merged.contains(r#"namespace="b""#));
        assert_eq!(merged.matches("# EOF").count(), 1);
        assert!(merged.ends_with("# EOF\n"));
    }

    #[test]
    fn endpoints_are_shown_without_path_or_credentials() {
        assert_eq!(
            endpoint("https://hooks.slack.com/services/T0/B0/secret"),
            Ok("https://hooks.slack.com".into())
        );
        assert_eq!(
            endpoint("HTTP://u:p@127.0.0.1:9091/x"),
            Ok("http://127.0.0.1:9091".into())
        );
        for bad in [
            "hooks.slack.com/services/T0/B0/secret",
            "ftp://hooks.slack.com/secret",
            "https:///secret",
            "https://hooks slack/secret",
        ] {
            let why = endpoint(bad).unwrap_err();
            assert!(!why.contains("secret"), "{bad}: {why}");
        }
    }
}
