//! Metadata-only lists and fenced deletes of StreamSpace's four kinds through `ObjectCluster`,
//! on the real server.

use std::collections::BTreeSet;

use gc_core::ports::{ClusterError, ObjectCluster, Preconditions};
use gc_core::sessions::Kind;
use gc_k8s::KubeCluster;
use gc_testbed::TestNamespace;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::{Result, admin, item_names, json, namespace};

/// The label every StreamSpace session object carries, and the collector selects on.
pub(crate) const SELECTOR: &str = "app=streamspace-session";

/// StreamSpace's labels for session `id`.
fn labels(id: &str, app: &str) -> Value {
    json!({ "app": app, "session": id, "user": "alice", "template": "firefox" })
}

/// StreamSpace's kind `kind` (one of [`Kind::streamspace`]).
pub(crate) fn kind(kind: &str) -> Result<Kind> {
    Ok(Kind::streamspace()
        .into_iter()
        .find(|k| k.kind == kind)
        .ok_or("not a StreamSpace kind")?)
}

/// Creates one object of `kind` named `name` for session `name`, labelled `app=<app>`, as the
/// StreamSpace agent does (a PVC is `<id>-home`; here the name is taken as given).
pub(crate) async fn create(ns: &TestNamespace, kind: &str, name: &str, app: &str) -> Result {
    create_in(ns, gc_testbed::SESSION_GROUP, kind, name, app).await
}

/// [`create`], a `Session` of `group` (StreamSpace installs the definition under two).
pub(crate) async fn create_of(ns: &TestNamespace, kind: &Kind, name: &str, app: &str) -> Result {
    create_in(ns, &kind.group, &kind.kind, name, app).await
}

async fn create_in(ns: &TestNamespace, group: &str, kind: &str, name: &str, app: &str) -> Result {
    let labels = labels(name, app);
    let meta = json!({ "name": name, "labels": labels });
    let post = PostParams::default();
    match kind {
        "Deployment" => {
            let object: Deployment = serde_json::from_value(json!({
                "metadata": meta,
                "spec": {
                    "replicas": 1,
                    "selector": { "matchLabels": { "session": name } },
                    "template": {
                        "metadata": { "labels": labels },
                        "spec": { "containers": [{ "name": "session", "image": "busybox" }] },
                    },
                },
            }))?;
            ns.api::<Deployment>().create(&post, &object).await?;
        }
        "Service" => {
            // Headless: no ClusterIP taken from the test bed's small range.
            let object: Service = serde_json::from_value(json!({
                "metadata": meta,
                "spec": {
                    "clusterIP": "None",
                    "selector": { "session": name },
                    "ports": [{ "port": 3000 }],
                },
            }))?;
            ns.api::<Service>().create(&post, &object).await?;
        }
        "PersistentVolumeClaim" => {
            let object: PersistentVolumeClaim = serde_json::from_value(json!({
                "metadata": meta,
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": "10Gi" } },
                },
            }))?;
            ns.api::<PersistentVolumeClaim>()
                .create(&post, &object)
                .await?;
        }
        "Session" => {
            ns.bed().install_session_crd().await?;
            let resource = gc_testbed::session_resource_in(group);
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": resource.api_version,
                "kind": resource.kind,
                "metadata": meta,
                "spec": { "user": "alice", "template": "firefox", "state": "running" },
            }))?;
            Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), &resource)
                .create(&post, &object)
                .await?;
        }
        other => return Err(format!("no fixture for {other}").into()),
    }
    Ok(())
}

/// Every page of `kind` matching [`SELECTOR`], `limit` per page: the pages' JSON.
pub(crate) async fn all_pages(
    cluster: &KubeCluster,
    kind: &Kind,
    namespace: &str,
    limit: u32,
) -> Result<Vec<Value>> {
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = cluster
            .list_metadata(kind, namespace, SELECTOR, limit, token.as_deref())
            .await?;
        pages.push(json(&page.text)?);
        token = page.continue_token;
        if token.is_none() || pages.len() > 100 {
            return Ok(pages);
        }
    }
}

/// Every object of `kind` matching [`SELECTOR`], as listed.
pub(crate) async fn items(
    cluster: &KubeCluster,
    kind: &Kind,
    namespace: &str,
) -> Result<Vec<Value>> {
    let pages = all_pages(cluster, kind, namespace, 500).await?;
    Ok(pages
        .iter()
        .flat_map(|p| p["items"].as_array().cloned().unwrap_or_default())
        .collect())
}

