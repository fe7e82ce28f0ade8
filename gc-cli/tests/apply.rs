//! `gc-cli apply` end to end on a real API server: a reviewed plan of twenty Failed Pods is
//! archived and removed exactly, every archive matches its receipt under `sha256sum`, no pin is
//! left, decoys are untouched; dry run changes nothing; altered or misdirected plans and a held
//! run lock are refused.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use gc_core::ports::{Lock, Store as _};
use gc_testbed::{FailedPod, TestBed, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use serde_json::Value;

const COLLECT: &str = "diagnostics.example.com/collect";
const PIN: &str = "diagnostics.example.com/collector";

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

fn gc_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gc-cli"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

async fn populate(ns: &TestNamespace) -> Result {
    let pods = ns.api::<Pod>();
    let old = Timestamp::from_second(Timestamp::now().as_second() - 7200)?;
    for i in 0..20 {
        let mut p = FailedPod::new(&format!("target-{i:02}"))
            .label(COLLECT, "true")
            .finished_at(old);
        if i % 3 == 1 {
            p = p.terminated_container("sidecar", 137);
        }
        if i % 5 == 2 {
            p = p.annotation("note", "a diagnostic worth keeping: é");
        }
        p.create(&pods).await?;
    }
    FailedPod::new("decoy-unlabelled")
        .finished_at(old)
        .create(&pods)
        .await?;
    FailedPod::new("decoy-recent")
        .label(COLLECT, "true")
        .create(&pods)
        .await?;
    FailedPod::new("decoy-running")
        .label(COLLECT, "true")
        .running_container("main")
        .create(&pods)
        .await?;
    FailedPod::new("decoy-foreign")
        .label(COLLECT, "true")
        .finalizer("example.com/keep")
        .finished_at(old)
        .create(&pods)
        .await?;
    let owner = OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: "j".into(),
        uid: "1234".into(),
        ..Default::default()
    };
    FailedPod::new("decoy-owned")
        .label(COLLECT, "true")
        .owner_reference(owner)
        .finished_at(old)
        .create(&pods)
        .await?;
    Ok(())
}

/// name -> (uid, resourceVersion, finalizers)
async fn snapshot(ns: &TestNamespace) -> Result<BTreeMap<String, (String, String, Vec<String>)>> {
    let list = ns.api::<Pod>().list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|p| {
            let m = p.metadata;
            (
                m.name.unwrap(),
                (
                    m.uid.unwrap(),
                    m.resource_version.unwrap(),
                    m.finalizers.unwrap_or_default(),
                ),
            )
        })
        .collect())
}

