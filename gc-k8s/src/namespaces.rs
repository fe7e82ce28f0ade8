//! [`list_namespaces`]: the names of a cluster's Namespaces, for runs over many of them.

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::ListParams;

use gc_core::ports::ClusterError;

use crate::KubeCluster;
use crate::errors::{Call, cluster_error};

/// Namespaces per page.
const PAGE: u32 = 500;

/// The names of the cluster's Namespaces that `selector` (a label selector, passed to the server)
/// matches, every one when `None`, sorted. Namespaces being deleted are left out: nothing new
/// should start in them.
///
/// # Errors
/// A failed list, mapped as for [`gc_core::ports::Cluster`]: `Forbidden` when the identity may
/// not list Namespaces (a namespaced install can only name its namespaces), `Other` saying so
/// for a selector the API server cannot parse (400).
pub async fn list_namespaces(
    cluster: &KubeCluster,
    selector: Option<&str>,
) -> Result<Vec<String>, ClusterError> {
    let api: Api<Namespace> = Api::all(cluster.client().clone());
    let mut params = ListParams::default().limit(PAGE);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let mut names = Vec::new();
    loop {
        let page = api
            .list_metadata(&params)
            .await
            .map_err(|e| cluster_error(e, Call::list("namespaces", "(all namespaces)")))?;
        names.extend(
            page.items
                .into_iter()
                .filter(|n| n.metadata.deletion_timestamp.is_none())
                .filter_map(|n| n.metadata.name),
        );
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    names.sort();
    Ok(names)
}

#[async_trait::async_trait]
impl gc_core::ports::Namespaces for KubeCluster {
    async fn list_namespaces(&self, selector: Option<&str>) -> Result<Vec<String>, ClusterError> {
        list_namespaces(self, selector).await
    }
    async fn list_all_pod_metadata(
        &self,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<gc_core::ports::Page, ClusterError> {
        KubeCluster::list_all_pod_metadata(self, limit, continue_token).await
    }
}
