//! The Helm chart with the real `helm` and the real API server: lint, templates for several
//! values, an install the API server accepts, its ServiceAccount proven to do exactly what the
//! collectors need there and nothing else, a default install's session CronJob and a `serve`
//! install's Deployment run exactly as rendered, and the README's and NOTES' commands naming only
//! objects the chart renders.

use std::path::PathBuf;
use std::process::{Command, Output};

use gc_core::ports::{ObjectCluster, Preconditions};
use gc_core::sessions::Kind;
use gc_testbed::{TestBed, TestNamespace};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

mod common;

use common::{Result, command, namespace, run_pods, sqlite, target};

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

/// `helm install gc CHART` into `ns` of the test bed, with `flags`.
fn install(ns: &TestNamespace, flags: &[&str]) -> Output {
    let kubeconfig = ns.bed().kubeconfig_path().to_str().unwrap();
    let head = ["install", "gc", CHART, "--namespace", ns.name()];
    helm(&[&head[..], &["--kubeconfig", kubeconfig], flags].concat())
}

/// StreamSpace's session table in `db`, holding one live session, `live-1`.
async fn one_live_session(db: &gc_testbed::TestDatabase) -> Result {
    let pool = db.pool().await?;
    sqlx::query("CREATE TABLE sessions (id VARCHAR(255) PRIMARY KEY, state VARCHAR(50))")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO sessions VALUES ('live-1', 'running')")
        .execute(&pool)
        .await?;
    pool.close().await;
    Ok(())
}

fn template(sets: &[&str]) -> String {
    template_as("gc", "streamspace", sets)
}

/// `helm template RELEASE CHART --namespace NAMESPACE --set ...`, which must succeed.
fn template_as(release: &str, namespace: &str, sets: &[&str]) -> String {
    let mut args = vec!["template", release, CHART, "--namespace", namespace];
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = helm(&args);
    assert!(
        out.status.success(),
        "{release} {sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// An object by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    kind: String,
    namespace: String,
    name: String,
}

/// Every object of a `helm template` output (or of a YAML file), as JSON.
fn documents(rendered: &str) -> Vec<Value> {
    rendered
        .split("\n---")
        .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        .map(|doc| {
            let value: serde_norway::Value = serde_norway::from_str(doc).unwrap();
            serde_json::to_value(value).unwrap()
        })
        .collect()
}

/// The rendered object of `kind` named `name`.
fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {}", names(objects)))
}

/// `Kind/name` of every object, for messages.
fn names(objects: &[Value]) -> String {
    let names: Vec<String> = objects
        .iter()
        .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
        .collect();
    names.join(", ")
}

