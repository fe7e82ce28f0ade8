//! Collections a caller requests (the control plane, through `serve`'s request API): each runs
//! exactly what a scheduled run of its namespace does, through the same [`SessionCollector`],
//! narrowed to the sessions asked for ([`gc_core::sessions::requests`]).
//!
//! Per namespace, this process runs one collection at a time: a request that comes while one
//! runs waits in the namespace's bounded queue ([`Refusal::Full`] beyond it) and is coalesced
//! with every other waiting request into the next run. Each run takes the namespace's Lease like
//! any run: when another process (a replica, the CronJob) holds it for the collector's whole lock
//! wait, the run fails and its requests end [`Refusal::Busy`]. Each request keeps its own run id,
//! and reports on its own ids only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gc_core::ports::{ClusterError, LeaseHolder, SessionDirectory, Store};
use gc_core::sessions::SessionConfig;
use gc_core::sessions::requests::{self as lifecycle, Event, Narrowed, Queue, Requested, State};
use gc_core::sessions::run::Planned;
use gc_core::sessions::run::{AuditRecord, SessionReport};
use serde::Serialize;
use tokio::sync::watch;

use crate::audit::{Audit, RefusedLine};
use crate::clock;
use crate::outcome::Outcome;
use crate::sessions::SessionCollector;
use gc_core::ports::SessionCluster;
use gc_core::ports::Sink;

/// How requests are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestOptions {
    /// At most this many requests wait per namespace.
    pub queue: usize,
    /// The grace period of an orphan a request names, in seconds from its resource's creation
    /// (a scheduled run's, and a request for every session's, is the namespace's `grace_hours`).
    pub grace_seconds: u32,
    /// How long [`Requests::collect`] waits for its run to end before it answers with the
    /// request still queued or running.
    pub answer_within: Duration,
    /// How long a stopping process waits for the runs and restores it started to end
    /// ([`Requests::finished`]): under the chart's `terminationGracePeriodSeconds` (120).
    pub finish_within: Duration,
}

impl Default for RequestOptions {
    /// 256 waiting requests per namespace (a control plane that asks once per ended session may
    /// ask for many at once, after an outage; each is small); a grace of five minutes: a session
    /// the control plane has just ended is not held a day, and resources created a moment ago (a
    /// session starting while its row is not yet written) are still safe; an answer within ten
    /// seconds; a stop waits up to 100 seconds for what was started.
    fn default() -> Self {
        Self {
            queue: 256,
            grace_seconds: 300,
            answer_within: Duration::from_secs(10),
            finish_within: Duration::from_secs(100),
        }
    }
}

/// Why a request was not taken, or could not run. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The namespace is not one this collector serves.
    #[error("namespace {0} is not collected here")]
    UnknownNamespace(String),
    /// The namespace's queue is full: try again later.
    #[error("{capacity} requests already wait in namespace {namespace}; try again later")]
    Full {
        /// The namespace.
        namespace: String,
        /// Its queue's bound.
        capacity: usize,
    },
    /// Another process held the namespace's Lease for the whole wait: try again later.
    #[error("{0}")]
    Busy(String),
    /// The process is stopping: try again on another replica, or once it is back.
    #[error("the collector is stopping; nothing was queued")]
    Stopping,
}

/// Why [`Requests::plan`] gave no plan.
#[derive(Debug, thiserror::Error)]
pub enum Planning {
    /// The namespace is not one the desk serves.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The plan was refused (the guard, no answer for an id), or a read failed.
    #[error(transparent)]
    Failed(crate::Error),
}

/// A request, as `GET /v1/runs/{id}` shows it.
#[cfg_attr(feature = "admin", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestedRun {
    /// Its id.
    pub id: String,
    /// The namespace.
    pub namespace: String,
    /// The sessions asked for.
    pub sessions: Requested,
    /// Who asked (the caller's Kubernetes user name).
    pub requested_by: String,
    /// Where it is.
    pub state: State,
    /// When it was asked for (RFC 3339).
    pub requested_at: String,
    /// When its run ended (RFC 3339).
    pub ended_at: Option<String>,
    /// Why it failed or stopped.
    pub error: Option<String>,
    /// The audit records of the sessions it asked for (the same records as the audit log).
    pub records: Vec<AuditRecord>,
}

