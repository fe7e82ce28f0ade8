//! The concrete parts behind `gc-core`'s ports, made from what a command's flags give (feature
//! `adapters`): the API server through `gc-k8s` ([`KubeCluster`], [`TokenAccount`]), gc's store
//! and archive sinks through `gc-store` ([`StoreAt`], [`Archives`]), the session table through
//! `gc-store`'s PostgreSQL reader. The rest of the runtime is generic over the ports; this module
//! is the one place that names an adapter, so that wiring a process (connect, open, compose,
//! serve) is read in one room, and an embedder with adapters of its own leaves the feature out.

pub mod archives;
#[cfg(feature = "admin")]
mod serve;

use gc_core::input::SYSTEM_NAMESPACES;
use gc_core::sessions::SessionConfig;
use gc_core::sessions::run::SessionReport;
pub use gc_k8s::{Connection, KubeCluster, TokenAccount, context_namespace};
pub use gc_store::{Archives, SessionTable, Store, StoreAt, TableSpec};

use crate::Context as _;
use crate::audit::Audit;
use crate::clock::SystemClock;
use crate::namespaces::Selection;
use crate::outcome::{NamespaceRun, failed_before};
use crate::pods::{PODS_NAMESPACE, PodCollector, Report};
use crate::sessions::SESSIONS_NAMESPACE;
use crate::{Builder, Settings};
#[cfg(feature = "admin")]
pub use serve::SessionsApi;

/// Connects to the cluster.
///
/// # Errors
/// When the connection cannot be made (the kubeconfig, the credentials, the server).
pub async fn connect(connection: &Connection) -> crate::Result<KubeCluster> {
    gc_k8s::connect(connection)
        .await
        .map_err(|e| crate::Error::Connect(Box::new(e)))
        .context("cannot connect to the cluster")
}

/// Opens the store at `url`, or the embedded SQLite default, each call to it waiting at most
/// [`crate::STORE_TIMEOUT`] for its answer.
///
/// # Errors
/// When the store cannot be opened.
pub async fn open_store(url: Option<&str>) -> crate::Result<Store> {
    open_store_within(url, crate::STORE_TIMEOUT).await
}

/// [`open_store`], each call to the store waiting at most `timeout` for its answer
/// (`store_timeout`).
///
/// # Errors
/// When the store cannot be opened.
pub async fn open_store_within(
    url: Option<&str>,
    timeout: std::time::Duration,
) -> crate::Result<Store> {
    let store = StoreAt(url.map(str::to_owned), timeout);
    store.open().await.context("cannot open the store")
}

/// The stored ledger of `cluster_id` and `namespace`, exactly as stored; `{}` (as the flow reads
/// a missing ledger), with a warning, when there is none.
///
/// # Errors
/// The store's error.
pub async fn export_ledger(
    store: &Store,
    cluster_id: &str,
    namespace: &str,
) -> crate::Result<String> {
    let text = store
        .ledger_json(cluster_id, namespace)
        .await
        .context("cannot read the ledger")?;
    Ok(text.unwrap_or_else(|| {
        let location = store.location();
        tracing::warn!(
            "no ledger of cluster {cluster_id} namespace {namespace} in {location}: exporting the \
             empty ledger"
        );
        "{}".to_owned()
    }))
}

/// `selection` with the namespace the context of `connection` (asked only when no
/// namespace is named) names as the default, as kubectl takes it (for a collector whose
/// default is not its own), logging where it came from.
#[must_use]
pub fn in_context(
    mut selection: Selection,
    connection: impl FnOnce() -> Option<Connection>,
) -> Selection {
    if !selection.named.is_empty() || selection.all {
        return selection;
    }
    match connection().and_then(|c| gc_k8s::context_namespace(&c)) {
        Some((namespace, origin)) => {
            if SYSTEM_NAMESPACES.contains(&namespace.as_str()) {
                tracing::warn!(
                    namespace,
                    "the namespace comes from {origin}; the failed-Pod collector refuses \
                     system namespaces: name one with -n"
                );
            } else {
                tracing::info!(namespace, "namespace from {origin}");
            }
            selection.context = Some(namespace);
        }
        None => tracing::info!(
            namespace = "default",
            "no kubeconfig context names a namespace"
        ),
    }
    selection
}

/// The collector of the command line and of `serve`: the API server, a store at a URL, the
/// archive sink its flags name, the system clock.
pub type KubePodCollector = PodCollector<KubeCluster, StoreAt, Archives, SystemClock>;

/// Where a failed-Pod collector's parts are, as a command's flags give them (either of the
/// first two may have failed to be made: an unreadable token file, an invalid archive URL).
pub struct PodSources {
    /// How to reach the cluster.
    pub connection: crate::Result<Connection>,
    /// Where archives go.
    pub sink: crate::Result<Archives>,
    /// The store.
    pub store: StoreAt,
}

