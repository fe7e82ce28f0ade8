//! `api.enabled`: the request API on the session collector's `serve` Deployment. Rendered: its
//! flags, port, certificate volume and Service port on that Deployment only, a NetworkPolicy
//! that admits the callers to the API's port and leaves the metrics port open, and refusals
//! naming the value when it cannot be served. Installed on the real API server: gc's account
//! may create TokenReviews and SubjectAccessReviews and nothing more for it, and asks them as
//! the request API does; the caller ClusterRole, once bound, is exactly what the API asks.

use std::time::Duration;

use gc_core::ports::{Access, Asked};
use gc_k8s::KubeCluster;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::PostParams;
use serde_json::{Value, json};

use super::{
    allowed, allowed_named, container_args, documents, install, object, pod_spec, template,
    the_container,
};
use crate::common::{Result, namespace};

const API: [&str; 4] = [
    "serve.enabled=true",
    "api.enabled=true",
    "api.tlsSecret=gc-api-tls",
    "failedPods.enabled=true",
];

#[test]
fn the_request_api_renders_on_the_session_deployment_only() {
    let callers = [
        "api.callers.namespaceSelector.matchLabels.app=streamspace",
        "api.callers.podSelector.matchLabels.component=api",
    ];
    let objects = documents(&template(&[&API[..], &callers].concat()));
    let sessions = object(&objects, "Deployment", "gc-sessions");
    let args = container_args(sessions);
    let at = args.iter().position(|a| a.starts_with("--stall=")).unwrap();
    assert_eq!(
        args[at + 1..at + 6],
        [
            "--api-listen=0.0.0.0:9443",
            "--api-tls-cert=/etc/gc/api-tls/tls.crt",
            "--api-tls-key=/etc/gc/api-tls/tls.key",
            "--api-audience=gc",
            "--request-grace=5m",
        ]
    );
    assert_eq!(args[at + 6], "sessions", "the API's flags are serve's");
    let container = the_container(sessions);
    assert_eq!(
        container["ports"][1],
        json!({"name": "api", "containerPort": 9443, "protocol": "TCP"})
    );
    let mounts = container["volumeMounts"].as_array().unwrap();
    let tls = json!({"name": "api-tls", "mountPath": "/etc/gc/api-tls", "readOnly": true});
    assert!(mounts.contains(&tls), "{mounts:?}");
    let volumes = pod_spec(sessions)["volumes"].as_array().unwrap();
    let secret = json!({"name": "api-tls", "secret": {"secretName": "gc-api-tls"}});
    assert!(volumes.contains(&secret), "{volumes:?}");
    let service = object(&objects, "Service", "gc-sessions");
    assert_eq!(service["spec"]["ports"][1]["name"], "api");
    assert_eq!(service["spec"]["ports"][1]["port"], 9443);
    // The failed-Pod collector serves no API.
    let pods = object(&objects, "Deployment", "gc-failed-pods");
    assert!(!container_args(pods).iter().any(|a| a.starts_with("--api")));
    assert_eq!(the_container(pods)["ports"].as_array().unwrap().len(), 1);
    let service = object(&objects, "Service", "gc-failed-pods");
    assert_eq!(service["spec"]["ports"].as_array().unwrap().len(), 1);
    // The callers only to the API's port; the metrics port as before.
    let policy = object(&objects, "NetworkPolicy", "gc-api");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        sessions["spec"]["selector"]["matchLabels"]
    );
    let ingress = &policy["spec"]["ingress"];
    assert_eq!(
        ingress[0]["ports"],
        json!([{"port": "api", "protocol": "TCP"}])
    );
    assert_eq!(
        ingress[0]["from"],
        json!([{
            "namespaceSelector": {"matchLabels": {"app": "streamspace"}},
            "podSelector": {"matchLabels": {"component": "api"}},
        }])
    );
    assert_eq!(
        ingress[1],
        json!({"ports": [{"port": "metrics", "protocol": "TCP"}]})
    );

    // The default: nothing of it.
    let default = documents(&template(&["serve.enabled=true"]));
    assert!(!default.iter().any(|o| o["kind"] == "NetworkPolicy"));
    let api_named = |o: &&Value| {
        o["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.contains("-api"))
    };
    assert_eq!(default.iter().filter(api_named).count(), 0);
}

/// Values the API cannot be served with fail the install, naming the value and the fix.
#[test]
fn the_request_api_without_its_parts_is_refused_by_name() {
    let render = super::refused;
    let without_serve = render(&["api.enabled=true", "api.tlsSecret=gc-api-tls"]);
    assert!(
        without_serve.contains("api.enabled: the request API is served by the session collector's Deployment: set serve.enabled=true and gc.enabled=true"),
        "{without_serve}"
    );
    let without_tls = render(&["serve.enabled=true", "api.enabled=true"]);
    assert!(
        without_tls.contains("api.tlsSecret: name the kubernetes.io/tls Secret"),
        "{without_tls}"
    );
    let bad_name = render(&[&API[..2], &["api.tlsSecret=Not_A_Name"]].concat());
    assert!(bad_name.contains("/api/tlsSecret"), "{bad_name}");
}