/// The Pod spec of a CronJob's or a Deployment's template.
fn pod_spec(workload: &Value) -> &Value {
    match workload["kind"].as_str() {
        Some("CronJob") => &workload["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        Some("Deployment") => &workload["spec"]["template"]["spec"],
        other => panic!("not a workload: {other:?}"),
    }
}

/// The one container of a workload's Pod template.
fn the_container(workload: &Value) -> &Value {
    let containers = pod_spec(workload)["containers"].as_array().unwrap();
    let [container] = &containers[..] else {
        panic!("one container: {containers:?}");
    };
    container
}

/// The one container's args.
fn container_args(workload: &Value) -> Vec<String> {
    serde_json::from_value(the_container(workload)["args"].clone()).unwrap()
}

/// Every object of a `helm template` output, parsed (a namespace-less object is in `namespace`).
fn rendered_objects(rendered: &str, namespace: &str) -> Vec<Named> {
    documents(rendered)
        .into_iter()
        .map(|value| {
            let text = |v: &Value| v.as_str().map(str::to_owned);
            Named {
                kind: text(&value["kind"]).expect("a kind"),
                namespace: text(&value["metadata"]["namespace"])
                    .unwrap_or_else(|| namespace.to_owned()),
                name: text(&value["metadata"]["name"]).expect("a name"),
            }
        })
        .collect()
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
    // The session collector takes the run lock too; Pods only with the failed-Pod collector.
    assert!(defaults.contains("resources: [leases]") && !defaults.contains("resources: [pods]"));
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
    // The protect label reaches both collectors, the exclude selector when set; selectors in
    // full syntax, quoted.
    assert!(
        defaults.contains("- \"--selector=app=streamspace-session\"")
            && defaults.contains("- \"--protect-label=gc.example.com/protect=true\"")
            && !defaults.contains("--exclude-selector")
    );
    let spared = template(&[
        "failedPods.enabled=true",
        "gc.selector=app in (streamspace-session)\\,!canary",
        "gc.excludeSelector=team in (payments)",
        "failedPods.protectLabel=keep=yes",
        "failedPods.excludeSelector=!canary",
    ]);
    for flag in [
        "- \"--selector=app in (streamspace-session),!canary\"",
        "- \"--exclude-selector=team in (payments)\"",
        "- \"--protect-label=gc.example.com/protect=true\"",
        "- \"--protect-label=keep=yes\"",
        "- \"--exclude-selector=!canary\"",
    ] {
        assert!(spared.contains(flag), "{flag}:\n{spared}");
    }
    // As StreamSpace's subchart, its release's secret.
    let out = helm(&["template", "streamspace", CHART]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("name: streamspace-secrets"));
    // Bad values fail at install time, naming the value.
    for (set, field) in [
        ("gc.gracePeriod=-1", "gracePeriod"),
        ("namespace=kube-system", "namespace"),
        ("gc.schedule=often", "schedule"),
        ("gc.protectLabel=keep", "protectLabel"),
        ("failedPods.protectLabel=keep", "protectLabel"),
        ("gc.excludeSelector=a;b", "excludeSelector"),
        ("failedPods.excludeSelector=a;b", "excludeSelector"),
        ("gc.selector=", "selector"),
        ("serve.intervalSeconds=0", "intervalSeconds"),
        ("serve.port=80", "port"),
        ("serve.schedule=@hourly", "'schedule' not allowed"),
        ("metrics.serviceMonitor.interval=often", "interval"),
        ("metrics.serviceMonitor.scrape=true", "'scrape' not allowed"),
        ("serviceAccount.create=false", "serviceAccount/name"),
        ("serviceAccount.name=Not_A_Name", "serviceAccount/name"),
        ("fullnameOverride=-gc", "fullnameOverride"),
        ("events.enabled=maybe", "events/enabled"),
        ("log.format=xml", "format"),
        ("log.level=verbose", "level"),
        ("timeZone=Europe/Berlin;rm", "timeZone"),
        ("podAnnotations.n=1", "podAnnotations"),
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

/// `value` without the members `drop`: what must be the same on both sides of a comparison.
fn without(value: &Value, drop: &[&str]) -> Value {
    let mut value = value.clone();
    for key in drop {
        value.as_object_mut().unwrap().remove(*key);
    }
    value
}

/// With `serve.enabled`, each collector's Deployment runs `serve` with exactly the flags,
/// environment, volumes, ServiceAccount and scheduling of the CronJob it replaces (one set of
/// helpers renders both), adds only the port, the probes, a restart policy and a grace period, and
/// comes with a Service for its metrics (and a ServiceMonitor when asked); no CronJob is left.
#[test]
fn serve_deployments_run_exactly_the_cronjobs_flags() {
    let variations: [&[&str]; 4] = [
        &["failedPods.enabled=true"],
        &[
            "failedPods.enabled=true",
            "clusterWide.enabled=true",
            "clusterWide.namespaceSelector=team=batch",
            "gc.dryRun=true",
            "gc.terminalStates={deleted}",
            "alerts.webhookSecret=hook",
            "alerts.onSuccess=true",
            "events.enabled=false",
            "log.format=json",
            "log.level=info",
        ],
        &[
            "failedPods.enabled=true",
            "failedPods.archive.url=s3://diagnostics/pods",
            "failedPods.archive.credentialsSecret=creds",
            "failedPods.store.existingSecret=receipts",
            "metrics.pushgateway=http://pgw:9091",
            "nodeSelector.pool=batch",
            "tolerations[0].key=batch",
            "tolerations[0].operator=Exists",
            "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
            "podLabels.team=platform",
            "podAnnotations.owner=platform",
            "imagePullSecrets[0].name=registry",
        ],
        &[
            "gc.enabled=false",
            "failedPods.enabled=true",
            "log.level=error",
        ],
    ];
    for sets in variations {
        let cron = documents(&template(sets));
        let served = documents(&template(&[sets, &["serve.enabled=true"]].concat()));
        let kinds =
            |objects: &[Value], kind: &str| objects.iter().filter(|o| o["kind"] == kind).count();
        assert_eq!(kinds(&served, "CronJob"), 0, "{sets:?}");
        for kind in ["Deployment", "Service", "ServiceMonitor"] {
            assert_eq!(kinds(&cron, kind), 0, "{sets:?}: {kind}");
        }
        assert_eq!(
            kinds(&served, "ServiceMonitor"),
            0,
            "{sets:?}: not asked for"
        );
        let pushgateway = sets.iter().any(|s| s.starts_with("metrics.pushgateway="));
        for name in ["gc-sessions", "gc-failed-pods"]
            .into_iter()
            .filter(|n| cron.iter().any(|o| o["metadata"]["name"] == *n))
        {
            let context = format!("{sets:?} {name}");
            let job = object(&cron, "CronJob", name);
            let deployment = object(&served, "Deployment", name);
            // `[log flags] run C FLAGS` and `[log flags] serve --listen --interval-seconds C FLAGS`.
            let (run, serve) = (container_args(job), container_args(deployment));
            let at = run.iter().position(|a| a == "run").expect("run");
            let served_at = serve.iter().position(|a| a == "serve").expect("serve");
            assert_eq!(run[..at], serve[..served_at], "{context}");
            assert_eq!(
                serve[served_at + 1..served_at + 3],
                ["--listen=0.0.0.0:9898", "--interval-seconds=21600"],
                "{context}"
            );
            assert_eq!(run[at + 1..], serve[served_at + 3..], "{context}");
            assert_eq!(
                serve.iter().any(|a| a.starts_with("--pushgateway")),
                pushgateway,
                "{context}: the Pushgateway only when set"
            );
            // The same container but for the server's parts, the same Pod but for its restart
            // policy and grace period.
            let server_parts = ["args", "ports", "livenessProbe", "readinessProbe"];
            let (a, b) = (the_container(job), the_container(deployment));
            assert_eq!(
                without(a, &server_parts),
                without(b, &server_parts),
                "{context}"
            );
            let pod_parts = [
                "containers",
                "restartPolicy",
                "terminationGracePeriodSeconds",
            ];
            let (a, b) = (pod_spec(job), pod_spec(deployment));
            assert_eq!(without(a, &pod_parts), without(b, &pod_parts), "{context}");
            assert_eq!(
                (&a["restartPolicy"], &b["restartPolicy"]),
                (&"Never".into(), &"Always".into())
            );
            assert_eq!(b["terminationGracePeriodSeconds"], 120, "{context}");
            assert_eq!(
                job["spec"]["jobTemplate"]["spec"]["template"]["metadata"],
                deployment["spec"]["template"]["metadata"],
                "{context}: Pod labels and annotations"
            );
            check_server(&served, name, &context);
        }
    }
}

/// The Deployment `name` of `objects` serves as Kubernetes expects: one replica replaced with
/// Recreate, probes on /healthz at the port its Service `name` exposes as `metrics`.
fn check_server(objects: &[Value], name: &str, context: &str) {
    let deployment = object(objects, "Deployment", name);
    assert_eq!(deployment["spec"]["replicas"], 1, "{context}");
    assert_eq!(
        deployment["spec"]["strategy"]["type"], "Recreate",
        "{context}"
    );
    let container = the_container(deployment);
    assert_eq!(
        container["ports"],
        serde_json::json!([{"name": "metrics", "containerPort": 9898, "protocol": "TCP"}]),
        "{context}"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(
            container[probe]["httpGet"],
            serde_json::json!({"path": "/healthz", "port": "metrics"}),
            "{context}: {probe}"
        );
    }
    // The selector picks this collector's Pods, and the Service the same Pods.
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(&labels[key], value, "{context}: {key}");
    }
    let collector = name.strip_prefix("gc-").unwrap();
    assert_eq!(selector["gc.example.com/collector"], collector, "{context}");
    let service = object(objects, "Service", name);
    assert_eq!(&service["spec"]["selector"], selector, "{context}");
    assert_eq!(service["spec"]["type"], "ClusterIP", "{context}");
    assert_eq!(
        service["spec"]["ports"],
        serde_json::json!([{"name": "metrics", "port": 9898, "targetPort": "metrics", "protocol": "TCP"}]),
        "{context}"
    );
}

/// `metrics.serviceMonitor.enabled` (with `serve.enabled`): one ServiceMonitor per Service,
/// selecting exactly that Service's labels in its namespace, scraping its `metrics` port with the
/// collector's own `namespace` label kept, with the given interval and labels.
#[test]
fn service_monitors_select_each_collectors_service() {
    let objects = documents(&template(&[
        "serve.enabled=true",
        "failedPods.enabled=true",
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.interval=60s",
        "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    ]));
    for name in ["gc-sessions", "gc-failed-pods"] {
        let monitor = object(&objects, "ServiceMonitor", name);
        assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(
            monitor["metadata"]["labels"]["release"],
            "kube-prometheus-stack"
        );
        let service = object(&objects, "Service", name);
        let wanted = monitor["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap();
        for other in objects.iter().filter(|o| o["kind"] == "Service") {
            let picked = wanted
                .iter()
                .all(|(k, v)| &other["metadata"]["labels"][k] == v);
            assert_eq!(
                picked,
                other == service,
                "{name} picks {}",
                other["metadata"]["name"]
            );
        }
        assert_eq!(
            monitor["spec"]["namespaceSelector"],
            serde_json::json!({"matchNames": ["streamspace"]})
        );
        assert_eq!(
            monitor["spec"]["endpoints"],
            serde_json::json!([{"port": "metrics", "path": "/metrics", "interval": "60s", "honorLabels": true}])
        );
    }
    // Without `serve` there is no Service to monitor.
    let cron = documents(&template(&["metrics.serviceMonitor.enabled=true"]));
    assert!(
        cron.iter().all(|o| o["kind"] != "ServiceMonitor"),
        "{}",
        names(&cron)
    );
}

/// The chart's Role grants exactly `gc_k8s::rbac::required_rules` with both collectors and Events
/// on, its ClusterRole exactly `cluster_rules`; each collector alone, or Events off, a part of them.
#[test]
fn the_roles_grant_exactly_the_rules_of_gc_k8s() {
    let required = triples(gc_k8s::rbac::required_rules());
    let cluster = triples(gc_k8s::rbac::cluster_rules());
    let both = documents(&template(&["failedPods.enabled=true"]));
    assert_eq!(granted(&both, "Role"), required);
    let wide = documents(&template(&[
        "failedPods.enabled=true",
        "clusterWide.enabled=true",
    ]));
    assert_eq!(granted(&wide, "ClusterRole"), cluster);
    for sets in [
        &["gc.enabled=false", "failedPods.enabled=true"][..],
        &[],
        &["events.enabled=false", "failedPods.enabled=true"],
    ] {
        let rules = granted(&documents(&template(sets)), "Role");
        assert!(
            rules.is_subset(&required) && rules != required,
            "{sets:?}: {rules:?}"
        );
    }
}

/// The Role's (or ClusterRole's) rules of `objects` as (group, resource, verb) triples.
fn granted(objects: &[Value], kind: &str) -> std::collections::BTreeSet<(String, String, String)> {
    let role = objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {}", names(objects)));
    let rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule> =
        serde_json::from_value(role["rules"].clone()).unwrap();
    triples(rules)
}

fn triples(
    rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
) -> std::collections::BTreeSet<(String, String, String)> {
    let mut set = std::collections::BTreeSet::new();
    for rule in rules {
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    set.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    set
}

/// `serviceAccount.create=false` runs as the named account, binds the Role (or ClusterRole) to
/// it and renders no ServiceAccount; `serviceAccount.annotations` reach the created one;
/// `fullnameOverride` and `nameOverride` rename every object; `events.enabled=false` drops the
/// Events rule and passes `--no-events`; the Pod values reach every collector's Pod.
#[test]
fn service_account_names_events_and_pod_values() {
    for extra in [
        &[][..],
        &["serve.enabled=true"],
        &["clusterWide.enabled=true"],
    ] {
        let sets = [
            &["failedPods.enabled=true", "serviceAccount.create=false"][..],
            &["serviceAccount.name=streamspace-gc"],
            extra,
        ]
        .concat();
        let objects = documents(&template(&sets));
        assert!(
            objects.iter().all(|o| o["kind"] != "ServiceAccount"),
            "{sets:?}: {}",
            names(&objects)
        );
        let binding = objects
            .iter()
            .find(|o| {
                o["kind"]
                    .as_str()
                    .is_some_and(|k| k.ends_with("RoleBinding"))
            })
            .expect("a binding");
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "streamspace-gc", "namespace": "streamspace"}]),
            "{sets:?}"
        );
        for workload in objects
            .iter()
            .filter(|o| o["kind"] == "CronJob" || o["kind"] == "Deployment")
        {
            assert_eq!(
                pod_spec(workload)["serviceAccountName"],
                "streamspace-gc",
                "{sets:?}"
            );
        }
    }
    let annotated = documents(&template(&[
        "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/gc",
    ]));
    let account = object(&annotated, "ServiceAccount", "gc");
    assert_eq!(
        account["metadata"]["annotations"],
        serde_json::json!({"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/gc"})
    );

    // Every object takes the overridden name; the PVC's claim and the account follow.
    for (sets, prefix, label) in [
        (&["fullnameOverride=cleaner"][..], "cleaner", "gc"),
        (&["nameOverride=janitor"][..], "gc-janitor", "janitor"),
    ] {
        let sets = [
            sets,
            &[
                "failedPods.enabled=true",
                "serve.enabled=true",
                "metrics.serviceMonitor.enabled=true",
            ],
        ]
        .concat();
        let objects = documents(&template(&sets));
        for o in &objects {
            let name = o["metadata"]["name"].as_str().unwrap();
            assert!(
                name == prefix || name.starts_with(&format!("{prefix}-")),
                "{sets:?}: {name}"
            );
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/name"], label,
                "{sets:?}"
            );
        }
        let deployment = object(&objects, "Deployment", &format!("{prefix}-failed-pods"));
        assert_eq!(pod_spec(deployment)["serviceAccountName"], prefix);
        assert_eq!(
            pod_spec(deployment)["volumes"][0]["persistentVolumeClaim"]["claimName"],
            format!("{prefix}-state")
        );
        assert_eq!(
            deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
            label
        );
    }

    // Events: a rule and no flag, or no rule and `--no-events`, for both collectors.
    let event_rule = (
        "events.k8s.io".to_owned(),
        "events".to_owned(),
        "create".to_owned(),
    );
    for (enabled, sets) in [
        (true, &[][..]),
        (false, &["events.enabled=false"]),
        (true, &["serve.enabled=true"]),
        (false, &["events.enabled=false", "clusterWide.enabled=true"]),
    ] {
        let sets = [sets, &["failedPods.enabled=true"]].concat();
        let objects = documents(&template(&sets));
        let role = if sets.contains(&"clusterWide.enabled=true") {
            "ClusterRole"
        } else {
            "Role"
        };
        let rules = granted(&objects, role);
        assert_eq!(rules.contains(&event_rule), enabled, "{sets:?}");
        assert!(
            !rules.iter().any(|(_, r, v)| r == "events" && v != "create"),
            "{sets:?}: {rules:?}"
        );
        let workloads: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "CronJob" || o["kind"] == "Deployment")
            .collect();
        assert_eq!(workloads.len(), 2, "{sets:?}");
        for workload in workloads {
            let args = container_args(workload);
            assert_eq!(
                args.iter().any(|a| a == "--no-events"),
                !enabled,
                "{sets:?}"
            );
        }
    }

    // Pod values reach the CronJobs' and the Deployments' Pods alike; the time zone the CronJobs.
    let pod_values = [
        "failedPods.enabled=true",
        "podAnnotations.owner=platform",
        "podLabels.team=platform",
        "nodeSelector.pool=batch",
        "tolerations[0].key=batch",
        "tolerations[0].operator=Exists",
        "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
        "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=pool",
        "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists",
        "timeZone=Europe/Berlin",
        "log.format=json",
        "log.level=debug",
    ];
    for serve in [false, true] {
        let sets = [
            &pod_values[..],
            &[if serve {
                "serve.enabled=true"
            } else {
                "serve.enabled=false"
            }],
        ]
        .concat();
        let objects = documents(&template(&sets));
        let kind = if serve { "Deployment" } else { "CronJob" };
        for name in ["gc-sessions", "gc-failed-pods"] {
            let workload = object(&objects, kind, name);
            let spec = pod_spec(workload);
            assert_eq!(
                spec["nodeSelector"],
                serde_json::json!({"pool": "batch"}),
                "{name}"
            );
            assert_eq!(
                spec["tolerations"],
                serde_json::json!([{"key": "batch", "operator": "Exists"}]),
                "{name}"
            );
            assert_eq!(
                spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
                    [0]["weight"],
                1,
                "{name}"
            );
            let template = if serve {
                &workload["spec"]["template"]
            } else {
                &workload["spec"]["jobTemplate"]["spec"]["template"]
            };
            assert_eq!(
                template["metadata"]["annotations"]["owner"], "platform",
                "{name}"
            );
            assert_eq!(template["metadata"]["labels"]["team"], "platform", "{name}");
            assert_eq!(
                container_args(workload)[..2],
                ["--log-format=json", "-vv"],
                "{name}"
            );
            if !serve {
                assert_eq!(workload["spec"]["timeZone"], "Europe/Berlin", "{name}");
            }
        }
    }
    for (level, flag) in [("error", "-q"), ("info", "-v"), ("trace", "-vvv")] {
        let objects = documents(&template(&[&format!("log.level={level}")]));
        let args = container_args(object(&objects, "CronJob", "gc-sessions"));
        assert_eq!(args[..3], [flag, "run", "sessions"], "{level}");
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
    let rules: Value =
        serde_json::to_value(serde_norway::from_str::<serde_norway::Value>(&text).unwrap())
            .unwrap();
    // What each run publishes about itself (gauges, pushed or served) and what `serve` counts.
    let objects =
        ["scanned", "eligible", "held", "deferred", "deleted"].map(|o| format!("objects_{o}"));
    let mut exported: Vec<String> = ["fences_lost", "errors", "archive_bytes"]
        .map(str::to_owned)
        .into_iter()
        .chain(objects)
        .flat_map(|m| [format!("last_run_{m}"), format!("{m}_total")])
        .collect();
    exported.extend(
        [
            "runs_total",
            "last_run_success",
            "last_run_duration_seconds",
            "last_attempt_timestamp_seconds",
            "last_success_timestamp_seconds",
        ]
        .map(str::to_owned),
    );
    let list = rules["groups"][0]["rules"].as_array().unwrap();
    assert!(list.len() >= 4);
    for rule in list {
        let expr = rule["expr"].as_str().unwrap();
        let named: Vec<&str> = expr
            .split("streamspace_")
            .skip(1)
            .map(|rest| {
                let end = rest
                    .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect();
        assert!(!named.is_empty(), "{expr}");
        for name in named {
            assert!(
                exported.iter().any(|m| m == name),
                "streamspace_{name}: {expr}"
            );
        }
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

/// The Prometheus Operator's ServiceMonitor CRD (`tests/data`), installed once on the test bed
/// and `Established`.
async fn install_service_monitor_crd(bed: &TestBed) -> Result {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/monitoring.coreos.com_servicemonitors.yaml"
    ))?;
    let [crd] = &documents(&text)[..] else {
        panic!("one CRD");
    };
    let crd: CustomResourceDefinition = serde_json::from_value(crd.clone())?;
    let crds: Api<CustomResourceDefinition> = Api::all(bed.client());
    match crds.create(&PostParams::default(), &crd).await {
        Err(e) if gc_testbed::status_code(&e) != Some(409) => return Err(e.into()),
        _ => {}
    }
    for _ in 0..300 {
        let conditions = crds
            .get("servicemonitors.monitoring.coreos.com")
            .await?
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
        {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err("the ServiceMonitor CRD is not Established".into())
}

/// Creates `object` in a server-side dry run (`dryRun=All`: validation and admission, nothing
/// stored) with `fieldValidation=Strict`: a field the schema does not know is refused, not
/// silently dropped.
async fn dry_run_create(client: &kube::Client, namespace: &str, object: &DynamicObject) -> Result {
    use kube::Resource;
    let types = object.types.clone().expect("apiVersion and kind");
    let gvk = GroupVersionKind::try_from(&types)?;
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await?;
    let scope = match capabilities.scope {
        kube::discovery::Scope::Namespaced => Some(namespace),
        kube::discovery::Scope::Cluster => None,
    };
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let url = DynamicObject::url_path(&resource, scope);
    let mut request = kube::core::Request::new(url).create(&params, serde_json::to_vec(object)?)?;
    let uri = format!("{}&fieldValidation=Strict", request.uri());
    *request.uri_mut() = uri.parse()?;
    client.request::<DynamicObject>(request).await?;
    Ok(())
}

/// Every manifest the chart renders, for several values (`serve` with ServiceMonitors among them,
/// the Prometheus Operator's own CRD installed), is accepted by the real API server in a strict
/// server-side dry run.
#[tokio::test]
async fn rendered_manifests_pass_a_server_side_dry_run() -> Result {
    let (bed, ns) = namespace("chart-dry").await?;
    install_service_monitor_crd(bed).await?;
    let client = ns.client().clone();
    let variations: [&[&str]; 7] = [
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
        &[
            "serve.enabled=true",
            "failedPods.enabled=true",
            "metrics.serviceMonitor.enabled=true",
            "metrics.serviceMonitor.interval=60s",
            "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
            "serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=gc@p.iam.gserviceaccount.com",
            "podAnnotations.owner=platform",
            "tolerations[0].key=batch",
            "tolerations[0].operator=Exists",
            "log.format=json",
            "log.level=debug",
        ],
        &[
            "serve.enabled=true",
            "failedPods.enabled=true",
            "failedPods.archive.url=s3://diagnostics/pods",
            "failedPods.store.existingSecret=receipts",
            "events.enabled=false",
            "clusterWide.enabled=true",
            "fullnameOverride=cleaner",
        ],
        &[
            "failedPods.enabled=true",
            "timeZone=Europe/Berlin",
            "serviceAccount.create=false",
            "serviceAccount.name=existing",
            "nodeSelector.pool=batch",
        ],
    ];
    for sets in variations {
        let mut sets = sets.to_vec();
        let namespace = format!("namespace={}", ns.name());
        sets.push(&namespace);
        let rendered = template(&sets);
        let mut kinds = Vec::new();
        for value in documents(&rendered) {
            let object: DynamicObject = serde_json::from_value(value)?;
            dry_run_create(&client, ns.name(), &object)
                .await
                .map_err(|e| {
                    format!(
                        "{sets:?}: {:?} {:?}: {e}",
                        object.types, object.metadata.name
                    )
                })?;
            kinds.push(object.types.unwrap().kind);
        }
        assert!(kinds.len() >= 4, "{sets:?}: only {kinds:?}");
        if sets.contains(&"metrics.serviceMonitor.enabled=true") {
            let monitors = kinds.iter().filter(|k| *k == "ServiceMonitor").count();
            assert_eq!(monitors, 2, "{sets:?}: {kinds:?}");
        }
    }
    // Nothing was stored.
    assert!(
        Api::<k8s_openapi::api::batch::v1::CronJob>::namespaced(client.clone(), ns.name())
            .list(&Default::default())
            .await?
            .items
            .is_empty()
    );
    assert!(
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client, ns.name())
            .list(&Default::default())
            .await?
            .items
            .is_empty()
    );
    Ok(())
}

#[tokio::test]
async fn installed_rbac_allows_exactly_what_the_collectors_use() -> Result {
    let (bed, ns) = namespace("chart").await?;
    let out = install(
        &ns,
        &[
            "--set",
            "failedPods.enabled=true",
            "--set",
            "database.existingSecret=db-pass",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A token for the chart's ServiceAccount, and a client acting as it.
    let token = ns.service_account_token("gc").await?;
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
        ("create", "events.k8s.io", "events", true),
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
        ("update", "events.k8s.io", "events", false),
        ("list", "events.k8s.io", "events", false),
        ("create", "", "events", false),
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
    target(&ns, "target").await?;
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token)?;
    // The API server, as the chart's ServiceAccount.
    let as_account = [
        "--api-url",
        bed.server_url(),
        "--token-file",
        token_file.to_str().unwrap(),
        "--trust-certs",
    ];
    let out = command()
        .args(run_pods(ns.name()))
        .args(["--dry-run", "false", "--auto-remediate"])
        .args(as_account)
        .args(["--store", &sqlite(dir.path(), "gc.sqlite3")])
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
        one_live_session(&db).await?;
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
        let out = command()
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
            .args(as_account)
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

/// The words of one shell line: quotes group words, an unquoted `#` starting a word ends the line.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.get_or_insert_default().push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    word.get_or_insert_default();
                }
                '#' if word.is_none() => break,
                c if c.is_whitespace() => words.extend(word.take()),
                c => word.get_or_insert_default().push(c),
            },
        }
    }
    words.extend(word);
    words
}

/// The `kubectl` and `helm` commands of a Markdown file's fenced code blocks, in order: a `$ `
/// prompt and comments removed, `\` continuations joined, `&&`, `||`, `|` and `;` separating.
fn doc_commands(markdown: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut fenced = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let words = shell_words(&std::mem::take(&mut pending));
        for command in words.split(|w| ["&&", "||", "|", ";"].contains(&w.as_str())) {
            if command
                .first()
                .is_some_and(|w| w == "kubectl" || w == "helm")
            {
                commands.push(command.to_vec());
            }
        }
    }
    commands
}

/// The kind a kubectl resource word names (`cronjob`, `cronjobs.batch`, `sa`, ...), if one this
/// test knows.
fn kubectl_kind(word: &str) -> Option<&'static str> {
    let word = word.split('.').next()?.to_ascii_lowercase();
    Some(match word.as_str() {
        "cronjob" | "cronjobs" | "cj" => "CronJob",
        "job" | "jobs" => "Job",
        "pod" | "pods" | "po" => "Pod",
        "serviceaccount" | "serviceaccounts" | "sa" => "ServiceAccount",
        "role" | "roles" => "Role",
        "rolebinding" | "rolebindings" => "RoleBinding",
        "persistentvolumeclaim" | "persistentvolumeclaims" | "pvc" => "PersistentVolumeClaim",
        "secret" | "secrets" => "Secret",
        "configmap" | "configmaps" | "cm" => "ConfigMap",
        "deployment" | "deployments" | "deploy" => "Deployment",
        "service" | "services" | "svc" => "Service",
        "lease" | "leases" => "Lease",
        _ => return None,
    })
}