/// The failed-Pod collector of `sources`, connected once, acting as `settings` say, and the
/// namespaces of `selection` (its cluster asked for `-A`'s). When a part cannot be made, the
/// cluster not reached or its Namespaces not listed, each namespace known fails at stage `run`
/// with its metrics, alert and Event (when the cluster was reached), as a run that met the
/// error does (with none known, the webhook is alerted once): `Err` holds those runs and the
/// error.
///
/// # Errors
/// As said.
pub async fn connect_pods(
    sources: PodSources,
    settings: Settings,
    selection: &Selection,
) -> Result<(KubePodCollector, Vec<String>), (Vec<NamespaceRun<Report>>, crate::Error)> {
    // The errors in the order a run meets them: the connection's, the sink's, the cluster's.
    let (cluster, error) = match (sources.connection, sources.sink) {
        (Err(error), _) => (None, error),
        (Ok(connection), Err(error)) => (connect(&connection).await.ok(), error),
        (Ok(connection), Ok(sink)) => match connect(&connection).await {
            Err(error) => (None, error),
            Ok(cluster) => {
                let parts = Builder::new(settings.clone()).cluster(cluster.clone());
                match parts.store(sources.store).sink(sink).pods() {
                    Ok(collector) => match selection.resolve(&cluster, PODS_NAMESPACE).await {
                        Ok(namespaces) => return Ok((collector, namespaces)),
                        Err(error) => (Some(cluster), error),
                    },
                    Err(error) => (Some(cluster), error.into()),
                }
            }
        },
    };
    let scope = (selection, PODS_NAMESPACE);
    Err(before_first("pods", &settings, scope, cluster.as_ref(), error).await)
}

/// Each namespace of `selection` known (named, or listed through `cluster`) failed with `error`
/// before its run, as a run that met it does ([`failed_before`]); and `error`.
async fn before_first<R>(
    collector: &str,
    settings: &Settings,
    (selection, default): (&Selection, &str),
    cluster: Option<&KubeCluster>,
    error: crate::Error,
) -> (Vec<NamespaceRun<R>>, crate::Error) {
    let known = match (selection.named(default), cluster) {
        (Some(named), _) => named,
        (None, Some(c)) => selection.resolve(c, default).await.unwrap_or_default(),
        (None, None) => Vec::new(),
    };
    let (events, started) = (settings.events_hook(), std::time::Instant::now());
    let d = &settings.delivery;
    let failed = failed_before(collector, d, &events, cluster, &known, started, &error);
    (failed.await, error)
}

/// Where the session collector's inputs are, as a command's flags give them (either of the first
/// two may have failed to be made: an unreadable token file, an unusable database URL).
pub struct SessionSources {
    /// How to reach the cluster.
    pub connection: crate::Result<Connection>,
    /// The session database's URL.
    pub database_url: crate::Result<String>,
    /// The session table in it.
    pub table: TableSpec,
}

/// The cluster and the session table of `sources`, connected and checked; when that fails, the
/// cluster too if it was connected before the table failed (to post Events with).
///
/// # Errors
/// As said.
pub async fn connect_sessions(
    sources: SessionSources,
) -> Result<(KubeCluster, SessionTable), (Option<KubeCluster>, crate::Error)> {
    let url = sources.database_url.map_err(|e| (None, e))?;
    let connection = sources.connection.map_err(|e| (None, e))?;
    let cluster = connect(&connection).await.map_err(|e| (None, e))?;
    match gc_store::connect_sessions(&url, sources.table).await {
        Ok(table) => Ok((cluster, table)),
        Err(e) => {
            let error = crate::Error::from(e).context("cannot open the session table");
            Err((Some(cluster), error))
        }
    }
}

/// The collection of each namespace of `selection` ([`SessionCollector::collect`]), each with
/// its settings from `config`, over `sources`, gc's store `store` (`None`: the embedded one) and
/// `sink`, as `settings` say. Anything that fails before the first namespace's run (a
/// connection, the table, the Namespaces list, a namespace's settings, the store, the settings)
/// fails every namespace known at stage `run`, with its metrics, alert and Event (when the
/// cluster was reached): the error is returned.
///
/// # Errors
/// As said.
pub async fn run_selected(
    sources: SessionSources,
    store: Option<&str>,
    sink: Archives,
    settings: Settings,
    selection: &Selection,
    config: impl Fn(&str) -> crate::Result<SessionConfig>,
    audit: &mut (dyn Audit + Send),
) -> crate::Result<Vec<NamespaceRun<SessionReport>>> {
    // Settings no run could use are refused before anything is connected to.
    settings.check()?;
    let scope = (selection, SESSIONS_NAMESPACE);
    let failed = async |cluster: Option<&KubeCluster>, error| {
        before_first::<SessionReport>("sessions", &settings, scope, cluster, error)
            .await
            .1
    };
    let (cluster, table) = match connect_sessions(sources).await {
        Ok(connected) => connected,
        Err((cluster, error)) => return Err(failed(cluster.as_ref(), error).await),
    };
    let opened = async {
        let namespaces = selection.resolve(&cluster, SESSIONS_NAMESPACE).await?;
        let configs = namespaces.iter().map(|ns| config(ns));
        let configs = configs.collect::<crate::Result<Vec<_>>>()?;
        let opened = open_store_within(store, settings.store_timeout);
        Ok((configs, opened.await?))
    };
    let (configs, store) = match opened.await {
        Ok(opened) => opened,
        Err(error) => {
            table.close().await;
            return Err(failed(Some(&cluster), error).await);
        }
    };
    let parts = Builder::new(settings).cluster(cluster).directory(table);
    let collector = parts.store(store).sink(sink).sessions()?;
    let runs = collector.collect(&configs, audit).await;
    let (_, table, store, _) = collector.into_parts();
    table.close().await;
    store.close().await;
    Ok(runs)
}
