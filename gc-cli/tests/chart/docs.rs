//! Every command the chart's README and NOTES.txt show names only objects the chart renders (or
//! an earlier command creates); NOTES.txt tells what runs, where, and how to read its results.

use gc_testbed::TestBed;
use serde_json::Value;

use super::{
    CHART, documents, helm, install_service_monitor_crd, object, template, template_as_written,
};
use crate::common::Result;
use crate::common::markdown::shell_words;

/// An object by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    kind: String,
    namespace: String,
    name: String,
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

/// The `kubectl` and `helm` commands of a Markdown file's fenced code blocks, in order.
pub(super) fn doc_commands(markdown: &str) -> Vec<Vec<String>> {
    crate::common::markdown::fenced_commands(markdown)
        .into_iter()
        .filter(|c| c[0] == "kubectl" || c[0] == "helm")
        .collect()
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
    // After `--`: the container's arguments (`kubectl run ... -- ARGS`), not kubectl's.
    let own = words[1..].split(|w| w == "--").next().unwrap_or_default();
    let mut rest = own.iter();
    let mut overrides = None;
    while let Some(word) = rest.next() {
        if let Some((flag, value)) = word.split_once('=').filter(|_| word.starts_with('-')) {
            if flag == "--overrides" {
                overrides = Some(serde_json::from_str::<Value>(value).expect("--overrides JSON"));
                continue;
            }
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
    // `run --overrides`: the Pod's ServiceAccount and claims.
    if let Some(spec) = overrides.as_ref().map(|o| &o["spec"]) {
        if let Some(account) = spec["serviceAccountName"].as_str() {
            refers.push(named("ServiceAccount", &namespace, account));
        }
        for volume in spec["volumes"].as_array().into_iter().flatten() {
            if let Some(claim) = volume["persistentVolumeClaim"]["claimName"].as_str() {
                refers.push(named("PersistentVolumeClaim", &namespace, claim));
            }
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
    /// `--reuse-values`, `--reset-then-reuse-values`: the release's earlier values, then these
    /// `--set`s.
    reuse: bool,
}

fn parse_helm(words: &[String]) -> HelmCommand {
    let mut parsed = HelmCommand {
        subcommand: words.get(1).cloned().unwrap_or_default(),
        positional: Vec::new(),
        namespace: "default".to_owned(),
        sets: Vec::new(),
        install: false,
        reuse: false,
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
            // A values file the page shows (a `# NAME.yaml` block): see `check_commands`.
            "-f" | "--values" => parsed.sets.push(format!("--values={}", value())),
            "--install" | "-i" => parsed.install = true,
            // The release's values, then these; with `--reset-then-reuse-values` the chart's
            // new defaults under them (what renders here either way).
            "--reuse-values" | "--reset-then-reuse-values" => parsed.reuse = true,
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
/// (`helm template` with the README's own release, namespace and values, as written: no cluster, no
/// `--api-versions`) or that an earlier
/// command of the README creates, and every `helm` command names the README's release.
#[test]
fn readme_commands_name_rendered_objects() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/README.md"))
            .unwrap();
    check_commands(&readme);
}

/// The same of the project README's "Install in a cluster".
#[test]
fn the_project_readmes_install_names_rendered_objects() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme.find("## Install in a cluster").expect("the section");
    let rest = &readme[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    check_commands(&rest[..end]);
}

/// Checks the `kubectl` and `helm` commands of `markdown`, in order (see above); a values file
/// they name is the page's own (`page_files`).
fn check_commands(readme: &str) {
    let files = tempfile::tempdir().unwrap();
    for (name, text) in page_files(readme) {
        std::fs::write(files.path().join(name), text).unwrap();
    }
    let commands = doc_commands(readme);
    let mut releases: Vec<(String, String)> = Vec::new();
    // The values each install or upgrade of a release rendered it with, in order.
    let mut values: Vec<((String, String), Vec<String>)> = Vec::new();
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
                        releases.push(release_ns.clone());
                    }
                    let mut sets: Vec<String> = Vec::new();
                    if helm.reuse {
                        let earlier = values.iter().rev().find(|(r, _)| *r == release_ns);
                        sets.extend(earlier.into_iter().flat_map(|(_, s)| s.clone()));
                    }
                    sets.extend(helm.sets.iter().map(|s| match s.strip_prefix("--values=") {
                        Some(file) => format!("--values={}", files.path().join(file).display()),
                        None => s.clone(),
                    }));
                    values.push((release_ns, sets.clone()));
                    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
                    // As the reader runs it: no cluster, only the page's values.
                    let rendered = template_as_written(release, &helm.namespace, &sets);
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
pub(super) fn notes(bed: &TestBed, sets: &[&str]) -> String {
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
    args.extend(super::INSTALL_VALUES);
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
pub(super) fn check_notes_commands(notes: &str, sets: &[&str]) -> usize {
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

/// What NOTES says the session collector's log holds.
const SESSIONS_LOG: &str = "Orphaned session resources: the audit, one JSON line per decision.";
/// What NOTES says the failed-Pod collector's log holds (`run pods` prints a table).
const PODS_LOG: &str =
    "Failed-Pod diagnostics: a table, not JSON: a line per Pod (name, uid, outcome";

/// NOTES.txt tells the installer what runs (each collector as a CronJob with its schedule or as a
/// Deployment with its interval, where, whether it runs dry), how to read each collector's log
/// (the session collector's JSON audit, the failed-Pod collector's table) and the metrics; every
/// command it shows names objects the chart rendered.
#[tokio::test]
async fn notes_tell_what_runs_and_name_rendered_objects() -> Result {
    let bed = TestBed::shared().await?;
    install_service_monitor_crd(bed).await?;
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &[],
            &[
                "Metrics (streamspace_last_run_objects_deleted, ",
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
                "Metrics (streamspace_last_run_objects_deleted, ",
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
                "then every 6h.",
                "LIVE (failedPods.dryRun=false, failedPods.autoRemediate=true)",
                "every namespace",
                "logs deploy/gc-failed-pods",
                "kubectl get events --all-namespaces --field-selector=reportingComponent=",
                "port-forward svc/gc-sessions 9898:metrics",
                "ServiceMonitors gc-sessions, gc-failed-pods",
                "ServiceAccount: existing (an existing one",
                "counters since the Pod started: streamspace_objects_deleted_total",
            ],
        ),
        (
            &["serve.enabled=true", "metrics.pushgateway=http://pgw:9091"],
            &[
                "Deployment gc-sessions",
                "metrics.pushgateway (http://pgw:9091) is not used with serve.enabled",
            ],
        ),
        (&["gc.enabled=false"], &["No collector is enabled"]),
        (
            &[
                "events.enabled=false",
                "fullnameOverride=cleaner",
                "failedPods.enabled=true",
            ],
            &[
                "CronJob cleaner-sessions",
                "logs job/cleaner-sessions-now",
                "logs job/cleaner-failed-pods-now",
            ],
        ),
    ];
    for (sets, says) in cases {
        let text = notes(bed, sets);
        for want in says {
            assert!(text.contains(want), "{sets:?}: no {want:?} in\n{text}");
        }
        // Counters only from `serve`: a CronJob's run pushes gauges.
        let serve = sets.contains(&"serve.enabled=true");
        assert_eq!(
            text.contains("_total"),
            serve,
            "{sets:?}: counters named only with serve:\n{text}"
        );
        assert_eq!(
            text.contains("pushes them"),
            !serve && sets.iter().any(|s| s.starts_with("metrics.pushgateway=")),
            "{sets:?}:\n{text}"
        );
        assert_eq!(
            text.contains("get events"),
            !sets.contains(&"events.enabled=false") && !sets.contains(&"gc.enabled=false"),
            "{sets:?}:\n{text}"
        );
        // Each collector's log read as what it prints: the session collector's JSON audit
        // lines, the failed-Pod collector's table; the Metrics heading a paragraph of its own.
        let sessions = !sets.contains(&"gc.enabled=false");
        let pods = sets.contains(&"failedPods.enabled=true");
        assert_eq!(
            text.contains(SESSIONS_LOG),
            sessions,
            "{sets:?}: {SESSIONS_LOG:?} in\n{text}"
        );
        assert_eq!(
            text.contains(PODS_LOG),
            pods,
            "{sets:?}: {PODS_LOG:?} in\n{text}"
        );
        for line in text.lines().filter(|l| l.contains("JSON")) {
            assert!(
                line.trim_start().starts_with(SESSIONS_LOG) || line.contains(PODS_LOG),
                "{sets:?}: JSON of no collector: {line}"
            );
        }
        assert_eq!(
            text.contains("\n\nMetrics ("),
            sessions || pods,
            "{sets:?}: a blank line before Metrics:\n{text}"
        );
        let checked = check_notes_commands(&text, sets);
        assert_eq!(checked > 0, !sets.contains(&"gc.enabled=false"), "{sets:?}");
    }
    Ok(())
}

/// NOTES says what the session collector's first run does with the values given: with the
/// defaults (`gc.dryRun=false`, kept as StreamSpace asks) its first scheduled run deletes, with
/// the schedule, grace, cap and volumes' window rendered; it shows the `helm upgrade` that makes
/// it a dry run instead, which renders `--dry-run=server`. Dry, it says so and no such line;
/// `serve`'s first run starts with the Pod.
#[tokio::test]
async fn notes_say_what_the_first_scheduled_run_does() -> Result {
    let bed = TestBed::shared().await?;
    let defaults = notes(bed, &[]);
    for want in [
        "LIVE (gc.dryRun=false): it deletes.",
        "Its first scheduled run, the next time \"0 */6 * * *\" comes round, deletes each orphan \
         older than 24h, at most 100 objects, each archived first and a claim's volume kept 7d; \
         a run where over 0.5 of the judged sessions look gone is refused (gc.guard).",
        "To start with a dry run instead (it reports what it would delete and deletes nothing), \
         before then:",
        "read a run's log (below), then go live with --set gc.dryRun=false.",
    ] {
        assert!(defaults.contains(want), "no {want:?} in\n{defaults}");
    }
    // The values' default is the one NOTES describes.
    let values = std::fs::read_to_string(format!("{CHART}/values.yaml"))?;
    assert!(
        values.contains("\n  dryRun: false\n"),
        "gc.dryRun's default"
    );
    // `run sessions` is a dry run unless told otherwise: the chart's default tells it to delete.
    let rendered = template(&[]);
    assert!(rendered.contains("- --dry-run=none") && !rendered.contains("--dry-run=server"));
    // Its command: the release's upgrade to a dry run, which renders one.
    let line = defaults
        .lines()
        .find(|l| l.trim_start().starts_with("helm upgrade"))
        .expect("a helm upgrade line");
    let words = shell_words(line.trim());
    let helm_command = parse_helm(&words);
    assert_eq!(helm_command.positional, ["gc", "CHART"], "{line}");
    assert_eq!(helm_command.namespace, "streamspace", "{line}");
    assert!(helm_command.reuse, "{line}");
    assert_eq!(helm_command.sets, ["gc.dryRun=true"], "{line}");
    assert!(template(&["gc.dryRun=true"]).contains("- --dry-run=server"));

    let dry = notes(bed, &["gc.dryRun=true"]);
    assert!(dry.contains("DRY RUN (gc.dryRun=true)"), "{dry}");
    assert!(
        !dry.contains("first scheduled run") && !dry.contains("helm upgrade"),
        "{dry}"
    );

    let served = notes(
        bed,
        &[
            "serve.enabled=true",
            "gc.retainVolumeDays=0",
            "gc.gracePeriod=2d",
            "timeZone=UTC",
        ],
    );
    assert!(
        served.contains("Its first run starts with the Pod, now, deletes each orphan older than 2d, at most 100 objects, each archived first; a run"),
        "{served}"
    );
    // With the restore account: the one command that undoes a delete, naming rendered CronJobs.
    let restore = ["gc.restore.enabled=true"];
    let undo = notes(bed, &restore);
    for want in [
        "kubectl -n streamspace create job --from=cronjob/gc-restore-dry-run SESSION",
        "kubectl -n streamspace create job --from=cronjob/gc-restore SESSION",
    ] {
        assert!(undo.contains(want), "no {want:?} in\n{undo}");
    }
    assert!(check_notes_commands(&undo, &restore) > 0);
    assert!(!defaults.contains("Undoing a delete"), "{defaults}");
    let elsewhere = notes(
        bed,
        &["gc.restore.enabled=true", "gc.restore.namespaces={tenants}"],
    );
    assert!(!elsewhere.contains("Undoing a delete"), "{elsewhere}");
    let zoned = notes(bed, &["timeZone=Europe/Berlin", "gc.schedule=@daily"]);
    assert!(
        zoned.contains("the next time \"@daily\" comes round (Europe/Berlin), deletes"),
        "{zoned}"
    );
    Ok(())
}

/// NOTES say which states count as gone and which as live (StreamSpace's, by default), and, with
/// the request API on, its URL and the ClusterRoles a caller's account is bound to.
#[tokio::test]
async fn notes_name_the_states_and_the_request_api() -> Result {
    let bed = TestBed::shared().await?;
    let default = notes(bed, &[]);
    for said in [
        "has no row in sessions at streamspace-postgresql or a row whose state is terminated, failed, deleted",
        "Live states: pending, starting, running, hibernating, hibernated, waking, terminating; a \
         row in any other state is kept",
    ] {
        assert!(default.contains(said), "{said}: {default}");
    }
    assert!(!default.contains("Request API"), "{default}");
    let api = [
        "serve.enabled=true",
        "api.enabled=true",
        "api.tlsSecret=gc-api-tls",
    ];
    let without_restore = notes(bed, &api);
    for said in [
        "Request API (api.enabled): https://gc-sessions.streamspace.svc:9443 (Service \
         gc-sessions, port api), TLS from Secret gc-api-tls",
        "bind ClusterRole gc-streamspace-api-caller to it with a RoleBinding in streamspace",
        "Restores through the API are off",
    ] {
        assert!(without_restore.contains(said), "{said}: {without_restore}");
    }
    let with_restore = notes(bed, &[&api[..], &["gc.restore.enabled=true"]].concat());
    assert!(
        with_restore.contains("bind ClusterRole gc-streamspace-api-restorer the same way"),
        "{with_restore}"
    );
    // With both collectors, what is said once is said once, under its own heading.
    let both = [
        "failedPods.enabled=true",
        "gc.restore.enabled=true",
        "archives.prune.enabled=true",
    ];
    let both = notes(bed, &[&api[..], &both].concat());
    for once in [
        "Live states:",
        "Request API (api.enabled)",
        "Undoing a delete",
        "Archive retention",
    ] {
        assert_eq!(both.matches(once).count(), 1, "{once}: {both}");
    }
    let (sessions, pods) = both.split_once("Failed-Pod diagnostics:").unwrap();
    assert!(sessions.contains("Live states:") && !pods.contains("Live states:"));
    Ok(())
}

/// The same of `docs/streamspace.md`, with no database or cluster (`streamspace.rs` runs it).
#[test]
fn the_streamspace_page_names_rendered_objects() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/streamspace.md"
    ))
    .unwrap();
    check_commands(&page);
}

/// The `# NAME.yaml` blocks of a page: the files its commands name, as the reader saves them.
pub(super) fn page_files(page: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut block: Option<(String, String)> = None;
    let mut opened = false;
    for line in page.lines() {
        if line.starts_with("```") {
            files.extend(block.take());
            opened = line == "```yaml" && !opened;
            continue;
        }
        match &mut block {
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None if opened => {
                if let Some(name) = line.strip_prefix("# ").filter(|n| n.ends_with(".yaml")) {
                    block = Some((name.to_owned(), String::new()));
                }
                opened = false;
            }
            None => {}
        }
    }
    files
}