/// `uid` and `resourceVersion` of the object `name` in a metadata list of `kind`.
pub(crate) async fn fence(
    cluster: &KubeCluster,
    kind: &Kind,
    namespace: &str,
    name: &str,
) -> Result<Preconditions> {
    let item = items(cluster, kind, namespace)
        .await?
        .into_iter()
        .find(|i| i["metadata"]["name"] == name)
        .ok_or_else(|| format!("{} {name} is not listed", kind.kind))?;
    let text = |key: &str| {
        item["metadata"][key]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Ok(Preconditions {
        uid: text("uid"),
        resource_version: text("resourceVersion"),
    })
}

/// Eight matching objects and two others of `kind` in a fresh namespace.
async fn populated(kind_name: &str, prefix: &str) -> Result<(TestNamespace, BTreeSet<String>)> {
    let ns = namespace(prefix).await?;
    let mut expected = BTreeSet::new();
    for i in 0..8 {
        let name = format!("alice-firefox-{i:08x}");
        create(&ns, kind_name, &name, "streamspace-session").await?;
        expected.insert(name);
    }
    create(&ns, kind_name, "other-app", "something-else").await?;
    create(&ns, kind_name, "other-app-2", "streamspace-api").await?;
    Ok((ns, expected))
}

/// Pages of 3 over 8 matching objects: 3 pages, each object once, metadata only.
async fn check_metadata_pages(kind_name: &str, prefix: &str) -> Result {
    let (ns, expected) = populated(kind_name, prefix).await?;
    let kind = kind(kind_name)?;
    let pages = all_pages(&admin(&ns), &kind, ns.name(), 3).await?;
    assert_eq!(pages.len(), 3, "8 {kind_name}s in pages of 3");
    let mut seen = Vec::new();
    for page in &pages {
        assert_eq!(page["kind"], "PartialObjectMetadataList", "{page}");
        let items = page["items"].as_array().ok_or("a list has items")?;
        assert!(items.len() <= 3, "{page}");
        for item in items {
            assert_eq!(item["kind"], "PartialObjectMetadata", "{item}");
            assert_eq!(item["spec"], Value::Null, "{item}");
            assert_eq!(item["status"], Value::Null, "{item}");
            let meta = &item["metadata"];
            assert!(meta["uid"].is_string() && meta["resourceVersion"].is_string());
            assert!(meta["creationTimestamp"].is_string(), "{meta}");
            assert_eq!(meta["labels"]["app"], "streamspace-session");
            assert_eq!(meta["labels"]["session"], meta["name"]);
        }
        seen.extend(item_names(page));
    }
    assert_eq!(seen.len(), 8, "no object twice: {seen:?}");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), expected);
    Ok(())
}

/// Whole objects by a set-based selector (the run's read-ahead): exactly the sessions named,
/// each whole (spec included) and as a GET reads it but for `apiVersion` and `kind`, which a
/// built-in kind's items lack and a custom kind's carry.
async fn check_whole_lists(kind_name: &str, prefix: &str) -> Result {
    let (ns, expected) = populated(kind_name, prefix).await?;
    let kind = kind(kind_name)?;
    let cluster = admin(&ns);
    let wanted: Vec<&String> = expected.iter().step_by(3).collect();
    let ids: Vec<&str> = wanted.iter().map(|s| s.as_str()).collect();
    let selector = format!("{SELECTOR},session in ({})", ids.join(","));
    let page = cluster
        .list_objects(&kind, ns.name(), &selector, 500, None)
        .await?;
    let list: Value = serde_json::from_slice(&page.text)?;
    let items = list["items"].as_array().ok_or("a list has items")?;
    let mut names: Vec<String> = item_names(&list);
    names.sort();
    let mut expected_names: Vec<String> = wanted.iter().map(|s| (*s).clone()).collect();
    expected_names.sort();
    assert_eq!(names, expected_names);
    for item in items {
        let name = item["metadata"]["name"].as_str().ok_or("a name")?;
        let got = cluster
            .get_object(&kind, ns.name(), name)
            .await?
            .ok_or("there")?;
        let mut got: Value = serde_json::from_slice(&got)?;
        assert!(got["spec"].is_object(), "{got}");
        if kind.group.is_empty() || kind.group == "apps" {
            assert_eq!(item["apiVersion"], Value::Null, "{item}");
            let fields = got.as_object_mut().ok_or("an object")?;
            fields.remove("apiVersion");
            fields.remove("kind");
        }
        assert_eq!(item, &got);
    }
    Ok(())
}

#[tokio::test]
async fn deployments_are_read_whole_by_session_lists() -> Result {
    check_whole_lists("Deployment", "whole-deploy").await
}

