//! `values.schema.json` checks label selectors and cron schedules as the collectors and the API
//! server parse them: a corpus of each, judged by the schema (`helm template`), by the real API
//! server (a list with that label selector; a CronJob with that schedule, in a server-side dry
//! run) and, for the collectors' own selectors, by gc-core's parser, must get the same verdicts
//! (the few forms where the schema differs are listed, with the reason). And a selector the API
//! server refuses is reported by the CLI as a bad selector, not as missing permissions.

use std::process::Output;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

use super::{API_VERSIONS, CHART, INSTALL_VALUES, helm};
use crate::common::{Result, command, namespace};

/// `helm template` with `values` (given as a values file: no `--set` escaping).
fn template_with(values: &Value) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.json");
    std::fs::write(&file, values.to_string()).unwrap();
    helm(
        &[
            &["template", "gc", CHART, "--namespace", "streamspace"][..],
            &API_VERSIONS,
            &INSTALL_VALUES,
            &["-f", file.to_str().unwrap()],
        ]
        .concat(),
    )
}

/// Whether the schema accepts `values`; a refusal must name `field` (a JSON pointer).
fn schema_accepts(values: &Value, field: &str) -> bool {
    let out = template_with(values);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        assert!(
            stderr.contains(&format!("at '{field}'")),
            "{values}: refused without naming {field}: {stderr}"
        );
    }
    out.status.success()
}

/// Label selectors, and the reason the schema's verdict differs from the API server's (`ns`,
/// for `clusterWide.namespaceSelector`, which only the API server parses) or from the
/// intersection of the API server's and gc-core's (`gc`, for the collectors' selectors).
struct Differs {
    ns: Option<&'static str>,
    gc: Option<&'static str>,
}

const SAME: Differs = Differs { ns: None, gc: None };

fn selectors() -> Vec<(String, Differs)> {
    let long_prefix = format!("{}.example.com/a=b", "a".repeat(60) + &".b".repeat(100));
    let mut corpus: Vec<(String, Differs)> = [
        "app=streamspace-session",
        "app==x",
        "app!=x",
        "app=",
        "app in (a,b)",
        "app in (a, b),tier notin (x)",
        "app notin (a)",
        "app in(a)",
        "app",
        "!app",
        "! app",
        " app = x , tier ",
        "app=x,\ttier",
        "example.com/app=x",
        "a.b-c.example.com/App_1.x=V-1_x.y",
        "app in (streamspace-session),!canary",
        "team in (payments)",
        "app in (",
        "app in (a",
        "app in a",
        "app in",
        "a=b=c",
        "a=b c",
        "a b",
        "a,",
        ",a",
        "a,,b",
        "a;b",
        "a===b",
        "!a=b",
        "a=-b",
        "a=b-",
        "-a=b",
        "A.example.com/a=b",
        "example.com/=b",
        "a/b/c=d",
        "a!b",
        "a=(b)",
        "a in (b c)",
        "a in (-b)",
        "a>-1",
        "a>x",
        "a<",
    ]
    .into_iter()
    .map(|s| (s.to_owned(), SAME))
    .collect();
    let name64 = "n".repeat(64);
    corpus.push((format!("{}=x", "n".repeat(63)), SAME));
    corpus.push((format!("{name64}=x"), SAME));
    corpus.push((format!("a={name64}"), SAME));
    // gc-core parses no `>`/`<`: refused for the collectors' selectors, as gc-core does.
    for s in ["a>1", "a < 10", "a>01"] {
        corpus.push((s.to_owned(), SAME));
    }
    // The API server takes an empty member in a value list; gc-core does not, nor the schema.
    for s in ["a in ()", "a in (,b)", "a in (b,)", "a notin (b,,c)"] {
        let why = "stricter: an empty member of a value list";
        corpus.push((
            s.to_owned(),
            Differs {
                ns: Some(why),
                gc: None,
            },
        ));
    }
    // A pattern cannot count a key prefix's 253 characters (each of its labels is checked).
    let why = "looser: a key prefix over 253 characters";
    corpus.push((
        long_prefix,
        Differs {
            ns: Some(why),
            gc: Some(why),
        },
    ));
    corpus
}