/// kubectl flags that take the next word as their value (when not written `--flag=value`).
const KUBECTL_VALUE_FLAGS: &[&str] = &[
    "-n",
    "--namespace",
    "-o",
    "--output",
    "-l",
    "--selector",
    "-c",
    "--container",
    "--from",
    "--as",
    "--image",
    "--tail",
    "--since",
    "--context",
    "--kubeconfig",
    "--duration",
];

/// What one kubectl command names: the objects it refers to and the objects it creates.
fn kubectl_names(words: &[String]) -> (Vec<Named>, Vec<Named>) {
    let mut namespace = "default".to_owned();
    let mut positional = Vec::new();
    let mut values = Vec::new();
    let mut rest = words[1..].iter();
    while let Some(word) = rest.next() {
        if let Some((flag, value)) = word.split_once('=').filter(|_| word.starts_with('-')) {
            if flag == "--namespace" || flag == "-n" {
                namespace = value.to_owned();
            }
            values.push(value.to_owned());
        } else if KUBECTL_VALUE_FLAGS.contains(&word.as_str()) {
            let value = rest.next().expect("a flag value").clone();
            if word == "-n" || word == "--namespace" {
                namespace = value.clone();
            }
            values.push(value);
        } else if word.starts_with('-') {
            // A flag without a value.
        } else {
            positional.push(word.clone());
        }
    }
    let named = |kind: &str, namespace: &str, name: &str| Named {
        kind: kind.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    };
    let mut refers = Vec::new();
    let mut creates = Vec::new();
    // `kind/name`, as a positional word or a flag's value (`--from=cronjob/NAME`).
    for word in positional.iter().chain(&values) {
        if let Some((kind, name)) = word.split_once('/')
            && let Some(kind) = kubectl_kind(kind)
            && !name.is_empty()
        {
            refers.push(named(kind, &namespace, name));
        }
    }
    // `--as=system:serviceaccount:NAMESPACE:NAME`
    for value in &values {
        if let Some(account) = value.strip_prefix("system:serviceaccount:") {
            let (ns, name) = account.split_once(':').expect("namespace:name");
            refers.push(named("ServiceAccount", ns, name));
        }
    }
    let verb = positional.first().map(String::as_str);
    let kind_word = positional.get(1).filter(|w| !w.contains('/'));
    match (verb, kind_word) {
        // `create token ACCOUNT`, `create job NAME`, `create secret generic NAME`.
        (Some("create"), Some(what)) if what == "token" => {
            for name in &positional[2..] {
                refers.push(named("ServiceAccount", &namespace, name));
            }
        }
        (Some("create"), Some(what)) => {
            let kind = kubectl_kind(what).unwrap_or_else(|| panic!("kubectl create {what}"));
            let skip = usize::from(
                kind == "Secret"
                    && positional
                        .get(2)
                        .is_some_and(|w| ["generic", "tls", "docker-registry"].contains(&&**w)),
            );
            let name = positional.get(2 + skip).expect("a name to create");
            creates.push(named(kind, &namespace, name));
        }
        // `get cronjob NAME...` and the like.
        (Some(_), Some(what)) => {
            if let Some(kind) = kubectl_kind(what) {
                for name in positional[2..].iter().filter(|w| !w.contains('/')) {
                    refers.push(named(kind, &namespace, name));
                }
            }
        }
        _ => {}
    }
    (refers, creates)
}

