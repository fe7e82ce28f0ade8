//! [`ObjectCluster`] on [`KubeCluster`]: metadata-only lists of any namespaced kind, fenced
//! deletes, for the orphaned-session collector.

use async_trait::async_trait;
use gc_core::input::is_dns_label;
use gc_core::ports::{ClusterError, ObjectCluster, ObjectCreator, Page, Preconditions, Volumes};
use gc_core::sessions::Kind;
use http::HeaderValue;
use http::header::ACCEPT;
use kube::api::{GetParams, ListParams};
use kube::core::Request;

use crate::KubeCluster;
use crate::cluster::{
    FIELD_MANAGER, check_name, check_namespace, delete_params, found, is_dns_subdomain, json_patch,
    page, selector,
};
use crate::errors::{Call, chain};

/// The `Accept` of a metadata-only list: a `PartialObjectMetadataList`, or the plain list from a
/// server that cannot convert (the items then carry their spec too; readers take only metadata).
const METADATA_LIST_ACCEPT: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";

/// The collection URL of `kind` in `namespace`: `/api/VERSION/...` for the core group (`""`),
/// `/apis/GROUP/VERSION/...` otherwise. Every part is checked so that none changes the path.
fn collection(kind: &Kind, namespace: &str) -> Result<Request, ClusterError> {
    check_namespace(namespace)?;
    let group_ok = kind.group.is_empty() || is_dns_subdomain(&kind.group);
    if !group_ok || !is_dns_label(&kind.version) || !is_dns_label(&kind.plural) {
        return Err(ClusterError::Other(format!(
            "invalid kind {}/{} {} (plural {:?})",
            kind.group, kind.version, kind.kind, kind.plural
        )));
    }
    let root = if kind.group.is_empty() {
        format!("/api/{}", kind.version)
    } else {
        format!("/apis/{}/{}", kind.group, kind.version)
    };
    Ok(Request::new(format!(
        "{root}/namespaces/{namespace}/{}",
        kind.plural
    )))
}

/// A request that could not be built is the caller's fault, not the server's.
fn built(
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<http::Request<Vec<u8>>, ClusterError> {
    request.map_err(|e| ClusterError::Other(chain(&e)))
}

/// The metadata-only list request for one page.
fn list_request(
    kind: &Kind,
    namespace: &str,
    label_selector: &str,
    limit: u32,
    continue_token: Option<&str>,
) -> Result<http::Request<Vec<u8>>, ClusterError> {
    let params = ListParams {
        label_selector: selector(label_selector),
        limit: (limit > 0).then_some(limit),
        continue_token: continue_token.map(str::to_owned),
        ..ListParams::default()
    };
    let mut request = built(collection(kind, namespace)?.list_metadata(&params))?;
    request
        .headers_mut()
        .insert(ACCEPT, HeaderValue::from_static(METADATA_LIST_ACCEPT));
    Ok(request)
}

impl KubeCluster {
    /// One page of every Pod of every namespace the identity may list, whatever its labels and
    /// phase, metadata only (a `PartialObjectMetadataList`'s JSON text): what finds pins in
    /// namespaces a run does not cover. Needs `list` on Pods cluster-wide.
    ///
    /// # Errors
    /// Mapped as for [`gc_core::ports::Cluster`]; a 403 names `pods` in all namespaces.
    pub async fn list_all_pod_metadata(
        &self,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let params = ListParams {
            limit: (limit > 0).then_some(limit),
            continue_token: continue_token.map(str::to_owned),
            ..ListParams::default()
        };
        let mut request = built(Request::new("/api/v1/pods").list_metadata(&params))?;
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static(METADATA_LIST_ACCEPT));
        page(
            self.send(request, Call::list("pods", "(all namespaces)"))
                .await?,
        )
    }
}

/// The fenced delete request: uid and resourceVersion preconditions, background propagation (or,
/// for an owner, `Orphan`).
fn delete_request(
    kind: &Kind,
    namespace: &str,
    name: &str,
    (preconditions, orphan): (&Preconditions, bool),
    dry_run: bool,
) -> Result<http::Request<Vec<u8>>, ClusterError> {
    check_name(&kind.kind, name)?;
    let params = delete_params(preconditions, dry_run, orphan);
    built(collection(kind, namespace)?.delete(name, &params))
}

