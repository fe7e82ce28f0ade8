//! Events posted by [`KubeCluster::post_event`] on the real API server: accepted as built by
//! `gc_k8s::event`, read back through `events.k8s.io/v1` and `core/v1` (as `kubectl get events`
//! reads them), allowed by exactly `required_rules()`, and refused as `Forbidden` without them.

use gc_core::ports::ClusterError;
use gc_k8s::rbac::required_rules;
use gc_k8s::{EventRecord, EventType, KubeCluster, Regarding, Reporter, event};
use gc_testbed::FailedPod;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use crate::{Result, namespace};

fn reporter() -> Reporter {
    Reporter::new("gc.example.com/gc-cli", "gc-test-instance")
}

#[tokio::test]
async fn an_event_on_a_pod_and_one_on_the_namespace_are_read_back_both_ways() -> Result {
    let ns = namespace("events").await?;
    let pod = FailedPod::new("p").create(&ns.api::<Pod>()).await?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    ns.grant("gc", required_rules()).await?;
    let gc = KubeCluster::new(ns.service_account_client("gc").await?);

    let on_pod = EventRecord {
        regarding: Regarding {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            namespace: ns.name().into(),
            uid: Some(uid.clone()),
        },
        type_: EventType::Normal,
        reason: "Collected",
        action: "Collect",
        note: format!("collected: {}", "n".repeat(2000)),
    };
    let on_namespace = EventRecord {
        regarding: Regarding::namespace(ns.name()),
        type_: EventType::Warning,
        reason: "GuardRefused",
        action: "Run",
        note: "refused: 12 of 12 session resources look orphaned".into(),
    };
    for record in [&on_pod, &on_namespace] {
        gc.post_event(&event(record, &reporter(), Timestamp::now()))
            .await?;
    }

    let events: Api<Event> = ns.api();
    let mut listed = events.list(&ListParams::default()).await?.items;
    listed.sort_by_key(|e| e.reason.clone());
    let summary: Vec<_> = listed
        .iter()
        .map(|e| {
            let r = e.regarding.clone().unwrap_or_default();
            (
                e.reason.clone().unwrap_or_default(),
                e.type_.clone().unwrap_or_default(),
                r.kind.unwrap_or_default(),
                r.uid.unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "Collected".into(),
                "Normal".into(),
                "Pod".into(),
                uid.clone()
            ),
            (
                "GuardRefused".into(),
                "Warning".into(),
                "Namespace".into(),
                String::new()
            ),
        ]
    );
    assert_eq!(listed[0].note.as_deref().map(str::len), Some(1024));
    assert_eq!(
        listed[0].reporting_controller.as_deref(),
        Some("gc.example.com/gc-cli")
    );

    // The core/v1 view that `kubectl get events` and `kubectl describe pod` read.
    let core: Api<CoreEvent> = ns.api();
    let on_p = core
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await?
        .items;
    assert_eq!(on_p.len(), 1, "{on_p:?}");
    assert_eq!(on_p[0].reason.as_deref(), Some("Collected"));
    assert_eq!(on_p[0].involved_object.name.as_deref(), Some("p"));
    Ok(())
}

#[tokio::test]
async fn without_the_event_rule_a_post_is_forbidden() -> Result {
    let ns = namespace("events-denied").await?;
    let without: Vec<_> = required_rules()
        .into_iter()
        .filter(|r| r.api_groups.as_deref() != Some(&["events.k8s.io".to_owned()][..]))
        .collect();
    ns.grant("gc", without).await?;
    let gc = KubeCluster::new(ns.service_account_client("gc").await?);
    let record = EventRecord {
        regarding: Regarding::namespace(ns.name()),
        type_: EventType::Warning,
        reason: "RunFailed",
        action: "Run",
        note: "x".into(),
    };
    let error = gc
        .post_event(&event(&record, &reporter(), Timestamp::now()))
        .await
        .expect_err("events are not granted");
    assert!(
        matches!(&error, ClusterError::Forbidden { verb, resource, namespace, .. }
            if verb == "create" && resource == "events" && namespace == ns.name()),
        "{error:?}"
    );
    Ok(())
}
