//! The Helm chart with the real `helm` and the real API server: lint, templates for several
//! values, an install the API server accepts, its ServiceAccount proven to do exactly what the
//! collectors need there and nothing else, a default install's session CronJob run exactly as
//! rendered, and the README's commands naming only objects the chart renders.

use std::path::PathBuf;
use std::process::{Command, Output};

use gc_core::ports::{ObjectCluster, Preconditions};
use gc_core::sessions::Kind;
use gc_testbed::{TestBed, TestNamespace};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, PostParams};

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

/// Every object of a `helm template` output, parsed (a namespace-less object is in `namespace`).
fn rendered_objects(rendered: &str, namespace: &str) -> Vec<Named> {
    rendered
        .split("\n---")
        .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        .map(|doc| {
            let value: serde_norway::Value = serde_norway::from_str(doc).unwrap();
            let value = serde_json::to_value(value).unwrap();
            let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
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
    let (_, ns) = namespace("chart-dry").await?;
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
    let notes = concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/templates/NOTES.txt");
    assert!(
        !std::path::Path::new(notes).exists(),
        "the chart has a NOTES.txt now: check its commands here too"
    );
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

/// The chart installed as a user installs it (default values; only the database connection set,
/// the way the README tells a standalone install), and its session CronJob's container run as
/// the kubelet would run it: the image's entrypoint with the rendered args, the rendered
/// environment resolved from its values and Secret, and a token of the chart's ServiceAccount.
/// It must take the run lock, delete the orphans and keep the live session's objects.
#[tokio::test]
async fn default_install_runs_the_rendered_session_collector() -> Result {
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::{Secret, Service};

    let bed = TestBed::shared().await?;
    let Some(db) = gc_testbed::TestDatabase::fresh("chart-default").await? else {
        return Ok(());
    };
    let ns = bed.namespace("chart-default").await?;
    let session_resource = bed.install_session_crd().await?;

    // StreamSpace's session table: one live session.
    one_live_session(&db).await?;

    // The password in a Secret of the user's, the connection in the chart's `database.*` values.
    let [host, port, name, user, password] = database_parts(db.url());
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "session-db"},
        "stringData": {"postgres-password": password},
    }))?;
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    let sets = [
        ("--set-string", format!("database.host={host}")),
        ("--set", format!("database.port={port}")),
        ("--set-string", format!("database.name={name}")),
        ("--set-string", format!("database.user={user}")),
        (
            "--set-string",
            "database.existingSecret=session-db".to_owned(),
        ),
    ];
    let mut args = Vec::new();
    for (flag, set) in &sets {
        args.extend([*flag, set.as_str()]);
    }
    let out = install(&ns, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The installed CronJob, as the API server stores it: its Pod template's one container.
    let cron_jobs = ns.api::<CronJob>().list(&Default::default()).await?.items;
    assert_eq!(cron_jobs.len(), 1, "the default install runs one collector");
    let cron_job = &cron_jobs[0];
    let Rendered { args, env, account } = rendered(&ns, cron_job).await?;
    assert_eq!(args[..2], ["run", "sessions"], "{args:?}");
    assert!(env.iter().any(|(k, _)| k == "DB_PASSWORD"), "{env:?}");

    let dir = tempfile::tempdir()?;
    let token_file = token_file(&ns, &account, &dir).await?;

    // One live and one orphaned session: its Session object and its Service.
    let sessions: Api<DynamicObject> =
        Api::namespaced_with(ns.client().clone(), ns.name(), &session_resource);
    let services = ns.api::<Service>();
    for id in ["live-1", "gone-1"] {
        let labels = serde_json::json!({"app": "streamspace-session", "session": id});
        let session: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": session_resource.api_version,
            "kind": session_resource.kind,
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

/// A CronJob's one container as the kubelet would run it.
struct Rendered {
    /// Its args (the image's entrypoint is gc-cli).
    args: Vec<String>,
    /// Its environment, resolved from values and Secrets.
    env: Vec<(String, String)>,
    /// The Pod's ServiceAccount.
    account: String,
}

/// The one container of `cron_job`'s Pod template, its environment resolved as the kubelet
/// resolves it (values and `secretKeyRef`s, nothing else).
async fn rendered(
    ns: &TestNamespace,
    cron_job: &k8s_openapi::api::batch::v1::CronJob,
) -> Result<Rendered> {
    use k8s_openapi::api::core::v1::Secret;
    let pod = cron_job
        .spec
        .job_template
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("a Pod template");
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
    let Rendered { args, env, account } = rendered(&ns, cron_job).await?;
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
    let Rendered { args, env, account } = rendered(&home, cron_job).await?;
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