/// What `GET /v1/status` says of a namespace's requests.
#[cfg_attr(feature = "admin", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    /// The namespace.
    pub namespace: String,
    /// How many requests wait for its next run.
    pub queued: usize,
    /// The latest request, without its records.
    pub last: Option<RequestedRun>,
}

/// The collector's request desk: runs requested collections of the namespaces of `configs`.
pub struct Requests<C, D, S, A> {
    collector: SessionCollector<C, D, S, A>,
    configs: BTreeMap<String, SessionConfig>,
    options: RequestOptions,
    audit: Mutex<Box<dyn Audit>>,
    book: Mutex<Book>,
    /// One run at a time per namespace, in this process.
    lanes: BTreeMap<String, Arc<tokio::sync::Mutex<()>>>,
    /// When the desk started, in microseconds since the epoch (hex): every request id begins
    /// with it, so that an id of an earlier process (before a restart) is no request here.
    started: String,
    /// Every run and restore the desk started, which a stop waits for ([`Requests::finished`]).
    tasks: tokio_util::task::TaskTracker,
    /// The sessions (namespace, id) a restore works on now.
    restoring: Arc<Mutex<BTreeSet<(String, String)>>>,
}

#[derive(Default)]
struct Book {
    /// Set by [`Requests::stop`]: nothing more is queued.
    stopping: bool,
    next: u64,
    queues: BTreeMap<String, Queue<u64>>,
    runs: BTreeMap<u64, Entry>,
}

struct Entry {
    run: RequestedRun,
    /// Whether the error is another process's Lease.
    busy: bool,
    ended: watch::Sender<bool>,
}

