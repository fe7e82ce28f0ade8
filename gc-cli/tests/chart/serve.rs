//! `serve.enabled`: each collector's Deployment runs exactly its CronJob's flags, with a Service
//! (and a ServiceMonitor) picking its Pods; installed, its container runs as rendered, answers
//! /healthz and /metrics and exits on SIGTERM.

use std::process::Command;

use gc_testbed::TestBed;
use serde_json::Value;

use super::install::{
    Rendered, install_with, live_and_gone, out_of_cluster, rendered, session_database, token_file,
};
use super::{container_args, documents, names, object, pod_spec, template, the_container};
use crate::common::{Result, command, one_live_session};

/// `value` without the members `drop`: what must be the same on both sides of a comparison.
fn without(value: &Value, drop: &[&str]) -> Value {
    let mut value = value.clone();
    for key in drop {
        value.as_object_mut().unwrap().remove(*key);
    }
    value
}

/// With `serve.enabled`, each collector's Deployment runs `serve` with exactly the flags (but the
/// Pushgateway), environment, volumes, ServiceAccount and scheduling of the CronJob it replaces
/// (one set of helpers renders both), adds only the port, the probes, a restart policy and a grace
/// period, and comes with a Service for its metrics (and a ServiceMonitor when asked); no CronJob
/// is left.
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
            // `[log flags] run C FLAGS` and
            // `[log flags] serve --listen --interval --stall C FLAGS`.
            let (run, serve) = (container_args(job), container_args(deployment));
            let at = run.iter().position(|a| a == "run").expect("run");
            let served_at = serve.iter().position(|a| a == "serve").expect("serve");
            assert_eq!(run[..at], serve[..served_at], "{context}");
            assert_eq!(
                serve[served_at + 1..served_at + 4],
                ["--listen=0.0.0.0:9898", "--interval=6h", "--stall=1h"],
                "{context}"
            );
            // The same flags, but the Pushgateway: `serve` is scraped, and a push as well would
            // bring each gauge twice.
            let pushes = |a: &&String| a.starts_with("--pushgateway");
            let unpushed: Vec<&String> = run[at + 1..].iter().filter(|a| !pushes(a)).collect();
            assert_eq!(
                unpushed,
                serve[served_at + 4..].iter().collect::<Vec<_>>(),
                "{context}"
            );
            assert_eq!(
                run.iter().any(|a| pushes(&a)),
                pushgateway,
                "{context}: the Pushgateway only when set"
            );
            assert!(
                !serve.iter().any(|a| pushes(&a)),
                "{context}: never to serve"
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
        args[..5],
        [
            "serve".to_owned(),
            format!("--listen=0.0.0.0:{listen}"),
            "--interval=6h".to_owned(),
            "--stall=1h".to_owned(),
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
        // The state volume's paths, as the chart renders them, become a folder of the test's.
        .envs(
            env.iter()
                .map(|(k, v)| (k, v.replace("/var/lib/gc", &dir.path().to_string_lossy()))),
        )
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
