//! The Kestra flow in `deploy/kestra/`: it keeps the reference flow's interface (inputs and
//! defaults, concurrency, gates, approval, trigger, alert), every `gc-cli` flag it uses exists,
//! every input reaches its flag, the token never appears on a command line, later tasks read only
//! outputs the plan task prints, and its commands, run as Kestra runs them, validate, plan and
//! collect on a real API server.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gc_testbed::FailedPod;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};

mod common;

use common::{Result, gc_cli, namespace};

const FLOW: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/kestra/gc-failed-pods.yaml"
);
const GC_CLI: &str = env!("CARGO_BIN_EXE_gc-cli");

/// The flow as JSON.
fn flow() -> Value {
    yaml_to_json(&std::fs::read_to_string(FLOW).unwrap())
}

/// YAML to JSON through Python's PyYAML (Debian's `python3-yaml`): the one place to switch to a
/// YAML crate once the test crate has one.
fn yaml_to_json(text: &str) -> Value {
    let value: serde_norway::Value = serde_norway::from_str(text).expect("the flow is valid YAML");
    serde_json::to_value(value).expect("the flow's YAML maps to JSON")
}

/// Every task of the flow, nested ones and error handlers included, with the ids leading to it.
fn tasks(flow: &Value) -> Vec<(Vec<String>, &Value)> {
    fn walk<'v>(v: &'v Value, path: &[String], out: &mut Vec<(Vec<String>, &'v Value)>) {
        for key in ["tasks", "then", "else", "errors"] {
            for t in v[key].as_array().into_iter().flatten() {
                let mut here = path.to_vec();
                here.push(t["id"].as_str().unwrap().to_owned());
                out.push((here.clone(), t));
                walk(t, &here, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(flow, &[], &mut out);
    out
}

fn task<'f>(flow: &'f Value, id: &str) -> &'f Value {
    tasks(flow)
        .into_iter()
        .find(|(path, _)| path.last().map(String::as_str) == Some(id))
        .unwrap_or_else(|| panic!("no task {id}"))
        .1
}

/// The tasks that run `gc-cli`, by id.
fn gc_cli_tasks(flow: &Value) -> Vec<(String, &Value)> {
    tasks(flow)
        .into_iter()
        .filter(|(_, t)| t["commands"].is_array())
        .map(|(path, t)| (path.last().unwrap().clone(), t))
        .collect()
}

/// A task's commands as the one script Kestra runs.
fn script(task: &Value) -> String {
    let lines: Vec<&str> = task["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    lines.join("\n")
}

/// The `gc-cli` subcommand a script runs (`["plan", "pods"]`, `["apply"]`); exactly one per task.
fn subcommand(script: &str) -> Vec<&'static str> {
    let found: Vec<Vec<&str>> = [vec!["plan", "pods"], vec!["apply"]]
        .into_iter()
        .filter(|sub| script.contains(&format!("gc-cli {}", sub.join(" "))))
        .collect();
    assert_eq!(found.len(), 1, "one gc-cli command per task:\n{script}");
    found[0].clone()
}

/// The `--long` flags a text names.
fn flags(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.len() > 2 && w.starts_with("--"))
        .map(str::to_owned)
        .collect()
}

fn help(sub: &[&str]) -> String {
    let out = gc_cli(&[sub, &["--help"]].concat());
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The flow's inputs with their defaults, `overrides` applied.
fn inputs(flow: &Value, overrides: &[(&str, Value)]) -> Map<String, Value> {
    let mut m: Map<String, Value> = flow["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["id"].as_str().unwrap().to_owned(), i["defaults"].clone()))
        .collect();
    for (k, v) in overrides {
        assert!(m.contains_key(*k), "no input {k}");
        m.insert((*k).to_owned(), v.clone());
    }
    m
}

/// Renders an env value of the form `{{ inputs.X }}`, `{{ vars.X }}` or `{{ secret('X') }}`, as
/// Kestra would; secrets come from `inputs` under `secret:X`.
fn render(flow: &Value, value: &str, inputs: &Map<String, Value>) -> String {
    let expr = value
        .trim()
        .strip_prefix("{{")
        .and_then(|v| v.strip_suffix("}}"))
        .unwrap_or_else(|| panic!("not a single expression: {value}"))
        .trim();
    if let Some(name) = expr
        .strip_prefix("secret('")
        .and_then(|e| e.strip_suffix("')"))
    {
        let key = format!("secret:{name}");
        return inputs
            .get(&key)
            .unwrap_or_else(|| panic!("no secret {name} given"))
            .as_str()
            .unwrap()
            .to_owned();
    }
    let v = match expr.split_once('.') {
        Some(("inputs", id)) => inputs[id].clone(),
        Some(("vars", id)) => flow["variables"][id].clone(),
        _ => panic!("unexpected expression {expr}"),
    };
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// Runs a task's commands as the Docker runner does (`/bin/sh -c` in the working directory), with
/// its env rendered from `inputs` and `gc-cli` on the `PATH`.
fn run_task(flow: &Value, id: &str, inputs: &Map<String, Value>, dir: &Path) -> Output {
    let t = task(flow, id);
    let bin_dir = Path::new(GC_CLI).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(script(t))
        .current_dir(dir)
        .env_clear()
        .env("PATH", path);
    for (k, v) in t["env"].as_object().into_iter().flatten() {
        cmd.env(k, render(flow, v.as_str().unwrap(), inputs));
    }
    cmd.output().unwrap()
}

/// One line: the whitespace of folded YAML scalars collapsed.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_flow_keeps_the_reference_flows_interface() {
    let f = flow();
    assert_eq!(f["id"], "k8s-terminated-pod-garbage-collector");
    assert_eq!(f["namespace"], "company.team");
    assert_eq!(f["concurrency"], json!({"limit": 1, "behavior": "QUEUE"}));
    let got: Vec<Value> = f["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| json!([i["id"], i["type"], i["defaults"]]))
        .collect();
    let want = json!([
        ["cluster_id", "STRING", "primary"],
        ["namespace", "STRING", "default"],
        ["api_url", "STRING", "{{ secret('K8S_MASTER_URL') }}"],
        ["token", "SECRET", "{{ secret('K8S_TOKEN') }}"],
        ["ca_cert_data", "STRING", "{{ secret('K8S_CA_CERT_DATA') }}"],
        ["trust_certs", "BOOL", false],
        ["retention_seconds", "INT", 86400],
        ["max_pods", "INT", 5],
        ["max_inventory", "INT", 1000],
        ["max_archive_bytes", "INT", 262144],
        ["dry_run", "BOOL", true],
        ["auto_remediate", "BOOL", false],
        ["archive_url", "STRING", "{{ secret('GC_ARCHIVE_URL') }}"],
        ["archive_endpoint", "STRING", ""],
    ]);
    assert_eq!(Value::Array(got), want);
    assert_eq!(
        f["variables"]["state_key"],
        "pod-diagnostics-{{ inputs.cluster_id }}-{{ inputs.namespace }}"
    );
    assert_eq!(
        squash(task(&f, "live_gate")["condition"].as_str().unwrap()),
        "{{ inputs.auto_remediate and not inputs.dry_run and outputs.plan.vars.target_count > 0 }}"
    );
    let approve = task(&f, "approve");
    assert_eq!(approve["type"], "io.kestra.plugin.core.flow.Pause");
    assert_eq!(approve["onResume"][0]["id"], "approved");
    assert_eq!(approve["onResume"][0]["type"], "BOOL");
    assert_eq!(approve["onResume"][0]["defaults"], false);
    assert_eq!(
        task(&f, "approved_gate")["condition"],
        "{{ outputs.approve.onResume.approved ?? false }}"
    );
    let trigger = &f["triggers"][0];
    assert_eq!(trigger["type"], "io.kestra.plugin.core.trigger.Schedule");
    assert_eq!(trigger["cron"], "0 8 * * *");
    assert_eq!(trigger["disabled"], true);
    assert_eq!(
        trigger["inputs"],
        json!({"dry_run": true, "auto_remediate": false})
    );
    let alert = &f["errors"][0];
    assert_eq!(
        alert["type"],
        "io.kestra.plugin.slack.notifications.SlackIncomingWebhook"
    );
    assert_eq!(alert["url"], "{{ secret('SLACK_WEBHOOK_URL') }}");
    // The ledger lives under the reference flow's key, read before the plan and saved after it.
    let save = task(&f, "save_observation");
    assert_eq!(save["type"], "io.kestra.plugin.core.kv.Set");
    assert_eq!(save["key"], "{{ render(vars.state_key) }}");
    for id in ["validate_inputs", "plan", "collect"] {
        assert_eq!(
            task(&f, id)["inputFiles"]["state.json"],
            "{{ kv(render(vars.state_key), errorOnMissing=false) ?? '{}' }}"
        );
    }
}

#[test]
fn apply_runs_only_behind_the_live_gate_and_the_approval() {
    let f = flow();
    let appliers: Vec<Vec<String>> = tasks(&f)
        .into_iter()
        .filter(|(_, t)| t["commands"].is_array() && subcommand(&script(t)) == ["apply"])
        .map(|(path, _)| path)
        .collect();
    assert_eq!(appliers, [["live_gate", "approved_gate", "collect"]]);
}

#[test]
fn every_gc_cli_flag_the_flow_uses_exists() {
    let f = flow();
    let found = gc_cli_tasks(&f);
    assert_eq!(found.len(), 3, "validate_inputs, plan, collect");
    for (id, t) in found {
        let s = script(t);
        let sub = subcommand(&s);
        let known = flags(&help(&sub));
        for flag in flags(&s) {
            assert!(known.contains(&flag), "{id}: gc-cli {sub:?} has no {flag}");
        }
    }
}

#[test]
fn every_input_reaches_its_gc_cli_flag() {
    let f = flow();
    // (input, flag, the tasks that must pass it)
    let plan_inputs = ["validate_inputs", "plan"];
    let live = ["plan", "collect"];
    let table: &[(&str, &str, &[&str])] = &[
        (
            "cluster_id",
            "--cluster-id",
            &["validate_inputs", "plan", "collect"],
        ),
        (
            "namespace",
            "--namespace",
            &["validate_inputs", "plan", "collect"],
        ),
        ("retention_seconds", "--retention", &plan_inputs),
        ("max_pods", "--max-pods", &plan_inputs),
        ("max_inventory", "--max-inventory", &plan_inputs),
        ("max_archive_bytes", "--max-archive-bytes", &plan_inputs),
        ("api_url", "--api-url", &live),
        ("ca_cert_data", "--ca-cert-data", &live),
        ("trust_certs", "--trust-certs", &live),
        ("dry_run", "--dry-run", &["collect"]),
        ("archive_url", "--archive-url", &["collect"]),
        ("archive_endpoint", "--archive-endpoint", &["collect"]),
    ];
    for &(input, flag, ids) in table {
        for id in ids {
            let t = task(&f, id);
            let var = env_var_of(t, input).unwrap_or_else(|| panic!("{id}: no env for {input}"));
            let mapped = script(t)
                .lines()
                .any(|l| flags(l).contains(flag) && l.contains(&format!("\"${var}\"")));
            // A boolean input adds its flag only when true, an optional one only when given.
            let text = script(t);
            let lines: Vec<&str> = text.lines().collect();
            let switched = lines.windows(2).any(|w| {
                let condition = w[0].contains(&format!("[ \"${var}\" = true ]"))
                    || w[0].contains(&format!("[ -n \"${var}\" ]"));
                condition && (flags(w[0]).contains(flag) || flags(w[1]).contains(flag))
            });
            assert!(mapped || switched, "{id}: {input} does not reach {flag}");
        }
    }
    // `auto_remediate` has no flag: it opens the gate in front of the approval.
    assert!(
        task(&f, "live_gate")["condition"]
            .as_str()
            .unwrap()
            .contains("inputs.auto_remediate")
    );
    let mapped: BTreeSet<&str> = table.iter().map(|r| r.0).collect();
    for name in inputs(&f, &[]).keys() {
        assert!(
            mapped.contains(name.as_str()) || name == "token" || name == "auto_remediate",
            "input {name} reaches no gc-cli flag"
        );
    }
}

/// The env variable a task renders `input` into, if any.
fn env_var_of(task: &Value, input: &str) -> Option<String> {
    task["env"].as_object().and_then(|env| {
        env.iter()
            .find(|(_, v)| squash(v.as_str().unwrap()) == format!("{{{{ inputs.{input} }}}}"))
            .map(|(k, _)| k.clone())
    })
}

#[test]
fn the_token_goes_to_a_file_never_to_a_command_line() {
    let f = flow();
    let text = std::fs::read_to_string(FLOW).unwrap();
    let mut env_uses = 0;
    for id in ["plan", "collect"] {
        let t = task(&f, id);
        let var = env_var_of(t, "token").expect("the token in the env");
        env_uses += 1;
        let s = script(t);
        let uses: Vec<&str> = s.lines().filter(|l| l.contains(&var)).collect();
        assert_eq!(
            uses,
            [format!("printf '%s' \"${var}\" > \"$token_file\"")],
            "{id}"
        );
        assert!(s.contains("umask 077"), "{id}: the token file is private");
        assert!(s.contains("--token-file \"$token_file\""), "{id}");
    }
    assert_eq!(
        text.matches("inputs.token").count(),
        env_uses,
        "the token is rendered only into env values"
    );
}

#[test]
fn later_tasks_read_only_what_the_plan_task_writes() {
    let f = flow();
    let text = std::fs::read_to_string(FLOW).unwrap();
    let out = gc_cli(&[
        "plan",
        "pods",
        "--inventory",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/data/pods.json"),
        "--namespace",
        "batch",
        "--now",
        "2026-11-29T19:50:00Z",
        "--format",
        "kestra",
    ]);
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let outputs: Value = serde_json::from_str(
        line.trim()
            .strip_prefix("::")
            .and_then(|l| l.strip_suffix("::"))
            .unwrap(),
    )
    .unwrap();
    let printed = outputs["outputs"].as_object().unwrap();
    let read = names_after(&text, "outputs.plan.vars.");
    assert!(read.contains("target_count") && read.contains("deferred"));
    for key in &read {
        assert!(printed.contains_key(key), "the flow reads {key}");
    }
    let plan = task(&f, "plan");
    assert!(script(plan).contains("--format kestra"));
    let files: BTreeSet<String> = plan["outputFiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(files, ["ledger.json", "plan.json"].map(String::from).into());
    let s = script(plan);
    assert!(s.contains("--out plan.json") && s.contains("--ledger-out ledger.json"));
    for name in names_after(&text, "outputs.plan.outputFiles['") {
        assert!(files.contains(&name), "the flow reads output file {name}");
    }
}

/// The names that follow each `prefix` in `text` (up to the first character not in a name).
fn names_after(text: &str, prefix: &str) -> BTreeSet<String> {
    text.split(prefix)
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                .collect::<String>()
        })
        .collect()
}

#[test]
fn validate_inputs_refuses_what_the_reference_flow_refuses() {
    let f = flow();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("state.json"), "{}").unwrap();
    let ok = run_task(&f, "validate_inputs", &inputs(&f, &[]), dir.path());
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let refused: &[(&str, Value)] = &[
        ("namespace", json!("kube-system")),
        ("namespace", json!("Bad_Name")),
        ("cluster_id", json!("-primary")),
        ("retention_seconds", json!(0)),
        ("max_pods", json!(51)),
        ("max_inventory", json!(4)),
        ("max_archive_bytes", json!(1023)),
    ];
    for (input, value) in refused {
        let out = run_task(
            &f,
            "validate_inputs",
            &inputs(&f, &[(input, value.clone())]),
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(2), "{input}={value}");
    }
    std::fs::write(dir.path().join("state.json"), "[]").unwrap();
    let out = run_task(&f, "validate_inputs", &inputs(&f, &[]), dir.path());
    assert_eq!(
        out.status.code(),
        Some(3),
        "a malformed ledger stops the run"
    );
}

/// A token for a ServiceAccount granted exactly what the collector needs in `ns`.
async fn collector_token(ns: &gc_testbed::TestNamespace) -> Result<String> {
    ns.service_account_client("gc-kestra").await?;
    ns.grant("gc-kestra", gc_k8s::rbac::required_rules())
        .await?;
    Ok(ns.service_account_token("gc-kestra").await?)
}

fn workdir(files: &[(&str, &Path)]) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for (name, from) in files {
        std::fs::copy(from, dir.path().join(name))?;
    }
    Ok(dir)
}

#[tokio::test]
async fn the_flows_commands_plan_and_collect_on_a_real_api_server() -> Result {
    let f = flow();
    let (bed, ns) = namespace("kestra-flow").await?;
    let pods = ns.api::<Pod>();
    let old = Timestamp::from_second(Timestamp::now().as_second() - 7200)?;
    FailedPod::new("due")
        .label("diagnostics.example.com/collect", "true")
        .finished_at(old)
        .create(&pods)
        .await?;
    FailedPod::new("recent")
        .label("diagnostics.example.com/collect", "true")
        .finished_at(Timestamp::now())
        .create(&pods)
        .await?;
    // No container status, so no `finishedAt`: held from its first observation, which a day's
    // earlier run recorded in the KV store.
    FailedPod::new("unfinished")
        .label("diagnostics.example.com/collect", "true")
        .create(&pods)
        .await?;
    let unfinished = Patch::Merge(json!({"status": {"containerStatuses": null}}));
    let unfinished = pods
        .patch_status("unfinished", &PatchParams::default(), &unfinished)
        .await?;
    let seen = json!({
        unfinished.metadata.uid.unwrap(): {"first": old.as_second() as f64, "name": "unfinished"}
    });
    let token = collector_token(&ns).await?;
    // The durable places the secrets name: an object store and PostgreSQL.
    let s3 = gc_testbed::S3Server::start().await?;
    s3.create_bucket("diagnostics")?;
    let db = gc_testbed::TestDatabase::fresh("kestra_receipts")
        .await?
        .expect("scripts/test.sh sets GC_TEST_DATABASE_URL: the flow keeps receipts in PostgreSQL");
    let mut given = inputs(
        &f,
        &[
            ("namespace", json!(ns.name())),
            ("api_url", json!(bed.server_url())),
            ("token", json!(token)),
            ("ca_cert_data", json!("")),
            ("trust_certs", json!(true)),
            ("retention_seconds", json!(3600)),
            ("dry_run", json!(false)),
            ("auto_remediate", json!(true)),
            ("archive_url", json!("s3://diagnostics/pods")),
            ("archive_endpoint", json!(s3.endpoint())),
        ],
    );
    for (name, value) in [
        ("AWS_ACCESS_KEY_ID", s3.access_key()),
        ("AWS_SECRET_ACCESS_KEY", s3.secret_key()),
        ("GC_STORE_URL", db.url()),
    ] {
        given.insert(format!("secret:{name}"), json!(value));
    }

    // plan: the KV store holds the ledger of an earlier run.
    let kv = tempfile::tempdir()?;
    let state = kv.path().join("state.json");
    std::fs::write(&state, seen.to_string())?;
    let plan_dir = workdir(&[("state.json", &state)])?;
    let out = run_task(&f, "plan", &given, plan_dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout)?;
    assert!(!stdout.contains(&token) && !String::from_utf8_lossy(&out.stderr).contains(&token));
    let line: Value = serde_json::from_str(
        stdout
            .trim()
            .strip_prefix("::")
            .and_then(|l| l.strip_suffix("::"))
            .expect("one Kestra output line"),
    )?;
    let vars = &line["outputs"];
    assert_eq!(vars["target_count"], 2, "{vars:#}");
    assert_eq!(vars["held"], 1);
    let names: BTreeSet<&str> = vars["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BTreeSet::from(["due", "unfinished"]));
    let ledger: PathBuf = plan_dir.path().join("ledger.json");
    // save_observation stores the reference flow's `state`, led by the entry that names its
    // cluster and namespace (the KV key alone cannot tell `prod-x`+`batch` from `prod`+`x-batch`).
    let mut stored: Value = serde_json::from_str(&std::fs::read_to_string(&ledger)?)?;
    let scope = stored.as_object_mut().unwrap().remove("gc:scope");
    assert_eq!(
        scope.unwrap()["namespace"],
        *given["namespace"].as_str().unwrap()
    );
    assert_eq!(
        stored,
        serde_json::from_str::<Value>(vars["state"].as_str().unwrap())?,
        "save_observation stores the same ledger as the reference flow's `state`"
    );

    // collect, in its own working directory with the plan file and the ledger save_observation
    // stored handed over. The Pod without `finishedAt` is held all the same: the ledger says it
    // was first seen two hours ago, but it was created seconds ago, and no Pod is observed
    // before it exists.
    let collect_dir = workdir(&[
        ("plan.json", &plan_dir.path().join("plan.json")),
        ("state.json", &ledger),
    ])?;
    let out = run_task(&f, "collect", &given, collect_dir.path());
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"collected\""));
    let report: Value = serde_json::from_slice(&out.stdout)?;
    let held = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "unfinished")
        .unwrap();
    assert_eq!(held["outcome"], "skipped", "{report:#}");
    assert!(
        held["reason"]
            .as_str()
            .unwrap()
            .starts_with("retention has not passed"),
        "{report:#}"
    );
    assert!(pods.get_opt("due").await?.is_none());
    assert!(pods.get_opt("unfinished").await?.is_some());
    assert!(pods.get_opt("recent").await?.is_some());
    // Nothing was kept in the working directory: it holds the files it was handed, and only them.
    let left: Vec<_> = std::fs::read_dir(collect_dir.path())?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()?;
    let left: BTreeSet<_> = left.into_iter().collect();
    assert_eq!(
        left,
        BTreeSet::from(["plan.json".into(), "state.json".into()]),
        "the working directory holds no archive or receipt"
    );
    // The archive is in the object store and its receipt in PostgreSQL, and they agree.
    let out = Command::new(GC_CLI)
        .args([
            "archives",
            "verify",
            "--archive-url",
            "s3://diagnostics/pods",
        ])
        .args(["--archive-endpoint", &s3.endpoint(), "--store", db.url()])
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("1 archive(s) match their receipts, 0 problem(s)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Kestra uploads a task's output files only after its process ends, when the Pods are already
/// deleted: no archive or receipt may live in the working directory, or among the output files.
#[test]
fn archives_and_receipts_never_live_in_the_working_directory() {
    let f = flow();
    let collect = task(&f, "collect");
    assert!(
        collect.get("outputFiles").is_none(),
        "{}",
        collect["outputFiles"]
    );
    let s = script(collect);
    assert!(
        !s.contains("--archive-dir") && !s.contains("--store"),
        "{s}"
    );
    assert!(s.contains("--archive-url \"$ARCHIVE_URL\""), "{s}");
    // The receipts' store and the object store's credentials are Kestra secrets, in the env.
    let env = &collect["env"];
    assert_eq!(env["GC_STORE"], "{{ secret('GC_STORE_URL') }}");
    assert_eq!(
        env["AWS_ACCESS_KEY_ID"],
        "{{ secret('AWS_ACCESS_KEY_ID') }}"
    );
    assert_eq!(
        env["AWS_SECRET_ACCESS_KEY"],
        "{{ secret('AWS_SECRET_ACCESS_KEY') }}"
    );
    assert_eq!(
        env_var_of(collect, "archive_url").as_deref(),
        Some("ARCHIVE_URL")
    );
    // No task names a relative SQLite file or archive folder anywhere.
    let text = std::fs::read_to_string(FLOW).unwrap();
    for bad in ["sqlite:", "archives/", ".sqlite3", "GC_ARCHIVE_DIR"] {
        assert!(!text.contains(bad), "the flow mentions {bad}");
    }
}
