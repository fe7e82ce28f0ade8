//! `gc-cli plan pods` against a real API server: the same plan as from a dump of the same Pods,
//! the ledger kept in the store between runs, nothing written to the cluster, and bad connection
//! input refused clearly and quickly.

use std::process::Output;
use std::time::{Duration, Instant};

use gc_testbed::{FailedPod, TestBed, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use serde_json::Value;

mod common;

use common::{COLLECT, Result, gc_cli, namespace, ok, sqlite};

/// The `outputs` of a `--format kestra` run.
fn outputs(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout.clone()).unwrap();
    let v: Value =
        serde_json::from_str(line.trim().trim_start_matches("::").trim_end_matches("::")).unwrap();
    v["outputs"].clone()
}

fn rfc3339(seconds: i64) -> String {
    Timestamp::from_second(seconds).unwrap().to_string()
}

async fn populate(ns: &TestNamespace) -> Result {
    let pods = ns.api::<Pod>();
    let now = Timestamp::now().as_second();
    FailedPod::new("due")
        .label(COLLECT, "true")
        .finished_at(Timestamp::from_second(now - 2 * 86_400)?)
        .create(&pods)
        .await?;
    FailedPod::new("recent")
        .label(COLLECT, "true")
        .create(&pods)
        .await?;
    FailedPod::new("unlabelled")
        .finished_at(Timestamp::from_second(now - 2 * 86_400)?)
        .create(&pods)
        .await?;
    FailedPod::new("running")
        .label(COLLECT, "true")
        .running_container("main")
        .create(&pods)
        .await?;
    Ok(())
}

/// The `resourceVersion` of every Pod in `ns`, in the order listed.
async fn resource_versions(ns: &TestNamespace) -> Result<Vec<String>> {
    let list = ns.api::<Pod>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .map(|p| p.metadata.resource_version.clone().unwrap())
        .collect())
}

#[tokio::test]
async fn live_plan_equals_the_offline_plan_and_keeps_its_ledger() -> Result {
    let (bed, ns) = namespace("cli-live").await?;
    let dir = tempfile::tempdir()?;
    populate(&ns).await?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let store = sqlite(dir.path(), "gc.sqlite3");
    let t1 = rfc3339(Timestamp::now().as_second() + 60);
    let t2 = rfc3339(Timestamp::now().as_second() + 60 + 3600);
    let plan_file = dir.path().join("plan.json");
    let base = [
        "plan",
        "pods",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        ns.name(),
        "--store",
        &store,
        "--format",
        "kestra",
    ];
    let before = resource_versions(&ns).await?;

    let first = outputs(&gc_cli(
        &[
            &base[..],
            &["--now", &t1, "--out", plan_file.to_str().unwrap()],
        ]
        .concat(),
    ));
    assert_eq!(first["target_count"], 1, "{first}");
    assert_eq!(first["targets"][0]["name"], "due");
    assert_eq!(first["held"], 1);
    let planned: Value = serde_json::from_str(first["state"].as_str().unwrap())?;
    assert_eq!(planned.as_object().unwrap().len(), 2);

    // The same Pods dumped unfiltered, planned offline with an empty ledger: the same outputs.
    let dump = dir.path().join("pods.json");
    let text = ns
        .client()
        .request_text(
            http::Request::get(format!("/api/v1/namespaces/{}/pods", ns.name())).body(Vec::new())?,
        )
        .await?;
    std::fs::write(&dump, text)?;
    let offline = outputs(&gc_cli(&[
        "plan",
        "pods",
        "--inventory",
        dump.to_str().unwrap(),
        "-n",
        ns.name(),
        "--now",
        &t1,
        "--format",
        "kestra",
    ]));
    assert_eq!(offline, first);

    // A plan for another instant recorded nothing in the store: it would have dated the first
    // observations then.
    let export = [
        "ledger",
        "export",
        "--cluster-id",
        "primary",
        "-n",
        ns.name(),
        "--store",
        &store,
    ];
    let stored: Value = serde_json::from_str(&ok(&gc_cli(&export)))?;
    assert_eq!(stored, serde_json::json!({}));
    // A plan on the clock records them; an hour later the store still holds them.
    let recorded = outputs(&gc_cli(&base));
    let ledger1: Value = serde_json::from_str(recorded["state"].as_str().unwrap())?;
    assert_eq!(ledger1.as_object().unwrap().len(), 2);
    // The store's ledger is the flow's, led by the entry naming its cluster and namespace.
    let mut scoped =
        serde_json::json!({"gc:scope": {"cluster": "primary", "namespace": ns.name()}});
    scoped
        .as_object_mut()
        .unwrap()
        .extend(ledger1.as_object().unwrap().clone());
    assert_eq!(
        serde_json::from_str::<Value>(&ok(&gc_cli(&export)))?,
        scoped
    );
    let second = outputs(&gc_cli(&[&base[..], &["--now", &t2]].concat()));
    let ledger2: Value = serde_json::from_str(second["state"].as_str().unwrap())?;
    for (uid, entry) in ledger2.as_object().unwrap() {
        assert_eq!(entry["first"], ledger1[uid]["first"], "{uid}");
    }
    // Planning wrote nothing to the cluster.
    let after = resource_versions(&ns).await?;
    assert_eq!(before, after);
    let sealed = std::fs::read_to_string(&plan_file)?;
    assert!(
        sealed.contains("\"digest\": \"sha256:") && sealed.contains("\"resourceVersion\""),
        "{sealed}"
    );
    Ok(())
}

#[tokio::test]
async fn bad_connection_input_fails_clearly_and_quickly() -> Result {
    let bed = TestBed::shared().await?;
    let dir = tempfile::tempdir()?;
    let token = dir.path().join("token");
    std::fs::write(&token, "not-a-valid-token")?;
    let store = sqlite(dir.path(), "gc.sqlite3");
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["--api-url", "https://127.0.0.1:1", "--trust-certs"],
            "cannot connect",
        ),
        (
            vec![
                "--api-url",
                bed.server_url(),
                "--trust-certs",
                "--token-file",
                token.to_str().unwrap(),
            ],
            "rejected the credentials",
        ),
        (
            vec![
                "--api-url",
                bed.server_url(),
                "--ca-cert-data",
                "bm90IGEgY2VydA==",
            ],
            "ca_cert_data",
        ),
    ];
    for (flags, expect) in cases {
        let started = Instant::now();
        let out = gc_cli(
            &[
                &["plan", "pods", "-n", "default", "--store", &store][..],
                &flags,
            ]
            .concat(),
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{flags:?} took {:?}",
            started.elapsed()
        );
        assert!(!out.status.success(), "{flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{flags:?}: {err}");
        assert!(
            !err.contains("not-a-valid-token"),
            "the token leaked: {err}"
        );
    }
    Ok(())
}