#[tokio::test]
async fn sessions_are_read_whole_by_session_lists() -> Result {
    check_whole_lists("Session", "whole-session").await
}

#[tokio::test]
async fn deployments_are_listed_by_metadata_in_pages() -> Result {
    check_metadata_pages("Deployment", "meta-deploy").await
}

#[tokio::test]
async fn services_are_listed_by_metadata_in_pages() -> Result {
    check_metadata_pages("Service", "meta-svc").await
}

#[tokio::test]
async fn claims_are_listed_by_metadata_in_pages() -> Result {
    check_metadata_pages("PersistentVolumeClaim", "meta-pvc").await
}

#[tokio::test]
async fn sessions_are_listed_by_metadata_in_pages() -> Result {
    check_metadata_pages("Session", "meta-session").await
}

#[tokio::test]
async fn a_kind_the_server_does_not_serve_is_not_found() -> Result {
    let ns = namespace("meta-missing").await?;
    let missing = Kind {
        group: "nonexistent.example.com".into(),
        version: "v1alpha1".into(),
        kind: "Session".into(),
        plural: "sessions".into(),
    };
    let cluster = admin(&ns);
    let error = cluster
        .list_metadata(&missing, ns.name(), SELECTOR, 3, None)
        .await
        .expect_err("no such resource");
    assert!(matches!(error, ClusterError::NotFound(_)), "{error:?}");
    let fence = Preconditions {
        uid: "u".into(),
        resource_version: "1".into(),
    };
    let error = cluster
        .delete_object(&missing, ns.name(), "s", &fence, true)
        .await
        .expect_err("no such resource");
    assert!(matches!(error, ClusterError::NotFound(_)), "{error:?}");

    // A namespace without objects (or not even created) is an empty list, not NotFound.
    let page = cluster
        .list_metadata(&kind("Service")?, "gc-no-such-namespace", SELECTOR, 3, None)
        .await?;
    assert!(item_names(&json(&page.text)?).is_empty());
    assert_eq!(page.continue_token, None);
    Ok(())
}

/// A stale fence is refused (dry run or not), a dry run leaves the object, a real delete
/// removes it, and a second delete finds nothing.
async fn check_fenced_delete(kind_name: &str, prefix: &str) -> Result {
    let ns = namespace(prefix).await?;
    let kind = kind(kind_name)?;
    let cluster = admin(&ns);
    create(&ns, kind_name, "s-1", "streamspace-session").await?;
    let old = fence(&cluster, &kind, ns.name(), "s-1").await?;
    // Any write bumps the resourceVersion: a label added with a merge patch.
    let patch = kube::api::Patch::Merge(json!({ "metadata": { "labels": { "touched": "yes" } } }));
    let resource = kube::discovery::ApiResource {
        group: kind.group.clone(),
        version: kind.version.clone(),
        api_version: if kind.group.is_empty() {
            kind.version.clone()
        } else {
            format!("{}/{}", kind.group, kind.version)
        },
        kind: kind.kind.clone(),
        plural: kind.plural.clone(),
    };
    Api::<DynamicObject>::namespaced_with(ns.client().clone(), ns.name(), &resource)
        .patch("s-1", &Default::default(), &patch)
        .await?;
    let current = fence(&cluster, &kind, ns.name(), "s-1").await?;
    assert_ne!(old, current);

    let other_uid = Preconditions {
        uid: "00000000-0000-0000-0000-000000000000".into(),
        ..current.clone()
    };
    for (what, stale) in [("stale resourceVersion", &old), ("other uid", &other_uid)] {
        for dry_run in [true, false] {
            let error = cluster
                .delete_object(&kind, ns.name(), "s-1", stale, dry_run)
                .await
                .expect_err(what);
            assert!(
                matches!(error, ClusterError::Changed { status: 409, .. }),
                "{kind_name}, {what}, dry run {dry_run}: {error:?}"
            );
        }
    }

    cluster
        .delete_object(&kind, ns.name(), "s-1", &current, true)
        .await?;
    assert_eq!(
        fence(&cluster, &kind, ns.name(), "s-1").await?,
        current,
        "a dry run changes nothing"
    );

    cluster
        .delete_object(&kind, ns.name(), "s-1", &current, false)
        .await?;
    let left = items(&cluster, &kind, ns.name()).await?;
    if kind_name == "PersistentVolumeClaim" {
        // The API server's admission adds `kubernetes.io/pvc-protection` to every claim; only the
        // controller manager (absent here) removes it once no Pod uses the claim. Until then the
        // claim stays, marked for deletion, with a new resourceVersion.
        let [claim] = left.as_slice() else {
            return Err(format!("one claim left, not {left:?}").into());
        };
        assert!(
            claim["metadata"]["deletionTimestamp"].is_string(),
            "{claim}"
        );
        assert_eq!(
            claim["metadata"]["finalizers"],
            json!(["kubernetes.io/pvc-protection"])
        );
        let error = cluster
            .delete_object(&kind, ns.name(), "s-1", &current, false)
            .await
            .expect_err("marking it changed the resourceVersion");
        assert!(
            matches!(error, ClusterError::Changed { status: 409, .. }),
            "{error:?}"
        );
        return Ok(());
    }
    assert_eq!(left, Vec::<Value>::new(), "removed at once");
    let error = cluster
        .delete_object(&kind, ns.name(), "s-1", &current, false)
        .await
        .expect_err("already gone");
    assert!(matches!(error, ClusterError::NotFound(_)), "{error:?}");
    Ok(())
}

