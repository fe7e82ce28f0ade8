//! The OpenMetrics exposition of runs: one registry, a family per metric with samples, labelled
//! by collector, namespace and kind or stage.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::text::{LAST_RUN_SUCCESS_HELP, LAST_SUCCESS_HELP};
use super::*;

/// The request API's counters (`serve::api::Api::metrics`), since the process started.
#[derive(Debug, Default)]
pub struct ApiMetrics {
    refusals_unaudited: AtomicU64,
}

impl ApiMetrics {
    /// One more refusal the audit's rate left out (its count is also in the next refusal's
    /// audit line).
    pub fn refusal_unaudited(&self) {
        self.refusals_unaudited.fetch_add(1, Ordering::Relaxed);
    }

    /// The refusals the audit's rate left out so far.
    #[must_use]
    pub fn refusals_unaudited(&self) -> u64 {
        self.refusals_unaudited.load(Ordering::Relaxed)
    }
}

/// The runs of one collector in one namespace, as `serve` keeps them.
#[derive(Debug)]
pub(super) struct History {
    pub(super) last: Record,
    /// Whether the last run that was not stopped succeeded.
    pub(super) success: Option<bool>,
    pub(super) last_success: Option<f64>,
    pub(super) totals: Record,
    pub(super) succeeded: u64,
    pub(super) failed: u64,
    pub(super) stopped: u64,
}

/// A last run as an exposition shows it: the run, whether the last run that was not stopped
/// succeeded, and the last success.
pub(super) struct LastRun<'r> {
    pub(super) record: &'r Record,
    pub(super) success: Option<bool>,
    pub(super) last_success: Option<f64>,
}

/// An exposition being built: a registry holding each family that has samples.
pub(super) struct Exposition {
    registry: Registry,
}

/// What a label set must be to key a family.
pub(super) trait Labels:
    EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static
{
}

impl<T> Labels for T where
    T: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static
{
}

/// What a metric must be to make a family: a gauge or a counter.
pub(super) trait Measure:
    TypedMetric + EncodeMetric + Default + std::fmt::Debug + Send + Sync + 'static
{
}

impl<T> Measure for T where
    T: TypedMetric + EncodeMetric + Default + std::fmt::Debug + Send + Sync + 'static
{
}

impl Exposition {
    pub(super) fn new(prefix: &str) -> Self {
        Self {
            registry: Registry::with_prefix(prefix),
        }
    }

