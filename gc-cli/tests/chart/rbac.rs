//! The chart's Role and ClusterRole grant exactly `gc_k8s::rbac`'s rules; the ServiceAccount,
//! name, Events and Pod values; the installed ServiceAccount proven by access reviews and by runs
//! with its token on the real API server.

use gc_core::ports::{ObjectCluster, Preconditions};
use gc_core::sessions::Kind;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::Value;

use super::{
    allowed, assert_lease_access, container_args, documents, install, names, object, pod_spec,
    template,
};
use crate::common::{Result, command, namespace, one_live_session, run_pods, sqlite, target};

/// The chart's Role grants exactly `gc_k8s::rbac::rules_for` its values (`required_rules` with
/// both collectors and Events on), its ClusterRole exactly `cluster_rules_for` them, Lease names
/// included: Leases are read and renewed only by the enabled collectors' own names, and only
/// `create` (which RBAC cannot limit by name) is unnamed.
#[test]
fn the_roles_grant_exactly_the_rules_of_gc_k8s() {
    use gc_k8s::rbac::{Collectors, cluster_rules_for, rules_for};
    let both = documents(&template(&["failedPods.enabled=true"]));
    assert_eq!(
        granted(&both, "Role"),
        grants(gc_k8s::rbac::required_rules())
    );
    let wide = documents(&template(&[
        "failedPods.enabled=true",
        "clusterWide.enabled=true",
    ]));
    assert_eq!(
        granted(&wide, "ClusterRole"),
        grants(gc_k8s::rbac::cluster_rules())
    );
    // The volumes a session run retains: a ClusterRole of exactly `volume_rules`, bound to the
    // account, whenever the session collector runs: with retention 0 its runs still give back
    // the volumes kept before.
    for (sets, rendered) in [
        (&["gc.retainVolumeDays=7"][..], true),
        (&["gc.retainVolumeDays=0"], true),
        (&["gc.enabled=false", "failedPods.enabled=true"], false),
        (&["clusterWide.enabled=true"], true),
    ] {
        let objects = documents(&template(sets));
        let volumes: Vec<&Value> = objects
            .iter()
            .filter(|o| {
                o["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("ClusterRole"))
                    && o["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("-volumes"))
            })
            .collect();
        assert_eq!(volumes.len(), if rendered { 2 } else { 0 }, "{sets:?}");
        if let [role, binding] = &volumes[..] {
            let rules = serde_json::from_value(role["rules"].clone()).unwrap();
            assert_eq!(grants(rules), grants(gc_k8s::rbac::volume_rules()));
            assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
            assert_eq!(binding["subjects"][0]["name"], "gc");
        }
    }
    for failed_pods in [false, true] {
        for sessions in [false, true] {
            for events in [false, true] {
                let collectors = Collectors {
                    failed_pods,
                    sessions,
                    events,
                };
                if !failed_pods && !sessions {
                    continue;
                }
                for wide in [false, true] {
                    let sets = [
                        format!("failedPods.enabled={failed_pods}"),
                        format!("gc.enabled={sessions}"),
                        format!("events.enabled={events}"),
                        format!("clusterWide.enabled={wide}"),
                    ];
                    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
                    let objects = documents(&template(&sets));
                    let (kind, rules) = if wide {
                        ("ClusterRole", cluster_rules_for(collectors))
                    } else {
                        ("Role", rules_for(collectors))
                    };
                    let rendered = granted(&objects, kind);
                    assert_eq!(rendered, grants(rules), "{sets:?}");
                    // No Lease verb but `create` without a name.
                    assert!(
                        rendered
                            .iter()
                            .filter(|g| g.1 == "leases" && g.3.is_none())
                            .all(|g| g.2 == "create"),
                        "{sets:?}: {rendered:?}"
                    );
                    let names: std::collections::BTreeSet<&str> =
                        rendered.iter().filter_map(|g| g.3.as_deref()).collect();
                    let want: std::collections::BTreeSet<&str> =
                        collectors.leases().into_iter().collect();
                    assert_eq!(names, want, "{sets:?}");
                }
            }
        }
    }
}

/// `gc.restore.enabled` renders an account of its own for `restore sessions`, granted exactly
/// `gc_k8s::rbac::restore_rules` in each namespace of `gc.restore.namespaces` (default: the
/// release's) and `restore_volume_rules` cluster-wide, whatever the retention (the volumes kept
/// before may still be restored); nothing by default, and never a Role in a system namespace.
#[test]
fn the_restore_account_is_granted_exactly_the_restore_rules() {
    use gc_k8s::rbac::{restore_rules, restore_volume_rules};
    // RBAC objects and the account (the admission policies are `tests/chart/volumes.rs`'s).
    let named = |objects: &[Value], suffix: &str| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| {
                !o["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))
                    && o["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(suffix))
            })
            .cloned()
            .collect()
    };
    let rules = |o: &Value| grants(serde_json::from_value(o["rules"].clone()).unwrap());
    let default = documents(&template(&[]));
    assert!(
        named(&default, "-restore").is_empty(),
        "{}",
        names(&default)
    );
    assert!(named(&default, "-restore-volumes").is_empty());

    for (sets, events, namespaces, volumes) in [
        (
            &["gc.restore.enabled=true"][..],
            true,
            &["streamspace"][..],
            true,
        ),
        (
            &["gc.restore.enabled=true", "events.enabled=false"],
            false,
            &["streamspace"],
            true,
        ),
        (
            &[
                "gc.restore.enabled=true",
                "gc.retainVolumeDays=0",
                "gc.restore.namespaces={team-a,team-b}",
            ],
            true,
            &["team-a", "team-b"],
            true,
        ),
    ] {
        let objects = documents(&template(sets));
        let restore = named(&objects, "-restore");
        let account: Vec<&Value> = restore
            .iter()
            .filter(|o| o["kind"] == "ServiceAccount")
            .collect();
        assert_eq!(account.len(), 1, "{sets:?}");
        assert_eq!(account[0]["metadata"]["name"], "gc-restore");
        let roles: Vec<&Value> = restore.iter().filter(|o| o["kind"] == "Role").collect();
        let bindings: Vec<&Value> = restore
            .iter()
            .filter(|o| o["kind"] == "RoleBinding")
            .collect();
        let in_ns = |os: &[&Value]| -> Vec<String> {
            os.iter()
                .map(|o| o["metadata"]["namespace"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(in_ns(&roles), namespaces, "{sets:?}");
        assert_eq!(in_ns(&bindings), namespaces, "{sets:?}");
        for (role, binding) in roles.iter().zip(&bindings) {
            assert_eq!(rules(role), grants(restore_rules(events)), "{sets:?}");
            assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
            assert_eq!(binding["subjects"][0]["name"], "gc-restore");
            assert_eq!(binding["subjects"][0]["namespace"], "streamspace");
        }
        let cluster = named(&objects, "-restore-volumes");
        assert_eq!(cluster.len(), if volumes { 2 } else { 0 }, "{sets:?}");
        if let [role, binding] = &cluster[..] {
            assert_eq!(role["kind"], "ClusterRole");
            assert_eq!(rules(role), grants(restore_volume_rules()));
            assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
            assert_eq!(binding["subjects"][0]["name"], "gc-restore");
        }
    }
    let out = super::helm(&[
        "template",
        "gc",
        super::CHART,
        super::API_VERSIONS[0],
        super::API_VERSIONS[1],
        super::INSTALL_VALUES[0],
        super::INSTALL_VALUES[1],
        "--set",
        "gc.restore.enabled=true",
        "--set",
        "gc.restore.namespaces={kube-system}",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("gc.restore.namespaces: kube-system is a system namespace"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One grant: (API group, resource, verb, the object's name when the rule names objects).
type Grant = (String, String, String, Option<String>);

/// The Role's (or ClusterRole's) rules of `objects` as grants.
fn granted(objects: &[Value], kind: &str) -> std::collections::BTreeSet<Grant> {
    // The volumes' ClusterRole and the restore account's roles are roles of their own.
    let role = objects
        .iter()
        .find(|o| {
            o["kind"] == kind
                && !o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-volumes") || n.ends_with("-restore"))
        })
        .unwrap_or_else(|| panic!("no {kind} in {}", names(objects)));
    let rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule> =
        serde_json::from_value(role["rules"].clone()).unwrap();
    grants(rules)
}

/// Every (group, resource, verb, name) a rule grants: one per `resourceNames` entry, or one
/// without a name (any object) when the rule names none.
fn grants(rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>) -> std::collections::BTreeSet<Grant> {
    let mut set = std::collections::BTreeSet::new();
    for rule in rules {
        assert!(rule.non_resource_urls.is_none());
        let names: Vec<Option<String>> = match rule.resource_names {
            Some(names) => {
                assert!(!names.is_empty(), "empty resourceNames grant every name");
                names.into_iter().map(Some).collect()
            }
            None => vec![None],
        };
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    for name in &names {
                        set.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                    }
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
        None,
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
            !rules
                .iter()
                .any(|(_, r, v, _)| r == "events" && v != "create"),
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
        ("create", "coordination.k8s.io", "leases", true),
        ("get", "coordination.k8s.io", "leases", false),
        ("update", "coordination.k8s.io", "leases", false),
        ("list", "coordination.k8s.io", "leases", false),
        ("patch", "coordination.k8s.io", "leases", false),
        ("get", "apps", "deployments", true),
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
        ("update", "apps", "deployments", false),
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
    // The run locks by name: the collectors' own, and no other.
    let leases = [
        ("get", "gc-pods", true),
        ("update", "gc-pods", true),
        ("get", "gc-sessions", true),
        ("update", "gc-sessions", true),
        ("delete", "gc-pods", false),
        ("patch", "gc-sessions", false),
        ("get", "gc-pods-prod", false),
        ("update", "kube-controller-manager", false),
    ];
    assert_lease_access(&client, Some(ns.name()), &leases).await?;
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
                "--dry-run=none",
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

/// The admission policy and its binding: rendered in cluster-wide mode and with
/// `admissionPolicy.enabled`, never otherwise; judging only the chart's ServiceAccount (by its
/// username), failing closed, denying; the Lease names those of the enabled collectors. The
/// chart refuses to install into a system namespace.
#[test]
fn the_admission_policy_names_the_account_and_its_leases() {
    for (sets, account, leases) in [
        (&[][..], None, ""),
        (&["failedPods.enabled=true"], None, ""),
        (
            &["clusterWide.enabled=true"],
            Some("system:serviceaccount:streamspace:gc"),
            "['gc-sessions']",
        ),
        (
            &[
                "admissionPolicy.enabled=true",
                "failedPods.enabled=true",
                "serviceAccount.create=false",
                "serviceAccount.name=existing",
            ],
            Some("system:serviceaccount:streamspace:existing"),
            "['gc-sessions', 'gc-pods']",
        ),
        (
            &[
                "clusterWide.enabled=true",
                "gc.enabled=false",
                "failedPods.enabled=true",
            ],
            Some("system:serviceaccount:streamspace:gc"),
            "['gc-pods']",
        ),
        (&["clusterWide.enabled=true", "gc.enabled=false"], None, ""),
    ] {
        let objects = documents(&template(sets));
        // The volumes' policies are others (`tests/chart/volumes.rs`).
        let not_volumes = |o: &&Value| {
            !o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-volumes"))
        };
        let policies: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "ValidatingAdmissionPolicy")
            .filter(not_volumes)
            .collect();
        let bindings: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "ValidatingAdmissionPolicyBinding")
            .filter(not_volumes)
            .collect();
        let Some(account) = account else {
            assert!(
                policies.is_empty() && bindings.is_empty(),
                "{sets:?}: {}",
                names(&objects)
            );
            continue;
        };
        let ([policy], [binding]) = (&policies[..], &bindings[..]) else {
            panic!("{sets:?}: {}", names(&objects));
        };
        let spec = &policy["spec"];
        assert_eq!(policy["metadata"]["name"], "gc-streamspace", "{sets:?}");
        assert_eq!(spec["failurePolicy"], "Fail", "{sets:?}");
        assert_eq!(
            spec["matchConditions"][0]["expression"],
            format!("request.userInfo.username == '{account}'"),
            "{sets:?}"
        );
        let rules = &spec["matchConstraints"]["resourceRules"][0];
        assert_eq!(
            rules["operations"],
            serde_json::json!(["CREATE", "UPDATE", "DELETE", "CONNECT"])
        );
        assert_eq!(rules["resources"], serde_json::json!(["*/*"]));
        let validations = spec["validations"].as_array().unwrap();
        assert_eq!(validations.len(), 2, "{sets:?}");
        assert_eq!(
            validations[0]["expression"],
            "!has(request.namespace) || \
             !(request.namespace in ['kube-system', 'kube-public', 'kube-node-lease'])"
        );
        let lease_rule = validations[1]["expression"].as_str().unwrap();
        assert!(
            lease_rule.ends_with(&format!("object.metadata.name in {leases}")),
            "{sets:?}: {lease_rule}"
        );
        assert!(validations.iter().all(|v| v["reason"] == "Forbidden"));
        assert_eq!(binding["spec"]["policyName"], "gc-streamspace");
        assert_eq!(
            binding["spec"]["validationActions"],
            serde_json::json!(["Deny"])
        );
    }
    for (namespace, sets) in [
        ("kube-system", &[][..]),
        ("kube-node-lease", &["clusterWide.enabled=true"]),
    ] {
        let mut args = vec!["template", "gc", super::CHART, "--namespace", namespace];
        args.extend(super::API_VERSIONS);
        args.extend(super::INSTALL_VALUES);
        for set in sets {
            args.extend(["--set", set]);
        }
        let out = super::helm(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("is a system namespace"),
            "{namespace}: {stderr}"
        );
    }
}
