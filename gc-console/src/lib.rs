//! gc's console: a local web console (`gc-cli console`) where an operator reviews what the
//! session collector would do, collects the sessions they choose, reads the archives verified
//! against their receipts, and restores a session, in a browser.
//!
//! It acts with the operator's own credentials (the kubeconfig's identity, shown from a
//! `SelfSubjectReview`): the API server's RBAC decides what they may do, and refuses the rest.
//! Every action is the library call the command line makes: a plan is the collector's plan, a
//! collection goes through the request desk ([`gc_runtime::requests::Requests`], narrowing only,
//! as the request API does) and writes the same audit lines naming the operator, a restore is
//! [`gc_runtime::sessions::SessionCollector::restore`]. There is no second path to a delete.
//!
//! Served on loopback only, it opens with a one-time token in the URL, then a cookie
//! (`HttpOnly`, `SameSite=Strict`); every form carries a CSRF token; a strict Content Security
//! Policy; no script and no asset from outside the binary ([`gate`]).

mod gate;
mod pages;
mod plot;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use gc_core::sessions::SessionConfig;
use gc_runtime::adapters::{Archives, KubeCluster, SessionSources, SessionTable, Store};
use gc_runtime::audit::Audit;
use gc_runtime::namespaces::Selection;
use gc_runtime::requests::{RequestOptions, Requests};
use gc_runtime::sessions::SESSIONS_NAMESPACE;
use gc_runtime::{Builder, Context as _, Settings};

use gate::Gate;

/// The request desk the console's collections go through.
type Desk = Requests<KubeCluster, Arc<SessionTable>, Store, Archives>;

/// What the console is made of, as `gc-cli console`'s flags give it.
pub struct Console {
    /// Where the cluster (the operator's kubeconfig) and the session table are.
    pub sources: SessionSources,
    /// gc's store (`None`: the embedded one).
    pub store: Option<String>,
    /// Where the archives are.
    pub sink: Archives,
    /// How a collection acts (its lock, concurrency, Events, the stop); `live` is set by the
    /// console: a preview is a server-side dry run, a confirmed collection is live.
    pub settings: Settings,
    /// Where the audit lines go.
    pub audit: Box<dyn Audit>,
    /// The namespaces whose failed Pods the console plans and approves, with the failed-Pod
    /// collector's default policy.
    pub pods_namespaces: Vec<String>,
}

/// How long a restore waits for a claim on a kept volume to bind (as `restore sessions`).
pub(crate) const BIND_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The console's shared state: the parts, the namespaces served, who the operator is.
pub(crate) struct App {
    /// The operator's user name, from the API server.
    pub(crate) operator: String,
    /// The operator's groups.
    pub(crate) groups: Vec<String>,
    /// The namespaces served, with their settings.
    pub(crate) configs: BTreeMap<String, SessionConfig>,
    /// Collections for real (under each namespace's Lease).
    pub(crate) live: Arc<Desk>,
    /// The same collections as server-side dry runs: what a confirmation shows.
    pub(crate) dry: Arc<Desk>,
    /// The cluster, as the operator.
    pub(crate) cluster: KubeCluster,
    /// gc's store.
    pub(crate) store: Store,
    /// The archive sink.
    pub(crate) sink: Archives,
    /// The settings restores act with (`live` set per call).
    pub(crate) settings: Settings,
    /// The one-time token, the cookie and the CSRF token.
    pub(crate) gate: Gate,
    /// The namespaces of failed Pods, with their policy.
    pub(crate) pods: BTreeMap<String, gc_core::PodConfig>,
    /// The key that seals the failed-Pod plans this console shows, for its approvals alone.
    pub(crate) seal: gc_core::pods::approval::SealKey,
    /// The latest plan of each namespace, for paging through it without planning again.
    pub(crate) plans: Mutex<BTreeMap<String, pages::sessions::Cached>>,
}

/// How a collection asked for here is taken: as the request API's, answered once its run ends
/// (a plan of thousands of objects is not cut short by a ten-second answer).
fn requests() -> RequestOptions {
    RequestOptions {
        answer_within: std::time::Duration::from_secs(600),
        ..RequestOptions::default()
    }
}

impl App {
    /// Every namespace served: the sessions' and the failed Pods', each once, in order.
    pub(crate) fn namespaces(&self) -> std::collections::BTreeSet<&str> {
        let sessions = self.configs.keys().map(String::as_str);
        sessions
            .chain(self.pods.keys().map(String::as_str))
            .collect()
    }

    /// Drops the kept plan of `ns`: what was done there changed it.
    pub(crate) fn forget_plan(&self, ns: &str) {
        let mut plans = self
            .plans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        plans.remove(ns);
    }

    /// The cluster id the namespaces are collected under (the first namespace's settings).
    pub(crate) fn cluster_id(&self) -> &str {
        self.configs
            .values()
            .next()
            .map_or("primary", |c| c.cluster_id.as_str())
    }
}

