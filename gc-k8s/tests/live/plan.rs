//! A live plan (server-filtered pages) agrees with the offline plan of the same Pods read as one
//! unfiltered PodList, for every kind of Pod the rules distinguish.

use std::collections::BTreeMap;

use gc_core::pods::inventory;
use gc_core::{PodInputs, PodPlan, PreviousLedger, plan_pods};
use gc_k8s::{failed_pod_query, list_inventory};
use gc_testbed::{FailedPod, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Request;
use serde_json::json;

use crate::{COLLECT, PIN, Result, admin, namespace, now_seconds};

const RETENTION: i64 = 3600;

/// `seconds` ago.
fn ago(seconds: i64) -> Result<Timestamp> {
    Ok(Timestamp::from_second(
        Timestamp::now().as_second() - seconds,
    )?)
}

/// One Pod of every kind the rules tell apart, and three that the server-side selectors drop.
async fn populate(ns: &TestNamespace) -> Result {
    let pods = ns.api::<Pod>();
    let old = ago(2 * RETENTION)?;
    let labelled = |name: &str| FailedPod::new(name).label(COLLECT, "true");

    labelled("due-a")
        .finished_at(ago(3 * RETENTION)?)
        .create(&pods)
        .await?;
    labelled("due-b").finished_at(old).create(&pods).await?;
    labelled("due-c")
        .terminated_container("one", 1)
        .terminated_container("two", 137)
        .finished_at(ago(2 * RETENTION + 60)?)
        .create(&pods)
        .await?;
    labelled("pinned")
        .finalizer(PIN)
        .finished_at(old)
        .create(&pods)
        .await?;
    labelled("pinned-deleting")
        .finalizer(PIN)
        .finished_at(old)
        .create(&pods)
        .await?;
    pods.delete("pinned-deleting", &DeleteParams::default())
        .await?;
    labelled("recent")
        .finished_at(ago(60)?)
        .create(&pods)
        .await?;
    labelled("observed").create(&pods).await?;
    // No container statuses: the anchor is the first observation, not `finishedAt`.
    let clear = Patch::Merge(json!({ "status": { "containerStatuses": null } }));
    pods.patch_status("observed", &PatchParams::default(), &clear)
        .await?;

    labelled("owned")
        .owner_reference(OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "00000000-0000-0000-0000-0000000000aa".into(),
            controller: Some(true),
            block_owner_deletion: None,
        })
        .finished_at(old)
        .create(&pods)
        .await?;
    mirror(&pods, old).await?;
    labelled("running")
        .terminated_container("done", 0)
        .running_container("sidecar")
        .finished_at(old)
        .create(&pods)
        .await?;
    labelled("waiting")
        .waiting_container("main", "CrashLoopBackOff")
        .create(&pods)
        .await?;
    labelled("foreign")
        .finalizer("example.com/keep")
        .finished_at(old)
        .create(&pods)
        .await?;
    labelled("foreign-and-pin")
        .finalizer(PIN)
        .finalizer("example.com/keep")
        .finished_at(old)
        .create(&pods)
        .await?;

    FailedPod::new("unlabelled")
        .finished_at(old)
        .create(&pods)
        .await?;
    FailedPod::new("label-false")
        .label(COLLECT, "false")
        .finished_at(old)
        .create(&pods)
        .await?;
    labelled("succeeded")
        .phase("Succeeded")
        .terminated_container("main", 0)
        .finished_at(old)
        .create(&pods)
        .await?;
    Ok(())
}

/// A static Pod's mirror: the API server requires `spec.nodeName` with the annotation, which
/// `FailedPod` does not set, so it is built here and given a Failed status the same way.
async fn mirror(pods: &Api<Pod>, finished: Timestamp) -> Result {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "mirror",
            "labels": { COLLECT: "true" },
            "annotations": { "kubernetes.io/config.mirror": "abc" },
        },
        "spec": {
            "nodeName": "node-1",
            "restartPolicy": "Never",
            "containers": [{ "name": "main", "image": "registry.invalid/static:1" }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let at = Time(finished);
    let status = Patch::Merge(json!({ "status": {
        "phase": "Failed",
        "containerStatuses": [{
            "name": "main", "image": "registry.invalid/static:1", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": { "terminated": {
                "exitCode": 1, "reason": "Error", "startedAt": at, "finishedAt": at,
            }},
        }],
    }}));
    pods.patch_status("mirror", &PatchParams::default(), &status)
        .await?;
    Ok(())
}

