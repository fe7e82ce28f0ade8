//! What `serve` shows on `/metrics`: each collector and namespace's last run and last success,
//! and counters adding up every run of the process.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::exposition::{ApiMetrics, Exposition, History, LastRun};
use super::{Ended, Record};

/// What `serve` shows on `/metrics`: each collector and namespace's last run and last success,
/// and counters adding up every run since the process started (in memory, never reset).
#[derive(Debug)]
pub struct Served {
    prefix: String,
    runs: Mutex<BTreeMap<(String, String), History>>,
    /// The request API's counters, once it is served.
    api: Mutex<Option<Arc<ApiMetrics>>>,
}

impl Served {
    /// No run yet; every metric named with `prefix`.
    #[must_use]
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.into(),
            runs: Mutex::default(),
            api: Mutex::new(None),
        }
    }

    /// Shows the request API's counters `api` beside the runs' (the first given, when given
    /// twice).
    pub fn show_api(&self, api: Arc<ApiMetrics>) {
        let mut shown = self.api.lock().unwrap_or_else(PoisonError::into_inner);
        shown.get_or_insert(api);
    }

    pub(super) fn add(&self, run: &Record) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let history = runs.entry(run.key()).or_insert_with(|| History {
            last: run.clone(),
            success: None,
            last_success: None,
            totals: Record::new(&run.collector, &run.namespace),
            succeeded: 0,
            failed: 0,
            stopped: 0,
        });
        history.last = run.clone();
        history.totals.add(run);
        match run.ended {
            Ended::Succeeded(at) => {
                history.last_success = Some(at);
                history.succeeded += 1;
            }
            Ended::Failed => history.failed += 1,
            Ended::Stopped => history.stopped += 1,
        }
        history.success = run.success().or(history.success);
    }

    /// Forgets the runs of `collector` in any namespace but `namespaces`.
    pub(super) fn retain(&self, collector: &str, namespaces: &[String]) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.retain(|(c, ns), _| c != collector || namespaces.contains(ns));
    }

    /// Every run so far, OpenMetrics text.
    pub fn text(&self) -> String {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let histories: Vec<&History> = runs.values().collect();
        let mut x = Exposition::new(&self.prefix);
        let last: Vec<LastRun> = histories
            .iter()
            .map(|h| LastRun {
                record: &h.last,
                success: h.success,
                last_success: h.last_success,
            })
            .collect();
        x.last_runs(&last);
        x.totals(&histories);
        let api = self
            .api
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(api) = &api {
            x.api(api);
        }
        x.text()
    }
}