/// # Guarantees
/// - `get_object` answers the whole object's JSON text untouched, `None` when it does not exist;
///   `list_objects` a whole list's, by the same label selector rules as `list_metadata`.
/// - `list_metadata` answers the server's JSON text untouched (a `PartialObjectMetadataList`:
///   full `metadata`, no `spec` or `status`); a kind the server does not serve (its CRD is not
///   installed) is [`ClusterError::NotFound`].
/// - `delete_object` always carries the `uid` and `resourceVersion` preconditions and
///   propagates in the background (`delete_owner`: `Orphan`, what it owns left in place); a dry
///   run is the same request with `dryRun: ["All"]`.
/// - Errors are mapped as for [`gc_core::ports::Cluster`]; a 403 names the verb, the kind's
///   plural and the namespace.
/// - Group, version, plural, namespace and name are checked before they become part of a path.
#[async_trait]
impl ObjectCluster for KubeCluster {
    async fn list_metadata(
        &self,
        kind: &Kind,
        namespace: &str,
        label_selector: &str,
        limit: u32,
        continue_token_in: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let call = Call::list(&kind.plural, namespace);
        let request = list_request(kind, namespace, label_selector, limit, continue_token_in)?;
        page(self.send(request, call).await?)
    }

    async fn list_objects(
        &self,
        kind: &Kind,
        namespace: &str,
        label_selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let params = ListParams {
            label_selector: selector(label_selector),
            limit: (limit > 0).then_some(limit),
            continue_token: continue_token.map(str::to_owned),
            ..ListParams::default()
        };
        let request = built(collection(kind, namespace)?.list(&params))?;
        page(
            self.send(request, Call::list(&kind.plural, namespace))
                .await?,
        )
    }

    async fn get_object(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        check_name(&kind.kind, name)?;
        let call = Call {
            verb: "get",
            resource: &kind.plural,
            namespace,
        };
        let request = built(collection(kind, namespace)?.get(name, &GetParams::default()))?;
        found(self.send(request, call).await)
    }

    async fn delete_object(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        self.delete(kind, namespace, name, (preconditions, false), dry_run)
            .await
    }

    async fn delete_owner(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        self.delete(kind, namespace, name, (preconditions, true), dry_run)
            .await
    }
}

impl KubeCluster {
    /// The fenced delete ([`delete_request`]), sent.
    async fn delete(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        fence: (&Preconditions, bool),
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        let call = Call {
            verb: "delete",
            resource: &kind.plural,
            namespace,
        };
        let request = delete_request(kind, namespace, name, fence, dry_run)?;
        self.send(request, call).await.map(drop)
    }
}

/// # Guarantees
/// Mapped as for [`gc_core::ports::Cluster`]; an object of that name already there is
/// [`ClusterError::Changed`] (409); kind, namespace and name checked as for the other calls.
#[async_trait]
impl ObjectCreator for KubeCluster {
    async fn create_object(
        &self,
        kind: &Kind,
        namespace: &str,
        object: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        let call = Call {
            verb: "create",
            resource: &kind.plural,
            namespace,
        };
        let params = kube::api::PostParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.to_owned()),
        };
        let request = built(collection(kind, namespace)?.create(&params, object.to_vec()))?;
        self.send(request, call).await
    }
}

/// Where an error of a PersistentVolume call says it was (they are cluster-scoped).
const CLUSTER_SCOPE: &str = "(cluster)";

/// # Guarantees
/// PersistentVolumes at `/api/v1/persistentvolumes`; names checked before they become part of the
/// path; a patch is a JSON patch (its `test` ops fence it, a failed one is
/// [`ClusterError::Changed`]); a dry run is the same request with `dryRun: ["All"]`.
#[async_trait]
impl Volumes for KubeCluster {
    async fn get_volume(&self, name: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        check_name("PersistentVolume", name)?;
        let call = Call {
            verb: "get",
            resource: "persistentvolumes",
            namespace: CLUSTER_SCOPE,
        };
        let request = built(Request::new(VOLUMES).get(name, &GetParams::default()))?;
        found(self.send(request, call).await)
    }

