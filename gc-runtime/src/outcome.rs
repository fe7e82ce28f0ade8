//! What a run of one namespace ends with: its report when it got that far, its metrics, and
//! success, a stop, or a failure with its stage and kind.

use std::error::Error;

use gc_core::input::InputError;
use gc_core::pods::approval::PlanFileError;
use gc_core::pods::inventory::InventoryError;
use gc_core::pods::ledger::LedgerError;
use gc_core::pods::plan::PlanError;
use gc_core::ports::{ClusterError, StoreError};
use gc_core::sessions::SessionPlanError;
use gc_core::sessions::run::SessionRunError;

/// One namespace's run.
#[derive(Debug)]
pub struct NamespaceRun<R> {
    /// The namespace (for the pins outside a `-A` selection that could not be listed:
    /// `(outside the selection)`).
    pub namespace: String,
    /// What the run did, when it got far enough to say.
    pub report: Option<R>,
    /// Why it did not succeed, when it did not.
    pub failure: Option<Failure>,
    /// Its metrics, OpenMetrics text (empty when it made none).
    pub metrics: String,
}

impl<R> NamespaceRun<R> {
    /// The run of `namespace`, before it has anything to say.
    pub(crate) fn new(namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            report: None,
            failure: None,
            metrics: String::new(),
        }
    }

    /// A run that failed at `stage` before it had anything to report.
    pub(crate) fn failed(namespace: &str, stage: Stage, error: crate::Error) -> Self {
        Self {
            failure: Some(Failure { stage, error }),
            ..Self::new(namespace)
        }
    }

    /// How the run ended.
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match &self.failure {
            None => Outcome::Succeeded,
            Some(f) if crate::stopped(&f.error) => Outcome::Stopped,
            Some(f) => Outcome::Failed {
                stage: f.stage,
                kind: f.error.kind(),
            },
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It did what it was asked.
    Succeeded,
    /// The embedder's shutdown stopped it ([`crate::Stopped`]): neither a success nor a failure.
    Stopped,
    /// It failed at `stage` (the `stage` label of its error metric).
    Failed {
        /// Where it failed.
        stage: Stage,
        /// Whether an input, the data or the run itself failed.
        kind: FailureKind,
    },
}

/// Why a run failed, and its error (the whole chain: what the CLI prints).
#[derive(Debug)]
pub struct Failure {
    /// Where it failed (the `stage` label of the run's error metric).
    pub stage: Stage,
    /// The error.
    pub error: crate::Error,
}

/// Where a run failed: the `stage` label of its error metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Before or around the work: the connection, the lock's wait, the settings, a refusal, a
    /// session run's deletes.
    Run,
    /// The run lock was lost.
    Lock,
    /// The store could not be used.
    Store,
    /// The archive sink could not be used.
    Archive,
    /// Recovery: the pins could not be listed or released.
    Recover,
    /// The plan failed.
    Plan,
    /// A target failed.
    Apply,
    /// A pin was left at the end of a live run.
    PinLeft,
}

