//! A ServiceAccount granted exactly `gc_k8s::rbac::required_rules()` can make every call of both
//! collectors and take both collectors' run locks, and is refused anything else (another Lease
//! among them).

use gc_core::ports::{Cluster, ClusterError, Lock, ObjectCluster, PodQuery};
use gc_core::sessions::Kind;
use gc_k8s::KubeCluster;
use gc_k8s::rbac::{PODS_LEASE, SESSIONS_LEASE, required_rules};
use gc_testbed::FailedPod;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::objects::{SELECTOR, create_of, fence, items};
use crate::{Result, admin, item_names, json, namespace};

#[tokio::test]
async fn the_required_rules_allow_every_collector_call_and_nothing_else() -> Result {
    let ns = namespace("rbac-gc").await?;
    let kinds = Kind::streamspace();
    for kind in &kinds {
        create_of(&ns, kind, "s-1", "streamspace-session").await?;
        create_of(&ns, kind, "s-2", "streamspace-session").await?;
    }
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    ns.grant("gc", required_rules()).await?;
    let gc = KubeCluster::new(ns.service_account_client("gc").await?);
    let root = admin(&ns);

    // The session collector: list every kind, delete (dry run, then for real).
    for kind in &kinds {
        let page = gc.list_metadata(kind, ns.name(), SELECTOR, 1, None).await?;
        assert_eq!(item_names(&json(&page.text)?).len(), 1, "{}", kind.kind);
        // Read whole, to archive its manifest before the delete.
        assert!(gc.get_object(kind, ns.name(), "s-1").await?.is_some());
        assert!(page.continue_token.is_some());
        for name in ["s-1", "s-2"] {
            let fence = fence(&root, kind, ns.name(), name).await?;
            let dry_run = name == "s-1";
            gc.delete_object(kind, ns.name(), name, &fence, dry_run)
                .await?;
        }
        let left = items(&root, kind, ns.name()).await?;
        let live: Vec<_> = left
            .iter()
            .filter(|i| i["metadata"]["deletionTimestamp"].is_null())
            .map(|i| i["metadata"]["name"].clone())
            .collect();
        assert_eq!(live, [json!("s-1")], "{}: {left:?}", kind.kind);
    }

    // The failed-Pod collector: list, get, patch, delete.
    let query = PodQuery {
        namespace: ns.name().to_owned(),
        label_selector: String::new(),
        field_selector: "status.phase=Failed".to_owned(),
        limit: 10,
    };
    assert_eq!(
        item_names(&json(&gc.list_pods(&query, None).await?.text)?),
        ["p"]
    );
    let pod = json(
        &gc.get_pod(ns.name(), "p")
            .await?
            .ok_or("the pod is there")?,
    )?;
    let label = json!([{ "op": "add", "path": "/metadata/labels", "value": { "a": "b" } }]);
    let patched = json(
        &gc.patch_pod(ns.name(), "p", label.to_string().as_bytes(), false)
            .await?,
    )?;
    let fence = gc_core::ports::Preconditions {
        uid: pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        resource_version: patched["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    };
    assert_eq!(gc.delete_pod(ns.name(), "p", &fence, false).await?, None);

    // The run lock, each collector's own Lease: create, renew (update), release (update).
    for lease in [PODS_LEASE, SESSIONS_LEASE] {
        assert!(gc.try_acquire(ns.name(), lease, "run-a", 60).await?);
        assert!(gc.try_acquire(ns.name(), lease, "run-a", 60).await?);
        gc.release(ns.name(), lease, "run-a").await?;
        assert!(gc.try_acquire(ns.name(), lease, "run-b", 60).await?);
    }
    // No other Lease: not even read (`get` is granted by name only).
    let error = gc
        .try_acquire(ns.name(), "gc-pods-prod", "run-a", 60)
        .await
        .expect_err("only the collectors' Leases are granted");
    assert!(
        matches!(&error, ClusterError::Forbidden { verb, resource, .. }
            if verb == "get" && resource == "leases"),
        "{error:?}"
    );

    // Nothing else: Secrets, another kind, another namespace.
    let secrets = Kind {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        plural: "secrets".into(),
    };
    let error = gc
        .list_metadata(&secrets, ns.name(), "", 10, None)
        .await
        .expect_err("secrets are not granted");
    let ClusterError::Forbidden {
        verb,
        resource,
        namespace: refused_in,
        ..
    } = &error
    else {
        panic!("not Forbidden: {error:?}");
    };
    assert_eq!(
        (verb.as_str(), resource.as_str(), refused_in.as_str()),
        ("list", "secrets", ns.name())
    );
    let config_maps = Kind {
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
        ..secrets
    };
    let error = gc
        .list_metadata(&config_maps, ns.name(), "", 10, None)
        .await
        .expect_err("configmaps are not granted");
    assert!(matches!(error, ClusterError::Forbidden { .. }), "{error:?}");
    let elsewhere = namespace("rbac-gc-other").await?;
    let error = gc
        .list_metadata(&kinds[0], elsewhere.name(), SELECTOR, 10, None)
        .await
        .expect_err("the Role is namespaced");
    assert!(matches!(error, ClusterError::Forbidden { .. }), "{error:?}");
    let error = gc
        .try_acquire(elsewhere.name(), PODS_LEASE, "run-a", 60)
        .await
        .expect_err("the Role is namespaced");
    assert!(
        matches!(&error, ClusterError::Forbidden { verb, resource, .. }
            if verb == "get" && resource == "leases"),
        "{error:?}"
    );
    Ok(())
}