impl Console {
    /// Serves the console on `address` (a loopback one) until the settings' stop comes:
    /// connects the cluster and the session table, asks the API server who the credentials are,
    /// resolves `selection` once, opens the store, then calls `ready` with the URL to open (the
    /// one-time token in it) and answers.
    ///
    /// # Errors
    /// A listener not on a loopback address (usage), or what fails before the first page: a
    /// connection, the identity, the Namespaces list, a namespace's settings, the store.
    pub async fn serve(
        self,
        address: SocketAddr,
        selection: &Selection,
        config: impl Fn(&str) -> gc_runtime::Result<SessionConfig>,
        ready: impl FnOnce(&str),
    ) -> gc_runtime::Result<()> {
        if !address.ip().is_loopback() {
            return Err(gc_runtime::Error::Input(
                gc_core::input::InputError::Invalid {
                    input: "`listen`",
                    value: address.to_string(),
                    rule: "the console acts with your own credentials over plain HTTP: it serves on \
                       a loopback address only (127.0.0.1 or ::1)",
                },
            ));
        }
        let listener = tokio::net::TcpListener::bind(address).await;
        let listener = listener.with_context(|| format!("cannot listen on `listen` {address}"))?;
        let address = listener.local_addr()?;
        let (cluster, table) = gc_runtime::adapters::connect_sessions(self.sources)
            .await
            .map_err(|(_, e)| e)?;
        let caller = cluster.who_am_i().await;
        let caller = caller.map_err(|e| {
            gc_runtime::Error::from(e).context("cannot ask the API server who you are")
        })?;
        let namespaces = selection.resolve(&cluster, SESSIONS_NAMESPACE).await?;
        let configs = namespaces.iter().map(|ns| config(ns));
        let configs = configs.collect::<gc_runtime::Result<Vec<_>>>()?;
        if configs.is_empty() {
            return Err(gc_runtime::Error::Input(
                gc_core::input::InputError::Invalid {
                    input: "`namespaces`",
                    value: String::new(),
                    rule: "the selection names no namespace: the console has nothing to show",
                },
            ));
        }
        let store = gc_runtime::adapters::open_store_within(
            self.store.as_deref(),
            self.settings.store_timeout,
        )
        .await?;
        let table = Arc::new(table);
        // The session collector's cluster id (`--cluster-id`, the same for every namespace).
        let cluster_id = configs.first().map_or("primary", |c| c.cluster_id.as_str());
        let pods = (self.pods_namespaces.iter())
            .map(|ns| {
                let inputs = gc_core::PodInputs {
                    cluster_id: cluster_id.to_owned(),
                    namespace: ns.clone(),
                    ..gc_core::PodInputs::default()
                };
                Ok((ns.clone(), inputs.validate()?))
            })
            .collect::<gc_runtime::Result<BTreeMap<_, _>>>()?;
        let desk = |live: bool, audit: Box<dyn Audit>| {
            let settings = Settings {
                live,
                ..self.settings.clone()
            };
            let parts = Builder::new(settings).cluster(cluster.clone());
            let parts = parts.directory(Arc::clone(&table)).store(store.clone());
            let collector = parts.sink(self.sink.clone()).sessions()?;
            Ok::<_, gc_runtime::Error>(Requests::new(collector, configs.clone(), requests(), audit))
        };
        let shared = Arc::new(Mutex::new(self.audit));
        let live = desk(true, Box::new(Shared(Arc::clone(&shared))))?;
        let dry = desk(false, Box::new(Shared(shared)))?;
        let app = Arc::new(App {
            operator: caller.user,
            groups: caller.groups,
            configs: configs
                .into_iter()
                .map(|c| (c.namespace.clone(), c))
                .collect(),
            live: Arc::clone(&live),
            dry: Arc::clone(&dry),
            cluster,
            store: store.clone(),
            sink: self.sink,
            settings: self.settings.clone(),
            gate: Gate::new(address),
            pods,
            seal: gate::seal_key(),
            plans: Mutex::default(),
        });
        // The first namespace's plan made before the link is given: the page it opens on is
        // drawn from it (a plan of thousands of objects takes a moment; its connections are
        // warm after it).
        if let Some(first) = app.configs.keys().next() {
            let _ = pages::sessions::plan_of(&app, first, true).await;
        }
        let router = pages::router(Arc::clone(&app));
        let url = format!("http://{address}/?token={}", app.gate.token());
        tracing::info!(
            operator = app.operator,
            "console for namespace(s) {} on http://{address}",
            namespaces.join(", "),
        );
        ready(&url);
        let cancel = Arc::clone(&self.settings.cancel);
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move { cancel.stopped().await })
            .await;
        // What was started ends before the process does: its audit lines written, its Lease
        // released.
        for desk in [&live, &dry] {
            desk.stop();
            let _ = desk.finished(requests().finish_within).await;
        }
        store.close().await;
        Ok(served?)
    }
}

/// One audit sink shared by the live and the dry desk, each line written whole.
struct Shared(Arc<Mutex<Box<dyn Audit>>>);

impl Audit for Shared {
    fn judged(
        &mut self,
        cfg: &SessionConfig,
        report: &gc_core::sessions::run::SessionReport,
        time: &str,
    ) -> gc_runtime::Result<()> {
        let mut audit = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        audit.judged(cfg, report, time)
    }
    fn refused(&mut self, line: &gc_runtime::audit::RefusedLine<'_>) -> gc_runtime::Result<()> {
        let mut audit = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        audit.refused(line)
    }
    fn denied(&mut self, line: &gc_runtime::audit::DeniedLine<'_>) -> gc_runtime::Result<()> {
        let mut audit = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        audit.denied(line)
    }
    fn restored(
        &mut self,
        lines: &[gc_runtime::audit::RestoredLine<'_>],
    ) -> gc_runtime::Result<()> {
        let mut audit = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        audit.restored(lines)
    }
}