impl<C, D, S, A> Requests<C, D, S, A> {
    /// The namespaces served.
    pub fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.configs.keys().map(String::as_str)
    }

    /// Whether `namespace` is one the desk serves.
    pub fn serves(&self, namespace: &str) -> bool {
        self.configs.contains_key(namespace)
    }

    /// The operator's settings of `namespace`, when the desk serves it.
    pub fn config(&self, namespace: &str) -> Option<&SessionConfig> {
        self.configs.get(namespace)
    }

    /// The operator's settings of `namespace`, narrowed to `sessions` with the requests' grace,
    /// asked for by `requested_by`.
    ///
    /// # Errors
    /// [`Refusal::UnknownNamespace`].
    pub fn narrowed(
        &self,
        namespace: &str,
        sessions: Requested,
        requested_by: BTreeSet<String>,
    ) -> Result<SessionConfig, Refusal> {
        let cfg = self.configs.get(namespace);
        let cfg = cfg.ok_or_else(|| Refusal::UnknownNamespace(namespace.to_owned()))?;
        Ok(SessionConfig {
            request: Some(Narrowed {
                sessions,
                grace_seconds: self.options.grace_seconds,
                requested_by,
            }),
            ..cfg.clone()
        })
    }

    /// Each namespace served, with its queue and its latest request.
    pub fn lanes(&self) -> Vec<Lane> {
        let book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        let last = |ns: &str| {
            let entry = book.runs.values().rev().find(|e| e.run.namespace == ns)?;
            let records = Vec::new();
            Some(RequestedRun {
                records,
                ..entry.run.clone()
            })
        };
        (self.configs.keys())
            .map(|ns| Lane {
                namespace: ns.clone(),
                queued: book.queues.get(ns).map_or(0, Queue::len),
                last: last(ns),
            })
            .collect()
    }

    /// Request `id`, as it is now.
    pub fn run(&self, id: &str) -> Option<RequestedRun> {
        let mut parts = id.split('-');
        let (started, number) = (parts.next()?, parts.next()?);
        if started != self.started {
            // Another process's (or an earlier one's, before a restart): not this desk's.
            return None;
        }
        let number: u64 = number.parse().ok()?;
        let book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        // The whole id, its random part too: a number alone finds nothing.
        (book.runs.get(&number))
            .filter(|e| e.run.id == id)
            .map(|e| e.run.clone())
    }

    /// Waits, at most `within`, for every run and restore this desk started to end (each run's
    /// audit lines written and its Lease released); whether they all did. For a stopping
    /// process, after [`Requests::stop`] (and the collector's stop token): its runtime must not
    /// be dropped under them.
    pub async fn finished(&self, within: Duration) -> bool {
        self.tasks.close();
        tokio::time::timeout(within, self.tasks.wait())
            .await
            .is_ok()
    }

    /// How long a stopping process waits for what the desk started ([`Requests::finished`]).
    pub fn finish_within(&self) -> Duration {
        self.options.finish_within
    }

    /// Runs `task` as one of the desk's own, which [`Requests::finished`] waits for: a caller
    /// that goes away does not cut it (the console's approvals of failed-Pod plans).
    #[cfg(feature = "admin")]
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// The process is stopping: every queued request ends stopped, with nothing done, and
    /// nothing more is queued. A run in flight ends as the collector's stop token makes it.
    pub fn stop(&self) {
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        book.stopping = true;
        let queued: Vec<u64> = (book.queues.values_mut())
            .filter_map(Queue::take)
            .flat_map(|batch| batch.requests)
            .collect();
        let ended_at = gc_core::isotime::format_timestamp(clock::now());
        for id in queued {
            step(&mut book, id, Event::StopAsked);
            if let Some(entry) = book.runs.get_mut(&id) {
                entry.run.error = Some("the collector stopped before a run took it".into());
                entry.run.ended_at = Some(ended_at.clone());
                entry.ended.send_replace(true);
            }
        }
    }
}