/// A `helm` command's release, chart, namespace and `--set`s.
struct HelmCommand {
    subcommand: String,
    positional: Vec<String>,
    namespace: String,
    sets: Vec<String>,
    install: bool,
}

fn parse_helm(words: &[String]) -> HelmCommand {
    let mut parsed = HelmCommand {
        subcommand: words.get(1).cloned().unwrap_or_default(),
        positional: Vec::new(),
        namespace: "default".to_owned(),
        sets: Vec::new(),
        install: false,
    };
    let mut rest = words.iter().skip(2);
    while let Some(word) = rest.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) if word.starts_with('-') => (flag, Some(value.to_owned())),
            _ => (word.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| rest.next().cloned()).unwrap();
        match flag {
            "-n" | "--namespace" => parsed.namespace = value(),
            "--set" | "--set-string" => parsed.sets.push(value()),
            "--install" | "-i" => parsed.install = true,
            "--create-namespace" | "--wait" | "--atomic" | "--dry-run" => {}
            flag if flag.starts_with('-') => {
                panic!("helm {flag}: teach this test what it does to the rendered names")
            }
            _ => parsed.positional.push(word.clone()),
        }
    }
    parsed
}

/// Every `kubectl`/`helm` command the chart's README shows names objects that the chart renders
/// (`helm template` with the README's own release, namespace and values) or that an earlier
/// command of the README creates, and every `helm` command names the README's release.
#[test]
fn readme_commands_name_rendered_objects() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/README.md"))
            .unwrap();
    let commands = doc_commands(&readme);
    let mut releases: Vec<(String, String)> = Vec::new();
    let mut known: Vec<Named> = Vec::new();
    let (mut renders, mut checked) = (0, 0);
    let mut problems = Vec::new();
    for words in &commands {
        let line = words.join(" ");
        if words[0] == "helm" {
            let helm = parse_helm(words);
            match helm.subcommand.as_str() {
                "install" | "upgrade" | "template" => {
                    let [release, chart] = &helm.positional[..] else {
                        panic!("{line}: want RELEASE CHART");
                    };
                    assert!(
                        chart == "./chart" || chart == "chart",
                        "{line}: which chart is {chart}?"
                    );
                    let release_ns = (release.clone(), helm.namespace.clone());
                    if helm.subcommand == "upgrade" && !helm.install {
                        if !releases.contains(&release_ns) {
                            problems.push(format!(
                                "{line}: no earlier install of {release} in {}",
                                helm.namespace
                            ));
                        }
                    } else if helm.subcommand != "template" {
                        releases.push(release_ns);
                    }
                    let sets: Vec<&str> = helm.sets.iter().map(String::as_str).collect();
                    let rendered = template_as(release, &helm.namespace, &sets);
                    known.extend(rendered_objects(&rendered, &helm.namespace));
                    renders += 1;
                }
                "uninstall" | "status" | "rollback" | "history" | "get" | "test" => {
                    let release = helm
                        .positional
                        .iter()
                        .find(|w| !["values", "manifest", "notes", "all"].contains(&w.as_str()))
                        .expect("a release");
                    if !releases.contains(&(release.clone(), helm.namespace.clone())) {
                        problems.push(format!(
                            "{line}: no earlier install of {release} in {}",
                            helm.namespace
                        ));
                    }
                }
                _ => {}
            }
        } else {
            let (refers, creates) = kubectl_names(words);
            for object in refers {
                checked += 1;
                if !known.contains(&object) {
                    problems.push(format!(
                        "{line}: no {} {} in namespace {}; rendered or created before it: {known:?}",
                        object.kind, object.name, object.namespace
                    ));
                }
            }
            known.extend(creates);
        }
    }
    assert!(
        renders > 0 && checked > 0,
        "the README shows no install or no kubectl command naming a chart object: {commands:?}"
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

/// NOTES.txt as `helm install` prints it for `sets` (a client-side dry run: nothing installed).
fn notes(bed: &TestBed, sets: &[&str]) -> String {
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap();
    let mut args = vec![
        "install",
        "gc",
        CHART,
        "--namespace",
        "streamspace",
        "--dry-run=client",
        "--kubeconfig",
        kubeconfig,
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = helm(&args);
    assert!(
        out.status.success(),
        "{sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let (_, notes) = stdout.split_once("\nNOTES:\n").expect("NOTES");
    notes.to_owned()
}

/// The `kubectl` commands of NOTES name only objects the same values render (or an earlier
/// command creates): the selectors pick a rendered CronJob's Jobs, the port-forwards a rendered
/// Service's `metrics` port.
fn check_notes_commands(notes: &str, sets: &[&str]) -> usize {
    let rendered = template(sets);
    let objects = documents(&rendered);
    let mut known = rendered_objects(&rendered, "streamspace");
    let mut checked = 0;
    for line in notes.lines() {
        let words = shell_words(line.trim());
        if words.first().is_none_or(|w| w != "kubectl") {
            continue;
        }
        let (refers, creates) = kubectl_names(&words);
        for object in refers {
            assert!(known.contains(&object), "{sets:?}: {line}: no {object:?}");
            checked += 1;
        }
        known.extend(creates);
        if let Some(at) = words.iter().position(|w| w == "-l") {
            let pairs: Vec<(&str, &str)> = words[at + 1]
                .split(',')
                .map(|p| p.split_once('=').unwrap())
                .collect();
            let picked = objects.iter().filter(|o| o["kind"] == "CronJob").any(|o| {
                let labels = &o["spec"]["jobTemplate"]["metadata"]["labels"];
                pairs.iter().all(|(k, v)| labels[*k] == *v)
            });
            assert!(picked, "{sets:?}: {line}: no CronJob's Jobs");
            checked += 1;
        }
        if let Some(at) = words.iter().position(|w| w == "port-forward") {
            let service = words[at + 1].strip_prefix("svc/").expect("svc/NAME");
            let (port, name) = words[at + 2].split_once(':').expect("PORT:NAME");
            let ports = &object(&objects, "Service", service)["spec"]["ports"][0];
            assert_eq!(
                (ports["port"].to_string().as_str(), &ports["name"]),
                (port, &name.into())
            );
        }
    }
    checked
}

/// NOTES.txt tells the installer what runs (each collector as a CronJob with its schedule or as a
/// Deployment with its interval, where, whether it runs dry), how to read the audit and the
/// metrics; every command it shows names objects the chart rendered.
#[tokio::test]
async fn notes_tell_what_runs_and_name_rendered_objects() -> Result {
    let bed = TestBed::shared().await?;
    install_service_monitor_crd(bed).await?;
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &[],
            &[
                "CronJob gc-sessions",
                "LIVE (gc.dryRun=false)",
                "Schedule: \"0 */6 * * *\".",
                "Namespaces: streamspace only (Role gc).",
                "logs job/gc-sessions-now",
                "kubectl get events -n streamspace --field-selector=reportingComponent=gc.example.com/gc-cli",
                "Not exported",
            ],
        ),
        (
            &[
                "gc.dryRun=true",
                "failedPods.enabled=true",
                "metrics.pushgateway=http://pgw:9091",
                "timeZone=Europe/Berlin",
            ],
            &[
                "DRY RUN (gc.dryRun=true)",
                "CronJob gc-failed-pods",
                "DRY RUN (failedPods.dryRun=true, failedPods.autoRemediate=false)",
                "Schedule: \"0 8 * * *\" (Europe/Berlin).",
                "pushes them to http://pgw:9091",
            ],
        ),
        (
            &[
                "serve.enabled=true",
                "failedPods.enabled=true",
                "failedPods.dryRun=false",
                "failedPods.autoRemediate=true",
                "metrics.serviceMonitor.enabled=true",
                "clusterWide.enabled=true",
                "serviceAccount.create=false",
                "serviceAccount.name=existing",
            ],
            &[
                "Deployment gc-sessions",
                "Deployment gc-failed-pods",
                "then every 21600 seconds",
                "LIVE (failedPods.dryRun=false, failedPods.autoRemediate=true)",
                "every namespace",
                "logs deploy/gc-failed-pods",
                "kubectl get events --all-namespaces --field-selector=reportingComponent=",
                "port-forward svc/gc-sessions 9898:metrics",
                "ServiceMonitors gc-sessions, gc-failed-pods",
                "ServiceAccount: existing (an existing one",
            ],
        ),
        (&["gc.enabled=false"], &["No collector is enabled"]),
        (
            &["events.enabled=false", "fullnameOverride=cleaner"],
            &["CronJob cleaner-sessions", "logs job/cleaner-sessions-now"],
        ),
    ];
    for (sets, says) in cases {
        let text = notes(bed, sets);
        for want in says {
            assert!(text.contains(want), "{sets:?}: no {want:?} in\n{text}");
        }
        assert_eq!(
            text.contains("get events"),
            !sets.contains(&"events.enabled=false") && !sets.contains(&"gc.enabled=false"),
            "{sets:?}:\n{text}"
        );
        let checked = check_notes_commands(&text, sets);
        assert_eq!(checked > 0, !sets.contains(&"gc.enabled=false"), "{sets:?}");
    }
    Ok(())
}

/// `postgres://USER:PASSWORD@HOST:PORT/NAME[?...]`, split.
fn database_parts(url: &str) -> [String; 5] {
    let rest = url.split_once("://").expect("a URL").1;
    let rest = rest.split('?').next().unwrap();
    assert!(!rest.contains('%'), "an encoded database URL: {url}");
    let (auth, rest) = rest.rsplit_once('@').expect("credentials");
    let (user, password) = auth.split_once(':').expect("a password");
    let (host_port, name) = rest.split_once('/').expect("a database");
    let (host, port) = host_port.rsplit_once(':').expect("a port");
    [host, port, name, user, password].map(str::to_owned)
}

/// The password of `db` in a Secret of the user's in `ns`, and the chart's `database.*` values
/// that connect to it, as `(flag, value)` pairs.
async fn session_database(
    ns: &TestNamespace,
    db: &gc_testbed::TestDatabase,
) -> Result<Vec<(&'static str, String)>> {
    use k8s_openapi::api::core::v1::Secret;
    let [host, port, name, user, password] = database_parts(db.url());
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "session-db"},
        "stringData": {"postgres-password": password},
    }))?;
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(vec![
        ("--set-string", format!("database.host={host}")),
        ("--set", format!("database.port={port}")),
        ("--set-string", format!("database.name={name}")),
        ("--set-string", format!("database.user={user}")),
        (
            "--set-string",
            "database.existingSecret=session-db".to_owned(),
        ),
    ])
}

