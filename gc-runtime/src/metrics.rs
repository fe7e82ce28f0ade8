//! Prometheus metrics of a run, and where they go: a Pushgateway (a CronJob does not live long
//! enough to be scraped), a text file for node-exporter's textfile collector, `serve`'s
//! `/metrics`; and an alert to a webhook in Slack's incoming-webhook format when a run fails
//! (optionally after every live run).
//!
//! A run's metrics are gauges describing that run (`<prefix>_last_run_*`), the time of the
//! attempt and, on success only, the time of the success. The push is a `POST`, which replaces
//! only the families it carries in the group: every per-run family carries a sample for every
//! stage and kind the collector knows (zero when nothing happened), so a push replaces all of the
//! previous run's series, while `_last_success_timestamp_seconds`, which a failed run does not
//! carry, keeps the last success. A run stopped by a signal is neither a success nor a failure:
//! it carries neither that family nor `_last_run_success`, so both keep what the run before set,
//! and it alerts no one. The metrics file keeps them the same way. `serve` adds counters
//! (`_total`) that add up every run of the process.
//!
//! Every HTTP call gives up after [`HTTP_TIMEOUT`](http::HTTP_TIMEOUT), so a stalled endpoint
//! never hangs a Job or the `serve` loop. A webhook URL's path is its secret: no message ever
//! shows it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use gc_core::pods::apply::{Step, TargetOutcome, TargetResult};
use gc_core::pods::plan::{Decision, PodPlan};
use prometheus_client::encoding::EncodeLabelSet;

mod alerts;
mod delivery;
mod exposition;
mod http;
mod served;
mod text;

pub use alerts::{Alert, AlertFormat, Webhook};
pub use delivery::{Delivery, metric_prefix};
pub use exposition::ApiMetrics;
pub use served::Served;

use exposition::Exposition;
use exposition::LastRun;
use http::{agent, describe, endpoint};
use text::write_metrics_file;
pub use text::{merge, text_format};

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunResult {
    collector: String,
    namespace: String,
    result: &'static str,
}

/// The content type of OpenMetrics text, which prometheus-client writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of Prometheus' text format 0.0.4 (see [`text_format`]).
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The name (after the prefix) and help of each count of objects, in the order of [`Counts`].
const OBJECTS: [(&str, &str); 5] = [
    ("objects_scanned", "Objects looked at"),
    ("objects_eligible", "Objects eligible or orphaned"),
    (
        "objects_held",
        "Eligible objects held by retention or grace",
    ),
    (
        "objects_deferred",
        "Due objects deferred by the per-run cap",
    ),
    (
        "objects_deleted",
        "Objects deleted (archived first where required)",
    ),
];

/// Objects of one kind: scanned, eligible, held, deferred, deleted (as [`OBJECTS`]).
type Counts = [u64; 5];

/// The steps of the fenced apply, each a `stage` label of the failed-Pod collector.
const STEPS: [Step; 9] = [
    Step::Reread,
    Step::Pin,
    Step::Archive,
    Step::VerifyArchive,
    Step::Receipt,
    Step::Fence,
    Step::Delete,
    Step::Release,
    Step::VerifyGone,
];

/// The `stage` label of a step (a new step fails to compile here: add it to [`STEPS`] too).
fn step_name(step: Step) -> &'static str {
    match step {
        Step::Reread => "Reread",
        Step::Pin => "Pin",
        Step::Archive => "Archive",
        Step::VerifyArchive => "VerifyArchive",
        Step::Receipt => "Receipt",
        Step::Fence => "Fence",
        Step::Delete => "Delete",
        Step::Release => "Release",
        Step::VerifyGone => "VerifyGone",
    }
}

/// The stages of the failed-Pod collector that are not a step: the run as a whole, the archive
/// sink's probe, the store, recovery, the plan, a pin left at the end, an archive over the
/// ceiling, the run lock lost.
const POD_STAGES: [&str; 8] = [
    "run", "archive", "store", "recover", "plan", "PinLeft", "TooLarge", "lock",
];

