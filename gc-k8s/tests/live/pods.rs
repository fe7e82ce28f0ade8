//! Lists, reads and fenced writes through `KubeCluster`, and their errors, on the real server.

use std::collections::BTreeSet;

use gc_core::PodInputs;
use gc_core::pods::facts::Rules;
use gc_core::ports::{Cluster, ClusterError, PodQuery, Preconditions};
use gc_k8s::{KubeCluster, failed_pod_query, list_inventory};
use gc_testbed::FailedPod;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

use crate::{COLLECT, PIN, Result, admin, item_names, json, namespace};

/// `uid` and `resourceVersion` of a Pod's JSON text.
fn preconditions(pod: &Value) -> Preconditions {
    Preconditions {
        uid: pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        resource_version: pod["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// The Pod as stored now.
async fn stored(cluster: &KubeCluster, ns: &str, name: &str) -> Result<Value> {
    let text = cluster
        .get_pod(ns, name)
        .await?
        .ok_or("the pod is missing")?;
    json(&text)
}

fn patch(ops: Value) -> Vec<u8> {
    ops.to_string().into_bytes()
}

#[tokio::test]
async fn pages_return_every_matching_pod_once_and_no_other() -> Result {
    let ns = namespace("list-pages").await?;
    let pods = ns.api::<Pod>();
    let mut expected = BTreeSet::new();
    for i in 0..30 {
        let name = format!("match-{i:02}");
        FailedPod::new(&name)
            .label(COLLECT, "true")
            .create(&pods)
            .await?;
        expected.insert(name);
    }
    FailedPod::new("succeeded")
        .label(COLLECT, "true")
        .phase("Succeeded")
        .terminated_container("main", 0)
        .create(&pods)
        .await?;
    FailedPod::new("unlabelled").create(&pods).await?;
    FailedPod::new("label-false")
        .label(COLLECT, "false")
        .create(&pods)
        .await?;
    FailedPod::new("running")
        .label(COLLECT, "true")
        .phase("Running")
        .running_container("main")
        .create(&pods)
        .await?;

    let cfg = PodInputs {
        namespace: ns.name().to_owned(),
        ..PodInputs::default()
    }
    .validate()?;
    let query = failed_pod_query(&cfg, 7);
    let cluster = admin(&ns);
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = cluster.list_pods(&query, token.as_deref()).await?;
        pages += 1;
        let list = json(&page.text)?;
        assert_eq!(list["kind"], "PodList");
        let names = item_names(&list);
        assert!(names.len() <= 7, "page {pages} has {} pods", names.len());
        seen.extend(names);
        token = page.continue_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 5, "30 pods in pages of 7");
    assert_eq!(seen.len(), 30, "no pod twice: {seen:?}");
    assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), expected);

    let rules = Rules {
        namespace: ns.name(),
        collect_label: COLLECT,
        pin: PIN,
        protect: None,
        exclude: None,
    };
    let mut progress = Vec::new();
    let inventory = list_inventory(&cluster, &query, rules, 1000, &mut |p, n| {
        progress.push((p, n));
    })
    .await?;
    assert_eq!(inventory.count, 30);
    assert_eq!(inventory.pods.len(), 30);
    assert_eq!(progress, [(1, 7), (2, 14), (3, 21), (4, 28), (5, 30)]);

    let capped = list_inventory(&cluster, &query, rules, 10, &mut |_, _| {}).await?;
    assert_eq!((capped.count, capped.pods.len()), (30, 10));
    Ok(())
}

#[tokio::test]
async fn an_empty_selection_is_one_empty_page() -> Result {
    let ns = namespace("list-empty").await?;
    FailedPod::new("unlabelled")
        .create(&ns.api::<Pod>())
        .await?;
    let query = PodQuery {
        namespace: ns.name().to_owned(),
        label_selector: format!("{COLLECT}=true"),
        field_selector: "status.phase=Failed".to_owned(),
        limit: 7,
    };
    let page = admin(&ns).list_pods(&query, None).await?;
    assert_eq!(page.continue_token, None);
    assert!(item_names(&json(&page.text)?).is_empty());
    Ok(())
}