/// `helm install` into `ns` with `(flag, value)` pairs, which must succeed.
fn install_with(ns: &TestNamespace, sets: &[(&str, String)]) {
    let args: Vec<&str> = sets
        .iter()
        .flat_map(|(flag, set)| [*flag, set.as_str()])
        .collect();
    let out = install(ns, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One live session (`live-1`, which [`one_live_session`] puts in the table) and one orphaned one
/// (`gone-1`) in `ns`: each a `Session` object and a Service, as StreamSpace labels them.
async fn live_and_gone(
    ns: &TestNamespace,
    resource: &kube::discovery::ApiResource,
) -> Result<(Api<DynamicObject>, Api<k8s_openapi::api::core::v1::Service>)> {
    use k8s_openapi::api::core::v1::Service;
    let sessions: Api<DynamicObject> =
        Api::namespaced_with(ns.client().clone(), ns.name(), resource);
    let services = ns.api::<Service>();
    for id in ["live-1", "gone-1"] {
        let labels = serde_json::json!({"app": "streamspace-session", "session": id});
        let session: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": {"name": id, "labels": labels},
            "spec": {"user": "someone", "template": "firefox"},
        }))?;
        sessions.create(&PostParams::default(), &session).await?;
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": id, "labels": labels},
            "spec": {"ports": [{"port": 3000}]},
        }))?;
        services.create(&PostParams::default(), &service).await?;
    }
    Ok((sessions, services))
}