/// How a run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
enum Ended {
    /// It failed (or has not ended yet).
    #[default]
    Failed,
    /// It succeeded, at this instant.
    Succeeded(f64),
    /// A signal stopped it before it finished: neither a success nor a failure.
    Stopped,
}

/// What one run of a collector in a namespace did: the values behind every metric.
#[derive(Debug, Clone, Default)]
struct Record {
    collector: String,
    namespace: String,
    objects: BTreeMap<String, Counts>,
    fences_lost: BTreeMap<String, u64>,
    errors: BTreeMap<String, u64>,
    archive_bytes: u64,
    duration: f64,
    attempt_at: f64,
    ended: Ended,
}

impl Record {
    /// A run that did nothing yet, with a zero for every kind and stage its collector reports
    /// on: each family then has a sample in every push, and the push replaces all of the
    /// previous run's series of that family.
    fn new(collector: &str, namespace: &str) -> Self {
        let (kinds, errors, fences): (Vec<String>, Vec<&str>, Vec<&str>) = match collector {
            "pods" => {
                let steps = STEPS.map(step_name);
                let mut errors = POD_STAGES.to_vec();
                errors.extend(steps);
                (vec!["Pod".into()], errors, steps.to_vec())
            }
            "sessions" => (
                gc_core::sessions::Kind::streamspace()
                    .into_iter()
                    .map(|k| k.kind)
                    .collect(),
                vec!["run", "delete"],
                vec!["delete"],
            ),
            _ => (Vec::new(), vec!["run"], vec!["run"]),
        };
        let zero = |stages: Vec<&str>| stages.into_iter().map(|s| (s.to_owned(), 0)).collect();
        Self {
            collector: collector.into(),
            namespace: namespace.into(),
            objects: kinds.into_iter().map(|k| (k, Counts::default())).collect(),
            fences_lost: zero(fences),
            errors: zero(errors),
            ..Self::default()
        }
    }

    fn key(&self) -> (String, String) {
        (self.collector.clone(), self.namespace.clone())
    }

    /// When the run succeeded, if it did.
    fn success_at(&self) -> Option<f64> {
        match self.ended {
            Ended::Succeeded(at) => Some(at),
            Ended::Failed | Ended::Stopped => None,
        }
    }

    /// Whether the run succeeded; `None` when a signal stopped it.
    fn success(&self) -> Option<bool> {
        match self.ended {
            Ended::Succeeded(_) => Some(true),
            Ended::Failed => Some(false),
            Ended::Stopped => None,
        }
    }

    fn run(&self) -> Run {
        Run {
            collector: self.collector.clone(),
            namespace: self.namespace.clone(),
        }
    }

    fn object(&self, kind: &str) -> Object {
        Object {
            collector: self.collector.clone(),
            kind: kind.into(),
            namespace: self.namespace.clone(),
        }
    }

    fn stage(&self, stage: &str) -> Stage {
        Stage {
            collector: self.collector.clone(),
            namespace: self.namespace.clone(),
            stage: stage.into(),
        }
    }

    /// Adds `other`'s counts to these (the totals of `serve`).
    fn add(&mut self, other: &Self) {
        for (kind, counts) in &other.objects {
            let mine = self.objects.entry(kind.clone()).or_default();
            for (total, n) in mine.iter_mut().zip(counts) {
                *total += n;
            }
        }
        for (mine, theirs) in [
            (&mut self.fences_lost, &other.fences_lost),
            (&mut self.errors, &other.errors),
        ] {
            for (stage, n) in theirs {
                *mine.entry(stage.clone()).or_default() += n;
            }
        }
        self.archive_bytes += other.archive_bytes;
    }
}

/// The metrics of one run.
pub(crate) struct RunMetrics {
    prefix: String,
    record: Mutex<Record>,
}

impl RunMetrics {
    /// The metrics of a run of `collector` in `namespace`, named with `prefix`.
    #[must_use]
    pub(crate) fn new(prefix: &str, collector: &str, namespace: &str) -> Self {
        Self {
            prefix: prefix.into(),
            record: Mutex::new(Record::new(collector, namespace)),
        }
    }