#[tokio::test]
async fn deployment_deletes_are_fenced() -> Result {
    check_fenced_delete("Deployment", "del-deploy").await
}

#[tokio::test]
async fn service_deletes_are_fenced() -> Result {
    check_fenced_delete("Service", "del-svc").await
}

#[tokio::test]
async fn claim_deletes_are_fenced() -> Result {
    check_fenced_delete("PersistentVolumeClaim", "del-pvc").await
}

#[tokio::test]
async fn session_deletes_are_fenced() -> Result {
    check_fenced_delete("Session", "del-session").await
}

/// `get_object` answers the whole object (spec included), `None` once it is gone.
#[tokio::test]
async fn an_object_is_read_whole() -> Result {
    let ns = namespace("objects-get").await?;
    create(&ns, "Deployment", "s-whole", "streamspace-session").await?;
    let gc = admin(&ns);
    let deployments = kind("Deployment")?;
    let text = gc
        .get_object(&deployments, ns.name(), "s-whole")
        .await?
        .ok_or("the Deployment is there")?;
    let object = json(&text)?;
    assert_eq!(object["spec"]["replicas"], 1, "{object}");
    assert_eq!(object["metadata"]["labels"]["session"], "s-whole");
    assert!(
        gc.get_object(&deployments, ns.name(), "none")
            .await?
            .is_none()
    );
    Ok(())
}

/// PersistentVolumes through `Volumes`: read, listed by label, patched behind `test` ops (a
/// failed one is `Changed` and writes nothing), in dry run too.
#[tokio::test]
async fn volumes_are_read_listed_and_patched_behind_fences() -> Result {
    use gc_core::ports::Volumes;
    let ns = namespace("objects-pv").await?;
    let name = format!("pv-{}", ns.name());
    let volumes: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(ns.client().clone());
    let pv = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"gc.example.com/retained": ns.name()}},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/gc-pv"}, "persistentVolumeReclaimPolicy": "Delete",
        },
    }))?;
    volumes.create(&PostParams::default(), &pv).await?;
    let gc = admin(&ns);
    let read = json(&gc.get_volume(&name).await?.ok_or("the volume is there")?)?;
    let version = read["metadata"]["resourceVersion"].clone();
    let selector = format!("gc.example.com/retained={}", ns.name());
    let listed = gc.list_volumes(&selector, 10, None).await?;
    assert_eq!(
        item_names(&json(&listed.text)?),
        std::slice::from_ref(&name)
    );
    let retain = |policy_was: &str| {
        json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "test", "path": "/spec/persistentVolumeReclaimPolicy", "value": policy_was},
            {"op": "replace", "path": "/spec/persistentVolumeReclaimPolicy", "value": "Retain"},
        ])
        .to_string()
    };
    let policy = async || -> Result<Value> {
        let now = json(&gc.get_volume(&name).await?.ok_or("there")?)?;
        Ok(now["spec"]["persistentVolumeReclaimPolicy"].clone())
    };
    let fenced = gc
        .patch_volume(&name, retain("Retain").as_bytes(), false)
        .await;
    assert!(
        matches!(fenced, Err(ClusterError::Changed { .. })),
        "{fenced:?}"
    );
    gc.patch_volume(&name, retain("Delete").as_bytes(), true)
        .await?;
    assert_eq!(policy().await?, "Delete", "a dry run changes nothing");
    gc.patch_volume(&name, retain("Delete").as_bytes(), false)
        .await?;
    assert_eq!(policy().await?, "Retain");
    assert!(gc.get_volume("pv-none").await?.is_none());
    volumes.delete(&name, &Default::default()).await?;
    Ok(())
}
