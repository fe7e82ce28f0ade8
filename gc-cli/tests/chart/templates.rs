//! `helm lint` and `helm template` for many values, the schema refusing bad values by name, the
//! shipped alert rules, and every rendered manifest accepted by the real API server in a strict
//! server-side dry run.

use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

use super::{
    CHART, INSTALL_VALUES, documents, helm, install_service_monitor_crd, names, object, template,
    template_as,
};
use crate::common::{Result, namespace};

#[test]
fn lint_and_templates() {
    // Strict, with the values every install sets: no warning, and nothing that `helm lint`
    // only logs (a `fail` or a `required` of the templates).
    let out = helm(&[&["lint", "--strict", CHART][..], &INSTALL_VALUES].concat());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !log.contains("Fail:") && !log.contains("Missing required"),
        "{}{log}",
        String::from_utf8_lossy(&out.stdout)
    );
    let defaults = template(&[]);
    assert!(defaults.contains("kind: CronJob") && defaults.contains("schedule: \"0 */6 * * *\""));
    // The session collector deletes by default (gc.dryRun=false): it says so to `run sessions`,
    // a dry run unless told otherwise.
    assert!(defaults.contains("- --grace=24h") && defaults.contains("- --dry-run=none"));
    assert!(!defaults.contains("- --dry-run=server"));
    assert!(
        defaults.contains("concurrencyPolicy: Forbid")
            && defaults.contains("readOnlyRootFilesystem: true")
    );
    assert!(
        defaults.contains("name: streamspace-secrets")
            && defaults.contains("key: postgres-password")
    );
    // Cluster-wide, only the volumes the session collector keeps (whatever gc.retainVolumeDays).
    assert!(
        !defaults.contains("failed-pods") && defaults.matches("\nkind: ClusterRole\n").count() == 1
    );
    assert!(defaults.contains("resources: [persistentvolumes]"));
    // The session collector takes the run lock too; Pods only with the failed-Pod collector.
    assert!(defaults.contains("resources: [leases]") && !defaults.contains("resources: [pods]"));
    assert!(template(&["gc.enabled=false"]).trim().is_empty());
    let pods = template(&["failedPods.enabled=true"]);
    assert!(
        pods.contains("name: gc-failed-pods")
            && pods.contains("- --dry-run=server")
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
    assert!(
        delivered.contains("name: GC_ALERT_FORMAT") && delivered.contains("value: \"slack\""),
        "{delivered}"
    );
    let teams = template(&["alerts.webhookSecret=hook", "alerts.format=teams"]);
    assert!(teams.contains("value: \"teams\""), "{teams}");
    let dry = template(&["gc.dryRun=true", "gc.terminalStates={deleted}"]);
    assert!(dry.contains("- --dry-run=server") && dry.contains("- --terminal-state=deleted"));
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
        ("serve.stallSeconds=-1", "stallSeconds"),
        ("serve.port=80", "port"),
        ("serve.schedule=@hourly", "'schedule' not allowed"),
        ("metrics.serviceMonitor.interval=often", "interval"),
        ("metrics.serviceMonitor.scrape=true", "'scrape' not allowed"),
        ("serviceAccount.create=false", "serviceAccount/name"),
        ("serviceAccount.name=Not_A_Name", "serviceAccount/name"),
        ("fullnameOverride=-gc", "fullnameOverride"),
        ("events.enabled=maybe", "events/enabled"),
        ("log.format=xml", "format"),
        ("alerts.format=discord", "alerts/format"),
        ("log.level=verbose", "level"),
        ("timeZone=Europe/Berlin;rm", "timeZone"),
        ("podAnnotations.n=1", "podAnnotations"),
    ] {
        let out = helm(
            &[
                &["template", "gc", CHART, "--set", set][..],
                &INSTALL_VALUES,
            ]
            .concat(),
        );
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
    super::install_crd(bed, "prometheusrules").await?;
    let client = ns.client().clone();
    let variations: [&[&str]; 8] = [
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
            "archives.prune.enabled=true",
        ],
        &[
            "failedPods.enabled=true",
            "prometheusRule.enabled=true",
            "prometheusRule.labels.release=kube-prometheus-stack",
            "metrics.prefix=gc",
            "prometheusRule.noSuccessHours.pods=72",
            "gc.restore.enabled=true",
            "grafana.dashboards.enabled=true",
            "grafana.dashboards.annotations.grafana_folder=Platform",
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
        if sets.contains(&"prometheusRule.enabled=true") {
            assert!(kinds.iter().any(|k| k == "PrometheusRule"), "{kinds:?}");
        }
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

/// A long release name and `nameOverride` still give names the API server accepts: CronJobs
/// within 52 characters (their Jobs add 11), everything else within 63.
#[test]
fn long_release_names_give_names_within_kubernetes_limits() {
    let release = "a-release-name-long-enough-to-need-truncating-x";
    let long_name = "n".repeat(50);
    let rendered = template_as(
        release,
        "streamspace",
        &[
            &format!("nameOverride={long_name}"),
            "failedPods.enabled=true",
            "archives.prune.enabled=true",
        ],
    );
    let served = template_as(
        release,
        "streamspace",
        &[
            &format!("nameOverride={long_name}"),
            "failedPods.enabled=true",
            "serve.enabled=true",
        ],
    );
    let objects: Vec<Value> = documents(&rendered)
        .into_iter()
        .chain(documents(&served))
        .collect();
    assert!(objects.len() > 5, "{}", names(&objects));
    for o in &objects {
        let name = o["metadata"]["name"].as_str().unwrap();
        let limit = if o["kind"] == "CronJob" { 52 } else { 63 };
        assert!(
            name.len() <= limit,
            "{} {name}: {} > {limit}",
            o["kind"],
            name.len()
        );
    }
}

/// `prometheusRule.enabled` renders the shipped rules (`deploy/prometheus/gc-alerts.yaml`, which
/// is `chart/files/gc-alerts.yaml`) as a PrometheusRule: with the default values exactly the
/// file's groups; with another `metrics.prefix` and other thresholds, the file's with those (each
/// window twice its threshold); its labels from values; nothing by default. promtool checks each
/// rendering and passes the file's unit tests on the default one and on another prefix.
#[test]
fn the_prometheus_rule_is_the_shipped_rules() {
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/prometheus/gc-alerts.yaml"
    ))
    .unwrap();
    let groups = |text: &str| -> Value {
        serde_json::to_value(serde_norway::from_str::<serde_norway::Value>(text).unwrap()).unwrap()
            ["groups"]
            .clone()
    };
    let rule_of = |sets: &[&str]| -> Option<Value> {
        documents(&template(sets))
            .into_iter()
            .find(|o| o["kind"] == "PrometheusRule")
    };
    assert!(rule_of(&["failedPods.enabled=true"]).is_none());

    let default = rule_of(&[
        "prometheusRule.enabled=true",
        "prometheusRule.labels.release=kube-prometheus-stack",
    ])
    .expect("a PrometheusRule");
    assert_eq!(default["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(default["metadata"]["name"], "gc");
    assert_eq!(default["metadata"]["namespace"], "streamspace");
    assert_eq!(
        default["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    assert_eq!(default["spec"]["groups"], groups(&file));

    let prefixed = rule_of(&["prometheusRule.enabled=true", "metrics.prefix=gc"]).unwrap();
    assert_eq!(
        prefixed["spec"]["groups"],
        groups(&file.replace("streamspace_", "gc_"))
    );
    let custom = rule_of(&[
        "prometheusRule.enabled=true",
        "metrics.prefix=gc",
        "prometheusRule.noSuccessHours.sessions=6",
        "prometheusRule.noSuccessHours.pods=24",
    ])
    .unwrap();
    let want = file
        .replace("streamspace_", "gc_")
        .replace("> 12 * 3600", "> 6 * 3600")
        .replace(
            r#"{collector="sessions"}[24h]"#,
            r#"{collector="sessions"}[12h]"#,
        )
        .replace("> 48 * 3600", "> 24 * 3600")
        .replace(r#"{collector="pods"}[96h]"#, r#"{collector="pods"}[48h]"#);
    assert_ne!(want, file.replace("streamspace_", "gc_"));
    assert_eq!(custom["spec"]["groups"], groups(&want));
    // Each threshold stays its own when one equals the other's default (a daily session run).
    let daily = rule_of(&[
        "prometheusRule.enabled=true",
        "prometheusRule.noSuccessHours.sessions=48",
        "prometheusRule.noSuccessHours.pods=72",
    ])
    .unwrap();
    let expr = daily["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["alert"] == "GcNoRecentSuccess")
        .unwrap()["expr"]
        .as_str()
        .unwrap()
        .to_owned();
    let (sessions, pods) = expr.split_once(") or (").unwrap();
    assert!(
        sessions.contains(r#"{collector="sessions"}[96h]"#) && sessions.contains("> 48 * 3600"),
        "{expr}"
    );
    assert!(
        pods.contains(r#"{collector="pods"}[144h]"#) && pods.contains("> 72 * 3600"),
        "{expr}"
    );

    let Some(bin) = std::env::var_os("GC_TEST_PROMETHEUS").map(std::path::PathBuf::from) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install Prometheus (GC_TEST_PROMETHEUS)"
        );
        return;
    };
    let tests = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/prometheus/gc-alerts.test.yaml"
    ))
    .unwrap();
    let promtool = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new(bin.join("promtool"))
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("SUCCESS"),
            "{args:?}: {text}"
        );
    };
    for (rule, prefix, unit_tests) in [
        (&default, "streamspace_", true),
        (&prefixed, "gc_", true),
        (&custom, "gc_", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // JSON is YAML: the rule's groups as a rule file.
        let rules = serde_json::json!({"groups": rule["spec"]["groups"]});
        std::fs::write(dir.path().join("gc-alerts.yaml"), rules.to_string()).unwrap();
        promtool(dir.path(), &["check", "rules", "gc-alerts.yaml"]);
        if unit_tests {
            let tests = tests.replace("streamspace_", prefix);
            std::fs::write(dir.path().join("gc-alerts.test.yaml"), tests).unwrap();
            promtool(dir.path(), &["test", "rules", "gc-alerts.test.yaml"]);
        }
    }
}

/// `grafana.dashboards.enabled` renders the shipped dashboard (`deploy/grafana/gc.json`, which is
/// `chart/files/gc-dashboard.json`) in a ConfigMap labelled for Grafana's sidecar: the file's
/// dashboard, its prefix variable `metrics.prefix`; label, namespace and annotations from
/// values; nothing by default.
#[test]
fn the_dashboard_config_map_is_the_shipped_dashboard() {
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/grafana/gc.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let map_of = |sets: &[&str]| -> Option<Value> {
        documents(&template(sets))
            .into_iter()
            .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "gc-dashboard")
    };
    assert!(map_of(&["failedPods.enabled=true"]).is_none());
    let board = |map: &Value| -> Value {
        serde_json::from_str(map["data"]["gc.json"].as_str().unwrap()).unwrap()
    };
    let with_prefix = |prefix: &str| {
        let mut want = file.clone();
        for variable in want["templating"]["list"].as_array_mut().unwrap() {
            if variable["name"] == "prefix" {
                variable["query"] = prefix.into();
                variable["current"] = serde_json::json!({"text": prefix, "value": prefix});
            }
        }
        want
    };

    let default = map_of(&["grafana.dashboards.enabled=true"]).unwrap();
    assert_eq!(default["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(default["metadata"]["namespace"], "streamspace");
    assert_eq!(board(&default), file);
    assert_eq!(board(&default), with_prefix("streamspace"));

    let custom = map_of(&[
        "grafana.dashboards.enabled=true",
        "metrics.prefix=gc",
        "grafana.dashboards.namespace=monitoring",
        "grafana.dashboards.label=dashboards",
        "grafana.dashboards.labelValue=gc",
        "grafana.dashboards.annotations.grafana_folder=Platform",
    ])
    .unwrap();
    assert_eq!(custom["metadata"]["labels"]["dashboards"], "gc");
    assert!(
        custom["metadata"]["labels"]
            .get("grafana_dashboard")
            .is_none()
    );
    assert_eq!(custom["metadata"]["namespace"], "monitoring");
    assert_eq!(
        custom["metadata"]["annotations"]["grafana_folder"],
        "Platform"
    );
    assert_eq!(board(&custom), with_prefix("gc"));
}

/// A long release name in a long namespace: the cluster-scoped names (named after both: the
/// restore account's volumes ClusterRole, the collector's, the cluster-wide ClusterRole and the
/// admission policies) are cut to 63 characters as Helm charts cut names, and stay each
/// release's own: two releases whose names and namespaces share their first characters get
/// different names; a short name is as it was.
#[test]
fn long_release_and_namespace_names_give_unique_cluster_names_within_63() {
    let release = "a-release-name-long-enough-to-need-truncating-x";
    let sets = [
        "gc.restore.enabled=true",
        "failedPods.enabled=true",
        "clusterWide.enabled=true",
    ];
    let cluster_scoped = |namespace: &str| -> Vec<(String, String)> {
        let objects = documents(&template_as(release, namespace, &sets));
        let scoped = objects
            .iter()
            .filter(|o| o["metadata"]["namespace"].is_null());
        scoped
            .map(|o| {
                let kind = o["kind"].as_str().unwrap().to_owned();
                (kind, o["metadata"]["name"].as_str().unwrap().to_owned())
            })
            .collect()
    };
    let (one, other) = (
        "restore-namespace-".repeat(3),
        "restore-namespace-".repeat(3) + "2",
    );
    let (one, other) = (
        cluster_scoped(one.trim_end_matches('-')),
        cluster_scoped(&other),
    );
    let kinds: Vec<&str> = one.iter().map(|(k, _)| k.as_str()).collect();
    for kind in [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
    ] {
        assert!(kinds.contains(&kind), "{one:?}");
    }
    let restore = one
        .iter()
        .find(|(k, n)| k == "ClusterRole" && n.ends_with("-restore-volumes"));
    assert!(restore.is_some(), "{one:?}");
    for (kind, name) in one.iter().chain(&other) {
        assert!(name.len() <= 63, "{kind} {name}: {} > 63", name.len());
        assert!(!name.ends_with('-'), "{kind} {name}");
        assert!(
            name.starts_with("a-release-name-long-enough"),
            "{kind} {name}"
        );
    }
    for (kind, name) in &one {
        assert!(
            !other.contains(&(kind.clone(), name.clone())),
            "{kind} {name} in both"
        );
    }
    // Every binding names its role or policy as rendered.
    for objects in [&one, &other] {
        for (kind, name) in objects {
            if let Some(bound) = kind.strip_suffix("Binding") {
                assert!(
                    objects.contains(&(bound.to_owned(), name.clone())),
                    "{kind} {name}"
                );
            }
        }
    }
    // Short names are kept as they were.
    let short = documents(&template_as("gc", "streamspace", &sets));
    object(&short, "ClusterRole", "gc-streamspace-restore-volumes");
    object(&short, "ClusterRole", "gc-streamspace-volumes");
    object(&short, "ClusterRole", "gc-streamspace");
}

/// StreamSpace's states by default; values a run could not use are refused at render, naming
/// the value: states with no state column, a state both live and terminal.
#[test]
fn states_are_streamspaces_and_bad_states_are_refused_at_render() {
    let rendered = documents(&template(&[]));
    let args = super::container_args(object(&rendered, "CronJob", "gc-sessions"));
    let states: Vec<&str> = (args.iter())
        .filter_map(|a| a.strip_prefix("--terminal-state="))
        .collect();
    assert_eq!(states, ["terminated", "failed", "deleted"]);
    assert!(
        args.contains(&"--live-state=hibernated".to_owned()),
        "{args:?}"
    );
    let refused = super::refused;
    let no_column = refused(&["database.stateColumn="]);
    assert!(
        no_column.contains("database.stateColumn: gc.terminalStates"),
        "{no_column}"
    );
    let both = refused(&["gc.terminalStates={terminated,terminating}"]);
    assert!(
        both.contains("gc.liveStates: \"terminating\" is in gc.terminalStates too"),
        "{both}"
    );
    // Without states, no column is needed.
    template(&[
        "database.stateColumn=",
        "gc.terminalStates=null",
        "gc.liveStates=null",
    ]);
}
