//! Which namespaces a run covers: those named (`-n`, repeatable), or every one the identity may
//! list (`-A`) that matches a selector, less some. Each namespace is then run on its own (its
//! own ledger, Lease, plan section, metrics labels and audit lines); one namespace's failure does
//! not stop the others ([`crate::outcome`]).

use gc_core::input::SYSTEM_NAMESPACES;
use gc_core::ports::{ClusterError, Namespaces};

/// The namespaces of a run, before they are resolved ([`Selection::resolve`]).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// The namespaces named, in order (a repeated one counts once); none: the default.
    pub named: Vec<String>,
    /// Every namespace the identity may list instead ([`every`]).
    pub all: bool,
    /// With `all`: only namespaces whose labels match this selector.
    pub selector: Option<String>,
    /// With `all`: namespaces left out.
    pub exclude: Vec<String>,
    /// The default when none is named, before the collector's: the namespace the connection's
    /// context names ([`Selection::in_context`]).
    pub context: Option<String>,
}

impl Selection {
    /// The namespaces named (the default when none is: the context's, else `default`), each
    /// once in the order given; `None` with `all`, whose namespaces come from the cluster.
    #[must_use]
    pub fn named(&self, default: &str) -> Option<Vec<String>> {
        if self.all {
            return None;
        }
        if self.named.is_empty() {
            return Some(vec![self.context.as_deref().unwrap_or(default).to_owned()]);
        }
        let mut named: Vec<String> = Vec::new();
        for ns in &self.named {
            if !named.contains(ns) {
                named.push(ns.clone());
            }
        }
        Some(named)
    }

    /// Whether the selection may cover several namespaces (several named, or `all` however many
    /// match): what a run prints is then a list, one entry per namespace.
    #[must_use]
    pub fn several(&self, default: &str) -> bool {
        self.named(default).is_none_or(|named| named.len() > 1)
    }

    /// The namespaces of the run: the named ones, or with `all` the cluster's ([`every`]).
    ///
    /// # Errors
    /// When the Namespaces cannot be listed (for example a namespaced identity).
    pub async fn resolve(
        &self,
        cluster: &(impl Namespaces + ?Sized),
        default: &str,
    ) -> crate::Result<Vec<String>> {
        match self.named(default) {
            Some(named) => Ok(named),
            None => every(cluster, self.selector.as_deref(), &self.exclude).await,
        }
    }
}

/// Every namespace the identity may list that matches `selector` (a label selector, passed to
/// the API server), less `exclude` and the system namespaces, sorted.
///
/// # Errors
/// When the Namespaces cannot be listed: a namespaced identity (which must name its namespaces
/// instead), a selector the API server refuses, or the API server unavailable.
pub async fn every(
    cluster: &(impl Namespaces + ?Sized),
    selector: Option<&str>,
    exclude: &[String],
) -> crate::Result<Vec<String>> {
    let listed = match cluster.list_namespaces(selector).await {
        Ok(listed) => listed,
        Err(e @ ClusterError::Forbidden { .. }) => {
            return Err(crate::Error::from(e).context(
                "cannot list the cluster's Namespaces for `all_namespaces` (a namespaced install \
                 cannot: name its namespaces with `namespaces`, or use the chart's cluster-wide mode)",
            ));
        }
        // Not a permission: a selector the API server refuses (400), or it is unavailable.
        Err(e) => {
            let picked = selector
                .map(|s| format!(" `namespace_selector` {s:?}"))
                .unwrap_or_default();
            return Err(crate::Error::from(e).context(format!(
                "cannot list the cluster's Namespaces for `all_namespaces`{picked}"
            )));
        }
    };
    let chosen: Vec<String> = listed
        .into_iter()
        .filter(|ns| !SYSTEM_NAMESPACES.contains(&ns.as_str()))
        .filter(|ns| !exclude.contains(ns))
        .collect();
    if chosen.is_empty() {
        tracing::warn!("no namespace matches: nothing to do");
    }
    Ok(chosen)
}