/// The API server's verdict on a label selector: a list of Pods with it (400 when refused).
async fn server_accepts_selector(pods: &Api<Pod>, selector: &str) -> Result<bool> {
    match pods
        .list(&ListParams::default().labels(selector).limit(1))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if gc_testbed::status_code(&e) == Some(400) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[tokio::test]
async fn schema_judges_selectors_as_the_api_server_and_the_collectors() -> Result {
    let (_, ns) = namespace("schema-selectors").await?;
    let pods = ns.api::<Pod>();
    let mut failures = Vec::new();
    for (selector, differs) in selectors() {
        let server = server_accepts_selector(&pods, &selector).await?;
        let core = gc_core::selector::Selector::parse(&selector).is_ok();
        let gc = json!({"gc": {"selector": selector}});
        let exclude = json!({"failedPods": {"excludeSelector": selector}});
        let wide = json!({"clusterWide": {"enabled": true, "namespaceSelector": selector}});
        let for_gc = schema_accepts(&gc, "/gc/selector");
        let for_exclude = schema_accepts(&exclude, "/failedPods/excludeSelector");
        let for_ns = schema_accepts(&wide, "/clusterWide/namespaceSelector");
        if for_gc != for_exclude {
            failures.push(format!(
                "{selector:?}: selector {for_gc}, excludeSelector {for_exclude}"
            ));
        }
        let both = server && core;
        match differs.gc {
            None if for_gc != both => failures.push(format!(
                "{selector:?}: schema {for_gc}, API server {server}, gc-core {core}"
            )),
            Some(why) if for_gc == both => {
                failures.push(format!("{selector:?}: no longer differs ({why})"));
            }
            _ => {}
        }
        match differs.ns {
            None if for_ns != server => failures.push(format!(
                "{selector:?}: namespaceSelector schema {for_ns}, API server {server}"
            )),
            Some(why) if for_ns == server => {
                failures.push(format!(
                    "{selector:?}: namespaceSelector no longer differs ({why})"
                ));
            }
            _ => {}
        }
    }
    // Empty: no exclusion and every namespace; never the collectors' own selector.
    assert!(!schema_accepts(
        &json!({"gc": {"selector": ""}}),
        "/gc/selector"
    ));
    assert!(schema_accepts(
        &json!({"gc": {"excludeSelector": ""}, "clusterWide": {"enabled": true, "namespaceSelector": ""}}),
        ""
    ));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// Schedules, and where the schema's verdict differs from the API server's.
fn schedules() -> Vec<(&'static str, Option<&'static str>)> {
    let mut corpus: Vec<(&str, Option<&str>)> = [
        "0 */6 * * *",
        "0 8 * * *",
        "*/5 * * * *",
        "0 3 * * 1-5",
        "0 0 1 jan,JUL MON-fri",
        "0 0 1 1-12/2 sun",
        "59 23 31 12 6",
        "00 05 01 01 0",
        "5/10 * * * *",
        "? ? ? ? ?",
        "0,15,30,45 * * * *",
        "0 0 * * * ",
        " 0 0 * * *",
        "0  0 * * *",
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "@every 1h30m",
        "@every 90s",
        "99 99 * * *",
        "60 * * * *",
        "0 24 * * *",
        "0 0 0 * *",
        "0 0 32 * *",
        "0 0 * 0 *",
        "0 0 * 13 *",
        "0 0 * * 7",
        "often",
        "* * * *",
        "* * * * * *",
        "*/0 * * * *",
        "1-2-3 * * * *",
        "1/2/3 * * * *",
        "0 0 * * mon-",
        "0 0 * * monday",
        "@daily ",
        "@fortnightly",
        "@every",
        "TZ=UTC 0 0 * * *",
        "CRON_TZ=UTC 0 0 * * *",
        "",
    ]
    .into_iter()
    .map(|s| (s, None))
    .collect();
    // The schema cannot compare numbers: a reversed range passes it.
    corpus.push(("5-1 * * * *", Some("looser: a range's order")));
    // robfig/cron's quirks the schema does not copy.
    corpus.push(("*-5 * * * *", Some("stricter: a range from *")));
    corpus.push(("+5 * * * *", Some("stricter: a signed number")));
    corpus.push(("1,,2 * * * *", Some("stricter: an empty member of a list")));
    corpus
}

/// The API server's verdict on a schedule: a CronJob with it, in a server-side dry run; a
/// refusal must be about `spec.schedule`.
async fn server_accepts_schedule(cron_jobs: &Api<CronJob>, schedule: &str) -> Result<bool> {
    let cron_job: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "schedule"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}
    }))?;
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match cron_jobs.create(&params, &cron_job).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 422 => {
            assert!(s.message.contains("spec.schedule"), "{schedule:?}: {s:?}");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

#[tokio::test]
async fn schema_judges_schedules_as_the_api_server() -> Result {
    let (_, ns) = namespace("schema-schedules").await?;
    let cron_jobs = ns.api::<CronJob>();
    let mut failures = Vec::new();
    for (schedule, differs) in schedules() {
        let server = server_accepts_schedule(&cron_jobs, schedule).await?;
        let sessions = schema_accepts(&json!({"gc": {"schedule": schedule}}), "/gc/schedule");
        let pods = schema_accepts(
            &json!({"failedPods": {"enabled": true, "schedule": schedule}}),
            "/failedPods/schedule",
        );
        if sessions != pods {
            failures.push(format!("{schedule:?}: gc {sessions}, failedPods {pods}"));
        }
        match differs {
            None if sessions != server => failures.push(format!(
                "{schedule:?}: schema {sessions}, API server {server}"
            )),
            Some(why) if sessions == server => {
                failures.push(format!("{schedule:?}: no longer differs ({why})"));
            }
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// The values the issue names: refused naming the field, or accepted and rendered.
#[test]
fn schema_refuses_malformed_selectors_and_schedules_by_name() {
    for (values, field) in [
        (json!({"gc": {"selector": "app in ("}}), "/gc/selector"),
        (json!({"gc": {"selector": "a=b=c"}}), "/gc/selector"),
        (
            json!({"gc": {"excludeSelector": "a=b=c"}}),
            "/gc/excludeSelector",
        ),
        (
            json!({"failedPods": {"excludeSelector": "app in ("}}),
            "/failedPods/excludeSelector",
        ),
        (
            json!({"clusterWide": {"enabled": true, "namespaceSelector": "a=b=c"}}),
            "/clusterWide/namespaceSelector",
        ),
        (json!({"gc": {"schedule": "99 99 * * *"}}), "/gc/schedule"),
        (
            json!({"failedPods": {"schedule": "99 99 * * *"}}),
            "/failedPods/schedule",
        ),
        (json!({"gc": {"protectLabel": "a=b=c"}}), "/gc/protectLabel"),
        (json!({"gc": {"protectLabel": "-a=b"}}), "/gc/protectLabel"),
        (json!({"gc": {"idLabel": "a b"}}), "/gc/idLabel"),
    ] {
        assert!(!schema_accepts(&values, field), "{values}");
    }
    for (values, arg) in [
        (
            json!({"gc": {"schedule": "@daily"}}),
            "schedule: \"@daily\"",
        ),
        (
            json!({"gc": {"schedule": "*/5 * * * *"}}),
            "schedule: \"*/5 * * * *\"",
        ),
        (
            json!({"gc": {"schedule": "0 3 * * 1-5"}}),
            "schedule: \"0 3 * * 1-5\"",
        ),
        (
            json!({"gc": {"selector": "app in (a,b),!canary"}}),
            "- \"--selector=app in (a,b),!canary\"",
        ),
        (
            json!({"clusterWide": {"enabled": true, "namespaceSelector": "team in (a,b)"}}),
            "- \"--namespace-selector=team in (a,b)\"",
        ),
    ] {
        let out = template_with(&values);
        assert!(
            out.status.success(),
            "{values}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rendered = String::from_utf8_lossy(&out.stdout);
        assert!(rendered.contains(arg), "{values}: no {arg}:\n{rendered}");
    }
}

/// A namespace selector the API server refuses (400) is reported by the CLI as a bad
/// selector, and does not send the user to look at permissions: the admin may list Namespaces.
#[tokio::test]
async fn a_selector_the_api_server_refuses_is_reported_as_a_bad_selector() -> Result {
    let (bed, _) = namespace("schema-cli").await?;
    let dir = tempfile::tempdir()?;
    let out = command()
        .args(["plan", "pods", "-A", "--namespace-selector", "a=b=c"])
        .args(["--kubeconfig", bed.kubeconfig_path().to_str().unwrap()])
        .args(["--store", &crate::common::sqlite(dir.path(), "gc.sqlite3")])
        .env_remove("GC_SEAL_KEY")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--namespace-selector") && stderr.contains("a=b=c"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("cluster-wide mode") && !stderr.contains("namespaced install"),
        "blames permissions: {stderr}"
    );
    Ok(())
}

/// Each `pattern` of the schema (each sits in an `if`, its `else` the description: what helm
/// prints when the value fails it), as the JSON pointer of the value it checks (an array's item
/// as `/0`), its description, what a refusal shows, and its examples.
fn patterns() -> Vec<(String, String, String, Vec<Value>)> {
    fn walk(
        root: &Value,
        node: &Value,
        pointer: &str,
        found: &mut Vec<(String, String, String, Vec<Value>)>,
    ) {
        if let Some(target) = node["$ref"].as_str() {
            let name = target.strip_prefix("#/definitions/").expect("a definition");
            walk(root, &root["definitions"][name], pointer, found);
        }
        assert!(
            node.get("pattern").is_none(),
            "{pointer}: a pattern outside an `if` prints itself when refused"
        );
        if node["if"]["pattern"].is_string() {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            let examples = node["examples"].as_array().cloned().unwrap_or_default();
            found.push((
                pointer.to_owned(),
                text(&node["description"]),
                text(&node["else"]["const"]),
                examples,
            ));
        }
        if let Some(properties) = node["properties"].as_object() {
            for (key, property) in properties {
                walk(root, property, &format!("{pointer}/{key}"), found);
            }
        }
        if node["items"].is_object() {
            walk(root, &node["items"], &format!("{pointer}/0"), found);
        }
        for keyword in ["allOf", "anyOf", "oneOf"] {
            for sub in node[keyword].as_array().into_iter().flatten() {
                walk(root, sub, pointer, found);
            }
        }
    }
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{CHART}/values.schema.json")).unwrap(),
    )
    .unwrap();
    let mut found = Vec::new();
    walk(&schema, &schema, "", &mut found);
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.dedup_by(|a, b| a.0 == b.0);
    found
}

/// Values with `value` at `pointer` (`/0`: an array's first item).
fn values_at(pointer: &str, value: Value) -> Value {
    pointer
        .rsplit('/')
        .filter(|k| !k.is_empty())
        .fold(value, |inner, key| {
            if key == "0" {
                json!([inner])
            } else {
                json!({ key: inner })
            }
        })
}

/// Every pattern of the schema has a description with an example; each example passes the
/// schema, and a value that fails the pattern is refused with that description (an example of
/// what would do) and the value's name, not with the regular expression.
#[test]
fn every_pattern_is_refused_with_an_example_it_accepts() {
    let found = patterns();
    assert!(found.len() >= 30, "{found:?}");
    for (pointer, description, shown, examples) in found {
        assert_eq!(
            description, shown,
            "{pointer}: the refusal shows the description"
        );
        let first = examples
            .iter()
            .filter_map(Value::as_str)
            .find(|e| !e.is_empty())
            .unwrap_or_else(|| panic!("{pointer}: no example"));
        assert!(
            description.contains(first),
            "{pointer}: {first:?} not in {description:?}"
        );
        for example in &examples {
            let out = template_with(&values_at(&pointer, example.clone()));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !stderr.contains("meet the specifications"),
                "{pointer}: the example {example} is refused: {stderr}"
            );
        }
        let out = template_with(&values_at(&pointer, json!("not valid ☃")));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{pointer}");
        assert!(
            stderr.contains(&format!("at '{pointer}': value must be '{description}'")),
            "{pointer}: {stderr}"
        );
        assert!(!stderr.contains("pattern"), "{pointer}: {stderr}");
    }
}

/// The case: a schedule such as `every 6h` (and a duration that is not one) is refused
/// naming the value and showing a valid one, in a line, not a 2 KB regular expression.
#[test]
fn a_bad_schedule_or_duration_is_refused_with_an_example() {
    for (values, field, example) in [
        (
            json!({"gc": {"schedule": "every 6h"}}),
            "/gc/schedule",
            "\"0 */6 * * *\"",
        ),
        (
            json!({"failedPods": {"enabled": true, "schedule": "6h"}}),
            "/failedPods/schedule",
            "@every 6h",
        ),
        (
            json!({"gc": {"gracePeriod": "90m"}}),
            "/gc/gracePeriod",
            "such as 24h or 2d",
        ),
        (
            json!({"gc": {"retainVolumeDays": "a week"}}),
            "/gc/retainVolumeDays",
            "such as 7d or 2w",
        ),
        (
            json!({"failedPods": {"retentionSeconds": "1 day"}}),
            "/failedPods/retentionSeconds",
            "such as 1d or 12h",
        ),
        (
            json!({"archives": {"prune": {"olderThan": "90"}}}),
            "/archives/prune/olderThan",
            "such as 90d",
        ),
    ] {
        let out = template_with(&values);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{values}");
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("at '{field}'")))
            .unwrap_or_else(|| panic!("{values}: {field} not named: {stderr}"));
        assert!(line.contains(example), "{values}: no {example:?} in {line}");
        assert!(
            stderr.len() < 600 && !stderr.contains("pattern"),
            "{values}: {stderr}"
        );
    }
}