/// The chart installed as a user installs it (default values; only the database connection set,
/// the way the README tells a standalone install), and its session CronJob's container run as
/// the kubelet would run it: the image's entrypoint with the rendered args, the rendered
/// environment resolved from its values and Secret, and a token of the chart's ServiceAccount.
/// It must take the run lock, delete the orphans and keep the live session's objects.
#[tokio::test]
async fn default_install_runs_the_rendered_session_collector() -> Result {
    use k8s_openapi::api::batch::v1::CronJob;

    let bed = TestBed::shared().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("chart-default").await? else {
        return Ok(());
    };
    let ns = bed.namespace("chart-default").await?;
    let session_resource = bed.install_session_crd().await?;

    // StreamSpace's session table: one live session.
    one_live_session(&db).await?;

    // The password in a Secret of the user's, the connection in the chart's `database.*` values.
    let sets = session_database(&ns, &db).await?;
    install_with(&ns, &sets);

    // The installed CronJob, as the API server stores it: its Pod template's one container.
    let cron_jobs = ns.api::<CronJob>().list(&Default::default()).await?.items;
    assert_eq!(cron_jobs.len(), 1, "the default install runs one collector");
    let cron_job = &cron_jobs[0];
    let Rendered { args, env, account } = rendered(&ns, &cron_pod(cron_job)).await?;
    assert_eq!(args[..2], ["run", "sessions"], "{args:?}");
    assert!(env.iter().any(|(k, _)| k == "DB_PASSWORD"), "{env:?}");

    let dir = tempfile::tempdir()?;
    let token_file = token_file(&ns, &account, &dir).await?;

    // One live and one orphaned session: its Session object and its Service.
    let (sessions, services) = live_and_gone(&ns, &session_resource).await?;

    // The container's command. Only the connection differs from a Pod's: `--in-cluster` reads the
    // token from the Pod's mount, here the same token is given by file. The orphans are minutes
    // old, so the run is told it is the rendered grace period (plus an hour) later.
    let mut argv = out_of_cluster(&args, bed, &token_file);
    let grace: i64 = args
        .iter()
        .find_map(|a| a.strip_prefix("--grace-hours="))
        .expect("--grace-hours")
        .parse()?;
    let later = Timestamp::from_second(Timestamp::now().as_second() + (grace + 1) * 3600)?;
    argv.push(format!("--now={later}"));
    let out = command()
        .args(&argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(
            "HOSTNAME",
            format!("{}-manual", cron_job.metadata.name.clone().unwrap()),
        )
        .env("GC_ALLOW_FUTURE_NOW", "1")
        .output()?;
    let log = format!(
        "{argv:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    assert!(sessions.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(services.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(sessions.get_opt("live-1").await?.is_some(), "{log}");
    assert!(services.get_opt("live-1").await?.is_some(), "{log}");

    // Least privilege: the run lock and the session kinds, no Pods.
    let client = ns.service_account_client(&account).await?;
    for (verb, group, resource, want) in [
        ("get", "coordination.k8s.io", "leases", true),
        ("create", "coordination.k8s.io", "leases", true),
        ("update", "coordination.k8s.io", "leases", true),
        ("delete", "coordination.k8s.io", "leases", false),
        ("list", "stream.space", "sessions", true),
        ("delete", "stream.space", "sessions", true),
        ("get", "", "pods", false),
        ("list", "", "pods", false),
        ("delete", "", "pods", false),
        ("get", "", "secrets", false),
    ] {
        assert_eq!(
            allowed(&client, verb, group, resource, Some(ns.name())).await?,
            want,
            "{verb} {group}/{resource}"
        );
    }
    Ok(())
}

/// `GET path` on the loopback `port`: the status code and the body, or None while nothing answers.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(5);
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// Polls `ready` every 200 ms for up to `seconds`, failing early when `child` has exited.
async fn wait_for<T>(
    child: &mut std::process::Child,
    seconds: u64,
    what: &str,
    mut ready: impl FnMut() -> Option<T>,
) -> Result<T> {
    for _ in 0..seconds * 5 {
        if let Some(value) = ready() {
            return Ok(value);
        }
        if let Some(status) = child.try_wait()? {
            return Err(format!("{what}: the server exited first, {status}").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Err(format!("{what}: not within {seconds} s").into())
}

/// The exit status of `child` once it exits, within `seconds`.
async fn exited(
    child: &mut std::process::Child,
    seconds: u64,
) -> Result<Option<std::process::ExitStatus>> {
    for _ in 0..seconds * 5 {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Ok(None)
}

/// `serve.enabled`: the session collector installed as a Deployment, and its container run as the
/// kubelet would run it (args exactly as rendered, `--in-cluster` given as the same token by
/// file, the environment resolved from values and the Secret): it answers the probes' /healthz,
/// runs at once (the orphan deleted, the live session kept, its audit on stdout), serves that
/// run's metrics on /metrics as its Service's `metrics` port, and exits 0 on SIGTERM.
#[tokio::test]
async fn serve_install_runs_the_rendered_session_collector() -> Result {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;

    let bed = TestBed::shared().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("chart_serve").await? else {
        return Ok(());
    };
    let ns = bed.namespace("chart-serve").await?;
    let session_resource = bed.install_session_crd().await?;
    one_live_session(&db).await?;
    let database = session_database(&ns, &db).await?;
    // A free loopback port for the server, given to the chart as its port.
    let listen = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let serve = [
        ("--set", "serve.enabled=true".to_owned()),
        ("--set", format!("serve.port={listen}")),
        ("--set", "gc.gracePeriod=0".to_owned()),
    ];
    install_with(&ns, &[&serve[..], &database].concat());

    // The stored Deployment and Service, as the API server keeps them.
    let deployments = ns
        .api::<Deployment>()
        .list(&Default::default())
        .await?
        .items;
    let [deployment] = &deployments[..] else {
        panic!("one Deployment: {deployments:?}");
    };
    let spec = &deployment.spec;
    assert_eq!(spec.replicas, Some(1));
    let strategy = spec.strategy.as_ref().and_then(|s| s.type_.as_deref());
    assert_eq!(strategy, Some("Recreate"));
    let pod = spec.template.spec.clone().expect("a Pod template");
    assert_eq!(pod.termination_grace_period_seconds, Some(120));
    let container = &pod.containers[0];
    for probe in [&container.liveness_probe, &container.readiness_probe] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("an HTTP probe");
        assert_eq!(get.path.as_deref(), Some("/healthz"));
        assert_eq!(serde_json::to_value(&get.port)?, "metrics");
    }
    let ports = container.ports.clone().unwrap_or_default();
    assert_eq!(ports[0].name.as_deref(), Some("metrics"));
    assert_eq!(ports[0].container_port, i32::from(listen));
    let service = ns
        .api::<Service>()
        .get(deployment.metadata.name.as_deref().unwrap())
        .await?;
    let service_spec = service.spec.expect("a Service spec");
    let service_port = &service_spec.ports.expect("ports")[0];
    assert_eq!(service_port.port, i32::from(listen));
    assert_eq!(serde_json::to_value(&service_port.target_port)?, "metrics");
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap();
    for (key, value) in service_spec.selector.expect("a selector") {
        assert_eq!(
            labels.get(&key),
            Some(&value),
            "the Service picks the Pods: {key}"
        );
    }

    let Rendered { args, env, account } = rendered(&ns, &pod).await?;
    assert_eq!(
        args[..4],
        [
            "serve".to_owned(),
            format!("--listen=0.0.0.0:{listen}"),
            "--interval-seconds=21600".to_owned(),
            "sessions".to_owned()
        ],
        "{args:?}"
    );
    let dir = tempfile::tempdir()?;
    let token_file = token_file(&ns, &account, &dir).await?;

    // One live and one orphaned session: its Session object and its Service.
    let (sessions, services) = live_and_gone(&ns, &session_resource).await?;

    let argv = out_of_cluster(&args, bed, &token_file);
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = command()
        .args(&argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("HOSTNAME", "gc-sessions-5d8f7c9b4-x7k2p")
        .stdout(std::fs::File::create(&stdout)?)
        .stderr(std::fs::File::create(&stderr)?)
        .spawn()?;
    let log = |argv: &[String]| {
        format!(
            "{argv:?}\nstdout: {}\nstderr: {}",
            std::fs::read_to_string(&stdout).unwrap_or_default(),
            std::fs::read_to_string(&stderr).unwrap_or_default()
        )
    };
    let served = async {
        let health = wait_for(&mut child, 30, "/healthz", || http_get(listen, "/healthz")).await?;
        assert_eq!(health.0, 200, "{health:?}");
        // The first run starts at once; its metrics are served when it ends.
        let success = format!("namespace=\"{}\"", ns.name());
        let metrics = wait_for(&mut child, 60, "the first run's metrics", || {
            http_get(listen, "/metrics").filter(|(_, body)| {
                body.lines().any(|l| {
                    l.starts_with("streamspace_last_success_timestamp_seconds{")
                        && l.contains(&success)
                })
            })
        })
        .await?;
        assert_eq!(metrics.0, 200);
        Result::<()>::Ok(())
    };
    let outcome = served.await;
    // SIGTERM, as the kubelet stops a Pod: the server exits 0.
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    assert!(kill.success());
    let status = exited(&mut child, 30).await?;
    if status.is_none() {
        child.kill()?;
    }
    if let Err(e) = outcome {
        panic!("{e}\n{}", log(&argv));
    }
    let status = status.unwrap_or_else(|| panic!("running 30 s after SIGTERM\n{}", log(&argv)));
    let log = log(&argv);
    assert!(status.success(), "{status}\n{log}");
    let audit = std::fs::read_to_string(&stdout)?;
    assert!(audit.lines().any(|l| l.contains("\"gone-1\"")), "{log}");
    assert!(sessions.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(services.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(sessions.get_opt("live-1").await?.is_some(), "{log}");
    assert!(services.get_opt("live-1").await?.is_some(), "{log}");
    // Its Events, found the way NOTES.txt shows (`kubectl get events --field-selector`).
    let selector = "reportingComponent=gc.example.com/gc-cli";
    let events = ns
        .api::<k8s_openapi::api::core::v1::Event>()
        .list(&kube::api::ListParams::default().fields(selector))
        .await?
        .items;
    let on = |name: &str| {
        events
            .iter()
            .any(|e| e.involved_object.name.as_deref() == Some(name))
    };
    assert!(on("gone-1") && !on("live-1"), "{events:?}\n{log}");
    Ok(())
}

/// A CronJob's or a Deployment's one container as the kubelet would run it.
struct Rendered {
    /// Its args (the image's entrypoint is gc-cli).
    args: Vec<String>,
    /// Its environment, resolved from values and Secrets.
    env: Vec<(String, String)>,
    /// The Pod's ServiceAccount.
    account: String,
}

/// The Pod template of `cron_job`, as the API server stores it.
fn cron_pod(cron_job: &k8s_openapi::api::batch::v1::CronJob) -> PodSpec {
    cron_job
        .spec
        .job_template
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("a Pod template")
}

/// The one container of `pod`, its environment resolved as the kubelet resolves it (values and
/// `secretKeyRef`s, nothing else).
async fn rendered(ns: &TestNamespace, pod: &PodSpec) -> Result<Rendered> {
    use k8s_openapi::api::core::v1::Secret;
    let [container] = &pod.containers[..] else {
        panic!("one container: {:?}", pod.containers);
    };
    // No `command`: the image's entrypoint, which is gc-cli.
    assert!(container.command.is_none(), "{:?}", container.command);
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile"))?;
    assert!(dockerfile.lines().any(|l| l == r#"ENTRYPOINT ["/gc-cli"]"#));
    let args = container.args.clone().expect("args");
    assert!(!args.iter().any(|a| a.contains("$(")), "{args:?}");
    assert!(container.env_from.is_none());
    let mut env = Vec::new();
    for var in container.env.clone().unwrap_or_default() {
        let value = match (var.value, var.value_from) {
            (Some(value), None) => {
                assert!(!value.contains("$("), "{}: {value}", var.name);
                value
            }
            (None, Some(from)) => {
                let key = from
                    .secret_key_ref
                    .unwrap_or_else(|| panic!("{}: only secretKeyRef is resolved here", var.name));
                let secret = ns.api::<Secret>().get(&key.name).await?;
                let bytes = secret
                    .data
                    .and_then(|d| d.get(&key.key).cloned())
                    .unwrap_or_else(|| panic!("{}: no key {} in {}", var.name, key.key, key.name));
                String::from_utf8(bytes.0)?
            }
            (None, None) => String::new(),
            (Some(_), Some(_)) => panic!("{}: both value and valueFrom", var.name),
        };
        env.push((var.name, value));
    }
    let account = pod.service_account_name.clone().expect("a ServiceAccount");
    Ok(Rendered { args, env, account })
}

/// A token of `account` (`TokenRequest`, as the kubelet's projected token) in a file in `dir`.
async fn token_file(ns: &TestNamespace, account: &str, dir: &tempfile::TempDir) -> Result<PathBuf> {
    let token = ns.service_account_token(account).await?;
    let path = dir.path().join("token");
    std::fs::write(&path, &token)?;
    Ok(path)
}

/// `args` with `--in-cluster` replaced by the same token given by file: only the connection
/// differs from a Pod's.
fn out_of_cluster(args: &[String], bed: &TestBed, token_file: &std::path::Path) -> Vec<String> {
    assert_eq!(args.iter().filter(|a| *a == "--in-cluster").count(), 1);
    let mut argv = Vec::new();
    for arg in args {
        if arg == "--in-cluster" {
            argv.extend(
                [
                    "--api-url",
                    bed.server_url(),
                    "--token-file",
                    token_file.to_str().unwrap(),
                    "--trust-certs",
                ]
                .map(str::to_owned),
            );
        } else {
            argv.push(arg.clone());
        }
    }
    argv
}

/// The failed-Pod collector installed with archives in an object store and receipts in
/// PostgreSQL, both from Secrets: no volume is rendered, and its CronJob's container, run as the
/// kubelet would run it, archives a due Pod to the bucket, receipts it and deletes it.
#[tokio::test]
async fn object_store_install_runs_the_rendered_failed_pod_collector() -> Result {
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};

    let bed = TestBed::shared().await?;
    let db = gc_testbed::TestDatabase::fresh("chart_receipts")
        .await?
        .expect("scripts/test.sh sets GC_TEST_DATABASE_URL");
    let s3 = gc_testbed::S3Server::start().await?;
    s3.create_bucket("diagnostics")?;
    let ns = bed.namespace("chart-s3").await?;
    for (name, data) in [
        (
            "archive-credentials",
            serde_json::json!({
                "AWS_ACCESS_KEY_ID": s3.access_key(),
                "AWS_SECRET_ACCESS_KEY": s3.secret_key(),
            }),
        ),
        ("receipts", serde_json::json!({"url": db.url()})),
    ] {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "stringData": data,
        }))?;
        ns.api::<Secret>()
            .create(&PostParams::default(), &secret)
            .await?;
    }
    let endpoint = format!("failedPods.archive.endpoint={}", s3.endpoint());
    let sets = [
        ("--set", "gc.enabled=false"),
        ("--set", "failedPods.enabled=true"),
        ("--set", "failedPods.dryRun=false"),
        ("--set", "failedPods.autoRemediate=true"),
        ("--set", "failedPods.retentionSeconds=3600"),
        (
            "--set-string",
            "failedPods.archive.url=s3://diagnostics/pods",
        ),
        ("--set-string", &endpoint),
        (
            "--set-string",
            "failedPods.archive.credentialsSecret=archive-credentials",
        ),
        ("--set-string", "failedPods.store.existingSecret=receipts"),
    ];
    let mut args = Vec::new();
    for (flag, set) in sets {
        args.extend([flag, set]);
    }
    let out = install(&ns, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let claims = ns
        .api::<PersistentVolumeClaim>()
        .list(&Default::default())
        .await?;
    assert!(claims.items.is_empty(), "nothing lives on a volume");

    let cron_jobs = ns.api::<CronJob>().list(&Default::default()).await?.items;
    let [cron_job] = &cron_jobs[..] else {
        panic!("one CronJob: {cron_jobs:?}");
    };
    let Rendered { args, env, account } = rendered(&ns, &cron_pod(cron_job)).await?;
    assert_eq!(args[..2], ["run", "pods"], "{args:?}");
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        !names.contains(&"GC_ARCHIVE_DIR") && !names.contains(&"GC_STATE_DIR"),
        "{names:?}"
    );
    let due = target(&ns, "due").await?;
    let uid = due.metadata.uid.unwrap();

    let dir = tempfile::tempdir()?;
    let token_file = token_file(&ns, &account, &dir).await?;
    let argv = out_of_cluster(&args, bed, &token_file);
    // A read-only root and no volume: the run may write nowhere on the machine.
    let out = command()
        .args(&argv)
        .current_dir(dir.path())
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("HOME", "/nonexistent")
        .env("HOSTNAME", "gc-failed-pods-manual")
        .output()?;
    let log = format!(
        "{argv:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    assert!(ns.api::<Pod>().get_opt("due").await?.is_none(), "{log}");
    let object = s3.object_path(
        "diagnostics",
        &format!("pods/primary/{}/{uid}.json", ns.name()),
    );
    let store = gc_store::open(db.url()).await?;
    let receipt = gc_core::ports::Store::get_receipt(&store, "primary", &uid)
        .await?
        .expect("a receipt in PostgreSQL");
    store.close().await;
    assert_eq!(
        gc_core::archive::digest(&std::fs::read(&object)?),
        receipt.sha256,
        "{log}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()?;
    assert_eq!(left, ["token"], "nothing written beside it");
    Ok(())
}

/// Cluster-wide mode: a ClusterRole with exactly the collectors' verbs in every namespace and
/// `list` on Namespaces, bound to the chart's ServiceAccount; its rendered failed-Pod CronJob,
/// run as the kubelet would, collects in every namespace the selector picks, less the excluded,
/// and nowhere else. Proven with access reviews on the real API server.
#[tokio::test]
async fn cluster_wide_install_collects_in_the_selected_namespaces_only() -> Result {
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Patch, PatchParams};

    let bed = TestBed::shared().await?;
    let home = bed.namespace("chart-wide").await?;
    let mut targets = Vec::new();
    for name in ["wide-a", "wide-b", "wide-excluded", "wide-unlabelled"] {
        targets.push(bed.namespace(name).await?);
    }
    let team = format!("team-{}", home.name());
    let namespaces: Api<Namespace> = Api::all(bed.client());
    for ns in &targets[..3] {
        let patch =
            Patch::Merge(serde_json::json!({"metadata": {"labels": {"gc-chart-team": team}}}));
        namespaces
            .patch(ns.name(), &PatchParams::default(), &patch)
            .await?;
    }
    for ns in &targets {
        target(ns, "due").await?;
    }
    let selector = format!("clusterWide.namespaceSelector=gc-chart-team={team}");
    let excluded = format!("clusterWide.excludeNamespaces={{{}}}", targets[2].name());
    let out = install(
        &home,
        &[
            "--set",
            "gc.enabled=false",
            "--set",
            "failedPods.enabled=true",
            "--set",
            "failedPods.dryRun=false",
            "--set",
            "failedPods.autoRemediate=true",
            "--set",
            "failedPods.retentionSeconds=3600",
            "--set",
            "clusterWide.enabled=true",
            "--set-string",
            &selector,
            "--set",
            &excluded,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cron_jobs = home.api::<CronJob>().list(&Default::default()).await?.items;
    let [cron_job] = &cron_jobs[..] else {
        panic!("one CronJob: {cron_jobs:?}");
    };
    let Rendered { args, env, account } = rendered(&home, &cron_pod(cron_job)).await?;
    assert!(args.iter().any(|a| a == "--all-namespaces"), "{args:?}");

    // Exactly the collectors' verbs, in any namespace; Namespaces only listed.
    let client = home.service_account_client(&account).await?;
    let elsewhere = Some(targets[3].name());
    for (verb, group, resource, namespace, want) in [
        ("list", "", "namespaces", None, true),
        ("delete", "", "namespaces", None, false),
        ("list", "", "pods", elsewhere, true),
        ("delete", "", "pods", elsewhere, true),
        ("create", "", "pods", elsewhere, false),
        ("update", "coordination.k8s.io", "leases", elsewhere, true),
        ("delete", "coordination.k8s.io", "leases", elsewhere, false),
        ("get", "", "secrets", elsewhere, false),
        ("list", "", "secrets", None, false),
    ] {
        assert_eq!(
            allowed(&client, verb, group, resource, namespace).await?,
            want,
            "{verb} {group}/{resource} in {namespace:?}"
        );
    }

    let dir = tempfile::tempdir()?;
    let token_file = token_file(&home, &account, &dir).await?;
    let argv = out_of_cluster(&args, bed, &token_file);
    let out = command()
        .args(&argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("GC_STATE_DIR", dir.path())
        .env("GC_STORE", sqlite(dir.path(), "gc.sqlite3"))
        .env("GC_ARCHIVE_DIR", dir.path().join("archives"))
        .env("HOSTNAME", "gc-failed-pods-manual")
        .output()?;
    let log = format!(
        "{argv:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    for (ns, collected) in targets.iter().zip([true, true, false, false]) {
        let left = ns.api::<Pod>().get_opt("due").await?;
        assert_eq!(left.is_none(), collected, "{}: {log}", ns.name());
    }
    Ok(())
}