#[tokio::test]
async fn apply_collects_exactly_the_reviewed_targets() -> Result {
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("apply").await?;
    populate(&ns).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let db = dir.path().join("gc.sqlite3");
    let store = format!("sqlite:{}", db.display());
    let archives = dir.path().join("archives");
    let plan = dir.path().join("plan.json");
    let conn = [
        "--kubeconfig",
        kubeconfig.as_str(),
        "--store",
        store.as_str(),
    ];
    ok(&gc_cli(
        &[
            &[
                "plan",
                "pods",
                "-n",
                ns.name(),
                "--retention-seconds",
                "3600",
                "--max-pods",
                "50",
                "--out",
                plan.to_str().unwrap(),
            ][..],
            &conn,
        ]
        .concat(),
    ));
    let apply = |extra: &[&str]| {
        gc_cli(
            &[
                &[
                    "apply",
                    plan.to_str().unwrap(),
                    "--cluster-id",
                    "primary",
                    "-n",
                    ns.name(),
                    "--retention-seconds",
                    "3600",
                    "--max-pods",
                    "50",
                    "--archive-dir",
                    archives.to_str().unwrap(),
                    "--format",
                    "json",
                ][..],
                &conn,
                extra,
            ]
            .concat(),
        )
    };
    let before = snapshot(&ns).await?;

    // Dry run: every check and server-side dry-run write, and nothing changes.
    let report: Value = serde_json::from_str(&ok(&apply(&["--dry-run"])))?;
    let would = report["results"].as_array().unwrap();
    assert_eq!(would.len(), 20);
    assert!(
        would.iter().all(|r| r["outcome"] == "wouldCollect"),
        "{report:#}"
    );
    assert_eq!(snapshot(&ns).await?, before);
    assert!(!archives.exists());

    // Tampered, misdirected and held-lock applies are refused and change nothing.
    let text = std::fs::read_to_string(&plan)?;
    let tampered = dir.path().join("tampered.json");
    std::fs::write(&tampered, text.replacen("target-00", "decoy-owned", 1))?;
    let out = gc_cli(
        &[
            &[
                "apply",
                tampered.to_str().unwrap(),
                "--cluster-id",
                "primary",
                "-n",
                ns.name(),
                "--retention-seconds",
                "3600",
                "--max-pods",
                "50",
            ][..],
            &conn,
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("altered"));
    let out = gc_cli(
        &[
            &[
                "apply",
                plan.to_str().unwrap(),
                "--cluster-id",
                "primary",
                "-n",
                "default",
            ][..],
            &conn,
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("namespace"));
    let other = gc_k8s::KubeCluster::new(ns.client().clone());
    assert!(
        other
            .try_acquire(ns.name(), "gc-pods", "another-run", 60)
            .await?
    );
    let out = apply(&["--lock-wait-seconds", "1"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another run holds lease"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    other.release(ns.name(), "gc-pods", "another-run").await?;
    assert_eq!(snapshot(&ns).await?, before);

    // The real apply.
    let report: Value = serde_json::from_str(&ok(&apply(&[])))?;
    let results = report["results"].as_array().unwrap();
    assert!(
        results.iter().all(|r| r["outcome"] == "collected"),
        "{report:#}"
    );
    let after = snapshot(&ns).await?;
    let names: Vec<&str> = after.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "decoy-foreign",
            "decoy-owned",
            "decoy-recent",
            "decoy-running",
            "decoy-unlabelled"
        ]
    );
    for (name, state) in &after {
        assert_eq!(Some(state), before.get(name), "{name} was touched");
        assert!(!state.2.iter().any(|f| f == PIN));
    }
    // Every archive verifies with sha256sum against its receipt.
    let store = gc_store::open(&format!("sqlite:{}", db.display())).await?;
    for (name, (uid, _, _)) in before.iter().filter(|(n, _)| n.starts_with("target-")) {
        let receipt = store.get_receipt("primary", uid).await?.expect("a receipt");
        let path = receipt.uri.strip_prefix("file://").unwrap();
        let sum = Command::new("sha256sum").arg(path).output()?;
        let sum = String::from_utf8(sum.stdout)?;
        assert_eq!(
            sum.split_whitespace().next(),
            Some(receipt.sha256.as_str()),
            "{name}"
        );
        let doc: Value = serde_json::from_slice(&std::fs::read(path)?)?;
        assert_eq!(doc["metadata"]["uid"], uid.as_str());
        assert_eq!(doc["status"]["phase"], "Failed");
    }
    // A second apply of the same plan finds nothing left to do.
    let report: Value = serde_json::from_str(&ok(&apply(&[])))?;
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "skipped"),
        "{report:#}"
    );
    Ok(())
}

#[tokio::test]
async fn run_is_a_dry_run_unless_asked_twice() -> Result {
    let bed = TestBed::shared().await?;
    let ns = bed.namespace("run").await?;
    let pods = ns.api::<Pod>();
    let old = Timestamp::from_second(Timestamp::now().as_second() - 7200)?;
    for i in 0..3 {
        FailedPod::new(&format!("target-{i}"))
            .label(COLLECT, "true")
            .finished_at(old)
            .create(&pods)
            .await?;
    }
    let dir = tempfile::tempdir()?;
    let kubeconfig = bed.kubeconfig_path().to_str().unwrap().to_owned();
    let store = format!("sqlite:{}", dir.path().join("gc.sqlite3").display());
    let archives = dir.path().join("archives");
    let base = [
        "run",
        "pods",
        "-n",
        ns.name(),
        "--retention-seconds",
        "3600",
        "--kubeconfig",
        &kubeconfig,
        "--store",
        &store,
        "--archive-dir",
        archives.to_str().unwrap(),
        "--format",
        "json",
    ];
    let before = snapshot(&ns).await?;
    let report: Value = serde_json::from_str(&ok(&gc_cli(&base)))?;
    assert_eq!(report["dryRun"], true);
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "wouldCollect"),
        "{report:#}"
    );
    assert_eq!(snapshot(&ns).await?, before);
    let out = gc_cli(&[&base[..], &["--dry-run", "false"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--auto-remediate"));
    assert_eq!(snapshot(&ns).await?, before);
    let report: Value = serde_json::from_str(&ok(&gc_cli(
        &[&base[..], &["--dry-run", "false", "--auto-remediate"]].concat(),
    )))?;
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "collected"),
        "{report:#}"
    );
    assert!(snapshot(&ns).await?.is_empty());
    Ok(())
}
