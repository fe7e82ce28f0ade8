//! The request API served over the API server, the session table and the store its flags name.

use std::sync::Arc;

use gc_core::ports::RestoreAccount;

use super::TokenAccount;
use crate::Builder;
use crate::requests::{RequestOptions, Requests};
use crate::serve::api::{ApiOptions, Serving, check_address, serve_desk};
use crate::sessions::SESSIONS_NAMESPACE;

/// What the session collector's request API is served with: the run command's parts (as
/// [`super::run_selected`] takes them) and the API's own options.
pub struct SessionsApi {
    /// Where the cluster and the session table are.
    pub sources: super::SessionSources,
    /// gc's store (`None`: the embedded one).
    pub store: Option<String>,
    /// The archive sink.
    pub sink: super::Archives,
    /// The runs' settings, as a scheduled run's. A requested run waits for the namespace's
    /// Lease at most half of [`RequestOptions::answer_within`], so that a Lease another process
    /// holds is answered `409` rather than left running.
    pub settings: crate::Settings,
    /// How requests are queued, and their grace.
    pub requests: RequestOptions,
    /// How callers are checked.
    pub api: ApiOptions,
    /// Where the requested runs' audit records go.
    pub audit: Box<dyn crate::audit::Audit>,
    /// What `/v1/status` names as the version.
    pub version: String,
    /// TLS ([`crate::serve::tls::server_config`]); without it, plain HTTP on a loopback address only.
    pub tls: Option<crate::serve::tls::TlsConfig>,
    /// The ServiceAccount (`namespace`, `name`) restores act as ([`TokenAccount`]); `None`:
    /// restore is not offered.
    pub restore_account: Option<(String, String)>,
    /// Where `serve` shows its metrics: the API's counters are shown there too (`None`: not
    /// shown).
    pub served: Option<Arc<crate::metrics::Served>>,
}

impl SessionsApi {
    /// Serves the request API on `listener` until the settings' stop ([`crate::Settings::cancel`],
    /// the one every run honours) comes: connects the cluster, the
    /// session table and the store, resolves `selection` once (a namespace created later is
    /// served after a restart), takes each namespace's settings from `config`, then answers.
    /// Plain HTTP, so only on a loopback address. When the stop comes, requests still queued end
    /// stopped and the server finishes the calls in progress.
    ///
    /// # Errors
    /// A listener that is not on a loopback address (usage), or what fails before the first
    /// call is answered: a connection, the Namespaces list, a namespace's settings, the store.
    pub async fn serve(
        self,
        listener: std::net::TcpListener,
        selection: &crate::namespaces::Selection,
        config: impl Fn(&str) -> crate::Result<gc_core::sessions::SessionConfig>,
    ) -> crate::Result<()> {
        let address = listener.local_addr()?;
        check_address(address, self.tls.is_some())?;
        let connection = self.sources.connection.as_ref().ok().cloned();
        let (cluster, table) = super::connect_sessions(self.sources)
            .await
            .map_err(|(_, e)| e)?;
        let default = SESSIONS_NAMESPACE;
        let namespaces = selection.resolve(&cluster, default).await?;
        let configs = namespaces.iter().map(|ns| config(ns));
        let configs = configs.collect::<crate::Result<Vec<_>>>()?;
        let store =
            super::open_store_within(self.store.as_deref(), self.settings.store_timeout).await?;
        let cancel = Arc::clone(&self.settings.cancel);
        let stop = async move { cancel.stopped().await };
        let mut settings = self.settings;
        settings.lock.wait = (settings.lock.wait).min(self.requests.answer_within / 2);
        let restore = (self.restore_account)
            .zip(connection)
            .map(|((ns, name), connection)| {
                let account = TokenAccount::new(cluster.clone(), connection, &ns, &name);
                Box::new(account) as Box<dyn RestoreAccount<_>>
            });
        let access = cluster.clone();
        let parts = Builder::new(settings).cluster(cluster).directory(table);
        let collector = parts.store(store).sink(self.sink).sessions()?;
        let desk = Requests::new(collector, configs, self.requests, self.audit);
        tracing::info!(
            "serving the request API on {address} for namespace(s) {}",
            namespaces.join(", ")
        );
        let serving = Serving {
            access,
            restore,
            options: self.api,
            version: self.version,
            tls: self.tls,
            served: self.served,
        };
        serve_desk(listener, desk, serving, stop).await
    }
}