#[tokio::test]
async fn get_returns_the_pod_text_or_none() -> Result {
    let ns = namespace("get").await?;
    FailedPod::new("present").create(&ns.api::<Pod>()).await?;
    let cluster = admin(&ns);
    assert_eq!(cluster.get_pod(ns.name(), "missing").await?, None);
    let pod = stored(&cluster, ns.name(), "present").await?;
    assert_eq!(pod["metadata"]["name"], "present");
    assert_eq!(pod["status"]["phase"], "Failed");
    Ok(())
}

#[tokio::test]
async fn a_failed_test_op_is_changed_422_and_a_passing_one_patches() -> Result {
    let ns = namespace("patch").await?;
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let cluster = admin(&ns);
    let pod = stored(&cluster, ns.name(), "p").await?;
    let fence = preconditions(&pod);

    let stale = patch(json!([
        { "op": "test", "path": "/metadata/uid", "value": "not-the-uid" },
        { "op": "add", "path": "/metadata/finalizers", "value": [PIN] },
    ]));
    let error = cluster
        .patch_pod(ns.name(), "p", &stale, false)
        .await
        .expect_err("a failed test op is refused");
    assert!(
        matches!(error, ClusterError::Changed { status: 422, .. }),
        "{error:?}"
    );

    let pin = patch(json!([
        { "op": "test", "path": "/metadata/uid", "value": fence.uid },
        { "op": "test", "path": "/metadata/resourceVersion", "value": fence.resource_version },
        { "op": "test", "path": "/status/phase", "value": "Failed" },
        { "op": "add", "path": "/metadata/finalizers", "value": [PIN] },
    ]));
    let dry = json(&cluster.patch_pod(ns.name(), "p", &pin, true).await?)?;
    assert_eq!(dry["metadata"]["finalizers"], json!([PIN]));
    let after_dry = stored(&cluster, ns.name(), "p").await?;
    assert_eq!(after_dry["metadata"]["finalizers"], Value::Null);
    assert_eq!(
        preconditions(&after_dry),
        fence,
        "a dry run changes nothing"
    );

    let pinned = json(&cluster.patch_pod(ns.name(), "p", &pin, false).await?)?;
    assert_eq!(pinned["metadata"]["finalizers"], json!([PIN]));
    let again = cluster
        .patch_pod(ns.name(), "p", &pin, false)
        .await
        .expect_err("the resourceVersion test no longer holds");
    assert!(
        matches!(again, ClusterError::Changed { status: 422, .. }),
        "{again:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_stale_resource_version_in_the_patched_object_is_changed_409() -> Result {
    let ns = namespace("patch-rv").await?;
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let cluster = admin(&ns);
    let rv = preconditions(&stored(&cluster, ns.name(), "p").await?).resource_version;
    let bump = patch(json!([{ "op": "add", "path": "/metadata/labels", "value": { "a": "b" } }]));
    cluster.patch_pod(ns.name(), "p", &bump, false).await?;
    let stale = patch(json!([
        { "op": "replace", "path": "/metadata/resourceVersion", "value": rv },
        { "op": "add", "path": "/metadata/labels/c", "value": "d" },
    ]));
    let error = cluster
        .patch_pod(ns.name(), "p", &stale, false)
        .await
        .expect_err("stale resourceVersion");
    assert!(
        matches!(error, ClusterError::Changed { status: 409, .. }),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_patch_that_is_not_a_json_patch_is_refused_before_sending() -> Result {
    let ns = namespace("patch-bad").await?;
    let error = admin(&ns)
        .patch_pod(ns.name(), "p", br#"{"metadata":{}}"#, false)
        .await
        .expect_err("not a JSON patch");
    assert!(
        matches!(&error, ClusterError::Other(m) if m.starts_with("not a JSON patch")),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn delete_with_stale_preconditions_is_changed_409() -> Result {
    let ns = namespace("delete-stale").await?;
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let cluster = admin(&ns);
    let old = preconditions(&stored(&cluster, ns.name(), "p").await?);
    let bump = patch(json!([{ "op": "add", "path": "/metadata/labels", "value": { "a": "b" } }]));
    cluster.patch_pod(ns.name(), "p", &bump, false).await?;
    let current = preconditions(&stored(&cluster, ns.name(), "p").await?);

    for (what, fence) in [
        ("stale resourceVersion", old.clone()),
        (
            "other uid",
            Preconditions {
                uid: "00000000-0000-0000-0000-000000000000".into(),
                ..current.clone()
            },
        ),
    ] {
        for dry_run in [true, false] {
            let error = cluster
                .delete_pod(ns.name(), "p", &fence, dry_run)
                .await
                .expect_err(what);
            assert!(
                matches!(error, ClusterError::Changed { status: 409, .. }),
                "{what} (dry run {dry_run}): {error:?}"
            );
        }
    }
    assert_eq!(
        preconditions(&stored(&cluster, ns.name(), "p").await?),
        current
    );
    Ok(())
}

#[tokio::test]
async fn a_dry_run_delete_leaves_the_pod_and_a_real_one_removes_it() -> Result {
    let ns = namespace("delete").await?;
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let cluster = admin(&ns);
    let fence = preconditions(&stored(&cluster, ns.name(), "p").await?);

    // A Failed Pod without finalizers is removed in the delete request (grace 0): a dry run says
    // so and changes nothing.
    let dry = cluster.delete_pod(ns.name(), "p", &fence, true).await?;
    assert_eq!(dry, None, "a live delete would remove it at once");
    let still = stored(&cluster, ns.name(), "p").await?;
    assert_eq!(preconditions(&still), fence);
    assert_eq!(still["metadata"]["deletionTimestamp"], Value::Null);

    let gone = cluster.delete_pod(ns.name(), "p", &fence, false).await?;
    assert_eq!(gone, None, "removed at once");
    assert_eq!(cluster.get_pod(ns.name(), "p").await?, None);

    let error = cluster
        .delete_pod(ns.name(), "p", &fence, false)
        .await
        .expect_err("already gone");
    assert!(matches!(error, ClusterError::NotFound(_)), "{error:?}");
    let error = cluster
        .patch_pod(ns.name(), "p", b"[]", false)
        .await
        .expect_err("already gone");
    assert!(matches!(error, ClusterError::NotFound(_)), "{error:?}");
    Ok(())
}

#[tokio::test]
async fn a_pinned_pod_stays_deleting_until_the_pin_is_released() -> Result {
    let ns = namespace("delete-pinned").await?;
    FailedPod::new("p")
        .finalizer(PIN)
        .create(&ns.api::<Pod>())
        .await?;
    let cluster = admin(&ns);
    let fence = preconditions(&stored(&cluster, ns.name(), "p").await?);

    let dry = cluster.delete_pod(ns.name(), "p", &fence, true).await?;
    let dry = json(&dry.ok_or("held by the pin")?)?;
    assert!(dry["metadata"]["deletionTimestamp"].is_string());
    let unmarked = stored(&cluster, ns.name(), "p").await?;
    assert_eq!(unmarked["metadata"]["deletionTimestamp"], Value::Null);

    let answer = cluster.delete_pod(ns.name(), "p", &fence, false).await?;
    let answer = json(&answer.ok_or("held by the pin")?)?;
    assert!(answer["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(answer["metadata"]["finalizers"], json!([PIN]));
    assert_eq!(answer["metadata"]["uid"], fence.uid.as_str());

    let deleting = stored(&cluster, ns.name(), "p").await?;
    let release = patch(json!([
        { "op": "test", "path": "/metadata/uid", "value": fence.uid },
        { "op": "test", "path": "/metadata/resourceVersion",
          "value": deleting["metadata"]["resourceVersion"] },
        { "op": "test", "path": "/metadata/finalizers", "value": [PIN] },
        { "op": "remove", "path": "/metadata/finalizers" },
    ]));
    cluster.patch_pod(ns.name(), "p", &release, false).await?;
    assert_eq!(cluster.get_pod(ns.name(), "p").await?, None);
    Ok(())
}

/// Only a failed `test` op is "the object changed"; a 422 from validation (adding a finalizer
/// to a Pod being deleted) is an error that must be counted and alerted on.
#[tokio::test]
async fn a_validation_422_is_an_error_not_changed() -> Result {
    let ns = namespace("invalid").await?;
    FailedPod::new("p")
        .finalizer("example.com/keep")
        .create(&ns.api::<Pod>())
        .await?;
    let cluster = admin(&ns);
    let fence = preconditions(&stored(&cluster, ns.name(), "p").await?);
    cluster.delete_pod(ns.name(), "p", &fence, false).await?;
    let deleting = stored(&cluster, ns.name(), "p").await?;
    let add = patch(json!([
        { "op": "test", "path": "/metadata/uid", "value": fence.uid },
        { "op": "test", "path": "/metadata/resourceVersion",
          "value": deleting["metadata"]["resourceVersion"] },
        { "op": "add", "path": "/metadata/finalizers/-", "value": PIN },
    ]));
    let error = cluster
        .patch_pod(ns.name(), "p", &add, false)
        .await
        .expect_err("no new finalizers on a deleting Pod");
    assert!(
        matches!(&error, ClusterError::Other(m) if m.contains("422")),
        "{error:?}"
    );
    let stale = patch(json!([
        { "op": "test", "path": "/metadata/resourceVersion", "value": "1" },
        { "op": "remove", "path": "/metadata/finalizers" },
    ]));
    let error = cluster
        .patch_pod(ns.name(), "p", &stale, false)
        .await
        .expect_err("a stale resourceVersion test");
    assert!(
        matches!(&error, ClusterError::Changed { status: 422, message } if message.contains("test op failed")),
        "{error:?}"
    );
    let release = patch(json!([{ "op": "remove", "path": "/metadata/finalizers" }]));
    cluster.patch_pod(ns.name(), "p", &release, false).await?;
    Ok(())
}

/// The metadata list that recovery reads holds every Pod of the namespace, whatever its labels
/// and phase, with its finalizers.
#[tokio::test]
async fn the_metadata_list_holds_every_pod_with_its_finalizers() -> Result {
    let ns = namespace("metadata").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("pinned-unlabelled")
        .finalizer(PIN)
        .create(&pods)
        .await?;
    FailedPod::new("pending")
        .phase("Pending")
        .label("any", "x")
        .create(&pods)
        .await?;
    let cluster = admin(&ns);
    let mut names = Vec::new();
    let mut token = None;
    loop {
        let page = cluster
            .list_pod_metadata(ns.name(), 1, token.as_deref())
            .await?;
        let list = json(&page.text)?;
        for item in list["items"].as_array().ok_or("items")? {
            assert!(item.get("status").is_none(), "metadata only: {item}");
            names.push((
                item["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                item["metadata"]["finalizers"].clone(),
            ));
        }
        match page.continue_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        names,
        [
            ("pending".to_owned(), Value::Null),
            ("pinned-unlabelled".to_owned(), json!([PIN])),
        ]
    );
    let p = stored(&cluster, ns.name(), "pinned-unlabelled").await?;
    let release = patch(json!([
        { "op": "test", "path": "/metadata/resourceVersion", "value": p["metadata"]["resourceVersion"] },
        { "op": "remove", "path": "/metadata/finalizers" },
    ]));
    cluster
        .patch_pod(ns.name(), "pinned-unlabelled", &release, false)
        .await?;
    Ok(())
}

#[tokio::test]
async fn forbidden_names_the_verb_the_resource_and_the_namespace() -> Result {
    let ns = namespace("forbidden").await?;
    FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let fence = preconditions(&stored(&admin(&ns), ns.name(), "p").await?);
    let cluster = KubeCluster::new(ns.service_account_client("nobody").await?);
    let query = PodQuery {
        namespace: ns.name().to_owned(),
        label_selector: String::new(),
        field_selector: String::new(),
        limit: 10,
    };
    let error = cluster.list_pods(&query, None).await.expect_err("no grant");
    let ClusterError::Forbidden {
        verb,
        resource,
        namespace,
        message,
    } = &error
    else {
        panic!("not Forbidden: {error:?}");
    };
    assert_eq!(
        (verb.as_str(), resource.as_str(), namespace.as_str()),
        ("list", "pods", ns.name())
    );
    assert!(
        message.contains("cannot list resource \"pods\""),
        "{message}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "forbidden: cannot list pods in namespace {}: {message}",
            ns.name()
        )
    );

    ns.grant(
        "lister",
        vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["list".into(), "get".into()],
            ..PolicyRule::default()
        }],
    )
    .await?;
    let lister = KubeCluster::new(ns.service_account_client("lister").await?);
    let page = lister.list_pods(&query, None).await?;
    assert_eq!(item_names(&json(&page.text)?), ["p"]);
    let error = lister
        .delete_pod(ns.name(), "p", &fence, true)
        .await
        .expect_err("delete is not granted");
    assert!(
        matches!(&error, ClusterError::Forbidden { verb, .. } if verb == "delete"),
        "{error:?}"
    );
    let error = lister
        .patch_pod(ns.name(), "p", b"[]", true)
        .await
        .expect_err("patch is not granted");
    assert!(
        matches!(&error, ClusterError::Forbidden { verb, .. } if verb == "patch"),
        "{error:?}"
    );
    Ok(())
}

/// Every namespace's Pods, metadata only, in pages: each Pod once, whatever its labels.
#[tokio::test]
async fn every_namespaces_pods_are_listed_by_metadata_in_pages() -> Result {
    let (a, b) = (
        namespace("all-pods-a").await?,
        namespace("all-pods-b").await?,
    );
    let mut expected = BTreeSet::new();
    for (ns, count) in [(&a, 3), (&b, 2)] {
        for i in 0..count {
            let name = format!("p{i}");
            FailedPod::new(&name).create(&ns.api::<Pod>()).await?;
            expected.insert(format!("{}/{name}", ns.name()));
        }
    }
    let cluster = admin(&a);
    let (mut seen, mut pages, mut token) = (Vec::new(), 0, None::<String>);
    loop {
        let page = cluster.list_all_pod_metadata(2, token.as_deref()).await?;
        let doc: Value = serde_json::from_slice(&page.text)?;
        assert_eq!(doc["kind"], "PartialObjectMetadataList", "{doc}");
        let items = doc["items"].as_array().ok_or("a list has items")?;
        assert!(items.len() <= 2, "pages of 2: {doc}");
        for item in items {
            assert_eq!(item["status"], Value::Null, "{item}");
            let meta = &item["metadata"];
            let ns = meta["namespace"].as_str().unwrap_or_default();
            if ns == a.name() || ns == b.name() {
                seen.push(format!(
                    "{ns}/{}",
                    meta["name"].as_str().unwrap_or_default()
                ));
            }
        }
        pages += 1;
        token = page.continue_token;
        if token.is_none() || pages > 1000 {
            break;
        }
    }
    assert!(pages >= 3, "5 Pods at least, 2 a page: {pages} page(s)");
    assert_eq!(seen.len(), expected.len(), "no Pod twice: {seen:?}");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), expected);
    Ok(())
}

/// The Namespaces a selector picks, sorted; a selector the server refuses (400) is an error,
/// not a permission one.
#[tokio::test]
async fn namespaces_are_listed_by_selector() -> Result {
    let (a, b) = (namespace("ns-sel-a").await?, namespace("ns-sel-b").await?);
    let team = format!("team-{}", a.name());
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(a.client().clone());
    for ns in [&a, &b] {
        let patch = json!({"metadata": {"labels": {"gc-test-team": team}}});
        api.patch(
            ns.name(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
    }
    let cluster = admin(&a);
    let mut expected = vec![a.name().to_owned(), b.name().to_owned()];
    expected.sort();
    let selector = format!("gc-test-team={team}");
    assert_eq!(
        gc_k8s::list_namespaces(&cluster, Some(&selector)).await?,
        expected
    );
    let all = gc_k8s::list_namespaces(&cluster, None).await?;
    assert!(all.contains(&a.name().to_owned()) && all.contains(&"default".to_owned()));
    let bad = gc_k8s::list_namespaces(&cluster, Some("app in (")).await;
    assert!(matches!(bad, Err(ClusterError::Other(_))), "{bad:?}");
    Ok(())
}