/// Installed: gc's account may create the two reviews (anywhere: they are cluster-scoped) and
/// nothing else for the API, and asks them as the request API does: a caller's projected token
/// is authenticated, its call refused until the caller ClusterRole is bound to it, then allowed
/// in that namespace only.
#[tokio::test]
async fn installed_api_rbac_lets_gc_review_its_callers_and_nothing_more() -> Result {
    let (_, ns) = namespace("chart-api").await?;
    let mut flags = vec!["--set", "database.existingSecret=db-pass"];
    for set in &API[..3] {
        flags.extend(["--set", set]);
    }
    let out = install(&ns, &flags);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let client = ns.service_account_client("gc").await?;
    for (verb, group, resource, want) in [
        ("create", "authentication.k8s.io", "tokenreviews", true),
        (
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            true,
        ),
        ("list", "authentication.k8s.io", "tokenreviews", false),
        (
            "create",
            "authorization.k8s.io",
            "selfsubjectrulesreviews",
            true,
        ),
        ("create", "gc.stream.space", "sessions/collect", false),
        (
            "create",
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            false,
        ),
        ("get", "", "secrets", false),
    ] {
        let got = allowed(&client, verb, group, resource, None).await?;
        assert_eq!(got, want, "{verb} {group}/{resource}");
    }

    // As the request API asks them, acting as gc's account.
    let gc = KubeCluster::new(client);
    ns.service_account_client("streamspace-api").await?;
    let token = ns
        .service_account_token_for("streamspace-api", &["gc"])
        .await?;
    let caller = gc.authenticate(&token, "gc").await??;
    let collect = |namespace| Asked {
        verb: "create",
        resource: "sessions",
        subresource: "collect",
        namespace,
    };
    let group = "gc.stream.space";
    assert!(
        gc.authorize(&caller, group, collect(ns.name()))
            .await?
            .is_err()
    );
    let caller_role = format!("gc-{}-api-caller", ns.name());
    let binding = RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some("streamspace-api-calls-gc".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: caller_role,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "streamspace-api".into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
    };
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await?;
    let mut answer = Err(String::new());
    for _ in 0..50 {
        answer = gc.authorize(&caller, group, collect(ns.name())).await?;
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answer, Ok(()));
    for (verb, resource, subresource) in [("create", "sessions", "plan"), ("get", "runs", "")] {
        let asked = Asked {
            verb,
            resource,
            subresource,
            namespace: ns.name(),
        };
        assert_eq!(
            gc.authorize(&caller, group, asked).await?,
            Ok(()),
            "{verb} {resource}"
        );
    }
    let restore = Asked {
        subresource: "restore",
        ..collect(ns.name())
    };
    assert!(
        gc.authorize(&caller, group, restore).await?.is_err(),
        "not granted"
    );
    assert!(
        gc.authorize(&caller, group, collect("default"))
            .await?
            .is_err()
    );
    Ok(())
}

/// With `gc.restore.enabled`, a restore through the API acts as the restore account: `serve`
/// names it, gc's account may ask for a short-lived token of that account and of no other, and
/// still may not create any kind it restores; acting as the account it got, it may. The caller
/// ClusterRole grants `sessions/restore` then, and not without it.
#[tokio::test]
async fn installed_api_restores_as_the_restore_account_never_as_gc() -> Result {
    let rendered = documents(&template(
        &[&API[..], &["gc.restore.enabled=true"]].concat(),
    ));
    let args = container_args(object(&rendered, "Deployment", "gc-sessions"));
    assert!(
        args.contains(&"--api-restore-account=streamspace/gc-restore".to_owned()),
        "{args:?}"
    );
    // Restoring is a right of its own: never the caller role's.
    let caller = object(&rendered, "ClusterRole", "gc-streamspace-api-caller");
    assert!(!caller["rules"].to_string().contains("sessions/restore"));
    let restorer = object(&rendered, "ClusterRole", "gc-streamspace-api-restorer");
    assert!(restorer["rules"].to_string().contains("sessions/restore"));
    let without = documents(&template(&API));
    let args = container_args(object(&without, "Deployment", "gc-sessions"));
    assert!(!args.iter().any(|a| a.starts_with("--api-restore-account")));
    let restorer = |o: &&Value| o["metadata"]["name"] == "gc-streamspace-api-restorer";
    assert!(!without.iter().any(|o| restorer(&o)));

    let (_, ns) = namespace("chart-api-restore").await?;
    let mut flags = vec!["--set", "database.existingSecret=db-pass"];
    for set in [&API[..3], &["gc.restore.enabled=true"]].concat() {
        flags.extend(["--set", set]);
    }
    let out = install(&ns, &flags);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let client = ns.service_account_client("gc").await?;
    let token = |name| {
        allowed_named(
            &client,
            "create",
            "",
            "serviceaccounts/token",
            Some(ns.name()),
            Some(name),
        )
    };
    assert!(token("gc-restore").await?, "a token of the restore account");
    assert!(!token("gc").await?, "not of its own");
    assert!(!token("default").await?, "nor of any other");
    let kinds = [
        ("apps", "deployments"),
        ("", "services"),
        ("", "persistentvolumeclaims"),
        ("stream.space", "sessions"),
    ];
    for (group, resource) in kinds {
        let may = allowed(&client, "create", group, resource, Some(ns.name())).await?;
        assert!(!may, "gc's own account may not create {resource}");
    }
    // As the request API does it: a token of the restore account, a client holding only it.
    let bed = ns.bed();
    let connection = gc_k8s::Connection {
        source: gc_k8s::Source::Kubeconfig {
            path: Some(bed.kubeconfig_path().to_owned()),
            context: None,
        },
        ..gc_k8s::Connection::default()
    };
    let gc = KubeCluster::new(client);
    let restorer = gc
        .as_service_account(&connection, ns.name(), "gc-restore")
        .await?;
    for (group, resource) in kinds {
        let may = allowed(
            restorer.client(),
            "create",
            group,
            resource,
            Some(ns.name()),
        )
        .await?;
        assert!(may, "the restore account creates {resource}");
    }
    let refused = gc
        .as_service_account(&connection, ns.name(), "default")
        .await;
    assert!(
        matches!(refused, Err(gc_core::ports::ClusterError::Forbidden { .. })),
        "{refused:?}"
    );
    Ok(())
}
