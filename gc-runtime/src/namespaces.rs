//! Which namespaces a run over "every namespace" (`-A`) covers.

use gc_core::input::SYSTEM_NAMESPACES;
use gc_core::ports::ClusterError;

/// Every namespace the identity may list that matches `selector` (a label selector, passed to
/// the API server), less `exclude` and the system namespaces, sorted.
///
/// # Errors
/// When the Namespaces cannot be listed: a namespaced identity (which must name its namespaces
/// instead), a selector the API server refuses, or the API server unavailable.
pub async fn every(
    cluster: &gc_k8s::KubeCluster,
    selector: Option<&str>,
    exclude: &[String],
) -> anyhow::Result<Vec<String>> {
    let listed = match gc_k8s::list_namespaces(cluster, selector).await {
        Ok(listed) => listed,
        Err(e @ ClusterError::Forbidden { .. }) => {
            return Err(anyhow::Error::new(e).context(
                "cannot list the cluster's Namespaces for --all-namespaces (a namespaced install \
                 cannot: name its namespaces with -n, or use the chart's cluster-wide mode)",
            ));
        }
        // Not a permission: a selector the API server refuses (400), or it is unavailable.
        Err(e) => {
            let picked = selector
                .map(|s| format!(" --namespace-selector {s:?}"))
                .unwrap_or_default();
            return Err(anyhow::Error::new(e).context(format!(
                "cannot list the cluster's Namespaces for --all-namespaces{picked}"
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