    /// Registers the family `name` of `M`s, one per sample, each given its value by `set`;
    /// nothing when there is no sample.
    pub(super) fn family<L: Labels, M: Measure, V>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl Iterator<Item = (L, V)>,
        set: fn(&M, V),
    ) {
        let family = Family::<L, M>::default();
        let mut any = false;
        for (labels, value) in samples {
            set(&family.get_or_create(&labels), value);
            any = true;
        }
        if any {
            self.registry.register(name, help, family);
        }
    }

    /// Registers the gauges `name`.
    pub(super) fn gauges<L: Labels>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl Iterator<Item = (L, u64)>,
    ) {
        self.family(name, help, samples, |g: &Gauge, v| {
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
        });
    }

    /// Registers the float gauges `name`.
    pub(super) fn seconds<L: Labels>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl Iterator<Item = (L, f64)>,
    ) {
        self.family(name, help, samples, |g: &Gauge<f64, AtomicU64>, v| {
            g.set(v);
        });
    }

    /// Registers the counters `name` (exposed as `name_total`).
    pub(super) fn counters<L: Labels>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl Iterator<Item = (L, u64)>,
    ) {
        self.family(name, help, samples, |c: &Counter, v| {
            c.inc_by(v);
        });
    }

    /// The gauges of each run, with its success and last success to show beside it.
    pub(super) fn last_runs(&mut self, runs: &[LastRun<'_>]) {
        for (i, (name, help)) in OBJECTS.iter().enumerate() {
            let samples = runs.iter().flat_map(|LastRun { record: r, .. }| {
                r.objects
                    .iter()
                    .map(move |(kind, counts)| (r.object(kind), counts[i]))
            });
            self.gauges(
                &format!("last_run_{name}"),
                &format!("{help} by the last run"),
                samples,
            );
        }
        let stages = |pick: fn(&Record) -> &BTreeMap<String, u64>| {
            runs.iter().flat_map(move |LastRun { record: r, .. }| {
                pick(r).iter().map(move |(stage, n)| (r.stage(stage), *n))
            })
        };
        self.gauges(
            "last_run_fences_lost",
            "Writes refused in the last run because the object changed (409/422), by stage",
            stages(|r| &r.fences_lost),
        );
        self.gauges(
            "last_run_errors",
            "Errors in the last run, by stage",
            stages(|r| &r.errors),
        );
        self.gauges(
            "last_run_archive_bytes",
            "Bytes of diagnostic archives written by the last run",
            runs.iter()
                .map(|l| (l.record.run(), l.record.archive_bytes)),
        );
        // None for a stopped run that followed no other: the family keeps what was there.
        let successes = runs
            .iter()
            .filter_map(|l| Some((l.record.run(), u64::from(l.success?))));
        self.gauges("last_run_success", LAST_RUN_SUCCESS_HELP, successes);
        let at =
            |value: fn(&Record) -> f64| runs.iter().map(move |l| (l.record.run(), value(l.record)));
        self.seconds(
            "last_run_duration_seconds",
            "Duration of the last run",
            at(|r| r.duration),
        );
        self.seconds(
            "last_attempt_timestamp_seconds",
            "When a run last ended, succeeded or failed",
            at(|r| r.attempt_at),
        );
        let successes = runs
            .iter()
            .filter_map(|l| Some((l.record.run(), l.last_success?)));
        self.seconds(
            "last_success_timestamp_seconds",
            LAST_SUCCESS_HELP,
            successes,
        );
    }

    /// The counters of `serve`: every run since the process started.
    pub(super) fn totals(&mut self, histories: &[&History]) {
        let results = histories.iter().flat_map(|h| {
            let counts = [
                ("success", h.succeeded),
                ("failure", h.failed),
                ("stopped", h.stopped),
            ];
            counts.map(|(result, n)| {
                let run = h.last.run();
                let labels = RunResult {
                    collector: run.collector,
                    namespace: run.namespace,
                    result,
                };
                (labels, n)
            })
        });
        self.counters("runs", "Runs since the process started, by result", results);
        for (i, (name, help)) in OBJECTS.iter().enumerate() {
            let samples = histories.iter().flat_map(|h| {
                let r = &h.totals;
                r.objects
                    .iter()
                    .map(move |(kind, counts)| (r.object(kind), counts[i]))
            });
            self.counters(name, &format!("{help} since the process started"), samples);
        }
        let stages = |pick: fn(&Record) -> &BTreeMap<String, u64>| {
            histories.iter().flat_map(move |h| {
                let r = &h.totals;
                pick(r).iter().map(move |(stage, n)| (r.stage(stage), *n))
            })
        };
        self.counters(
            "fences_lost",
            "Writes refused because the object changed (409/422) since the process started, by stage",
            stages(|r| &r.fences_lost),
        );
        self.counters(
            "errors",
            "Errors since the process started, by stage",
            stages(|r| &r.errors),
        );
        self.counters(
            "archive_bytes",
            "Bytes of diagnostic archives written since the process started",
            histories
                .iter()
                .map(|h| (h.totals.run(), h.totals.archive_bytes)),
        );
    }

    /// The request API's counters.
    pub(super) fn api(&mut self, api: &ApiMetrics) {
        let unaudited = Counter::<u64>::default();
        unaudited.inc_by(api.refusals_unaudited());
        self.registry.register(
            "api_refusals_unaudited",
            "Refused request API calls the audit log's rate (20 a second) left out since the \
             process started (each next audited refusal counts them)",
            unaudited,
        );
    }

    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