    fn record(&self) -> MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
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

    /// Counts a reviewed plan's `targets`, which an apply looks at (each is read again before
    /// anything is done to it): scanned and eligible, never held or deferred.
    pub(crate) fn reviewed(&self, targets: usize) {
        let n = targets as u64;
        self.objects("Pod", n, n, 0, 0, 0);
    }

    /// Counts the results of an apply.
    pub(crate) fn results(&self, results: &[TargetResult]) {
        let mut record = self.record();
        for r in results {
            match &r.outcome {
                TargetOutcome::Collected { bytes, .. } => {
                    record.objects.entry("Pod".into()).or_default()[4] += 1;
                    record.archive_bytes += *bytes as u64;
                }
                TargetOutcome::Changed { step, .. } => {
                    *record
                        .fences_lost
                        .entry(step_name(*step).into())
                        .or_default() += 1;
                }
                TargetOutcome::Failed { step, .. } => {
                    *record.errors.entry(step_name(*step).into()).or_default() += 1;
                }
                TargetOutcome::TooLarge { .. } => {
                    *record.errors.entry("TooLarge".into()).or_default() += 1;
                }
                TargetOutcome::WouldCollect { .. }
                | TargetOutcome::Skipped { .. }
                | TargetOutcome::Released { .. }
                | TargetOutcome::NotStarted { .. } => {}
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
        let mut record = self.record();
        let counts = record.objects.entry(kind.into()).or_default();
        for (total, n) in counts
            .iter_mut()
            .zip([scanned, eligible, held, deferred, deleted])
        {
            *total += n;
        }
    }

    /// Counts an error at `stage`.
    pub(crate) fn error(&self, stage: &str) {
        *self.record().errors.entry(stage.into()).or_default() += 1;
    }

    /// Counts a write refused at `stage` because its object changed (a fence lost).
    pub(crate) fn fence_lost(&self, stage: &str) {
        *self.record().fences_lost.entry(stage.into()).or_default() += 1;
    }

    /// Records the run's end: it took `seconds`, and succeeded at `success_at` or failed.
    pub(crate) fn finish(&self, seconds: f64, success_at: Option<f64>) {
        let mut record = self.record();
        record.duration = seconds;
        record.attempt_at = success_at.unwrap_or_else(crate::clock::now);
        record.ended = success_at.map_or(Ended::Failed, Ended::Succeeded);
    }

    /// Records a run that failed at `stage` after `seconds` and delivers it with `delivery`,
    /// alerting `why`.
    pub(crate) async fn fail(&self, stage: &str, seconds: f64, delivery: &Delivery, why: &str) {
        self.error(stage);
        self.finish(seconds, None);
        self.deliver(delivery, Some(why), "").await;
    }

    /// Records the end of a run a signal stopped after `seconds`: an attempt, neither a success
    /// nor a failure. Delivered, it alerts no one.
    pub(crate) fn stopped(&self, seconds: f64) {
        let mut record = self.record();
        record.duration = seconds;
        record.attempt_at = crate::clock::now();
        record.ended = Ended::Stopped;
    }

    /// The run's metrics, OpenMetrics text: the last-run view the push and the file carry.
    pub(crate) fn text(&self) -> String {
        let record = self.record().clone();
        let mut x = Exposition::new(&self.prefix);
        x.last_runs(&[LastRun {
            record: &record,
            success: record.success(),
            last_success: record.success_at(),
        }]);
        x.text()
    }

    /// Sends the metrics and, when asked, an alert (none for a stopped run). Delivery problems
    /// are reported, never fatal to the run's own outcome; each way is tried whatever the others
    /// did (a stalled Pushgateway does not swallow the alert). The blocking calls (the file, the
    /// HTTP requests, each bounded by [`HTTP_TIMEOUT`](http::HTTP_TIMEOUT)) run on the runtime's
    /// blocking pool, never on the task that awaits this.
    pub(crate) async fn deliver(&self, delivery: &Delivery, failure: Option<&str>, summary: &str) {
        let record = self.record().clone();
        if let Some(served) = &delivery.served {
            served.add(&record);
        }
        let text = self.text();
        let (collector, namespace) = record.key();
        let alert = alert_of(&record, failure, delivery.alert_on_success, summary);
        let delivery = delivery.clone();
        let sent = tokio::task::spawn_blocking(move || {
            let group = format!("job/gc/collector/{collector}/namespace/{namespace}");
            let mut problems = alerts::post_alerts(&delivery.alert_webhooks, alert.as_ref());
            problems.extend(write_metrics_file(delivery.file(), &text).err());
            problems.extend(push(delivery.pushgateway.as_deref(), &group, &text).err());
            problems
        });
        match sent.await {
            Ok(problems) => {
                for e in problems {
                    tracing::warn!("{e:#}");
                }
            }
            Err(e) => tracing::warn!("cannot deliver the run's metrics: {e}"),
        }
    }
}

/// The alert a run delivers, if any: none for a stopped run; the failure when it failed; with
/// `on_success`, the `summary` of a run that did something (an empty summary says it did not).
fn alert_of(
    record: &Record,
    failure: Option<&str>,
    on_success: bool,
    summary: &str,
) -> Option<Alert> {
    let (collector, namespace) = record.key();
    let text = match (failure, record.ended) {
        (_, Ended::Stopped) => return None,
        (Some(why), _) => failed(&collector, &format!("in namespace {namespace}"), why),
        (None, _) if on_success && !summary.is_empty() => {
            format!("gc {collector} collector in namespace {namespace}: {summary}")
        }
        (None, _) => return None,
    };
    let sum = |i: usize| record.objects.values().map(|c| c[i]).sum::<u64>();
    let counts = serde_json::json!({
        "scanned": sum(0),
        "eligible": sum(1),
        "held": sum(2),
        "deferred": sum(3),
        "deleted": sum(4),
        "errors": record.errors.values().sum::<u64>(),
        "fencesLost": record.fences_lost.values().sum::<u64>(),
        "archiveBytes": record.archive_bytes,
    });
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let micros = (record.attempt_at * 1e6) as u64;
    Some(Alert {
        run_id: format!("{collector}-{namespace}-{micros}"),
        collector,
        namespace: Some(namespace),
        error: failure.map(str::to_owned),
        counts,
        text,
    })
}

/// A `POST` of `text` to the Pushgateway's `group` (`job/gc/collector/C/namespace/N`): it
/// replaces the families it carries and keeps the others (the last success, when this run
/// failed).
fn push(gateway: Option<&str>, group: &str, text: &str) -> crate::Result<()> {
    let Some(gateway) = gateway.filter(|u| !u.is_empty()) else {
        return Ok(());
    };
    let url = format!("{}/metrics/{group}", gateway.trim_end_matches('/'));
    // A URL that cannot be shown is not used either: its host may be a piece of its password.
    let shown = gc_core::shown::shown_url(&url).map_err(|why| {
        crate::Error::msg(format!(
            "cannot push metrics: the Pushgateway URL (`pushgateway`) {why}"
        ))
    })?;
    let fail = |why: String| crate::Error::msg(format!("cannot push metrics to {shown}: {why}"));
    endpoint(&url).map_err(|why| fail(format!("the URL {why}")))?;
    agent()
        .post(&url)
        .header("Content-Type", TEXT_FORMAT)
        .send(text_format(text).as_bytes())
        .map_err(|e| fail(describe(&e)))?;
    Ok(())
}

/// The alert of a failed run of `collector` `where_` (`in namespace N`).
fn failed(collector: &str, where_: &str, why: &str) -> String {
    format!(
        ":rotating_light: gc {collector} collector failed {where_}: {why}. Inspect collector-pinned objects before retrying.",
    )
}

#[cfg(test)]
mod tests;