impl Stage {
    /// The metric label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Lock => "lock",
            Self::Store => "store",
            Self::Archive => "archive",
            Self::Recover => "recover",
            Self::Plan => "plan",
            Self::Apply => "apply",
            Self::PinLeft => "PinLeft",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of failure an error is (the CLI's exit code: 2, 3 and 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// An input value is invalid, or an input file cannot be used.
    Usage,
    /// The run failed closed on the data: a malformed inventory or ledger, a ceiling exceeded,
    /// the session guard.
    Data,
    /// Anything else: the cluster, the store, the lock, a failed target.
    Run,
}

impl FailureKind {
    /// The kind of an error of a type the library does not name: the first error of a known
    /// type in its chain, from the outermost in, decides; an error of no known type is
    /// [`FailureKind::Run`].
    #[must_use]
    pub fn of_chain(error: &(dyn Error + 'static)) -> Self {
        crate::causes(error)
            .find_map(Self::decided_by)
            .unwrap_or(Self::Run)
    }

    /// The kind one error in a chain decides, when its type decides one.
    #[must_use]
    pub fn decided_by(error: &(dyn Error + 'static)) -> Option<Self> {
        if let Some(error) = error.downcast_ref::<crate::Error>() {
            // A context decides nothing (its cause, next in the chain, does), nor does an error
            // of a type the library does not name (its own chain, next in `causes`, does).
            return match error {
                crate::Error::Context { .. } | crate::Error::Other(_) => None,
                typed => Some(typed.kind()),
            };
        }
        if error.is::<InputError>()
            || error.is::<PlanFileError>()
            || error.is::<crate::ledger::LedgerFileError>()
        {
            return Some(Self::Usage);
        }
        if error.is::<PlanError>()
            || error.is::<InventoryError>()
            || error.is::<LedgerError>()
            || error.is::<SessionPlanError>()
        {
            return Some(Self::Data);
        }
        if let Some(several) = error.downcast_ref::<NamespacesFailed>() {
            return Some(several.kind);
        }
        if let Some(run) = error.downcast_ref::<SessionRunError>() {
            // The plan's refusals (no answer for an id, the guard) are about the data; a list or
            // a database failure is not.
            return Some(match run {
                SessionRunError::Plan(_) => Self::Data,
                SessionRunError::List { .. } | SessionRunError::Database(_) => Self::Run,
            });
        }
        // Named so that a typed error further in (a cause) cannot change the kind.
        if error.is::<StoreError>() || error.is::<ClusterError>() {
            return Some(Self::Run);
        }
        None
    }
}

/// A run of `collector` that failed with `error` before its namespaces' runs (the connection,
/// the database, the archive sink, the list of namespaces): each of `namespaces` gets a failed
/// run (stage `run`) with its metrics and alert, and its Warning when `cluster` is connected;
/// with none to name, the webhook is alerted once. Each run's failure is `error`'s words.
#[cfg(feature = "adapters")]
pub(crate) async fn failed_before<R>(
    collector: &str,
    delivery: &crate::metrics::Delivery,
    events: &crate::events::Events,
    cluster: Option<&(impl gc_core::ports::EventSink + ?Sized)>,
    namespaces: &[String],
    started: std::time::Instant,
    error: &crate::Error,
) -> Vec<NamespaceRun<R>> {
    let why = format!("{error:#}");
    if namespaces.is_empty() {
        delivery.alert_unscoped(collector, &why).await;
        return Vec::new();
    }
    let each = delivery.for_namespaces(namespaces.len());
    let mut runs = Vec::with_capacity(namespaces.len());
    for namespace in namespaces {
        let metrics =
            crate::metrics::RunMetrics::new(&delivery.metrics_prefix, collector, namespace);
        metrics
            .fail(
                Stage::Run.as_str(),
                started.elapsed().as_secs_f64(),
                &each,
                &why,
            )
            .await;
        if let Some(cluster) = cluster {
            events.run_failed(cluster, namespace, error).await;
        }
        let mut run = NamespaceRun::failed(namespace, Stage::Run, crate::Error::msg(why.clone()));
        run.metrics = metrics.text();
        runs.push(run);
    }
    if namespaces.len() > 1 {
        let texts: Vec<String> = runs.iter().map(|r| r.metrics.clone()).collect();
        delivery.write_merged(&texts);
    }
    runs
}

/// Several namespaces of a run failed ([`outcome`]): of kind [`FailureKind::Data`] when every one
/// that failed was refused on its data, [`FailureKind::Run`] otherwise.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct NamespacesFailed {
    message: String,
    kind: FailureKind,
}

impl NamespacesFailed {
    /// [`FailureKind::Data`] when every namespace failed on its data, else [`FailureKind::Run`].
    #[must_use]
    pub fn kind(&self) -> FailureKind {
        self.kind
    }
}

/// The outcome of a run over `total` namespaces of which `failed` failed: one namespace's error
/// as it is; with several, each logged with its namespace and one [`NamespacesFailed`] that
/// names them all, which is [`Stopped`](crate::Stopped) instead when a stop ended every one.
///
/// # Errors
/// As said, when any namespace failed.
pub fn outcome(total: usize, mut failed: Vec<(String, crate::Error)>) -> crate::Result<()> {
    match failed.len() {
        0 => Ok(()),
        1 if total == 1 => Err(failed.remove(0).1),
        n => {
            for (namespace, error) in &failed {
                tracing::error!("{}", in_namespace(namespace, error));
            }
            let names: Vec<&str> = failed.iter().map(|(ns, _)| ns.as_str()).collect();
            let message = format!("{n} of {total} namespaces failed: {}", names.join(", "));
            if failed.iter().all(|(_, e)| crate::stopped(e)) {
                return Err(crate::Stopped::new(message).into());
            }
            let on_data = failed.iter().all(|(_, e)| e.kind() == FailureKind::Data);
            let kind = if on_data {
                FailureKind::Data
            } else {
                FailureKind::Run
            };
            Err(NamespacesFailed { message, kind }.into())
        }
    }
}

/// [`outcome`] of the runs of each namespace.
///
/// # Errors
/// As [`outcome`].
pub fn outcome_of<R>(runs: Vec<NamespaceRun<R>>) -> crate::Result<()> {
    let total = runs.len();
    let failed = runs
        .into_iter()
        .filter_map(|r| r.failure.map(|f| (r.namespace, f.error)))
        .collect();
    outcome(total, failed)
}

/// `error` in full, after its namespace unless it starts by naming it already.
fn in_namespace(namespace: &str, error: &crate::Error) -> String {
    let named = format!("namespace {namespace}");
    let text = format!("{error:#}");
    if text.starts_with(&format!("{named} ")) || text.starts_with(&format!("{named}:")) {
        text
    } else {
        format!("{named}: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_namespace_is_named_once() {
        let own = crate::Error::msg("cannot read").context("namespace etl of cluster c");
        assert_eq!(
            in_namespace("etl", &own),
            "namespace etl of cluster c: cannot read"
        );
        let bare = crate::Error::msg("lock held");
        assert_eq!(in_namespace("etl", &bare), "namespace etl: lock held");
        let other = crate::Error::msg("namespace etl2: x");
        assert_eq!(
            in_namespace("etl", &other),
            "namespace etl: namespace etl2: x"
        );
    }

    #[test]
    fn one_namespace_fails_as_itself_several_are_named_together() {
        let err = |m: &str| crate::Error::msg(m);
        assert!(outcome(3, Vec::new()).is_ok());
        let one = outcome(1, vec![("a".into(), err("lock held"))]).unwrap_err();
        assert_eq!(one.to_string(), "lock held");
        let some = outcome(3, vec![("a".into(), err("x")), ("c".into(), err("y"))]).unwrap_err();
        assert_eq!(some.to_string(), "2 of 3 namespaces failed: a, c");
    }
}