impl<C, D, S, A> Requests<C, D, S, A>
where
    C: SessionCluster + Send + Sync,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
{
    /// A desk running `collector`'s collections of the namespaces of `configs` (the operator's
    /// settings, each a scheduled run's), as `options` say, the audit records to `audit`.
    pub fn new(
        collector: SessionCollector<C, D, S, A>,
        configs: Vec<SessionConfig>,
        options: RequestOptions,
        audit: Box<dyn Audit>,
    ) -> Arc<Self> {
        let lanes = configs
            .iter()
            .map(|c| (c.namespace.clone(), Arc::default()))
            .collect();
        let configs = configs
            .into_iter()
            .map(|c| (c.namespace.clone(), c))
            .collect();
        Arc::new(Self {
            collector,
            configs,
            options,
            audit: Mutex::new(audit),
            book: Mutex::default(),
            lanes,
            started: format!("{:x}", (clock::now() * 1e6) as u64),
            tasks: tokio_util::task::TaskTracker::new(),
            restoring: Arc::default(),
        })
    }

    /// What a collection of `namespace` narrowed to `sessions` (asked for by `requested_by`)
    /// would do now: read, never written ([`SessionCollector::plan`]).
    ///
    /// # Errors
    /// [`Planning::Refused`]: the namespace is not served. [`Planning::Failed`]: the plan's
    /// refusal or a failed read.
    pub async fn plan(
        &self,
        namespace: &str,
        sessions: Requested,
        requested_by: &str,
    ) -> Result<Planned, Planning> {
        let cfg = self.narrowed(namespace, sessions, [requested_by.to_owned()].into())?;
        self.collector.plan(&cfg).await.map_err(Planning::Failed)
    }

    /// Who holds the run lock of `namespace` now, if anyone.
    ///
    /// # Errors
    /// The Lease could not be read.
    pub async fn lock_holder(&self, namespace: &str) -> Result<Option<LeaseHolder>, ClusterError> {
        self.collector.lock_holder(namespace).await
    }

    /// Queues a collection of `sessions` in `namespace` for `caller`, and waits for its run to
    /// end, at most [`RequestOptions::answer_within`]: the request as it is then.
    ///
    /// # Errors
    /// [`Refusal`]: nothing was queued (unknown namespace, full queue), or the run could not take
    /// the namespace's Lease (busy: the request ended failed, nothing was changed).
    pub async fn collect(
        self: &Arc<Self>,
        namespace: &str,
        sessions: Requested,
        caller: &str,
    ) -> Result<RequestedRun, Refusal> {
        if !self.serves(namespace) {
            return Err(Refusal::UnknownNamespace(namespace.to_owned()));
        }
        let (id, mut ended) = {
            let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            if book.stopping {
                return Err(Refusal::Stopping);
            }
            let id = book.next + 1;
            let capacity = self.options.queue;
            let queue = (book.queues)
                .entry(namespace.to_owned())
                .or_insert_with(|| Queue::new(capacity));
            queue
                .admit(id, sessions.clone())
                .map_err(|full| Refusal::Full {
                    namespace: namespace.to_owned(),
                    capacity: full.capacity,
                })?;
            book.next = id;
            let (ended, watching) = watch::channel(false);
            let run = RequestedRun {
                id: format!("{}-{id}-{}", self.started, unguessable()),
                namespace: namespace.to_owned(),
                sessions,
                requested_by: caller.to_owned(),
                state: State::Queued,
                requested_at: gc_core::isotime::format_timestamp(clock::now()),
                ended_at: None,
                error: None,
                records: Vec::new(),
            };
            let busy = false;
            book.runs.insert(id, Entry { run, busy, ended });
            book.forget_old(KEPT);
            (id, watching)
        };
        let desk = Arc::clone(self);
        let lane = namespace.to_owned();
        // The desk's own task: a caller that goes away does not cut it, and a stop waits for it.
        self.tasks.spawn(async move { desk.drive(&lane).await });
        let _ = tokio::time::timeout(self.options.answer_within, ended.wait_for(|e| *e)).await;
        let book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        match book.runs.get(&id) {
            Some(entry) if entry.busy => {
                Err(Refusal::Busy(entry.run.error.clone().unwrap_or_default()))
            }
            Some(entry) => Ok(entry.run.clone()),
            // More than [`KEPT`] requests ended while this one was answered.
            None => Err(Refusal::Busy(format!(
                "request {id} ended and was forgotten before it was answered; try again"
            ))),
        }
    }

    /// Runs what waits in `namespace`'s queue, after the run in progress there.
    async fn drive(&self, namespace: &str) {
        let Some(lane) = self.lanes.get(namespace) else {
            return;
        };
        let _running = lane.lock().await;
        let (batch, callers) = {
            let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(batch) = book.queues.get_mut(namespace).and_then(Queue::take) else {
                // Coalesced into a run before this one, or stopped.
                return;
            };
            let mut callers = BTreeSet::new();
            for id in &batch.requests {
                step(&mut book, *id, Event::Taken);
                if let Some(entry) = book.runs.get(id) {
                    callers.insert(entry.run.requested_by.clone());
                }
            }
            (batch, callers)
        };
        let mut recorder = Recorder {
            audit: &self.audit,
            records: Vec::new(),
        };
        // Taken: whatever happens now, each request ends and says how (none is left running).
        let run = match self.narrowed(namespace, batch.sessions, callers) {
            Ok(cfg) => self.collector.collect(&[cfg], &mut recorder).await.pop(),
            Err(refusal) => {
                tracing::warn!("requests in namespace {namespace}: {refusal}");
                None
            }
        };
        let (event, error, busy) = match run.as_ref().map(|r| (r.outcome(), &r.failure)) {
            Some((Outcome::Succeeded, _)) => (Event::Succeeded, None, false),
            Some((Outcome::Stopped, failure)) => {
                let why = failure.as_ref().map(|f| format!("{:#}", f.error));
                (Event::RunStopped, why, false)
            }
            Some((Outcome::Failed { .. }, Some(failure))) => {
                let busy = failure.error.is_lock_held();
                (Event::Failed, Some(format!("{:#}", failure.error)), busy)
            }
            _ => (Event::Failed, Some("the run said nothing".into()), false),
        };
        let ended_at = gc_core::isotime::format_timestamp(clock::now());
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        for id in batch.requests {
            step(&mut book, id, event);
            if let Some(entry) = book.runs.get_mut(&id) {
                let asked = &entry.run.sessions;
                let own = recorder.records.iter().filter(|r| {
                    (r.judged.resource.session.as_deref()).is_some_and(|s| asked.contains(s))
                });
                entry.run.records = own.cloned().collect();
                entry.run.error.clone_from(&error);
                entry.run.ended_at = Some(ended_at.clone());
                entry.busy = busy;
                entry.ended.send_replace(true);
            }
        }
    }
}