/// Decision (and clause, for a Pod not eligible) by Pod name.
fn outcomes(plan: &PodPlan) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for d in &plan.decisions {
        let v = serde_json::to_value(d)?;
        let mut outcome = v["decision"].as_str().unwrap_or_default().to_owned();
        if let Some(clause) = v["reason"]["clause"].as_str() {
            outcome = format!("{outcome}:{clause}");
        }
        out.insert(d.name.clone().unwrap_or_default(), outcome);
    }
    Ok(out)
}

#[tokio::test]
async fn a_live_plan_equals_the_offline_plan_of_the_same_pods() -> Result {
    let ns = namespace("live-plan").await?;
    populate(&ns).await?;
    let cfg = PodInputs {
        namespace: ns.name().to_owned(),
        retention_seconds: RETENTION,
        max_pods: 3,
        ..PodInputs::default()
    }
    .validate()?;
    let rules = cfg.rules();
    let previous = PreviousLedger::default();
    let now = now_seconds();

    let mut pages = 0;
    let live_inventory = list_inventory(
        &admin(&ns),
        &failed_pod_query(&cfg, 4),
        rules,
        cfg.max_inventory + 1,
        &mut |p, _| pages = p,
    )
    .await?;
    assert_eq!(pages, 4, "14 selected pods in pages of 4");
    let live = plan_pods(&live_inventory, &previous, &cfg, now)?;

    // The offline path: the whole namespace as one PodList, as `kubectl get pods -o json`.
    let request = Request::new(format!("/api/v1/namespaces/{}/pods", ns.name()))
        .list(&ListParams::default())?;
    let text = ns.client().request_text(request).await?;
    let offline_inventory = inventory::read(text.as_bytes(), rules, cfg.max_inventory + 1)?;
    let offline = plan_pods(&offline_inventory, &previous, &cfg, now)?;

    assert_eq!(live.targets, offline.targets);
    assert_eq!(live.ledger, offline.ledger);
    assert_eq!((live.held, live.deferred), (offline.held, offline.deferred));
    let live_names: Vec<_> = live.decisions.iter().map(|d| d.name.clone()).collect();
    let shared: Vec<_> = offline
        .decisions
        .iter()
        .filter(|d| live_names.contains(&d.name))
        .cloned()
        .collect();
    assert_eq!(live.decisions, shared, "same decisions, in the same order");

    let expected = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, o)| ((*n).to_owned(), (*o).to_owned()))
            .collect()
    };
    let live_outcomes = expected(&[
        ("due-a", "targeted"),
        ("due-b", "deferred"),
        ("due-c", "targeted"),
        ("pinned", "deferred"),
        ("pinned-deleting", "targeted"),
        ("recent", "held"),
        ("observed", "held"),
        ("owned", "notEligible:owned"),
        ("mirror", "notEligible:mirror"),
        ("running", "notEligible:containerActive"),
        ("waiting", "notEligible:containerActive"),
        ("foreign", "notEligible:foreignFinalizers"),
        ("foreign-and-pin", "notEligible:foreignFinalizers"),
    ]);
    let got = outcomes(&live)?;
    let due: Vec<_> = got
        .iter()
        .filter(|(_, o)| *o == "targeted" || *o == "deferred")
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(due.len(), 5, "five pods are due: {got:?}");
    assert_eq!(live.targets.len(), 3);
    assert_eq!(live.deferred, 2);
    assert_eq!(live.held, 2);
    let kinds = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter()
            .map(|(n, o)| {
                let o = if o == "deferred" { "targeted" } else { o };
                (n.clone(), o.to_owned())
            })
            .collect()
    };
    assert_eq!(kinds(&got), kinds(&live_outcomes));
    // The oldest anchors come first; the three due at the same second are ordered by uid.
    assert_eq!(got["due-a"], "targeted");
    assert_eq!(got["due-c"], "targeted");

    let mut filtered = outcomes(&offline)?;
    filtered.retain(|n, _| !got.contains_key(n));
    assert_eq!(
        filtered,
        expected(&[
            ("label-false", "notEligible:notLabelled"),
            ("succeeded", "notEligible:notFailed"),
            ("unlabelled", "notEligible:notLabelled"),
        ]),
        "the server-side selectors drop only Pods the rules exclude"
    );
    let basis: BTreeMap<_, _> = live
        .decisions
        .iter()
        .filter_map(|d| {
            let v = serde_json::to_value(d).ok()?;
            Some((d.name.clone()?, v.get("basis")?.as_str()?.to_owned()))
        })
        .collect();
    assert_eq!(
        basis.get("observed").map(String::as_str),
        Some("observedFailed")
    );
    assert_eq!(basis.get("due-a").map(String::as_str), Some("finishedAt"));
    Ok(())
}
