//! The Helm chart with the real `helm` and the real API server: lint, templates for several
//! values, an install the API server accepts, and its ServiceAccount proven to do exactly what
//! the collectors need there and nothing else.

use std::path::PathBuf;
use std::process::{Command, Output};

use gc_core::ports::{ObjectCluster, Preconditions};
use gc_core::sessions::Kind;
use gc_testbed::{FailedPod, TestBed};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, PostParams};

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../chart");

fn helm_path() -> PathBuf {
    let bin = std::env::var_os("GC_TESTBED_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let out = Command::new(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../scripts/testbed-build.sh"
            ))
            .arg("helm")
            .output()
            .unwrap();
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        });
    bin.join("helm")
}

fn helm(args: &[&str]) -> Output {
    Command::new(helm_path()).args(args).output().unwrap()
}

fn template(sets: &[&str]) -> String {
    let mut args = vec!["template", "gc", CHART, "--namespace", "streamspace"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = helm(&args);
    assert!(
        out.status.success(),
        "{sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn lint_and_templates() {
    let out = helm(&["lint", CHART]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let defaults = template(&[]);
    assert!(defaults.contains("kind: CronJob") && defaults.contains("schedule: \"0 */6 * * *\""));
    assert!(defaults.contains("- --grace-hours=24") && !defaults.contains("- --dry-run"));
    assert!(
        defaults.contains("concurrencyPolicy: Forbid")
            && defaults.contains("readOnlyRootFilesystem: true")
    );
    assert!(
        defaults.contains("name: gc-streamspace-secrets")
            && defaults.contains("key: postgres-password")
    );
    assert!(!defaults.contains("failed-pods") && !defaults.contains("ClusterRole"));
    assert!(template(&["gc.enabled=false"]).trim().is_empty());
    let pods = template(&["failedPods.enabled=true"]);
    assert!(
        pods.contains("name: gc-failed-pods")
            && pods.contains("- --dry-run=true")
            && pods.contains("resources: [leases]")
    );
    assert!(template(&["database.existingSecret=db-pass"]).contains("name: db-pass"));
    let delivered = template(&[
        "metrics.pushgateway=http://pgw:9091",
        "alerts.webhookSecret=hook",
    ]);
    assert!(
        delivered.contains("- --pushgateway=http://pgw:9091")
            && delivered.contains("- --metrics-prefix=streamspace")
    );
    assert!(delivered.contains("name: GC_ALERT_WEBHOOK") && delivered.contains("name: hook"));
    let dry = template(&["gc.dryRun=true", "gc.terminalStates={deleted}"]);
    assert!(dry.contains("- --dry-run") && dry.contains("- --terminal-state=deleted"));
    // As StreamSpace's subchart, its release's secret.
    let out = helm(&["template", "streamspace", CHART]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("name: streamspace-secrets"));
    // Bad values fail at install time, naming the value.
    for (set, field) in [
        ("gc.gracePeriod=-1", "gracePeriod"),
        ("namespace=kube-system", "namespace"),
        ("gc.schedule=often", "schedule"),
    ] {
        let out = helm(&["template", "gc", CHART, "--set", set]);
        assert!(!out.status.success(), "{set}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(field),
            "{set}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The shipped alert rules parse and speak only of metrics the collectors export.
#[test]
fn alert_rules_use_exported_metrics() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/prometheus/gc-alerts.yaml"
    ))
    .unwrap();
    let rules: serde_json::Value =
        serde_json::to_value(serde_norway::from_str::<serde_norway::Value>(&text).unwrap())
            .unwrap();
    let exported = [
        "errors_total",
        "last_success_timestamp_seconds",
        "fences_lost_total",
        "objects_deleted_total",
    ];
    let list = rules["groups"][0]["rules"].as_array().unwrap();
    assert!(list.len() >= 4);
    for rule in list {
        let expr = rule["expr"].as_str().unwrap();
        assert!(
            exported
                .iter()
                .any(|m| expr.contains(&format!("streamspace_{m}"))),
            "{expr}"
        );
    }
}

async fn allowed(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Every manifest the chart renders, for several values, is accepted by the real API server in a
/// server-side dry run (`dryRun=All`: validation and admission, nothing stored).
#[tokio::test]
async fn rendered_manifests_pass_a_server_side_dry_run() -> Result {
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("chart-dry").await?;
    let client = ns.client().clone();
    let variations: [&[&str]; 4] = [
        &[],
        &["failedPods.enabled=true"],
        &[
            "database.existingSecret=db-pass",
            "gc.dryRun=true",
            "gc.terminalStates={deleted}",
        ],
        &[
            "metrics.pushgateway=http://pgw:9091",
            "alerts.webhookSecret=hook",
            "failedPods.enabled=true",
        ],
    ];
    for sets in variations {
        let mut sets = sets.to_vec();
        let namespace = format!("namespace={}", ns.name());
        sets.push(&namespace);
        let rendered = template(&sets);
        let mut count = 0;
        for doc in rendered
            .split("\n---")
            .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        {
            let value: serde_norway::Value = serde_norway::from_str(doc)?;
            let object: DynamicObject = serde_json::from_value(serde_json::to_value(value)?)?;
            let types = object.types.clone().expect("apiVersion and kind");
            let gvk = GroupVersionKind::try_from(&types)?;
            let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await?;
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), ns.name(), &resource);
            let params = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            api.create(&params, &object)
                .await
                .map_err(|e| format!("{sets:?}: {} {:?}: {e}", types.kind, object.metadata.name))?;
            count += 1;
        }
        assert!(count >= 4, "{sets:?}: only {count} manifests");
    }
    // Nothing was stored.
    assert!(
        Api::<k8s_openapi::api::batch::v1::CronJob>::namespaced(client, ns.name())
            .list(&Default::default())
            .await?
            .items
            .is_empty()
    );
    Ok(())
}

#[tokio::test]
async fn installed_rbac_allows_exactly_what_the_collectors_use() -> Result {
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("chart").await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let out = helm(&[
        "install",
        "gc",
        CHART,
        "--namespace",
        ns.name(),
        "--kubeconfig",
        &kubeconfig,
        "--set",
        "failedPods.enabled=true",
        "--set",
        "database.existingSecret=db-pass",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A token for the chart's ServiceAccount, and a client acting as it.
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let issued = ns
        .api::<ServiceAccount>()
        .create_token_request("gc", &PostParams::default(), &request)
        .await?;
    let token = issued.status.and_then(|s| s.token).expect("a token");
    let client = ns.service_account_client("gc").await?;

    let matrix: &[(&str, &str, &str, bool)] = &[
        ("get", "", "pods", true),
        ("list", "", "pods", true),
        ("patch", "", "pods", true),
        ("delete", "", "pods", true),
        ("get", "coordination.k8s.io", "leases", true),
        ("create", "coordination.k8s.io", "leases", true),
        ("update", "coordination.k8s.io", "leases", true),
        ("list", "apps", "deployments", true),
        ("delete", "apps", "deployments", true),
        ("list", "", "services", true),
        ("delete", "", "persistentvolumeclaims", true),
        ("list", "stream.space", "sessions", true),
        ("delete", "stream.space", "sessions", true),
        ("create", "", "pods", false),
        ("update", "", "pods", false),
        ("watch", "", "pods", false),
        ("deletecollection", "", "pods", false),
        ("get", "", "secrets", false),
        ("list", "", "secrets", false),
        ("get", "", "configmaps", false),
        ("create", "apps", "deployments", false),
        ("get", "apps", "deployments", false),
        ("delete", "coordination.k8s.io", "leases", false),
        ("create", "rbac.authorization.k8s.io", "roles", false),
    ];
    for &(verb, group, resource, want) in matrix {
        assert_eq!(
            allowed(&client, verb, group, resource, Some(ns.name())).await?,
            want,
            "{verb} {group}/{resource}"
        );
        if want {
            assert!(
                !allowed(&client, verb, group, resource, Some("default")).await?,
                "{verb} {resource} in another namespace"
            );
        }
    }
    for (verb, resource) in [("list", "nodes"), ("list", "namespaces"), ("list", "pods")] {
        assert!(
            !allowed(&client, verb, "", resource, None).await?,
            "cluster-wide {verb} {resource}"
        );
    }

    // The failed-Pod collector works with exactly that token.
    let old = Timestamp::from_second(Timestamp::now().as_second() - 7200)?;
    FailedPod::new("target")
        .label("diagnostics.example.com/collect", "true")
        .finished_at(old)
        .create(&ns.api::<Pod>())
        .await?;
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token)?;
    let out = Command::new(env!("CARGO_BIN_EXE_gc-cli"))
        .args([
            "run",
            "pods",
            "-n",
            ns.name(),
            "--retention-seconds",
            "3600",
            "--dry-run",
            "false",
            "--auto-remediate",
        ])
        .args([
            "--api-url",
            bed.server_url(),
            "--token-file",
            token_file.to_str().unwrap(),
            "--trust-certs",
        ])
        .args([
            "--store",
            &format!("sqlite:{}", dir.path().join("gc.sqlite3").display()),
        ])
        .args([
            "--archive-dir",
            dir.path().join("archives").to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"collected\""));
    assert!(ns.api::<Pod>().get_opt("target").await?.is_none());
    // The session collector, live, with the same token: the orphan's Service goes, the live one stays.
    if let Some(db) = gc_testbed::TestDatabase::fresh("chart-sessions").await? {
        let pool = db.pool().await?;
        sqlx::query("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
            .execute(&pool)
            .await?;
        sqlx::query("INSERT INTO sessions VALUES ('live-1', 'running')")
            .execute(&pool)
            .await?;
        let services = ns.api::<k8s_openapi::api::core::v1::Service>();
        for id in ["live-1", "gone-1"] {
            let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(
                serde_json::json!({
                    "metadata": {"name": id, "labels": {"app": "streamspace-session", "session": id}},
                    "spec": {"ports": [{"port": 3000}]}
                }),
            )?;
            services.create(&PostParams::default(), &service).await?;
        }
        let out = Command::new(env!("CARGO_BIN_EXE_gc-cli"))
            .args([
                "run",
                "sessions",
                "-n",
                ns.name(),
                "--kinds",
                "Service",
                "--grace-hours",
                "0",
            ])
            .args([
                "--api-url",
                bed.server_url(),
                "--token-file",
                token_file.to_str().unwrap(),
                "--trust-certs",
            ])
            .args(["--database-url", db.url()])
            .output()?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(services.get_opt("gone-1").await?.is_none());
        assert!(services.get_opt("live-1").await?.is_some());
    }
    // And every session-collector call on every kind, as a dry run.
    bed.install_session_crd().await?;
    let cluster = gc_k8s::KubeCluster::new(client);
    for kind in Kind::streamspace() {
        let page = cluster
            .list_metadata(&kind, ns.name(), "app=streamspace-session", 50, None)
            .await?;
        assert!(!page.text.is_empty());
        let pre = Preconditions {
            uid: "none".into(),
            resource_version: "1".into(),
        };
        let refused = cluster
            .delete_object(&kind, ns.name(), "absent", &pre, true)
            .await
            .unwrap_err();
        assert!(
            matches!(refused, gc_core::ports::ClusterError::NotFound(_)),
            "{} {refused}",
            kind.kind
        );
    }
    Ok(())
}