    async fn list_volumes(
        &self,
        label_selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, ClusterError> {
        let params = ListParams {
            label_selector: selector(label_selector),
            limit: (limit > 0).then_some(limit),
            continue_token: continue_token.map(str::to_owned),
            ..ListParams::default()
        };
        let request = built(Request::new(VOLUMES).list(&params))?;
        page(
            self.send(request, Call::list("persistentvolumes", CLUSTER_SCOPE))
                .await?,
        )
    }

    async fn patch_volume(
        &self,
        name: &str,
        patch: &[u8],
        dry_run: bool,
    ) -> Result<Vec<u8>, ClusterError> {
        check_name("PersistentVolume", name)?;
        let call = Call {
            verb: "patch",
            resource: "persistentvolumes",
            namespace: CLUSTER_SCOPE,
        };
        let request = json_patch(Request::new(VOLUMES), name, patch, dry_run)?;
        self.send(request, call).await
    }

    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClusterError> {
        crate::cluster::check_namespace(namespace)?;
        check_name("PersistentVolumeClaim", name)?;
        let call = Call {
            verb: "get",
            resource: "persistentvolumeclaims",
            namespace,
        };
        let claims = format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims");
        let request = built(Request::new(claims).get(name, &GetParams::default()))?;
        found(self.send(request, call).await)
    }
}

/// The PersistentVolumes' collection.
const VOLUMES: &str = "/api/v1/persistentvolumes";

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, version: &str, plural: &str) -> Kind {
        Kind {
            group: group.into(),
            version: version.into(),
            kind: "Thing".into(),
            plural: plural.into(),
        }
    }

    fn uri(request: &http::Request<Vec<u8>>) -> String {
        request.uri().to_string()
    }

    #[test]
    fn core_and_named_groups_have_their_roots() -> Result<(), ClusterError> {
        let services = kind("", "v1", "services");
        let list = list_request(&services, "ns", "app=x", 3, Some("tok"))?;
        assert_eq!(
            uri(&list),
            "/api/v1/namespaces/ns/services?&labelSelector=app%3Dx&limit=3&continue=tok"
        );
        assert_eq!(list.method(), http::Method::GET);
        assert_eq!(list.headers()[ACCEPT], METADATA_LIST_ACCEPT);

        let sessions = kind("stream.space", "v1alpha1", "sessions");
        let first = list_request(&sessions, "ns", "", 0, None)?;
        assert_eq!(
            uri(&first),
            "/apis/stream.space/v1alpha1/namespaces/ns/sessions?"
        );
        Ok(())
    }

    #[test]
    fn deletes_are_fenced_and_background() -> Result<(), ClusterError> {
        let fence = Preconditions {
            uid: "u-1".into(),
            resource_version: "42".into(),
        };
        let deployments = kind("apps", "v1", "deployments");
        for dry_run in [false, true] {
            let request = delete_request(&deployments, "ns", "s-1", (&fence, false), dry_run)?;
            assert_eq!(request.method(), http::Method::DELETE);
            assert_eq!(
                uri(&request),
                "/apis/apps/v1/namespaces/ns/deployments/s-1?"
            );
            let body: serde_json::Value = serde_json::from_slice(request.body())
                .map_err(|e| ClusterError::Other(e.to_string()))?;
            assert_eq!(body["preconditions"]["uid"], "u-1");
            assert_eq!(body["preconditions"]["resourceVersion"], "42");
            assert_eq!(body["propagationPolicy"], "Background");
            let owner = delete_request(&deployments, "ns", "s-1", (&fence, true), dry_run)?;
            let body: serde_json::Value = serde_json::from_slice(owner.body())
                .map_err(|e| ClusterError::Other(e.to_string()))?;
            assert_eq!(body["propagationPolicy"], "Orphan");
            assert_eq!(body["preconditions"]["uid"], "u-1");
            let dry = if dry_run {
                serde_json::json!(["All"])
            } else {
                serde_json::Value::Null
            };
            assert_eq!(body["dryRun"], dry);
        }
        Ok(())
    }

    #[test]
    fn no_part_of_a_kind_or_name_changes_the_path() {
        let fence = Preconditions {
            uid: String::new(),
            resource_version: String::new(),
        };
        for bad in [
            kind("a/b", "v1", "x"),
            kind("apps", "v1/..", "x"),
            kind("apps", "v1", "x/y"),
            kind("apps", "v1", ""),
            kind("Apps", "v1", "x"),
        ] {
            assert!(list_request(&bad, "ns", "", 1, None).is_err(), "{bad:?}");
        }
        let good = kind("apps", "v1", "deployments");
        assert!(list_request(&good, "a/b", "", 1, None).is_err());
        assert!(delete_request(&good, "ns", "../x", (&fence, false), false).is_err());
        assert!(delete_request(&good, "ns", "x?y", (&fence, false), false).is_err());
    }
}
