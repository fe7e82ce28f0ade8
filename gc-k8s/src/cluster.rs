//! [`KubeCluster`]: the cluster port on a kube client, speaking raw JSON text with the server.

use async_trait::async_trait;
use gc_core::input::is_dns_label;
use gc_core::ports::{Cluster, ClusterError, Page, PodQuery, Preconditions};
use kube::Client;
use kube::api::{DeleteParams, GetParams, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::core::Request;
use serde::Deserialize;

use crate::errors::{Call, chain, cluster_error};

/// The field manager recorded in `managedFields` for the collector's patches.
pub const FIELD_MANAGER: &str = "gc";

/// A real cluster, through a kube [`Client`]: the failed-Pod collector's [`Cluster`], the
/// session collector's [`ObjectCluster`](gc_core::ports::ObjectCluster) and the run
/// [`Lock`](gc_core::ports::Lock) (each impl documents its own guarantees).
///
/// Every answer is the server's JSON text, untouched: lists go straight to
/// [`gc_core::pods::inventory::read`], single Pods to the core's readers.
///
/// # Guarantees
/// - Every error is mapped once, by HTTP status code, as [`Cluster`] requires; a 403 names the
///   verb, `pods` and the namespace.
/// - `delete_pod` answers `None` when the Pod was removed in that request (for a dry run: would
///   have been), and otherwise the Pod as the server answered, marked for deletion and held by
///   its finalizers.
/// - Deletes always carry the `uid` and `resourceVersion` preconditions and propagate in the
///   background; dry runs are server-side (`dryRun=All`), the same request otherwise.
/// - Namespaces and names are checked before they become part of a URL path.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster").finish_non_exhaustive()
    }
}

impl KubeCluster {
    /// Wraps a client (for example one from [`crate::connect`], or a test's).
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Builds and sends `request`; returns the answer's text.
    async fn text(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
        call: Call<'_>,
    ) -> Result<Vec<u8>, ClusterError> {
        let request = request.map_err(|e| ClusterError::Other(chain(&e)))?;
        self.send(request, call).await
    }

    /// Sends `request`; returns the answer's text, or the error mapped for `call`.
    pub(crate) async fn send(
        &self,
        request: http::Request<Vec<u8>>,
        call: Call<'_>,
    ) -> Result<Vec<u8>, ClusterError> {
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| cluster_error(e, call))?;
        Ok(text.into_bytes())
    }
}

