//! The chart installed on the real API server and its CronJobs' containers run as the kubelet
//! would run them: the default session collector, the failed-Pod collector with an object store
//! and PostgreSQL receipts, cluster-wide mode, and the failed-Pod collector dry or live as its
//! values and NOTES say.

use std::path::PathBuf;

use gc_testbed::{TestBed, TestNamespace};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DynamicObject, PostParams};

use super::{
    allowed, assert_lease_access, container_args, documents, install, object, pod_spec, template_as,
};
use crate::common::{Result, command, one_live_session, sqlite, target};

/// `postgres://USER:PASSWORD@HOST:PORT/NAME[?...]`, split.
pub(super) fn database_parts(url: &str) -> [String; 5] {
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
pub(super) async fn session_database(
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
pub(super) fn install_with(ns: &TestNamespace, sets: &[(&str, String)]) {
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
pub(super) async fn live_and_gone(
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
    let grace: i64 = args
        .iter()
        .find_map(|a| a.strip_prefix("--grace="))
        .and_then(|g| g.strip_suffix('h'))
        .expect("--grace=HOURSh")
        .parse()?;
    let later = Timestamp::from_second(Timestamp::now().as_second() + (grace + 1) * 3600)?;
    let host = format!("{}-manual", cron_job.metadata.name.clone().unwrap());
    let (out, log) = run_rendered(bed, (&args, &env), &token_file, dir.path(), later, &host)?;
    let state = |path: &str| on_state(path, dir.path());
    assert!(out.status.success(), "{log}");
    assert!(sessions.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(services.get_opt("gone-1").await?.is_none(), "{log}");
    assert!(sessions.get_opt("live-1").await?.is_some(), "{log}");
    assert!(services.get_opt("live-1").await?.is_some(), "{log}");
    // Each object deleted was archived first, on the volume, with its receipt there, under the
    // install's own cluster id.
    let cluster = args
        .iter()
        .find(|a| a.starts_with("--cluster-id="))
        .expect("--cluster-id=ID");
    assert_eq!(*cluster, format!("--cluster-id=gc-{}", ns.name()));
    let listed = command()
        .args(["archives", "verify", "-n", ns.name(), cluster, "-o", "json"])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, state(v))))
        .output()?;
    let checked: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout)?;
    let ok: Vec<&str> = checked
        .iter()
        .filter(|c| c["result"] == "ok")
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(ok, ["gone-1", "gone-1"], "{checked:?}\n{log}");

    // Least privilege: the run lock and the session kinds, no Pods.
    let client = ns.service_account_client(&account).await?;
    let leases = [
        ("get", "gc-sessions", true),
        ("update", "gc-sessions", true),
        ("get", "gc-pods", false),
        ("update", "gc-pods", false),
        ("delete", "gc-sessions", false),
    ];
    assert_lease_access(&client, Some(ns.name()), &leases).await?;
    for (verb, group, resource, want) in [
        ("create", "coordination.k8s.io", "leases", true),
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
    // Volumes kept (`gc.retainVolumeDays`, 7): get, list, patch on PersistentVolumes, no more.
    for (verb, want) in [
        ("get", true),
        ("list", true),
        ("patch", true),
        ("delete", false),
        ("create", false),
        ("update", false),
    ] {
        let got = allowed(&client, verb, "", "persistentvolumes", None).await?;
        assert_eq!(got, want, "{verb} persistentvolumes");
    }

    // The delete undone as the chart README says, by the restore account it enables.
    restore_as_the_readme_says(bed, &ns, cron_job, &state).await?;
    assert!(sessions.get_opt("gone-1").await?.is_some());
    assert!(services.get_opt("gone-1").await?.is_some());
    Ok(())
}

/// The chart README's "Undoing a delete": `helm upgrade --reuse-values --set
/// gc.restore.enabled=true`, then its `kubectl create job --from=cronjob/... SESSION` and
/// `kubectl delete job` commands run as written (with the test's namespace and session id)
/// against the test bed, and each Job so made run as the kubelet would run its Pod: its
/// container's environment resolved (values, Secrets, the Job's labels), its args expanded
/// (`$(GC_RESTORE_SESSION)`), the image's entrypoint, a token of its account. The Jobs use the
/// CronJob's image, security contexts and state volume, as their own account; the dry run's
/// creates nothing, the restore's creates the session's objects again; the account may create
/// and not delete or update.
async fn restore_as_the_readme_says(
    bed: &TestBed,
    ns: &TestNamespace,
    cron_job: &k8s_openapi::api::batch::v1::CronJob,
    state: &dyn Fn(&str) -> String,
) -> Result {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/README.md"))?;
    let section = &readme[readme.find("## Undoing a delete").expect("the section")..];
    let section = section
        .replace(" streamspace ", &format!(" {} ", ns.name()))
        .replace("alice-firefox-0000000a", "gone-1");
    let commands = super::docs::doc_commands(&section);
    let upgrade = commands
        .iter()
        .find(|c| {
            c[..2] == ["helm", "upgrade"] && c.iter().any(|w| w.contains("gc.restore.enabled=true"))
        })
        .expect("the README's upgrade that enables the restore account");
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap();
    let args: Vec<&str> = upgrade[1..]
        .iter()
        .map(|w| {
            if w == "./chart" {
                super::CHART
            } else {
                w.as_str()
            }
        })
        .chain(["--kubeconfig", kubeconfig])
        .collect();
    let out = super::helm(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cron = cron_pod(cron_job);
    let cron_container = &cron.containers[0];
    let kubectl = |words: &[String]| {
        let out = std::process::Command::new(gc_testbed::tool("kubectl").unwrap())
            .args(&words[1..])
            .args(["--kubeconfig", kubeconfig])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{words:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let rows = |out: &std::process::Output| -> Vec<(String, String)> {
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let mut rows: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r["kind"].as_str().unwrap().to_owned(),
                    r["result"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        rows.sort();
        rows
    };
    let mut account = String::new();
    let mut runs = Vec::new();
    // The README's commands in order: each `create job` made and run, each `delete job` sent.
    for words in commands.iter().filter(|c| c[0] == "kubectl") {
        let verb = words.iter().position(|w| w == "create" || w == "delete");
        match verb.map(|at| (words[at].as_str(), words.get(at + 1).map(String::as_str))) {
            Some(("create", Some("job"))) => {
                let from = words
                    .iter()
                    .find_map(|w| w.strip_prefix("--from=cronjob/"))
                    .expect("--from=cronjob/NAME");
                let name = words.last().unwrap();
                assert_eq!(
                    name, "gone-1",
                    "the Job is named after the session: {words:?}"
                );
                kubectl(words);
                let job = ns.api::<Job>().get(name).await?;
                let pod = job
                    .spec
                    .and_then(|s| s.template.spec.map(|p| (s.template.metadata, p)));
                let (meta, pod) = pod.expect("a Pod template");
                // The CronJob's image, security contexts and state volume.
                let container = &pod.containers[0];
                assert_eq!(container.image, cron_container.image);
                assert_eq!(pod.security_context, cron.security_context);
                assert_eq!(container.security_context, cron_container.security_context);
                assert_eq!(pod.volumes, cron.volumes);
                assert_eq!(container.volume_mounts, cron_container.volume_mounts);
                let rendered = restore_job(ns, meta.unwrap_or_default(), &pod).await?;
                account.clone_from(&rendered.account);
                assert!(
                    ns.api::<ServiceAccount>()
                        .get_opt(&account)
                        .await?
                        .is_some(),
                    "{account}"
                );
                assert_ne!(
                    Some(&account),
                    pod_account(&cron).as_ref(),
                    "not the collector's"
                );
                let dir = tempfile::tempdir()?;
                let token = token_file(ns, &account, &dir).await?;
                let out = command()
                    .args(out_of_cluster(&rendered.args, bed, &token))
                    .args(["-o", "json"])
                    .env_clear()
                    .envs(rendered.env.iter().map(|(k, v)| (k, state(v))))
                    .output()?;
                runs.push((from.to_owned(), rows(&out)));
            }
            Some(("delete", Some("job"))) => kubectl(words),
            _ => {}
        }
    }
    let row = |kind: &str, result: &str| (kind.to_owned(), result.to_owned());
    assert_eq!(
        runs,
        [
            (
                "gc-restore-dry-run".to_owned(),
                vec![
                    row("Service", "would create"),
                    row("Session", "would create")
                ]
            ),
            (
                "gc-restore".to_owned(),
                vec![row("Service", "created"), row("Session", "created")]
            ),
        ]
    );

    // Its account: get and create the kinds and Events here, nothing else; the kept volumes.
    let client = ns.service_account_client(&account).await?;
    for (verb, group, resource, want) in [
        ("create", "apps", "deployments", true),
        ("get", "apps", "deployments", true),
        ("create", "", "services", true),
        ("create", "", "persistentvolumeclaims", true),
        ("create", "stream.space", "sessions", true),
        ("create", "events.k8s.io", "events", true),
        ("delete", "apps", "deployments", false),
        ("update", "", "services", false),
        ("patch", "", "persistentvolumeclaims", false),
        ("list", "stream.space", "sessions", false),
        ("create", "", "pods", false),
        ("get", "", "secrets", false),
        ("create", "coordination.k8s.io", "leases", false),
    ] {
        let got = allowed(&client, verb, group, resource, Some(ns.name())).await?;
        assert_eq!(got, want, "restore account: {verb} {group}/{resource}");
        if want {
            assert!(!allowed(&client, verb, group, resource, Some("default")).await?);
        }
    }
    for (verb, want) in [
        ("get", true),
        ("patch", true),
        ("list", false),
        ("delete", false),
    ] {
        let got = allowed(&client, verb, "", "persistentvolumes", None).await?;
        assert_eq!(got, want, "restore account: {verb} persistentvolumes");
    }
    Ok(())
}

/// The ServiceAccount of a Pod spec.
fn pod_account(pod: &PodSpec) -> Option<String> {
    pod.service_account_name.clone()
}

/// A restore Job's one container as the kubelet would run it: [`rendered`]'s environment, and
/// the Job's labels (`fieldRef: metadata.labels['...']`, which the Pod carries from its
/// template), then `$(NAME)` in its args expanded from that environment, as the kubelet does.
pub(super) async fn restore_job(
    ns: &TestNamespace,
    meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pod: &PodSpec,
) -> Result<Rendered> {
    let labels = meta.labels.unwrap_or_default();
    let mut resolved = pod.clone();
    let container = &mut resolved.containers[0];
    let mut from_labels = Vec::new();
    for var in container.env.iter_mut().flatten() {
        let field = var.value_from.as_ref().and_then(|f| f.field_ref.as_ref());
        if let Some(field) = field {
            let key = field
                .field_path
                .strip_prefix("metadata.labels['")
                .and_then(|k| k.strip_suffix("']"))
                .unwrap_or_else(|| panic!("{}: only labels are resolved here", var.name));
            let value = labels
                .get(key)
                .unwrap_or_else(|| panic!("no label {key}: {labels:?}"));
            from_labels.push((var.name.clone(), value.clone()));
            var.value = Some(value.clone());
            var.value_from = None;
        }
    }
    assert!(!from_labels.is_empty(), "the session from the Job's name");
    // `$(NAME)` expanded from the environment's values (a Secret's never appears in args).
    let values: Vec<(String, String)> = container
        .env
        .iter()
        .flatten()
        .filter_map(|v| v.value.clone().map(|value| (v.name.clone(), value)))
        .collect();
    let args = container.args.clone().expect("args");
    container.args = Some(
        args.iter()
            .map(|arg| {
                values.iter().fold(arg.clone(), |arg, (name, value)| {
                    arg.replace(&format!("$({name})"), value)
                })
            })
            .collect(),
    );
    let rendered = rendered(ns, &resolved).await?;
    Ok(rendered)
}

/// The rendered container's command (`args`, `env`) run once as the kubelet would run it, at
/// `now`, on host `host`: only the connection differs from a Pod's (`--in-cluster` reads the
/// token from the Pod's mount, here the same token is given by file), and the state volume's
/// paths are folders of `dir` ([`on_state`]). Its output, and the command with what it printed,
/// for messages.
pub(super) fn run_rendered(
    bed: &TestBed,
    (args, env): (&[String], &[(String, String)]),
    token_file: &std::path::Path,
    dir: &std::path::Path,
    now: Timestamp,
    host: &str,
) -> Result<(std::process::Output, String)> {
    let mut argv = out_of_cluster(args, bed, token_file);
    argv.push(format!("--now={now}"));
    let out = command()
        .args(&argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, on_state(v, dir))))
        .env("HOSTNAME", host)
        .env("GC_ALLOW_FUTURE_NOW", "1")
        .output()?;
    let log = format!(
        "{argv:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out, log))
}

/// `value` with the state volume's mount, as the chart renders it, a folder of the test's own.
pub(super) fn on_state(value: &str, dir: &std::path::Path) -> String {
    value.replace("/var/lib/gc", &dir.to_string_lossy())
}

/// A CronJob's or a Deployment's one container as the kubelet would run it.
pub(super) struct Rendered {
    /// Its args (the image's entrypoint is gc-cli).
    pub(super) args: Vec<String>,
    /// Its environment, resolved from values and Secrets.
    pub(super) env: Vec<(String, String)>,
    /// The Pod's ServiceAccount.
    pub(super) account: String,
}

/// The Pod template of `cron_job`, as the API server stores it.
pub(super) fn cron_pod(cron_job: &k8s_openapi::api::batch::v1::CronJob) -> PodSpec {
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
pub(super) async fn rendered(ns: &TestNamespace, pod: &PodSpec) -> Result<Rendered> {
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
pub(super) async fn token_file(
    ns: &TestNamespace,
    account: &str,
    dir: &tempfile::TempDir,
) -> Result<PathBuf> {
    let token = ns.service_account_token(account).await?;
    let path = dir.path().join("token");
    std::fs::write(&path, &token)?;
    Ok(path)
}

/// `args` with `--in-cluster` replaced by the same token given by file: only the connection
/// differs from a Pod's.
pub(super) fn out_of_cluster(
    args: &[String],
    bed: &TestBed,
    token_file: &std::path::Path,
) -> Vec<String> {
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
    let store = gc_store::open(db.url()).await?;
    let receipt = gc_core::ports::Store::get_receipt(&store, "primary", &uid)
        .await?
        .expect("a receipt in PostgreSQL");
    store.close().await;
    let object = s3.object_path(
        "diagnostics",
        &format!("pods/primary/{}/{uid}.{}.json", ns.name(), receipt.sha256),
    );
    assert_eq!(
        gc_core::pods::archive::digest(&std::fs::read(&object)?),
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
        ("update", "coordination.k8s.io", "leases", elsewhere, false),
        ("create", "coordination.k8s.io", "leases", elsewhere, true),
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

    // The failed-Pod collector's run lock by name, anywhere; not the session collector's.
    let leases = [
        ("get", "gc-pods", true),
        ("update", "gc-pods", true),
        ("get", "gc-sessions", false),
        ("update", "gc-sessions", false),
    ];
    assert_lease_access(&client, elsewhere, &leases).await?;

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

/// The failed-Pod collector's Pod `due` in `ns`, created again when a run collected it.
async fn due(ns: &TestNamespace) -> Result {
    if ns.api::<Pod>().get_opt("due").await?.is_none() {
        target(ns, "due").await?;
    }
    Ok(())
}

/// `failedPods.dryRun` and `failedPods.autoRemediate`, in each of their four combinations: the
/// CronJob's and the `serve` Deployment's rendered containers, run as the kubelet would run them
/// (`serve` stopped after its first run), are accepted and act exactly when NOTES says LIVE:
/// a due Pod archived and deleted only when both values allow it, otherwise a dry run that
/// archives nothing and keeps it, as NOTES' DRY RUN says.
#[tokio::test]
async fn failed_pod_collector_acts_only_when_dry_run_and_auto_remediate_allow_it() -> Result {
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("chart-dry").await?;
    // The chart's ServiceAccount and Role: the same for every combination.
    let base = [
        "gc.enabled=false",
        "failedPods.enabled=true",
        "failedPods.retentionSeconds=3600",
    ];
    let installed: Vec<(&str, String)> = base.iter().map(|s| ("--set", (*s).to_owned())).collect();
    install_with(&ns, &installed);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    for (dry_run, auto_remediate) in [(true, false), (true, true), (false, false), (false, true)] {
        let live = !dry_run && auto_remediate;
        let values = [
            format!("failedPods.dryRun={dry_run}"),
            format!("failedPods.autoRemediate={auto_remediate}"),
        ];
        let sets: Vec<&str> = base
            .iter()
            .copied()
            .chain(values.iter().map(String::as_str))
            .collect();

        // What NOTES says of the run.
        let notes = super::docs::notes(bed, &sets);
        let given =
            format!("(failedPods.dryRun={dry_run}, failedPods.autoRemediate={auto_remediate})");
        let says = if live {
            format!("LIVE {given}: it archives and deletes.")
        } else {
            format!("DRY RUN {given}: it mutates nothing")
        };
        assert!(notes.contains(&says), "{sets:?}: no {says:?} in\n{notes}");

        let serve_port = format!("serve.port={port}");
        for serve in [false, true] {
            let mut rendered_sets = sets.clone();
            if serve {
                rendered_sets.extend(["serve.enabled=true", &serve_port]);
            }
            let context = format!("{rendered_sets:?}");
            let objects = documents(&template_as("gc", ns.name(), &rendered_sets));
            let kind = if serve { "Deployment" } else { "CronJob" };
            let workload = object(&objects, kind, "gc-failed-pods");
            let args = container_args(workload);
            let modes: Vec<&str> = args
                .iter()
                .map(String::as_str)
                .filter(|a| a.starts_with("--dry-run") || *a == "--auto-remediate")
                .collect();
            let want: &[&str] = if live {
                &["--dry-run=none", "--auto-remediate"]
            } else {
                &["--dry-run=server"]
            };
            assert_eq!(modes, want, "{context}");

            due(&ns).await?;
            let dir = tempfile::tempdir()?;
            let account = pod_spec(workload)["serviceAccountName"]
                .as_str()
                .expect("a ServiceAccount");
            let token_file = token_file(&ns, account, &dir).await?;
            let mut argv = out_of_cluster(&args, bed, &token_file);
            if serve {
                let at = argv.iter().position(|a| a == "serve").expect("serve");
                argv.insert(at + 1, "--runs=1".to_owned());
            }
            let archives = dir.path().join("archives");
            let out = command()
                .args(&argv)
                .env_clear()
                .env("GC_STATE_DIR", dir.path())
                .env("GC_STORE", sqlite(dir.path(), "gc.sqlite3"))
                .env("GC_ARCHIVE_DIR", &archives)
                .env("HOSTNAME", "gc-failed-pods-manual")
                .output()?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let log = format!("{context}\n{argv:?}\nstdout: {stdout}\nstderr: {stderr}");
            assert!(out.status.success(), "{log}");
            assert!(!stderr.contains("run failed"), "{log}");
            let summary = if live {
                "1 of 1 targets collected, "
            } else {
                "1 of 1 targets collected (dry run), "
            };
            assert!(stdout.contains(summary), "{log}");
            let kept = ns.api::<Pod>().get_opt("due").await?.is_some();
            assert_eq!(kept, !live, "{log}");
            // The dry run's one write is the sink probe (`.gc-probe`): no archive.
            let archived = std::fs::read_dir(&archives).map_or(0, |entries| {
                entries
                    .filter(|e| e.as_ref().is_ok_and(|e| e.file_name() != ".gc-probe"))
                    .count()
            });
            assert_eq!(archived > 0, live, "{log}");
        }
    }
    Ok(())
}