/// How many requests the desk keeps to answer `GET /v1/runs/{id}`: beyond it, the oldest that
/// have ended are forgotten.
const KEPT: usize = 1024;

impl Book {
    /// Forgets the oldest ended requests beyond `kept`.
    fn forget_old(&mut self, kept: usize) {
        let ended: Vec<u64> = (self.runs.iter())
            .filter(|(_, e)| e.run.state.is_final())
            .map(|(id, _)| *id)
            .collect();
        let excess = self.runs.len().saturating_sub(kept);
        for id in ended.into_iter().take(excess) {
            self.runs.remove(&id);
        }
    }
}

/// Moves request `id` by `event`, when the lifecycle allows it.
fn step(book: &mut Book, id: u64, event: Event) {
    if let Some(entry) = book.runs.get_mut(&id) {
        match lifecycle::next(entry.run.state, event) {
            Some(state) => entry.run.state = state,
            None => tracing::warn!(
                "request {id}: {event:?} does not apply to a request {:?}",
                entry.run.state
            ),
        }
    }
}

/// A requested run's audit: every record to the desk's audit log, and kept for the requests.
struct Recorder<'a> {
    audit: &'a Mutex<Box<dyn Audit>>,
    records: Vec<AuditRecord>,
}

impl Audit for Recorder<'_> {
    fn judged(
        &mut self,
        cfg: &SessionConfig,
        report: &SessionReport,
        time: &str,
    ) -> crate::Result<()> {
        self.records.extend(report.records.iter().cloned());
        let mut audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        audit.judged(cfg, report, time)
    }
    fn refused(&mut self, line: &RefusedLine<'_>) -> crate::Result<()> {
        let mut audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        audit.refused(line)
    }
}

impl<C, D, S, A> Requests<C, D, S, A> {
    /// Writes the audit line of a call refused for who asked; a line that cannot be written is
    /// said in the log (the call is refused either way).
    pub fn denied(&self, line: &crate::audit::DeniedLine<'_>) {
        let mut audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = audit.denied(line) {
            tracing::warn!("cannot write the audit line of a refused call: {e}");
        }
    }

    /// Writes the audit lines of a restore asked for through the API; lines that cannot be
    /// written are said in the log (the objects were created either way).
    pub fn restored(&self, lines: &[crate::audit::RestoredLine<'_>]) {
        let mut audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = audit.restored(lines) {
            tracing::warn!("cannot write the audit lines of a restore: {e}");
        }
    }
}

/// 128 random bits, in hex: the part of a request id nobody can guess from another's.
fn unguessable() -> String {
    let mut bytes = [0u8; 16];
    // Without the operating system's random numbers the process cannot serve safely at all.
    getrandom::fill(&mut bytes).expect("the operating system's random numbers");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub mod restores;
#[cfg(test)]
pub(crate) mod tests_desk;