/// A GET's answer, a missing object (404) as `None`.
pub(crate) fn found(
    answer: Result<Vec<u8>, ClusterError>,
) -> Result<Option<Vec<u8>>, ClusterError> {
    match answer {
        Ok(text) => Ok(Some(text)),
        Err(ClusterError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The request applying the JSON patch `patch` (JSON text) to `name` in `collection`, as gc's
/// field manager; with `dry_run`, server-side dry run.
pub(crate) fn json_patch(
    collection: Request,
    name: &str,
    patch: &[u8],
    dry_run: bool,
) -> Result<http::Request<Vec<u8>>, ClusterError> {
    let ops: json_patch::Patch = serde_json::from_slice(patch)
        .map_err(|e| ClusterError::Other(format!("not a JSON patch: {e}")))?;
    let params = PatchParams {
        dry_run,
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    collection
        .patch(name, &params, &Patch::Json::<()>(ops))
        .map_err(|e| ClusterError::Other(chain(&e)))
}

/// `/api/v1/namespaces/NAMESPACE/pods`, for a namespace that is a DNS label.
fn pods_path(namespace: &str) -> Result<Request, ClusterError> {
    check_namespace(namespace)?;
    Ok(Request::new(format!("/api/v1/namespaces/{namespace}/pods")))
}

/// A namespace is a DNS label: it never needs escaping in a path.
pub(crate) fn check_namespace(namespace: &str) -> Result<(), ClusterError> {
    if is_dns_label(namespace) {
        Ok(())
    } else {
        Err(ClusterError::Other(format!(
            "invalid namespace {namespace:?}: not a DNS label"
        )))
    }
}

pub(crate) use gc_core::input::is_dns_subdomain;

/// An object's name (of a Pod, a Lease, ...) is a DNS subdomain: it never needs escaping in a
/// path. `what` names the object in the error (`pod`, `lease`).
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), ClusterError> {
    if is_dns_subdomain(name) {
        Ok(())
    } else {
        Err(ClusterError::Other(format!(
            "invalid {what} name {name:?}: not a DNS subdomain"
        )))
    }
}

/// `None` for an empty selector.
pub(crate) fn selector(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// The parts of a list's text this adapter reads itself.
#[derive(Deserialize)]
struct ListHead {
    #[serde(default)]
    metadata: ListMeta,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

/// What a delete's answer says about the object: a `Status`, or the Pod as last stored.
#[derive(Deserialize)]
struct Deleted {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: DeletedMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DeletedMeta {
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
}

/// Whether a delete's answer shows the object removed at once (or, for a dry run, that it would
/// have been): a `Status`, or the Pod marked for deletion with grace 0 and no finalizer left.
///
/// The API server answers every Pod delete with the Pod, also when it removed it from storage;
/// grace 0 and no finalizers is exactly its condition for removing it in the same request.
fn gone_at_once(answer: &[u8]) -> Result<bool, ClusterError> {
    let deleted: Deleted = serde_json::from_slice(answer)
        .map_err(|e| ClusterError::Other(format!("unreadable delete answer: {e}")))?;
    if deleted.kind.as_deref() == Some("Status") {
        return Ok(true);
    }
    let meta = deleted.metadata;
    Ok(meta.deletion_timestamp.is_some()
        && meta.deletion_grace_period_seconds == Some(0)
        && meta.finalizers.unwrap_or_default().is_empty())
}

/// `metadata.continue` of a list's text, `None` when empty or absent.
pub(crate) fn continue_token(text: &[u8]) -> Result<Option<String>, ClusterError> {
    let head: ListHead = serde_json::from_slice(text)
        .map_err(|e| ClusterError::Other(format!("unreadable list: {e}")))?;
    Ok(head.metadata.continue_token.filter(|t| !t.is_empty()))
}

/// A delete fenced by `preconditions` (uid and resourceVersion), propagating in the background
/// (with `orphan`, leaving what the object owns in place).
pub(crate) fn delete_params(
    preconditions: &Preconditions,
    dry_run: bool,
    orphan: bool,
) -> DeleteParams {
    let propagation = if orphan {
        PropagationPolicy::Orphan
    } else {
        PropagationPolicy::Background
    };
    DeleteParams {
        dry_run,
        preconditions: Some(kube::api::Preconditions {
            uid: Some(preconditions.uid.clone()),
            resource_version: Some(preconditions.resource_version.clone()),
        }),
        propagation_policy: Some(propagation),
        ..DeleteParams::default()
    }
}

/// A list's text as a page, with its `metadata.continue`.
pub(crate) fn page(text: Vec<u8>) -> Result<Page, ClusterError> {
    let continue_token = continue_token(&text)?;
    Ok(Page {
        text,
        continue_token,
    })
}

#[async_trait]
impl Cluster for KubeCluster {
    async fn list_pods(
        &self,
        query: &PodQuery,
        continue_token_in: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let call = Call::list("pods", &query.namespace);
        let params = ListParams {
            label_selector: selector(&query.label_selector),
            field_selector: selector(&query.field_selector),
            limit: (query.limit > 0).then_some(query.limit),
            continue_token: continue_token_in.map(str::to_owned),
            ..ListParams::default()
        };
        let request = pods_path(&query.namespace)?.list(&params);
        page(self.text(request, call).await?)
    }

    async fn list_pod_metadata(
        &self,
        namespace: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let pods = gc_core::sessions::Kind {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
        };
        gc_core::ports::ObjectCluster::list_metadata(
            self,
            &pods,
            namespace,
            "",
            limit,
            continue_token,
        )
        .await
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        check_name("pod", name)?;
        let call = Call {
            verb: "get",
            resource: "pods",
            namespace,
        };
        let request = pods_path(namespace)?.get(name, &GetParams::default());
        found(self.text(request, call).await)
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        check_name("pod", name)?;
        let call = Call {
            verb: "patch",
            resource: "pods",
            namespace,
        };
        let request = json_patch(pods_path(namespace)?, name, patch, dry_run)?;
        self.send(request, call).await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        check_name("pod", name)?;
        let call = Call {
            verb: "delete",
            resource: "pods",
            namespace,
        };
        let params = delete_params(preconditions, dry_run, false);
        let request = pods_path(namespace)?.delete(name, &params);
        let text = self.text(request, call).await?;
        Ok((!gone_at_once(&text)?).then_some(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_is_read_from_the_list_metadata() {
        let text = br#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"abc"},"items":[{"metadata":{"name":"x"}}]}"#;
        assert_eq!(continue_token(text), Ok(Some("abc".to_owned())));
        let last = br#"{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]}"#;
        assert_eq!(continue_token(last), Ok(None));
        let empty = br#"{"metadata":{"continue":""},"items":[]}"#;
        assert_eq!(continue_token(empty), Ok(None));
        assert!(matches!(
            continue_token(b"[1]"),
            Err(ClusterError::Other(_))
        ));
    }

    #[test]
    fn a_delete_answer_tells_gone_from_held() {
        let gone = br#"{"kind":"Pod","metadata":{"name":"p","deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":0}}"#;
        assert_eq!(gone_at_once(gone), Ok(true));
        let held = br#"{"kind":"Pod","metadata":{"name":"p","deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":0,"finalizers":["x/pin"]}}"#;
        assert_eq!(gone_at_once(held), Ok(false));
        let graceful = br#"{"kind":"Pod","metadata":{"name":"p","deletionTimestamp":"2026-01-01T00:00:30Z","deletionGracePeriodSeconds":30}}"#;
        assert_eq!(gone_at_once(graceful), Ok(false));
        let unmarked = br#"{"kind":"Pod","metadata":{"name":"p"}}"#;
        assert_eq!(gone_at_once(unmarked), Ok(false));
        let status = br#"{"kind":"Status","status":"Success","details":{"name":"p"}}"#;
        assert_eq!(gone_at_once(status), Ok(true));
    }

    #[test]
    fn names_and_namespaces_never_change_the_path() {
        assert!(check_name("pod", "web-1.x").is_ok());
        for bad in ["", ".", "..", "a/b", "a?b", "A", "a%2F"] {
            assert!(check_name("pod", bad).is_err(), "{bad:?}");
        }
        assert!(pods_path("team-a").is_ok());
        assert!(pods_path("a/b").is_err());
    }
}
