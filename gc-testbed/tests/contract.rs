//! Contract tests: the API server and PostgreSQL behaviours the collector relies on, pinned
//! against the real servers (one kube-apiserver for this binary, a namespace per test).

use std::collections::BTreeSet;
use std::fmt::Debug;

use gc_testbed::{FailedPod, Result, TestBed, TestDatabase, TestNamespace, status_code};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};

/// The label the collector selects on.
const COLLECT: &str = "diagnostics.example.com/collect";
/// A finalizer standing for the collector's pin.
const PIN: &str = "gc.example.com/pin";

/// A fresh namespace on this binary's API server.
async fn namespace(prefix: &str) -> Result<TestNamespace> {
    TestBed::shared().await?.namespace(prefix).await
}

/// The HTTP status of a call that must fail.
fn refused<T: Debug>(result: Result<T, kube::Error>) -> u16 {
    let error = result.expect_err("the API server accepted a call that must be refused");
    status_code(&error).unwrap_or_else(|| panic!("not an API error: {error}"))
}

/// A JSON Patch from its JSON form.
fn json_patch(ops: Value) -> Result<Patch<()>> {
    Ok(Patch::Json(serde_json::from_value::<json_patch::Patch>(
        ops,
    )?))
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

#[tokio::test]
async fn fabricated_pods_carry_the_requested_status() -> Result<()> {
    let ns = namespace("fabricate").await?;
    let pods = ns.api::<Pod>();
    let pod = FailedPod::new("mixed")
        .terminated_container("a", 2)
        .running_container("b")
        .waiting_container("c", "CrashLoopBackOff")
        .create(&pods)
        .await?;
    let status = serde_json::to_value(pod.status.expect("status"))?;
    assert_eq!(status["phase"], "Failed");
    let states: Vec<(&str, &str)> = status["containerStatuses"]
        .as_array()
        .expect("containerStatuses")
        .iter()
        .map(|c| {
            let state = c["state"]
                .as_object()
                .and_then(|s| s.keys().next())
                .expect("a state");
            (c["name"].as_str().unwrap_or_default(), state.as_str())
        })
        .collect();
    assert_eq!(
        states,
        [("a", "terminated"), ("b", "running"), ("c", "waiting")]
    );
    assert_eq!(
        status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        2
    );
    Ok(())
}

#[tokio::test]
async fn a_failed_json_patch_test_op_is_invalid_422() -> Result<()> {
    let ns = namespace("json-patch").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("p")
        .label(COLLECT, "true")
        .create(&pods)
        .await?;
    let guarded = |expected: &str| {
        json_patch(json!([
            { "op": "test", "path": "/metadata/labels/diagnostics.example.com~1collect",
              "value": expected },
            { "op": "add", "path": "/metadata/labels/touched", "value": "yes" },
        ]))
    };
    let stale = pods
        .patch("p", &PatchParams::default(), &guarded("false")?)
        .await;
    assert_eq!(refused(stale), 422);
    let untouched = pods.get("p").await?;
    assert!(
        !untouched
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("touched")
    );

    let fresh = pods
        .patch("p", &PatchParams::default(), &guarded("true")?)
        .await?;
    assert_eq!(fresh.metadata.labels.unwrap_or_default()["touched"], "yes");
    Ok(())
}

#[tokio::test]
async fn a_pinned_failed_pod_waits_for_its_finalizer_then_disappears() -> Result<()> {
    let ns = namespace("finalizer").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("p").finalizer(PIN).create(&pods).await?;

    let deleted = pods.delete("p", &DeleteParams::default()).await?;
    let returned = deleted.left().expect("DELETE on a Pod returns the Pod");
    assert!(returned.metadata.deletion_timestamp.is_some());
    let stored = pods.get("p").await?;
    assert!(
        stored.metadata.deletion_timestamp.is_some(),
        "still there, being deleted"
    );
    assert_eq!(
        stored.metadata.deletion_grace_period_seconds,
        Some(0),
        "Failed: grace 0"
    );

    let unpin = json_patch(json!([
        { "op": "test", "path": "/metadata/finalizers", "value": [PIN] },
        { "op": "remove", "path": "/metadata/finalizers" },
    ]))?;
    pods.patch("p", &PatchParams::default(), &unpin).await?;
    assert!(
        pods.get_opt("p").await?.is_none(),
        "gone on the PATCH that removed the finalizer"
    );
    Ok(())
}

#[tokio::test]
async fn no_finalizer_can_be_added_to_a_pod_being_deleted_422() -> Result<()> {
    let ns = namespace("late-finalizer").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("p")
        .finalizer("example.com/other")
        .create(&pods)
        .await?;
    pods.delete("p", &DeleteParams::default()).await?;

    let pin = json_patch(json!([{ "op": "add", "path": "/metadata/finalizers/-", "value": PIN }]))?;
    assert_eq!(
        refused(pods.patch("p", &PatchParams::default(), &pin).await),
        422
    );
    let stored = pods.get("p").await?;
    assert_eq!(
        stored.metadata.finalizers,
        Some(vec!["example.com/other".to_owned()])
    );

    let release = json_patch(json!([{ "op": "remove", "path": "/metadata/finalizers" }]))?;
    pods.patch("p", &PatchParams::default(), &release).await?;
    assert!(pods.get_opt("p").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn a_delete_with_a_stale_precondition_is_a_conflict_409() -> Result<()> {
    let ns = namespace("preconditions").await?;
    let pods = ns.api::<Pod>();
    let pod = FailedPod::new("p").create(&pods).await?;
    let uid = pod.metadata.uid.clone().expect("uid");
    let version = pod
        .metadata
        .resource_version
        .clone()
        .expect("resourceVersion");
    let delete = |uid: &str, version: Option<&str>| DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: version.map(str::to_owned),
        }),
        ..DeleteParams::default()
    };

    let wrong_uid = pods
        .delete("p", &delete("00000000-0000-0000-0000-000000000000", None))
        .await;
    assert_eq!(refused(wrong_uid), 409);
    // The object changes after we read it: our resourceVersion is now stale.
    let touch = Patch::Merge(json!({ "metadata": { "labels": { "touched": "yes" } } }));
    pods.patch("p", &PatchParams::default(), &touch).await?;
    assert_eq!(
        refused(pods.delete("p", &delete(&uid, Some(&version))).await),
        409
    );
    assert!(
        pods.get_opt("p").await?.is_some(),
        "refused deletes delete nothing"
    );

    let current = pods.get("p").await?.metadata.resource_version;
    pods.delete("p", &delete(&uid, current.as_deref())).await?;
    assert!(pods.get_opt("p").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn a_dry_run_delete_deletes_nothing() -> Result<()> {
    let ns = namespace("dry-run").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("p").finalizer(PIN).create(&pods).await?;
    FailedPod::new("q").create(&pods).await?;
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };

    pods.delete("p", &dry_run).await?;
    pods.delete("q", &dry_run).await?;
    for name in ["p", "q"] {
        let stored = pods.get(name).await?;
        assert!(
            stored.metadata.deletion_timestamp.is_none(),
            "{name} is not being deleted"
        );
    }
    Ok(())
}

#[tokio::test]
async fn phase_and_label_selectors_filter_on_the_server() -> Result<()> {
    let ns = namespace("selectors").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("failed-labelled")
        .label(COLLECT, "true")
        .create(&pods)
        .await?;
    FailedPod::new("failed-unlabelled").create(&pods).await?;
    FailedPod::new("failed-false")
        .label(COLLECT, "false")
        .create(&pods)
        .await?;
    FailedPod::new("running-labelled")
        .phase("Running")
        .running_container("main")
        .label(COLLECT, "true")
        .create(&pods)
        .await?;
    let names = |params: ListParams| {
        let pods = pods.clone();
        async move {
            let list = pods.list(&params).await?;
            Ok::<_, kube::Error>(list.items.iter().map(name_of).collect::<BTreeSet<_>>())
        }
    };
    let phase = ListParams::default().fields("status.phase=Failed");
    let label = ListParams::default().labels(&format!("{COLLECT}=true"));
    let both = phase.clone().labels(&format!("{COLLECT}=true"));

    let failed = ["failed-false", "failed-labelled", "failed-unlabelled"];
    assert_eq!(names(phase).await?, failed.map(String::from).into());
    assert_eq!(
        names(label).await?,
        ["failed-labelled", "running-labelled"]
            .map(String::from)
            .into()
    );
    assert_eq!(names(both).await?, ["failed-labelled".to_owned()].into());
    Ok(())
}

#[tokio::test]
async fn metadata_only_lists_carry_metadata_and_no_status() -> Result<()> {
    let ns = namespace("metadata").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("p")
        .label(COLLECT, "true")
        .finalizer(PIN)
        .create(&pods)
        .await?;
    FailedPod::new("q").create(&pods).await?;

    let selected = ListParams::default().labels(&format!("{COLLECT}=true"));
    let list = pods.list_metadata(&selected).await?;
    assert_eq!(list.items.len(), 1, "selectors apply before the conversion");
    let meta = &list.items[0].metadata;
    assert_eq!(meta.finalizers, Some(vec![PIN.to_owned()]));
    assert!(meta.uid.is_some() && meta.resource_version.is_some());

    // What is on the wire, not what the Rust type can hold: no spec, no status.
    let path = format!("/api/v1/namespaces/{}/pods", ns.name());
    let request = http::Request::get(path)
        .header(
            http::header::ACCEPT,
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .body(Vec::new())
        .expect("a valid request");
    let raw: Value = ns.client().request(request).await?;
    assert_eq!(raw["kind"], "PartialObjectMetadataList");
    let items = raw["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    for item in items {
        assert!(
            item.get("status").is_none() && item.get("spec").is_none(),
            "{item}"
        );
        assert!(item["metadata"]["uid"].is_string());
    }
    Ok(())
}

#[tokio::test]
async fn pagination_returns_every_object_exactly_once() -> Result<()> {
    let ns = namespace("pages").await?;
    let pods = ns.api::<Pod>();
    let created: BTreeSet<String> = (0..25).map(|i| format!("p{i:02}")).collect();
    for name in &created {
        FailedPod::new(name).create(&pods).await?;
    }
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut params = ListParams::default().limit(7);
    loop {
        let page = pods.list_metadata(&params).await?;
        sizes.push(page.items.len());
        seen.extend(page.items.iter().filter_map(|p| p.metadata.name.clone()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    assert_eq!(sizes, [7, 7, 7, 4]);
    assert_eq!(seen.len(), created.len(), "no duplicates");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), created);
    Ok(())
}

#[tokio::test]
async fn a_service_account_can_do_what_its_role_grants_and_nothing_else_403() -> Result<()> {
    let ns = namespace("rbac").await?;
    let pods = ns.api::<Pod>();
    FailedPod::new("p").create(&pods).await?;
    ns.grant(
        "collector",
        vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".to_owned()]),
            verbs: ["get", "list"].map(String::from).to_vec(),
            ..PolicyRule::default()
        }],
    )
    .await?;
    let client = ns.service_account_client("collector").await?;
    let as_collector: Api<Pod> = Api::namespaced(client.clone(), ns.name());

    let listed = as_collector.list(&ListParams::default()).await?;
    assert_eq!(listed.items.iter().map(name_of).collect::<Vec<_>>(), ["p"]);
    assert_eq!(
        refused(as_collector.delete("p", &DeleteParams::default()).await),
        403
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.name());
    assert_eq!(refused(secrets.list(&ListParams::default()).await), 403);
    let elsewhere: Api<Pod> = Api::namespaced(client, "default");
    assert_eq!(refused(elsewhere.list(&ListParams::default()).await), 403);
    assert!(pods.get_opt("p").await?.is_some());
    Ok(())
}

#[tokio::test]
async fn the_session_crd_serves_sessions() -> Result<()> {
    let ns = namespace("sessions").await?;
    let resource = ns.bed().install_session_crd().await?;
    let sessions: Api<DynamicObject> =
        Api::namespaced_with(ns.client().clone(), ns.name(), &resource);
    let session: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "stream.space/v1alpha1",
        "kind": "Session",
        "metadata": { "name": "s", "labels": { COLLECT: "true" } },
        "spec": { "user": "alice", "anything": { "goes": [1, 2] } },
    }))?;
    sessions.create(&Default::default(), &session).await?;
    let stored = sessions.get("s").await?;
    assert_eq!(
        stored.data["spec"]["anything"]["goes"],
        json!([1, 2]),
        "unknown fields kept"
    );
    // Installing again (as every test may) is harmless.
    ns.bed().install_session_crd().await?;
    Ok(())
}

#[tokio::test]
async fn postgres_round_trip_in_a_fresh_database() -> Result<()> {
    let Some(database) = TestDatabase::fresh("contract").await? else {
        return Ok(());
    };
    let pool = database.pool().await?;
    let current: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await?;
    assert_eq!(current, database.name());
    sqlx::raw_sql("CREATE TABLE ledger (uid text PRIMARY KEY, note text NOT NULL)")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO ledger (uid, note) VALUES ($1, $2)")
        .bind("u-1")
        .bind("deleted")
        .execute(&pool)
        .await?;
    let duplicate = sqlx::query("INSERT INTO ledger (uid, note) VALUES ($1, $2)")
        .bind("u-1")
        .bind("again")
        .execute(&pool)
        .await;
    let code = duplicate
        .expect_err("primary key")
        .into_database_error()
        .and_then(|e| e.code().map(|c| c.into_owned()));
    assert_eq!(code.as_deref(), Some("23505"), "unique_violation");
    let note: String = sqlx::query_scalar("SELECT note FROM ledger WHERE uid = $1")
        .bind("u-1")
        .fetch_one(&pool)
        .await?;
    assert_eq!(note, "deleted");
    pool.close().await;
    Ok(())
}
